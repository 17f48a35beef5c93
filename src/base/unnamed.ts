// unnamed.ts: a file made without a name in a directory (O_TMPFILE) and linked in once whole, so a process killed midway leaves no name behind.
import { AT_EMPTY_PATH, AT_FDCWD, AT_SYMLINK_FOLLOW, O_TMPFILE, O_WRONLY } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { own, type Fd } from './fd.js';

/**
 * An unnamed file in the directory open at dirfd (O_TMPFILE, write-only, `mode`);
 * undefined where the filesystem or kernel makes none (EOPNOTSUPP; EISDIR or EINVAL from a
 * kernel that does not know the flag): the caller then makes a named one. Any other
 * failure (ENOSPC, EACCES, EROFS, EMFILE) is thrown as the kernel said it.
 */
export function openUnnamedAt(sys: Sys, dirfd: number, mode: number): Fd | undefined {
  try {
    return own(sys, sys.openat(dirfd, '.', O_TMPFILE | O_WRONLY, mode));
  } catch (err) {
    if (hasCode(err, 'EOPNOTSUPP', 'ENOTSUP', 'EISDIR', 'EINVAL')) return undefined;
    throw err;
  }
}

/**
 * Links the unnamed file open at fd in as dirfd/name: through its /proc/self/fd link (any
 * user), else by the fd itself (AT_EMPTY_PATH: root). false where neither can (no /proc,
 * not root, a link count the kernel will not raise: EMLINK); an existing name (EEXIST) or
 * another failure (ENOSPC, EIO) is thrown as the kernel said it.
 */
export function linkUnnamedAt(sys: Sys, fd: number, dirfd: number, name: string): boolean {
  for (const link of [() => sys.linkat(AT_FDCWD, `/proc/self/fd/${fd}`, dirfd, name, AT_SYMLINK_FOLLOW), () => sys.linkat(fd, '', dirfd, name, AT_EMPTY_PATH)]) {
    try {
      link();
      return true;
    } catch (err) {
      // No /proc (ENOENT), not root (EPERM, EACCES), or a link count the kernel will not raise (EMLINK): the next way.
      if (!hasCode(err, 'ENOENT', 'EPERM', 'EACCES', 'EMLINK')) throw err;
    }
  }
  return false;
}
