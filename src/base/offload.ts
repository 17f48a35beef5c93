// offload.ts: async twins: a bounded pool of long-lived, reused worker threads runs the sync cores so the event loop stays free.
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';

import { SealError } from './errors.js';
import { workerThreads } from './lazy-builtins.js';
import { reviveError, type JobReply, type JobRequest } from './jobs.js';
import type { Progress } from './progress.js';
import { transferList } from './transfer.js';

export interface OffloadHooks {
  signal?: AbortSignal | undefined;
  onProgress?: ((p: Progress) => void) | undefined;
  /**
   * Run on the first worker thread, whatever else it is doing: for jobs that share state
   * kept in one thread (a pull's build, opened by one job and filled by the next).
   */
  pinned?: boolean | undefined;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  onProgress: ((p: Progress) => void) | undefined;
}

/** One worker thread and the jobs it was sent that have not settled. */
interface Lane {
  worker: Worker;
  pending: Map<number, Pending>;
}

/** A job waiting for a lane: every lane is busy and the pool is at its bound. */
interface Queued {
  request: JobRequest;
  pending: Pending;
}

/** The entry point of the worker thread, beside this folder in the built package. */
const WORKER_URL = new URL('../worker.js', import.meta.url);

/** Worker threads at most by default: one per core, at least 2. */
export const DEFAULT_CONCURRENCY = Math.max(2, availableParallelism());

/** lanes[0] takes the pinned jobs; the others are started as concurrent calls need them, up to `bound`. */
const lanes: Lane[] = [];
const queue: Queued[] = [];
let bound = DEFAULT_CONCURRENCY;
let nextId = 1;

/** Raises the pool's bound to at least n worker threads (a store asking for more concurrency). */
export function allowWorkers(n: number): void {
  bound = Math.max(bound, n);
}

function settle(lane: Lane, msg: JobReply): void {
  const p = lane.pending.get(msg.id);
  if (p === undefined) return;
  if (msg.kind === 'progress') {
    p.onProgress?.(msg.progress);
    return;
  }
  lane.pending.delete(msg.id);
  if (msg.kind === 'result') p.resolve(msg.result);
  else p.reject(reviveError(msg.error));
  dispatch();
  if (lane.pending.size === 0) lane.worker.unref();
}

function start(): Lane {
  // No inherited execArgv: `node -e`, --input-type, loaders or inspector flags of the
  // host process must not apply to (or break) the worker.
  const worker = new (workerThreads().Worker)(WORKER_URL, { execArgv: [], stdout: false, stderr: false, resourceLimits: { maxYoungGenerationSizeMb: 8 } });
  const lane: Lane = { worker, pending: new Map() };
  worker.on('message', (msg: JobReply) => settle(lane, msg));
  const lost = (why: string): void => {
    const at = lanes.indexOf(lane);
    if (at >= 0) lanes.splice(at, 1);
    const all = [...lane.pending.values()];
    lane.pending.clear();
    for (const p of all) p.reject(new SealError('SEAL_UNAVAILABLE', `treeseal worker thread stopped: ${why}`));
    dispatch();
  };
  // What a dying thread reports need not be an Error (an allocation that failed can end it with none).
  worker.on('error', (err: unknown) => lost(err instanceof Error && err.message !== '' ? err.message : `it failed (${String(err)})`));
  worker.on('exit', (code) => lost(`exit code ${code}`));
  worker.unref();
  lanes.push(lane);
  return lane;
}

/**
 * Sends a job to a lane. An argument that cannot be sent (a function or a symbol where an
 * option's value should be: DataCloneError) rejects that call with Node's TypeError and
 * leaves the lane as it was: no job pending on it, nothing keeping the process alive.
 */
function send(lane: Lane, request: JobRequest, pending: Pending): void {
  try {
    lane.worker.postMessage(request, transferList(request.args));
  } catch (err) {
    const refused = Object.assign(new TypeError(`The arguments of ${request.op} cannot be sent to a worker thread: ${(err as Error).message}`), { code: 'ERR_INVALID_ARG_VALUE', cause: err });
    pending.reject(refused);
    return;
  }
  lane.pending.set(request.id, pending);
  lane.worker.ref();
}

/** An idle lane, or a new one while the pool is below its bound; undefined: every lane is busy. */
function freeLane(): Lane | undefined {
  return lanes.find((l) => l.pending.size === 0) ?? (lanes.length < bound ? start() : undefined);
}

/** How many offloaded jobs of this process are under way or queued, whichever store or call made them. */
export function jobsInFlight(): number {
  return queue.length + lanes.reduce((n, l) => n + l.pending.size, 0);
}

/** Sends queued jobs to lanes that are free. */
function dispatch(): void {
  while (queue.length > 0) {
    const lane = freeLane();
    if (lane === undefined) return;
    const { request, pending } = queue.shift()!;
    send(lane, request, pending);
  }
}

/**
 * Runs operation `op`'s job (see op.ts) on a worker thread of the pool: an idle one, a
 * new one while the pool is below its bound, else the first to become free; settles
 * with what the job returned or threw.
 */
export function offload(op: string, args: unknown[], hooks: OffloadHooks = {}): Promise<unknown> {
  if (hooks.signal?.aborted) return Promise.reject(new SealError('SEAL_ABORTED', `${op} was aborted`));
  const id = nextId++;
  // The error a job throws gets the caller's stack, not the message handler's.
  const callSite = new Error();
  const abort = new Int32Array(new SharedArrayBuffer(4));
  const onAbort = (): void => {
    Atomics.store(abort, 0, 1);
  };
  hooks.signal?.addEventListener('abort', onAbort, { once: true });
  // A progress callback that throws aborts the job, and the call rejects with what it threw
  // (as the sync call throws it): never an uncaught exception in the message handler.
  let thrown: { err: unknown } | undefined;
  const callback = hooks.onProgress;
  const onProgress =
    callback === undefined
      ? undefined
      : (p: Progress): void => {
          if (thrown !== undefined) return;
          try {
            callback(p);
          } catch (err) {
            thrown = { err };
            onAbort();
          }
        };
  return new Promise<unknown>((resolve, reject) => {
    const done = (): void => hooks.signal?.removeEventListener('abort', onAbort);
    const pending: Pending = {
      resolve: (v) => {
        done();
        if (thrown !== undefined) reject(thrown.err);
        else resolve(v);
      },
      reject: (e) => {
        done();
        if (thrown !== undefined) return reject(thrown.err);
        e.stack = `${e.name}: ${e.message}\n${callSite.stack?.split('\n').slice(1).join('\n') ?? ''}`;
        reject(e);
      },
      onProgress,
    };
    const request: JobRequest = { id, op, args, abort, progress: hooks.onProgress !== undefined };
    if (hooks.pinned === true) return send(lanes[0] ?? start(), request, pending);
    const lane = queue.length === 0 ? freeLane() : undefined;
    if (lane === undefined) queue.push({ request, pending });
    else send(lane, request, pending);
  });
}

/** A bound on one caller's offloaded calls at once (a store's `concurrency`); the rest wait their turn in order. */
export class Gate {
  readonly limit: number;
  #running = 0;
  readonly #waiting: (() => void)[] = [];
  /** Calls admitted and not yet settled (running, waiting their turn, or on the calling thread). */
  #pending = 0;
  #idle: (() => void)[] = [];

  constructor(limit: number) {
    this.limit = limit;
    allowWorkers(limit);
  }

  /** How many calls are under way. */
  get pending(): number {
    return this.#pending;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    return this.track(async () => {
      if (this.#running >= this.limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
      this.#running++;
      try {
        return await fn();
      } finally {
        this.#running--;
        this.#waiting.shift()?.();
      }
    });
  }

  /** Counts fn's call as under way until it settles, without taking a turn (a call on the calling thread). */
  async track<T>(fn: () => Promise<T>): Promise<T> {
    this.#pending++;
    try {
      return await fn();
    } finally {
      if (--this.#pending === 0) for (const resolve of this.#idle.splice(0)) resolve();
    }
  }

  /** Resolves once no call is under way. */
  idle(): Promise<void> {
    return this.#pending === 0 ? Promise.resolve() : new Promise((resolve) => this.#idle.push(resolve));
  }
}

/** How long a stopping worker may take to end on its own before it is terminated. */
const STOP_WAIT_MS = 5000;

async function stop(lane: Lane): Promise<void> {
  const w = lane.worker;
  lanes.splice(lanes.indexOf(lane), 1);
  w.removeAllListeners('exit');
  w.removeAllListeners('error');
  w.on('error', () => {});
  const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
  w.postMessage({ stop: true });
  const timer = setTimeout(() => void w.terminate(), STOP_WAIT_MS);
  await exited;
  clearTimeout(timer);
}

/**
 * Stops every worker thread that has no job pending (the next async call starts a new
 * one): each stops its helper threads and ends on its own; terminated if it does not.
 */
export async function stopIdleWorker(): Promise<void> {
  if (queue.length > 0) return;
  await Promise.all(lanes.filter((l) => l.pending.size === 0).map(stop));
}

/** The first worker thread's id, or undefined when none runs (internal, for tests: which calls started one). */
export function workerThreadId(): number | undefined {
  return lanes[0]?.worker.threadId;
}

/** How many worker threads run now (internal, for tests). */
export function workerCount(): number {
  return lanes.length;
}

/**
 * Kills every worker thread now, whatever it is doing, as a crash would (internal, for
 * tests): their pending calls reject with SEAL_UNAVAILABLE; the next call starts a new one.
 */
export async function killWorker(): Promise<void> {
  await Promise.all(lanes.map((l) => l.worker.terminate()));
}

/** The one way to inject a syscall layer: the `sys` option of every public call. */
export interface ToolOptions {
  /**
   * The syscall layer (default: the addon's). Any other layer is a set of functions that
   * cannot cross to the worker thread, so the async twins then run their sync core on
   * the calling thread, after the current microtask, and capture starts no helper threads.
   */
  sys?: import('../sys/native.js').Sys | undefined;
}

/** Runs a sync core on the calling thread as an async call (for an injected syscall layer). */
export async function inline<T>(fn: () => T): Promise<T> {
  await Promise.resolve();
  return fn();
}
