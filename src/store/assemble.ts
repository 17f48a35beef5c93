// assemble.ts: builds a snapshot's tree from its manifest after a deferred walk: directories, links, and files placed by a content source.
import { DIR_FLAGS, openBeneath, openChildDir, own } from '../base/fd.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import type { Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';
import { COPY_AREA, mountArea } from './layout.js';

/** Puts one file entry's bytes at dirFd/name, frozen (0400/0500 by its captured mode). */
export type PlaceFile = (dirFd: number, name: string, entry: ManifestEntry) => void;

/** Entries grouped by their parent path ('' for the area root), in manifest order. */
export function childrenOf(entries: Entries): Map<string, ManifestEntry[]> {
  const children = new Map<string, ManifestEntry[]>();
  for (const e of entries) {
    const cut = e.path.lastIndexOf('/');
    const parent = cut < 0 ? '' : e.path.slice(0, cut);
    let list = children.get(parent);
    if (list === undefined) children.set(parent, (list = []));
    list.push(e);
  }
  return children;
}

function buildDir(sys: Sys, children: Map<string, ManifestEntry[]>, rel: string, dirFd: number, place: PlaceFile): void {
  for (const entry of children.get(rel) ?? []) {
    const name = entry.path.slice(rel === '' ? 0 : rel.length + 1);
    if (entry.kind === 'file') place(dirFd, name, entry);
    else if (entry.kind === 'symlink') sys.symlinkat(entry.link_target, dirFd, name);
    else {
      sys.mkdirat(dirFd, name, 0o700);
      using child = own(sys, openChildDir(sys, dirFd, name));
      buildDir(sys, children, entry.path, child.fd, place);
      sys.fchmod(child.fd, 0o500);
    }
  }
}

/** Builds each area (copy/, mounts/NNNNN/) of the build open at buildFd from the snapshot's entries; every directory ends 0500. */
export function assembleAreas(sys: Sys, buildFd: number, data: Pick<StoredSnapshot, 'entries' | 'mounts'>, place: PlaceFile): void {
  const areas: [string, Entries][] = [[COPY_AREA, data.entries], ...data.mounts.map((m, i): [string, Entries] => [mountArea(i), m.entries])];
  for (const [area, entries] of areas) {
    using dir = own(sys, openBeneath(sys, buildFd, area.split('/'), DIR_FLAGS));
    buildDir(sys, childrenOf(entries), '', dir.fd, place);
    sys.fchmod(dir.fd, 0o500);
  }
}
