// read-only.ts: the typed refusal of every call that would write a store on a filesystem mounted read-only (a volume shared read-only across runners; found at its open, by its lock).
import { constants } from 'node:os';

import { SealError } from '../base/errors.js';
import { escapePath } from '../base/paths.js';
import { systemError } from '../sys/errno.js';

/** What a call that would write a read-only store (`what`: `capture`, `remove`, …) is told: SEAL_IO, its cause an EROFS system error. */
export function readOnlyStore(what: string, root: string): SealError {
  return new SealError('SEAL_IO', `store is on a read-only filesystem: ${what} cannot write it: ${escapePath(root)} (read, verify, materialize, diff and reset from it work; capture, pull, remove and gc need it writable)`, {
    path: root,
    cause: systemError(-constants.errno.EROFS, 'open', root),
  });
}
