// jobs.ts: the thread job protocol: the messages to and from the worker, and how errors cross threads.
import { SealError, SEAL_CODES, type SealCode, type SealErrorDetail } from './errors.js';
import type { Progress } from './progress.js';

/** A request to the worker: run operation `op`'s job (see op.ts) with what was sent. */
export interface JobRequest {
  id: number;
  op: string;
  args: unknown[];
  abort: Int32Array;
  /** The caller wants progress reports. */
  progress: boolean;
}

/** What the sync core of a job gets besides its arguments. */
export interface JobContext {
  isAborted(): boolean;
  /** Absent when the caller asked for no progress. */
  onProgress?: ((p: Progress) => void) | undefined;
}

export interface SerializedError {
  message: string;
  name: string;
  props: Record<string, unknown>;
  cause?: SerializedError;
}

/** A message from the worker about one job. */
export type JobReply =
  | { id: number; kind: 'progress'; progress: Progress }
  | { id: number; kind: 'result'; result: unknown }
  | { id: number; kind: 'error'; error: SerializedError };

/** In the order the addon's system errors hold them, so an error from the worker has the same own keys as the sync call's. */
const ERROR_PROPS = ['errno', 'code', 'syscall', 'path', 'dest', 'retryable', 'details'] as const;

export function serializeError(err: unknown): SerializedError {
  if (!(err instanceof Error)) return { message: String(err), name: 'Error', props: {} };
  const props: Record<string, unknown> = {};
  for (const key of ERROR_PROPS) {
    const v = (err as unknown as Record<string, unknown>)[key];
    if (v !== undefined) props[key] = v;
  }
  const out: SerializedError = { message: err.message, name: err.name, props };
  if (err.cause !== undefined) out.cause = serializeError(err.cause);
  return out;
}

/** Rebuilds the error the sync call threw: the same SealError, system error, TypeError or RangeError. */
export function reviveError(e: SerializedError): Error {
  const cause = e.cause === undefined ? undefined : reviveError(e.cause);
  const code = e.props.code;
  if (e.name === 'SealError' && typeof code === 'string' && (SEAL_CODES as readonly string[]).includes(code)) {
    return new SealError(code as SealCode, e.message, {
      path: e.props.path as string | undefined,
      cause,
      retryable: e.props.retryable === true,
      details: e.props.details as readonly SealErrorDetail[] | undefined,
    });
  }
  const Ctor = e.name === 'TypeError' ? TypeError : e.name === 'RangeError' ? RangeError : Error;
  const err = new Ctor(e.message, cause === undefined ? undefined : { cause });
  // Only a name of its own the error had (a system error's is Error's, inherited).
  if (Ctor === Error && e.name !== 'Error') err.name = e.name;
  Object.assign(err, e.props);
  return err;
}
