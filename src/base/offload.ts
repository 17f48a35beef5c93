// offload.ts: async twins: one long-lived, reused worker thread runs the sync cores so the event loop stays free.
import { Worker } from 'node:worker_threads';

import { SealError } from './errors.js';
import { reviveError, type JobReply, type JobRequest } from './jobs.js';
import type { Progress } from './progress.js';

export interface OffloadHooks {
  signal?: AbortSignal | undefined;
  onProgress?: ((p: Progress) => void) | undefined;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  onProgress: ((p: Progress) => void) | undefined;
}

/** The entry point of the worker thread, beside this folder in the built package. */
const WORKER_URL = new URL('../worker.js', import.meta.url);

let worker: Worker | undefined;
let nextId = 1;
const pending = new Map<number, Pending>();

function failAll(err: Error): void {
  const all = [...pending.values()];
  pending.clear();
  for (const p of all) p.reject(err);
}

function start(): Worker {
  // No inherited execArgv: `node -e`, --input-type, loaders or inspector flags of the
  // host process must not apply to (or break) the worker.
  const w = new Worker(WORKER_URL, { execArgv: [], stdout: false, stderr: false });
  w.on('message', (msg: JobReply) => {
    const p = pending.get(msg.id);
    if (p === undefined) return;
    if (msg.kind === 'progress') {
      p.onProgress?.(msg.progress);
      return;
    }
    pending.delete(msg.id);
    if (pending.size === 0) w.unref();
    if (msg.kind === 'result') p.resolve(msg.result);
    else p.reject(reviveError(msg.error));
  });
  const lost = (why: string): void => {
    if (worker === w) worker = undefined;
    failAll(new SealError('SEAL_UNAVAILABLE', `treeseal worker thread stopped: ${why}`));
  };
  w.on('error', (err) => lost(err.message));
  w.on('exit', (code) => lost(`exit code ${code}`));
  w.unref();
  return w;
}

/** Runs operation `op`'s job (see op.ts) on the shared worker thread; settles with what it returned or threw. */
export function offload(op: string, args: unknown[], hooks: OffloadHooks = {}): Promise<unknown> {
  if (hooks.signal?.aborted) return Promise.reject(new SealError('SEAL_ABORTED', `${op} was aborted`));
  worker ??= start();
  const w = worker;
  const id = nextId++;
  // The error a job throws gets the caller's stack, not the message handler's.
  const callSite = new Error();
  const abort = new Int32Array(new SharedArrayBuffer(4));
  const onAbort = (): void => {
    Atomics.store(abort, 0, 1);
  };
  hooks.signal?.addEventListener('abort', onAbort, { once: true });
  return new Promise<unknown>((resolve, reject) => {
    const done = (): void => hooks.signal?.removeEventListener('abort', onAbort);
    pending.set(id, {
      resolve: (v) => {
        done();
        resolve(v);
      },
      reject: (e) => {
        done();
        e.stack = `${e.name}: ${e.message}\n${callSite.stack?.split('\n').slice(1).join('\n') ?? ''}`;
        reject(e);
      },
      onProgress: hooks.onProgress,
    });
    w.ref();
    w.postMessage({ id, op, args, abort, progress: hooks.onProgress !== undefined } satisfies JobRequest);
  });
}

/** How long a stopping worker may take to end on its own before it is terminated. */
const STOP_WAIT_MS = 5000;

/**
 * Stops the worker thread when no job is pending (the next async call starts a new
 * one): it stops its helper threads and ends on its own; terminated if it does not.
 */
export async function stopIdleWorker(): Promise<void> {
  const w = worker;
  if (w === undefined || pending.size > 0) return;
  worker = undefined;
  w.removeAllListeners('exit');
  w.removeAllListeners('error');
  w.on('error', () => {});
  const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
  w.postMessage({ stop: true });
  const timer = setTimeout(() => void w.terminate(), STOP_WAIT_MS);
  await exited;
  clearTimeout(timer);
}

/** The worker thread's id, or undefined when none runs (internal, for tests: which calls started it). */
export function workerThreadId(): number | undefined {
  return worker?.threadId;
}

/**
 * Kills the worker thread now, whatever it is doing, as a crash would (internal, for
 * tests): its pending calls reject with SEAL_UNAVAILABLE; the next call starts a new one.
 */
export async function killWorker(): Promise<void> {
  await worker?.terminate();
}

/** The one way to inject a syscall layer: the `sys` option of every public call. */
export interface ToolOptions {
  /**
   * The syscall layer (default: the addon's). Any other layer is a set of functions that
   * cannot cross to the worker thread, so the async twins then run their sync core on
   * the calling thread, after the current microtask, and capture starts no helper threads.
   */
  sys?: import('../sys/native.js').Sys;
}

/** Runs a sync core on the calling thread as an async call (for an injected syscall layer). */
export async function inline<T>(fn: () => T): Promise<T> {
  await Promise.resolve();
  return fn();
}
