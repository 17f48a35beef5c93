// errors.ts: SealError, the one typed error treeseal throws, with its stable codes.
export type SealCode =
  | 'SEAL_CHANGED'
  | 'SEAL_SYMLINK'
  | 'SEAL_SPECIAL_FILE'
  | 'SEAL_LIMIT'
  | 'SEAL_BAD_PATH'
  | 'SEAL_OVERLAP'
  | 'SEAL_COLLISION'
  | 'SEAL_BINDING'
  | 'SEAL_ESCAPE'
  | 'SEAL_UNAVAILABLE'
  | 'SEAL_NO_REFLINK'
  | 'SEAL_CORRUPT'
  | 'SEAL_CLOSED'
  | 'SEAL_ABORTED'
  | 'SEAL_IO'
  | 'SEAL_AMBIGUOUS'
  | 'SEAL_REMOTE'
  | 'SEAL_UNTRUSTED'
  | 'SEAL_BUSY';

export const SEAL_CODES: readonly SealCode[] = Object.freeze<SealCode[]>([
  'SEAL_CHANGED',
  'SEAL_SYMLINK',
  'SEAL_SPECIAL_FILE',
  'SEAL_LIMIT',
  'SEAL_BAD_PATH',
  'SEAL_OVERLAP',
  'SEAL_COLLISION',
  'SEAL_BINDING',
  'SEAL_ESCAPE',
  'SEAL_UNAVAILABLE',
  'SEAL_NO_REFLINK',
  'SEAL_CORRUPT',
  'SEAL_CLOSED',
  'SEAL_ABORTED',
  'SEAL_IO',
  'SEAL_AMBIGUOUS',
  'SEAL_REMOTE',
  'SEAL_UNTRUSTED',
  'SEAL_BUSY',
]);

/** One of the obstacles a refused capture found: its path below the source, unescaped, its code and the way out. */
export interface SealErrorDetail {
  readonly path: string;
  readonly code: SealCode;
  /** What it is and how to get past it (CLI flags included), with its paths escaped. */
  readonly hint: string;
}

export interface SealErrorOptions {
  /** The relative path the error is about, unescaped. */
  path?: string | undefined;
  cause?: unknown;
  /** Whether trying again may succeed (default: only for SEAL_CHANGED). */
  retryable?: boolean | undefined;
  /** Every obstacle found (at most 100), the one the error is about first. */
  details?: readonly SealErrorDetail[] | undefined;
}

export class SealError extends Error {
  readonly code: SealCode;
  readonly path: string | undefined;
  /**
   * True when trying again may succeed because the tree was changing: always for
   * SEAL_CHANGED, and for a SEAL_UNAVAILABLE whose declared path went away while its
   * directory was changing during the capture.
   */
  readonly retryable: boolean;
  /**
   * A capture refused for symlinks, special files, names that are not UTF-8 or mount links that escape: every one
   * it found, up to 100, in the order found (the message names the first and the count).
   */
  readonly details: readonly SealErrorDetail[] | undefined;

  constructor(code: SealCode, message: string, options: SealErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SealError';
    this.code = code;
    this.path = options.path;
    this.retryable = options.retryable ?? code === 'SEAL_CHANGED';
    this.details = options.details === undefined ? undefined : Object.freeze(options.details.map((d) => Object.freeze({ path: d.path, code: d.code, hint: d.hint })));
  }
}

export function isSealError(err: unknown, code?: SealCode): err is SealError {
  return err instanceof SealError && (code === undefined || err.code === code);
}

/**
 * SEAL_ABORTED for a call whose signal was aborted: its `cause` is the signal's reason (what
 * `controller.abort(reason)` was given, or the TimeoutError of `AbortSignal.timeout`), so a
 * caller can tell its own timeout from another cancel, as Node's own calls do.
 */
export function abortedError(op: string, signal?: AbortSignal): SealError {
  return withAbortReason(new SealError('SEAL_ABORTED', `${op} was aborted`), signal);
}

/** err, given the signal's reason as its cause when it is a SEAL_ABORTED with none (one thrown where the signal itself is not at hand: a worker thread). */
export function withAbortReason<E>(err: E, signal: AbortSignal | undefined): E {
  if (!isSealError(err, 'SEAL_ABORTED') || signal?.aborted !== true || Object.hasOwn(err, 'cause')) return err;
  Object.defineProperty(err, 'cause', { value: signal.reason as unknown, writable: true, enumerable: false, configurable: true });
  return err;
}
