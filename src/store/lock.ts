// lock.ts: the store lock: shared while a snapshot is published, exclusive while snapshots are removed.
import { closeQuietly } from '../base/fd.js';
import { AT_FDCWD, LOCK_EX, LOCK_SH, LOCK_UN, O_CREAT, O_NOFOLLOW, O_RDWR } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';
import { LOCK_NAME } from './layout.js';


export function withStoreLock<T>(sys: Sys, storeRoot: string, exclusive: boolean, fn: () => T): T {
  const fd = sys.openat(AT_FDCWD, `${storeRoot}/${LOCK_NAME}`, O_RDWR | O_CREAT | O_NOFOLLOW, 0o600);
  try {
    sys.flock(fd, exclusive ? LOCK_EX : LOCK_SH);
    try {
      return fn();
    } finally {
      sys.flock(fd, LOCK_UN);
    }
  } finally {
    closeQuietly(sys, fd);
  }
}
