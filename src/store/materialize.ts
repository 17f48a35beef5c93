// materialize.ts: builds a snapshot's copy roots in a private stage beside a clone and swaps each root in exactly.
import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';

import { CHUNK_BYTES, copyRanges, writeAll } from '../base/io.js';
import { DIR_FLAGS, checkRootPath, closeQuietly, openBeneath, openChildDir, openRealDir, removeAt } from '../base/fd.js';
import type { SnapshotData } from './document.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import type { ManifestEntry } from '../base/manifest.js';
import { throttled, type ProgressFn } from '../base/progress.js';
import { escapePath } from '../base/paths.js';
import {

  O_CREAT,
  O_EXCL,
  O_NOFOLLOW,
  O_NONBLOCK,
  O_RDONLY,
  O_WRONLY,
  RENAME_EXCHANGE,
  RENAME_NOREPLACE,
  isDir,
  isLink,
  isReg,
} from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import { openPublishParent, preflightRoot, removeCreatedDirs, statOrNull } from './clone-paths.js';
import { childrenOf } from './assemble.js';
import { sameIdentity } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';

export type ReflinkMode = 'auto' | 'always' | 'never';

export interface MaterializeOptions {
  /** auto: clone, else an in-kernel (copy_file_range) or buffered copy within fallbackBytes; always: clone or fail; never: independent buffered copies. */
  reflink?: ReflinkMode;
  /** Cap on buffered bytes for one call (default 512 MiB). */
  fallbackBytes?: number;
  /** Called now and then with the files and bytes materialized so far. */
  onProgress?: ProgressFn;
}

export interface MaterializeReport {
  files: number;
  directories: number;
  reflinked: number;
  copied: number;
  bytesCopied: number;
  elapsedMs: number;
}

export const DEFAULT_FALLBACK_BYTES = 512 * 1024 * 1024;
export const STAGE_PREFIX = '.treeseal-materialize-';

interface Run {
  sys: Sys;
  mode: ReflinkMode;
  fallbackBytes: number;
  cloneWorks: boolean | undefined;
  /** copy_file_range between the snapshot and the clone (auto only). */
  rangeWorks: boolean | undefined;
  buffer: Buffer;
  report: MaterializeReport;
  progress: (entries: number, bytes: number, force?: boolean) => void;
  bytes: number;
}

function corrupt(rel: string, what = 'snapshot file changed'): SealError {
  return new SealError('SEAL_CORRUPT', `${what}: ${escapePath(rel)}`, { path: rel });
}

function checkOptions(options: MaterializeOptions): { mode: ReflinkMode; fallbackBytes: number } {
  const mode = options.reflink ?? 'auto';
  if (mode !== 'auto' && mode !== 'always' && mode !== 'never') {
    throw new SealError('SEAL_BAD_PATH', `reflink must be 'auto', 'always' or 'never', not ${String(mode)}`);
  }
  const fallbackBytes = options.fallbackBytes ?? DEFAULT_FALLBACK_BYTES;
  if (!Number.isSafeInteger(fallbackBytes) || fallbackBytes < 0) {
    throw new SealError('SEAL_BAD_PATH', 'fallbackBytes must be a non-negative integer');
  }
  return { mode, fallbackBytes };
}

function checkBudget(run: Run, rel: string, size: number): void {
  if (run.report.bytesCopied + size > run.fallbackBytes) {
    throw new SealError(
      'SEAL_NO_REFLINK',
      `filesystem cannot reflink the snapshot and the buffered fallback limit would be exceeded (${run.fallbackBytes} bytes): ${escapePath(rel)}`,
      { path: rel },
    );
  }
}

/** Buffered copy with plain read/write (what `never` uses: copy_file_range may share extents). */
function bufferedCopy(run: Run, src: number, dst: number, rel: string, size: number): void {
  let copied = 0;
  for (;;) {
    const n = run.sys.pread(src, run.buffer, 0, run.buffer.length, copied);
    if (n === 0) break;
    if (copied + n > size) throw corrupt(rel, 'snapshot file changed while materializing');
    writeAll(run.sys, dst, run.buffer.subarray(0, n), copied);
    copied += n;
  }
  if (copied !== size) throw corrupt(rel, 'snapshot file changed while materializing');
}

/**
 * auto: FICLONE, else copy_file_range in the kernel (holes kept), else a buffered
 * copy; always: FICLONE or SEAL_NO_REFLINK; never: a buffered copy. What is not
 * cloned counts against fallbackBytes. Each method that fails once is not tried again.
 */
function fillFile(run: Run, src: number, dst: number, rel: string, entry: ManifestEntry): void {
  if (run.mode !== 'never' && run.cloneWorks !== false) {
    const cloned = run.sys.ficlone(dst, src);
    if (run.cloneWorks === undefined) run.cloneWorks = cloned;
    // A clone copies the whole source, whose size the identity check after proves.
    if (cloned) {
      run.report.reflinked++;
      return;
    }
  }
  if (run.mode === 'always') {
    throw new SealError('SEAL_NO_REFLINK', `filesystem cannot reflink the snapshot: ${escapePath(rel)}`, { path: rel });
  }
  checkBudget(run, rel, entry.size);
  let done = false;
  if (run.mode === 'auto' && run.rangeWorks !== false && entry.size > 0) {
    done = copyRanges(run.sys, src, dst, entry.size);
    run.rangeWorks = done;
  }
  if (!done) bufferedCopy(run, src, dst, rel, entry.size);
  run.report.copied++;
  run.report.bytesCopied += entry.size;
}

function materializeFile(run: Run, snapDir: number, stageDir: number, name: string, entry: ManifestEntry): void {
  const { sys } = run;
  let src: number;
  try {
    src = sys.openat(snapDir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    throwIfRefused(err, `snapshot file cannot be opened: ${escapePath(entry.path)}`, entry.path);
    throw new SealError('SEAL_CORRUPT', `snapshot file changed: ${escapePath(entry.path)}`, { path: entry.path, cause: err });
  }
  try {
    const st = sys.fstat(src);
    if (!isReg(st.mode) || st.size !== entry.size) throw corrupt(entry.path);
    const dst = sys.openat(stageDir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    try {
      fillFile(run, src, dst, entry.path, entry);
    } finally {
      closeQuietly(sys, dst);
    }
    if (!sameIdentity(st, sys.fstat(src))) {
      throw corrupt(entry.path, 'snapshot file changed while materializing');
    }
    run.report.files++;
    run.bytes += entry.size;
    run.progress(run.report.files, run.bytes);
  } finally {
    closeQuietly(sys, src);
  }
}

function buildStage(run: Run, children: Map<string, ManifestEntry[]>, rel: string, snapDir: number, stageDir: number): void {
  const { sys } = run;
  for (const entry of children.get(rel) ?? []) {
    const name = entry.path.slice(rel === '' ? 0 : rel.length + 1);
    if (entry.kind === 'file') {
      materializeFile(run, snapDir, stageDir, name, entry);
      continue;
    }
    if (entry.kind !== 'directory') throw corrupt(entry.path, 'copy roots cannot hold a symlink');
    let snapChild: number;
    try {
      snapChild = openChildDir(sys, snapDir, name);
    } catch (err) {
      throwIfRefused(err, `snapshot directory cannot be opened: ${escapePath(entry.path)}`, entry.path);
      throw new SealError('SEAL_CORRUPT', `snapshot directory changed: ${escapePath(entry.path)}`, { path: entry.path, cause: err });
    }
    try {
      sys.mkdirat(stageDir, name, 0o700);
      const stageChild = openChildDir(sys, stageDir, name);
      try {
        run.report.directories++;
        buildStage(run, children, entry.path, snapChild, stageChild);
      } finally {
        closeQuietly(sys, stageChild);
      }
    } finally {
      closeQuietly(sys, snapChild);
    }
  }
}

/** publishInto, and on failure removes the parent directories it made: the clone keeps no trace of the root. */
function publishRoot(sys: Sys, stageFd: number, cloneFd: number, parts: readonly string[]): void {
  const created: string[][] = [];
  try {
    publishInto(sys, stageFd, cloneFd, parts, created);
  } catch (err) {
    removeCreatedDirs(sys, cloneFd, created);
    throw err;
  }
}

function publishInto(sys: Sys, stageFd: number, cloneFd: number, parts: readonly string[], created: string[][]): void {
  const rel = parts.join('/');
  const name = parts[parts.length - 1]!;
  const parentParts = parts.slice(0, -1);
  const destParent = openPublishParent(sys, cloneFd, parentParts, 'copy', created);
  let srcParent = -1;
  try {
    srcParent = parentParts.length === 0 ? sys.openat(stageFd, '.', DIR_FLAGS) : openBeneath(sys, stageFd, parentParts, DIR_FLAGS);
    const existing = statOrNull(sys, destParent, name);
    if (existing !== null && isLink(existing.mode)) {
      throw new SealError('SEAL_SYMLINK', `copy target cannot be a symlink: ${escapePath(rel)}`, { path: rel });
    }
    if (existing !== null && !isDir(existing.mode) && !isReg(existing.mode)) {
      throw new SealError('SEAL_SPECIAL_FILE', `copy target has an unsupported type: ${escapePath(rel)}`, { path: rel });
    }
    if (existing === null) {
      try {
        sys.renameat2(srcParent, name, destParent, name, RENAME_NOREPLACE);
      } catch (err) {
        if (!hasCode(err, 'EINVAL', 'ENOSYS')) throw err;
        sys.renameat2(srcParent, name, destParent, name, 0);
      }
      return;
    }
    try {
      sys.renameat2(srcParent, name, destParent, name, RENAME_EXCHANGE);
      // The old tree now sits in the stage; remove it there, through fds.
      removeAt(sys, srcParent, name);
    } catch (err) {
      if (!hasCode(err, 'EINVAL', 'ENOSYS')) throw err;
      removeAt(sys, destParent, name);
      sys.renameat2(srcParent, name, destParent, name, 0);
    }
  } finally {
    closeQuietly(sys, srcParent, destParent);
  }
}

/** Materializes data's copy roots (from snapshotRoot/copy) into clone. */
export function materializeSnapshot(
  sys: Sys,
  snapshotRoot: string,
  data: SnapshotData,
  clone: string,
  options: MaterializeOptions = {},
): MaterializeReport {
  const started = performance.now();
  const { mode, fallbackBytes } = checkOptions(options);
  const clonePath = checkRootPath(clone, 'clone');
  const cloneFd = openRealDir(sys, clonePath, 'clone');
  let parentFd = -1;
  let snapFd = -1;
  let stageFd = -1;
  const stageName = STAGE_PREFIX + randomBytes(12).toString('hex');
  let staged = false;
  try {
    const roots = data.declarations.map((d) => d.split('/').filter((p) => p !== '' && p !== '.'));
    for (const parts of roots) preflightRoot(sys, cloneFd, parts);
    snapFd = openSnapshotArea(sys, snapshotRoot, 'copy');
    parentFd = openRealDir(sys, dirname(clonePath), 'clone parent');
    sys.mkdirat(parentFd, stageName, 0o700);
    staged = true;
    stageFd = openChildDir(sys, parentFd, stageName);
    const run: Run = {
      sys,
      mode,
      fallbackBytes,
      cloneWorks: undefined,
      rangeWorks: undefined,
      buffer: Buffer.allocUnsafe(CHUNK_BYTES),
      report: { files: 0, directories: 0, reflinked: 0, copied: 0, bytesCopied: 0, elapsedMs: 0 },
      progress: throttled(options.onProgress),
      bytes: 0,
    };
    buildStage(run, childrenOf(data.entries), '', snapFd, stageFd);
    for (const parts of roots) publishRoot(sys, stageFd, cloneFd, parts);
    run.progress(run.report.files, run.bytes, true);
    run.report.elapsedMs = performance.now() - started;
    return run.report;
  } finally {
    closeQuietly(sys, stageFd, snapFd, cloneFd);
    if (staged) {
      try {
        removeAt(sys, parentFd, stageName);
      } catch {
        // nothing more can be done; the stage name is hidden and private (0700)
      }
    }
    closeQuietly(sys, parentFd);
  }
}

/** Opens an area (`copy`, `mounts/00000`) of a published snapshot without crossing a symlink. */
export function openSnapshotArea(sys: Sys, snapshotRoot: string, area: string): number {
  const root = openRealDir(sys, snapshotRoot, 'snapshot');
  try {
    return openBeneath(sys, root, area.split('/'), DIR_FLAGS);
  } catch (err) {
    throwIfRefused(err, `snapshot area cannot be opened: ${escapePath(area)}`);
    throw new SealError('SEAL_CORRUPT', `snapshot area is missing or not a directory: ${escapePath(area)}`, { cause: err });
  } finally {
    closeQuietly(sys, root);
  }
}
