// cache-records.ts: the stat cache records one capture gathers, packed (48 bytes each, no object), and the next cache file made from them.
import type { EntryTable } from '../base/entry-table.js';
import { MAX_GROWABLE_BYTES, ensureBytes, growablePrivate } from '../base/growable.js';
import type { Stat } from '../sys/native.js';
import { MAX_CACHE_ENTRIES, frameStatCache, writeLocation, type CacheSizes, type ChunkWriter, type StatCache } from './stat-cache.js';
import { HELD, HELD_BYTES, HELD_IDENTITY_BYTES, HELD_U32, HELD_WORDS, ID_U32, ID_WORDS, NOT_REUSED, RECORD, RECORD_BYTES, RECORD_U64 } from './stat-cache-layout.js';

/**
 * Records of files hashed or reused by one capture, each pointing at the entry that
 * holds its bytes (and, for a hashed file, its size and sha256) in the new snapshot.
 * A reused record is the loaded one, copied out when the cache is written.
 */
export class CacheRecords {
  // Grown in place: no copy, and no old buffer left for the collector. Both views are of the
  // memory's bytes as they stand, made again when it grows (one that follows a growable
  // buffer's length costs several times as much per element).
  readonly #memory = growablePrivate(MAX_GROWABLE_BYTES);
  #words = new Uint32Array(this.#memory, 0, 0);
  // dev and ino; mtime and ctime: typed-array stores, not Buffer's writeBig*64LE (JavaScript BigInt shifts, ≈1 µs a call cold).
  #u64 = new BigUint64Array(this.#memory, 0, 0);
  #i64 = new BigInt64Array(this.#memory, 0, 0);
  #count = 0;

  get length(): number {
    return this.#count;
  }

  /** A file hashed now: its identity (at the read) and its entry. */
  hashed(st: Stat, table: number, index: number): void {
    const at = this.#next(NOT_REUSED, table, index);
    // Held records are 8-byte aligned (HELD_BYTES 48); the views are little-endian, as the file's records are read back.
    const w = (at + HELD.IDENTITY) / 8;
    this.#u64[w + RECORD_U64.DEV] = st.dev;
    this.#u64[w + RECORD_U64.INO] = st.ino;
    this.#i64[w + RECORD_U64.MTIME] = st.mtimeNs;
    this.#i64[w + RECORD_U64.CTIME] = st.ctimeNs;
    this.#words[(at + HELD.MODE) / 4] = st.mode;
  }

  /** Entry i of the loaded cache, reused by this capture, now at its entry. */
  reused(loaded: StatCache, i: number, table: number, index: number): void {
    const at = this.#next(i, table, index);
    for (let k = 0; k < ID_WORDS; k++) this.#words[at / 4 + k] = loaded.word(i, k);
  }

  /** sha256 (hex) -> the first loaded entry this capture reused with those bytes. */
  reusedBySha256(loaded: StatCache): Map<string, number> {
    const out = new Map<string, number>();
    for (let r = 0; r < this.#count; r++) {
      const i = this.#words[r * HELD_WORDS + HELD_U32.REUSED]!;
      if (i === NOT_REUSED) continue;
      const sha256 = loaded.sha256(i);
      if (!out.has(sha256)) out.set(sha256, i);
    }
    return out;
  }

  /** Word k of record i: ID_U32 (dev, ino), HELD_U32.TABLE or HELD_U32.ENTRY. */
  word(i: number, k: number): number {
    return this.#words[i * HELD_WORDS + k]!;
  }

  /** Writes record i as the file holds it (but its snapshot and location: writeLocation) to out at `at`. */
  write(i: number, w: ChunkWriter, at: number, from: { loaded: StatCache; recordNs: bigint; table: EntryTable }): void {
    const held = i * HELD_WORDS;
    const reused = this.#words[held + HELD_U32.REUSED]!;
    if (reused !== NOT_REUSED) {
      from.loaded.copyRecord(reused, w.chunk, at);
      return;
    }
    const index = this.#words[held + HELD_U32.ENTRY]!;
    const out = w.view;
    // dev, ino, mtime and ctime are laid out as in the file's record: copied a 32-bit word at a time.
    for (let k = 0; k < HELD_IDENTITY_BYTES / 4; k++) out.setUint32(at + RECORD.DEV + 4 * k, this.#words[held + HELD.IDENTITY / 4 + k]!, true);
    out.setBigInt64(at + RECORD.RECORD_TIME, from.recordNs, true);
    out.setFloat64(at + RECORD.SIZE, from.table.size(index), true);
    out.setUint32(at + RECORD.MODE, this.#words[held + HELD.MODE / 4]!, true);
    from.table.copyDigest(index, w.chunk, at + RECORD.SHA256);
  }

  #next(reused: number, table: number, index: number): number {
    const at = this.#count * HELD_BYTES;
    if (ensureBytes(this.#memory, at + HELD_BYTES)) {
      this.#words = new Uint32Array(this.#memory, 0, this.#memory.byteLength / 4);
      this.#u64 = new BigUint64Array(this.#memory, 0, this.#memory.byteLength / 8);
      this.#i64 = new BigInt64Array(this.#memory, 0, this.#memory.byteLength / 8);
    }
    const w = at / 4;
    this.#words[w + HELD_U32.REUSED] = reused;
    this.#words[w + HELD_U32.TABLE] = table;
    this.#words[w + HELD_U32.ENTRY] = index;
    this.#count++;
    return at;
  }
}

/** One table of the capture's entries and the path below the snapshot root its paths start from. */
export interface RecordArea {
  prefix: string;
  table: EntryTable;
}

/** Compares two records' (dev, ino), high words first. */
function compareIds(word: (id: number, k: number) => number, a: number, b: number): number {
  const { DEV_HIGH, DEV_LOW, INO_HIGH, INO_LOW } = ID_U32;
  return word(a, DEV_HIGH) - word(b, DEV_HIGH) || word(a, DEV_LOW) - word(b, DEV_LOW) || word(a, INO_HIGH) - word(b, INO_HIGH) || word(a, INO_LOW) - word(b, INO_LOW);
}

/** Ids above this do not fit a packed key (PACKED_IDS positions beside a 32-bit inode number in a double's 53 bits). */
const PACKED_IDS = 2 ** 21;

/**
 * Sorts ids (below `limit`; the first n the capture's own) by (dev, ino), the capture's own
 * before the loaded and the last of its own first. Where every id has one dev and an inode
 * number below 2^32 (a capture on one filesystem, as nearly all are), each is packed into a
 * double (inode, then its place in that order) and the doubles sorted natively: a comparator
 * sort of 50,000 records reads 16 words a comparison, ≈10 ms cold. Else the comparator.
 */
export function sortIds(order: Uint32Array, word: (id: number, k: number) => number, n: number, limit: number): void {
  const { DEV_HIGH, DEV_LOW, INO_HIGH, INO_LOW } = ID_U32;
  // The capture's own before the loaded, and the last of its own first.
  const place = (id: number): number => (id < n ? n - 1 - id : id);
  if (order.length > 0 && limit <= PACKED_IDS) {
    const devHigh = word(order[0]!, DEV_HIGH);
    const devLow = word(order[0]!, DEV_LOW);
    const keys = new Float64Array(order.length);
    let s = 0;
    for (; s < order.length; s++) {
      const id = order[s]!;
      if (word(id, DEV_HIGH) !== devHigh || word(id, DEV_LOW) !== devLow || word(id, INO_HIGH) !== 0) break;
      keys[s] = word(id, INO_LOW) * PACKED_IDS + place(id);
    }
    if (s === order.length) {
      keys.sort();
      for (let k = 0; k < keys.length; k++) {
        const at = keys[k]! % PACKED_IDS;
        order[k] = at < n ? n - 1 - at : at;
      }
      return;
    }
  }
  order.sort((a, b) => compareIds(word, a, b) || place(a) - place(b));
}

/**
 * Which records the next cache keeps, one per (dev, ino): the last of the capture's
 * own (fresh[i] = 1), else the loaded one (old[j] = 1, loaded entries with a live
 * snapshot only); at most MAX_CACHE_ENTRIES, the capture's own first.
 */
function choose(records: CacheRecords, loaded: StatCache, live: (j: number) => boolean): { fresh: Uint8Array; old: Uint8Array } {
  const n = records.length;
  let m = 0;
  for (let j = 0; j < loaded.size; j++) if (live(j)) m++;
  const order = new Uint32Array(n + m);
  for (let i = 0; i < n; i++) order[i] = i;
  for (let j = 0, at = n; j < loaded.size; j++) if (live(j)) order[at++] = n + j;
  const word = (id: number, k: number): number => (id < n ? records.word(id, k) : loaded.word(id - n, k));
  sortIds(order, word, n, n + loaded.size);
  const fresh = new Uint8Array(n);
  const old = new Uint8Array(loaded.size);
  const counts = [0, 0];
  for (let s = 0; s < order.length; s++) {
    const id = order[s]!;
    if (s > 0 && compareIds(word, id, order[s - 1]!) === 0) continue;
    if (id < n) fresh[id] = 1;
    else old[id - n] = 1;
    counts[id < n ? 0 : 1]!++;
  }
  const excess = counts[0]! + counts[1]! - MAX_CACHE_ENTRIES;
  drop(old, Math.min(excess, counts[1]!));
  drop(fresh, excess - counts[1]!);
  return { fresh, old };
}

/** Unmarks the last `n` marked (n ≤ 0: none). */
function drop(marks: Uint8Array, n: number): void {
  for (let i = marks.length - 1; i >= 0 && n > 0; i--) {
    if (marks[i] === 1) {
      marks[i] = 0;
      n--;
    }
  }
}

export interface NextCache {
  key: Buffer;
  /** The snapshot the capture's records point at. */
  digest: string;
  records: CacheRecords;
  /** The tables the records' entries are in, by number. */
  areas: readonly (RecordArea | undefined)[];
  loaded: StatCache;
  /** When the capture's hashed files were recorded (the store's clock before the walk). */
  recordNs: bigint;
  /** The loaded cache's snapshots still published. */
  live: ReadonlySet<string>;
}

interface Chosen {
  fresh: Uint8Array;
  old: Uint8Array;
  digests: string[];
  /** The loaded cache's snapshot indices, renumbered among digests. */
  oldDigest: Int32Array;
  sizes: CacheSizes;
}

function chooseFor(c: NextCache): Chosen {
  const { records, loaded } = c;
  const live = loaded.snapshots().map((d) => c.live.has(d));
  const { fresh, old } = choose(records, loaded, (j) => live[loaded.snapshotIndex(j)]!);
  const digests = [c.digest];
  const oldDigest = new Int32Array(live.length).fill(-1);
  live.forEach((l, k) => {
    const d = loaded.snapshots()[k]!;
    // The new snapshot may be one the loaded entries point at already: each digest is listed once.
    if (l) oldDigest[k] = d === c.digest ? 0 : digests.push(d) - 1;
  });
  const sizes = { count: 0, stringBytes: 0 };
  for (let i = 0; i < fresh.length; i++) {
    const area = c.areas[records.word(i, HELD_U32.TABLE)];
    if (fresh[i] === 0 || area === undefined) {
      fresh[i] = 0;
      continue;
    }
    sizes.stringBytes += Buffer.byteLength(area.prefix) + 1 + area.table.pathBytes(records.word(i, HELD_U32.ENTRY));
    sizes.count++;
  }
  for (let j = 0; j < old.length; j++) {
    if (old[j] === 0) continue;
    sizes.stringBytes += loaded.locationBytes(j);
    sizes.count++;
  }
  return { fresh, old, digests, oldDigest, sizes };
}

/**
 * Writes the next cache file to sink: the capture's records pointing at `digest` and
 * their entries' locations, then the loaded entries not seen this time whose snapshot
 * is live.
 */
export function writeNextCache(c: NextCache, sink: (bytes: Buffer) => void): void {
  const { records, loaded } = c;
  const chosen = chooseFor(c);
  const { fresh, old } = chosen;
  frameStatCache(c.key, chosen.digests, chosen.sizes, sink, (w) => {
    let str = 0;
    const record = (len: number, snapshot: number, at: number): void => {
      writeLocation(w.view, at, snapshot, str, len);
      str += len;
    };
    for (let i = 0; i < fresh.length; i++) {
      if (fresh[i] === 0) continue;
      const at = w.room(RECORD_BYTES);
      const area = c.areas[records.word(i, HELD_U32.TABLE)]!;
      records.write(i, w, at, { loaded, recordNs: c.recordNs, table: area.table });
      record(Buffer.byteLength(area.prefix) + 1 + area.table.pathBytes(records.word(i, HELD_U32.ENTRY)), 0, at);
    }
    for (let j = 0; j < old.length; j++) {
      if (old[j] === 0) continue;
      const at = w.room(RECORD_BYTES);
      loaded.copyRecord(j, w.chunk, at);
      record(loaded.locationBytes(j), chosen.oldDigest[loaded.snapshotIndex(j)]!, at);
    }
    writeLocations(c, chosen, w);
  });
}

/** The location strings, in record order. */
function writeLocations(c: NextCache, chosen: Chosen, w: ChunkWriter): void {
  const { records, loaded } = c;
  for (let i = 0; i < chosen.fresh.length; i++) {
    if (chosen.fresh[i] === 0) continue;
    const { prefix, table } = c.areas[records.word(i, HELD_U32.TABLE)]!;
    const index = records.word(i, HELD_U32.ENTRY);
    const head = Buffer.byteLength(prefix) + 1;
    const at = w.room(head + table.pathBytes(index));
    w.chunk.write(`${prefix}/`, at, 'utf8');
    table.copyPath(index, w.chunk, at + head);
  }
  for (let j = 0; j < chosen.old.length; j++) {
    if (chosen.old[j] === 1) loaded.copyLocation(j, w.chunk, w.room(loaded.locationBytes(j)));
  }
}
