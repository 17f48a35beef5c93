// materialize-subvolume.ts: a directory copy root materialized as one writable btrfs snapshot of its read-only subvolume in the store, or the reason it cannot be.
import { openChildDir, own, type Fd } from '../base/fd.js';
import type { ManifestEntry } from '../base/manifest.js';
import { escapePath, isBelow } from '../base/paths.js';
import { subvolumeFlags } from '../base/subvolume.js';
import { BTRFS_SUBVOL_RDONLY } from '../sys/constants.js';
import { hasCode, isSystemError } from '../sys/errno.js';
import type { CloneLinks } from './clone-links.js';
import type { Children } from './manifest-tree.js';
import { madeEntries, type Run } from './materialize-run.js';

/** Why the stored copy root open at storeDir cannot be snapshotted into the clone, or undefined when it can be tried. */
function whyNoSnapshot(run: Run, storeDir: number): string | undefined {
  if (run.mode === 'never') return "reflink: 'never' asks for copies that share nothing with the store";
  const flags = subvolumeFlags(run.sys, storeDir);
  if (flags === undefined) return 'the copy root is not a subvolume in the store (captured before subvolumes, pulled, or built where the kernel made none)';
  if ((flags & BTRFS_SUBVOL_RDONLY) === 0) return "the copy root's subvolume in the store is writable (verify the snapshot)";
  const uid = run.sys.fstat(storeDir).uid;
  // A snapshot keeps its source's owners: the clone would not be this user's.
  if (uid !== process.geteuid!()) return `the copy root's subvolume in the store belongs to uid ${uid}, not to this user`;
  return undefined;
}

/** What a snapshot of the root at `root` puts in the clone: the directories of children below it, and counts by kind. */
function subtreeOf(children: Children, root: string): { keys: string[]; files: number; directories: number; links: ManifestEntry[]; bytes: number } {
  const out = { keys: [] as string[], files: 0, directories: 0, links: [] as ManifestEntry[], bytes: 0 };
  for (const [key, list] of children) {
    if (!isBelow(key, root)) continue;
    out.keys.push(key);
    for (const e of list) {
      if (e.kind === 'file') {
        out.files++;
        out.bytes += e.size;
      } else if (e.kind === 'directory') out.directories++;
      else out.links.push(e);
    }
  }
  return out;
}

/**
 * The root `entry` as one writable snapshot (BTRFS_IOC_SNAP_CREATE_V2) of its read-only
 * subvolume in the store (open at storeDir), made as stageDir/name: its tree is already a
 * clone's (directories 0700, files 0600/0700, recorded mtimes), so nothing below it is
 * built. undefined when it cannot be (the reason goes in the report): it is built per file.
 */
export function snapshotRoot(run: Run, children: Children, stageDir: number, name: string, entry: ManifestEntry, storeDir: Fd, links: CloneLinks): Fd | undefined {
  const { sys } = run;
  let reason = whyNoSnapshot(run, storeDir.fd);
  const subtree = subtreeOf(children, entry.path);
  // Links are checked against the rule as they would be made (a crafted document is refused either way).
  for (const link of subtree.links) links.check(link);
  if (reason === undefined) {
    try {
      sys.btrfs_snap_create(stageDir, name, storeDir.fd, 0);
    } catch (err) {
      if (!isSystemError(err)) throw err;
      reason = hasCode(err, 'EXDEV', 'ENOTTY') ? `the clone is not on the store's btrfs filesystem (${escapePath(err.message)})` : `the kernel refused the snapshot (${escapePath(err.message)})`;
    }
  }
  if (reason !== undefined) {
    run.report.fallbacks.push({ root: entry.path, reason });
    return undefined;
  }
  const dir = own(sys, openChildDir(sys, stageDir, name));
  for (const key of subtree.keys) children.delete(key);
  run.report.snapshotted++;
  run.report.files += subtree.files;
  run.report.directories += subtree.directories;
  run.report.symlinks += subtree.links.length;
  run.bytes += subtree.bytes;
  run.progress(madeEntries(run.report), run.bytes);
  return dir;
}
