// subvolumes.ts: a snapshot's directory copy roots kept as btrfs subvolumes in a store on btrfs: which roots, and sealing them once built.
import { DIR_FLAGS, openBeneath, own } from '../base/fd.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { isBelow } from '../base/paths.js';
import { sealSubvolume } from '../base/subvolume.js';
import { keepMtime, keepMtimeAt } from '../base/times.js';
import { BTRFS_SUPER_MAGIC } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';
import { childrenOf, type Children } from './manifest-tree.js';
import { giveTree, type StoreOwner } from './store-part.js';

/** Whether the directory open at fd is on btrfs: a build there keeps its directory copy roots as subvolumes. */
export function onBtrfs(sys: Sys, fd: number): boolean {
  return sys.fstatfs(fd) === BTRFS_SUPER_MAGIC;
}

/** The declared copy roots (paths as the manifest has them) that are directories. */
export function directoryRoots(declarations: readonly string[], entries: Iterable<ManifestEntry>): Set<string> {
  const roots = new Set(declarations.map((d) => d.split('/').filter((p) => p !== '' && p !== '.').join('/')));
  const dirs = new Set<string>();
  for (const e of entries) if (e.kind === 'directory' && roots.has(e.path)) dirs.add(e.path);
  return dirs;
}

/**
 * Seals each subvolume root (paths below the copy area open at copyFd) once its tree is
 * complete: with keepTimes every entry in it gets its recorded mtime first (so a snapshot
 * of it carries them into a clone), given to owner (root building in another user's
 * store), then the subvolume's read-only flag is set.
 */
export function sealStoredRoots(sys: Sys, copyFd: number, roots: readonly string[], entries: Entries, owner?: StoreOwner): void {
  if (roots.length === 0) return;
  const timed = timesOf(entries);
  for (const root of roots) {
    using dir = own(sys, openBeneath(sys, copyFd, root.split('/'), DIR_FLAGS));
    if (timed !== undefined) setTimes(sys, copyFd, root, dir.fd, timed);
    // Root building in another user's store: the subvolume is the owner's before it is read-only (then no chown is taken).
    if (owner !== undefined) giveTree(sys, dir.fd, owner);
    sealSubvolume(sys, dir.fd);
  }
}

interface Timed {
  children: Children;
  byPath: Map<string, ManifestEntry>;
}

function timesOf(entries: Entries): Timed | undefined {
  let any = false;
  for (const e of entries) if (e.mtime_ns !== undefined) {
    any = true;
    break;
  }
  if (!any) return undefined;
  return { children: childrenOf(entries), byPath: new Map(Array.from(entries, (e) => [e.path, e])) };
}

/** Sets every recorded mtime below root (root open at rootFd), directories' last: a child's time set leaves its directory's alone. */
function setTimes(sys: Sys, copyFd: number, root: string, rootFd: number, t: Timed): void {
  for (const [parent, list] of t.children) {
    if (!isBelow(parent, root)) continue;
    using dir = own(sys, parent === root ? sys.openat(rootFd, '.', DIR_FLAGS) : openBeneath(sys, copyFd, parent.split('/'), DIR_FLAGS));
    for (const e of list) keepMtimeAt(sys, dir.fd, e.path.slice(parent.length + 1), e);
  }
  const own_ = t.byPath.get(root);
  if (own_ !== undefined) keepMtime(sys, rootFd, own_);
}
