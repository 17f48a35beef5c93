// limits.ts: the containment limits of a capture, their defaults and their validation.
import { SealError } from './errors.js';

export interface Limits {
  /** Manifest entries, implicit parent directories included. */
  maxEntries: number;
  /** File bytes plus symlink target bytes. */
  maxTotalBytes: number;
  /** UTF-8 bytes of one manifest path or symlink target. */
  maxPathBytes: number;
  /** Bytes of one file. */
  maxFileBytes: number;
  /** Path components below the source. */
  maxDepth: number;
}

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxEntries: 100_000,
  maxTotalBytes: 2 * 1024 * 1024 * 1024,
  maxPathBytes: 4096,
  maxFileBytes: 2 * 1024 * 1024 * 1024,
  maxDepth: 256,
});

export function resolveLimits(given: Partial<Limits> | undefined): Limits {
  const limits: Limits = { ...DEFAULT_LIMITS };
  for (const [key, value] of Object.entries(given ?? {})) {
    if (!(key in DEFAULT_LIMITS)) throw new SealError('SEAL_BAD_PATH', `unknown limit: ${key}`);
    if (value === undefined) continue;
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
      throw new SealError('SEAL_BAD_PATH', `limit ${key} must be a non-negative integer`);
    }
    limits[key as keyof Limits] = value;
  }
  return limits;
}
