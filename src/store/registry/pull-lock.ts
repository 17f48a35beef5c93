// pull-lock.ts: one download per host: the pulls of one snapshot into a store take turns on `tmp/pull-<digest>` (an flock), so the second finds the first's snapshot published.
import { SealError } from '../../base/errors.js';
import { openRealDir, own, tryFlock } from '../../base/fd.js';
import { escapePath } from '../../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isReg } from '../../sys/constants.js';
import { hasCode } from '../../sys/errno.js';
import type { Stat, Sys } from '../../sys/native.js';
import { PULL_LOCK_PREFIX, TMP_DIR } from '../layout.js';

function openTmp(sys: Sys, storeRoot: string): number {
  return openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory');
}

/** What is at name in tmp/ now (undefined: nothing). */
function statNamed(sys: Sys, tmpFd: number, name: string): Stat | undefined {
  try {
    return sys.fstatat(tmpFd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return undefined;
    throw err;
  }
}

/**
 * Tries to take the lock of the pulls of `digest` into the store (never blocking): the fd
 * that holds it, or -1 while another pull (of this process or another) holds it. A holder
 * removes the file before it lets go, so a lock taken on a file no longer at its name is
 * dropped and the new one tried. Readable by all (a shared store's other members open it
 * to wait on it); flock needs no write access.
 */
export function tryPullLock(sys: Sys, storeRoot: string, digest: string): number {
  using tmp = own(sys, openTmp(sys, storeRoot));
  const name = PULL_LOCK_PREFIX + digest;
  for (;;) {
    using file = own(sys, sys.openat(tmp.fd, name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o644));
    const st = sys.fstat(file.fd);
    if (!isReg(st.mode)) throw new SealError('SEAL_CORRUPT', `pull lock is not a regular file: ${escapePath(`${storeRoot}/${TMP_DIR}/${name}`)}`);
    if (!tryFlock(sys, file.fd)) return -1;
    const now = statNamed(sys, tmp.fd, name);
    if (now !== undefined && now.dev === st.dev && now.ino === st.ino) {
      // Past the umask, for a shared store's other members; only its owner may change it.
      if ((st.mode & 0o777) !== 0o644 && st.uid === process.geteuid!()) sys.fchmod(file.fd, 0o644);
      return file.release();
    }
  }
}

/** Lets go of a pull lock: its file removed while it is still held (a waiter that opened it then tries the next one), then its fd closed. */
export function releasePullLock(sys: Sys, storeRoot: string, digest: string, fd: number): void {
  using file = own(sys, fd);
  using tmp = own(sys, openTmp(sys, storeRoot));
  const name = PULL_LOCK_PREFIX + digest;
  const st = sys.fstat(file.fd);
  const now = statNamed(sys, tmp.fd, name);
  if (now !== undefined && now.dev === st.dev && now.ino === st.ino) sys.unlinkat(tmp.fd, name, 0);
}
