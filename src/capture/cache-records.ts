// cache-records.ts: the stat cache records one capture gathers, packed in the file's 96-byte layout, and the next cache file made from them.
import type { EntryTable } from '../base/entry-table.js';
import type { Stat } from '../sys/native.js';
import { MAX_CACHE_ENTRIES, RECORD_BYTES, frameStatCache, writeIdentity, type StatCache } from './stat-cache.js';

const WORDS = RECORD_BYTES / 4;

/**
 * Records of files hashed or reused by one capture, each pointing at the entry that
 * holds its bytes in the new snapshot (bytes 56-63: the table's number and the
 * entry's index, until the file is written with the entry's location).
 */
export class CacheRecords {
  #bytes = Buffer.alloc(RECORD_BYTES * 256);
  #words = new Uint32Array(this.#bytes.buffer, this.#bytes.byteOffset, this.#bytes.length / 4);
  #count = 0;

  get length(): number {
    return this.#count;
  }

  /** A file hashed now: its identity, the recording time, its sha256 and its entry. */
  hashed(st: Stat, recordNs: bigint, sha256: string, table: number, index: number): void {
    const at = this.#next(table, index);
    writeIdentity(this.#bytes, at, { ...st, recordNs });
    this.#bytes.write(sha256, at + 64, 32, 'hex');
  }

  /** A record of the loaded cache reused by this capture, now at its entry. */
  reused(loaded: StatCache, i: number, table: number, index: number): void {
    const at = this.#next(table, index);
    loaded.copyRecord(i, this.#bytes, at);
    this.#bytes.writeUInt32LE(table, at + 56);
    this.#bytes.writeUInt32LE(index, at + 60);
  }

  word(i: number, k: number): number {
    return this.#words[i * WORDS + k]!;
  }

  get bytes(): Buffer {
    return this.#bytes;
  }

  #next(table: number, index: number): number {
    const at = this.#count * RECORD_BYTES;
    if (at + RECORD_BYTES > this.#bytes.length) {
      const next = Buffer.alloc(this.#bytes.length * 2);
      this.#bytes.copy(next);
      this.#bytes = next;
      this.#words = new Uint32Array(next.buffer, next.byteOffset, next.length / 4);
    }
    this.#bytes.writeUInt32LE(table, at + 56);
    this.#bytes.writeUInt32LE(index, at + 60);
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
  return word(a, 1) - word(b, 1) || word(a, 0) - word(b, 0) || word(a, 3) - word(b, 3) || word(a, 2) - word(b, 2);
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
  // The capture's own before the loaded, and the last of its own first.
  const rank = (id: number): number => (id < n ? -id : id);
  order.sort((a, b) => compareIds(word, a, b) || rank(a) - rank(b));
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
  /** The loaded cache's snapshots still published. */
  live: ReadonlySet<string>;
}

/**
 * The next cache file: the capture's records pointing at `digest` and their entries'
 * locations, then the loaded entries not seen this time whose snapshot is live.
 */
export function encodeNextCache(c: NextCache): Buffer {
  const { records, loaded } = c;
  const liveIndex = loaded.snapshots().map((d) => c.live.has(d));
  const placed = (i: number): RecordArea | undefined => c.areas[records.word(i, 14)];
  const { fresh, old } = choose(records, loaded, (j) => liveIndex[loaded.snapshotIndex(j)]!);
  for (let i = 0; i < fresh.length; i++) if (fresh[i] === 1 && placed(i) === undefined) fresh[i] = 0;
  const digests = [c.digest, ...loaded.snapshots().filter((_, k) => liveIndex[k])];
  const digestIndex = new Map(digests.map((d, k) => [d, k]));
  let count = 0;
  let stringBytes = 0;
  for (let i = 0; i < fresh.length; i++) {
    if (fresh[i] === 0) continue;
    const { prefix, table } = placed(i)!;
    stringBytes += Buffer.byteLength(prefix) + 1 + table.pathBytes(records.word(i, 15));
    count++;
  }
  for (let j = 0; j < old.length; j++) {
    if (old[j] === 0) continue;
    stringBytes += loaded.locationBytes(j);
    count++;
  }
  return frameStatCache(c.key, digests, { count, stringBytes }, (out, recordsAt, stringsAt) => {
    let r = recordsAt;
    let str = 0;
    const record = (len: number, snapshot: number): void => {
      out.writeUInt32LE(snapshot, r + 52);
      out.writeUInt32LE(str, r + 56);
      out.writeUInt32LE(len, r + 60);
      r += RECORD_BYTES;
      str += len;
    };
    for (let i = 0; i < fresh.length; i++) {
      if (fresh[i] === 0) continue;
      const { prefix, table } = placed(i)!;
      records.bytes.copy(out, r, i * RECORD_BYTES, (i + 1) * RECORD_BYTES);
      const head = out.write(`${prefix}/`, stringsAt + str, 'utf8');
      record(head + table.copyPath(records.word(i, 15), out, stringsAt + str + head), 0);
    }
    for (let j = 0; j < old.length; j++) {
      if (old[j] === 0) continue;
      loaded.copyRecord(j, out, r);
      record(loaded.copyLocation(j, out, stringsAt + str), digestIndex.get(loaded.snapshot(j))!);
    }
  });
}
