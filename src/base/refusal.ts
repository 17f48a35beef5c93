// refusal.ts: system errors that mean the kernel refused (no space, I/O error, no fds, ...) become SEAL_IO.
import { SealError } from './errors.js';
import { escapePath } from './paths.js';
import { isSystemError } from '../sys/errno.js';

/**
 * errno codes that say nothing about the tree's content, only that the kernel would not
 * do the call: space, quota, I/O, descriptors, memory, a read-only or busy filesystem,
 * permission, an interrupted call.
 */
const REFUSALS = new Set([
  'ENOSPC', 'EDQUOT', 'EFBIG', 'EIO', 'EMFILE', 'ENFILE', 'ENOMEM', 'EROFS', 'EACCES', 'EPERM', 'EINTR', 'EBUSY', 'ENOLCK', 'ETXTBSY',
]);

/** True for a system error whose code is a kernel refusal (see REFUSALS). */
export function isRefusal(err: unknown): boolean {
  return isSystemError(err) && !(err instanceof SealError) && REFUSALS.has(err.code);
}

/** SEAL_IO: `what` (already escaped) failed because the kernel refused; the system error is the cause. */
export function ioError(what: string, err: unknown, path?: string): SealError {
  const message = `${what}: ${escapePath((err as Error).message)}`;
  return new SealError('SEAL_IO', message, path === undefined ? { cause: err } : { path, cause: err });
}

/** True for a system error saying a name or path is longer than this system holds (ENAMETOOLONG). */
function isTooLong(err: unknown): boolean {
  return isSystemError(err) && !(err instanceof SealError) && err.code === 'ENAMETOOLONG';
}

/** SEAL_LIMIT: `what` (already escaped) names a path this system cannot hold (ENAMETOOLONG, the cause). */
function tooLongError(what: string, err: unknown, path?: string): SealError {
  const message = `${what}: ${escapePath((err as Error).message)}`;
  return new SealError('SEAL_LIMIT', message, path === undefined ? { cause: err } : { path, cause: err });
}

/**
 * Throws ioError when err is a kernel refusal, and SEAL_LIMIT when it is ENAMETOOLONG (a
 * name past 255 bytes, a path past what one call takes); returns otherwise (the caller
 * maps the rest).
 */
export function throwIfRefused(err: unknown, what: string, path?: string): void {
  if (isRefusal(err)) throw ioError(what, err, path);
  if (isTooLong(err)) throw tooLongError(what, err, path);
}

/**
 * Runs a public call's core: a system error escaping it (one no layer below turned into
 * a more precise SealError) becomes SEAL_IO when it is a kernel refusal, SEAL_LIMIT when
 * it is ENAMETOOLONG, else SEAL_UNAVAILABLE (something the call needed is missing or unusable); its cause is the
 * system error either way.
 */
export function sealed<T>(label: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw typed(label, err);
  }
}

/** sealed for an async public call (push, pull): the same errors, from a promise. */
export async function sealedAsync<T>(label: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw typed(label, err);
  }
}

function typed(label: string, err: unknown): unknown {
  // A walk deeper than the thread's stack (a depth limit raised far past its default): typed, not V8's RangeError.
  if (err instanceof RangeError && err.message === 'Maximum call stack size exceeded') {
    // Only capture takes limits (a materialize of a pulled 3,000-level tree was told to lower one it has not).
    const way = label === 'capture' ? ': lower limits.maxDepth (default 256)' : '';
    return new SealError('SEAL_LIMIT', `${label}: the tree is deeper than this thread's stack can walk${way}`, { cause: err });
  }
  if (!isSystemError(err) || err instanceof SealError) return err;
  if (isRefusal(err)) return ioError(label, err);
  if (isTooLong(err)) return tooLongError(label, err);
  return new SealError('SEAL_UNAVAILABLE', `${label}: ${escapePath(err.message)}`, { cause: err });
}

/**
 * Why something a call did not do (a report's `statCacheNotSaved`, `ledgerNotSaved`,
 * `stageLeft.reason`) as one form, `CODE: message`: the system's own words where the
 * kernel refused (a SEAL_IO's cause: `ENOSPC: no space left on device, write`, which start
 * with the errno's code), else the SealError's code and message.
 */
export function reasonOf(err: unknown): string {
  const system = err instanceof SealError ? (err.code === 'SEAL_IO' && isSystemError(err.cause) ? err.cause : undefined) : isSystemError(err) ? err : undefined;
  if (system !== undefined) {
    const message = escapePath(system.message);
    return message.startsWith(`${system.code}:`) ? message : `${system.code}: ${message}`;
  }
  if (err instanceof SealError) return `${err.code}: ${err.message}`;
  return err instanceof Error ? `${err.name}: ${escapePath(err.message)}` : `Error: ${escapePath(String(err))}`;
}
