// stat-each.ts: fstatat of a directory's names in one call into the addon (fstatatEach), and its stat blocks read field by field without making a Stat (StatBlocks).
import { addon, sys, type Stat, type Sys } from './native.js';
import { constants } from 'node:os';
import { systemError } from './errno.js';

/** Slots per block (FillStat in native/stat.cc): dev, ino (uint64), mtime, ctime (int64 ns), mode, nlink, uid, gid, size, blocks (doubles). */
const SLOTS = 10;
/** Which 32-bit word of an 8-byte slot holds its low half in this host's byte order (the addon fills the blocks in host order). */
const LO = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 0 : 1;
const HI = 1 - LO;

/**
 * One fstatat result per name, as blocks laid out as the addon fills them. A block is
 * read field by field (mode, size, the halves of its 64-bit slots) with no object and no
 * BigInt made, so a walk that compares most entries with a record makes a Stat (`at`) only
 * of the few it must look at further.
 */
export class StatBlocks {
  readonly #u32: Uint32Array;
  readonly #f64: Float64Array;
  readonly #u64: BigUint64Array;
  readonly #i64: BigInt64Array;
  /** Per name: undefined where its block is filled, null where it does not exist (ENOENT), else the error fstatat met. */
  readonly failed: (Error | null | undefined)[];

  constructor(readonly count: number) {
    const buffer = new ArrayBuffer(Math.max(count, 1) * SLOTS * 8);
    this.#u32 = new Uint32Array(buffer);
    this.#f64 = new Float64Array(buffer);
    this.#u64 = new BigUint64Array(buffer);
    this.#i64 = new BigInt64Array(buffer);
    this.failed = new Array<Error | null | undefined>(count);
  }

  /** The blocks' bytes, for the addon to fill. */
  get bytes(): Uint8Array {
    return new Uint8Array(this.#u32.buffer);
  }

  /** Block k filled from a Stat (what an injected layer's fstatat returned). */
  fill(k: number, st: Stat): void {
    const s = k * SLOTS;
    this.#u64[s] = st.dev;
    this.#u64[s + 1] = st.ino;
    this.#i64[s + 2] = st.mtimeNs;
    this.#i64[s + 3] = st.ctimeNs;
    this.#f64[s + 4] = st.mode;
    this.#f64[s + 5] = st.nlink;
    this.#f64[s + 6] = st.uid;
    this.#f64[s + 7] = st.gid;
    this.#f64[s + 8] = st.size;
    this.#f64[s + 9] = st.blocks;
  }

  /** Name k's result as fstatat gives it: a Stat, null where it does not exist, or the error met. */
  at(k: number): Stat | null | Error {
    const failed = this.failed[k];
    if (failed !== undefined) return failed;
    const s = k * SLOTS;
    // The same keys in the same order as every other Stat: one shape.
    return { dev: this.#u64[s]!, ino: this.#u64[s + 1]!, mode: this.#f64[s + 4]!, nlink: this.#f64[s + 5]!, uid: this.#f64[s + 6]!, gid: this.#f64[s + 7]!, size: this.#f64[s + 8]!, blocks: this.#f64[s + 9]!, mtimeNs: this.#i64[s + 2]!, ctimeNs: this.#i64[s + 3]! };
  }

  /** Whether name k's block is filled (its fstatat succeeded). */
  ok(k: number): boolean {
    return this.failed[k] === undefined;
  }

  mode(k: number): number {
    return this.#f64[k * SLOTS + 4]!;
  }

  size(k: number): number {
    return this.#f64[k * SLOTS + 8]!;
  }

  /** The low 32 bits of 64-bit slot `slot` (0 dev, 1 ino, 2 mtime, 3 ctime) of block k. */
  low(k: number, slot: number): number {
    return this.#u32[(k * SLOTS + slot) * 2 + LO]!;
  }

  /** The high 32 bits (unsigned) of 64-bit slot `slot` of block k. */
  high(k: number, slot: number): number {
    return this.#u32[(k * SLOTS + slot) * 2 + HI]!;
  }
}

/**
 * fstatat(dirfd, name, flags) of every name, all of them before anything is returned, as
 * StatBlocks: null where a name does not exist (ENOENT), and where another failure met it
 * the error fstatat would have thrown (system-shaped: code, errno, syscall 'fstatat', path
 * the name), so one name the kernel refuses leaves the others' results standing. The real
 * layer stats them in one call into the addon, back to back (one directory's names: the
 * kernel's lookup paths stay warm, nothing crosses into JavaScript between them); an
 * injected layer is asked once per name, in order, so a test that wraps fstatat sees each
 * of them, and what it throws for a name is that name's result.
 */
export function fstatatBlocks(layer: Sys, dirfd: number, names: readonly string[], flags: number): StatBlocks {
  const out = new StatBlocks(names.length);
  if (layer !== sys) {
    for (let k = 0; k < names.length; k++) {
      try {
        out.fill(k, layer.fstatat(dirfd, names[k]!, flags));
      } catch (err) {
        out.failed[k] = (err as { code?: unknown }).code === 'ENOENT' ? null : (err as Error);
      }
    }
    return out;
  }
  if (names.length === 0) return out;
  for (const name of names) {
    // The names travel joined by '/': one holding it would shift every name after it.
    if (name === '' || name.includes('/')) throw Object.assign(new TypeError(`The argument 'names' must hold names without '/', each not empty. Received ${JSON.stringify(name)}`), { code: 'ERR_INVALID_ARG_VALUE' });
  }
  const failed = addon.fstatat_each(dirfd, names.join('/'), flags, out.bytes);
  for (const [k, errno] of failed) {
    out.failed[k] = errno === constants.errno.ENOENT ? null : systemError(-errno, 'fstatat', names[k]);
  }
  return out;
}

/** fstatatBlocks, each result made a Stat (or null, or the error met). */
export function fstatatEach(layer: Sys, dirfd: number, names: readonly string[], flags: number): (Stat | null | Error)[] {
  const blocks = fstatatBlocks(layer, dirfd, names, flags);
  const out = new Array<Stat | null | Error>(names.length);
  for (let k = 0; k < names.length; k++) out[k] = blocks.at(k);
  return out;
}
