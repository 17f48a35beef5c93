// manifest-tree.ts: a manifest's tree built below a directory fd: directories made and opened in manifest order, never through a link, each other entry handed to the caller.
import { DIR_FLAGS, openBeneath, openChildDir, own, type Fd } from '../base/fd.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import type { Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';
import { COPY_AREA, mountArea } from './layout.js';

/** Entries grouped by their parent path ('' for the area root), in manifest order; `keep`: only those it accepts. */
export function childrenOf(entries: Entries, keep?: (e: ManifestEntry) => boolean): Map<string, ManifestEntry[]> {
  const children = new Map<string, ManifestEntry[]>();
  for (const e of entries) {
    if (keep !== undefined && !keep(e)) continue;
    const cut = e.path.lastIndexOf('/');
    const parent = cut < 0 ? '' : e.path.slice(0, cut);
    let list = children.get(parent);
    if (list === undefined) children.set(parent, (list = []));
    list.push(e);
  }
  return children;
}

/** A snapshot's areas (copy/, then mounts/NNNNN/ in order) and their entries. */
export function areasOf(data: Pick<StoredSnapshot, 'entries' | 'mounts'>): { area: string; entries: Entries }[] {
  return [{ area: COPY_AREA, entries: data.entries }, ...data.mounts.map((m, i) => ({ area: mountArea(i), entries: m.entries }))];
}

/** Makes directory dirFd/name (0700) and opens it, never through a link: the directory step of buildTree unless a caller's replaces it. */
export function makeDir(sys: Sys, dirFd: number, name: string): Fd {
  sys.mkdirat(dirFd, name, 0o700);
  return own(sys, openChildDir(sys, dirFd, name));
}

/**
 * What buildTree does besides walking: what `at` each directory's entries get, and each
 * entry that is not a directory. The root's entries get buildTree's own `at`.
 */
export interface TreeSteps<At> {
  /** A file entry, named `name` in the directory open at dirFd. */
  file(dirFd: number, name: string, entry: ManifestEntry, at: At): void;
  /** A symlink entry, named `name` in the directory open at dirFd. */
  symlink(dirFd: number, name: string, entry: ManifestEntry, at: At): void;
  /** A directory entry, before it is made: its entries' `at`, disposed once they are built (default: its parent's). */
  enter?(name: string, entry: ManifestEntry, at: At): At & Disposable;
  /** Makes and opens a directory entry (default: makeDir); `at` is what enter gave its entries. */
  makeDir?(dirFd: number, name: string, entry: ManifestEntry, at: At): Fd;
  /** A directory entry, still open at dirFd, once its entries are built. */
  leave?(dirFd: number, entry: ManifestEntry): void;
}

/**
 * Builds the entries below `rel` (an area's root: '') in the directory open at dirFd,
 * in manifest order: each directory made, opened (never through a link) and built in
 * turn, each other entry handed to `steps`. Every fd it opens is closed, whatever fails.
 */
export function buildTree<At>(sys: Sys, children: ReadonlyMap<string, readonly ManifestEntry[]>, dirFd: number, at: At, steps: TreeSteps<At>, rel = ''): void {
  for (const entry of children.get(rel) ?? []) {
    const name = entry.path.slice(rel === '' ? 0 : rel.length + 1);
    if (entry.kind === 'file') steps.file(dirFd, name, entry, at);
    else if (entry.kind === 'symlink') steps.symlink(dirFd, name, entry, at);
    else {
      using inner = steps.enter?.(name, entry, at);
      using child = steps.makeDir?.(dirFd, name, entry, inner ?? at) ?? makeDir(sys, dirFd, name);
      buildTree(sys, children, child.fd, inner ?? at, steps, entry.path);
      steps.leave?.(child.fd, entry);
    }
  }
}

/** buildTree in each area of the build open at buildFd (each area's directory exists); `done` sees each area's directory once it is built. */
export function buildAreas(
  sys: Sys,
  buildFd: number,
  data: Pick<StoredSnapshot, 'entries' | 'mounts'>,
  steps: (area: string) => TreeSteps<undefined>,
  done?: (dirFd: number) => void,
  keep?: (e: ManifestEntry) => boolean,
): void {
  for (const { area, entries } of areasOf(data)) {
    using dir = own(sys, openBeneath(sys, buildFd, area.split('/'), DIR_FLAGS));
    buildTree(sys, childrenOf(entries, keep), dir.fd, undefined, steps(area));
    done?.(dir.fd);
  }
}
