// entry-table.ts: manifest entries packed in typed arrays grown in place (paths as one UTF-8 buffer, digests as raw bytes): no object per entry.
import type { EntryKind, ManifestEntry } from './manifest.js';
import { MAX_GROWABLE_BYTES, ensureBytes, growableShared } from './growable.js';
import { PathIndex } from './path-index.js';
import { mtimeText, parseMtime } from './times.js';

const KINDS: readonly EntryKind[] = ['directory', 'file', 'symlink'];
const KIND_CODE: Readonly<Record<EntryKind, number>> = { directory: 0, file: 1, symlink: 2 };
const DIGEST_BYTES = 32;
/** Each byte's value as a lowercase hex digit, else 255. */
const HEX_VALUE = new Uint8Array(256).fill(255);
for (let c = 0; c < 16; c++) HEX_VALUE['0123456789abcdef'.charCodeAt(c)] = c;
/** An entry without a recorded mtime, in a table that has some: INT64_MIN, which no stat reports and no document may hold. */
export const NO_MTIME = -(2n ** 63n);

/** A table's arrays as they are (not copied; longer than its entries), for reading only. */
export interface EntryArrays {
  count: number;
  paths: Buffer;
  ends: Float64Array;
  kinds: Uint8Array;
  sizes: Float64Array;
  modes: Uint32Array;
  digests: Buffer;
  links: ReadonlyMap<number, string>;
  /** Recorded mtimes (NO_MTIME: none); undefined when no entry has one. */
  mtimes: BigInt64Array | undefined;
  /** Indices in manifest order (undefined: the order added). */
  order: Uint32Array | undefined;
}

/**
 * A table as it crosses threads: its arrays are on shared memory, so the other
 * thread gets them without a copy (the table no longer changes once sorted).
 */
export interface PackedEntries {
  count: number;
  /** Path bytes in use. */
  used: number;
  paths: Uint8Array;
  ends: Float64Array;
  kinds: Uint8Array;
  sizes: Float64Array;
  modes: Uint32Array;
  digests: Uint8Array;
  links: [number, string][];
  mtimes: BigInt64Array | undefined;
  order: Uint32Array | undefined;
}

/** Entries a table holds at most: its digests fill the largest growable buffer. */
const MAX_ENTRIES = MAX_GROWABLE_BYTES / DIGEST_BYTES;

/**
 * Entries by index (the order they were added); sort() then gives the manifest
 * order (by UTF-8 bytes of their paths), which iteration and at() follow. Paths are
 * unique: add() returns the index of an entry already at that path instead.
 */
export class EntryTable implements Iterable<ManifestEntry> {
  // Growable shared memory: grown in place, handed to another thread without a copy.
  readonly #pathMemory = growableShared(MAX_GROWABLE_BYTES);
  #paths: Buffer = Buffer.from(this.#pathMemory);
  #used = 0;
  // Each array is a view of its memory's bytes as they stand, made again when the memory grows:
  // a view that follows a growable buffer's length costs several times as much per element read.
  #endsMemory = growableShared(MAX_ENTRIES * 8);
  #ends = new Float64Array(this.#endsMemory, 0, 0);
  #kindsMemory = growableShared(MAX_ENTRIES);
  #kinds = new Uint8Array(this.#kindsMemory, 0, 0);
  #sizesMemory = growableShared(MAX_ENTRIES * 8);
  #sizes = new Float64Array(this.#sizesMemory, 0, 0);
  #modesMemory = growableShared(MAX_ENTRIES * 4);
  #modes = new Uint32Array(this.#modesMemory, 0, 0);
  readonly #digestMemory = growableShared(MAX_ENTRIES * DIGEST_BYTES);
  #digests: Buffer = Buffer.from(this.#digestMemory);
  #links = new Map<number, string>();
  /** Made by the first entry with a recorded mtime (keepTimes): a table without one costs nothing more. */
  #mtimesMemory: SharedArrayBuffer | undefined;
  #mtimes: BigInt64Array | undefined;
  #order: Uint32Array | undefined;
  #count = 0;
  /** Entries every array has room for (appendRead grows them only beyond it). */
  #room = 0;
  #index: PathIndex | undefined;

  get length(): number {
    return this.#count;
  }

  /** Whether an entry records an mtime (keepTimes). */
  get timed(): boolean {
    return this.#mtimes !== undefined;
  }

  get bytes(): Uint8Array {
    return this.#paths;
  }

  start(i: number): number {
    return i === 0 ? 0 : this.#ends[i - 1]!;
  }

  end(i: number): number {
    return this.#ends[i]!;
  }

  /** The UTF-8 byte count of entry i's path. */
  pathBytes(i: number): number {
    return this.#ends[i]! - this.start(i);
  }

  /** Copies entry i's path (UTF-8) to out at `at`; returns the bytes copied. */
  copyPath(i: number, out: Buffer, at: number): number {
    return this.#paths.copy(out, at, this.start(i), this.#ends[i]!);
  }

  size(i: number): number {
    return this.#sizes[i]!;
  }

  /** Copies entry i's raw sha256 (32 bytes) to out at `at`. */
  copyDigest(i: number, out: Buffer, at: number): void {
    this.#digests.copy(out, at, i * DIGEST_BYTES, (i + 1) * DIGEST_BYTES);
  }

  /**
   * The index of the entry at `path`, or -1. The path is written into the index's own
   * buffer, never into the table's: an unpacked table's path bytes are another thread's
   * memory (staging there once swapped them for this table's own, empty, memory: every
   * path read back as NULs after a find, and a reset removed the arm's files).
   */
  find(path: string): number {
    return this.#lookup().findPath(path);
  }

  /** Adds an entry (its sha256 may come later by setDigest); an entry already at its path is returned (as its index) and nothing added. */
  add(e: ManifestEntry): { index: number; added: boolean } {
    const [at, end] = this.#stage(e.path);
    const index = this.#lookup();
    const existing = index.find(this.#paths, at, end);
    if (existing >= 0) return { index: existing, added: false };
    const i = this.#count;
    this.#reserve(i + 1);
    this.#used = end;
    this.#ends[i] = end;
    this.#kinds[i] = KIND_CODE[e.kind];
    this.#sizes[i] = e.size;
    this.#modes[i] = e.mode;
    if (e.sha256 !== '') this.setDigest(i, e.sha256);
    if (e.link_target !== '') this.#links.set(i, e.link_target);
    if (e.mtime_ns !== undefined) this.#timed()[i] = mtimeOf(e);
    else if (this.#mtimes !== undefined) this.#mtimes[i] = NO_MTIME;
    this.#count++;
    this.#order = undefined;
    index.add(i);
    return { index: i, added: true };
  }

  /**
   * Appends an entry read from a document whose path's UTF-8 bytes are src[from, to) and
   * whose sha256 is the 64 lowercase hex digits at src[hexAt…] (-1: none, left zero; false
   * when they are not such digits, and nothing is added), its link target set by setLink.
   * Paths are not checked for uniqueness (no path index is kept): for a list whose order
   * is checked afterwards. Returns its index.
   */
  appendRead(kind: EntryKind, src: Uint8Array, from: number, to: number, hexAt: number, size: number, mode: number, mtime: bigint | undefined): number | false {
    if (ensureBytes(this.#pathMemory, this.#used + (to - from))) this.#paths = Buffer.from(this.#pathMemory);
    const i = this.#count;
    if (i >= this.#room) this.#reserve(i + 1);
    if (hexAt >= 0) {
      const digests = this.#digests;
      for (let k = 0, at = i * DIGEST_BYTES; k < 2 * DIGEST_BYTES; k += 2) {
        const hi = HEX_VALUE[src[hexAt + k]!]!;
        const lo = HEX_VALUE[src[hexAt + k + 1]!]!;
        if ((hi | lo) > 15) {
          digests.fill(0, i * DIGEST_BYTES, at);
          return false;
        }
        digests[at++] = (hi << 4) | lo;
      }
    }
    const paths = this.#paths;
    let at = this.#used;
    for (let k = from; k < to; k++) paths[at++] = src[k]!;
    this.#used = at;
    this.#ends[i] = at;
    this.#kinds[i] = KIND_CODE[kind];
    this.#sizes[i] = size;
    this.#modes[i] = mode;
    if (mtime !== undefined) this.#timed()[i] = mtime;
    else if (this.#mtimes !== undefined) this.#mtimes[i] = NO_MTIME;
    this.#count++;
    this.#order = undefined;
    this.#index = undefined;
    return i;
  }

  /** Sets entry i's link target (a symlink's; '' for none). */
  setLink(i: number, target: string): void {
    if (target === '') this.#links.delete(i);
    else this.#links.set(i, target);
  }

  /** Entry i's path. */
  path(i: number): string {
    return this.#paths.toString('utf8', this.start(i), this.#ends[i]!);
  }

  mode(i: number): number {
    return this.#modes[i]!;
  }

  /** Entry i's recorded mtime in nanoseconds (keepTimes), else undefined. */
  mtimeNs(i: number): bigint | undefined {
    const ns = this.#mtimes?.[i];
    return ns === NO_MTIME ? undefined : ns;
  }

  /** Sets entry i's sha256 from its 32 raw bytes. */
  setDigestBytes(i: number, sha256: Uint8Array): void {
    if (sha256.length !== DIGEST_BYTES) throw new RangeError(`a sha256 is ${DIGEST_BYTES} bytes, not ${sha256.length}`);
    this.#digests.set(sha256, i * DIGEST_BYTES);
  }

  /** How many entries are of this kind. */
  count(kind: EntryKind): number {
    const code = KIND_CODE[kind];
    let n = 0;
    for (let i = 0; i < this.#count; i++) if (this.#kinds[i] === code) n++;
    return n;
  }

  setDigest(i: number, sha256: string): void {
    this.#digests.write(sha256, i * DIGEST_BYTES, DIGEST_BYTES, 'hex');
  }

  kindOf(i: number): EntryKind {
    return KINDS[this.#kinds[i]!]!;
  }

  /** The entry at index i (the order entries were added). */
  entry(i: number): ManifestEntry {
    const kind = KINDS[this.#kinds[i]!]!;
    const e: ManifestEntry = {
      kind,
      path: this.#paths.toString('utf8', this.start(i), this.#ends[i]!),
      size: this.#sizes[i]!,
      sha256: kind === 'directory' ? '' : this.#digests.toString('hex', i * DIGEST_BYTES, (i + 1) * DIGEST_BYTES),
      mode: this.#modes[i]!,
      link_target: this.#links.get(i) ?? '',
    };
    const mtime = this.#mtimes?.[i];
    return mtime === undefined || mtime === NO_MTIME ? e : { ...e, mtime_ns: mtimeText(mtime) };
  }

  /** The index of the n-th entry in manifest order once sorted (else n). */
  indexAt(n: number): number {
    return this.#order === undefined ? n : this.#order[n]!;
  }

  /** The i-th entry in manifest order once sorted (else in the order added). */
  at(i: number): ManifestEntry {
    return this.entry(this.#order === undefined ? i : this.#order[i]!);
  }

  *[Symbol.iterator](): Iterator<ManifestEntry> {
    for (let i = 0; i < this.#count; i++) yield this.at(i);
  }

  /** Orders the entries by the UTF-8 bytes of their paths (Python's sort of str); the path index is dropped. */
  sort(): this {
    const p = this.#paths;
    const ends = this.#ends;
    // An array's sort is a TimSort, fast on the nearly sorted order a walk of sorted names adds entries in.
    const indices = Array.from({ length: this.#count }, (_, i) => i);
    indices.sort((a, b) => {
      let i = a === 0 ? 0 : ends[a - 1]!;
      let j = b === 0 ? 0 : ends[b - 1]!;
      const ea = ends[a]!;
      const eb = ends[b]!;
      for (; i < ea && j < eb; i++, j++) if (p[i] !== p[j]) return p[i]! - p[j]!;
      return ea - i - (eb - j);
    });
    const order = new Uint32Array(new SharedArrayBuffer(this.#count * 4));
    order.set(indices);
    this.#order = order;
    this.#index = undefined;
    return this;
  }

  /** The arrays themselves, for an encoder to read. */
  arrays(): EntryArrays {
    return { count: this.#count, paths: this.#paths, ends: this.#ends, kinds: this.#kinds, sizes: this.#sizes, modes: this.#modes, digests: this.#digests, links: this.#links, mtimes: this.#mtimes, order: this.#order };
  }

  /** The table for another thread: its arrays themselves (shared memory, not copied); add nothing to it afterwards. */
  pack(): PackedEntries {
    return {
      count: this.#count,
      used: this.#used,
      paths: this.#paths,
      ends: this.#ends,
      kinds: this.#kinds,
      sizes: this.#sizes,
      modes: this.#modes,
      digests: this.#digests,
      links: [...this.#links],
      mtimes: this.#mtimes,
      order: this.#order,
    };
  }

  static unpack(p: PackedEntries): EntryTable {
    const t = new EntryTable();
    t.#paths = Buffer.from(p.paths.buffer, p.paths.byteOffset, p.used);
    t.#used = p.used;
    t.#endsMemory = p.ends.buffer as SharedArrayBuffer;
    t.#ends = new Float64Array(t.#endsMemory, 0, p.count);
    t.#kindsMemory = p.kinds.buffer as SharedArrayBuffer;
    t.#kinds = new Uint8Array(t.#kindsMemory, 0, p.count);
    t.#sizesMemory = p.sizes.buffer as SharedArrayBuffer;
    t.#sizes = new Float64Array(t.#sizesMemory, 0, p.count);
    t.#modesMemory = p.modes.buffer as SharedArrayBuffer;
    t.#modes = new Uint32Array(t.#modesMemory, 0, p.count);
    t.#digests = Buffer.from(p.digests.buffer, p.digests.byteOffset, p.count * DIGEST_BYTES);
    t.#links = new Map(p.links);
    if (p.mtimes !== undefined) {
      t.#mtimesMemory = p.mtimes.buffer as SharedArrayBuffer;
      t.#mtimes = new BigInt64Array(t.#mtimesMemory, 0, p.count);
    }
    t.#order = p.order;
    t.#count = p.count;
    t.#room = p.count;
    return t;
  }

  /** The entries as a table: a table itself, else a table of them (see from). */
  static of(entries: Iterable<ManifestEntry>): EntryTable {
    return entries instanceof EntryTable ? entries : EntryTable.from(entries);
  }

  /** A table of these entries (paths must be unique), in their order. */
  static from(entries: Iterable<ManifestEntry>): EntryTable {
    const t = new EntryTable();
    for (const e of entries) t.add(e);
    return t;
  }

  /** Writes path into the spare tail of the path buffer (not yet an entry's); returns where its bytes start and end. */
  #stage(path: string): [number, number] {
    if (ensureBytes(this.#pathMemory, this.#used + path.length * 3)) this.#paths = Buffer.from(this.#pathMemory);
    return [this.#used, this.#used + this.#paths.write(path, this.#used, 'utf8')];
  }

  /** The mtimes, made on first use with NO_MTIME for every entry so far. */
  #timed(): BigInt64Array {
    if (this.#mtimes === undefined) {
      this.#mtimesMemory = growableShared(MAX_ENTRIES * 8);
      ensureBytes(this.#mtimesMemory, this.#ends.length * 8);
      this.#mtimes = new BigInt64Array(this.#mtimesMemory, 0, this.#ends.length);
      this.#mtimes.fill(NO_MTIME, 0, this.#count);
    }
    return this.#mtimes;
  }

  #lookup(): PathIndex {
    if (this.#index === undefined) {
      this.#index = new PathIndex(this, this.#count);
      for (let i = 0; i < this.#count; i++) this.#index.add(i);
    }
    return this.#index;
  }

  #reserve(n: number): void {
    if (n > MAX_ENTRIES) throw new RangeError(`a table holds at most ${MAX_ENTRIES} entries`);
    if (ensureBytes(this.#endsMemory, n * 8)) this.#ends = new Float64Array(this.#endsMemory, 0, this.#endsMemory.byteLength / 8);
    if (ensureBytes(this.#kindsMemory, n)) this.#kinds = new Uint8Array(this.#kindsMemory, 0, this.#kindsMemory.byteLength);
    if (ensureBytes(this.#sizesMemory, n * 8)) this.#sizes = new Float64Array(this.#sizesMemory, 0, this.#sizesMemory.byteLength / 8);
    if (ensureBytes(this.#modesMemory, n * 4)) this.#modes = new Uint32Array(this.#modesMemory, 0, this.#modesMemory.byteLength / 4);
    if (this.#mtimesMemory !== undefined && ensureBytes(this.#mtimesMemory, n * 8)) this.#mtimes = new BigInt64Array(this.#mtimesMemory, 0, this.#mtimesMemory.byteLength / 8);
    if (ensureBytes(this.#digestMemory, n * DIGEST_BYTES)) this.#digests = Buffer.from(this.#digestMemory);
    this.#room = Math.min(this.#ends.length, this.#kinds.length, this.#sizes.length, this.#modes.length, this.#mtimes?.length ?? Infinity, this.#digestMemory.byteLength / DIGEST_BYTES);
  }
}

/** An entry's recorded mtime as the table holds it; a malformed one is refused (a document is checked before it is tabled). */
function mtimeOf(e: ManifestEntry): bigint {
  const ns = parseMtime(e.mtime_ns!);
  if (ns === undefined) throw new RangeError(`not a recorded mtime: ${JSON.stringify(e.mtime_ns)}`);
  return ns;
}
