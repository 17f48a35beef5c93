// manifest-tree.ts: a manifest's tree built below a directory fd: directories made and opened in manifest order, never through a link, each other entry handed to the caller.
import { DIR_FLAGS, openBeneath, openChildDir, own, type Fd } from '../base/fd.js';
import { EntryTable } from '../base/entry-table.js';
import type { Entries, EntryKind, ManifestEntry } from '../base/manifest.js';
import { compareUtf8, escapePath } from '../base/paths.js';
import { throwIfRefused } from '../base/refusal.js';
import type { Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';
import { COPY_AREA, mountArea } from './layout.js';

/**
 * A manifest's entries by their place in manifest order, read a field at a time: a table's
 * in place, without the object (its path as a string, its sha256 in hex) `at` makes.
 */
export class EntryReader {
  readonly #table: EntryTable | undefined;
  readonly #list: readonly ManifestEntry[];

  constructor(entries: Entries) {
    this.#table = entries instanceof EntryTable ? entries : undefined;
    this.#list = this.#table !== undefined ? [] : Array.isArray(entries) ? (entries as ManifestEntry[]) : Array.from(entries);
  }

  get length(): number {
    return this.#table?.length ?? this.#list.length;
  }

  kind(n: number): EntryKind {
    return this.#table !== undefined ? this.#table.kindOf(this.#table.indexAt(n)) : this.#list[n]!.kind;
  }

  size(n: number): number {
    return this.#table !== undefined ? this.#table.size(this.#table.indexAt(n)) : this.#list[n]!.size;
  }

  /** The mtime the entry records in nanoseconds (keepTimes), else undefined. */
  mtimeNs(n: number): bigint | undefined {
    if (this.#table !== undefined) return this.#table.mtimeNs(this.#table.indexAt(n));
    const text = this.#list[n]!.mtime_ns;
    return text === undefined ? undefined : BigInt(text);
  }

  path(n: number): string {
    return this.#table !== undefined ? this.#table.path(this.#table.indexAt(n)) : this.#list[n]!.path;
  }

  /** The manifest index of `path` (the entries in manifest order: sorted by path, as a checked document is), or -1: by bisection. */
  indexOf(path: string): number {
    let lo = 0;
    let hi = this.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const order = compareUtf8(this.path(mid), path);
      if (order === 0) return mid;
      if (order < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** The whole entry (made on each call for a table). */
  at(n: number): ManifestEntry {
    return this.#table !== undefined ? this.#table.at(n) : this.#list[n]!;
  }
}

/**
 * Entries grouped by their parent path ('' for the area root), in manifest order. Each group
 * holds indices into the list, made into entry objects only when it is read (`get`,
 * iteration): a 50k-entry snapshot keeps about 4 bytes an entry here, not an object each.
 */
export class Children implements Iterable<[string, ManifestEntry[]]> {
  readonly #groups = new Map<string, number[]>();
  readonly #at: (i: number) => ManifestEntry;
  /** With `named`: each group's entries by their name (what a walk of a clone looks its names up in). */
  readonly #names: Map<string, Map<string, number>> | undefined;

  /** `keep`: only the entries it accepts; `named`: also found by name (child). */
  constructor(entries: Entries, keep?: (e: ManifestEntry) => boolean, named = false) {
    const reader = new EntryReader(entries);
    this.#at = (i) => reader.at(i);
    this.#names = named ? new Map() : undefined;
    if (entries instanceof EntryTable && keep === undefined) {
      // Only the paths are read: no entry object is made while grouping.
      for (let i = 0; i < entries.length; i++) this.#add(entries.path(entries.indexAt(i)), i);
      return;
    }
    let i = 0;
    for (const e of entries) {
      if (keep === undefined || keep(e)) this.#add(e.path, i);
      i++;
    }
  }

  /** The parent #add met last, and its group and names: entries in manifest order mostly share their parent with the one before. */
  #lastParent: string | undefined;
  #lastGroup: number[] = [];
  #lastNames: Map<string, number> | undefined;

  #add(path: string, i: number): void {
    const cut = path.lastIndexOf('/');
    const last = this.#lastParent;
    // The same parent as the entry before: its group found without slicing and hashing the parent again.
    if (last !== undefined && (cut < 0 ? last === '' : cut === last.length && path.startsWith(last))) {
      this.#lastGroup.push(i);
      this.#lastNames?.set(path.slice(cut + 1), i);
      return;
    }
    const parent = cut < 0 ? '' : path.slice(0, cut);
    let group = this.#groups.get(parent);
    if (group === undefined) this.#groups.set(parent, (group = []));
    group.push(i);
    this.#lastParent = parent;
    this.#lastGroup = group;
    if (this.#names === undefined) return;
    let names = this.#names.get(parent);
    if (names === undefined) this.#names.set(parent, (names = new Map()));
    names.set(path.slice(cut + 1), i);
    this.#lastNames = names;
  }

  /** The index of the entry named `name` whose parent is `parent` (made `named`), or undefined. */
  child(parent: string, name: string): number | undefined {
    return this.#names!.get(parent)?.get(name);
  }

  /** The entry at manifest index i (made on each call for a table). */
  entry(i: number): ManifestEntry {
    return this.#at(i);
  }

  /** The entries whose parent is `parent`, in manifest order (undefined: none). */
  get(parent: string): ManifestEntry[] | undefined {
    return this.#groups.get(parent)?.map(this.#at);
  }

  /** The manifest indices of the entries whose parent is `parent`, in manifest order (undefined: none). */
  indices(parent: string): readonly number[] | undefined {
    return this.#groups.get(parent);
  }

  /** Drops the group of `parent` (a subtree made some other way). */
  delete(parent: string): void {
    this.#groups.delete(parent);
  }

  *[Symbol.iterator](): Iterator<[string, ManifestEntry[]]> {
    for (const [parent, group] of this.#groups) yield [parent, group.map(this.#at)];
  }
}

/** The manifest index of `path` in entries (in manifest order: sorted by path, as a checked document is), or -1. */
export function indexOfPath(entries: Entries, path: string): number {
  return new EntryReader(entries).indexOf(path);
}

/** Entries grouped by their parent path ('' for the area root), in manifest order; `keep`: only those it accepts. */
export function childrenOf(entries: Entries, keep?: (e: ManifestEntry) => boolean): Children {
  return new Children(entries, keep);
}

/** Every entry grouped by its parent and found by its name there: for walking a clone against the manifest. */
export function namedChildrenOf(entries: Entries): Children {
  return new Children(entries, undefined, true);
}

/** A snapshot's areas (copy/, then mounts/NNNNN/ in order) and their entries. */
export function areasOf(data: Pick<StoredSnapshot, 'entries' | 'mounts'>): { area: string; entries: Entries }[] {
  return [{ area: COPY_AREA, entries: data.entries }, ...data.mounts.map((m, i) => ({ area: mountArea(i), entries: m.entries }))];
}

/**
 * Makes directory dirFd/name (0700) and opens it, never through a link: the directory step
 * of buildTree unless a caller's replaces it. Below a setgid directory the kernel makes it
 * setgid too (02700): that bit is cleared, so it is 0700 as the snapshot's trees promise.
 */
export function makeDir(sys: Sys, dirFd: number, name: string): Fd {
  sys.mkdirat(dirFd, name, 0o700);
  const dir = own(sys, openChildDir(sys, dirFd, name));
  try {
    // Only that bit: a filesystem with fixed modes (vfat) refuses a chmod it cannot keep.
    if ((sys.fstat(dir.fd).mode & 0o2000) !== 0) sys.fchmod(dir.fd, 0o700);
  } catch (err) {
    dir.close();
    throw err;
  }
  return dir;
}

/**
 * What buildTree does besides walking: what `at` each directory's entries get, and each
 * entry that is not a directory. The root's entries get buildTree's own `at`.
 */
export interface TreeSteps<At> {
  /** A file entry (manifest index `index`), named `name` in the directory open at dirFd. */
  file(dirFd: number, name: string, entry: ManifestEntry, at: At, index: number): void;
  /** A symlink entry (manifest index `index`), named `name` in the directory open at dirFd. */
  symlink(dirFd: number, name: string, entry: ManifestEntry, at: At, index: number): void;
  /** A directory entry, before it is made: its entries' `at`, disposed once they are built (default: its parent's). */
  enter?(name: string, entry: ManifestEntry, at: At): At & Disposable;
  /** Makes and opens a directory entry (default: makeDir); `at` is what enter gave its entries. */
  makeDir?(dirFd: number, name: string, entry: ManifestEntry, at: At): Fd;
  /** A directory entry (manifest index `index`), still open at dirFd, once its entries are built. */
  leave?(dirFd: number, entry: ManifestEntry, index: number): void;
}

/**
 * Builds the entries below `rel` (an area's root: '') in the directory open at dirFd,
 * in manifest order: each directory made, opened (never through a link) and built in
 * turn, each other entry handed to `steps`. Every fd it opens is closed, whatever fails.
 */
export function buildTree<At>(sys: Sys, children: Children, dirFd: number, at: At, steps: TreeSteps<At>, rel = ''): void {
  for (const index of children.indices(rel) ?? []) {
    const entry = children.entry(index);
    const name = entry.path.slice(rel === '' ? 0 : rel.length + 1);
    try {
      if (entry.kind === 'file') steps.file(dirFd, name, entry, at, index);
      else if (entry.kind === 'symlink') steps.symlink(dirFd, name, entry, at, index);
      else {
        using inner = steps.enter?.(name, entry, at);
        using child = steps.makeDir?.(dirFd, name, entry, inner ?? at) ?? makeDir(sys, dirFd, name);
        buildTree(sys, children, child.fd, inner ?? at, steps, entry.path);
        steps.leave?.(child.fd, entry, index);
      }
    } catch (err) {
      // The kernel refusing to make it (no space, no quota, an I/O error): SEAL_IO naming the entry, not a bare pwrite.
      throwIfRefused(err, `could not make ${escapePath(entry.path)}`, entry.path);
      throw err;
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
