// materialize-run.ts: what materialize takes and reports, and the state one materialize (or reset) carries from file to file.
import type { ProgressFn } from '../base/progress.js';
import type { Sys } from '../sys/native.js';
import type { Ledger } from './clone-ledger.js';
import type { Writeback } from '../capture/stat-cache.js';

export type ReflinkMode = 'auto' | 'always' | 'never';

export interface MaterializeOptions {
  /** auto: clone, else an in-kernel (copy_file_range) or buffered copy within fallbackBytes; always: clone or fail; never: independent buffered copies. */
  reflink?: ReflinkMode | undefined;
  /** Cap on the data bytes copied (not cloned) by one call, holes not counted (default 512 MiB). */
  fallbackBytes?: number | undefined;
  /** Called now and then with the entries (files, directories, links) and bytes materialized so far. */
  onProgress?: ProgressFn | undefined;
  /** Make the clone directory when only its last component is missing (never through a symlink). */
  createClone?: boolean | undefined;
  /**
   * Stops the call with SEAL_ABORTED while the roots are built (in the stage, which is
   * removed: the clone is left as it was) or, when the clone is reset instead, between the
   * files it restores (the clone is then part reset, as after a kill: a changed file may be
   * gone, not yet restored; the next reset or materialize makes it whole). Once the roots
   * are being swapped in, the call completes.
   */
  signal?: AbortSignal | undefined;
}

/** What a materialize or reset runs with besides the caller's options: whether its call was aborted, and the call's name. */
export interface RunHooks {
  isAborted?: (() => boolean) | undefined;
  op?: string | undefined;
  /** Called once the clone passed the checks made before anything is written (the clone's lock is taken there: a refusal writes nothing, in the store either). */
  checked?: (() => void) | undefined;
  /**
   * The clone is a directory this call made, or an empty one that no ledger of the store
   * names (never an arm): no process can be waiting in it, so the ledger trusts the files a
   * whole materialize makes there. Elsewhere (an arm, emptied or not, or a directory holding
   * anything) it records them unverified, read back by the next reset (see clone-readback.ts).
   */
  newClone?: boolean | undefined;
}

export interface MaterializeReport {
  files: number;
  directories: number;
  /** Symlinks made (copy roots captured with links: 'contained'). */
  symlinks: number;
  reflinked: number;
  copied: number;
  /** Data bytes the copies wrote (holes are not written, and not counted). */
  bytesCopied: number;
  /**
   * Set when reflink 'auto' had to copy a file instead of cloning it: why, naming the
   * store's and the clone's filesystems ("the filesystems cannot share extents (store on
   * ext4, clone on tmpfs)"). Absent when every file was cloned, and with 'never'.
   */
  copyReason?: string;
  /** Directory copy roots made as one writable btrfs snapshot each of the store's subvolume (their entries are counted above too). */
  snapshotted: number;
  /** Directory copy roots a store on btrfs holds that were not snapshotted, and why (built per file instead). */
  fallbacks: SnapshotFallback[];
  elapsedMs: number;
  /**
   * True when the clone held this snapshot's ledger (an earlier materialize of it there):
   * only what differed from the ledger was restored, as `reset` does, and the counts above
   * are of what was made again; false for a whole materialize.
   */
  reset: boolean;
  /**
   * Set when the materialize succeeded but what it replaced could not be removed: the
   * stage inside the clone that still holds it (`path`, relative to the clone) and why
   * (`reason`, as `CODE: message`), e.g. a mount point inside the old tree that the look
   * before the swap could not see (a directory this user may not search, a kernel before
   * 5.8). The copy roots are the snapshot's; the next materialize or reset of the clone (or
   * gc with its `clone`) removes the stage once it can be removed (unmounted). Absent otherwise.
   */
  stageLeft?: StageLeft;
  /**
   * Set when the clone's ledger could not be saved in the store (no space, an I/O error, a
   * read-only `clones/`): why, as `CODE: message` (the system's own words where the kernel
   * refused, `ENOSPC: no space left on device, write`). The clone is whole; without a ledger the next
   * diff re-hashes every file and the next reset is a whole materialize. Absent otherwise.
   */
  ledgerNotSaved?: string;
}

/** What a materialize could not remove after its swap: the stage's name inside the clone, and why. */
export interface StageLeft {
  path: string;
  reason: string;
}

/** A copy root materialize built per file where a snapshot was possible in principle: its path and the reason. */
export interface SnapshotFallback {
  root: string;
  reason: string;
}

export const DEFAULT_FALLBACK_BYTES = 512 * 1024 * 1024;

/** One materialize's (or reset's) state: how files are filled, what it made, and the ledger it records. */
export interface Run {
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
  /** The directory copy roots to try as snapshots (the store is on btrfs), by path. */
  snapshotRoots: ReadonlySet<string>;
  /** What is made, as the clone's ledger records it (paths are the manifest's). */
  ledger: Ledger;
  /** Throws SEAL_ABORTED when the call was aborted. */
  checkAborted: () => void;
  /** A reset's: the manifest index of each file it made, read back before the ledger is saved (see clone-readback.ts). */
  madeFiles?: number[] | undefined;
  /** RunHooks.newClone: the files made are recorded trusted without a read-back. */
  newClone: boolean;
  /** How the clone's filesystem writes back a file made before it is read back (learnt at the first). */
  writeback?: Writeback | undefined;
}

/** The entries a materialize has made so far (its progress counts them all, as capture's and verify's do). */
export function madeEntries(report: Pick<MaterializeReport, 'files' | 'directories' | 'symlinks'>): number {
  return report.files + report.directories + report.symlinks;
}
