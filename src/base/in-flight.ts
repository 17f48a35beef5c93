// in-flight.ts: the window after a file's last change in which a write() that set its timestamps may still be copying bytes.
import type { FileIdentity } from '../sys/identity.js';

/**
 * How long one write() call may still be running after it set the file's timestamps,
 * plus the coarse clock's granularity: a file changed longer ago than this has no
 * write in flight from before the first fstat.
 */
export const IN_FLIGHT_WINDOW_NS = 250_000_000n;

const sleeper = new Int32Array(new SharedArrayBuffer(4));

function nowNs(): bigint {
  return BigInt(Date.now()) * 1_000_000n;
}

/** The later of the file's mtime and ctime. */
function lastChangeNs(id: FileIdentity): bigint {
  return id.ctimeNs > id.mtimeNs ? id.ctimeNs : id.mtimeNs;
}

/**
 * True when the file changed within the window: a same-size write that began before the
 * first fstat may still be copying bytes, unseen by any identity check, so bytes read now
 * must be proven again once waitPastWrites returns.
 */
export function changedRecently(id: FileIdentity): boolean {
  return nowNs() - lastChangeNs(id) < IN_FLIGHT_WINDOW_NS;
}

/** Sleeps until the window after the file's last change is over (once per burst of fresh files). */
export function waitPastWrites(id: FileIdentity): void {
  const end = lastChangeNs(id) + IN_FLIGHT_WINDOW_NS;
  for (;;) {
    const left = end - nowNs();
    if (left <= 0n) return;
    Atomics.wait(sleeper, 0, 0, Number(left / 1_000_000n) + 1);
  }
}
