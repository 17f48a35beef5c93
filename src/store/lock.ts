// lock.ts: the store lock: shared while a snapshot is published or read, exclusive while snapshots are removed.
import { dirname } from 'node:path';

import { SealError, isSealError } from '../base/errors.js';
import { openRealDir, own } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { throwIfRefused } from '../base/refusal.js';
import { LOCK_EX, LOCK_SH, LOCK_UN, O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_RDWR, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { LOCK_NAME } from './layout.js';
import { checkSnapshot } from './trust.js';

export interface LockOptions {
  /** Create the lock file when missing (writers); a reader of a store that never had one runs unlocked. */
  create?: boolean;
  /** The mode a lock file is created with (default 0600; a shared store's 0660, set past the umask). */
  mode?: number;
  /** Called with the lock file's fstat (the store trust check, at open). */
  check?: (st: Stat, shown: string) => void;
}

function lockError(err: unknown, storeRoot: string): SealError {
  const shown = escapePath(`${storeRoot}/${LOCK_NAME}`);
  throwIfRefused(err, `store lock cannot be taken: ${shown}`);
  if (hasCode(err, 'ELOOP')) return new SealError('SEAL_SYMLINK', `store lock must not be a symlink: ${shown}`, { cause: err });
  if (hasCode(err, 'EISDIR', 'ENXIO')) return new SealError('SEAL_CORRUPT', `store lock is not a regular file: ${shown}`, { cause: err });
  return new SealError('SEAL_UNAVAILABLE', `store lock is unavailable: ${shown}: ${escapePath((err as Error).message)}`, { cause: err });
}

/**
 * Opens the store's lock file below the store directory (never through a link); -1 when
 * missing and not created. Where the store's filesystem is mounted read-only (EROFS), it is
 * opened for reading (an flock needs no write access), and `onReadOnly` is called.
 */
export function openLock(sys: Sys, storeRoot: string, options: LockOptions, onReadOnly?: () => void): number {
  const create = options.create !== false;
  const mode = options.mode ?? 0o600;
  let fd: number;
  {
    using root = own(sys, openRealDir(sys, storeRoot, 'store directory'));
    const open = (flags: number): number => sys.openat(root.fd, LOCK_NAME, flags | O_NOFOLLOW | O_NONBLOCK, mode);
    try {
      try {
        fd = open(create ? O_RDWR | O_CREAT : O_RDONLY);
      } catch (err) {
        // A store on a filesystem mounted read-only: its lock is there, and an flock needs no write access.
        if (!(create && hasCode(err, 'EROFS'))) throw err;
        onReadOnly?.();
        fd = open(O_RDONLY);
      }
    } catch (err) {
      if (!create && hasCode(err, 'ENOENT')) return -1;
      throw lockError(err, storeRoot);
    }
  }
  using lock = own(sys, fd);
  let st;
  try {
    st = sys.fstat(lock.fd);
  } catch (err) {
    throw lockError(err, storeRoot);
  }
  const shown = escapePath(`${storeRoot}/${LOCK_NAME}`);
  if (!isReg(st.mode)) throw new SealError('SEAL_CORRUPT', `store lock is not a regular file: ${shown}`);
  // The umask may have taken a shared store's group bits off a new lock: this owner puts them back.
  if (create && (st.mode & 0o777) !== mode && (mode & 0o070) !== 0 && st.uid === process.geteuid!()) {
    sys.fchmod(lock.fd, mode);
    st = { ...st, mode: (st.mode & ~0o7777) | mode };
  }
  options.check?.(st, shown);
  return lock.release();
}

/** Runs fn holding the store lock (shared or exclusive); released however fn ends. */
export function withStoreLock<T>(sys: Sys, storeRoot: string, exclusive: boolean, fn: () => T, options: LockOptions = {}): T {
  const fd = openLock(sys, storeRoot, options);
  if (fd < 0) return fn();
  using lock = own(sys, fd);
  return holdingLock(sys, storeRoot, lock.fd, exclusive, fn);
}

/** Runs fn holding the store lock open at fd (openLock's), shared or exclusive; released however fn ends (the fd stays the caller's). */
export function holdingLock<T>(sys: Sys, storeRoot: string, fd: number, exclusive: boolean, fn: () => T): T {
  try {
    sys.flock(fd, exclusive ? LOCK_EX : LOCK_SH);
  } catch (err) {
    throw lockError(err, storeRoot);
  }
  try {
    return fn();
  } finally {
    try {
      sys.flock(fd, LOCK_UN);
    } catch {
      // Closing the fd (right after) releases the lock too; what fn returned (an fd it handed over) must not be lost.
    }
  }
}

function statDir(sys: Sys, path: string): Stat {
  using dir = own(sys, openRealDir(sys, path, 'store snapshots directory'));
  return sys.fstat(dir.fd);
}

/**
 * Runs fn with the published snapshot's directory open, holding the store's shared
 * lock (an rm waits until fn returns). A snapshot already removed is SEAL_UNAVAILABLE;
 * one that someone you do not trust made or can write is SEAL_UNTRUSTED.
 */
export function readingSnapshot<T>(sys: Sys, snapshotRoot: string, digest: string, fn: (snapshotFd: number) => T): T {
  return withStoreLock(
    sys,
    dirname(dirname(snapshotRoot)),
    false,
    () => {
      let fd: number;
      try {
        fd = openRealDir(sys, snapshotRoot, 'snapshot');
      } catch (err) {
        if (isSealError(err, 'SEAL_UNAVAILABLE') && hasCode(err.cause, 'ENOENT')) {
          throw new SealError('SEAL_UNAVAILABLE', `snapshot was removed: ${digest}`, { cause: err.cause });
        }
        throw err;
      }
      using root = own(sys, fd);
      checkSnapshot(sys, root.fd, () => statDir(sys, dirname(snapshotRoot)), `snapshots/${digest}`);
      return fn(root.fd);
    },
    { create: false },
  );
}
