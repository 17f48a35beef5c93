// stable-read.ts: bounded reads of one file that prove the bytes did not change while read.
import { dirname, basename } from 'node:path';

import { closeQuietly, openRealDir } from './dirs.js';
import { SealError } from './errors.js';
import { escapePath } from './paths.js';
import { AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isDir, isReg } from './sys/constants.js';
import { hasCode } from './sys/errno.js';
import { identityOf, sameIdentity, type FileIdentity } from './sys/identity.js';
import { sys as nativeSys, type Sys } from './sys/native.js';
import { offload } from './offload.js';

export interface StableRead {
  bytes: Buffer;
  /** Any execute bit was set. */
  executable: boolean;
  identity: FileIdentity;
}

export interface ReadStableOptions {
  /** Largest file accepted; bigger is SEAL_LIMIT before a byte is read. */
  maxBytes: number;
  sys?: Sys;
}

function changedWhileCopied(shown: string): SealError {
  return new SealError('SEAL_CHANGED', `file changed while being copied: ${escapePath(shown)}`, { path: shown });
}

/**
 * Reads dirfd/name (never following a symlink, never blocking on a FIFO) when it is a
 * regular file of at most maxBytes, and proves that its identity, its size and the
 * name's binding to it did not change while it was read.
 */
export function readAllAt(sys: Sys, dirfd: number, name: string, maxBytes: number, shown = name): StableRead {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new SealError('SEAL_LIMIT', 'maxBytes must be a non-negative integer');
  let fd: number;
  try {
    fd = sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    if (hasCode(err, 'ELOOP')) throw new SealError('SEAL_SYMLINK', `file must not be a symlink: ${escapePath(shown)}`, { path: shown, cause: err });
    throw new SealError('SEAL_UNAVAILABLE', `file is unavailable: ${escapePath(shown)}: ${(err as Error).message}`, { path: shown, cause: err });
  }
  try {
    const before = sys.fstat(fd);
    if (isDir(before.mode)) throw new SealError('SEAL_BAD_PATH', `must be a regular file, not a directory: ${escapePath(shown)}`, { path: shown });
    if (!isReg(before.mode)) throw new SealError('SEAL_SPECIAL_FILE', `must be a regular file: ${escapePath(shown)}`, { path: shown });
    if (before.size > maxBytes) {
      throw new SealError('SEAL_LIMIT', `file exceeds the per-file limit (${maxBytes} bytes): ${escapePath(shown)}`, { path: shown });
    }
    // size + 1: a file that grew is seen as such without reading (or allocating) more.
    const bytes = Buffer.allocUnsafe(before.size + 1);
    let got = 0;
    while (got < bytes.length) {
      const n = sys.pread(fd, bytes, got, bytes.length - got, got);
      if (n === 0) break;
      got += n;
    }
    const after = sys.fstat(fd);
    if (after.size > maxBytes) {
      throw new SealError('SEAL_LIMIT', `file exceeds the per-file limit (${maxBytes} bytes): ${escapePath(shown)}`, { path: shown });
    }
    if (got !== before.size || !sameIdentity(identityOf(before), identityOf(after))) throw changedWhileCopied(shown);
    let named;
    try {
      named = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
    } catch (err) {
      throw new SealError('SEAL_CHANGED', `file changed while being copied: ${escapePath(shown)}`, { path: shown, cause: err });
    }
    if (!sameIdentity(identityOf(before), identityOf(named))) throw changedWhileCopied(shown);
    return { bytes: bytes.subarray(0, got), executable: (before.mode & 0o111) !== 0, identity: identityOf(before) };
  } finally {
    closeQuietly(sys, fd);
  }
}

/** readAllAt for a path: its parent must be a real directory; the file itself is opened O_NOFOLLOW. */
export function readStableSync(path: string, options: ReadStableOptions): StableRead {
  const sys = options.sys ?? nativeSys;
  const name = basename(path);
  if (name === '' || name === '.' || name === '..') throw new SealError('SEAL_BAD_PATH', `not a file path: ${escapePath(path)}`);
  const dirfd = openRealDir(sys, dirname(path), 'parent directory');
  try {
    return readAllAt(sys, dirfd, name, options.maxBytes, path);
  } finally {
    closeQuietly(sys, dirfd);
  }
}

/** readStableSync in a worker thread (with the native syscall layer), or inline with a given one. */
export async function readStable(path: string, options: ReadStableOptions): Promise<StableRead> {
  if (options.sys !== undefined) return readStableSync(path, options);
  const r = await offload<StableRead>('readStable', [path, { maxBytes: options.maxBytes }]);
  return { ...r, bytes: Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.byteLength) };
}

/** The dirfd-relative form: name is opened below dirfd without following a symlink. */
export function readStableAt(dirfd: number, name: string, options: ReadStableOptions): StableRead {
  return readAllAt(options.sys ?? nativeSys, dirfd, name, options.maxBytes);
}
