// limits.ts: the containment limits of a capture, their defaults and their validation.
import { checkInteger, checkOptions, invalidArgValue } from './arg-errors.js';

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

/** What `options.limits` takes: any of the limits, each left out or undefined for its default. */
export type LimitOptions = { [K in keyof Limits]?: Limits[K] | undefined };

export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxEntries: 100_000,
  maxTotalBytes: 2 * 1024 * 1024 * 1024,
  maxPathBytes: 4096,
  maxFileBytes: 2 * 1024 * 1024 * 1024,
  maxDepth: 256,
});

/** The limits of `options.limits` over the defaults: an unknown key or a value that is not a non-negative integer is refused. */
export function resolveLimits(given: LimitOptions | undefined): Limits {
  const limits: Limits = { ...DEFAULT_LIMITS };
  for (const [key, value] of Object.entries(checkOptions('options.limits', given))) {
    if (!(key in DEFAULT_LIMITS)) throw invalidArgValue(`options.limits.${key}`, value, `is not a known limit (${Object.keys(DEFAULT_LIMITS).join(', ')})`);
    if (value === undefined) continue;
    limits[key as keyof Limits] = checkInteger(`options.limits.${key}`, value);
  }
  return limits;
}
