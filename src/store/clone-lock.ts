// clone-lock.ts: the lock a materialize or reset holds on its clone for its whole run: a flocked file in the store's tmp/, never in the clone.
import { SealError } from '../base/errors.js';
import { DIR_FLAGS, openChildDir, openRealDir, own, stillNamed, tryFlockAwhile, type Fd } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_RDWR, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { TMP_DIR } from './layout.js';

/** What holds a clone's lock. */
const BUSY = 'clone is in use by another call (a materialize or reset of it, or a sandboxed command running in it); wait for that one';

/** Tries at a name whose file another holder removed between this call's open and flock. */
const ATTEMPTS = 4;
/** How long a lock another holds is tried again before SEAL_BUSY: a store's sweep testing the lock file holds it for microseconds. */
const SWEEP_HOLD_MS = 20;

/** The lock file's name in tmp/: the clone directory's device and inode (no build's or removal's prefix). */
function lockName(cloneDir: Stat): string {
  return `clone-${cloneDir.dev}-${cloneDir.ino}.lock`;
}

/** Whether a name in tmp/ is a clone lock's: one no call holds is swept with the store's leftovers (a holder killed left it). */
export function isCloneLockName(name: string): boolean {
  return /^clone-\d+-\d+\.lock$/.test(name);
}

/** A held clone lock: released (its file removed while still held, then closed) once the call is done. */
export interface CloneLock extends Disposable {
  release(): void;
}

/**
 * Takes the lock of the clone whose directory fstat gave `cloneDir`, without waiting: a
 * second materialize or reset of the same clone meanwhile (another call, thread or
 * process), or one while a sandboxed command runs in it (spawnSandboxed holds the lock
 * until the command ends), is SEAL_BUSY. The lock lives in the store (its tmp/, which every open makes):
 * the agent in the clone cannot take or plant it, and a caller's own `flock` on the clone
 * directory (a shell's `flock DIR treeseal reset …`) does not meet it. Its file is removed
 * while held; a holder whose file was removed meanwhile tries the new one. A store on a
 * filesystem mounted read-only holds no file of it (EROFS): the clone directory's own
 * flock is the lock then (see lockCloneDir).
 */
export function lockClone(sys: Sys, storeRoot: string, cloneFd: number, clone: string): CloneLock {
  const name = lockName(sys.fstat(cloneFd));
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  const tmp = own(sys, openChildDir(sys, store.fd, TMP_DIR));
  try {
    // In a shared store (tmp/ the group's), the group's: a lock file a member left (killed while holding it) must not
    // lock another member out of a clone that came to have the same inode.
    const mode = (sys.fstat(tmp.fd).mode & 0o070) !== 0 ? 0o660 : 0o600;
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      let opened: number;
      try {
        opened = openLockFile(sys, tmp.fd, name, mode, clone);
      } catch (err) {
        if (!hasCode(err, 'EROFS')) throw err;
        tmp.close();
        return lockCloneDir(sys, cloneFd, clone);
      }
      const file = own(sys, opened);
      let named: boolean;
      try {
        const st = sys.fstat(file.fd);
        if (!isReg(st.mode)) throw new SealError('SEAL_CORRUPT', `store clone lock is not a regular file: ${TMP_DIR}/${name}`);
        // The umask may have taken the group's bits off a new one: its owner puts them back.
        if ((st.mode & 0o777) !== mode && mode === 0o660 && st.uid === process.geteuid!()) sys.fchmod(file.fd, mode);
        if (!tryFlockAwhile(sys, file.fd, SWEEP_HOLD_MS)) throw new SealError('SEAL_BUSY', `${BUSY}: ${escapePath(clone)}`, { path: clone, retryable: true });
        named = stillNamed(sys, tmp.fd, name, st);
      } catch (err) {
        file.close();
        throw err;
      }
      if (named) return held(sys, tmp, file, name);
      file.close();
    }
  } catch (err) {
    tmp.close();
    throw err;
  }
  tmp.close();
  throw new SealError('SEAL_BUSY', `clone is in use by other calls, one after another (materializes or resets of it, or sandboxed commands running in it); try again: ${escapePath(clone)}`, { path: clone, retryable: true });
}

/**
 * The lock of a clone materialized from a store on a read-only filesystem: an flock on the
 * clone directory itself (its own open, let go with the call). Every call through a
 * read-only store meets it; so does any process that holds an flock on the clone (a
 * caller's own `flock DIR`, or a process the agent left running: SEAL_BUSY naming it as
 * a possible holder), and a call through the same store mounted writable does not.
 */
function lockCloneDir(sys: Sys, cloneFd: number, clone: string): CloneLock {
  const dir = own(sys, sys.openat(cloneFd, '.', DIR_FLAGS));
  try {
    if (!tryFlockAwhile(sys, dir.fd, SWEEP_HOLD_MS)) {
      const why = 'clone is in use: its directory is flocked (by a materialize, reset or sandboxed command through a read-only store, or by any other process holding an flock on it); wait for that one';
      throw new SealError('SEAL_BUSY', `${why}: ${escapePath(clone)}`, { path: clone, retryable: true });
    }
  } catch (err) {
    dir.close();
    throw err;
  }
  let done = false;
  const release = (): void => {
    if (done) return;
    done = true;
    try {
      dir.close();
    } catch {
      // nothing is held after it
    }
  };
  return { release, [Symbol.dispose]: release };
}

/** Opens (making it) the lock file; one another user made that this one may not open is SEAL_IO naming its owner. */
function openLockFile(sys: Sys, tmpFd: number, name: string, mode: number, clone: string): number {
  try {
    return sys.openat(tmpFd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode);
  } catch (err) {
    if (!hasCode(err, 'EACCES')) throw err;
    let owner: number | undefined;
    try {
      owner = sys.fstatat(tmpFd, name, AT_SYMLINK_NOFOLLOW).uid;
    } catch {
      // none there: tmp/ itself is what this user may not write (the open was to create it)
    }
    if (owner === undefined || owner === process.geteuid?.()) {
      throw new SealError('SEAL_IO', `clone lock ${TMP_DIR}/${name} cannot be made: the store's ${TMP_DIR}/ is not writable by this user (uid ${String(process.geteuid?.())}): ${escapePath(clone)}`, { path: clone, cause: err });
    }
    throw new SealError('SEAL_IO', `clone lock ${TMP_DIR}/${name} in the store belongs to uid ${owner}, who made it before shared locks were made group-writable; its owner or an admin removes it: ${escapePath(clone)}`, { path: clone, cause: err });
  }
}

function held(sys: Sys, tmp: Fd, file: Fd, name: string): CloneLock {
  let done = false;
  const release = (): void => {
    if (done) return;
    done = true;
    try {
      sys.unlinkat(tmp.fd, name, 0);
    } catch {
      // Gone already, or the store refuses now: the file is left, empty, for the next holder (its flock ends with the close).
    }
    // A close that fails (EIO) still lets go of the descriptor and its flock: the call that held the lock is done, not failed.
    for (const fd of [file, tmp]) {
      try {
        fd.close();
      } catch {
        // nothing is held after it
      }
    }
  };
  return { release, [Symbol.dispose]: release };
}
