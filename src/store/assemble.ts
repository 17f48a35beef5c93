// assemble.ts: builds a snapshot's tree from its manifest after a deferred walk: directories, links, and files placed by a content source.
import type { ManifestEntry } from '../base/manifest.js';
import type { Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';
import { buildAreas } from './manifest-tree.js';

/** Puts one file entry's bytes at dirFd/name, frozen (0400/0500 by its captured mode). */
export type PlaceFile = (dirFd: number, name: string, entry: ManifestEntry) => void;

/** Builds each area (copy/, mounts/NNNNN/) of the build open at buildFd from the snapshot's entries; every directory ends 0500. */
export function assembleAreas(sys: Sys, buildFd: number, data: Pick<StoredSnapshot, 'entries' | 'mounts'>, place: PlaceFile): void {
  const freeze = (dirFd: number): void => sys.fchmod(dirFd, 0o500);
  const steps = {
    file: place,
    symlink: (dirFd: number, name: string, entry: ManifestEntry) => sys.symlinkat(entry.link_target, dirFd, name),
    leave: freeze,
  };
  buildAreas(sys, buildFd, data, () => steps, freeze);
}
