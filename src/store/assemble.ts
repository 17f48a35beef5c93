// assemble.ts: builds a snapshot's tree from its manifest after a deferred walk: directories, links, and files placed by a content source.
import { DIR_FLAGS, openBeneath, own, type Fd } from '../base/fd.js';
import type { ManifestEntry } from '../base/manifest.js';
import { makeSubvolume } from '../base/subvolume.js';
import type { Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';
import { COPY_AREA } from './layout.js';
import { buildAreas, makeDir, type TreeSteps } from './manifest-tree.js';
import { isBelow } from '../base/paths.js';

/**
 * Puts one file entry's bytes at dirFd/name: frozen (0400/0500 by its captured mode), or,
 * `sealed` (inside a subvolume copy root), with a clone's mode (0600/0700).
 */
export type PlaceFile = (dirFd: number, name: string, entry: ManifestEntry, sealed: boolean) => void;

/**
 * Builds each area (copy/, mounts/NNNNN/) of the build open at buildFd from the snapshot's
 * entries; every directory ends 0500, but inside the copy roots in `subvolumes` (made
 * subvolumes where the kernel will: those are returned, their trees at a clone's modes,
 * to be sealed once built).
 */
export function assembleAreas(sys: Sys, buildFd: number, data: Pick<StoredSnapshot, 'entries' | 'mounts'>, place: PlaceFile, subvolumes: ReadonlySet<string> = new Set()): string[] {
  const freeze = (dirFd: number): void => sys.fchmod(dirFd, 0o500);
  const made: string[] = [];
  const sealed = (path: string): boolean => made.some((root) => isBelow(path, root));
  const plain: TreeSteps<undefined> = {
    file: (dirFd, name, entry) => place(dirFd, name, entry, false),
    symlink: (dirFd: number, name: string, entry: ManifestEntry) => sys.symlinkat(entry.link_target, dirFd, name),
    leave: freeze,
  };
  const copy: TreeSteps<undefined> = {
    file: (dirFd, name, entry) => place(dirFd, name, entry, sealed(entry.path)),
    symlink: plain.symlink,
    makeDir: (dirFd, name, entry): Fd => {
      if (!subvolumes.has(entry.path) || !makeSubvolume(sys, dirFd, name)) return makeDir(sys, dirFd, name);
      made.push(entry.path);
      const dir = own(sys, openBeneath(sys, dirFd, [name], DIR_FLAGS));
      sys.fchmod(dir.fd, 0o700);
      return dir;
    },
    leave: (dirFd, entry) => {
      if (!sealed(entry.path)) freeze(dirFd);
    },
  };
  buildAreas(sys, buildFd, data, (area) => (area === COPY_AREA && subvolumes.size > 0 ? copy : plain), freeze);
  return made;
}
