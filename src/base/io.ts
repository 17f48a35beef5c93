// io.ts: whole-buffer writes, in-kernel copies that keep holes, hashing a file to EOF, and bounded stable reads, all through fds.
import { createHash } from 'node:crypto';

import { SealError } from './errors.js';
import { changedRecently, waitPastWrites } from './in-flight.js';
import { own, type Fd } from './fd.js';
import { throwIfRefused } from './refusal.js';
import { escapePath } from './paths.js';
import { writeBack, writebackOf } from './writeback.js';
import { AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, PROC_SUPER_MAGIC, SEEK_DATA, SEEK_HOLE, SYSFS_MAGIC, isDir, isReg, isSpecial } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import { identityOf, sameIdentity, type FileIdentity } from '../sys/identity.js';
import type { Stat, Sys } from '../sys/native.js';

/** Read and write size of one chunk: 1 MiB, as the seed copies. */
export const CHUNK_BYTES = 1024 * 1024;

/** Writes all of bytes to fd at position (default 0), handling short writes. */
export function writeAll(sys: Sys, fd: number, bytes: Uint8Array, position = 0): void {
  for (let off = 0; off < bytes.length; ) off += sys.pwrite(fd, bytes, off, bytes.length - off, position + off);
}

/** Files at least this large are copied data segment by data segment (SEEK_DATA/SEEK_HOLE), so holes stay holes. */
export const SPARSE_MIN_BYTES = 128 * 1024;

/** copy_file_range failures that mean "not between these two files", not "the copy went wrong". */
const RANGE_UNSUPPORTED = ['EXDEV', 'EINVAL', 'EOPNOTSUPP', 'ENOSYS', 'ENOTSUP'];

/**
 * The data segments [start, end) of fd's first `size` bytes (SEEK_DATA/SEEK_HOLE): what a
 * copy writes; the rest reads as zeros and stays a hole. A small file, or one on a
 * filesystem that cannot tell, is one segment; an empty one has none.
 */
export function dataSegments(sys: Sys, fd: number, size: number): [number, number][] {
  if (size < SPARSE_MIN_BYTES) return size === 0 ? [] : [[0, size]];
  const out: [number, number][] = [];
  let pos = 0;
  try {
    while (pos < size) {
      const start = sys.lseek(fd, pos, SEEK_DATA);
      if (start >= size) break;
      const end = Math.min(sys.lseek(fd, start, SEEK_HOLE), size);
      out.push([start, end]);
      pos = end;
    }
  } catch (err) {
    if (hasCode(err, 'ENXIO')) return out; // no data past pos: the rest is a hole
    if (hasCode(err, 'EINVAL', 'EOPNOTSUPP', 'ENOSYS')) return [[0, size]];
    throw err;
  }
  return out;
}

/**
 * Copies src's first `size` bytes into the empty dst in the kernel (copy_file_range),
 * data segment by data segment (`segments`, when the caller has them already) so a
 * sparse file stays sparse. Returns false, having copied nothing the caller must keep,
 * where copy_file_range cannot copy between these files (the caller then copies
 * through a buffer). Stops early at src's EOF: the caller's identity check proves the
 * size.
 */
export function copyRanges(sys: Sys, src: number, dst: number, size: number, segments?: readonly [number, number][]): boolean {
  let last = 0;
  try {
    for (const [start, end] of segments ?? dataSegments(sys, src, size)) {
      last = end;
      for (let off = start; off < end; ) {
        const n = sys.copy_file_range(src, off, dst, off, end - off);
        if (n === 0) return true;
        off += n;
      }
    }
  } catch (err) {
    if (hasCode(err, ...RANGE_UNSUPPORTED)) return false;
    throw err;
  }
  // A trailing hole: the size, without blocks.
  if (last < size) sys.ftruncate(dst, size);
  return true;
}

/** Opens dirfd/name without following a link or blocking, and hashes it to EOF. */
export function hashAt(sys: Sys, buffer: Buffer, dirfd: number, name: string): { sha256: string; size: number } {
  using file = own(sys, sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  const hash = createHash('sha256');
  let size = 0;
  for (;;) {
    const n = sys.pread(file.fd, buffer, 0, buffer.length, size);
    if (n === 0) break;
    hash.update(buffer.subarray(0, n));
    size += n;
  }
  return { sha256: hash.digest('hex'), size };
}

export interface StableRead {
  bytes: Buffer;
  /** Any execute bit was set. */
  executable: boolean;
  identity: FileIdentity;
}

/** procfs and sysfs: files whose size says nothing of what a read gives. */
export function isPseudoFs(fsType: number): boolean {
  return fsType === PROC_SUPER_MAGIC || fsType === SYSFS_MAGIC;
}

function changedWhileCopied(shown: string, cause?: unknown): SealError {
  return new SealError('SEAL_CHANGED', `file changed while being copied: ${escapePath(shown)}`, { path: shown, cause });
}

export interface ReadAllOptions {
  /**
   * The caller proves the bytes it gets (a checksum or digest they must match): a
   * same-size write still in flight would fail that proof, so a recently changed file is
   * not waited for and read again (the store's own documents and stat caches).
   */
  selfProving?: boolean;
  /**
   * Whether the file, by its fstat, is one to read at all (its owner and modes): refused
   * (SEAL_UNTRUSTED) before a byte is read when this says no. A checksum proves a file
   * whole, not who wrote it.
   */
  trusted?: (st: Stat) => boolean;
}

/**
 * Reads dirfd/name (never following a symlink, never blocking on a FIFO) when it is a
 * regular file of at most maxBytes, and proves that its identity, its size and the
 * name's binding to it did not change while it was read.
 */
export function readAllAt(sys: Sys, dirfd: number, name: string, maxBytes: number, shown = name, options: ReadAllOptions = {}): StableRead {
  using file = openToRead(sys, dirfd, name, shown);
  const fd = file.fd;
  const before = sys.fstat(fd);
  if (isDir(before.mode)) throw new SealError('SEAL_BAD_PATH', `must be a regular file, not a directory: ${escapePath(shown)}`, { path: shown });
  if (!isReg(before.mode)) throw new SealError('SEAL_SPECIAL_FILE', `must be a regular file: ${escapePath(shown)}`, { path: shown });
  if (before.size > maxBytes) throw tooBig(maxBytes, shown);
  if (options.trusted?.(before) === false) throw new SealError('SEAL_UNTRUSTED', `file is not yours (uid ${before.uid}, mode ${(before.mode & 0o7777).toString(8).padStart(4, '0')}): ${escapePath(shown)}`, { path: shown });
  // Its dirty pages put under writeback once its identity is taken (every mapping of them write-protected): a write
  // through a shared mapping during the read then faults and stamps the file's times, which the fstat after it sees.
  // A file that proves itself (the store's own, checksummed) needs none; one a filesystem never writes back (tmpfs) gets none.
  if (options.selfProving !== true) writeBack(sys, fd, writebackOf(sys, fd));
  // size + 1: a file that grew is seen as such without reading (or allocating) more. Never a
  // slice of Node's pool: the bytes are the result's alone, so a thread can move them (movableView).
  let bytes: Buffer;
  try {
    bytes = Buffer.allocUnsafeSlow(before.size + 1);
  } catch (err) {
    if (!(err instanceof RangeError)) throw err;
    throw new SealError('SEAL_LIMIT', `file of ${before.size} bytes does not fit in this process's memory (${err.message}): ${escapePath(shown)}`, { path: shown, cause: err });
  }
  const got = readFrom(sys, fd, bytes);
  const after = sys.fstat(fd);
  if (after.size > maxBytes) throw tooBig(maxBytes, shown);
  const id = identityOf(before);
  // Another length than its size on procfs or sysfs, or elsewhere with a size that did not change and times unmoved and
  // not recent (no write did that): a file whose length is not its size is refused for good, not SEAL_CHANGED, which
  // a caller would retry forever (a process's /proc files are as new as the process).
  if (got !== before.size && (isPseudoFs(sys.fstatfs(fd)) || (sameIdentity(id, identityOf(after)) && !changedRecently(id)))) {
    throw new SealError('SEAL_SPECIAL_FILE', `file reads ${got > before.size ? 'more' : 'fewer'} bytes than its size (${before.size}) says: a kernel pseudo-file (procfs, sysfs), not stable contents: ${escapePath(shown)}`, { path: shown });
  }
  if (got !== before.size || !sameIdentity(id, identityOf(after))) throw changedWhileCopied(shown);
  // A same-size write begun before the first fstat may still have been copying bytes:
  // once it must be over, the file (unchanged) must read the same again.
  if (options.selfProving !== true && changedRecently(id)) {
    waitPastWrites(id);
    if (!readsSame(sys, fd, bytes, got)) throw changedWhileCopied(shown);
    if (!sameIdentity(id, identityOf(sys.fstat(fd)))) throw changedWhileCopied(shown);
  }
  let named;
  try {
    named = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    throwIfRefused(err, `file cannot be read: ${escapePath(shown)}`, shown);
    throw changedWhileCopied(shown, err);
  }
  if (!sameIdentity(id, identityOf(named))) throw changedWhileCopied(shown);
  return { bytes: bytes.subarray(0, got), executable: (before.mode & 0o111) !== 0, identity: id };
}

/** Whether fd reads as bytes[0, got) again, to its end: compared a chunk at a time (no second copy of a large file). */
function readsSame(sys: Sys, fd: number, bytes: Buffer, got: number): boolean {
  const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, got + 1));
  for (let at = 0; ; ) {
    const n = sys.pread(fd, chunk, 0, chunk.length, at);
    if (n === 0) return at === got;
    if (at + n > got || !chunk.subarray(0, n).equals(bytes.subarray(at, at + n))) return false;
    at += n;
  }
}

/** pread from offset 0 until `into` is full or EOF; the byte count. */
export function readFrom(sys: Sys, fd: number, into: Buffer): number {
  let got = 0;
  while (got < into.length) {
    const n = sys.pread(fd, into, got, into.length - got, got);
    if (n === 0) break;
    got += n;
  }
  return got;
}

function openToRead(sys: Sys, dirfd: number, name: string, shown: string): Fd {
  try {
    return own(sys, sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  } catch (err) {
    if (hasCode(err, 'ELOOP')) throw new SealError('SEAL_SYMLINK', `file must not be a symlink: ${escapePath(shown)}`, { path: shown, cause: err });
    // A socket (ENXIO), or a device with no driver behind it (ENXIO, ENODEV): not a regular file, as a FIFO is not.
    if (hasCode(err, 'ENXIO', 'ENODEV') && isSpecialAt(sys, dirfd, name)) {
      throw new SealError('SEAL_SPECIAL_FILE', `must be a regular file: ${escapePath(shown)}`, { path: shown, cause: err });
    }
    throwIfRefused(err, `file cannot be read: ${escapePath(shown)}`, shown);
    throw new SealError('SEAL_UNAVAILABLE', `file is unavailable: ${escapePath(shown)}: ${escapePath((err as Error).message)}`, { path: shown, cause: err });
  }
}

/** Whether dirfd/name (not followed) is neither a regular file, a directory nor a symlink. */
function isSpecialAt(sys: Sys, dirfd: number, name: string): boolean {
  try {
    const { mode } = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
    return isSpecial(mode);
  } catch {
    return false;
  }
}

function tooBig(maxBytes: number, shown: string): SealError {
  return new SealError('SEAL_LIMIT', `file exceeds the per-file limit (${maxBytes} bytes): ${escapePath(shown)}`, { path: shown });
}
