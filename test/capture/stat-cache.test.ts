// stat-cache.test.ts: the stat cache's binary form (torn, garbage, foreign files are refused) and its racy rule.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import { GRANULARITY_NS, StatCache, decodeStatCache, encodeStatCache, isRacy, sortIds, type CacheEntry } from '../../dist/internal.js';
import type { Stat } from '../../dist/sys/index.js';

const KEY = Buffer.alloc(32, 7);
const T = 1_800_000_000_000_000_000n;

function entry(i: number, over: Partial<CacheEntry> = {}): CacheEntry {
  return {
    dev: 2049n,
    ino: 1000n + BigInt(i),
    mode: 0o100644,
    size: i * 10,
    mtimeNs: T - 5_000_000_000n,
    ctimeNs: T - 4_000_000_000n,
    recordNs: T,
    sha256: (i % 16).toString(16).repeat(64),
    snapshot: (i % 2 ? 'a' : 'b').repeat(64),
    location: `copy/dir/fïle-${i}`,
    ...over,
  };
}

function statOf(e: CacheEntry): Stat {
  return { dev: e.dev, ino: e.ino, mode: e.mode, nlink: 1, uid: 0, gid: 0, size: e.size, blocks: 0, mtimeNs: e.mtimeNs, ctimeNs: e.ctimeNs };
}

describe('stat cache file format', () => {
  const entries = Array.from({ length: 50 }, (_, i) => entry(i));
  const bytes = encodeStatCache(KEY, entries);

  it('round-trips every field, 64-bit values and UTF-8 locations included', () => {
    expect(decodeStatCache(bytes, KEY)).toEqual(entries);
    const big = entry(1, { dev: (1n << 64n) - 1n, ino: (1n << 63n) + 5n, mtimeNs: -1n, size: 2 ** 40 });
    expect(decodeStatCache(encodeStatCache(KEY, [big]), KEY)).toEqual([big]);
    expect(decodeStatCache(encodeStatCache(KEY, []), KEY)).toEqual([]);
  });

  it('refuses a torn, garbage, bit-flipped, other-key or other-version file', () => {
    for (const cut of [0, 10, 63, 64, bytes.length >> 1, bytes.length - 1]) expect(decodeStatCache(bytes.subarray(0, cut), KEY)).toBeUndefined();
    expect(decodeStatCache(randomBytes(bytes.length), KEY)).toBeUndefined();
    expect(decodeStatCache(Buffer.concat([bytes, Buffer.from([0])]), KEY)).toBeUndefined();
    for (const at of [8, 12, 20, 70, 200, bytes.length - 40, bytes.length - 1]) {
      const flipped = Buffer.from(bytes);
      flipped[at] ^= 1;
      expect(decodeStatCache(flipped, KEY)).toBeUndefined();
    }
    expect(decodeStatCache(bytes, Buffer.alloc(32, 8))).toBeUndefined();
  });
});

describe('racy rule', () => {
  it('trusts an entry only when mtime and ctime are older than its recording by more than the granularity', () => {
    const limit = T - GRANULARITY_NS;
    expect(GRANULARITY_NS).toBe(2_000_000_000n);
    expect(isRacy({ mtimeNs: limit - 1n, ctimeNs: limit - 1n, recordNs: T })).toBe(false);
    expect(isRacy({ mtimeNs: limit, ctimeNs: limit - 1n, recordNs: T })).toBe(true);
    expect(isRacy({ mtimeNs: limit - 1n, ctimeNs: limit, recordNs: T })).toBe(true);
    expect(isRacy({ mtimeNs: T, ctimeNs: T, recordNs: T })).toBe(true);
    expect(isRacy({ mtimeNs: T + 10n, ctimeNs: T - 10n ** 12n, recordNs: T })).toBe(true);
  });

  it('matches on the whole identity: dev, ino, mode, size, mtime and ctime', () => {
    const e = entry(3);
    const cache = StatCache.decode(encodeStatCache(KEY, [entry(2), e, entry(4, { mtimeNs: T - 1n })]), KEY)!;
    const i = cache.trusted(statOf(e));
    expect([i, cache.sha256(i), cache.snapshot(i), cache.location(i)]).toEqual([1, e.sha256, e.snapshot, e.location]);
    for (const change of [{ dev: 1n }, { ino: 1n }, { mode: 0o100755 }, { size: 31 }, { mtimeNs: e.mtimeNs + 1n }, { ctimeNs: e.ctimeNs + 1n }]) {
      expect(cache.trusted({ ...statOf(e), ...change })).toBe(-1);
    }
    expect(cache.trusted(statOf(entry(4, { mtimeNs: T - 1n })))).toBe(-1);
    // Decoded in place at any buffer offset (a small file may sit anywhere in Node's pool).
    const shifted = Buffer.concat([Buffer.alloc(3), encodeStatCache(KEY, [e])]).subarray(3);
    expect(StatCache.decode(shifted, KEY)!.entry(0)).toEqual(e);
  });
});

describe('the next cache\'s record order (sortIds)', () => {
  /** Ids 0..n-1 the capture's own, n..n+m-1 loaded; each id's (dev high, dev low, ino high, ino low) words. */
  function records(n: number, m: number, pick: (id: number) => [number, number, number, number]): { order: Uint32Array; word: (id: number, k: number) => number } {
    const words = Array.from({ length: n + m }, (_, id) => pick(id));
    // ID_U32: dev low, dev high, ino low, ino high, as a record's 32-bit words hold them.
    const word = (id: number, k: number): number => {
      const [devHigh, devLow, inoHigh, inoLow] = words[id]!;
      return [devLow, devHigh, inoLow, inoHigh][k]!;
    };
    return { order: Uint32Array.from({ length: n + m }, (_, i) => i), word };
  }

  /** The order by definition: (dev, ino) ascending, the capture's own before the loaded, the last of its own first. */
  function expected(order: Uint32Array, word: (id: number, k: number) => number, n: number): number[] {
    const key = (id: number): bigint => (BigInt(word(id, 1)) << 96n) | (BigInt(word(id, 0)) << 64n) | (BigInt(word(id, 3)) << 32n) | BigInt(word(id, 2));
    const place = (id: number): number => (id < n ? n - 1 - id : id);
    return [...order].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : place(a) - place(b)));
  }

  const random = (seed: number): (() => number) => () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);

  it('packs one device\'s 32-bit inode numbers into doubles and sorts them natively in the same order as the comparator, hard links and loaded twins included (kills a packed key whose place is the id, or the last own one put last)', () => {
    const r = random(7);
    const n = 3000;
    const m = 2000;
    // Few distinct inodes (hard links, and loaded records of the same files), near 2^32 too.
    const { order, word } = records(n, m, () => [0, 2049, 0, r() < 0.5 ? Math.floor(r() * 500) : 2 ** 32 - 1 - Math.floor(r() * 500)]);
    const want = expected(order, word, n);
    const packed = Uint32Array.from(order);
    sortIds(packed, word, n, n + m);
    expect([...packed]).toEqual(want);
    const compared = Uint32Array.from(order);
    sortIds(compared, word, n, 2 ** 22);
    expect([...compared]).toEqual(want);
  });

  it('falls back to the comparator for two devices, an inode number past 32 bits, or more ids than a key holds', () => {
    const r = random(11);
    for (const pick of [
      (): [number, number, number, number] => [0, r() < 0.5 ? 2049 : 2050, 0, Math.floor(r() * 100)],
      (): [number, number, number, number] => [0, 2049, r() < 0.1 ? 1 : 0, Math.floor(r() * 100)],
      (): [number, number, number, number] => [r() < 0.5 ? 1 : 0, 7, 0, Math.floor(r() * 100)],
    ]) {
      const { order, word } = records(400, 300, pick);
      const want = expected(order, word, 400);
      sortIds(order, word, 400, 700);
      expect([...order]).toEqual(want);
    }
    expect(() => sortIds(new Uint32Array(0), () => 0, 0, 0)).not.toThrow();
  });
});
