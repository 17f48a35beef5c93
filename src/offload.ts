// offload.ts: the async twins: one worker thread per call runs the sync core, so the event loop stays free.
import { Worker } from 'node:worker_threads';

import { SealError, SEAL_CODES, type SealCode } from './errors.js';
import type { Progress } from './progress.js';
import type { Job, SerializedError } from './worker.js';

export interface OffloadHooks {
  signal?: AbortSignal | undefined;
  onProgress?: ((p: Progress) => void) | undefined;
}

function revive(e: SerializedError): Error {
  const cause = e.cause === undefined ? undefined : revive(e.cause);
  const code = e.props.code;
  if (e.name === 'SealError' && typeof code === 'string' && (SEAL_CODES as readonly string[]).includes(code)) {
    return new SealError(code as SealCode, e.message, { path: e.props.path as string | undefined, cause });
  }
  const err = new Error(e.message, cause === undefined ? undefined : { cause });
  err.name = e.name;
  Object.assign(err, e.props);
  return err;
}

export function offload<T>(op: Job['op'], args: unknown[], hooks: OffloadHooks = {}): Promise<T> {
  if (hooks.signal?.aborted) return Promise.reject(new SealError('SEAL_ABORTED', `${op} was aborted`));
  const abort = new Int32Array(new SharedArrayBuffer(4));
  const job: Job = { op, args, abort };
  return new Promise<T>((resolve, reject) => {
    const worker = new Worker(new URL('./worker.js', import.meta.url), { workerData: job });
    let settled = false;
    const onAbort = (): void => {
      Atomics.store(abort, 0, 1);
    };
    hooks.signal?.addEventListener('abort', onAbort, { once: true });
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      hooks.signal?.removeEventListener('abort', onAbort);
      fn();
    };
    // Settle only once the worker has exited, so its threads and fds are gone by then.
    let outcome: (() => void) | undefined;
    worker.on('message', (msg: { result?: T; error?: SerializedError; progress?: unknown }) => {
      if (msg.progress !== undefined) {
        hooks.onProgress?.(msg.progress as Progress);
        return;
      }
      if (msg.error !== undefined) {
        const error = msg.error;
        outcome = () => reject(revive(error));
      } else outcome = () => resolve(msg.result as T);
    });
    worker.on('error', (err) => {
      outcome ??= () => reject(err);
    });
    worker.on('exit', (code) => finish(outcome ?? (() => reject(new Error(`treeseal worker exited with code ${code}`)))));
  });
}
