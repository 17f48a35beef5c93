// times.ts: recorded modification times (keepTimes): the manifest's `mtime_ns` form, and setting one through an fd.
import { AT_SYMLINK_NOFOLLOW, UTIME_OMIT } from '../sys/constants.js';
import type { Stat, Sys } from '../sys/native.js';
import { SealError } from './errors.js';
import type { ManifestEntry } from './manifest.js';
import { escapePath } from './paths.js';

const NS_PER_SECOND = 1_000_000_000n;
/** The int64 nanoseconds a stat reports, less INT64_MIN (which no stat gives, and the entry table keeps for "none"). */
const MAX_NS = 2n ** 63n - 1n;
/** An optional minus, then a decimal integer without leading zeros, of at most 19 digits. */
const DECIMAL = /^-?(?:0|[1-9][0-9]{0,18})$/;

/** A file's or directory's mtime as a manifest records it: nanoseconds since the epoch, as a decimal string. */
export function mtimeText(ns: bigint): string {
  return ns.toString();
}

/**
 * The nanoseconds of a recorded mtime, or undefined unless the text is exactly mtimeText
 * of one: a decimal integer (no sign but a minus, no leading zero, not `-0`) from
 * -(2^63 - 1) to 2^63 - 1.
 */
export function parseMtime(text: string): bigint | undefined {
  if (!DECIMAL.test(text) || text === '-0') return undefined;
  const ns = BigInt(text);
  return ns > MAX_NS || ns < -MAX_NS ? undefined : ns;
}

/**
 * The entry with the mtime of st recorded (a copy; entries are read-only). A time a stat
 * holds at its bound (before 1677 or after 2262: see Stat.mtimeNs) is not the file's own,
 * and none is recorded in its place: SEAL_LIMIT.
 */
export function withMtime(entry: ManifestEntry, st: Stat): ManifestEntry {
  if (st.mtimeNs >= MAX_NS || st.mtimeNs <= -MAX_NS) {
    throw new SealError('SEAL_LIMIT', `mtime outside what keepTimes records (1677-09-21 to 2262-04-11, nanoseconds in 64 bits): ${escapePath(entry.path)}: set it (touch) or capture without keepTimes`, { path: entry.path });
  }
  return { ...entry, mtime_ns: mtimeText(st.mtimeNs) };
}

/** The recorded mtime of an entry, or undefined when it has none (times not kept, or not kept for it). */
export function recordedMtime(entry: ManifestEntry): bigint | undefined {
  return entry.mtime_ns === undefined ? undefined : BigInt(entry.mtime_ns);
}

/** [seconds, nanoseconds] of a time in nanoseconds, as a timespec holds it (nanoseconds 0 to 999999999, also before 1970). */
function timespec(ns: bigint): [number, number] {
  let sec = ns / NS_PER_SECOND;
  let nsec = ns % NS_PER_SECOND;
  if (nsec < 0n) {
    nsec += NS_PER_SECOND;
    sec -= 1n;
  }
  return [Number(sec), Number(nsec)];
}

/** Sets the recorded mtime of entry on the file or directory open at fd (its access time is left as it is); nothing when it has none. */
export function keepMtime(sys: Sys, fd: number, entry: ManifestEntry): void {
  const ns = recordedMtime(entry);
  if (ns === undefined) return;
  const [sec, nsec] = timespec(ns);
  sys.futimens(fd, 0, UTIME_OMIT, sec, nsec);
}

/** keepMtime for the entry named `name` in the directory open at dirFd, never through a symlink (a link's own time would be set). */
export function keepMtimeAt(sys: Sys, dirFd: number, name: string, entry: ManifestEntry): void {
  const ns = recordedMtime(entry);
  if (ns === undefined) return;
  const [sec, nsec] = timespec(ns);
  sys.utimensat(dirFd, name, 0, UTIME_OMIT, sec, nsec, AT_SYMLINK_NOFOLLOW);
}

/** Whether st's mtime differs from the one entry records (false when it records none). */
export function mtimeDiffers(st: Stat, entry: ManifestEntry): boolean {
  return entry.mtime_ns !== undefined && !sameMtime(st.mtimeNs, BigInt(entry.mtime_ns));
}

/**
 * Whether a stat's mtime is the recorded one: equal, or the recorded one cut to its whole
 * second where the file shows no finer (a filesystem that keeps seconds only: ext4 with
 * 128-byte inodes, as mkfs makes it on a small device, or ext3). There a kept time is set
 * as the filesystem can hold it, and compared so (a fresh clone read as changed, and every
 * reset set its directories' times again).
 */
export function sameMtime(statNs: bigint, recordedNs: bigint): boolean {
  if (statNs === recordedNs) return true;
  if (statNs % NS_PER_SECOND !== 0n) return false;
  let seconds = recordedNs / NS_PER_SECOND;
  if (recordedNs % NS_PER_SECOND < 0n) seconds -= 1n;
  return statNs === seconds * NS_PER_SECOND;
}
