// stat-cache.ts: the stat cache: file identity -> sha256 with its recording time, the racy rule, and its checksummed binary form.
import { createHash } from 'node:crypto';

import type { Stat } from '../sys/native.js';
import {
  DIGEST_BYTES,
  HEADER,
  HEADER_BYTES,
  KEY_BYTES,
  MAGIC,
  RECORD,
  RECORD_BYTES,
  RECORD_U32,
  RECORD_U32_WORDS,
  RECORD_U64,
  RECORD_WORDS,
  SHA256_BYTES,
  TRAILER_BYTES,
} from './stat-cache-layout.js';

/** 2: records are written only after the file's dirty pages were written back (files cached by version 1 are hashed again). */
export const STAT_CACHE_VERSION = 2;
/** Entries kept in one cache file at most (older, unseen ones are dropped first). */
export const MAX_CACHE_ENTRIES = 1 << 20;

/**
 * The timestamp granularity assumed for every filesystem, source and store alike:
 * 2 s covers FAT's 2 s and ext4's 1 s (128-byte inodes) timestamps; filesystems with
 * ns timestamps stamp from the kernel's coarse clock, which ticks at most every 10 ms.
 */
export const GRANULARITY_NS = 2_000_000_000n;

/**
 * A store option for tests only (exported by the internal entry, never by the package):
 * how far ahead of the store filesystem's clock the stat cache records its entries, so a
 * test stands in for the seconds the racy rule makes it wait instead of sleeping them.
 * A record made ahead trusts a file changed within that span: never set outside tests.
 */
export const STAT_CLOCK_AHEAD = Symbol('treeseal.statClockAheadNs');

/** One cached file: its identity when hashed, the hash, when it was recorded, and where the store holds its bytes. */
export interface CacheEntry {
  dev: bigint;
  ino: bigint;
  mode: number;
  size: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
  /** The filesystem's clock (a ctime taken in the store) before the walk that hashed the file began. */
  recordNs: bigint;
  sha256: string;
  /** The snapshot that holds a frozen copy of these bytes, and that copy's path below its root. */
  snapshot: string;
  location: string;
}

/**
 * The racy rule (as git's index): an entry is trusted only when the file's mtime and
 * ctime are both older than the entry's recording by more than the granularity, so a
 * write after the hash was taken cannot have left the same timestamps behind.
 */
export function isRacy(entry: Pick<CacheEntry, 'mtimeNs' | 'ctimeNs' | 'recordNs'>): boolean {
  const limit = entry.recordNs - GRANULARITY_NS;
  return !(entry.mtimeNs < limit && entry.ctimeNs < limit);
}

// The writeback rule lives in base (a single file's stable read writes back too); re-exported for capture's own users.
export { WRITEBACK, trustsRecords, writeBack, writebackOf, type Writeback } from '../base/writeback.js';

/**
 * Bytes in order, gathered into chunks for a sink (which consumes each before the
 * next is gathered), hashed as they go: the file's trailer is their sha256.
 */
export class ChunkWriter {
  readonly chunk: Buffer;
  /**
   * The chunk's bytes for fixed-width little-endian fields: a DataView store is one
   * instruction where Buffer's writeUInt32LE and writeBigInt64LE are JavaScript (BigInt
   * shifts), cold in a fresh process, and cost a capture of 50,000 files about 0.1 s.
   */
  readonly view: DataView;
  #used = 0;
  readonly #hash = createHash('sha256');

  constructor(
    readonly sink: (bytes: Buffer) => void,
    size = 1 << 20,
  ) {
    this.chunk = Buffer.alloc(size);
    this.view = new DataView(this.chunk.buffer, this.chunk.byteOffset, this.chunk.length);
  }

  /** Where in `chunk` the next n bytes (at most its size) go. */
  room(n: number): number {
    if (this.#used + n > this.chunk.length) this.#flush();
    const at = this.#used;
    this.#used += n;
    return at;
  }

  #flush(): void {
    const bytes = this.chunk.subarray(0, this.#used);
    this.#hash.update(bytes);
    this.sink(bytes);
    this.#used = 0;
  }

  /** Sends what is gathered, then the sha256 of everything sent. */
  end(): void {
    this.#flush();
    this.sink(this.#hash.digest());
  }
}

export interface CacheSizes {
  count: number;
  stringBytes: number;
}

/**
 * The binary form (stat-cache-layout.ts): a 64-byte header (magic, version, entry
 * count, the 32-byte key, digest count, string bytes), the snapshot digests, fixed
 * 96-byte records, the location strings, and a sha256 of everything before it. fill
 * writes the records, then their location strings, through the writer.
 */
export function frameStatCache(key: Buffer, digests: readonly string[], sizes: CacheSizes, sink: (bytes: Buffer) => void, fill: (w: ChunkWriter) => void): void {
  const w = new ChunkWriter(sink);
  const at = w.room(HEADER_BYTES);
  const out = w.chunk;
  MAGIC.copy(out, at + HEADER.MAGIC);
  out.writeUInt32LE(STAT_CACHE_VERSION, at + HEADER.VERSION);
  out.writeUInt32LE(sizes.count, at + HEADER.COUNT);
  key.copy(out, at + HEADER.KEY);
  out.writeUInt32LE(digests.length, at + HEADER.DIGEST_COUNT);
  out.writeUInt32LE(sizes.stringBytes, at + HEADER.STRING_BYTES);
  for (const d of digests) out.write(d, w.room(DIGEST_BYTES), 'hex');
  fill(w);
  w.end();
}

/** Writes one record's identity, recording time, size and mode (the fields before RECORD.SNAPSHOT). */
function writeIdentity(out: Buffer, at: number, e: Pick<CacheEntry, 'dev' | 'ino' | 'mtimeNs' | 'ctimeNs' | 'recordNs' | 'size' | 'mode'>): void {
  out.writeBigUInt64LE(e.dev, at + RECORD.DEV);
  out.writeBigUInt64LE(e.ino, at + RECORD.INO);
  out.writeBigInt64LE(e.mtimeNs, at + RECORD.MTIME);
  out.writeBigInt64LE(e.ctimeNs, at + RECORD.CTIME);
  out.writeBigInt64LE(e.recordNs, at + RECORD.RECORD_TIME);
  out.writeDoubleLE(e.size, at + RECORD.SIZE);
  out.writeUInt32LE(e.mode, at + RECORD.MODE);
}

/** Writes one record's snapshot index and the place and length of its location string (into a ChunkWriter's view). */
export function writeLocation(out: DataView, at: number, snapshot: number, locationAt: number, locationBytes: number): void {
  out.setUint32(at + RECORD.SNAPSHOT, snapshot, true);
  out.setUint32(at + RECORD.LOCATION_AT, locationAt, true);
  out.setUint32(at + RECORD.LOCATION_BYTES, locationBytes, true);
}

/** The binary form of these entries (see frameStatCache). */
export function encodeStatCache(key: Buffer, entries: readonly CacheEntry[]): Buffer {
  const digests = [...new Set(entries.map((e) => e.snapshot))];
  const digestIndex = new Map(digests.map((d, i) => [d, i]));
  const locations = entries.map((e) => Buffer.from(e.location, 'utf8'));
  const stringBytes = locations.reduce((n, b) => n + b.length, 0);
  const chunks: Buffer[] = [];
  frameStatCache(key, digests, { count: entries.length, stringBytes }, (b) => chunks.push(Buffer.from(b)), (w) => {
    let strOff = 0;
    entries.forEach((e, i) => {
      const at = w.room(RECORD_BYTES);
      writeIdentity(w.chunk, at, e);
      writeLocation(w.view, at, digestIndex.get(e.snapshot)!, strOff, locations[i]!.length);
      w.chunk.write(e.sha256, at + RECORD.SHA256, 'hex');
      strOff += locations[i]!.length;
    });
    for (const l of locations) l.copy(w.chunk, w.room(l.length));
  });
  return Buffer.concat(chunks);
}

interface Layout {
  count: number;
  digests: string[];
  recordsAt: number;
  stringsAt: number;
}

function checkedLayout(bytes: Buffer, key: Buffer): Layout | undefined {
  if (bytes.length < HEADER_BYTES + TRAILER_BYTES || !bytes.subarray(HEADER.MAGIC, HEADER.MAGIC + MAGIC.length).equals(MAGIC)) return undefined;
  if (bytes.readUInt32LE(HEADER.VERSION) !== STAT_CACHE_VERSION || !bytes.subarray(HEADER.KEY, HEADER.KEY + KEY_BYTES).equals(key)) return undefined;
  const count = bytes.readUInt32LE(HEADER.COUNT);
  const digestCount = bytes.readUInt32LE(HEADER.DIGEST_COUNT);
  const stringBytes = bytes.readUInt32LE(HEADER.STRING_BYTES);
  const recordsAt = HEADER_BYTES + digestCount * DIGEST_BYTES;
  const stringsAt = recordsAt + count * RECORD_BYTES;
  if (count > MAX_CACHE_ENTRIES || stringsAt + stringBytes + TRAILER_BYTES !== bytes.length) return undefined;
  const sum = createHash('sha256').update(bytes.subarray(0, bytes.length - TRAILER_BYTES)).digest();
  if (!sum.equals(bytes.subarray(bytes.length - TRAILER_BYTES))) return undefined;
  const digests: string[] = [];
  for (let i = 0; i < digestCount; i++) digests.push(bytes.toString('hex', HEADER_BYTES + i * DIGEST_BYTES, HEADER_BYTES + (i + 1) * DIGEST_BYTES));
  for (let i = 0; i < count; i++) {
    const at = recordsAt + i * RECORD_BYTES;
    if (bytes.readUInt32LE(at + RECORD.SNAPSHOT) >= digestCount) return undefined;
    if (bytes.readUInt32LE(at + RECORD.LOCATION_AT) + bytes.readUInt32LE(at + RECORD.LOCATION_BYTES) > stringBytes) return undefined;
  }
  return { count, digests, recordsAt, stringsAt };
}

/**
 * A decoded cache file, read in place (no object per entry until one is asked for):
 * entries are found by inode number (first where the last one found left off: a walk
 * visits files in the order the cache was written) and matched on the whole identity.
 */
export class StatCache {
  readonly #bytes: Buffer;
  readonly #layout: Layout;
  readonly #u64: BigUint64Array;
  readonly #i64: BigInt64Array;
  readonly #f64: Float64Array;
  readonly #u32: Uint32Array;
  /** Entries by inode number, made on the first lookup the walk order does not answer. */
  #byIno: Map<number, number> | undefined;
  /** The entry after the last one found: a walk in the order the cache was written finds each here. */
  #next = 0;

  private constructor(bytes: Buffer, layout: Layout) {
    this.#bytes = bytes;
    this.#layout = layout;
    const { buffer, byteOffset } = bytes;
    const words = layout.count * RECORD_WORDS;
    this.#u64 = new BigUint64Array(buffer, byteOffset + layout.recordsAt, words);
    this.#i64 = new BigInt64Array(buffer, byteOffset + layout.recordsAt, words);
    this.#f64 = new Float64Array(buffer, byteOffset + layout.recordsAt, words);
    this.#u32 = new Uint32Array(buffer, byteOffset + layout.recordsAt, layout.count * RECORD_U32_WORDS);
  }

  #inodes(): Map<number, number> {
    if (this.#byIno === undefined) {
      this.#byIno = new Map();
      // Two devices may share an inode number: the later entry wins, the other is simply not trusted.
      for (let i = 0; i < this.#layout.count; i++) this.#byIno.set(Number(this.#u64[i * RECORD_WORDS + RECORD_U64.INO]!), i);
    }
    return this.#byIno;
  }

  /** An entry for this inode (one with the same dev and ino when the walk order finds it), else -1. */
  #find(st: Stat): number {
    const next = this.#next;
    const w = next * RECORD_WORDS;
    if (next < this.#layout.count && this.#u64[w + RECORD_U64.INO] === st.ino && this.#u64[w + RECORD_U64.DEV] === st.dev) {
      this.#next = next + 1;
      return next;
    }
    const i = this.#inodes().get(Number(st.ino));
    if (i === undefined) return -1;
    this.#next = i + 1;
    return i;
  }

  /** The cache in a file's bytes, or undefined when they are torn, garbage, of another version or for another key. */
  static decode(bytes: Buffer, key: Buffer): StatCache | undefined {
    const layout = checkedLayout(bytes, key);
    if (layout === undefined) return undefined;
    // Typed views need 8-byte alignment; a small buffer may sit at any offset of Node's pool.
    const aligned = bytes.byteOffset % 8 === 0 ? bytes : Buffer.from(new Uint8Array(bytes).buffer);
    return new StatCache(aligned, layout);
  }

  static empty(): StatCache {
    const key = Buffer.alloc(KEY_BYTES);
    return StatCache.decode(encodeStatCache(key, []), key)!;
  }

  get size(): number {
    return this.#layout.count;
  }

  /** The index of the entry for a regular file with this fstatat result, when its identity is unchanged and it is not racy; else -1. */
  trusted(st: Stat): number {
    const i = this.#find(st);
    if (i < 0) return -1;
    const w = i * RECORD_WORDS;
    const u64 = this.#u64;
    const i64 = this.#i64;
    if (u64[w + RECORD_U64.DEV] !== st.dev || u64[w + RECORD_U64.INO] !== st.ino) return -1;
    if (this.#u32[i * RECORD_U32_WORDS + RECORD_U32.MODE] !== st.mode || this.#f64[w + RECORD_U64.SIZE] !== st.size) return -1;
    const mtimeNs = i64[w + RECORD_U64.MTIME]!;
    const ctimeNs = i64[w + RECORD_U64.CTIME]!;
    if (mtimeNs !== st.mtimeNs || ctimeNs !== st.ctimeNs) return -1;
    return isRacy({ mtimeNs, ctimeNs, recordNs: i64[w + RECORD_U64.RECORD_TIME]! }) ? -1 : i;
  }

  sha256(i: number): string {
    const at = this.#layout.recordsAt + i * RECORD_BYTES + RECORD.SHA256;
    return this.#bytes.toString('hex', at, at + SHA256_BYTES);
  }

  /** Entry i's raw sha256 (32 bytes, a view of the file's bytes). */
  sha256Bytes(i: number): Buffer {
    const at = this.#layout.recordsAt + i * RECORD_BYTES + RECORD.SHA256;
    return this.#bytes.subarray(at, at + SHA256_BYTES);
  }

  snapshot(i: number): string {
    return this.#layout.digests[this.snapshotIndex(i)]!;
  }

  location(i: number): string {
    const off = this.#locationAt(i);
    return this.#bytes.toString('utf8', off, off + this.locationBytes(i));
  }

  /** Where entry i's location string starts in the file's bytes. */
  #locationAt(i: number): number {
    return this.#layout.stringsAt + this.#u32[i * RECORD_U32_WORDS + RECORD_U32.LOCATION_AT]!;
  }

  entry(i: number): CacheEntry {
    const w = i * RECORD_WORDS;
    return {
      dev: this.#u64[w + RECORD_U64.DEV]!,
      ino: this.#u64[w + RECORD_U64.INO]!,
      mtimeNs: this.#i64[w + RECORD_U64.MTIME]!,
      ctimeNs: this.#i64[w + RECORD_U64.CTIME]!,
      recordNs: this.#i64[w + RECORD_U64.RECORD_TIME]!,
      size: this.#f64[w + RECORD_U64.SIZE]!,
      mode: this.#u32[i * RECORD_U32_WORDS + RECORD_U32.MODE]!,
      sha256: this.sha256(i),
      snapshot: this.snapshot(i),
      location: this.location(i),
    };
  }

  /** Copies entry i's 96-byte record to out at `at`. */
  copyRecord(i: number, out: Buffer, at: number): void {
    const from = this.#layout.recordsAt + i * RECORD_BYTES;
    this.#bytes.copy(out, at, from, from + RECORD_BYTES);
  }

  /** Copies entry i's location bytes to out at `at`; returns their count. */
  copyLocation(i: number, out: Buffer, at: number): number {
    const off = this.#locationAt(i);
    return this.#bytes.copy(out, at, off, off + this.locationBytes(i));
  }

  locationBytes(i: number): number {
    return this.#u32[i * RECORD_U32_WORDS + RECORD_U32.LOCATION_BYTES]!;
  }

  /** 32-bit word k of entry i's record (ID_U32 in stat-cache-layout.ts: dev and ino, low word first). */
  word(i: number, k: number): number {
    return this.#u32[i * RECORD_U32_WORDS + k]!;
  }

  /** The index (among snapshots()) of the snapshot entry i points at. */
  snapshotIndex(i: number): number {
    return this.#u32[i * RECORD_U32_WORDS + RECORD_U32.SNAPSHOT]!;
  }

  /** The snapshot digests entries point at. */
  snapshots(): readonly string[] {
    return this.#layout.digests;
  }

  entries(): CacheEntry[] {
    return Array.from({ length: this.size }, (_, i) => this.entry(i));
  }
}

/** The entries of a cache file, or undefined when it is torn, garbage, of another version or for another key. */
export function decodeStatCache(bytes: Buffer, key: Buffer): CacheEntry[] | undefined {
  return StatCache.decode(bytes, key)?.entries();
}
