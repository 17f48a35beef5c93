// frozen-file.ts: writeFrozenFile, a new read-only file that never overwrites or follows anything.
import { basename, dirname } from 'node:path';

import { checkFilePath, openRealDir, openRealPlace, own, statOrNull, stillNamed, type Fd } from '../base/fd.js';
import { checkBoolean, checkOptions, checkString, invalidArgType } from '../base/arg-errors.js';
import { SealError, isSealError } from '../base/errors.js';
import { writeAll } from '../base/io.js';
import { escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, O_CREAT, O_EXCL, O_NOFOLLOW, O_WRONLY } from '../sys/constants.js';
import { linkUnnamedAt, openUnnamedAt } from '../base/unnamed.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { checkSys, defineOp } from '../base/op.js';
import { throwIfRefused } from '../base/refusal.js';

export interface WriteFrozenOptions {
  executable?: boolean | undefined;
  /** fsync the file and its directory before returning (default true). */
  fsync?: boolean | undefined;
  sys?: Sys | undefined;
}

/**
 * Writes bytes as the new read-only file dirfd/name (0444; 0555 executable), never over an
 * existing name nor through a link. Built unnamed in the directory (O_TMPFILE) and linked
 * in once written and read-only: a process killed midway leaves nothing under the name (it
 * left a short file there, which the next call met as SEAL_COLLISION and a stable read
 * returned as the whole). Where the filesystem makes no unnamed files, or one cannot be
 * linked in (no /proc, not root), it is created in place as before (writeInPlace). An
 * existing name (a dangling symlink included) is SEAL_COLLISION, before a byte is written
 * and again at the link.
 */
export function writeFrozenAt(sys: Sys, dirfd: number, name: string, bytes: Uint8Array, options: WriteFrozenOptions, shown = name): void {
  const executable = options.executable === true;
  const unnamed = openUnnamed(sys, dirfd, executable ? 0o500 : 0o400, shown);
  if (unnamed === undefined) return writeInPlace(sys, dirfd, name, bytes, options, shown);
  const file = unnamed;
  try {
    // Anything at the name (never followed): refused before a byte is written, as O_EXCL refused it.
    if (statOrNull(sys, dirfd, name) !== null) throw collision(shown);
  } catch (err) {
    file[Symbol.dispose]();
    throw isSealError(err) ? err : createError(err, shown);
  }
  let linked: Stat | undefined;
  try {
    writeAll(sys, file.fd, bytes);
    sys.fchmod(file.fd, executable ? 0o555 : 0o444);
    if (options.fsync !== false) sys.fsync(file.fd);
    const made = sys.fstat(file.fd);
    if (!linkIn(sys, file.fd, dirfd, name, shown)) {
      file.close();
      return writeInPlace(sys, dirfd, name, bytes, options, shown);
    }
    linked = made;
    if (options.fsync !== false) sys.fsync(dirfd);
    // A close that fails (NFS reports a write error there) fails the call, the name removed, so a retry can make it.
    file.close();
  } catch (err) {
    file[Symbol.dispose]();
    try {
      // Linked, then a failure (the directory's fsync, the close): the name goes again while it still binds this file.
      if (linked !== undefined && stillNamed(sys, dirfd, name, linked)) sys.unlinkat(dirfd, name, 0);
    } catch {
      // the first error says what went wrong
    }
    if (isSealError(err)) throw err;
    throwIfRefused(err, `cannot write file: ${escapePath(shown)}`, shown);
    throw err;
  }
}

/**
 * An unnamed file in the directory open at dirfd (O_TMPFILE); undefined where the filesystem
 * or kernel makes none (EOPNOTSUPP; EISDIR or EINVAL from a kernel that does not know the
 * flag): the caller then creates the file in place. Any other failure (ENOSPC, EACCES,
 * EROFS, EMFILE) is the one creating it in place would meet, said as such.
 */
function openUnnamed(sys: Sys, dirfd: number, mode: number, shown: string): Fd | undefined {
  try {
    return openUnnamedAt(sys, dirfd, mode);
  } catch (err) {
    throw createError(err, shown);
  }
}

function collision(shown: string, cause?: unknown): SealError {
  return new SealError('SEAL_COLLISION', `file already exists: ${escapePath(shown)}`, { path: shown, cause });
}

/**
 * Links the unnamed file open at fd in as dirfd/name: through its /proc/self/fd link (any
 * user), else by the fd itself (AT_EMPTY_PATH: root). false where neither can (no /proc, not
 * root, EMLINK); an existing name is SEAL_COLLISION; another failure (ENOSPC, EIO) is thrown
 * as the kernel said it, and typed by the caller.
 */
function linkIn(sys: Sys, fd: number, dirfd: number, name: string, shown: string): boolean {
  try {
    return linkUnnamedAt(sys, fd, dirfd, name);
  } catch (err) {
    if (hasCode(err, 'EEXIST')) throw collision(shown, err);
    throw err;
  }
}

/**
 * Creates dirfd/name with O_EXCL|O_NOFOLLOW at 0400/0500, writes bytes, then makes it
 * 0444/0555. A failed write removes the partial file (if its name still binds it); a
 * killed one leaves it, 0400.
 */
function writeInPlace(sys: Sys, dirfd: number, name: string, bytes: Uint8Array, options: WriteFrozenOptions, shown: string): void {
  const executable = options.executable === true;
  const file = createExclusive(sys, dirfd, name, executable ? 0o500 : 0o400, shown);
  let made: Stat | undefined;
  try {
    made = sys.fstat(file.fd);
    writeAll(sys, file.fd, bytes);
    sys.fchmod(file.fd, executable ? 0o555 : 0o444);
    if (options.fsync !== false) {
      sys.fsync(file.fd);
      sys.fsync(dirfd);
    }
    file.close();
  } catch (err) {
    file[Symbol.dispose]();
    try {
      // Only the file this call made: in a directory others can write, the name may bind another by now (a swap
      // between this check and the unlink removes only a name, in a directory the swapper can write anyway).
      if (made === undefined || stillNamed(sys, dirfd, name, made)) sys.unlinkat(dirfd, name, 0);
    } catch {
      // the first error says what went wrong
    }
    // The kernel refusing the write (ENOSPC, EDQUOT, EIO): SEAL_IO naming the file.
    throwIfRefused(err, `cannot write file: ${escapePath(shown)}`, shown);
    throw err;
  }
}

function createExclusive(sys: Sys, dirfd: number, name: string, mode: number, shown: string): Fd {
  try {
    return own(sys, sys.openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode));
  } catch (err) {
    if (hasCode(err, 'EEXIST')) throw collision(shown, err);
    throw createError(err, shown);
  }
}

/** A failure to create the file (or to look at its name first): the kernel's refusal typed (SEAL_IO, SEAL_LIMIT, ...), else SEAL_UNAVAILABLE. */
function createError(err: unknown, shown: string): unknown {
  try {
    throwIfRefused(err, `cannot create file: ${escapePath(shown)}`, shown);
  } catch (typed) {
    return typed;
  }
  return new SealError('SEAL_UNAVAILABLE', `cannot create file: ${escapePath(shown)}: ${escapePath((err as Error).message)}`, { path: shown, cause: err });
}

/**
 * The new file's directory: opened for reading where the new name is fsynced in it (an O_PATH
 * fd cannot be), else as a place only (search permission, as `cp` into a 0311 directory needs).
 */
function openParent(sys: Sys, dir: string, durable: boolean): number {
  if (!durable) return openRealPlace(sys, dir, 'parent directory');
  try {
    return openRealDir(sys, dir, 'parent directory');
  } catch (err) {
    if (!isSealError(err, 'SEAL_IO') || !hasCode(err.cause, 'EACCES')) throw err;
    // Said only where search permission is there (a lookup of `.` in it needs it), else fsync: false fails the same way.
    try {
      using place = own(sys, openRealPlace(sys, dir, 'parent directory'));
      sys.fstatat(place.fd, '.', AT_SYMLINK_NOFOLLOW);
    } catch {
      throw err;
    }
    const message = `${err.message} (fsync of the new name needs read permission on its directory; fsync: false needs search permission only)`;
    throw new SealError('SEAL_IO', message, { path: dir, cause: err.cause });
  }
}

/** Checks writeFrozenFile's arguments (types and values that are not about the path). */
function checkArgs(path: unknown, bytes: unknown, options: WriteFrozenOptions): void {
  checkString('path', path);
  if (!(bytes instanceof Uint8Array)) throw invalidArgType('bytes', ['Buffer', 'Uint8Array'], bytes);
  checkOptions('options', options, { op: 'writeFrozenFile', keys: ['executable', 'fsync', 'sys'] });
  checkBoolean('options.executable', options.executable);
  checkBoolean('options.fsync', options.fsync);
}

type WriteArgs = [path: string, bytes: Uint8Array, options: Omit<WriteFrozenOptions, 'sys'>];

const WRITE_FROZEN = defineOp('writeFrozenFile', {
  validate: (path: string, bytes: Uint8Array, options: WriteFrozenOptions = {}) => {
    checkArgs(path, bytes, options);
    checkFilePath(path);
    const { sys: given, ...rest } = options;
    const sys = checkSys('options.sys', given);
    // Shared memory another thread may change while it is written: copied first, so the file holds one version of it.
    const fixed = bytes.buffer instanceof SharedArrayBuffer ? new Uint8Array(bytes) : bytes;
    return { sys, args: [path, fixed, rest] as WriteArgs };
  },
  core: (sys, [path, bytes, options]) => {
    using parent = own(sys, openParent(sys, dirname(path), options.fsync !== false));
    writeFrozenAt(sys, parent.fd, basename(path), bytes, options, path);
  },
});

export function writeFrozenFileSync(path: string, bytes: Uint8Array, options: WriteFrozenOptions = {}): void {
  WRITE_FROZEN.sync(path, bytes, options);
}

/** writeFrozenFileSync on the worker thread (on the calling thread when `sys` is another layer than the addon's). */
export function writeFrozenFile(path: string, bytes: Uint8Array, options: WriteFrozenOptions = {}): Promise<void> {
  return WRITE_FROZEN.async(path, bytes, options);
}
