// in-flight.ts: the window after a file's last change in which a write() that set its timestamps may still be copying bytes.
import type { FileIdentity } from '../sys/identity.js';
import { sleepSync } from './sleep.js';

/**
 * How long one write() call may still be running after it set the file's timestamps,
 * plus the coarse clock's granularity: a file changed longer ago than this has no
 * write in flight from before the first fstat.
 */
export const IN_FLIGHT_WINDOW_NS = 250_000_000n;

function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

/**
 * When the file last changed, as far as a write still running could have set it: the later
 * of its mtime and ctime, where a time after `now` is not taken. A write sets both to the
 * kernel's clock as it begins, so it leaves no time after now; one there was set another
 * way: an mtime by hand (utimensat: a tarball from a machine whose clock ran ahead, a file
 * `touch -d 2100`), a ctime by another clock (a network filesystem's server, a clock stepped
 * back). Such an mtime says nothing of a write (the ctime that the same utimensat set does);
 * such a ctime counts as now, so the window is waited from now, never until that time.
 */
function lastChangeNs(id: FileIdentity, now: bigint): bigint {
  const mtime = id.mtimeNs > now ? id.ctimeNs : id.mtimeNs;
  const latest = id.ctimeNs > mtime ? id.ctimeNs : mtime;
  return latest > now ? now : latest;
}

/**
 * True when the file changed within the window: a same-size write that began before the
 * first fstat may still be copying bytes, unseen by any identity check, so bytes read now
 * must be proven again once waitPastWrites returns.
 */
export function changedRecently(id: FileIdentity): boolean {
  const now = nowNs();
  return now - lastChangeNs(id, now) < IN_FLIGHT_WINDOW_NS;
}

/**
 * Sleeps until the window after the file's last change is over (once per burst of fresh
 * files): at most the window, since a last change after now counts as now.
 */
export function waitPastWrites(id: FileIdentity): void {
  const end = lastChangeNs(id, nowNs()) + IN_FLIGHT_WINDOW_NS;
  for (;;) {
    const left = end - nowNs();
    if (left <= 0n) return;
    sleepSync(Number(left / 1_000_000n) + 1);
  }
}
