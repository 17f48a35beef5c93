// summary-record.ts: a snapshot's summary recorded beside the identity of the manifest.json it was proven from (cache/<digest>.<uid>.summary), so listing a store reads no manifest that is unchanged since.
import { openChildDir, openRealDir, own, type Fd } from '../base/fd.js';
import { readAllAt } from '../base/io.js';
import { isRacy } from '../capture/stat-cache.js';
import { AT_SYMLINK_NOFOLLOW, isDir, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { FileIdentity } from '../sys/identity.js';
import type { Stat, Sys } from '../sys/native.js';
import { CACHE_DIR, DOCUMENT_NAME, TMP_DIR } from './layout.js';
import { summaryOf, isSummaryOf, type SnapshotSummary } from './snapshot-summary.js';
import { saveStoreFile } from './stat-cache-file.js';
import { openSnapshotDir, readSnapshotAt } from './store-dir.js';
import { isPrivate, isSharedPart } from './trust.js';

const FORMAT = 'treeseal-summary';
const VERSION = 1;
/** A record is a few hundred bytes (a capture's exclude patterns the most of it): anything this big is not one. */
const MAX_RECORD_BYTES = 16 * 1024 * 1024;
/** A summary proven by a read that took longer than this is not recorded (see recordProven). */
const MAX_READ_MS = 1000;

/** This user's record of one snapshot's summary: members of a shared store each keep their own. */
function summaryRecordName(digest: string): string {
  return `${digest}.${process.geteuid!()}.summary`;
}

/** Any user's record name: the digest it is of, or undefined for another name. */
function recordedDigest(name: string): string | undefined {
  return /^([0-9a-f]{64})\.\d+\.summary$/.exec(name)?.[1];
}

interface ManifestStat {
  dev: string;
  ino: string;
  mode: number;
  size: number;
  mtimeNs: string;
  ctimeNs: string;
}

function manifestStatOf(st: FileIdentity): ManifestStat {
  return { dev: String(st.dev), ino: String(st.ino), mode: st.mode, size: st.size, mtimeNs: String(st.mtimeNs), ctimeNs: String(st.ctimeNs) };
}

function recordBytes(digest: string, st: FileIdentity, summary: SnapshotSummary): Buffer {
  return Buffer.from(`${JSON.stringify({ format: FORMAT, version: VERSION, digest, manifest: manifestStatOf(st), summary })}\n`);
}

/** A manifest.json whose identity a write (or a chmod, a rename, a link) has moved since this record was made is not this record's. */
function sameManifest(recorded: unknown, st: Stat): boolean {
  if (typeof recorded !== 'object' || recorded === null) return false;
  const r = recorded as Record<string, unknown>;
  return Object.entries(manifestStatOf(st)).every(([field, now]) => r[field] === now);
}

/**
 * The summaries of one store's snapshots, each from this user's record when the
 * snapshot's manifest.json has the identity recorded beside it, else read and proven
 * (loadSnapshotAt, whose errors it throws) and recorded for the next time. Dispose of it
 * when done.
 */
export class SummaryRecords {
  #cache: Fd | undefined | null = null;

  constructor(
    private readonly sys: Sys,
    private readonly storeRoot: string,
  ) {}

  /** The store's cache/ (undefined when it has none or it cannot be opened: then there are no records). */
  #cacheDir(): Fd | undefined {
    if (this.#cache === null) {
      try {
        this.#cache = own(this.sys, openRealDir(this.sys, `${this.storeRoot}/${CACHE_DIR}`, 'store cache directory'));
      } catch {
        this.#cache = undefined;
      }
    }
    return this.#cache;
  }

  /** The summary of snapshots/<digest> (snapshotsFd: the store's snapshots/). */
  summaryAt(snapshotsFd: number, digest: string): SnapshotSummary {
    const { sys } = this;
    const started = performance.now();
    {
      // The directory's checks (SEAL_UNTRUSTED, …) come first, record or not.
      using dir = openSnapshotDir(sys, snapshotsFd, digest);
      let st: Stat | undefined;
      try {
        st = sys.fstatat(dir.fd, DOCUMENT_NAME, AT_SYMLINK_NOFOLLOW);
      } catch {
        // no manifest to stat: the read below says what is wrong
      }
      const recorded = st !== undefined && isReg(st.mode) ? this.#recorded(digest, st) : undefined;
      if (recorded !== undefined) return recorded;
    }
    const { data, identity } = readSnapshotAt(sys, snapshotsFd, digest);
    const summary = summaryOf(data);
    this.#recordProven(digest, identity, summary, started);
    return summary;
  }

  #recorded(digest: string, st: Stat): SnapshotSummary | undefined {
    const cache = this.#cacheDir();
    if (cache === undefined) return undefined;
    const name = summaryRecordName(digest);
    let record: Record<string, unknown>;
    try {
      // Only a record no one else can have written (in a shared store, another member's says nothing to you).
      // One name only: a record is always made by a rename, so a second link to it is someone's planting.
      const text = readAllAt(this.sys, cache.fd, name, MAX_RECORD_BYTES, name, { selfProving: true, trusted: (r) => isPrivate(r) && r.nlink === 1 }).bytes.toString('utf8');
      record = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return undefined;
    }
    if (typeof record !== 'object' || record === null || record.format !== FORMAT || record.version !== VERSION || record.digest !== digest) return undefined;
    if (!sameManifest(record.manifest, st) || !isSummaryOf(record.summary, digest)) return undefined;
    return record.summary;
  }

  /**
   * Records a summary just proven from the manifest bytes read while it had `identity`,
   * under the racy rule of the stat cache: only when the manifest's mtime and ctime are
   * older, by more than the timestamp granularity, than the store filesystem's clock when
   * the read began (the record file's ctime less the time since, which must be under a
   * second), so no write after the read can have left the same identity. A record that
   * cannot be written is not an error.
   */
  #recordProven(digest: string, identity: FileIdentity, summary: SnapshotSummary, started: number): void {
    const { sys } = this;
    try {
      writeRecord(sys, this.storeRoot, digest, identity, summary, (fd) => {
        const elapsedMs = performance.now() - started;
        const recordNs = sys.fstat(fd).ctimeNs - BigInt(Math.ceil(elapsedMs * 1e6));
        if (elapsedMs > MAX_READ_MS || isRacy({ mtimeNs: identity.mtimeNs, ctimeNs: identity.ctimeNs, recordNs })) throw new Racy();
      });
    } catch {
      // a cache: the next listing proves the manifest again
    }
  }

  [Symbol.dispose](): void {
    this.#cache?.[Symbol.dispose]();
  }
}

/** A proof too close in time to the manifest's last change to be recorded. */
class Racy extends Error {}

/**
 * Writes this user's record, only into a store of this user's or into a shared store's
 * cache/ (group-writable and sticky): root listing a user's store, or
 * another user reading one, leaves nothing in it (a cache/ made by root would be one its
 * owner could not write a stat cache into, nor remove).
 */
function writeRecord(sys: Sys, storeRoot: string, digest: string, st: FileIdentity, summary: SnapshotSummary, stamp?: (fd: number) => void): void {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  if (sys.fstat(store.fd).uid !== process.geteuid!()) {
    const cache = sys.fstatat(store.fd, CACHE_DIR, AT_SYMLINK_NOFOLLOW);
    if (!isDir(cache.mode) || !isSharedPart(cache.mode)) return;
  }
  using tmp = own(sys, openChildDir(sys, store.fd, TMP_DIR));
  const bytes = recordBytes(digest, st, summary);
  saveStoreFile(sys, store.fd, tmp.fd, CACHE_DIR, summaryRecordName(digest), (sink) => sink(bytes), true, stamp);
}

/**
 * Records the summary of a snapshot this process just published (snapshotFd: its
 * directory): its manifest.json holds the bytes this process encoded from the data it
 * summarizes (checked before the publish), so no racy rule applies. A record that cannot
 * be written is not an error.
 */
export function recordPublished(sys: Sys, storeRoot: string, snapshotFd: number, summary: SnapshotSummary): void {
  try {
    const st = sys.fstatat(snapshotFd, DOCUMENT_NAME, AT_SYMLINK_NOFOLLOW);
    if (isReg(st.mode)) writeRecord(sys, storeRoot, summary.digest, st, summary);
  } catch {
    // a cache: the first listing proves the manifest and records it then
  }
}

/**
 * Removes the records (any user's) of snapshots the store no longer holds: each names a
 * manifest that is gone. Run under the store's exclusive lock. Not counted among what a gc
 * sweeps: a record is bookkeeping of the snapshot it went with, not an item of its own.
 */
export function sweepSummaryRecords(sys: Sys, storeRoot: string, hasSnapshot: (digest: string) => boolean): void {
  let opened: number;
  try {
    opened = openRealDir(sys, `${storeRoot}/${CACHE_DIR}`, 'store cache directory');
  } catch {
    // None yet, or a shared store's that this member may not list: not this gc's.
    return;
  }
  using dir = own(sys, opened);
  for (const entry of sys.readdir(dir.fd)) {
    const digest = typeof entry.name === 'string' ? recordedDigest(entry.name) : undefined;
    if (digest === undefined || hasSnapshot(digest)) continue;
    try {
      sys.unlinkat(dir.fd, entry.name, 0);
    } catch (err) {
      // Gone meanwhile, a directory under a record's name (EISDIR), or another member's in a sticky cache/ (EPERM): left.
      if (!hasCode(err, 'ENOENT', 'EISDIR', 'EPERM', 'EACCES')) throw err;
    }
  }
}
