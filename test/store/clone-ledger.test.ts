// clone-ledger.test.ts: the ledger file the store keeps of a clone, re-sealed with each field of its header changed in turn: any that
// does not name this store, this clone, its device, a snapshot digest and its record count is ignored (diff re-hashes), never trusted.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import type { Stat } from '../../dist/sys/index.js';
import { Ledger } from '../../dist/internal.js';
import { checkNoFdLeaks, mkfifo, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/** A ledger's bytes with its JSON header changed by `edit` (and its records by `records`), sealed again with its sha256. */
function resealed(bytes: Buffer, edit: (h: Record<string, unknown>) => void, records: (r: Buffer) => Buffer = (r) => r): Buffer {
  const body = bytes.subarray(0, bytes.length - 32);
  const cut = body.indexOf(10);
  const header = JSON.parse(body.toString('utf8', 0, cut)) as Record<string, unknown>;
  edit(header);
  const next = Buffer.concat([Buffer.from(`${JSON.stringify(header)}\n`), records(Buffer.from(body.subarray(cut + 1)))]);
  return Buffer.concat([next, createHash('sha256').update(next).digest()]);
}

/** A store holding a capture of `files` (copy root src) materialized into work/clone. */
function materialized(files: Record<string, string>): { work: string; store: SnapshotStore; snap: Snapshot; clone: string } {
  const work = tempDir();
  writeTree(join(work, 'repo'), files);
  const store = SnapshotStore.openSync(join(work, 'store'));
  const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
  const clone = join(work, 'clone');
  mkdirSync(clone);
  snap.materializeSync(clone);
  return { work, store, snap, clone };
}

describe('Ledger.newestCtimeNs (what the ledger file waits to be stamped past)', () => {
  it('is the newest ctime of the records made, compared as signed 64-bit nanoseconds by halves; 0 for none or none after the epoch', () => {
    const st = (ctimeNs: bigint): Stat => ({ dev: 1n, ino: 2n, mode: 0o100600, nlink: 1, uid: 0, gid: 0, size: 0, blocks: 0, mtimeNs: 0n, ctimeNs }) as unknown as Stat;
    const newest = (ctimes: (bigint | undefined)[]): bigint => {
      const ledger = Ledger.empty('a'.repeat(64), 1n, false, ctimes.length);
      ctimes.forEach((c, i) => c !== undefined && ledger.record(i, st(c)));
      return ledger.newestCtimeNs();
    };
    const HALF = 1n << 32n;
    expect(newest([])).toBe(0n);
    expect(newest([undefined, undefined])).toBe(0n);
    expect(newest([-5n, -HALF])).toBe(0n);
    expect(newest([5n, HALF - 1n, 3n])).toBe(HALF - 1n);
    // High halves decide first (one larger with a smaller low half), then the low halves unsigned.
    expect(newest([HALF * 7n + 9n, HALF * 8n + 1n, HALF * 8n])).toBe(HALF * 8n + 1n);
    expect(newest([HALF * 8n + (HALF - 1n), HALF * 8n + 2n])).toBe(HALF * 8n + (HALF - 1n));
    // A record not made (kind 0) is not counted whatever its bytes, and the first record made may be the newest.
    expect(newest([1_800_000_000_000_000_000n, undefined, 1_700_000_000_000_000_000n])).toBe(1_800_000_000_000_000_000n);
  });
});

describe("Ledger's file device", () => {
  it("is learnt from a whole materialize's first file, never by a reset: a file on another device a reset meets (an agent's subvolume) is forgotten, the others stay the same", () => {
    const st = (dev: bigint, ino: bigint, dir = false): Stat => ({ dev, ino, mode: dir ? 0o40700 : 0o100600, nlink: 1, uid: 0, gid: 0, size: 0, blocks: 0, mtimeNs: 5n, ctimeNs: 5n }) as unknown as Stat;
    // A whole materialize on an overlay of two filesystems: directories on 1, files on 9.
    const made = Ledger.empty('a'.repeat(64), 1n, false, 3);
    made.record(0, st(1n, 10n, true));
    made.record(1, st(9n, 11n));
    made.record(2, st(9n, 12n));
    expect([made.fileDev, made.same(0, st(1n, 10n, true)), made.same(1, st(9n, 11n)), made.same(2, st(9n, 12n))]).toEqual([9n, true, true, true]);
    // A reset of an ordinary clone (files on the directory's device) meets a file on another device first.
    const reset = Ledger.empty('a'.repeat(64), 1n, false, 3);
    reset.record(1, st(1n, 11n));
    reset.record(2, st(1n, 12n));
    const derived = reset.derive(false);
    derived.record(1, st(51n, 11n));
    expect([derived.fileDev, derived.same(1, st(51n, 11n)), derived.same(2, st(1n, 12n))]).toEqual([1n, false, true]);
  });
});

describe('Ledger.record on a clone that keeps whole seconds', () => {
  it('a file recorded less than 2 s after its whole-second ctime is never trusted, however late the ledger is written (a write later in that second keeps the ctime)', () => {
    const st = (ctimeNs: bigint): Stat => ({ dev: 1n, ino: 2n, mode: 0o100600, nlink: 1, uid: 0, gid: 0, size: 0, blocks: 0, mtimeNs: ctimeNs, ctimeNs }) as unknown as Stat;
    const second = BigInt(Math.floor(Date.now() / 1000)) * 1_000_000_000n;
    const ctimes = [second, second - 1_000_000_000n, second - 5_000_000_000n, second + 123n, second - 1_000_000_000n + 1n];
    const ledger = Ledger.empty('c'.repeat(64), 1n, false, ctimes.length);
    ctimes.forEach((c, i) => ledger.record(i, st(c)));
    // The ledger written a minute later: past every ctime by far more than 2 s.
    ledger.recordedNs = second + 60_000_000_000n;
    expect(ctimes.map((_, i) => ledger.trustsBytes(i))).toEqual([false, false, true, true, true]);
  });
});

describe('the clone ledger file', () => {
  it('is trusted only when its header names this store, this clone, its device, a snapshot digest and its record count; re-sealed with any of them changed, diff re-hashes', () => {
    const { work, store, snap, clone } = materialized({ 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta' });
    const ledgers = join(work, 'store/clones');
    const [name] = readdirSync(ledgers);
    const path = join(ledgers, name!);
    const saved = readFileSync(path);
    const st = statSync(clone, { bigint: true });
    const header = JSON.parse(saved.toString('utf8', 0, saved.indexOf(10))) as Record<string, unknown>;
    expect(header).toMatchObject({ v: 3, clone: `${st.dev}:${st.ino}`, digest: snap.digest, dev: String(st.dev), independent: false, count: 4, path: clone });
    // Re-sealed as it is: trusted (the test's own sealing is right).
    writeFileSync(path, resealed(saved, () => {}));
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    const cases: [string, (h: Record<string, unknown>) => void, ((r: Buffer) => Buffer)?][] = [
      // Version 2 (builds before the untrusted bits) and a later one: never read as this one.
      ['the version before', (h) => (h.v = 2)],
      ['a later version', (h) => (h.v = 4)],
      ['another store', (h) => (h.store = `${h.store}1`)],
      ['another clone', (h) => (h.clone = `${st.dev}:${st.ino + 1n}`)],
      ['another device', (h) => (h.dev = String(st.dev + 1n))],
      ['a digest that is not one', (h) => (h.digest = 'ab')],
      ['a digest that is not a string', (h) => (h.digest = 7)],
      ['a count that is not the records', (h) => (h.count = 5)],
      ['a count that is not a number', (h) => (h.count = '4')],
      ['a count that is not an integer', (h) => (h.count = 3.5), (r) => r.subarray(0, 140)],
      ['a negative count', (h) => (h.count = -1)],
      ['records cut short', () => {}, (r) => r.subarray(0, r.length - 1)],
    ];
    for (const [what, edit, records] of cases) {
      writeFileSync(path, resealed(saved, edit, records));
      expect([what, snap.diffSync(clone)]).toMatchObject([what, { ok: true, method: 'hash' }]);
    }
    // Not sealed: a header changed without a new sha256, a file shorter than one, no header line.
    const changed = Buffer.from(saved);
    changed[changed.indexOf(10) + 1] ^= 1;
    for (const bytes of [changed, saved.subarray(0, 31), Buffer.concat([Buffer.from('x'.repeat(8)), createHash('sha256').update('x'.repeat(8)).digest()])]) {
      writeFileSync(path, bytes);
      expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'hash' });
    }
    // A digest of another snapshot, well formed: the ledger is that snapshot's (SEAL_BINDING, as a materialize of it would leave).
    writeFileSync(path, resealed(saved, (h) => (h.digest = 'f'.repeat(64))));
    expect(() => snap.diffSync(clone)).toThrow(expect.objectContaining({ code: 'SEAL_BINDING' }));
    // independent: true is read as it is written (only then may reflink 'never' keep the files).
    writeFileSync(path, resealed(saved, (h) => (h.independent = true)));
    expect(snap.materializeSync(clone, { reflink: 'never' })).toMatchObject({ reset: true });
    writeFileSync(path, resealed(saved, (h) => (h.independent = 'yes')));
    expect(snap.materializeSync(clone, { reflink: 'never' })).toMatchObject({ reset: false });
    store.closeSync();
  });

  // (Its size is compared with the manifest's before the ledger is asked.)
  it('a file is the one materialize made only while every field of its identity is: one field alone changed (the syscall layer lying) is changed', () => {
    const { store, snap, clone } = materialized({ 'src/a.ts': 'alpha', 'src/b.ts': 'beta' });
    const tweaks: [string, (st: Stat) => Stat][] = [
      ['dev', (st) => ({ ...st, dev: st.dev + 1n })],
      ['mode', (st) => ({ ...st, mode: st.mode ^ 0o100 })],
      ['ino', (st) => ({ ...st, ino: st.ino + 1n })],
      ['mtime', (st) => ({ ...st, mtimeNs: st.mtimeNs + 1n })],
      ['ctime', (st) => ({ ...st, ctimeNs: st.ctimeNs + 1n })],
      // The high 32 bits alone of each 64-bit field (diff and reset compare them by halves, from the stat block).
      ['dev, high half', (st) => ({ ...st, dev: st.dev + (1n << 32n) })],
      ['ino, high half', (st) => ({ ...st, ino: st.ino + (1n << 32n) })],
      ['mtime, high half', (st) => ({ ...st, mtimeNs: st.mtimeNs + (1n << 32n) })],
      ['ctime, high half', (st) => ({ ...st, ctimeNs: st.ctimeNs - (1n << 32n) })],
    ];
    for (const [field, tweak] of tweaks) {
      const sys = wrapSys({ fstatat: (orig) => (dirfd, name, flags) => (name === 'a.ts' ? tweak(orig(dirfd, name, flags)) : orig(dirfd, name, flags)) });
      const lied = new Snapshot(snap.root, snap.toJSON(), { sys });
      expect([field, lied.diffSync(clone)]).toMatchObject([field, { changed: ['src/a.ts'], method: 'ledger' }]);
    }
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    // A reset asked through the lying layer replaces that file, and keeps the other (its block is its record).
    for (const [field, tweak] of tweaks) {
      const sys = wrapSys({ fstatat: (orig) => (dirfd, name, flags) => (name === 'a.ts' ? tweak(orig(dirfd, name, flags)) : orig(dirfd, name, flags)) });
      const lied = new Snapshot(snap.root, snap.toJSON(), { sys });
      expect([field, lied.resetSync(clone)]).toMatchObject([field, { changed: ['src/a.ts'], files: 1, method: 'reset' }]);
      // The new ledger records what the layer said of the file it made: the real one then sees that one record differ.
      expect(snap.diffSync(clone)).toMatchObject({ changed: ['src/a.ts'], method: 'ledger' });
      expect(snap.resetSync(clone)).toMatchObject({ changed: ['src/a.ts'], files: 1 });
      expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    }
    store.closeSync();
  });

  it("a file's bytes are trusted only while its recorded ctime is before the ledger's mtime, compared as signed 64-bit nanoseconds (by halves: the high signed, the low unsigned), and a whole second by more than 2 s", () => {
    const { work, store, snap, clone } = materialized({ 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta' });
    const ledgers = join(work, 'store/clones');
    const path = join(ledgers, readdirSync(ledgers)[0]!);
    const saved = readFileSync(path);
    const HALF = 1n << 32n;
    // Each case: the ctime a.ts (manifest index 1: its record at 40, its ctime at 40 + 32) has, relative to the ledger's
    // mtime R, and whether diff hashes it (racy: not before R).
    const cases: [string, (r: bigint) => bigint, boolean][] = [
      ['R - 1', (r) => r - 1n, false],
      ['R', (r) => r, true],
      ['R + 1', (r) => r + 1n, true],
      ['R - 2^32', (r) => r - HALF, false],
      ['R - 2^32 + 1 (high half smaller, low half larger)', (r) => r - HALF + 1n, false],
      ['R + 2^32 - 1 (high half larger, low half smaller)', (r) => r + HALF - 1n, true],
      ['R with the low half at its top (2^32 - 1 above R\'s high half)', (r) => (r & ~(HALF - 1n)) + HALF - 1n, true],
      ['-5 (a time before the epoch: the high half negative)', () => -5n, false],
      // A whole second within 2 s before R: a clone that keeps whole seconds (ext4 with 128-byte inodes, ext3, vfat) gives a write
      // later in that second the same ctime, however far the ledger's mtime (the store's, in nanoseconds) is past it.
      ['R - 1 s, a whole second', (r) => r - 1_000_000_000n, true],
      ['R - 2 s, a whole second', (r) => r - 2_000_000_000n, true],
      ['R - 3 s, a whole second', (r) => r - 3_000_000_000n, false],
      ['R - 1 s + 1 ns (not a whole second)', (r) => r - 999_999_999n, false],
      ['R - 9 s, a whole second (the high half more than 2 below)', (r) => r - 9_000_000_000n, false],
    ];
    // The ledger's mtime set to R, a whole second (utimes takes seconds): R's low half is then none of the edge cases by chance.
    const seconds = 1_800_000_000;
    const R = BigInt(seconds) * 1_000_000_000n;
    for (const [what, ctimeOf, hashed] of cases) {
      const ctime = ctimeOf(R);
      // The record and the file's stat both say `ctime` (the layer reports it), so the identity matches; the ledger's mtime decides.
      writeFileSync(path, resealed(saved, () => {}, (rec) => {
        const out = Buffer.from(rec);
        out.writeBigInt64LE(ctime, 40 + 32);
        return out;
      }));
      utimesSync(path, seconds, seconds);
      expect(statSync(path, { bigint: true }).mtimeNs).toBe(R);
      const sys = wrapSys({ fstatat: (orig) => (dirfd, name, flags) => (name === 'a.ts' ? { ...orig(dirfd, name, flags), ctimeNs: ctime } : orig(dirfd, name, flags)) });
      const lied = new Snapshot(snap.root, snap.toJSON(), { sys });
      expect([what, lied.diffSync(clone)]).toMatchObject([what, { ok: true, method: 'ledger', files: hashed ? 1 : 0 }]);
    }
    store.closeSync();
  });

  it("gc drops a ledger whose header cannot be read, is another version's, names no snapshot the store holds or a clone no longer where it was, and a link or FIFO under a ledger's name; keeps the rest and what is not named like a ledger", () => {
    const { work, store, snap, clone } = materialized({ 'src/a.ts': 'alpha' });
    const clones = join(work, 'store/clones');
    const st = statSync(clone, { bigint: true });
    const real = `${st.dev}-${st.ino}.ledger`;
    // A clone moved away and another directory made at its path (while the first still exists: another inode).
    const again = join(work, 'again');
    mkdirSync(again);
    const gone = statSync(again, { bigint: true });
    renameSync(again, join(work, 'moved'));
    mkdirSync(again);
    rmSync(join(work, 'moved'), { recursive: true });
    const head = (h: unknown) => `${typeof h === 'string' ? h : JSON.stringify(h)}\nrecords`;
    const planted: Record<string, string> = {
      '11-1.ledger': head({ v: 3, digest: snap.digest }),
      '11-2.ledger': '{"v":3}',
      '11-3.ledger': head('not json'),
      '11-4.ledger': head({ v: 4, digest: snap.digest }),
      '11-5.ledger': head({ v: 3, digest: 5 }),
      '11-6.ledger': head({ v: 3, digest: 'abc' }),
      '11-7.ledger': head({ v: 3, digest: 'f'.repeat(64) }),
      '11-8.ledger': head({ v: 3, digest: snap.digest, path: again, clone: `${gone.dev}:${gone.ino}` }),
      '11-9.ledger': head({ v: 3, digest: snap.digest, path: clone, clone: `${st.dev}:${st.ino}` }),
      'x-1.ledger': head({ v: 4 }),
      '11-10.ledger.old': head({ v: 4 }),
      'a11-10.ledger': head({ v: 4 }),
    };
    for (const [name, text] of Object.entries(planted)) writeFileSync(join(clones, name), text);
    mkdirSync(join(clones, '12-1.ledger'));
    // A link and a FIFO under ledgers' names: dropped, the link not followed (its target stays), the FIFO never waited on.
    const target = join(work, 'target');
    writeFileSync(target, 'kept');
    symlinkSync(target, join(clones, '13-1.ledger'));
    mkfifo(join(clones, '13-2.ledger'));
    expect(store.gc()).toBe(9);
    expect(readFileSync(target, 'utf8')).toBe('kept');
    expect(readdirSync(clones).sort()).toEqual([real, '11-1.ledger', '11-10.ledger.old', '11-9.ledger', '12-1.ledger', 'a11-10.ledger', 'x-1.ledger'].sort());
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    store.closeSync();
  });
});

describe('a clone on an overlay whose layers are on two filesystems', () => {
  it("its files show the upper layer's device, not the clone directory's: the ledger learns it (diff called every file changed, for good, and every reset made every file again); a file swapped still shows", () => {
    if (process.getuid!() !== 0) return;
    // Lower on tmpfs, upper and work on the temp dir's filesystem: files made in the overlay are the upper layer's.
    const lower = tempDir('/dev/shm');
    const base = tempDir();
    for (const d of ['upper', 'work', 'merged']) mkdirSync(join(base, d));
    execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${lower},upperdir=${base}/upper,workdir=${base}/work,xino=off`, join(base, 'merged')]);
    try {
      const work = tempDir();
      writeTree(join(work, 'repo'), { 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta' });
      const store = SnapshotStore.openSync(join(work, 'store'));
      const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
      const clone = join(base, 'merged', 'arm');
      snap.materializeSync(clone, { createClone: true });
      // The premise: a file's device is not its directory's.
      expect(statSync(join(clone, 'src/a.ts')).dev).not.toBe(statSync(clone).dev);
      expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger', changed: [] });
      writeFileSync(join(clone, 'src/lib/b.ts'), 'BETA');
      expect(snap.diffSync(clone)).toMatchObject({ ok: false, method: 'ledger', changed: ['src/lib/b.ts'] });
      expect(snap.resetSync(clone)).toMatchObject({ changed: ['src/lib/b.ts'], added: [], removed: [] });
      expect(snap.diffSync(clone)).toMatchObject({ ok: true, changed: [] });
      expect(snap.checkCloneSync(clone).ok).toBe(true);
      store.closeSync();
    } finally {
      execFileSync('umount', [join(base, 'merged')]);
    }
  });
});
