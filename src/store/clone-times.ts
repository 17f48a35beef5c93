// clone-times.ts: the recorded mtimes of the copy roots themselves, set again once they are in the clone: an exchange can move a directory's (XFS stamps it when its `..` changes).
import { EntryTable } from '../base/entry-table.js';
import { DIR_FLAGS, openBeneath, own } from '../base/fd.js';
import type { Entries } from '../base/manifest.js';
import { keepMtimeAt } from '../base/times.js';
import type { Sys } from '../sys/native.js';

/** Whether any entry records an mtime (a table knows at once; a list is scanned, which costs no entry object). */
function keepsTimes(entries: Entries): boolean {
  if (entries instanceof EntryTable) return entries.timed;
  for (const e of entries) if (e.mtime_ns !== undefined) return true;
  return false;
}

/**
 * Sets each copy root's recorded mtime on the root now at its place in the clone open at
 * cloneFd, through the fd of the directory holding it and never through a symlink
 * (utimensat with AT_SYMLINK_NOFOLLOW); nothing when the snapshot keeps no times.
 */
export function keepRootMtimes(sys: Sys, cloneFd: number, roots: readonly string[][], entries: Entries): void {
  if (!keepsTimes(entries)) return;
  const table = EntryTable.of(entries);
  for (const parts of roots) {
    const index = table.find(parts.join('/'));
    if (index < 0) continue;
    using parent = own(sys, parts.length === 1 ? sys.openat(cloneFd, '.', DIR_FLAGS) : openBeneath(sys, cloneFd, parts.slice(0, -1), DIR_FLAGS));
    keepMtimeAt(sys, parent.fd, parts[parts.length - 1]!, table.entry(index));
  }
}
