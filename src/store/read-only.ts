// read-only.ts: a store on a filesystem mounted read-only (a store bound read-only into runners' containers): how a call finds it, and the typed refusal of every call that would write it.
import { constants } from 'node:os';

import { SealError } from '../base/errors.js';
import { escapePath } from '../base/paths.js';
import { O_NOFOLLOW, O_NONBLOCK, O_RDWR } from '../sys/constants.js';
import { hasCode, systemError } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { LOCK_NAME } from './layout.js';

/**
 * Whether the store directory open at storeFd is on a filesystem mounted read-only: its
 * lock cannot be opened for writing (EROFS). What a clone call asks before it trusts a
 * ledger there: one left from the store's writable days can be neither dropped nor kept
 * true to the clone, so such a store holds none.
 */
export function storeOnReadOnly(sys: Sys, storeFd: number): boolean {
  let fd: number;
  try {
    fd = sys.openat(storeFd, LOCK_NAME, O_RDWR | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    return hasCode(err, 'EROFS');
  }
  sys.close(fd);
  return false;
}

/** What a call that would write a read-only store (`what`: `capture`, `remove`, …) is told: SEAL_IO, its cause an EROFS system error. */
export function readOnlyStore(what: string, root: string): SealError {
  return new SealError('SEAL_IO', `store is on a read-only filesystem: ${what} cannot write it: ${escapePath(root)} (read, verify, materialize, diff and reset from it work; capture, pull, remove and gc need it writable)`, {
    path: root,
    cause: systemError(-constants.errno.EROFS, 'open', root),
  });
}
