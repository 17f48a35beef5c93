// path-index.ts: an open-addressing hash set of byte ranges (packed paths), by index, with no object per member.

/** FNV-1a over bytes[start, end). */
function hashBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i]!, 0x01000193);
  return h >>> 0;
}

/** Where member i's bytes are: [start, end) of one shared byte array. */
export interface ByteRanges {
  readonly bytes: Uint8Array;
  start(i: number): number;
  end(i: number): number;
}

/**
 * Members are indices into `ranges`; two members are equal when their bytes are.
 * The slots hold index + 1 (0: empty) and stay at most half full. Each member's hash is
 * kept (4 bytes a member): growing re-places members without hashing their bytes again,
 * and a probe compares bytes only where the hashes are equal.
 */
export class PathIndex {
  #slots: Uint32Array;
  /** Member i's hash at [i]. */
  #hashes: Uint32Array;
  #count = 0;
  #probe = Buffer.alloc(4096);

  /** `expected`: members it will hold, when known: slots for them from the start. */
  constructor(
    readonly ranges: ByteRanges,
    expected = 0,
  ) {
    let size = 1024;
    while (size < expected * 2) size *= 2;
    this.#slots = new Uint32Array(size);
    this.#hashes = new Uint32Array(Math.max(expected, 512));
  }

  /** The member whose bytes equal bytes[start, end), or -1. */
  find(bytes: Uint8Array, start: number, end: number): number {
    const slots = this.#slots;
    const hashes = this.#hashes;
    const mask = slots.length - 1;
    const h = hashBytes(bytes, start, end);
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const v = slots[s]!;
      if (v === 0) return -1;
      if (hashes[v - 1] === h && this.#equals(v - 1, bytes, start, end)) return v - 1;
    }
  }

  /** The member whose bytes are path's UTF-8, or -1 (the path is written into a buffer the index keeps for it). */
  findPath(path: string): number {
    if (path.length * 3 > this.#probe.length) this.#probe = Buffer.alloc(path.length * 3);
    return this.find(this.#probe, 0, this.#probe.write(path, 0, 'utf8'));
  }

  /** Adds member i (not yet a member, and equal to none). */
  add(i: number): void {
    if ((this.#count + 1) * 2 > this.#slots.length) this.#grow();
    if (i >= this.#hashes.length) {
      const more = new Uint32Array(Math.max(i + 1, this.#hashes.length * 2));
      more.set(this.#hashes);
      this.#hashes = more;
    }
    const h = hashBytes(this.ranges.bytes, this.ranges.start(i), this.ranges.end(i));
    this.#hashes[i] = h;
    this.#place(i, h);
    this.#count++;
  }

  #place(i: number, h: number): void {
    const slots = this.#slots;
    const mask = slots.length - 1;
    let s = h & mask;
    while (slots[s] !== 0) s = (s + 1) & mask;
    slots[s] = i + 1;
  }

  #grow(): void {
    const old = this.#slots;
    this.#slots = new Uint32Array(old.length * 2);
    for (const v of old) if (v !== 0) this.#place(v - 1, this.#hashes[v - 1]!);
  }

  #equals(i: number, bytes: Uint8Array, start: number, end: number): boolean {
    const own = this.ranges.bytes;
    const a = this.ranges.start(i);
    if (this.ranges.end(i) - a !== end - start) return false;
    for (let k = 0; k < end - start; k++) if (own[a + k] !== bytes[start + k]) return false;
    return true;
  }
}
