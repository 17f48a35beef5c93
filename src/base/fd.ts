// dirs.ts: fd-relative directory helpers: real-directory opens, beneath-root opens, removal without following links.
import { SealError } from './errors.js';
import { escapePath } from './paths.js';
import {
  AT_FDCWD,
  AT_REMOVEDIR,
  AT_SYMLINK_NOFOLLOW,
  O_DIRECTORY,
  O_NOFOLLOW,
  O_RDONLY,
  RESOLVE_BENEATH,
  RESOLVE_NO_MAGICLINKS,
  RESOLVE_NO_SYMLINKS,
  isDir,
  isLink,
} from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';

export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const BENEATH = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
const OPENAT2_RETRIES = 8;

/** Closes fds, ignoring EBADF-class failures so cleanup never masks the first error. */
export function closeQuietly(sys: Sys, ...fds: number[]): void {
  for (const fd of fds) {
    if (fd < 0) continue;
    try {
      sys.close(fd);
    } catch {
      // already reported by the operation that failed
    }
  }
}

/**
 * Opens an absolute or cwd-relative path as a real directory: its last component
 * must not be a symlink. Errors name `label`.
 */
export function openRealDir(sys: Sys, path: string, label: string): number {
  try {
    return sys.openat(AT_FDCWD, path, DIR_FLAGS);
  } catch (err) {
    if (hasCode(err, 'ELOOP')) {
      throw new SealError('SEAL_SYMLINK', `${label} must be a real directory, not a symlink: ${escapePath(path)}`, { cause: err });
    }
    if (hasCode(err, 'ENOTDIR') && isLinkPath(sys, path)) {
      throw new SealError('SEAL_SYMLINK', `${label} must be a real directory, not a symlink: ${escapePath(path)}`, { cause: err });
    }
    if (hasCode(err, 'ENOTDIR')) {
      throw new SealError('SEAL_BAD_PATH', `${label} must be a real directory: ${escapePath(path)}`, { cause: err });
    }
    throw new SealError('SEAL_UNAVAILABLE', `${label} is unavailable: ${escapePath(path)}: ${(err as Error).message}`, { cause: err });
  }
}

function isLinkPath(sys: Sys, path: string): boolean {
  try {
    return isLink(sys.fstatat(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW).mode);
  } catch {
    return false;
  }
}

/** Opens a child directory of dirfd without following a symlink. */
export function openChildDir(sys: Sys, dirfd: number, name: string | Buffer): number {
  return sys.openat(dirfd, name, DIR_FLAGS);
}

function walkBeneath(sys: Sys, rootFd: number, parts: readonly string[], flags: number, mode: number): number {
  let current = -1;
  try {
    for (let i = 0; i < parts.length - 1; i++) {
      const next = sys.openat(current < 0 ? rootFd : current, parts[i]!, DIR_FLAGS);
      closeQuietly(sys, current);
      current = next;
    }
    return sys.openat(current < 0 ? rootFd : current, parts[parts.length - 1]!, flags | O_NOFOLLOW, mode);
  } finally {
    closeQuietly(sys, current);
  }
}

/**
 * Opens `parts` below rootFd without crossing a symlink or leaving the root:
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), or, where
 * the kernel lacks it (ENOSYS) or a sandbox forbids it (EPERM), a per-component
 * O_NOFOLLOW walk. EAGAIN (a concurrent rename) is retried a bounded number of times.
 */
export function openBeneath(sys: Sys, rootFd: number, parts: readonly string[], flags: number, mode = 0): number {
  if (parts.length === 0) throw new SealError('SEAL_BAD_PATH', 'empty path below root');
  const joined = parts.join('/');
  for (let attempt = 0; ; attempt++) {
    try {
      return sys.openat2(rootFd, joined, flags | O_NOFOLLOW, mode, BENEATH);
    } catch (err) {
      if (hasCode(err, 'ENOSYS', 'EPERM')) return walkBeneath(sys, rootFd, parts, flags, mode);
      if (hasCode(err, 'EAGAIN') && attempt < OPENAT2_RETRIES) continue;
      throw err;
    }
  }
}

/**
 * Removes `name` below parentFd: a non-directory is unlinked (a symlink is never
 * followed); a directory is made writable through its own fd, emptied and removed.
 * A missing entry is fine.
 */
export function removeAt(sys: Sys, parentFd: number, name: string | Buffer): void {
  let mode: number;
  try {
    mode = sys.fstatat(parentFd, name, AT_SYMLINK_NOFOLLOW).mode;
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return;
    throw err;
  }
  if (!isDir(mode)) {
    sys.unlinkat(parentFd, name, 0);
    return;
  }
  const fd = openChildDir(sys, parentFd, name);
  try {
    emptyDir(sys, fd);
  } finally {
    closeQuietly(sys, fd);
  }
  sys.unlinkat(parentFd, name, AT_REMOVEDIR);
}

/** Removes everything inside the directory open at fd. */
export function emptyDir(sys: Sys, fd: number): void {
  try {
    sys.fchmod(fd, 0o700);
  } catch (err) {
    if (!hasCode(err, 'EPERM')) throw err;
  }
  for (const entry of sys.readdir(fd)) removeAt(sys, fd, entry.name);
}
