// copy-file.ts: one file's copy: the fill every copy uses (clone, kernel copy or buffered copy), and a build's hashed copy with its source proven unchanged around it.
import { createHash, hash } from 'node:crypto';

import { own } from '../base/fd.js';
import { SPARSE_MIN_BYTES, copyRanges, dataSegments, writeAll } from '../base/io.js';
import { changedRecently, waitPastWrites } from '../base/in-flight.js';
import { sameIdentity, type FileIdentity } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';

/** How a file's bytes reached the build. */
export const HOW = { COPIED: 0, CLONED: 1, RANGED: 2 } as const;
export type How = (typeof HOW)[keyof typeof HOW];

export interface Filled {
  sha256: string;
  how: How;
}

/** What fillFile may try before a buffered copy (each is probed once per pair of filesystems by the caller). */
export interface FillMethods {
  clone: boolean;
  range: boolean;
}

/** What fillBytes may do besides FICLONE and copy_file_range. */
export interface FillPlan extends FillMethods {
  /**
   * Copy through the buffer when neither method did, failing with changed(grew) when
   * the source reads shorter (or longer: grew) than the size. Without it nothing is
   * copied then: the caller copies (as it hashes).
   */
  copy?: { changed: (grew: boolean) => Error };
  /** Called with the data bytes a kernel or buffered copy will write (holes not counted) before it writes any; may throw (a budget). */
  onCopy?: (dataBytes: number) => void;
}

/**
 * Fills the empty destFd with srcFd's first `size` bytes, the one way every copy does:
 * FICLONE where plan.clone allows (an empty file too), else copy_file_range where
 * plan.range allows and there are bytes, else, with plan.copy, a buffered copy. The
 * two copies write data segments only (holes stay holes). Returns how, or undefined
 * when nothing was copied (no method worked and no plan.copy).
 *
 * A clone copies the whole source and a kernel copy stops at its EOF: the caller
 * proves the size (an identity check after, or the copy's size). The buffered copy
 * proves it itself.
 */
export function fillBytes(sys: Sys, buffer: Buffer, srcFd: number, destFd: number, size: number, plan: FillPlan): How | undefined {
  if (plan.clone && sys.ficlone(destFd, srcFd)) return HOW.CLONED;
  const range = plan.range && size > 0;
  if (!range && plan.copy === undefined) return undefined;
  let segments: [number, number][] | undefined;
  if (plan.onCopy !== undefined) {
    segments = dataSegments(sys, srcFd, size);
    plan.onCopy(segments.reduce((n, [start, end]) => n + end - start, 0));
  }
  if (range && copyRanges(sys, srcFd, destFd, size, segments)) return HOW.RANGED;
  if (plan.copy === undefined) return undefined;
  copyBuffered(sys, buffer, srcFd, destFd, size, segments ?? dataSegments(sys, srcFd, size), plan.copy.changed);
  return HOW.COPIED;
}

/**
 * Copies srcFd's data segments into the empty destFd through `buffer` with plain reads
 * and writes (copy_file_range may share extents), the size set at the end. A segment
 * that reads short, or a byte past `size`, is changed(grew).
 */
function copyBuffered(sys: Sys, buffer: Buffer, srcFd: number, destFd: number, size: number, segments: readonly [number, number][], changed: (grew: boolean) => Error): void {
  for (const [start, end] of segments) {
    for (let pos = start; pos < end; ) {
      const n = sys.pread(srcFd, buffer, 0, Math.min(buffer.length, end - pos), pos);
      if (n === 0) throw changed(false);
      writeAll(sys, destFd, buffer.subarray(0, n), pos);
      pos += n;
    }
  }
  if (sys.pread(srcFd, buffer, 0, 1, size) !== 0) throw changed(true);
  const last = segments.length === 0 ? 0 : segments[segments.length - 1]![1];
  if (last < size) sys.ftruncate(destFd, size);
}

/** Zeros hashed in place of a hole's bytes (never written to). */
const ZEROS = Buffer.alloc(1024 * 1024);

/**
 * Hashes fd from offset 0 to EOF, stopping as soon as more than `size` bytes show up,
 * writing each chunk to `out` when out >= 0. Returns the hex digest and the byte count.
 * A file read whole in one chunk is hashed in one shot (no hash object); a larger one is
 * read data segment by data segment (SEEK_DATA/SEEK_HOLE), its holes hashed as the zeros
 * they read as without reading them (and left holes in `out`).
 */
export function stream(sys: Sys, buffer: Buffer, fd: number, out: number, size: number): [string, number] {
  if (size >= buffer.length && size >= SPARSE_MIN_BYTES) return streamSegments(sys, buffer, fd, out, size);
  const first = sys.pread(fd, buffer, 0, buffer.length, 0);
  if (first === size && first < buffer.length) {
    if (out >= 0 && first > 0) writeAll(sys, out, buffer.subarray(0, first), 0);
    return [hash('sha256', buffer.subarray(0, first), 'hex'), first];
  }
  const h = createHash('sha256');
  let copied = 0;
  for (let n = first; n > 0; n = sys.pread(fd, buffer, 0, buffer.length, copied)) {
    h.update(buffer.subarray(0, n));
    if (out >= 0) writeAll(sys, out, buffer.subarray(0, n), copied);
    copied += n;
    if (copied > size) break;
    // A short read of a regular file is its end; the identity check after proves it stayed so.
    if (copied === size && n < buffer.length) break;
  }
  return [h.digest('hex'), copied];
}

/**
 * stream for a file of at least a chunk: its data segments read, its holes hashed as
 * zeros. A segment that reads short ends the count there (the file shrank); a byte at
 * `size` counts one more (it grew). Either way the caller sees a count that is not the
 * size, as with a plain read to EOF. A write that fills a hole after the segments were
 * found changes the file's timestamps, which the caller's identity check after sees.
 */
function streamSegments(sys: Sys, buffer: Buffer, fd: number, out: number, size: number): [string, number] {
  const h = createHash('sha256');
  let pos = 0;
  const zeros = (end: number): void => {
    for (; pos < end; pos += Math.min(ZEROS.length, end - pos)) h.update(ZEROS.subarray(0, Math.min(ZEROS.length, end - pos)));
  };
  let dataEnd = 0;
  for (const [start, end] of dataSegments(sys, fd, size)) {
    zeros(start);
    dataEnd = end;
    while (pos < end) {
      const n = sys.pread(fd, buffer, 0, Math.min(buffer.length, end - pos), pos);
      if (n === 0) return [h.digest('hex'), pos];
      h.update(buffer.subarray(0, n));
      if (out >= 0) writeAll(sys, out, buffer.subarray(0, n), pos);
      pos += n;
    }
  }
  zeros(size);
  if (sys.pread(fd, buffer, 0, 1, size) !== 0) return [h.digest('hex'), size + 1];
  // A trailing hole: the size, without blocks.
  if (out >= 0 && dataEnd < size) sys.ftruncate(out, size);
  return [h.digest('hex'), size];
}

/**
 * Fills destFd with srcFd's bytes — by FICLONE, else by copy_file_range, where
 * `methods` and the filesystems allow, else by a buffered copy while hashing —
 * then proves the source's identity unchanged since `before` (compared by `same`).
 * Returns 'changed' when it was not.
 *
 * A clone is a point-in-time copy: FICLONE takes both inodes' locks, so it waits
 * out a write in progress and no write can interleave with it; it writes the source's
 * dirty pages back first, which write-protects them, so a write through a shared
 * mapping after it faults and moves the source's ctime, which the identity check after
 * sees. After a clone, the bytes hashed are read from the source's (cached) pages:
 * reading the clone back would read every byte from the disk again. After an in-kernel
 * copy, the bytes hashed are the copy's own, read back from the pages it just wrote: a
 * write through a shared mapping whose page is already dirty moves no time stamp, so
 * between the copy and a second read of the source it could change the bytes unseen
 * (the store then held one thing and the manifest another).
 */
export function fillFile(
  sys: Sys,
  buffer: Buffer,
  srcFd: number,
  destFd: number,
  before: FileIdentity,
  methods: FillMethods,
  same: (a: FileIdentity, b: FileIdentity) => boolean = sameIdentity,
): Filled | 'changed' {
  let how: How = HOW.COPIED;
  // A write() already running at the first fstat changed the timestamps when it began, so
  // the identity check cannot see it. FICLONE waits it out (it takes both inode locks); a
  // kernel or buffered copy does not (ext4 and tmpfs reads take no inode lock), so a
  // recently changed file is proven again once any such write is over: the source and
  // the copy must then both hash to what was recorded. Not an empty file: a write into it
  // grows it with its first page, which the identity check after the copy sees; only a write
  // that has set the timestamps and copied nothing yet when both fstats run (microseconds
  // apart) is left, and proving that would cost every fresh tree a 250 ms wait where the
  // rest is cloned (readStable, one file at a time, does wait).
  const recent = before.size > 0 && changedRecently(before);
  // A method that does not work leaves the copy to the stream below, which hashes as it writes.
  if (before.size > 0 && destFd >= 0) how = fillBytes(sys, buffer, srcFd, destFd, before.size, methods) ?? HOW.COPIED;
  // A buffered copy writes the very bytes it hashes; a kernel copy is hashed from what it wrote.
  const [sha256, copied] = how === HOW.RANGED ? stream(sys, buffer, destFd, -1, before.size) : stream(sys, buffer, srcFd, how === HOW.COPIED ? destFd : -1, before.size);
  if (copied !== before.size || !same(before, sys.fstat(srcFd))) return 'changed';
  if (recent && how !== HOW.CLONED && !provenAfterWrites(sys, buffer, srcFd, how === HOW.RANGED ? destFd : -1, before, sha256, same)) return 'changed';
  return { sha256, how };
}

/**
 * fillFile on fds it owns: both are closed when it returns or throws (a failed close
 * ignored, as an Fd's dispose does). A plain try/finally, not `using`: this runs once
 * per file on every thread, and the downleveled `using` costs a disposal closure per
 * scope and makes each function that holds one slower to optimize.
 */
export function fillOwned(sys: Sys, buffer: Buffer, srcFd: number, destFd: number, before: FileIdentity, methods: FillMethods): Filled | 'changed' {
  const src = own(sys, srcFd);
  // A hash-only job (verify) has no destination.
  const dest = destFd >= 0 ? own(sys, destFd) : undefined;
  try {
    return fillFile(sys, buffer, srcFd, destFd, before, methods);
  } finally {
    dest?.[Symbol.dispose]();
    src[Symbol.dispose]();
  }
}

/**
 * After the in-flight window: the source (unchanged) still hashes to sha256, and so does a
 * kernel copy (destFd >= 0; a buffered copy wrote exactly the bytes hashed).
 */
function provenAfterWrites(
  sys: Sys,
  buffer: Buffer,
  srcFd: number,
  destFd: number,
  before: FileIdentity,
  sha256: string,
  same: (a: FileIdentity, b: FileIdentity) => boolean,
): boolean {
  waitPastWrites(before);
  const [source, size] = stream(sys, buffer, srcFd, -1, before.size);
  if (source !== sha256 || size !== before.size || !same(before, sys.fstat(srcFd))) return false;
  if (destFd < 0) return true;
  const [stored, storedSize] = stream(sys, buffer, destFd, -1, before.size);
  return stored === sha256 && storedSize === before.size;
}

