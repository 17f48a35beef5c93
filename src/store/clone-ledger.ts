// clone-ledger.ts: what a materialize made in a clone (path, kind, inode, size, mode, mtime, ctime), kept in the store keyed by the clone directory's device and inode, never in the clone.
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';

import { openChildDir, openRealDir, own } from '../base/fd.js';
import { readAllAt } from '../base/io.js';
import { sleepSync } from '../base/sleep.js';
import { AT_FDCWD, AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, UTIME_NOW, UTIME_OMIT, isDir, isLink, isReg } from '../sys/constants.js';
import { sameObject } from '../sys/identity.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import type { StatBlocks } from '../sys/stat-each.js';
import { isPrivate } from './trust.js';
import { CLONES_DIR } from './layout.js';
import { makeStorePart } from './store-part.js';
import { saveStoreFile } from './stat-cache-file.js';
import { storeOnReadOnly } from './read-only.js';

/**
 * 3: a record's second byte holds its untrusted bits (UNVERIFIED, COARSE). A version-2
 * ledger (builds before 2026-12-04, evening) never set them, and those builds read the
 * byte as spare: each version ignores the other's ledger (a diff by hash, a whole reset),
 * never misreads it (one said "same" while a file's bytes differed).
 */
const LEDGER_VERSION = 3;
const MAX_LEDGER_BYTES = 1024 * 1024 * 1024;
const DIGEST = /^[0-9a-f]{64}$/;

type Kind = 'f' | 'd' | 'l';

function kindOf(mode: number): Kind | undefined {
  if (isReg(mode)) return 'f';
  if (isDir(mode)) return 'd';
  if (isLink(mode)) return 'l';
  return undefined;
}

/** "dev:ino" of a stat. */
function idText(st: Stat): string {
  return `${st.dev}:${st.ino}`;
}

/** The ledger's file name in clones/: the clone directory's device and inode. */
function ledgerName(cloneDir: Stat): string {
  return `${cloneDir.dev}-${cloneDir.ino}.ledger`;
}

/**
 * How far apart in time two writes may be on a filesystem that keeps whole seconds (ext3,
 * ext4 with 128-byte inodes; vfat keeps two) and still leave one ctime: the clone's times
 * may be that coarse while the ledger's, in the store, are not.
 */
const COARSE_NS = 2_000_000_000n;
/** COARSE_NS in high halves (units of 2^32 ns), rounded up, plus one: a high half this far below recordedNs's is past it whatever the low halves. */
const COARSE_HIGH = Number(COARSE_NS >> 32n) + 2;

/**
 * Whether a record's ctime, before `recordedNs` (the ledger's mtime, or the time the record
 * is taken), may be a coarse filesystem's that a write after it could still have left as it
 * is: a whole second (a filesystem with nanoseconds gives one once in a billion files,
 * which are then only hashed) within COARSE_NS of recordedNs. The ledger's mtime passing
 * the newest ctime (stampPast) tells nothing of a clone that rounds its times down to the
 * second.
 */
function coarse(ctimeNs: bigint, recordedNs: bigint): boolean {
  return ctimeNs % 1_000_000_000n === 0n && recordedNs - ctimeNs <= COARSE_NS;
}

/** One record's bytes: kind (u8), untrusted (u8: recorded unverified, or too soon after a whole-second ctime) and 2 spare, mode (u32), size (f64), ino (u64), mtime and ctime (i64 ns). */
const RECORD_BYTES = 40;
/** The untrusted byte's bits: recorded unverified, recorded too soon after a whole-second ctime. */
const UNVERIFIED = 1;
const COARSE = 2;
const KIND_CODES: Record<Kind, number> = { f: 1, d: 2, l: 3 };

/**
 * A clone's ledger: the identity of every entry a materialize (or reset) made in the copy
 * roots, one fixed-size record per manifest entry, in manifest order (kind 0: not made). A
 * file whose whole identity (device, inode, size, mode, mtime and ctime) is the one
 * recorded is what the materialize made: an unprivileged agent cannot set a ctime, and
 * every write, chmod, rename or link moves it. Records are read and written in place.
 */
export class Ledger {
  readonly #kinds: Uint8Array;
  readonly #view: DataView;
  /**
   * Whether a file whose identity matches holds the bytes materialize gave it. False on a
   * filesystem that never writes back (tmpfs, ramfs): a write through a shared mapping
   * there moves neither time, so such a file is hashed (openClone sets it).
   */
  bytesTrusted = true;
  /**
   * The ledger file's mtime as loaded: the kernel's clock when the ledger was written,
   * after every file it records. A record whose ctime is not before it may share that
   * clock tick with a later write that moved no time (a kernel with coarse timestamps
   * gives a write in the same tick the same ctime): such a file is racy, and hashed.
   * 0 (every record racy) until a load sets it.
   */
  get recordedNs(): bigint {
    return this.#recordedNs;
  }

  set recordedNs(ns: bigint) {
    this.#recordedNs = ns;
    this.#recordedHigh = Number(BigInt.asIntN(32, ns >> 32n));
    this.#recordedLow = Number(BigInt.asUintN(32, ns));
  }

  #recordedNs = 0n;
  /** recordedNs as a signed high and an unsigned low 32-bit half (trustsBytes compares halves: no BigInt made per file). */
  #recordedHigh = 0;
  #recordedLow = 0;
  /** dev's halves, as sameAt compares them. */
  readonly #devHigh: number;
  readonly #devLow: number;
  /**
   * The device the clone's files and links are on: the clone directory's, except on an
   * overlay whose layers are on different filesystems (and xino off), where they show
   * their upper layer's; learnt from the first one a whole materialize records (a file it
   * made itself), never by a reset (an agent's subvolume or mount in the clone would teach
   * it another device, and every untouched file would then be changed for good): a ledger
   * read back or derived keeps what it says, the clone directory's where it says nothing.
   * Its halves as sameAt compares them.
   */
  #fileDev: bigint;
  #fileDevKnown = true;
  #fileDevHigh: number;
  #fileDevLow: number;

  private constructor(
    /** The snapshot materialized. */
    readonly digest: string,
    /** The clone directory's device: every entry is on it. */
    readonly dev: bigint,
    /** Every file was made by a buffered copy (reflink 'never'): none shares its extents with the store. */
    readonly independent: boolean,
    /** How many records: the manifest's entry count. */
    readonly count: number,
    records: Uint8Array,
  ) {
    this.#kinds = records;
    this.#view = new DataView(records.buffer, records.byteOffset, records.byteLength);
    this.#devHigh = Number(BigInt.asUintN(32, dev >> 32n));
    this.#devLow = Number(BigInt.asUintN(32, dev));
    this.#fileDev = dev;
    this.#fileDevHigh = this.#devHigh;
    this.#fileDevLow = this.#devLow;
  }

  /** The device non-directories were recorded on (see #fileDev). */
  get fileDev(): bigint {
    return this.#fileDev;
  }

  /** Sets the device non-directories are on (from a ledger read back, or the first one recorded). */
  #setFileDev(dev: bigint): void {
    this.#fileDev = dev;
    this.#fileDevKnown = true;
    this.#fileDevHigh = Number(BigInt.asUintN(32, dev >> 32n));
    this.#fileDevLow = Number(BigInt.asUintN(32, dev));
  }

  /** An empty ledger to record a materialize of `digest` (of `count` entries) in. */
  static empty(digest: string, dev: bigint, independent: boolean, count: number): Ledger {
    const ledger = new Ledger(digest, dev, independent, count, new Uint8Array(count * RECORD_BYTES));
    ledger.#fileDevKnown = false;
    return ledger;
  }

  /** A copy of this ledger to record a reset in: what the reset keeps is recorded already. */
  derive(independent: boolean): Ledger {
    const derived = new Ledger(this.digest, this.dev, independent, this.count, this.#kinds.slice());
    derived.#setFileDev(this.#fileDev);
    return derived;
  }

  /** Whether manifest entry i was recorded verified (see record): what recording it again keeps. */
  verified(i: number): boolean {
    return (this.#kinds[i * RECORD_BYTES + 1]! & UNVERIFIED) === 0;
  }

  /** Holds no record of manifest entry i: whatever stands there is changed to the next diff, and restored by the next reset. */
  forget(i: number): void {
    if (i >= 0 && i < this.count) this.#view.setUint8(i * RECORD_BYTES, 0);
  }

  /**
   * Records manifest entry i as st shows it now (nothing for a kind a materialize never
   * makes); `verified` false: its bytes are not trusted (trustsBytes) until a reset reads
   * them back and records it again.
   */
  record(i: number, st: Stat, verified = true): void {
    const kind = kindOf(st.mode);
    if (kind === undefined || i < 0 || i >= this.count) return;
    const at = i * RECORD_BYTES;
    const v = this.#view;
    if (kind !== 'd') {
      if (!this.#fileDevKnown) this.#setFileDev(st.dev);
      // On a device of its own (a file mounted over its name): no record, so the next diff calls it changed.
      if (st.dev !== this.#fileDev) {
        v.setUint8(at, 0);
        return;
      }
    }
    v.setUint8(at, KIND_CODES[kind]);
    // Untrusted: made where a process may have written it unseen (UNVERIFIED), or a whole-second ctime not yet
    // COARSE_NS old (COARSE: a write later in that second would leave it as it is; see coarse).
    v.setUint8(at + 1, (verified ? 0 : UNVERIFIED) | (coarse(st.ctimeNs, BigInt(Date.now()) * 1_000_000n) ? COARSE : 0));
    v.setUint32(at + 4, st.mode, true);
    v.setFloat64(at + 8, st.size, true);
    v.setBigUint64(at + 16, st.ino, true);
    v.setBigInt64(at + 24, st.mtimeNs, true);
    v.setBigInt64(at + 32, st.ctimeNs, true);
  }

  /**
   * Whether a file that is exactly manifest entry i's record (same) holds the bytes it was
   * given: the filesystem writes back (bytesTrusted) and the record is older than the
   * ledger (not racy, see recordedNs). Otherwise the caller hashes it.
   */
  trustsBytes(i: number): boolean {
    // Recorded unverified, or within COARSE_NS of a whole-second ctime: not trusted (see record).
    if (!this.bytesTrusted || this.#kinds[i * RECORD_BYTES + 1] !== 0) return false;
    // The record's ctime against recordedNs, signed 64-bit, by halves: the high ones signed, then the low ones unsigned.
    const at = i * RECORD_BYTES + 32;
    const high = this.#view.getInt32(at + 4, true);
    if (high !== this.#recordedHigh ? high > this.#recordedHigh : this.#view.getUint32(at, true) >= this.#recordedLow) return false;
    // Before it: trusted, unless the time is a whole second within COARSE_NS of it (see coarse).
    return high < this.#recordedHigh - COARSE_HIGH || !coarse(this.#view.getBigInt64(at, true), this.#recordedNs);
  }

  /** The newest ctime any record holds (0 for none). */
  newestCtimeNs(): bigint {
    // Compared by halves (the high signed, the low unsigned), as trustsBytes does: no BigInt made per record.
    let at = -1;
    let high = 0;
    let low = 0;
    for (let i = 0; i < this.count; i++) {
      const r = i * RECORD_BYTES;
      if (this.#kinds[r] === 0) continue;
      const h = this.#view.getInt32(r + 36, true);
      const l = this.#view.getUint32(r + 32, true);
      if (at >= 0 && (h < high || (h === high && l <= low))) continue;
      at = r;
      high = h;
      low = l;
    }
    const newest = at < 0 ? 0n : this.#view.getBigInt64(at + 32, true);
    return newest > 0n ? newest : 0n;
  }

  /** True when st is exactly the entry recorded for manifest entry i: the same inode, unchanged since. */
  same(i: number, st: Stat): boolean {
    const at = i * RECORD_BYTES;
    const v = this.#view;
    return (
      this.#kinds[at] !== 0 &&
      st.dev === (this.#kinds[at] === KIND_CODES.d ? this.dev : this.#fileDev) &&
      st.mode === v.getUint32(at + 4, true) &&
      st.size === v.getFloat64(at + 8, true) &&
      st.ino === v.getBigUint64(at + 16, true) &&
      st.ctimeNs === v.getBigInt64(at + 32, true) &&
      st.mtimeNs === v.getBigInt64(at + 24, true)
    );
  }

  /**
   * same(i, blocks.at(k)) for a filled block (blocks.ok(k)), read from the block field by
   * field: no Stat and no BigInt made, so a diff of an untouched clone allocates nothing per file.
   */
  sameAt(i: number, blocks: StatBlocks, k: number): boolean {
    const at = i * RECORD_BYTES;
    const v = this.#view;
    return (
      this.#kinds[at] !== 0 &&
      blocks.low(k, 0) === (this.#kinds[at] === KIND_CODES.d ? this.#devLow : this.#fileDevLow) &&
      blocks.high(k, 0) === (this.#kinds[at] === KIND_CODES.d ? this.#devHigh : this.#fileDevHigh) &&
      blocks.mode(k) === v.getUint32(at + 4, true) &&
      blocks.size(k) === v.getFloat64(at + 8, true) &&
      blocks.low(k, 1) === v.getUint32(at + 16, true) &&
      blocks.high(k, 1) === v.getUint32(at + 20, true) &&
      blocks.low(k, 3) === v.getUint32(at + 32, true) &&
      blocks.high(k, 3) === v.getUint32(at + 36, true) &&
      blocks.low(k, 2) === v.getUint32(at + 24, true) &&
      blocks.high(k, 2) === v.getUint32(at + 28, true)
    );
  }

  /** Manifest entry i's record when it is a regular file's (undefined: none, or another kind): its identity as recorded. */
  fileAt(i: number): Pick<Stat, 'ino' | 'size' | 'mode' | 'mtimeNs' | 'ctimeNs'> | undefined {
    const at = i * RECORD_BYTES;
    if (this.#kinds[at] !== KIND_CODES.f) return undefined;
    const v = this.#view;
    return { mode: v.getUint32(at + 4, true), size: v.getFloat64(at + 8, true), ino: v.getBigUint64(at + 16, true), mtimeNs: v.getBigInt64(at + 24, true), ctimeNs: v.getBigInt64(at + 32, true) };
  }

  /** The permission bits recorded for manifest entry i (undefined: none recorded). */
  modeAt(i: number): number | undefined {
    const at = i * RECORD_BYTES;
    return this.#kinds[at] === 0 ? undefined : this.#view.getUint32(at + 4, true) & 0o7777;
  }

  /**
   * The bytes of the ledger file, in three parts written one after the other (the records
   * are not copied): a JSON header line (its owners, the snapshot, the record count), the
   * records, then the sha256 of the two.
   */
  encode(store: Stat, cloneDir: Stat, clonePath?: string): [Buffer, Uint8Array, Buffer] {
    const header = {
      v: LEDGER_VERSION,
      store: idText(store),
      clone: idText(cloneDir),
      digest: this.digest,
      dev: String(this.dev),
      // Only where it differs (an overlay's files): a build without it compares them to dev and calls them changed.
      ...(this.#fileDev === this.dev ? {} : { fileDev: String(this.#fileDev) }),
      independent: this.independent,
      count: this.count,
      // Where the clone was when this was saved: only gc reads it (a ledger of a clone no longer there is dropped).
      ...(clonePath === undefined ? {} : { path: clonePath }),
    };
    const head = Buffer.from(`${JSON.stringify(header)}\n`);
    return [head, this.#kinds, createHash('sha256').update(head).update(this.#kinds).digest()];
  }

  /** The ledger in bytes, or undefined when it is torn, garbage, or another store's or another clone's. */
  static decode(bytes: Buffer, store: Stat, cloneDir: Stat): Ledger | undefined {
    if (bytes.length < 32) return undefined;
    const body = bytes.subarray(0, bytes.length - 32);
    if (!createHash('sha256').update(body).digest().equals(bytes.subarray(bytes.length - 32))) return undefined;
    const cut = body.indexOf(10);
    if (cut < 0) return undefined;
    try {
      const doc = JSON.parse(body.toString('utf8', 0, cut)) as Record<string, unknown>;
      if (doc.v !== LEDGER_VERSION || doc.store !== idText(store) || doc.clone !== idText(cloneDir)) return undefined;
      const { digest, count } = doc;
      if (typeof digest !== 'string' || !DIGEST.test(digest) || typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) return undefined;
      if (doc.dev !== String(cloneDir.dev) || body.length - cut - 1 !== count * RECORD_BYTES) return undefined;
      if (doc.fileDev !== undefined && (typeof doc.fileDev !== 'string' || !/^\d+$/.test(doc.fileDev))) return undefined;
      // Copied into memory of its own (aligned, and not the read buffer's).
      const ledger = new Ledger(digest, cloneDir.dev, doc.independent === true, count, new Uint8Array(body.subarray(cut + 1)));
      if (doc.fileDev !== undefined) ledger.#setFileDev(BigInt(doc.fileDev));
      return ledger;
    } catch {
      return undefined;
    }
  }
}

/**
 * Waits until the new ledger file's mtime (the kernel's clock: its write set it) is past
 * `newest`, the newest ctime it records, touching it again each millisecond: a write to a
 * recorded file from now on falls in a later clock tick, so its ctime moves even where
 * timestamps are coarse (a kernel without multigrain timestamps, before 6.13). Usually
 * one tick or none. Given up after 100 ms (a clock that stands still): those records are
 * then racy (trustsBytes) and hashed.
 */
function stampPast(sys: Sys, fd: number, newest: bigint): void {
  for (let i = 0; i < 100 && sys.fstat(fd).mtimeNs <= newest; i++) {
    sleepSync(1);
    sys.futimens(fd, 0, UTIME_OMIT, 0, UTIME_NOW);
  }
}

/** The store directory of a snapshot root (`<store>/snapshots/<digest>`). */
export function storeOf(snapshotRoot: string): string {
  return dirname(dirname(snapshotRoot));
}

/**
 * The ledger the store keeps for the clone directory cloneDir (its fstat), or
 * undefined when there is none, or it is torn, or it is not this store's and this
 * clone's (a ledger copied from elsewhere, or an inode number reused by another
 * directory after the clone was removed: then its entries' ctimes do not match either).
 * Nothing in the clone is read. A store on a filesystem mounted read-only holds none: one
 * left there from its writable days could be neither dropped nor brought up to date.
 */
export function loadLedger(sys: Sys, storeRoot: string, cloneDir: Stat): Ledger | undefined {
  try {
    using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
    if (storeOnReadOnly(sys, store.fd)) return undefined;
    return loadLedgerAt(sys, store.fd, cloneDir);
  } catch {
    return undefined;
  }
}

/** loadLedger for the store directory open at storeFd. */
export function loadLedgerAt(sys: Sys, storeFd: number, cloneDir: Stat): Ledger | undefined {
  try {
    using dir = own(sys, openChildDir(sys, storeFd, CLONES_DIR));
    const name = ledgerName(cloneDir);
    // Only a ledger no one else can have written (in a shared store, another member's is not trusted: it says which files are unchanged).
    const read = readAllAt(sys, dir.fd, name, MAX_LEDGER_BYTES, name, { selfProving: true, trusted: isPrivate });
    const ledger = Ledger.decode(read.bytes, sys.fstat(storeFd), cloneDir);
    if (ledger !== undefined) ledger.recordedNs = read.identity.mtimeNs;
    return ledger;
  } catch {
    return undefined;
  }
}

/**
 * Removes the clone's ledger from the store (none is fine): before a whole materialize of
 * another snapshot, so one that dies after its swaps leaves no ledger naming the old one.
 */
export function dropLedger(sys: Sys, storeRoot: string, cloneDir: Stat): void {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  let dir: number;
  try {
    dir = openChildDir(sys, store.fd, CLONES_DIR);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return;
    throw err;
  }
  using clones = own(sys, dir);
  try {
    sys.unlinkat(clones.fd, ledgerName(cloneDir), 0);
  } catch (err) {
    if (!hasCode(err, 'ENOENT')) throw err;
  }
}

/**
 * Replaces the clone's ledger in the store: a new file in clones/ itself (which no sweep
 * touches, so a materialize, a reader of the store, takes no lock and makes no lock file),
 * renamed over the old one: a reader sees the old one or the new one, and one a crash tore
 * fails its sha256 and counts as none (see saveStoreFile).
 * The clone's path (as the kernel names its fd) goes in the header for gc.
 */
export function saveLedger(sys: Sys, storeRoot: string, cloneFd: number, cloneDir: Stat, ledger: Ledger): void {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  makeStorePart(sys, store.fd, CLONES_DIR);
  using clones = own(sys, openChildDir(sys, store.fd, CLONES_DIR));
  const parts = ledger.encode(sys.fstat(store.fd), cloneDir, pathOfFd(sys, cloneFd));
  const newest = ledger.newestCtimeNs();
  const write = (sink: (bytes: Uint8Array) => void): void => parts.forEach((part) => sink(part));
  saveStoreFile(sys, store.fd, clones.fd, CLONES_DIR, ledgerName(cloneDir), write, false, (fd) => stampPast(sys, fd, newest));
}

/** The absolute path the kernel gives an open directory (/proc/self/fd), or undefined where it cannot say. */
function pathOfFd(sys: Sys, fd: number): string | undefined {
  try {
    const path = sys.readlinkat(AT_FDCWD, `/proc/self/fd/${fd}`);
    return typeof path === 'string' && path.startsWith('/') && !path.endsWith(' (deleted)') ? path : undefined;
  } catch {
    return undefined;
  }
}

/** A ledger file's name: `<dev>-<ino>.ledger`. */
const LEDGER_NAME = /^[0-9]+-[0-9]+\.ledger$/;
/** Bytes of a ledger file read for its header: the JSON line is far shorter than this, whatever the path. */
const HEADER_READ_BYTES = 16 * 1024;

/**
 * Whether gc may drop the ledger whose header is `head` (its first bytes): it cannot be
 * read, or names a snapshot the store no longer holds, or a clone that is no longer
 * where it was saved (that path no longer opens, without following a link, to a
 * directory with the recorded device and inode). A ledger saved without a path is kept
 * while its snapshot is.
 */
function ledgerIsStale(sys: Sys, head: Buffer, hasSnapshot: (digest: string) => boolean): boolean {
  const cut = head.indexOf(10);
  if (cut < 0) return true;
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(head.toString('utf8', 0, cut)) as Record<string, unknown>;
  } catch {
    return true;
  }
  if (doc.v !== LEDGER_VERSION || typeof doc.digest !== 'string' || !DIGEST.test(doc.digest) || !hasSnapshot(doc.digest)) return true;
  if (typeof doc.path !== 'string') return false;
  try {
    using clone = own(sys, openRealDir(sys, doc.path, 'clone'));
    return idText(sys.fstat(clone.fd)) !== doc.clone;
  } catch {
    return true;
  }
}

/** Unlinks clones/name when it is not a directory (never followed); 1 when it did. */
function dropStray(sys: Sys, clonesFd: number, name: string): number {
  try {
    if (isDir(sys.fstatat(clonesFd, name, AT_SYMLINK_NOFOLLOW).mode)) return 0;
    sys.unlinkat(clonesFd, name, 0);
    return 1;
  } catch (err) {
    // Another member's, in a shared store's sticky clones/: hers to remove, not a failed gc.
    if (hasCode(err, 'ENOENT', 'EPERM', 'EACCES')) return 0;
    throw err;
  }
}

/**
 * gc's sweep of clones/: removes each ledger that is stale (ledgerIsStale), so the ledgers
 * of clones a harness removed do not pile up, and what holds a ledger's name without
 * being a file or a directory (a link, a FIFO, a socket). A ledger is removed only while its name still
 * binds the file whose header was read (a materialize that replaced it meanwhile keeps
 * its own). Dropping a ledger loses nothing but speed: diff then re-hashes, and reset or
 * materialize makes the copy roots whole. Returns how many were removed.
 */
export function sweepLedgers(sys: Sys, storeRoot: string, hasSnapshot: (digest: string) => boolean): number {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  let opened: number;
  try {
    opened = openChildDir(sys, store.fd, CLONES_DIR);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return 0;
    throw err;
  }
  using clones = own(sys, opened);
  const head = Buffer.alloc(HEADER_READ_BYTES);
  let swept = 0;
  for (const entry of sys.readdir(clones.fd)) {
    if (typeof entry.name !== 'string' || !LEDGER_NAME.test(entry.name)) continue;
    let fd: number;
    try {
      fd = sys.openat(clones.fd, entry.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      // Gone, or another member's that this user may not read (a shared store): not this gc's.
      if (hasCode(err, 'ENOENT', 'EACCES')) continue;
      // A link or a socket under a ledger's name (the store's owner put it there): no ledger, dropped unfollowed.
      if (!hasCode(err, 'ELOOP', 'ENXIO')) throw err;
      swept += dropStray(sys, clones.fd, entry.name);
      continue;
    }
    using file = own(sys, fd);
    const st = sys.fstat(file.fd);
    if (!isReg(st.mode)) {
      if (!isDir(st.mode)) swept += dropStray(sys, clones.fd, entry.name);
      continue;
    }
    const n = sys.pread(file.fd, head, 0, head.length, 0);
    if (!ledgerIsStale(sys, head.subarray(0, n), hasSnapshot)) continue;
    try {
      if (!sameObject(st, sys.fstatat(clones.fd, entry.name, AT_SYMLINK_NOFOLLOW))) continue;
      sys.unlinkat(clones.fd, entry.name, 0);
      swept++;
    } catch (err) {
      // Another member's stale ledger in a sticky clones/: left for her gc.
      if (!hasCode(err, 'ENOENT', 'EPERM', 'EACCES')) throw err;
    }
  }
  return swept;
}
