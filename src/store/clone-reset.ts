// clone-reset.ts: diff and reset of a materialized clone against its ledger, and materialize's choice between a reset and a whole materialize.
import { SealError } from '../base/errors.js';
import { CHUNK_BYTES } from '../base/io.js';
import { trustsRecords, writebackOf } from '../capture/stat-cache.js';
import { DIR_FLAGS, isLockedDir, openBeneath, openRepairableDir, own, removeAt, walkDown, type Fd } from '../base/fd.js';
import type { ManifestEntry } from '../base/manifest.js';
import { compareUtf8, escapePath, nameText } from '../base/paths.js';
import { throwIfRefused } from '../base/refusal.js';
import { keepMtime, mtimeDiffers } from '../base/times.js';
import { DT_DIR, DT_REG, isDir, isLink, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import type { StatBlocks } from '../sys/stat-each.js';
import { compareClone, openListableDir, type CloneReport } from './clone-check.js';
import { Ledger, dropLedger, loadLedger, storeOf } from './clone-ledger.js';
import { CloneLinks } from './clone-links.js';
import { checkMarker, hasMarker } from './clone-marker.js';
import { forEachOutside } from './clone-outside.js';
import { checkCloneApart, makeCloneDir, openCloneDir, openRepairableClone, openRootParentDir, openUpCloneDir, removeMadeClone, statBlocksOf, statOrNull, statOrUndefinedAt } from './clone-paths.js';
import { checkCloneOwner, checkPathAbove } from './trust.js';
import { lockClone, type CloneLock } from './clone-lock.js';
import { madeEntries } from './materialize-run.js';
import { checkMadeFiles, holdsRecorded } from './clone-readback.js';
import { sweepCloneStages } from './clone-stage.js';
import { Trash } from './clone-trash.js';
import { inCloneDir, inStore } from './clone-changing.js';
import type { StoredSnapshot } from './document.js';
import { makeDir, namedChildrenOf, EntryReader, type Children } from './manifest-tree.js';
import {
  buildInto,
  materializeFile,
  materializeInto,
  newRun,
  readingCopyArea,
  rootsOf,
  saveLedgerOrSay,
  type MaterializeOptions,
  type MaterializeReport,
  type Run,
  type RunHooks,
} from './materialize.js';

export interface DiffOptions {
  /** Re-hash every file of the copy roots (as checkClone does) instead of comparing identities with the clone's ledger. */
  verify?: boolean | undefined;
  /** Also list what the clone holds outside its copy roots and mount targets (`outside`). */
  all?: boolean | undefined;
}

export interface DiffReport extends CloneReport {
  /**
   * How files were compared. 'ledger': each entry's identity (inode, size, mode, mtime,
   * ctime) with the one the clone's ledger recorded when materialize made it; a file whose
   * identity matches is not opened, and one whose identity differs is changed even if its
   * bytes are the snapshot's again. 'hash': every file re-hashed, as checkClone does
   * (`verify: true`, or the store holds no ledger of this clone).
   */
  method: 'ledger' | 'hash';
  /** With `all`: the top of each subtree of the clone outside its copy roots and mount targets (materialize's own names left out); else empty. */
  outside: string[];
}

export interface ResetOptions {
  /**
   * As for materialize: how the files reset restores are made (default 'auto': a reflink
   * where the filesystem can). The files it keeps stay as they were made.
   */
  reflink?: MaterializeOptions['reflink'] | undefined;
  /** As for materialize: the cap on bytes copied (not cloned) by one call. */
  fallbackBytes?: number | undefined;
  /** Also remove what the clone holds outside its copy roots and mount targets (`outside`); materialize's own names stay. */
  clean?: boolean | undefined;
  /** Called now and then with the entries (files, directories, links) and bytes restored so far. */
  onProgress?: MaterializeOptions['onProgress'] | undefined;
  /** Stops the reset with SEAL_ABORTED between the files it restores: the clone is then part reset, as after a kill (a changed file may be gone, not yet restored; the next reset or materialize makes it whole). */
  signal?: AbortSignal | undefined;
}

export interface ResetReport extends MaterializeReport {
  /**
   * 'reset': the clone held this snapshot's ledger: only what differed from it was removed
   * or restored. 'materialize': it held none (or an interrupted materialize's marker): the
   * copy roots were materialized whole (the lists below are then empty).
   */
  method: 'reset' | 'materialize';
  /** Paths inside the copy roots the snapshot does not have, removed (the top of each added subtree). */
  added: string[];
  /** Snapshot paths missing from the clone, restored. */
  removed: string[];
  /** Paths whose identity differed from the ledger (or, for a directory, whose kind, mode or recorded mtime), restored. */
  changed: string[];
  /** With `clean`: what was removed outside the copy roots (the top of each subtree); else empty. */
  outside: string[];
}

function bindingError(ledger: Ledger, digest: string, clone: string): SealError {
  return new SealError(
    'SEAL_BINDING',
    `clone was materialized from snapshot ${ledger.digest}, not ${digest} (its ledger records the other; materialize it, or diff with verify to hash it against this one): ${escapePath(clone)}`,
  );
}

/** What one reset walks with. */
interface Reset {
  run: Run;
  trash: Trash;
  old: Ledger;
  /** The manifest's entries by index (the old ledger's records are by index), read a field at a time. */
  entries: EntryReader;
  /** 1 for each manifest index found in the clone by the walk. */
  seen: Uint8Array;
  children: Children;
  copyDir: Fd;
  links: CloneLinks;
  report: ResetReport;
  /** For hashing files whose identity matches where the ledger's bytes are not trusted (holdsBytes). */
  buffer?: Buffer;
}

/** The snapshot's directory for rel ('' for the copy area), opened (never through a link). */
function snapshotDir(r: Reset, rel: string): Fd {
  if (rel === '') return own(r.run.sys, r.run.sys.openat(r.copyDir.fd, '.', DIR_FLAGS));
  try {
    return own(r.run.sys, openBeneath(r.run.sys, r.copyDir.fd, rel.split('/'), DIR_FLAGS));
  } catch (err) {
    throwIfRefused(err, `snapshot directory cannot be opened: ${escapePath(rel)}`, rel);
    throw new SealError('SEAL_CORRUPT', `snapshot directory changed: ${escapePath(rel)}`, { path: rel, cause: err });
  }
}

const parentOf = (path: string): string => {
  const cut = path.lastIndexOf('/');
  return cut < 0 ? '' : path.slice(0, cut);
};

/** Makes entry `want` (manifest index `index`) as dirFd/name from the snapshot (nothing stands there now), recorded in the new ledger. */
function restore(r: Reset, dirFd: number, name: string, want: ManifestEntry, index: number): void {
  try {
    restoreEntry(r, dirFd, name, want, index);
  } catch (err) {
    // The kernel refusing to make it (no space, no quota, an I/O error): SEAL_IO naming the entry, as materialize says it, not a bare pwrite.
    throwIfRefused(err, `could not make ${escapePath(want.path)}`, want.path);
    throw err;
  }
}

function restoreEntry(r: Reset, dirFd: number, name: string, want: ManifestEntry, index: number): void {
  const { run } = r;
  if (want.kind === 'file') {
    using snap = snapshotDir(r, parentOf(want.path));
    materializeFile(run, snap.fd, dirFd, name, want, index);
  } else if (want.kind === 'symlink') {
    r.links.make(dirFd, name, want);
    run.ledger.record(index, statOrNull(run.sys, dirFd, name)!);
    run.report.symlinks++;
  } else {
    using snap = snapshotDir(r, want.path);
    using dir = makeDir(run.sys, dirFd, name);
    run.report.directories++;
    buildInto(run, r.children, dir.fd, snap, r.links, want.path);
    keepMtime(run.sys, dir.fd, want);
    run.ledger.record(index, run.sys.fstat(dir.fd));
  }
}

/** Whether anything stands at a root's place in the clone (a look only: what it is, reset judges; a path that fails, yes). */
function rootPresent(sys: Sys, cloneFd: number, parts: readonly string[]): boolean {
  try {
    if (parts.length === 1) return statOrNull(sys, cloneFd, parts[0]!) !== null;
    using parent = own(sys, openBeneath(sys, cloneFd, parts.slice(0, -1), DIR_FLAGS));
    return statOrNull(sys, parent.fd, parts[parts.length - 1]!) !== null;
  } catch (err) {
    return !hasCode(err, 'ENOENT');
  }
}

/**
 * Removes what stands at dirFd/name (never followed: a link is unlinked, a directory emptied
 * through its own fd) and restores want there. A directory restored where something else
 * stood brings back everything below it: each of those is reported removed, as diff reports them.
 */
function replace(r: Reset, dirFd: number, name: string, st: Stat, want: ManifestEntry, index: number): void {
  r.trash.remove(dirFd, name, isDir(st.mode) ? DT_DIR : DT_REG, want.path);
  restore(r, dirFd, name, want, index);
  r.report.changed.push(want.path);
  if (want.kind === 'directory' && !isDir(st.mode)) reportBelow(r, want.path);
}

/** Reports every manifest entry below directory `rel` as removed (restored with it). */
function reportBelow(r: Reset, rel: string): void {
  for (const child of r.children.get(rel) ?? []) {
    r.report.removed.push(child.path);
    if (child.kind === 'directory') reportBelow(r, child.path);
  }
}

/** Whether the file dirFd/name holds manifest entry index's bytes (hashed: the ledger's identity does not tell). */
function holdsBytes(r: Reset, dirFd: number, name: string, index: number): boolean {
  r.buffer ??= Buffer.allocUnsafe(CHUNK_BYTES);
  // Read back as a file reset made is (its pages written back first, its identity the same before and after the read),
  // then recorded again: trusted from now on where the time allows (see Ledger.record).
  const read = holdsRecorded(r.run, dirFd, name, index, r.entries, r.buffer);
  if (read === undefined) return false;
  r.run.ledger.record(index, read);
  return true;
}

/** Resets manifest entry `index`, named `name` in the clone's directory open at dirFd; st: what stands there (undefined: looked at here; null: nothing). */
function resetEntry(r: Reset, dirFd: number, name: string, index: number, st: Stat | null = statOrNull(r.run.sys, dirFd, name)): void {
  const { sys } = r.run;
  // A file is the common case: it is read from the manifest only when it is not kept.
  if (st !== null && r.entries.kind(index) === 'file') {
    // Kept: its record in the new ledger (a copy of the old one) stays as it is.
    if (!isReg(st.mode) || !r.old.same(index, st) || (!r.old.trustsBytes(index) && !holdsBytes(r, dirFd, name, index))) replace(r, dirFd, name, st, r.entries.at(index), index);
    return;
  }
  const want = r.entries.at(index);
  const path = want.path;
  if (st === null) {
    restore(r, dirFd, name, want, index);
    r.report.removed.push(path);
    if (want.kind === 'directory') reportBelow(r, path);
    return;
  }
  if (want.kind === 'symlink') {
    if (!isLink(st.mode) || !r.old.same(index, st) || sys.readlinkat(dirFd, name) !== want.link_target) replace(r, dirFd, name, st, want, index);
    return;
  }
  if (!isDir(st.mode)) return replace(r, dirFd, name, st, want, index);
  let fd: number;
  try {
    fd = openRepairableDir(sys, dirFd, name, path);
  } catch (err) {
    // Swapped for a link or a file since the fstatat: what is there now is replaced. Another user's that this user
    // may not open: replaced too, which removes it where it is when it is empty, and refuses it naming it else.
    if (!hasCode(err, 'ELOOP', 'ENOTDIR') && !isLockedDir(err)) throw err;
    return replace(r, dirFd, name, statOrNull(sys, dirFd, name) ?? st, want, index);
  }
  const mode = r.old.modeAt(index) ?? 0o700;
  {
    using dir = own(sys, fd);
    const now = sys.fstat(dir.fd);
    if ((now.mode & 0o7777) === mode || chmodOwn(sys, dir.fd, mode)) return resetOpenDir(r, dir.fd, want, index, mode, st, now);
  }
  // Another user's, readable, whose mode this user may not set: replaced as above.
  replace(r, dirFd, name, st, want, index);
}

/** fchmod of a directory reset opened; false where it is another user's (EPERM). */
function chmodOwn(sys: Sys, fd: number, mode: number): boolean {
  try {
    sys.fchmod(fd, mode);
    return true;
  } catch (err) {
    if (!hasCode(err, 'EPERM')) throw err;
    return false;
  }
}

/** The rest of resetEntry for want's directory (manifest index `index`), open at fd and given `mode`, the one the ledger records (st: as it was found, now: as it is). */
function resetOpenDir(r: Reset, fd: number, want: ManifestEntry, index: number, mode: number, st: Stat, now: Stat): void {
  const { sys } = r.run;
  // st: the mode before an unreadable directory was opened up to be entered.
  if ((st.mode & 0o7777) !== mode || (now.mode & 0o7777) !== mode || mtimeDiffers(now, want)) r.report.changed.push(want.path);
  resetDir(r, fd, want.path);
  if (mtimeDiffers(sys.fstat(fd), want)) keepMtime(sys, fd, want);
  // The mode reset set, not the one it finds now: an agent's chmod during the reset is then a difference the next diff sees.
  const after = sys.fstat(fd);
  r.run.ledger.record(index, { ...after, mode: (after.mode & ~0o7777) | mode });
}

/** Whether manifest entry `index`, a file, is kept as resetEntry would keep it without reading it: its stat block is its record, bytes trusted. */
function keptFile(r: Reset, index: number, stats: StatBlocks, k: number): boolean {
  return stats.ok(k) && r.entries.kind(index) === 'file' && isReg(stats.mode(k)) && r.old.sameAt(index, stats, k) && r.old.trustsBytes(index);
}

/**
 * Resets the entries of the clone's directory for rel (open at fd): removes what the
 * snapshot lacks, resets the rest, restores what is missing. The entries the snapshot has
 * are looked at first, all at once (statBlocksOf); what the snapshot lacks is not looked at.
 */
function resetDir(r: Reset, fd: number, rel: string): void {
  inCloneDir(rel, () => resetDirEntries(r, fd, rel));
}

function resetDirEntries(r: Reset, fd: number, rel: string): void {
  const { sys } = r.run;
  const items = sys.readdir(fd);
  const indices = new Array<number | undefined>(items.length);
  const known: string[] = [];
  for (let k = 0; k < items.length; k++) {
    const name = items[k]!.name;
    const index = typeof name === 'string' ? r.children.child(rel, name) : undefined;
    indices[k] = index;
    if (index !== undefined) known.push(name as string);
  }
  // A name that failed otherwise than missing is looked at alone, meeting its failure in its turn.
  const stats = statBlocksOf(sys, fd, known);
  let n = 0;
  for (let k = 0; k < items.length; k++) {
    const item = items[k]!;
    const index = indices[k];
    if (index === undefined) {
      const path = `${rel}/${nameText(item.name)}`;
      r.trash.remove(fd, item.name, item.type, path);
      r.report.added.push(path);
      continue;
    }
    r.seen[index] = 1;
    const j = n++;
    // The common case, a file kept as it is (its record in the new ledger stays), read from its stat block alone.
    if (keptFile(r, index, stats, j)) continue;
    resetEntry(r, fd, item.name as string, index, statOrUndefinedAt(stats, j));
  }
  for (const i of r.children.indices(rel) ?? []) {
    if (r.seen[i] === 1) continue;
    const want = r.entries.at(i);
    const name = want.path.slice(rel.length + 1);
    restore(r, fd, name, want, i);
    r.report.removed.push(want.path);
    if (want.kind === 'directory') reportBelow(r, want.path);
  }
}

/**
 * Opens the clone directory holding a root: a missing directory above it made (0700) and
 * reported removed, anything else in the way (a file, a link, a FIFO: never followed)
 * unlinked, a directory made in its place and reported changed, a directory put back under
 * the parent rule (openRootParentDir) reported changed when its mode was not; each once
 * however many roots lie below it, as diff reports them.
 */
function openRootParent(r: Reset, cloneFd: number, parents: readonly string[]): Fd {
  const { sys } = r.run;
  const owner = sys.fstat(cloneFd).uid;
  return walkDown(sys, cloneFd, parents, (dirfd, name, i) => {
    const path = parents.slice(0, i + 1).join('/');
    const st = statOrNull(sys, dirfd, name);
    const index = r.entries.indexOf(path);
    const first = index < 0 || r.seen[index] !== 1;
    if (index >= 0) r.seen[index] = 1;
    if (st !== null && !isDir(st.mode)) removeAt(sys, dirfd, name, DT_REG);
    if (st === null || !isDir(st.mode)) sys.mkdirat(dirfd, name, 0o700);
    const opened = openRootParentDir(sys, dirfd, name, path, owner);
    if (first && (st === null || !isDir(st.mode) || opened.changed)) (st === null ? r.report.removed : r.report.changed).push(path);
    return opened.fd;
  });
}

function emptyReport(method: ResetReport['method']): ResetReport {
  return {
    method,
    added: [],
    removed: [],
    changed: [],
    outside: [],
    files: 0,
    directories: 0,
    symlinks: 0,
    reflinked: 0,
    copied: 0,
    bytesCopied: 0,
    snapshotted: 0,
    fallbacks: [],
    elapsedMs: 0,
    reset: method === 'reset',
  };
}

/**
 * Resets the clone open at cloneFd to data's copy roots, given its ledger: added entries
 * removed, changed and removed ones restored from the snapshot, directory modes fixed,
 * everything whose identity matches the ledger left untouched; then the new ledger saved.
 * Without a ledger (or with an interrupted materialize's marker), a whole materialize.
 * A reset that dies leaves entries whose identities the old ledger does not hold: the
 * next reset or materialize restores them again.
 */
function resetInto(sys: Sys, snapshotRoot: string, data: StoredSnapshot, cloneFd: number, old: Ledger | undefined, options: ResetOptions & RunHooks): ResetReport {
  const started = performance.now();
  const { clean: _clean, ...materializeOptions } = options;
  // Only the options' own: a polluted prototype never turns a reset (or a materialize's) into one that cleans.
  const clean = Object.hasOwn(options, 'clean') && options.clean === true;
  const roots = rootsOf(data);
  const interrupted = checkMarker(sys, cloneFd);
  using trash = new Trash(sys, cloneFd);
  let report: ResetReport;
  if (old === undefined || interrupted) {
    report = { ...emptyReport('materialize'), ...materializeInto(sys, snapshotRoot, data, cloneFd, materializeOptions), reset: false };
  } else {
    options.checked?.();
    sweepCloneStages(sys, cloneFd);
    const cloneSt = sys.fstat(cloneFd);
    const children = namedChildrenOf(data.entries);
    const run = newRun(sys, materializeOptions, old.derive(old.independent && materializeOptions.reflink === 'never'));
    run.madeFiles = [];
    report = Object.assign(run.report, emptyReport('reset'));
    readingCopyArea(sys, snapshotRoot, data.digest, (copyDir) => {
      const r: Reset = {
        run,
        old,
        entries: new EntryReader(data.entries),
        seen: new Uint8Array(data.entries.length),
        children,
        copyDir,
        trash,
        links: new CloneLinks(sys, data),
        report,
      };
      for (const parts of roots) {
        using parent = openRootParent(r, cloneFd, parts.slice(0, -1));
        resetEntry(r, parent.fd, parts[parts.length - 1]!, r.entries.indexOf(parts.join('/')));
      }
    });
    checkMadeFiles(run, cloneFd, new EntryReader(data.entries), run.madeFiles);
    // The clone is whole now: a ledger that cannot be saved is said in the report, not thrown (the old one is dropped).
    const failed = saveLedgerOrSay(sys, snapshotRoot, cloneFd, cloneSt, run.ledger);
    if (failed !== undefined) report.ledgerNotSaved = failed;
    run.progress(madeEntries(report), run.bytes, true);
  }
  if (clean === true) {
    forEachOutside(sys, cloneFd, data, (dirFd, name, path, type) => {
      trash.remove(dirFd, name, type, path);
      report.outside.push(path);
    }, openRepairableDir);
  }
  for (const list of [report.added, report.removed, report.changed, report.outside]) list.sort(compareUtf8);
  report.elapsedMs = performance.now() - started;
  return report;
}

/**
 * Opens the clone after checking it apart from the source and the store; its fstat and its
 * ledger (undefined: none of this clone in this store). `lock` (materialize, reset): a
 * clone directory another user owns or can write is refused, and the clone's lock is held
 * for the call (see clone-lock.ts), so a second one on the same clone at once is SEAL_BUSY
 * rather than two calls making the same names.
 */
function openClone(
  sys: Sys,
  snapshotRoot: string,
  data: StoredSnapshot,
  clone: string,
  lock: boolean,
  /** A materialize's createClone (undefined: not a materialize). */
  create?: boolean,
): { dir: Fd; ledger: Ledger | undefined; made: Stat | undefined; known: boolean } {
  checkCloneApart(sys, clone, data.source, snapshotRoot);
  // Nothing is made below a directory another user could rename it in.
  if (lock) checkPathAbove(sys, clone, undefined, 'clone');
  const making = create === true && makeCloneDir(sys, clone);
  // Opened up where shut only when this store made a clone there (a reset: of this snapshot), never a directory it does not know.
  const knows = (st: Stat): boolean => {
    const known = loadLedger(sys, storeOf(snapshotRoot), st);
    return known !== undefined && (create !== undefined || known.digest === data.digest);
  };
  const dir = own(sys, lock ? openRepairableClone(sys, clone, create === false, knows) : openCloneDir(sys, clone, create === false));
  let made: Stat | undefined;
  try {
    const st = sys.fstat(dir.fd);
    // What removeMadeClone checks is still there: the directory this call made.
    if (making) made = st;
    if (lock) {
      // What this call writes stays the caller's: a clone directory another user owns or can write, or one below a
      // directory another user could rename it in, is refused.
      checkCloneOwner(st, escapePath(clone), clone);
      checkPathAbove(sys, clone, dir.fd, 'clone');
    }
    const ledger = loadLedger(sys, storeOf(snapshotRoot), st);
    if (ledger !== undefined) ledger.bytesTrusted = trustsRecords(writebackOf(sys, dir.fd));
    // Records are by manifest index: a ledger of another manifest length is another snapshot's (its digest says so too).
    // known: this store made a clone here (it holds a ledger of it, of any snapshot).
    return { dir, made, known: ledger !== undefined, ledger: ledger !== undefined && (ledger.digest !== data.digest || ledger.count === data.entries.length) ? ledger : undefined };
  } catch (err) {
    if (made !== undefined) removeMadeClone(sys, clone, made);
    dir[Symbol.dispose]();
    throw err;
  }
}

/** The clone's lock, taken when the call's checks have passed (see RunHooks.checked) and let go with the call. */
function lockWhenChecked(sys: Sys, snapshotRoot: string, cloneFd: number, clone: string): { take: () => void } & Disposable {
  let held: CloneLock | undefined;
  return {
    take: () => {
      held ??= inStore('clone lock cannot be taken', () => lockClone(sys, storeOf(snapshotRoot), cloneFd, clone));
    },
    [Symbol.dispose]: () => held?.release(),
  };
}

/** reset: the clone made exactly data's copy roots again; a ledger of another snapshot is SEAL_BINDING, nothing changed. */
export function resetClone(sys: Sys, snapshotRoot: string, data: StoredSnapshot, clone: string, options: ResetOptions & RunHooks): ResetReport {
  const { dir, ledger, known } = openClone(sys, snapshotRoot, data, clone, true);
  using _ = dir;
  if (ledger !== undefined && ledger.digest !== data.digest) throw bindingError(ledger, data.digest, clone);
  using lock = lockWhenChecked(sys, snapshotRoot, dir.fd, clone);
  // Once the checks have passed and the clone is held: a clone this store made, made read-only by the agent, u+rwx again.
  return resetInto(sys, snapshotRoot, data, dir.fd, ledger, { ...options, checked: () => (lock.take(), known && openUpCloneDir(sys, dir.fd)) });
}

/**
 * materialize: a reset when the clone holds this snapshot's ledger and no marker, else the
 * whole copy roots. A clone directory it made (createClone) is removed again when the
 * materialize fails and leaves it empty.
 */
export function materializeClone(sys: Sys, snapshotRoot: string, data: StoredSnapshot, clone: string, options: MaterializeOptions & RunHooks): MaterializeReport {
  const { dir, ledger, made, known } = openClone(sys, snapshotRoot, data, clone, true, options.createClone === true);
  using _ = dir;
  using lock = lockWhenChecked(sys, snapshotRoot, dir.fd, clone);
  try {
    // A clone this call made, or an empty directory no ledger names (never an arm): no process can be waiting in it (see RunHooks.newClone).
    const newClone = made !== undefined || (!known && sys.readdir(dir.fd).length === 0);
    return materializeOpen(sys, snapshotRoot, data, dir, ledger, { ...options, newClone, checked: () => (lock.take(), known && openUpCloneDir(sys, dir.fd)) });
  } catch (err) {
    if (made !== undefined) removeMadeClone(sys, clone, made);
    throw err;
  }
}

function materializeOpen(sys: Sys, snapshotRoot: string, data: StoredSnapshot, dir: Fd, ledger: Ledger | undefined, options: MaterializeOptions & RunHooks): MaterializeReport {
  const { createClone: _create, ...rest } = options;
  // reflink 'never' promises files that share no extent with the store: kept files only when the ledger's were made so too.
  // A clone holding none of the roots (a new directory that took a removed arm's inode, and with it its ledger) has
  // nothing to keep: a whole materialize makes it, without a reset's read-back of every file it makes.
  const whole =
    ledger === undefined ||
    ledger.digest !== data.digest ||
    hasMarker(sys, dir.fd) ||
    (options.reflink === 'never' && !ledger.independent) ||
    rootsOf(data).every((parts) => !rootPresent(sys, dir.fd, parts));
  if (whole) {
    if (ledger === undefined || ledger.digest === data.digest) return materializeInto(sys, snapshotRoot, data, dir.fd, options);
    // Another snapshot's ledger goes once the clone's lock is held: a call refused (SEAL_BUSY) leaves the store as it was.
    const checked = (): void => {
      options.checked?.();
      inStore('clone ledger cannot be dropped', () => dropLedger(sys, storeOf(snapshotRoot), sys.fstat(dir.fd)));
    };
    return materializeInto(sys, snapshotRoot, data, dir.fd, { ...options, checked });
  }
  const { method: _m, added: _a, removed: _r, changed: _c, outside: _o, ...report } = resetInto(sys, snapshotRoot, data, dir.fd, ledger, rest);
  return report;
}

/** diff: the clone's copy roots compared with data's manifest, by the ledger's identities (or re-hashed), and with `all` what lies outside them. */
export function diffClone(sys: Sys, snapshotRoot: string, data: StoredSnapshot, clone: string, options: DiffOptions): DiffReport {
  const { dir, ledger } = openClone(sys, snapshotRoot, data, clone, false);
  using _ = dir;
  const verify = options.verify === true || ledger === undefined;
  if (!verify && ledger.digest !== data.digest) throw bindingError(ledger, data.digest, clone);
  const report: DiffReport = { ...compareClone(sys, data, dir.fd, verify ? undefined : ledger), method: verify ? 'hash' : 'ledger', outside: [] };
  if (options.all === true) {
    // A directory on the way to a root that this user may not list is unreadable already: what it holds is not known.
    forEachOutside(sys, dir.fd, data, (_fd, _name, path) => report.outside.push(path), openListableDir);
    report.outside.sort(compareUtf8);
  }
  return report;
}
