// entry-table.ts: manifest entries packed in growing typed arrays (paths as one UTF-8 buffer, digests as raw bytes): no object per entry.
import type { EntryKind, ManifestEntry } from './manifest.js';
import { PathIndex } from './path-index.js';

const KINDS: readonly EntryKind[] = ['directory', 'file', 'symlink'];
const KIND_CODE: Readonly<Record<EntryKind, number>> = { directory: 0, file: 1, symlink: 2 };
const DIGEST_BYTES = 32;

/** A table's arrays, trimmed to its entries, as they cross threads (structured clone copies them). */
export interface PackedEntries {
  paths: Uint8Array;
  ends: Float64Array;
  kinds: Uint8Array;
  sizes: Float64Array;
  modes: Uint32Array;
  digests: Uint8Array;
  links: [number, string][];
  order: Uint32Array | undefined;
}

/** The buffers of pack()'s arrays (each its own). */
export function entryBuffers(p: PackedEntries): ArrayBuffer[] {
  const arrays = [p.paths, p.ends, p.kinds, p.sizes, p.modes, p.digests, ...(p.order === undefined ? [] : [p.order])];
  return arrays.map((a) => a.buffer as ArrayBuffer);
}

function grown<T extends Uint8Array | Uint32Array | Float64Array>(a: T, need: number): T {
  if (need <= a.length) return a;
  const next = new (a.constructor as new (n: number) => T)(Math.max(need, a.length * 2));
  next.set(a);
  return next;
}

function grownBuffer(b: Buffer, need: number, used: number): Buffer {
  if (need <= b.length) return b;
  const next = Buffer.alloc(Math.max(need, b.length * 2));
  b.copy(next, 0, 0, used);
  return next;
}

/**
 * Entries by index (the order they were added); sort() then gives the manifest
 * order (by UTF-8 bytes of their paths), which iteration and at() follow. Paths are
 * unique: add() returns the index of an entry already at that path instead.
 */
export class EntryTable implements Iterable<ManifestEntry> {
  #paths: Buffer = Buffer.alloc(1 << 16);
  #used = 0;
  #ends: Float64Array = new Float64Array(1024);
  #kinds: Uint8Array = new Uint8Array(1024);
  #sizes: Float64Array = new Float64Array(1024);
  #modes: Uint32Array = new Uint32Array(1024);
  #digests: Buffer = Buffer.alloc(1024 * DIGEST_BYTES);
  #links = new Map<number, string>();
  #order: Uint32Array | undefined;
  #count = 0;
  #index: PathIndex | undefined;

  get length(): number {
    return this.#count;
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

  /** The index of the entry at `path`, or -1. */
  find(path: string): number {
    const [at, end] = this.#stage(path);
    return this.#lookup().find(this.#paths, at, end);
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
    this.#count++;
    this.#order = undefined;
    index.add(i);
    return { index: i, added: true };
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
    return {
      kind,
      path: this.#paths.toString('utf8', this.start(i), this.#ends[i]!),
      size: this.#sizes[i]!,
      sha256: kind === 'directory' ? '' : this.#digests.toString('hex', i * DIGEST_BYTES, (i + 1) * DIGEST_BYTES),
      mode: this.#modes[i]!,
      link_target: this.#links.get(i) ?? '',
    };
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
    const order = new Uint32Array(this.#count);
    for (let i = 0; i < order.length; i++) order[i] = i;
    order.sort((a, b) => {
      let i = a === 0 ? 0 : ends[a - 1]!;
      let j = b === 0 ? 0 : ends[b - 1]!;
      const ea = ends[a]!;
      const eb = ends[b]!;
      for (; i < ea && j < eb; i++, j++) if (p[i] !== p[j]) return p[i]! - p[j]!;
      return ea - i - (eb - j);
    });
    this.#order = order;
    this.#index = undefined;
    return this;
  }

  /** The arrays trimmed to the entries (copies), for another thread. */
  pack(): PackedEntries {
    const n = this.#count;
    return {
      paths: new Uint8Array(this.#paths.subarray(0, this.#used)),
      ends: this.#ends.slice(0, n),
      kinds: this.#kinds.slice(0, n),
      sizes: this.#sizes.slice(0, n),
      modes: this.#modes.slice(0, n),
      digests: new Uint8Array(this.#digests.subarray(0, n * DIGEST_BYTES)),
      links: [...this.#links],
      order: this.#order?.slice(),
    };
  }

  static unpack(p: PackedEntries): EntryTable {
    const t = new EntryTable();
    t.#paths = Buffer.from(p.paths.buffer, p.paths.byteOffset, p.paths.length);
    t.#used = p.paths.length;
    t.#ends = p.ends;
    t.#kinds = p.kinds;
    t.#sizes = p.sizes;
    t.#modes = p.modes;
    t.#digests = Buffer.from(p.digests.buffer, p.digests.byteOffset, p.digests.length);
    t.#links = new Map(p.links);
    t.#order = p.order;
    t.#count = p.kinds.length;
    return t;
  }

  /** A table of these entries (paths must be unique), in their order. */
  static from(entries: Iterable<ManifestEntry>): EntryTable {
    const t = new EntryTable();
    for (const e of entries) t.add(e);
    return t;
  }

  /** Writes path into the spare tail of the path buffer (not yet an entry's); returns where its bytes start and end. */
  #stage(path: string): [number, number] {
    this.#paths = grownBuffer(this.#paths, this.#used + path.length * 3, this.#used);
    return [this.#used, this.#used + this.#paths.write(path, this.#used, 'utf8')];
  }

  #lookup(): PathIndex {
    if (this.#index === undefined) {
      this.#index = new PathIndex(this);
      for (let i = 0; i < this.#count; i++) this.#index.add(i);
    }
    return this.#index;
  }

  #reserve(n: number): void {
    this.#ends = grown(this.#ends, n);
    this.#kinds = grown(this.#kinds, n);
    this.#sizes = grown(this.#sizes, n);
    this.#modes = grown(this.#modes, n);
    this.#digests = grownBuffer(this.#digests, n * DIGEST_BYTES, this.#count * DIGEST_BYTES);
  }
}
