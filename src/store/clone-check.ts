// clone-check.ts: checkClone: re-hashes a clone's copy roots against a manifest and names every difference, and the in-progress marker.
import { CHUNK_BYTES, hashAt } from '../base/io.js';
import { openChildDir, openRealDir, own, walkDown, type Fd } from '../base/fd.js';
import { inCloneDir } from './clone-changing.js';
import { keepsParentRule, statBlocksOf, statOrNull, statOrUndefinedAt } from './clone-paths.js';
import { compareUtf8, nameText } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, isDir, isLink, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import type { StatBlocks } from '../sys/stat-each.js';
import { hasMarker } from './clone-stage.js';
import type { StoredSnapshot } from './document.js';
import { mtimeDiffers, sameMtime } from '../base/times.js';
import { Excludes, matchedName } from '../capture/exclude.js';
import { cloneFileMode } from '../base/subvolume.js';
import type { Ledger } from './clone-ledger.js';
import { EntryReader, namedChildrenOf, type Children } from './manifest-tree.js';

export interface CloneReport {
  /** No difference and no marker: the clone's copy roots are exactly the snapshot's. */
  ok: boolean;
  /** A materialize was interrupted (or is running): `.treeseal-materializing` is in the clone. */
  marker: boolean;
  /** Paths inside the copy roots the manifest does not have (the top of an added subtree); what the snapshot's exclude patterns leave out is not listed. */
  added: string[];
  /** Manifest paths missing from the clone. */
  removed: string[];
  /** Paths whose kind, size, bytes or link target differ, or whose mtime differs from the one recorded (keepTimes). */
  changed: string[];
  /**
   * Directories of the snapshot this user may not list or search (EACCES: one made mode 0,
   * 0100 or 0600, without root): each is `changed` too (its mode is not the one recorded), and what lies
   * below it is not known, so none of its entries is `removed`. `reset` repairs them.
   */
  unreadable: string[];
  /** Files hashed and their bytes. */
  files: number;
  bytes: number;
}

interface Check {
  sys: Sys;
  /** Compare with this ledger's identities instead of hashing (diff). */
  ledger: Ledger | undefined;
  /** The manifest's entries by their index in manifest order, and the index of each by path. */
  entries: EntryReader;
  /** The manifest's entries by parent and name (what a directory's listing is looked up in). */
  children: Children;
  /** 1 for each manifest index the walk found. */
  seen: Uint8Array;
  report: CloneReport;
  buffer: Buffer;
  /** The snapshot's exclude patterns: an entry they leave out is no difference, as a capture of the clone would leave it out. */
  excludes: Excludes | undefined;
  /** The directories in report.unreadable. */
  unreadable: Set<string>;
  /** The clone directory's owner: whose the directories above a root must be. */
  owner: number;
}

/** Checks manifest entry `index`, named `name` in the directory at dirfd; st: what stands there (undefined: looked at here; null: nothing). */
function checkEntry(c: Check, dirfd: number, name: string, path: string, index: number, st: Stat | null = statOrNull(c.sys, dirfd, name)): void {
  if (st === null) return;
  c.seen[index] = 1;
  if (c.ledger !== undefined && c.entries.kind(index) === 'file') {
    // The common case of a diff, read from the manifest field by field: the ledger's identity, the file not opened.
    const mtime = c.entries.mtimeNs(index);
    if (!isReg(st.mode) || st.size !== c.entries.size(index) || (mtime !== undefined && !sameMtime(st.mtimeNs, mtime)) || !c.ledger.same(index, st)) return void c.report.changed.push(path);
    // Where the identity does not prove the bytes (tmpfs; a record as new as the ledger), the file is hashed as checkClone hashes it.
    if (c.ledger.trustsBytes(index)) return;
  }
  const want = c.entries.at(index);
  if (want.kind === 'directory') {
    if (!isDir(st.mode)) return void c.report.changed.push(path);
    // The mode materialize gave it (0700), or the one the ledger recorded.
    if (mtimeDiffers(st, want) || (st.mode & 0o7777) !== (c.ledger === undefined ? 0o700 : c.ledger.modeAt(index))) c.report.changed.push(path);
    const fd = openListable(c, dirfd, name, path);
    if (fd === undefined) return;
    using dir = own(c.sys, fd);
    checkDir(c, dir.fd, path);
    return;
  }
  if (want.kind === 'symlink') {
    // The link itself, never followed: its target must be the manifest's.
    if (!isLink(st.mode) || c.sys.readlinkat(dirfd, name) !== want.link_target || mtimeDiffers(st, want)) c.report.changed.push(path);
    return;
  }
  if (!isReg(st.mode) || st.size !== want.size || mtimeDiffers(st, want)) return void c.report.changed.push(path);
  // A mode other than the one materialize gives (0600, 0700 for a recorded executable): changed, its bytes unread.
  if (c.ledger === undefined && (st.mode & 0o7777) !== cloneFileMode(want.mode)) return void c.report.changed.push(path);
  const got = hashAt(c.sys, c.buffer, dirfd, name);
  c.report.files++;
  c.report.bytes += got.size;
  if (got.size !== want.size || got.sha256 !== want.sha256) c.report.changed.push(path);
}

/**
 * Opens the snapshot's directory dirfd/name to list it; undefined where this user may not
 * (EACCES), the path then `unreadable`, and `changed` where the mode check before did not
 * already say so (a directory this user may not list has another mode than it was given).
 */
function openListable(c: Check, dirfd: number, name: string, path: string): number | undefined {
  const fd = openListableDir(c.sys, dirfd, name);
  if (fd !== null) return fd;
  unreadable(c, path);
  return undefined;
}

/** openChildDir, or null where this user may not list the directory (EACCES). */
export function openListableDir(sys: Sys, dirfd: number, name: string): number | null {
  try {
    return openChildDir(sys, dirfd, name);
  } catch (err) {
    if (!hasCode(err, 'EACCES')) throw err;
    return null;
  }
}

/** Records the directory at path as one this user may not list (once, however many roots lie below it). */
function unreadable(c: Check, path: string): void {
  if (c.unreadable.has(path)) return;
  c.unreadable.add(path);
  c.report.unreadable.push(path);
  if (c.report.changed[c.report.changed.length - 1] !== path) c.report.changed.push(path);
}

/** Whether the snapshot's exclude patterns leave out the entry `name` of the directory at fd (never followed). */
function excluded(c: Check, fd: number, name: string | Buffer, path: string): boolean {
  if (c.excludes === undefined) return false;
  const st = statOrNull(c.sys, fd, name);
  // A name that is not UTF-8 is matched as capture matches it (matchedName), not as it is shown.
  const matched = typeof name === 'string' ? path : `${path.slice(0, path.lastIndexOf('/') + 1)}${matchedName(name)}`;
  return st !== null && c.excludes.excludes(matched, isDir(st.mode));
}

/**
 * Checks the entries of the clone's directory for rel (open at fd). The ones the snapshot
 * has are looked at first, all at once (statBlocksOf), then each is checked in turn: an
 * unchanged file (by its ledger) from its stat block alone, the rest by checkNamed.
 */
function checkDir(c: Check, fd: number, rel: string): void {
  inCloneDir(rel, () => checkDirEntries(c, fd, rel));
}

function checkDirEntries(c: Check, fd: number, rel: string): void {
  const items = c.sys.readdir(fd);
  const indices = new Array<number | undefined>(items.length);
  const known: string[] = [];
  for (let k = 0; k < items.length; k++) {
    const name = items[k]!.name;
    const index = typeof name === 'string' ? c.children.child(rel, name) : undefined;
    indices[k] = index;
    if (index !== undefined) known.push(name as string);
  }
  const stats = statBlocksOf(c.sys, fd, known);
  let n = 0;
  for (let k = 0; k < items.length; k++) {
    const name = items[k]!.name;
    const index = indices[k];
    let st: Stat | null | undefined;
    if (index !== undefined) {
      const j = n++;
      if (unchangedFile(c, index, stats, j)) {
        c.seen[index] = 1;
        continue;
      }
      st = statOrUndefinedAt(stats, j);
    }
    if (!checkNamed(c, fd, name, `${rel}/${nameText(name)}`, index, st)) return unreadable(c, rel);
  }
}

/**
 * Whether manifest entry `index`, a file, is what its ledger record says, its bytes
 * trusted, read from its stat block alone: checkEntry's common case of a diff, made
 * without a Stat, a BigInt or its path (checkEntry decides every other case).
 */
function unchangedFile(c: Check, index: number, stats: StatBlocks, k: number): boolean {
  const ledger = c.ledger;
  return (
    ledger !== undefined &&
    stats.ok(k) &&
    c.entries.kind(index) === 'file' &&
    c.entries.mtimeNs(index) === undefined &&
    isReg(stats.mode(k)) &&
    stats.size(k) === c.entries.size(index) &&
    ledger.sameAt(index, stats, k) &&
    ledger.trustsBytes(index)
  );
}


/**
 * Checks the entry `name` of the directory at fd (index: its manifest index, undefined:
 * none, so added unless excluded; st as checkEntry takes it); false when the directory
 * turns out listed but not searchable (mode 0400, 0600: no entry of it can be looked at).
 */
function checkNamed(c: Check, fd: number, name: string | Buffer, path: string, index: number | undefined, st: Stat | null | undefined): boolean {
  try {
    if (index !== undefined) checkEntry(c, fd, name as string, path, index, st);
    else if (!excluded(c, fd, name, path)) c.report.added.push(path);
    return true;
  } catch (err) {
    if (!hasCode(err, 'EACCES') || !notSearchable(c, fd)) throw err;
    return false;
  }
}

/** Whether this user may not look up names in the directory open at fd (no x for it). */
function notSearchable(c: Check, fd: number): boolean {
  try {
    c.sys.fstatat(fd, '.', AT_SYMLINK_NOFOLLOW);
    return false;
  } catch (err) {
    return hasCode(err, 'EACCES');
  }
}

/** Whether path lies below one of `dirs` (none: false, at once). */
function below(dirs: ReadonlySet<string>, path: string): boolean {
  if (dirs.size === 0) return false;
  for (let at = path.lastIndexOf('/'); at > 0; at = path.lastIndexOf('/', at - 1)) {
    if (dirs.has(path.slice(0, at))) return true;
  }
  return false;
}

/** Opens the directory holding a root (its implicit parents must be directories), or undefined when one is missing. */
function openRootParent(c: Check, cloneFd: number, parts: readonly string[]): Fd | undefined {
  const parents = parts.slice(0, -1);
  let reached = 0;
  const dir = walkDown(c.sys, cloneFd, parents, (fd, name, i) => {
    const path = parts.slice(0, i + 1).join('/');
    let st: Stat | null;
    try {
      st = statOrNull(c.sys, fd, name);
    } catch (err) {
      // The directory above is listed but not searchable (0600, two or more levels above the root): unreadable.
      if (i === 0 || !hasCode(err, 'EACCES') || !notSearchable(c, fd)) throw err;
      unreadable(c, parts.slice(0, i).join('/'));
      return null;
    }
    if (st === null) return null;
    // Found: not removed, whatever it is; a link or a file in its place is changed, once however many roots lie below it.
    const index = c.entries.indexOf(path);
    const first = index < 0 || c.seen[index] !== 1;
    if (index >= 0) c.seen[index] = 1;
    if (!isDir(st.mode)) {
      if (first) c.report.changed.push(path);
      return null;
    }
    // A directory above a root under another rule than materialize's (another user's, not u+rwx, writable by others): changed.
    if (first && !keepsParentRule(st, c.owner)) c.report.changed.push(path);
    const next = openListable(c, fd, name, path);
    if (next === undefined) return null;
    reached = i + 1;
    return next;
  });
  if (reached === parents.length) return dir;
  dir[Symbol.dispose]();
  return undefined;
}

/** Compares the clone's copy roots (not the rest of the clone) with data's manifest, re-hashing every file. */
export function checkCloneAt(sys: Sys, data: StoredSnapshot, clone: string): CloneReport {
  using cloneDir = own(sys, openRealDir(sys, clone, 'clone'));
  return compareClone(sys, data, cloneDir.fd, undefined);
}

/**
 * Compares the copy roots of the clone open at cloneFd with data's manifest: each file
 * re-hashed, or, given the clone's ledger, each entry's identity compared with the one it
 * records (a file whose identity matches is not opened).
 */
export function compareClone(sys: Sys, data: StoredSnapshot, cloneFd: number, ledger: Ledger | undefined): CloneReport {
  const report: CloneReport = { ok: false, marker: false, added: [], removed: [], changed: [], unreadable: [], files: 0, bytes: 0 };
  const entries = new EntryReader(data.entries);
  const children = namedChildrenOf(data.entries);
  const c: Check = { sys, ledger, entries, children, seen: new Uint8Array(entries.length), report, buffer: Buffer.allocUnsafe(CHUNK_BYTES), excludes: Excludes.of(data.exclude ?? []), unreadable: new Set(), owner: sys.fstat(cloneFd).uid };
  const cloneDir = { fd: cloneFd };
  report.marker = hasMarker(sys, cloneDir.fd);
  for (const declared of data.declarations) {
    const parts = declared.split('/').filter((p) => p !== '' && p !== '.');
    using parent = openRootParent(c, cloneDir.fd, parts);
    if (parent === undefined) continue;
    const path = parts.join('/');
    const index = c.entries.indexOf(path);
    if (parts.length === 1) checkEntry(c, parent.fd, path, path, index);
    // A directory above the root that is listed but not searchable (0600): unreadable, as one inside a root is.
    else if (!checkNamed(c, parent.fd, parts[parts.length - 1]!, path, index, undefined)) unreadable(c, parts.slice(0, -1).join('/'));
  }
  for (let i = 0; i < entries.length; i++) {
    if (c.seen[i] === 1) continue;
    const path = entries.path(i);
    if (!below(c.unreadable, path)) report.removed.push(path);
  }
  for (const list of [report.added, report.removed, report.changed, report.unreadable]) list.sort(compareUtf8);
  report.ok = !report.marker && report.added.length + report.removed.length + report.changed.length === 0;
  return report;
}
