// stat-blocks.test.ts: StatBlocks read field by field as the addon fills them, and Ledger.sameAt exactly Ledger.same for every field's low and high half.
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Ledger, StatBlocks, fstatatBlocks } from '../../dist/internal.js';
import { AT_SYMLINK_NOFOLLOW, O_DIRECTORY, O_RDONLY, sys, type Stat } from '../../dist/sys/index.js';
import { checkNoFdLeaks, tempDir, wrapSys } from '../helpers.js';

checkNoFdLeaks();

const HALF = 1n << 32n;

/** A file's Stat with the given 64-bit fields. */
function fileStat(dev: bigint, ino: bigint, mtimeNs: bigint, ctimeNs: bigint, size = 7): Stat {
  return { dev, ino, mode: 0o100600, nlink: 1, uid: 0, gid: 0, size, blocks: 8, mtimeNs, ctimeNs };
}

describe('StatBlocks and Ledger.sameAt', () => {
  it('fstatatBlocks of the real layer gives, name by name, what fstatat gives: each field, null for a missing name, the error for another failure', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a'), 'alpha');
    mkdirSync(join(dir, 'd'));
    symlinkSync('a', join(dir, 'l'));
    const fd = sys.openat(-100, dir, O_RDONLY | O_DIRECTORY);
    try {
      const long = 'x'.repeat(300);
      const names = ['a', 'd', 'l', 'missing', long];
      const blocks = fstatatBlocks(sys, fd, names, AT_SYMLINK_NOFOLLOW);
      for (const [k, name] of names.entries()) {
        if (name === 'missing') {
          expect([blocks.ok(k), blocks.at(k)]).toEqual([false, null]);
          continue;
        }
        if (name === long) {
          expect(blocks.ok(k)).toBe(false);
          expect(blocks.at(k)).toMatchObject({ code: 'ENAMETOOLONG', syscall: 'fstatat', path: long });
          continue;
        }
        const st = sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW);
        expect(blocks.at(k)).toEqual(st);
        expect([blocks.ok(k), blocks.mode(k), blocks.size(k)]).toEqual([true, st.mode, st.size]);
        for (const [slot, value] of [st.dev, st.ino, st.mtimeNs, st.ctimeNs].entries()) {
          const u = BigInt.asUintN(64, value);
          expect([name, slot, blocks.low(k, slot), blocks.high(k, slot)]).toEqual([name, slot, Number(u & (HALF - 1n)), Number(u >> 32n)]);
        }
      }
      // Through an injected layer: the same blocks, filled from its Stats.
      const injected = fstatatBlocks(wrapSys({}), fd, names, AT_SYMLINK_NOFOLLOW);
      for (const k of names.keys()) expect(injected.at(k)).toEqual(blocks.at(k));
    } finally {
      sys.close(fd);
    }
  });

  it('sameAt(i, blocks, k) is same(i, blocks.at(k)) for a file record: equal, and for every 64-bit field changed in its low half, its high half or its sign, and for mode and size', () => {
    const bases = [
      fileStat(2049n, 131n, 1_764_000_000_123_456_789n, 1_764_000_000_987_654_321n),
      fileStat((1n << 40n) + 5n, (1n << 50n) + 7n, -5n, -(1n << 62n)),
      fileStat(0n, 0n, 0n, 0n, 0),
      fileStat(2n ** 64n - 1n, 2n ** 64n - 2n, 2n ** 63n - 1n, -(2n ** 63n) + 1n, 2 ** 52),
    ];
    const tweaks: [string, (st: Stat) => Stat][] = [
      ['none', (st) => st],
      ['dev low', (st) => ({ ...st, dev: st.dev ^ 1n })],
      ['dev high', (st) => ({ ...st, dev: st.dev ^ HALF })],
      ['ino low', (st) => ({ ...st, ino: st.ino ^ 1n })],
      ['ino high', (st) => ({ ...st, ino: st.ino ^ (HALF << 5n) })],
      ['mtime low', (st) => ({ ...st, mtimeNs: st.mtimeNs + 1n })],
      ['mtime high', (st) => ({ ...st, mtimeNs: st.mtimeNs - HALF })],
      ['mtime sign', (st) => ({ ...st, mtimeNs: -st.mtimeNs - 1n })],
      ['ctime low', (st) => ({ ...st, ctimeNs: st.ctimeNs - 1n })],
      ['ctime high', (st) => ({ ...st, ctimeNs: st.ctimeNs + HALF })],
      ['ctime sign', (st) => ({ ...st, ctimeNs: -st.ctimeNs - 1n })],
      ['mode', (st) => ({ ...st, mode: st.mode ^ 0o100 })],
      ['size', (st) => ({ ...st, size: st.size + 1 })],
    ];
    for (const base of bases) {
      const wrap = (v: bigint): bigint => BigInt.asIntN(64, v);
      const clamp = (st: Stat): Stat => ({ ...st, dev: BigInt.asUintN(64, st.dev), ino: BigInt.asUintN(64, st.ino), mtimeNs: wrap(st.mtimeNs), ctimeNs: wrap(st.ctimeNs) });
      const ledger = Ledger.empty('a'.repeat(64), base.dev, false, 2);
      ledger.record(1, base);
      const blocks = new StatBlocks(tweaks.length);
      tweaks.forEach(([, tweak], k) => blocks.fill(k, clamp(tweak(base))));
      tweaks.forEach(([what], k) => {
        const st = blocks.at(k) as Stat;
        expect([what, ledger.sameAt(1, blocks, k)]).toEqual([what, ledger.same(1, st)]);
        expect([what, ledger.sameAt(1, blocks, k)]).toEqual([what, what === 'none']);
        // Record 0 holds nothing: never the same.
        expect(ledger.sameAt(0, blocks, k)).toBe(false);
      });
    }
  });

  it('trustsBytes compares the record\'s ctime with the ledger\'s time as signed 64-bit values, for every sign and half', () => {
    const values = [0n, 1n, -1n, HALF - 1n, HALF, -HALF, 2n ** 63n - 1n, -(2n ** 63n) + 1n, 1_764_000_000_000_000_000n, -5n];
    const ledger = Ledger.empty('b'.repeat(64), 1n, false, values.length);
    values.forEach((c, i) => ledger.record(i, fileStat(1n, BigInt(i + 1), 0n, c)));
    for (const recorded of values) {
      ledger.recordedNs = recorded;
      expect(ledger.recordedNs).toBe(recorded);
      // Before it, unless a whole second within 2 s of it (a clone that keeps whole seconds: see clone-ledger.test.ts).
      const trusted = (c: bigint): boolean => c < recorded && !(c % 1_000_000_000n === 0n && recorded - c <= 2_000_000_000n);
      values.forEach((c, i) => expect([String(c), String(recorded), ledger.trustsBytes(i)]).toEqual([String(c), String(recorded), trusted(c)]));
    }
    ledger.bytesTrusted = false;
    expect(values.some((_, i) => ledger.trustsBytes(i))).toBe(false);
  });
});
