// worker.ts: runs one sync operation of the library off the main thread for its async twin.
import { parentPort, workerData } from 'node:worker_threads';

import { buildSnapshot } from './build.js';
import type { Plan } from './declaration.js';
import type { SnapshotData } from './document.js';
import { SealError } from './errors.js';
import { freezeSync, thawSync } from './freeze.js';
import { materializeSnapshot, type MaterializeOptions } from './materialize.js';
import { readStableSync } from './stable-read.js';
import { sys } from './sys/native.js';
import { verifySnapshotAt } from './verify.js';

export interface Job {
  op: 'capture' | 'materialize' | 'verify' | 'freeze' | 'thaw' | 'readStable';
  args: unknown[];
  abort: Int32Array;
}

export interface SerializedError {
  message: string;
  name: string;
  props: Record<string, unknown>;
  cause?: SerializedError;
}

export function serializeError(err: unknown): SerializedError {
  if (!(err instanceof Error)) return { message: String(err), name: 'Error', props: {} };
  const props: Record<string, unknown> = {};
  for (const key of ['code', 'path', 'errno', 'syscall', 'dest', 'retryable'] as const) {
    const v = (err as unknown as Record<string, unknown>)[key];
    if (v !== undefined) props[key] = v;
  }
  const out: SerializedError = { message: err.message, name: err.name, props };
  if (err.cause !== undefined) out.cause = serializeError(err.cause);
  return out;
}

function run(job: Job): unknown {
  const isAborted = (): boolean => Atomics.load(job.abort, 0) !== 0;
  const onProgress = (p: unknown): void => parentPort?.postMessage({ progress: p });
  switch (job.op) {
    case 'capture':
      return buildSnapshot(sys, job.args[0] as string, job.args[1] as Plan, { isAborted, onProgress });
    case 'materialize':
      return materializeSnapshot(sys, job.args[0] as string, job.args[1] as SnapshotData, job.args[2] as string, {
        ...(job.args[3] as MaterializeOptions),
        onProgress,
      });
    case 'verify':
      return verifySnapshotAt(sys, job.args[0] as string, job.args[1] as SnapshotData, onProgress);
    case 'freeze':
      return freezeSync(job.args[0] as string);
    case 'thaw':
      return thawSync(job.args[0] as string);
    case 'readStable':
      return readStableSync(job.args[0] as string, job.args[1] as { maxBytes: number });
    default:
      throw new SealError('SEAL_BAD_PATH', `unknown operation ${String(job.op)}`);
  }
}

if (parentPort !== null && workerData !== undefined) {
  try {
    parentPort.postMessage({ result: run(workerData as Job) });
  } catch (err) {
    parentPort.postMessage({ error: serializeError(err) });
  }
}
