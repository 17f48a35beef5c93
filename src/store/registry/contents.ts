// contents.ts: a snapshot's non-empty files grouped by content, in typed arrays over its entry tables (an object only for what is asked for).
import { EntryTable } from '../../base/entry-table.js';
import type { StoredSnapshot } from '../document.js';
import { COPY_AREA, mountArea } from '../layout.js';

/** Where a content lives in a snapshot: its area (`copy`, `mounts/00000`) and its manifest path there. */
export interface Place {
  area: string;
  path: string;
  mode: number;
}

export interface Content {
  sha256: string;
  size: number;
  places: Place[];
}

/** An area of the snapshot: its entries, and the number of its first place. */
interface Area {
  area: string;
  table: EntryTable;
  base: number;
  digests: Buffer;
}

/** Places up to this many get their order from one native sort of packed keys (the key holds 21 bits of rank). */
const PACKED_SORT_MAX = 2 ** 21;

/**
 * The non-empty files of a snapshot grouped by content, contents in sha256 order, each
 * content's places in area order (the copy roots', then each mount's) and manifest order
 * within an area, as contentsOf always listed them. A place is a number: the entry's
 * position in manifest order plus its area's base.
 */
export class Contents {
  readonly #areas: Area[];
  /** Places (non-empty files), by content then place. */
  readonly #places: Uint32Array;
  /** Content k's places are #places[#starts[k]] … #places[#starts[k + 1] - 1]. */
  readonly #starts: Uint32Array;
  /** Empty files' places, in area and manifest order. */
  readonly #empty: Uint32Array;

  constructor(data: Pick<StoredSnapshot, 'entries' | 'mounts'>) {
    let base = 0;
    this.#areas = [{ area: COPY_AREA, entries: data.entries }, ...data.mounts.map((m, i) => ({ area: mountArea(i), entries: m.entries }))].map(({ area, entries }) => {
      // A layout needs no times: entries given as objects are tabled without them.
      const table = entries instanceof EntryTable ? entries : EntryTable.from(Array.from(entries, ({ mtime_ns: _, ...e }) => e));
      const a = { area, table, base, digests: table.arrays().digests };
      base += table.length;
      return a;
    });
    const files: number[] = [];
    const empty: number[] = [];
    for (const { table, base: b } of this.#areas) {
      for (let n = 0; n < table.length; n++) {
        const i = table.indexAt(n);
        if (table.kindOf(i) !== 'file') continue;
        (table.size(i) === 0 ? empty : files).push(b + n);
      }
    }
    this.#empty = Uint32Array.from(empty);
    this.#places = this.#sorted(files);
    const starts = [0];
    for (let k = 1; k < this.#places.length; k++) if (this.#compareDigests(this.#places[k - 1]!, this.#places[k]!) !== 0) starts.push(k);
    if (this.#places.length > 0) starts.push(this.#places.length);
    this.#starts = Uint32Array.from(starts);
  }

  /** How many distinct contents. */
  get count(): number {
    return Math.max(this.#starts.length - 1, 0);
  }

  /** Content k's sha256, as hex. */
  sha256(k: number): string {
    const [a, i] = this.#locate(this.#places[this.#starts[k]!]!);
    return a.digests.toString('hex', i * 32, i * 32 + 32);
  }

  /** The first 32 bits of content k's sha256 (what bucketOf reads). */
  top(k: number): number {
    const [a, i] = this.#locate(this.#places[this.#starts[k]!]!);
    return a.digests.readUInt32BE(i * 32);
  }

  /** Compares content k's sha256 with content j's of other (the sign of k's - j's). */
  compare(k: number, other: Contents, j: number): number {
    const [a, i] = this.#locate(this.#places[this.#starts[k]!]!);
    const [b, n] = other.#locate(other.#places[other.#starts[j]!]!);
    return a.digests.compare(b.digests, n * 32, n * 32 + 32, i * 32, i * 32 + 32);
  }

  /** Content k's size (its first place's). */
  size(k: number): number {
    const [a, i] = this.#locate(this.#places[this.#starts[k]!]!);
    return a.table.size(i);
  }

  /** Content k with its places. */
  content(k: number): Content {
    const places: Place[] = [];
    for (let p = this.#starts[k]!; p < this.#starts[k + 1]!; p++) places.push(this.#place(this.#places[p]!));
    return { sha256: this.sha256(k), size: this.size(k), places };
  }

  /** Every empty file's place. */
  *emptyPlaces(): Generator<Place> {
    for (const id of this.#empty) yield this.#place(id);
  }

  #place(id: number): Place {
    const [a, i] = this.#locate(id);
    return { area: a.area, path: a.table.path(i), mode: a.table.mode(i) };
  }

  /** The area of a place, and its entry's index in the area's table. */
  #locate(id: number): [Area, number] {
    let k = this.#areas.length - 1;
    while (this.#areas[k]!.base > id) k--;
    const a = this.#areas[k]!;
    return [a, a.table.indexAt(id - a.base)];
  }

  #compareDigests(x: number, y: number): number {
    const [ax, ix] = this.#locate(x);
    const [ay, iy] = this.#locate(y);
    return ax.digests.compare(ay.digests, iy * 32, iy * 32 + 32, ix * 32, ix * 32 + 32);
  }

  /**
   * The places by sha256, then place. Up to PACKED_SORT_MAX, one native sort of a float
   * each (the sha256's first 32 bits, then the rank), the rare runs of equal first bits
   * then ordered by the whole sha256; beyond, a comparison sort.
   */
  #sorted(files: number[]): Uint32Array {
    const byDigest = (x: number, y: number): number => this.#compareDigests(x, y) || x - y;
    if (files.length > PACKED_SORT_MAX) return Uint32Array.from(files.sort(byDigest));
    const keys = new Float64Array(files.length);
    const tops = new Uint32Array(files.length);
    files.forEach((id, rank) => {
      const [a, i] = this.#locate(id);
      tops[rank] = a.digests.readUInt32BE(i * 32);
      keys[rank] = tops[rank]! * PACKED_SORT_MAX + rank;
    });
    keys.sort();
    const out = new Uint32Array(files.length);
    keys.forEach((key, n) => (out[n] = files[key % PACKED_SORT_MAX]!));
    for (let from = 0; from < out.length; ) {
      const top = tops[keys[from]! % PACKED_SORT_MAX]!;
      let to = from + 1;
      while (to < out.length && tops[keys[to]! % PACKED_SORT_MAX] === top) to++;
      if (to - from > 1) out.set(Array.from(out.subarray(from, to)).sort(byDigest), from);
      from = to;
    }
    return out;
  }
}
