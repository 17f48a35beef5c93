// verify.ts: re-hashes a published snapshot (on the helper threads capture uses) and checks every kind, mode and byte against its manifest.

import { CHUNK_BYTES } from '../base/io.js';
import { FileJobs, type BatchResult } from '../files/pool.js';
import { HashBatch } from '../files/hash-batch.js';
import { DIR_FLAGS, openBeneath, openChildDir, own } from '../base/fd.js';
import type { StoredSnapshot } from './document.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { EntryTable } from '../base/entry-table.js';
import { PathIndex } from '../base/path-index.js';
import { throttled, type ProgressFn } from '../base/progress.js';
import { escapePath, isBelow } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, BTRFS_SUBVOL_RDONLY, isDir, isLink, isReg } from '../sys/constants.js';
import { sys as nativeSys, type Stat, type Sys } from '../sys/native.js';
import { COPY_AREA, DOCUMENT_NAME, MOUNTS_AREA, mountArea, mountDir } from './layout.js';
import { hasCode } from '../sys/errno.js';
import { readingSnapshot } from './lock.js';
import { frozenFileMode } from '../base/frozen.js';
import { cloneFileMode, subvolumeFlags } from '../base/subvolume.js';
import { directoryRoots, onBtrfs } from './subvolumes.js';

export interface VerifyReport {
  entries: number;
  bytes: number;
}

export interface VerifyOptions {
  onProgress?: ProgressFn | undefined;
  /** Helper threads hashing files (undefined: one per spare core); 0 hashes everything on this thread. */
  parallelism?: number | undefined;
  /** Stops the verify with SEAL_ABORTED (it reads only: nothing to undo). */
  signal?: AbortSignal | undefined;
}

interface Walk {
  sys: Sys;
  /** The area's entries, found by path through an index of this walk's own (the table itself is never written). */
  table: EntryTable;
  index: PathIndex;
  /** Entries met by the walk (by index in the table): 1. */
  seen: Uint8Array;
  /** Drifted paths with their place in the walk (hashes come back in any order). */
  drift: [number, string][];
  seq: number;
  shared: Shared;
  /** Big files hashed ahead of the walk, by path. */
  early: Map<string, Early>;
  /** Copy roots that are btrfs subvolumes: their trees keep a clone's modes, sealed by the read-only flag. */
  sealed: string[];
}

/** The mode a stored file must have: frozen, or a clone's inside a subvolume copy root. */
function storedFileMode(w: Walk, want: ManifestEntry): number {
  return w.sealed.length > 0 && w.sealed.some((root) => isBelow(want.path, root)) ? cloneFileMode(want.mode) : frozenFileMode(want.mode);
}

/** A stored directory's mode: 0500, or 0700 inside a subvolume copy root. */
function storedDirMode(w: Walk, path: string): number {
  return w.sealed.length > 0 && w.sealed.some((root) => isBelow(path, root)) ? 0o700 : 0o500;
}

/**
 * The directory copy roots kept as subvolumes (read-only or not) in the copy area open at
 * fd; one that is not read-only is drift: it is the flag that keeps it from changing.
 */
function subvolumeRoots(w: Walk, fd: number, declarations: readonly string[], onDrift: (path: string) => void): string[] {
  const roots: string[] = [];
  if (!onBtrfs(w.sys, fd)) return roots;
  for (const root of directoryRoots(declarations, w.table)) {
    let dir: number;
    try {
      dir = openBeneath(w.sys, fd, root.split('/'), DIR_FLAGS);
    } catch {
      continue; // the walk finds it missing or not a directory
    }
    using opened = own(w.sys, dir);
    const flags = subvolumeFlags(w.sys, opened.fd);
    if (flags === undefined) continue;
    roots.push(root);
    if ((flags & BTRFS_SUBVOL_RDONLY) === 0) onDrift(root);
  }
  return roots;
}

/** A file hashed ahead of the walk: whether it differs, and its place in the walk once reached (-1 before). */
interface Early {
  differs: boolean;
  seq: number;
}

/** Files of at least this size are handed out before the walk, largest first, so a helper hashes them while the walk goes on. */
const EARLY_BYTES = 1024 * 1024;
const EARLY_FILES = 32;

function flag(w: Walk, path: string, seq = w.seq++): void {
  w.drift.push([seq, path]);
}

/** A directory open for the walk: closed once the walk has left it and no batch of its files is still out. */
interface Dir {
  fd: number;
  rel: string;
  batches: number;
  left: boolean;
}

function openDir(w: Walk, fd: number, rel: string): Dir {
  w.shared.dirs.add(fd);
  return { fd, rel, batches: 0, left: false };
}

function closeDirIfDone(w: Walk, dir: Dir): void {
  if (!dir.left || dir.batches > 0) return;
  w.shared.dirs.delete(dir.fd);
  own(w.sys, dir.fd)[Symbol.dispose]();
}

/**
 * Hands a batch of a directory's files to the helper threads (or hashes them here); a
 * file whose kind, size or digest differs is drift, found in its walk order.
 */
function hashFiles(w: Walk, dir: Dir, batch: HashBatch): void {
  if (batch.length === 0) return;
  const shared = w.shared;
  dir.batches++;
  shared.jobs.hashBatch(batch, (r: BatchResult) => {
    if (r instanceof Error) throw r;
    for (const i of r) {
      const path = dir.rel === '' ? batch.names[i]! : `${dir.rel}/${batch.names[i]!}`;
      const early = batch.tags[i]! < 0 ? w.early.get(path) : undefined;
      if (early === undefined) flag(w, path, batch.tags[i]);
      else {
        early.differs = true;
        if (early.seq >= 0) flag(w, path, early.seq);
      }
    }
    dir.batches--;
    closeDirIfDone(w, dir);
    shared.bytes += batch.bytes;
    shared.entries += batch.length;
    shared.progress(shared.entries, shared.bytes);
  });
}

/** One more entry checked, for the progress. */
function counted(shared: Shared): void {
  shared.entries++;
  shared.progress(shared.entries, shared.bytes);
}

/** A file's kind, mode and size as its manifest entry says (what is checked before its bytes). */
function fileLooksRight(st: Stat, want: ManifestEntry, mode: number): boolean {
  return isReg(st.mode) && (st.mode & 0o7777) === mode && st.size === want.size;
}

/**
 * Puts a file the walk met into the directory's batch (sending the batch when full),
 * where its kind, mode and size are checked before its bytes, as fileLooksRight does;
 * a file hashed ahead takes its place in the walk instead. Returns the batch to fill next.
 */
function addFile(w: Walk, dir: Dir, batch: HashBatch, name: string, want: ManifestEntry): HashBatch {
  if (!w.shared.bytesToo) {
    // Its bytes were proven as they were written (see verifyAt): what it is, here, now.
    if (!fileLooksRight(w.sys.fstatat(dir.fd, name, AT_SYMLINK_NOFOLLOW), want, storedFileMode(w, want))) flag(w, want.path);
    counted(w.shared);
    return batch;
  }
  const early = w.early.size === 0 ? undefined : w.early.get(want.path);
  if (early !== undefined) {
    // It drifted if that hash says so (now, or when it comes back).
    early.seq = w.seq++;
    if (early.differs) flag(w, want.path, early.seq);
    return batch;
  }
  let next = batch;
  if (!batch.fits(name, want.size)) {
    hashFiles(w, dir, batch);
    next = new HashBatch(dir.fd);
  }
  next.add(name, want.size, storedFileMode(w, want), want.sha256, w.seq++);
  return next;
}

/**
 * Hands the biggest files out ahead of the walk (one hash each is the longest job, so it
 * starts first), each after the same checks the walk makes; a file that cannot be
 * reached or looks wrong is left to the walk, which finds it again.
 */
function hashEarly(w: Walk, root: Dir, big: ManifestEntry[]): void {
  big.sort((a, b) => b.size - a.size);
  for (const want of big.slice(0, EARLY_FILES)) {
    const cut = want.path.lastIndexOf('/');
    const rel = cut < 0 ? '' : want.path.slice(0, cut);
    const name = want.path.slice(cut + 1);
    let dir = root;
    let looksRight = false;
    try {
      if (cut >= 0) dir = openDir(w, openBeneath(w.sys, root.fd, rel.split('/'), DIR_FLAGS), rel);
      looksRight = fileLooksRight(w.sys.fstatat(dir.fd, name, AT_SYMLINK_NOFOLLOW), want, storedFileMode(w, want));
    } catch {
      // The walk meets the same path and reports it as it does any other.
    }
    if (looksRight) {
      const batch = new HashBatch(dir.fd);
      batch.add(name, want.size, storedFileMode(w, want), want.sha256, -1);
      w.early.set(want.path, { differs: false, seq: -1 });
      hashFiles(w, dir, batch);
    }
    if (dir === root) continue;
    dir.left = true;
    closeDirIfDone(w, dir);
  }
}

/** Walks one directory, then lets it go (closed once its last batch is back). */
function checkDir(w: Walk, dir: Dir): void {
  if (w.shared.isAborted()) throw new SealError('SEAL_ABORTED', 'verify was aborted');
  let batch = new HashBatch(dir.fd);
  const { fd, rel } = dir;
  for (const item of w.sys.readdir(fd)) {
    const name = String(item.name);
    const path = rel === '' ? name : `${rel}/${name}`;
    const i = typeof item.name === 'string' ? w.index.findPath(path) : -1;
    if (i < 0) {
      flag(w, path);
      continue;
    }
    w.seen[i] = 1;
    const want = w.table.entry(i);
    if (want.kind === 'file') {
      batch = addFile(w, dir, batch, name, want);
      continue;
    }
    const st = w.sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW);
    const perm = st.mode & 0o7777;
    // Progress counts entries of every kind: a directory or link once it is looked at (a file once its bytes are).
    counted(w.shared);
    if (want.kind === 'directory') {
      if (perm !== storedDirMode(w, path) || !isDir(st.mode)) flag(w, path);
      if (!isDir(st.mode)) continue;
      // This directory's files so far go out before the walk goes down.
      hashFiles(w, dir, batch);
      batch = new HashBatch(fd);
      checkDir(w, openDir(w, openChildDir(w.sys, fd, name), path));
    } else if (!isLink(st.mode) || w.sys.readlinkat(fd, name) !== want.link_target) {
      flag(w, path);
    }
  }
  hashFiles(w, dir, batch);
  dir.left = true;
  closeDirIfDone(w, dir);
}

interface Shared {
  drift: string[];
  jobs: FileJobs;
  /** Directory fds still open (a failure closes them once the jobs in flight are over). */
  dirs: Set<number>;
  bytes: number;
  entries: number;
  progress: (entries: number, bytes: number, force?: boolean) => void;
  /** Whether the call was aborted (checked as each directory is walked). */
  isAborted: () => boolean;
  /** Whether files are hashed (else only their kind, mode and size are checked). */
  bytesToo: boolean;
}

function verifyArea(sys: Sys, rootFd: number, area: string, entries: Entries, shared: Shared, declarations: readonly string[] = []): void {
  const table = EntryTable.of(entries);
  const walk: Walk = { sys, table, index: new PathIndex(table, table.length), seen: new Uint8Array(table.length), drift: [], seq: 0, shared, early: new Map(), sealed: [] };
  const big: ManifestEntry[] = [];
  let files = 0;
  for (let i = 0; i < table.length; i++) {
    walk.index.add(i);
    if (table.kindOf(i) !== 'file') continue;
    files++;
    if (table.size(i) >= EARLY_BYTES) big.push(table.entry(i));
  }
  let fd: number;
  try {
    fd = openBeneath(sys, rootFd, area.split('/'), DIR_FLAGS);
  } catch (err) {
    throwIfRefused(err, `snapshot area cannot be opened: ${escapePath(area)}`);
    shared.drift.push(area);
    return;
  }
  // The tree's size is known: a big one starts the helper threads at once.
  if (shared.bytesToo) shared.jobs.expect(files);
  const root = openDir(walk, fd, '');
  if (declarations.length > 0) walk.sealed = subvolumeRoots(walk, fd, declarations, (path) => flag(walk, path));
  if (shared.bytesToo) hashEarly(walk, root, big);
  checkDir(walk, root);
  shared.jobs.drain();
  for (let n = 0; n < table.length; n++) {
    const i = table.indexAt(n);
    if (walk.seen[i] === 0) flag(walk, table.path(i));
  }
  walk.drift.sort((a, b) => a[0] - b[0]);
  for (const [, path] of walk.drift) shared.drift.push(`${area}/${path}`);
}

/**
 * Throws SEAL_CORRUPT naming the first drifted path and the count; otherwise reports what
 * was checked. `bytesToo` false: every entry's kind, mode, size and link target, and
 * nothing missing or more, but no file read (for a tree whose bytes were each proven as
 * they were written, as a pull's build is: its report counts no bytes).
 */
export function verifyAt(sys: Sys, snapshotFd: number, data: StoredSnapshot, options: VerifyOptions = {}, isAborted: () => boolean = () => false, bytesToo = true): VerifyReport {
  const jobs = new FileJobs(sys, Buffer.allocUnsafe(CHUNK_BYTES), bytesToo ? options.parallelism : 0, sys === nativeSys && bytesToo);
  const shared: Shared = { drift: [], jobs, dirs: new Set(), bytes: 0, entries: 0, progress: throttled(options.onProgress), isAborted, bytesToo };
  try {
    verifyArea(sys, snapshotFd, COPY_AREA, data.entries, shared, data.declarations);
    data.mounts.forEach((m, i) => verifyArea(sys, snapshotFd, mountArea(i), m.entries, shared));
  } finally {
    jobs.close();
    for (const fd of shared.dirs) own(sys, fd)[Symbol.dispose]();
  }
  const drift = shared.drift;
  if (drift.length > 0) {
    const first = drift[0]!;
    throw new SealError(
      'SEAL_CORRUPT',
      `snapshot ${data.digest} is corrupt: ${drift.length} ${drift.length === 1 ? 'entry differs' : 'entries differ'} from its manifest, first: ${escapePath(first)}`,
      { path: first },
    );
  }
  const entries = data.entries.length + data.mounts.reduce((n, m) => n + m.entries.length, 0);
  shared.progress(entries, shared.bytes, true);
  return { entries, bytes: shared.bytes };
}

/**
 * verifyAt for a published snapshot given by path, under the store's shared lock (an rm
 * waits; a removed one is SEAL_UNAVAILABLE); its directory may hold nothing else than its
 * manifest, its copy area and its mounts' areas.
 */
export function verifySnapshotAt(sys: Sys, snapshotRoot: string, data: StoredSnapshot, options: VerifyOptions = {}, isAborted?: () => boolean): VerifyReport {
  return readingSnapshot(sys, snapshotRoot, data.digest, (fd) => {
    const report = verifyAt(sys, fd, data, options, isAborted);
    const extra = strayEntry(sys, fd, data);
    if (extra !== undefined) throw new SealError('SEAL_CORRUPT', `snapshot ${data.digest} is corrupt: it holds what its manifest does not: ${escapePath(extra)}`, { path: extra });
    // Its own directory frozen too: one left writable (an rm killed between opening it up and its rename) takes new names.
    const mode = sys.fstat(fd).mode & 0o7777;
    if (mode !== 0o500) {
      throw new SealError('SEAL_CORRUPT', `snapshot ${data.digest} is not frozen: its directory is mode ${mode.toString(8).padStart(4, '0')}, not 0500 (an rm killed before its rename leaves 0700: treeseal gc freezes it again)`);
    }
    return report;
  });
}

/** The first entry of a published snapshot's directory (or of its mounts/) that is none of its parts, if any. */
function strayEntry(sys: Sys, fd: number, data: StoredSnapshot): string | undefined {
  const top = new Set([DOCUMENT_NAME, COPY_AREA, MOUNTS_AREA]);
  for (const e of sys.readdir(fd)) if (!top.has(String(e.name))) return String(e.name);
  let mountsFd: number;
  try {
    mountsFd = openChildDir(sys, fd, MOUNTS_AREA);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return undefined;
    throw err;
  }
  using mounts = own(sys, mountsFd);
  const areas = new Set(data.mounts.map((_m, i) => mountDir(i)));
  for (const e of sys.readdir(mounts.fd)) if (!areas.has(String(e.name))) return `${MOUNTS_AREA}/${String(e.name)}`;
  return undefined;
}
