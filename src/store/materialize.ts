// materialize.ts: builds a snapshot's copy roots in a locked stage inside the clone and swaps each root in exactly.
import { CHUNK_BYTES } from '../base/io.js';
import { DIR_FLAGS, openBeneath, openChildDir, openRealDir, own, type Fd } from '../base/fd.js';
import type { StoredSnapshot } from './document.js';
import { checkInteger, checkOptions, invalidArgValue } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { ioError, reasonOf, throwIfRefused } from '../base/refusal.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { throttled } from '../base/progress.js';
import { escapePath } from '../base/paths.js';
import { fsOf } from '../base/fs-types.js';
import { AT_SYMLINK_NOFOLLOW, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_WRONLY, isReg } from '../sys/constants.js';
import { hasCode, isSystemError } from '../sys/errno.js';
import { HOW, fillBytes } from '../files/copy-file.js';
import { checkCloneApart, makeCloneDir, statOrNull } from './clone-paths.js';
import { buildTree, childrenOf, indexOfPath, makeDir, type Children } from './manifest-tree.js';
import { directoryRoots, onBtrfs } from './subvolumes.js';
import { cloneFileMode } from '../base/subvolume.js';
import { Ledger, dropLedger, saveLedger, storeOf } from './clone-ledger.js';
import { checkRemovable } from './clone-removable.js';
import { openCloneStage, sweepCloneStages, type CloneStage } from './clone-stage.js';
import { checkMarker, removeMarker, writeMarker } from './clone-marker.js';
import { CloneSwap } from './clone-swap.js';
import { CloneLinks } from './clone-links.js';
import { sameStoredIdentity } from '../sys/identity.js';
import { CLONE_MARKER, CLONE_STAGE_PREFIX, COPY_AREA } from './layout.js';
import { readingSnapshot } from './lock.js';
import type { Stat, Sys } from '../sys/native.js';
import { keepMtime } from '../base/times.js';
import { keepRootMtimes } from './clone-times.js';
import { DEFAULT_FALLBACK_BYTES, madeEntries, type MaterializeOptions, type MaterializeReport, type ReflinkMode, type Run, type RunHooks } from './materialize-run.js';
import { snapshotRoot } from './materialize-subvolume.js';
import { inStore } from './clone-changing.js';

export type { MaterializeOptions, MaterializeReport, ReflinkMode, Run, RunHooks, SnapshotFallback, StageLeft } from './materialize-run.js';
export { DEFAULT_FALLBACK_BYTES } from './materialize-run.js';

function corrupt(rel: string, what = 'snapshot file changed'): SealError {
  return new SealError('SEAL_CORRUPT', `${what}: ${escapePath(rel)}`, { path: rel });
}

/** reflink and fallbackBytes checked (Node's TypeError or RangeError): on the calling thread before a call is sent, and by the run itself. */
export function checkMaterializeOptions(options: Pick<MaterializeOptions, 'reflink' | 'fallbackBytes'>): { mode: ReflinkMode; fallbackBytes: number } {
  const { reflink: mode = 'auto', fallbackBytes = DEFAULT_FALLBACK_BYTES } = checkOptions('options', options);
  if (mode !== 'auto' && mode !== 'always' && mode !== 'never') {
    throw invalidArgValue('options.reflink', mode, "must be 'auto', 'always' or 'never'");
  }
  return { mode, fallbackBytes: checkInteger('options.fallbackBytes', fallbackBytes) };
}

/** Which filesystems hold the store's file (src) and the clone's (dst): `store on ext4, clone on tmpfs`. */
function fsPair(sys: Sys, src: number, dst: number): string {
  return `store on ${fsOf(sys, src)}, clone on ${fsOf(sys, dst)}`;
}

function checkBudget(run: Run, rel: string, dataBytes: number, pair: () => string): void {
  if (run.report.bytesCopied + dataBytes > run.fallbackBytes) {
    throw new SealError(
      'SEAL_NO_REFLINK',
      `filesystem cannot reflink the snapshot (${pair()}) and the buffered fallback limit would be exceeded (${run.fallbackBytes} bytes; fallbackBytes or --fallback-bytes raises it): ${escapePath(rel)}`,
      { path: rel },
    );
  }
}

/**
 * auto: FICLONE, else copy_file_range in the kernel (holes kept), else a buffered
 * copy (fillBytes); always: FICLONE or SEAL_NO_REFLINK; never: a buffered copy (plain
 * reads and writes: copy_file_range may share extents). A copy writes the source's
 * data segments only, and their bytes are what counts against fallbackBytes and is
 * reported. Each method that fails once is not tried again. A clone copies the whole
 * source, a kernel copy stops at its EOF: the identity check after proves the size.
 */
function fillFile(run: Run, src: number, dst: number, rel: string, entry: ManifestEntry): void {
  const clone = run.mode !== 'never' && run.cloneWorks !== false;
  const range = run.mode === 'auto' && run.rangeWorks !== false;
  let dataBytes = 0;
  const how = fillBytes(run.sys, run.buffer, src, dst, entry.size, {
    clone,
    range,
    copy: run.mode === 'always' ? undefined : { changed: () => corrupt(rel, 'snapshot file changed while materializing') },
    onCopy: (n) => {
      checkBudget(run, rel, n, () => fsPair(run.sys, src, dst));
      dataBytes = n;
    },
  });
  if (clone) run.cloneWorks ??= how === HOW.CLONED;
  if (how === HOW.CLONED) {
    run.report.reflinked++;
    return;
  }
  if (how === undefined) {
    throw new SealError('SEAL_NO_REFLINK', `filesystem cannot reflink the snapshot (${fsPair(run.sys, src, dst)}): ${escapePath(rel)}`, { path: rel });
  }
  if (range && entry.size > 0) run.rangeWorks = how === HOW.RANGED;
  if (run.mode === 'auto') {
    const why = run.cloneWorks === false ? 'the filesystems cannot share extents' : 'the filesystem refused to clone a file';
    run.report.copyReason ??= `${why} (${fsPair(run.sys, src, dst)})`;
  }
  run.report.copied++;
  run.report.bytesCopied += dataBytes;
}

/** Makes file entry `name` in the directory open at stageDir from the snapshot's directory open at snapDir, and records it in the run's ledger. */
export function materializeFile(run: Run, snapDir: number, stageDir: number, name: string, entry: ManifestEntry, index: number): void {
  run.checkAborted();
  const { sys } = run;
  let src: number;
  try {
    src = sys.openat(snapDir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    throwIfRefused(err, `snapshot file cannot be opened: ${escapePath(entry.path)}`, entry.path);
    throw new SealError('SEAL_CORRUPT', `snapshot file changed: ${escapePath(entry.path)}`, { path: entry.path, cause: err });
  }
  using source = own(sys, src);
  const st = sys.fstat(src);
  if (!isReg(st.mode) || st.size !== entry.size) throw corrupt(entry.path);
  {
    using dst = own(sys, sys.openat(stageDir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, cloneFileMode(entry.mode)));
    fillFile(run, source.fd, dst.fd, entry.path, entry);
    keepMtime(sys, dst.fd, entry);
    // Read back before it is trusted where a process may be in the clone: by a reset at once (madeFiles), after a whole materialize by the next reset (unverified).
    run.ledger.record(index, sys.fstat(dst.fd), run.madeFiles !== undefined || run.newClone);
    run.madeFiles?.push(index);
  }
  // Not its ctime: another capture linking this stored copy into its build moves it, not the bytes.
  if (!sameStoredIdentity(st, sys.fstat(src))) {
    throw corrupt(entry.path, 'snapshot file changed while materializing');
  }
  run.report.files++;
  run.bytes += entry.size;
  run.progress(madeEntries(run.report), run.bytes);
}

/** The snapshot's directory for a directory entry of the one open at snapDir, opened (never through a link). */
export function openSnapshotDir(run: Run, snapDir: Fd, name: string, entry: ManifestEntry): Fd {
  try {
    return own(run.sys, openChildDir(run.sys, snapDir.fd, name));
  } catch (err) {
    throwIfRefused(err, `snapshot directory cannot be opened: ${escapePath(entry.path)}`, entry.path);
    throw new SealError('SEAL_CORRUPT', `snapshot directory changed: ${escapePath(entry.path)}`, { path: entry.path, cause: err });
  }
}

/**
 * Builds the entries below `rel` ('' for the copy roots themselves) in the directory open
 * at dirFd from the snapshot's directory for `rel` open at snapDir, walking both in step,
 * and records each in the run's ledger.
 */
export function buildInto(run: Run, children: Children, dirFd: number, snapDir: Fd, links: CloneLinks, rel = ''): void {
  buildTree(
    run.sys,
    children,
    dirFd,
    snapDir,
    {
      // A store on btrfs keeps its directory copy roots as read-only subvolumes: each is tried as one snapshot (its subtree then taken out of children).
      makeDir:
        run.snapshotRoots.size === 0
          ? undefined
          : (stageDir, name, entry, storeDir) =>
              (run.snapshotRoots.has(entry.path) ? snapshotRoot(run, children, stageDir, name, entry, storeDir, links) : undefined) ?? makeDir(run.sys, stageDir, name),
      file: (stageDir, name, entry, at, index) => materializeFile(run, at.fd, stageDir, name, entry, index),
      symlink: (stageDir, name, entry, _at, index) => {
        links.make(stageDir, name, entry);
        run.ledger.record(index, run.sys.fstatat(stageDir, name, AT_SYMLINK_NOFOLLOW));
        run.report.symlinks++;
      },
      enter: (name, entry, at) => {
        const dir = openSnapshotDir(run, at, name, entry);
        run.report.directories++;
        return dir;
      },
      leave: (stageDir, entry, index) => {
        keepMtime(run.sys, stageDir, entry);
        run.ledger.record(index, run.sys.fstat(stageDir));
      },
    },
    rel,
  );
}

export function newRun(sys: Sys, options: MaterializeOptions & RunHooks, ledger: Ledger): Run {
  const { mode, fallbackBytes } = checkMaterializeOptions(options);
  const { isAborted, op = 'materialize' } = options;
  return {
    sys,
    mode,
    fallbackBytes,
    cloneWorks: undefined,
    rangeWorks: undefined,
    buffer: Buffer.allocUnsafe(CHUNK_BYTES),
    report: { files: 0, directories: 0, symlinks: 0, reflinked: 0, copied: 0, bytesCopied: 0, snapshotted: 0, fallbacks: [], elapsedMs: 0, reset: false },
    progress: throttled(options.onProgress),
    bytes: 0,
    snapshotRoots: new Set(),
    ledger,
    newClone: options.newClone === true,
    checkAborted: () => {
      if (isAborted?.() === true) throw new SealError('SEAL_ABORTED', `${op} was aborted`);
    },
  };
}

/** The declared roots as components; a root on treeseal's own names in the clone is refused. */
export function rootsOf(data: StoredSnapshot): string[][] {
  return data.declarations.map((d) => {
    const parts = d.split('/').filter((p) => p !== '' && p !== '.');
    if (parts[0] === CLONE_MARKER || parts[0]!.startsWith(CLONE_STAGE_PREFIX)) {
      throw new SealError('SEAL_COLLISION', `copy root collides with materialize's own names in the clone: ${escapePath(d)}`, { path: d });
    }
    return parts;
  });
}

/** What a root replaces must be removable once swapped out: checked before anything is written. */
function checkRootRemovable(sys: Sys, cloneFd: number, parts: readonly string[]): void {
  let parent: number;
  try {
    parent = parts.length === 1 ? sys.openat(cloneFd, '.', DIR_FLAGS) : openBeneath(sys, cloneFd, parts.slice(0, -1), DIR_FLAGS);
  } catch (err) {
    // Nothing there, or a link or a file above the root: the swap renames that out whole, nothing below it looked at.
    // A directory above it this user may not search is passed over, as checkRemovable passes one over (the swap opens it up).
    if (hasCode(err, 'ENOENT', 'ENOTDIR', 'ELOOP', 'EACCES')) return;
    throw err;
  }
  using dir = own(sys, parent);
  try {
    if (statOrNull(sys, dir.fd, parts[parts.length - 1]!) === null) return;
  } catch (err) {
    if (hasCode(err, 'EACCES')) return;
    throw err;
  }
  checkRemovable(sys, dir.fd, parts[parts.length - 1]!, parts.join('/'));
}

/**
 * Swaps every root in under the marker; on a failure every swap is undone. When an undo
 * fails too, the marker stays and `stage.keep` is set: what the stage holds is not
 * removed by this call (the clone is mixed; checkClone says how). Returns the marker,
 * which the caller removes once the stage (and the old trees it holds) is gone: a
 * materialize killed while it removes them leaves the clone marked, not clean-looking with
 * the last task's files under the stage's name.
 */
function swapRoots(sys: Sys, cloneFd: number, stage: CloneStage, roots: readonly string[][], digest: string, entries: StoredSnapshot['entries']): ReturnType<typeof writeMarker> {
  // Nothing is swapped yet when this fails, and it leaves nothing of its own behind.
  const marker = writeMarker(sys, cloneFd, digest, stage.name);
  const swap = new CloneSwap(sys, cloneFd, stage);
  try {
    for (const parts of roots) swap.publish(parts);
    keepRootMtimes(sys, cloneFd, roots, entries);
    return marker;
  } catch (err) {
    // Nothing is deleted before this point: every swap can be undone.
    if (swap.rollback()) removeMarker(sys, cloneFd, marker);
    else stage.keep = true;
    throw err;
  }
}

/** Builds the roots in the stage from the snapshot's copy area, holding the store's shared lock while it reads. */
function buildFromSnapshot(run: Run, snapshotRoot: string, data: StoredSnapshot, stage: CloneStage): void {
  readingCopyArea(run.sys, snapshotRoot, data.digest, (copyDir) => {
    if (onBtrfs(run.sys, copyDir.fd)) run.snapshotRoots = directoryRoots(data.declarations, data.entries);
    buildInto(run, childrenOf(data.entries), stage.newFd, copyDir, new CloneLinks(run.sys, data));
  });
}

/** Runs fn with the snapshot's copy area open, holding the store's shared lock while it reads. */
export function readingCopyArea(sys: Sys, snapshotRoot: string, digest: string, fn: (copyDir: Fd) => void): void {
  readingSnapshot(sys, snapshotRoot, digest, (snapshotFd) => {
    let copyFd: number;
    try {
      copyFd = openBeneath(sys, snapshotFd, [COPY_AREA], DIR_FLAGS);
    } catch (err) {
      throwIfRefused(err, `snapshot area cannot be opened: ${COPY_AREA}`);
      throw new SealError('SEAL_CORRUPT', `snapshot area is missing or not a directory: ${COPY_AREA}`, { cause: err });
    }
    using copyDir = own(sys, copyFd);
    fn(copyDir);
  });
}

/** Records each copy root as it stands in the clone now: swapped in, its ctime (and for a directory, maybe its mtime) moved. */
export function recordRoots(sys: Sys, cloneFd: number, roots: readonly string[][], entries: Entries, ledger: Ledger): void {
  for (const parts of roots) {
    using parent = own(sys, parts.length === 1 ? sys.openat(cloneFd, '.', DIR_FLAGS) : openBeneath(sys, cloneFd, parts.slice(0, -1), DIR_FLAGS));
    const st = statOrNull(sys, parent.fd, parts[parts.length - 1]!);
    const i = indexOfPath(entries, parts.join('/'));
    // As verified as its first record was (a whole materialize into an arm leaves its files unverified).
    if (st !== null) ledger.record(i, st, ledger.verified(i));
  }
}

/**
 * Saves the clone's ledger once its roots are in place. It only makes the next diff and
 * reset cheaper: when it cannot be recorded or saved (an I/O error, or its new file taken
 * again and again by other opens' sweeps: SEAL_BUSY), the ledger is dropped instead, so diff re-hashes and reset materializes whole, and the materialize, which is
 * done, succeeds. A snapshotted root's entries were made by the kernel, not one by one: the
 * ledger cannot record them, so a clone holding one keeps none either.
 */
function keepLedger(sys: Sys, snapshotRoot: string, cloneFd: number, cloneSt: Stat, roots: readonly string[][], entries: Entries, run: Run): void {
  if (run.report.snapshotted === 0) {
    const failed = saveLedgerOrSay(sys, snapshotRoot, cloneFd, cloneSt, run.ledger, () => recordRoots(sys, cloneFd, roots, entries, run.ledger));
    if (failed !== undefined) run.report.ledgerNotSaved = failed;
    return;
  }
  dropLedgerQuietly(sys, storeOf(snapshotRoot), cloneSt);
}

/**
 * Records (`record`) and saves the clone's ledger; where the kernel refuses (no space, an
 * I/O error: SEAL_IO), other opens' sweeps keep taking its new file (SEAL_BUSY) or the
 * store's clones/ is not what it made (a link: SEAL_CORRUPT, nothing written through it),
 * drops the one the store held (its records are not of this clone now) and returns why,
 * for the report: the clone, already whole, is not failed for it.
 */
export function saveLedgerOrSay(sys: Sys, snapshotRoot: string, cloneFd: number, cloneSt: Stat, ledger: Ledger, record: () => void = () => {}): string | undefined {
  const store = storeOf(snapshotRoot);
  try {
    try {
      record();
    } catch (err) {
      // Looking at the roots just swapped in (an I/O error, a root the agent already moved): said as the ledger's.
      if (isSystemError(err) && !(err instanceof SealError)) throw ioError('clone ledger cannot be recorded', err);
      throw err;
    }
    inStore('clone ledger cannot be saved', () => saveLedger(sys, store, cloneFd, cloneSt, ledger));
    return undefined;
  } catch (err) {
    if (!(err instanceof SealError && (err.code === 'SEAL_IO' || err.code === 'SEAL_BUSY' || err.code === 'SEAL_CORRUPT'))) throw err;
    // A store on a read-only filesystem holds no ledger, nor one to drop: said as such.
    if (hasCode(err.cause, 'EROFS')) return 'the store is on a read-only filesystem';
    dropLedgerQuietly(sys, store, cloneSt);
    return reasonOf(err);
  }
}

function dropLedgerQuietly(sys: Sys, store: string, cloneSt: Stat): void {
  try {
    dropLedger(sys, store, cloneSt);
  } catch {
    // A ledger left in place records other inodes than the ones just made: nothing in the clone matches it (or a reset
    // finds what it restored changed, and restores it again).
  }
}

/**
 * Materializes data's copy roots (from snapshotRoot/copy) into clone. Every byte is
 * written inside the clone: the roots are built in a locked stage there, swapped in
 * under the in-progress marker, and what they replace is removed with the stage.
 */
export function materializeSnapshot(sys: Sys, snapshotRoot: string, data: StoredSnapshot, clone: string, options: MaterializeOptions & RunHooks = {}): MaterializeReport {
  checkCloneApart(sys, clone, data.source, snapshotRoot);
  if (options.createClone === true) makeCloneDir(sys, clone);
  using cloneDir = own(sys, openRealDir(sys, clone, 'clone'));
  return materializeInto(sys, snapshotRoot, data, cloneDir.fd, options);
}

/**
 * materializeSnapshot into the clone directory open at cloneFd (checked apart from the
 * source and the store), then the clone's ledger saved in the store (see keepLedger:
 * one that cannot be saved is dropped; the next diff re-hashes, the next reset is whole).
 */
export function materializeInto(sys: Sys, snapshotRoot: string, data: StoredSnapshot, cloneFd: number, options: MaterializeOptions & RunHooks): MaterializeReport {
  const started = performance.now();
  const cloneSt = sys.fstat(cloneFd);
  const run = newRun(sys, options, Ledger.empty(data.digest, cloneSt.dev, options.reflink === 'never', data.entries.length));
  const roots = rootsOf(data);
  for (const parts of roots) checkRootRemovable(sys, cloneFd, parts);
  // A marker planted in the clone is refused before anything is written (and checked again when replaced).
  checkMarker(sys, cloneFd);
  options.checked?.();
  sweepCloneStages(sys, cloneFd);
  {
    // Whatever happens, the roots are in place (or rolled back) when the stage goes; what it
    // still holds when it cannot be removed stays inside the clone, unlocked, for the next sweep.
    using stage = openCloneStage(sys, cloneFd);
    buildFromSnapshot(run, snapshotRoot, data, stage);
    const marker = swapRoots(sys, cloneFd, stage, roots, data.digest, data.entries);
    // The roots are the snapshot's now: an old tree that cannot be removed (a mount the look before could not see) is said, not thrown.
    const left = stage.keep ? undefined : stage.closeOrLeave();
    if (left !== undefined) run.report.stageLeft = left;
    try {
      removeMarker(sys, cloneFd, marker);
    } catch (err) {
      // The roots are in: a marker that cannot be removed is said as what is left (the next materialize or reset replaces it).
      run.report.stageLeft ??= { path: CLONE_MARKER, reason: reasonOf(err) };
    }
  }
  // A snapshotted root's entries were made by the kernel, not one by one: the ledger cannot
  // record them, so a clone holding one keeps none (diff hashes, reset snapshots the roots again).
  keepLedger(sys, snapshotRoot, cloneFd, cloneSt, roots, data.entries, run);
  run.progress(madeEntries(run.report), run.bytes, true);
  run.report.elapsedMs = performance.now() - started;
  return run.report;
}
