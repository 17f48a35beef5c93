// parts-usage.ts: what a store holds besides its snapshots (stat caches and summary records, clone ledgers, unfinished builds), as du counts it.
import { openChildDir, openRealDir, own } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { CACHE_DIR, CLONES_DIR, TMP_DIR } from './layout.js';
import { partNotDirectory } from './store-dir.js';
import { diskBytesAt } from './usage.js';

/** One part of a store: how many names it holds, and the bytes they take on disk. */
export interface PartUsage {
  /** Names directly in the part's directory. */
  entries: number;
  /** st_blocks × 512 of the directory and all below it, an inode counted once in the part. */
  diskBytes: number;
  /** Set when this user may not list the part (another member's, in a shared store): its figures are then 0. */
  unreadable?: true;
}

/** What a store holds besides its published snapshots (which `usage()` counts). */
export interface StorePartsUsage {
  /** `cache/`: one stat cache per source captured with the stat cache on, and each user's summary record of each snapshot (see `summary`); gc drops those no snapshot of the store uses. */
  statCaches: PartUsage;
  /** `clones/`: one ledger per clone materialized from the store; gc drops those whose clone or snapshot is gone. */
  cloneLedgers: PartUsage;
  /**
   * `tmp/`: captures and pulls under way, what one that died left (gc sweeps what no live
   * process holds), and downloads a later pull resumes. A file a build shares with a
   * snapshot by a hard link counts here and in that snapshot.
   */
  builds: PartUsage;
}

function partUsage(sys: Sys, storeFd: number, storeRoot: string, name: string): PartUsage {
  let fd: number;
  try {
    fd = openChildDir(sys, storeFd, name);
  } catch (err) {
    // A store made before the part existed has none: nothing held there.
    if (hasCode(err, 'ENOENT')) return { entries: 0, diskBytes: 0 };
    if (hasCode(err, 'EACCES')) return { entries: 0, diskBytes: 0, unreadable: true };
    // As the store's open says it: a link there is SEAL_SYMLINK, a file SEAL_CORRUPT, neither ever followed.
    if (hasCode(err, 'ELOOP', 'ENOTDIR')) throw partNotDirectory(sys, storeFd, name, escapePath(`${storeRoot}/${name}`), err);
    throw err;
  }
  using dir = own(sys, fd);
  try {
    // A build, lock or cache gone while it was counted (the store in use) counts as gone.
    return { entries: sys.readdir(dir.fd).length, diskBytes: diskBytesAt(sys, dir.fd, new Set(), undefined, true) };
  } catch (err) {
    // Something below is another user's (a member's build in a shared store): the part is not this user's to count.
    if (hasCode(err, 'EACCES')) return { entries: 0, diskBytes: 0, unreadable: true };
    throw err;
  }
}

/** The store's parts besides its snapshots: its stat caches, clone ledgers and unfinished builds. */
export function storePartsUsage(sys: Sys, storeRoot: string): StorePartsUsage {
  using store = own(sys, openRealDir(sys, storeRoot, 'store'));
  return { statCaches: partUsage(sys, store.fd, storeRoot, CACHE_DIR), cloneLedgers: partUsage(sys, store.fd, storeRoot, CLONES_DIR), builds: partUsage(sys, store.fd, storeRoot, TMP_DIR) };
}
