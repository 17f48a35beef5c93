// lock.ts: the store lock: shared while a snapshot is published, exclusive while snapshots are removed.
import { own } from '../base/fd.js';
import { AT_FDCWD, LOCK_EX, LOCK_SH, LOCK_UN, O_CREAT, O_NOFOLLOW, O_RDWR } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';
import { LOCK_NAME } from './layout.js';

/** Runs fn holding the store lock (shared or exclusive); released however fn ends. */
export function withStoreLock<T>(sys: Sys, storeRoot: string, exclusive: boolean, fn: () => T): T {
  using lock = own(sys, sys.openat(AT_FDCWD, `${storeRoot}/${LOCK_NAME}`, O_RDWR | O_CREAT | O_NOFOLLOW, 0o600));
  sys.flock(lock.fd, exclusive ? LOCK_EX : LOCK_SH);
  try {
    return fn();
  } finally {
    sys.flock(lock.fd, LOCK_UN);
  }
}
