// fd-budget.ts: how many more files this process may open now (its RLIMIT_NOFILE less the descriptors it holds), for calls that keep many open at once.
import { readFileSync, readdirSync } from 'node:fs';

/** `Max open files <soft> <hard> files` in /proc/self/limits. */
const OPEN_FILES = /^Max open files\s+(\d+|unlimited)\s/m;

/**
 * The descriptors this process may still open: the soft open-files limit less those open
 * now (every thread's). Infinity where /proc cannot say (not mounted, or hidden by a
 * sandbox): the caller then keeps its own bound.
 */
export function spareFds(): number {
  try {
    const limit = OPEN_FILES.exec(readFileSync('/proc/self/limits', 'latin1'))?.[1];
    if (limit === undefined || limit === 'unlimited') return Infinity;
    // The listing's own descriptor is counted too: one fewer to spare, which errs on the safe side.
    return Math.max(0, Number(limit) - readdirSync('/proc/self/fd').length);
  } catch {
    return Infinity;
  }
}
