// keep-times.test.ts: keepTimes records each copy-root file's and directory's mtime (ns), materialize gives it to the clone
// (files after their bytes, directories after their children, never through a link), checkClone compares it; off, nothing changes.
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import * as S from '../../dist/sys/index.js';
import { SETTLED, checkNoFdLeaks, expectError, reflinkMount, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const NS = 1_000_000_000n;

/** Sets path's mtime to the nanosecond (its own, never a link's target), leaving its atime. */
function setMtime(path: string, ns: bigint): void {
  let sec = ns / NS;
  let nsec = ns % NS;
  if (nsec < 0n) {
    nsec += NS;
    sec -= 1n;
  }
  S.sys.utimensat(S.AT_FDCWD, path, 0, S.UTIME_OMIT, Number(sec), Number(nsec), S.AT_SYMLINK_NOFOLLOW);
}

const mtime = (path: string): bigint => lstatSync(path, { bigint: true }).mtimeNs;

/** Every path of the tree below and its mtime to set, directories after what they hold. */
const TIMES: [string, bigint][] = [
  ['src/a.txt', 1_600_000_000_123_456_789n],
  ['src/empty', 1_500_000_000_000_000_001n],
  ['src/old.txt', -1_000_000_001n],
  ['src/deep/er/x.bin', 1_700_000_000_999_999_999n],
  ['src/deep/er', 1_650_000_000_000_000_007n],
  ['src/deep', 1_650_000_000_000_000_008n],
  ['src/hollow', 1_400_000_000_000_000_003n],
  ['src', 1_650_000_000_000_000_009n],
  ['tool.sh', 1_234_567_890_987_654_321n],
  ['nested/deeper/root/f', 1_111_111_111_111_111_111n],
  ['nested/deeper/root', 1_222_222_222_222_222_222n],
];
const ROOTS = ['src', 'tool.sh', 'nested/deeper/root'];

/** A repository under base whose copy roots hold every kind a copy root may: files, empty files and directories, a file root, a root below implicit parents. */
function timedRepo(base: string): string {
  const repo = join(base, 'repo');
  writeTree(repo, {
    'src/a.txt': 'alpha',
    'src/empty': '',
    'src/old.txt': 'before 1970',
    'src/deep/er/x.bin': Buffer.alloc(70_000, 7),
    'src/hollow': null,
    'tool.sh': '#!/bin/sh\necho tool\n',
    'nested/deeper/root/f': 'f',
  });
  for (const [rel, ns] of TIMES) setMtime(join(repo, rel), ns);
  return repo;
}

const PLACES: [string, string | undefined][] = [
  ['this filesystem', undefined],
  ...(['xfs', 'btrfs', 'ext4'] as const).flatMap((k): [string, string | undefined][] => {
    const m = reflinkMount(k);
    return m === undefined ? [] : [[k, m]];
  }),
];

describe('keepTimes', () => {
  it.each(PLACES)('round-trips every mtime to the nanosecond on %s, reflinked or copied, into a new clone and over an old one', async (_name, mount) => {
    const base = tempDir(mount);
    const repo = timedRepo(base);
    const store = await SnapshotStore.open(join(base, 'store'));
    const snap = await store.capture({ source: repo, copy: ROOTS, keepTimes: true });
    const recorded = new Map(snap.entries.map((e) => [e.path, e.mtime_ns]));
    expect([...recorded]).toEqual([
      ['nested', undefined],
      ['nested/deeper', undefined],
      ...[...TIMES].sort(([a], [b]) => (a < b ? -1 : 1)).map(([p, ns]) => [p, String(ns)]),
    ]);
    // The store keeps its own times (its files are shared between snapshots); the manifest's are the clone's. On btrfs a
    // directory root is a subvolume that shares no file and is snapshotted whole into the clone: it holds the recorded times.
    if (_name === 'btrfs') expect(mtime(join(snap.root, 'copy/src/a.txt'))).toBe(1_600_000_000_123_456_789n);
    else expect(mtime(join(snap.root, 'copy/src/a.txt'))).not.toBe(1_600_000_000_123_456_789n);
    expect(await snap.verify()).toEqual({ entries: 13, bytes: snap.totalBytes });
    for (const reflink of ['auto', 'never'] as const) {
      const clone = join(base, `clone-${reflink}`);
      // Twice: into an empty clone (each root renamed in), then over the first (each root exchanged with the old one).
      for (let round = 0; round < 2; round++) {
        // Without the first round's ledger: materialized whole again (with it, a reset; a snapshotted clone on btrfs keeps none).
        if (round === 1) rmSync(join(base, 'store/clones'), { recursive: true, force: true });
        const report = await snap.materialize(clone, { reflink, createClone: true });
        expect([report.files, report.directories]).toEqual([6, 7]);
        expect(TIMES.map(([rel]) => [rel, mtime(join(clone, rel))])).toEqual(TIMES);
        expect(await snap.checkClone(clone)).toMatchObject({ ok: true, changed: [] });
      }
      expect(readFileSync(join(clone, 'src/deep/er/x.bin'))).toEqual(Buffer.alloc(70_000, 7));
    }
    await store.close();
  });

  it('sets each directory\'s time after its last child is made, each file\'s after its bytes, and only through fds or without following a link', () => {
    const base = tempDir();
    const repo = timedRepo(base);
    const store = SnapshotStore.openSync(join(base, 'store'));
    const snap = store.captureSync({ source: repo, copy: ROOTS, keepTimes: true });
    const log: string[] = [];
    const ino = (fd: number): string => String(S.sys.fstat(fd).ino);
    const sys = wrapSys({
      mkdirat: (orig) => (dirfd, path, mode) => {
        orig(dirfd, path, mode);
        log.push(`make in ${ino(dirfd)}`);
      },
      openat: (orig) => (dirfd, path, flags, mode) => {
        const fd = orig(dirfd, path, flags, mode);
        if ((flags & S.O_CREAT) !== 0) log.push(`make in ${ino(dirfd)}`, `file ${ino(fd)}`);
        return fd;
      },
      pwrite: (orig) => (fd, buf, off, len, pos) => {
        log.push(`write ${ino(fd)}`);
        return orig(fd, buf, off, len, pos);
      },
      futimens: (orig) => (fd, as, an, ms, mn) => {
        log.push(`time ${ino(fd)}`);
        orig(fd, as, an, ms, mn);
      },
      utimensat: (orig) => (dirfd, path, as, an, ms, mn, flags) => {
        log.push(`root time ${String(path)} ${flags === S.AT_SYMLINK_NOFOLLOW ? 'nofollow' : 'FOLLOWS'}`);
        orig(dirfd, path, as, an, ms, mn, flags);
      },
    });
    const clone = join(base, 'clone');
    new Snapshot(snap.root, snap.toJSON(), { sys }).materializeSync(clone, { createClone: true, reflink: 'never' });
    const timed = log.filter((l) => l.startsWith('time ')).map((l) => l.slice(5));
    // 6 files and the 5 directories at or inside roots (not the implicit parents nested, nested/deeper), once each.
    expect(new Set(timed).size).toBe(11);
    expect(timed).toHaveLength(11);
    for (const inode of timed) {
      const at = log.indexOf(`time ${inode}`);
      expect(log.slice(at + 1).filter((l) => l === `make in ${inode}` || l === `write ${inode}`)).toEqual([]);
    }
    // Written files were written before their time was set.
    expect(log.indexOf(`time ${String(lstatSync(join(clone, 'src/a.txt')).ino)}`)).toBeGreaterThan(log.indexOf(`write ${String(lstatSync(join(clone, 'src/a.txt')).ino)}`));
    // The roots again once they are in the clone, by name from their directory, never following a link.
    expect(log.filter((l) => l.startsWith('root time'))).toEqual(['root time src nofollow', 'root time tool.sh nofollow', 'root time root nofollow']);
    expect(TIMES.map(([rel]) => [rel, mtime(join(clone, rel))])).toEqual(TIMES);
    store.closeSync();
  });

  it('a root replaced by a symlink before its time is set gets the link\'s own time: the link\'s target is never touched', () => {
    const base = tempDir();
    const repo = timedRepo(base);
    const outside = join(base, 'outside');
    writeTree(outside, { 'target.txt': 'not the clone\'s', 'dir/inner': 'x' });
    setMtime(join(outside, 'target.txt'), 42n);
    setMtime(join(outside, 'dir'), 43n);
    const store = SnapshotStore.openSync(join(base, 'store'));
    const snap = store.captureSync({ source: repo, copy: ROOTS, keepTimes: true });
    const clone = join(base, 'clone');
    mkdirSync(clone);
    const swapped: Record<string, string> = { 'tool.sh': join(outside, 'target.txt'), src: join(outside, 'dir') };
    const sys = wrapSys({
      utimensat: (orig) => (dirfd, path, as, an, ms, mn, flags) => {
        const target = swapped[String(path)];
        if (target !== undefined) {
          renameSync(join(clone, String(path)), join(clone, `${String(path)}.moved`));
          symlinkSync(target, join(clone, String(path)));
        }
        orig(dirfd, path, as, an, ms, mn, flags);
      },
    });
    new Snapshot(snap.root, snap.toJSON(), { sys }).materializeSync(clone);
    expect([mtime(join(outside, 'target.txt')), mtime(join(outside, 'dir'))]).toEqual([42n, 43n]);
    expect([readlinkSync(join(clone, 'tool.sh')), mtime(join(clone, 'tool.sh'))]).toEqual([join(outside, 'target.txt'), 1_234_567_890_987_654_321n]);
    expect([readlinkSync(join(clone, 'src')), mtime(join(clone, 'src'))]).toEqual([join(outside, 'dir'), 1_650_000_000_000_000_009n]);
    expect(readFileSync(join(outside, 'target.txt'), 'utf8')).toBe('not the clone\'s');
    store.closeSync();
  });

  it('checkClone reports a file or directory whose mtime changed, bytes or not; a snapshot without times ignores them', async () => {
    const base = tempDir();
    const repo = timedRepo(base);
    const store = await SnapshotStore.open(join(base, 'store'));
    const snap = await store.capture({ source: repo, copy: ROOTS, keepTimes: true });
    const plain = await store.capture({ source: repo, copy: ROOTS });
    const clone = join(base, 'clone');
    await snap.materialize(clone, { createClone: true });
    setMtime(join(clone, 'src/a.txt'), 1_600_000_000_123_456_790n);
    setMtime(join(clone, 'tool.sh'), 0n);
    expect(await snap.checkClone(clone)).toMatchObject({ ok: false, added: [], removed: [], changed: ['src/a.txt', 'tool.sh'] });
    setMtime(join(clone, 'src/a.txt'), 1_600_000_000_123_456_789n);
    setMtime(join(clone, 'tool.sh'), 1_234_567_890_987_654_321n);
    expect(await snap.checkClone(clone)).toMatchObject({ ok: true, changed: [] });
    setMtime(join(clone, 'src/deep'), 1n);
    writeFileSync(join(clone, 'src/hollow/new'), 'n');
    expect(await snap.checkClone(clone)).toMatchObject({ ok: false, added: ['src/hollow/new'], removed: [], changed: ['src/deep', 'src/hollow'] });
    // The same clone as bytes: a snapshot that keeps no times sees only the new file.
    expect(await plain.checkClone(clone)).toMatchObject({ ok: false, added: ['src/hollow/new'], removed: [], changed: [] });
    await store.close();
  });

  it('off, nothing changes: the seed\'s manifest and digests, no field, no time call; on, the digests pin the times', async () => {
    const base = tempDir();
    const repo = join(base, 'repo');
    writeTree(repo, { one: '1', two: '2' });
    setMtime(join(repo, 'one'), 1_600_000_000_123_456_789n);
    setMtime(join(repo, 'two'), -1_000_000_001n);
    const store = await SnapshotStore.open(join(base, 'store'));
    const snap = await store.capture({ source: repo, copy: ['one', 'two'] });
    // The seed's golden manifest digest (DESIGN.md), whatever the times.
    expect(snap.manifestDigest).toBe('9ae5789c2ed0b9aac154a385a78feda0255b76213fd2be5f2022e06e48b5e31e');
    expect(snap.entries.map((e) => Object.keys(e).sort())).toEqual([0, 1].map(() => ['kind', 'link_target', 'mode', 'path', 'sha256', 'size']));
    expect(readFileSync(join(snap.root, 'manifest.json'), 'utf8')).not.toContain('mtime');
    let calls = 0;
    const counting = wrapSys({
      futimens: (orig) => (...args) => {
        calls++;
        orig(...args);
      },
      utimensat: (orig) => (...args) => {
        calls++;
        orig(...args);
      },
    });
    new Snapshot(snap.root, snap.toJSON(), { sys: counting }).materializeSync(join(base, 'clone'), { createClone: true });
    expect(calls).toBe(0);
    const timed = await store.capture({ source: repo, copy: ['one', 'two'], keepTimes: true });
    // sha256 of Python's json.dumps(entries, sort_keys=True, separators=(",", ":")) for the same two entries with their mtime_ns.
    expect(timed.manifestDigest).toBe('33b17c03310ad10094e89d13ed94d2f13188470782c14511793bef6fdcfe805c');
    expect(readFileSync(join(timed.root, 'manifest.json'), 'utf8')).toContain('"mode":0,"mtime_ns":"-1000000001","path":"two"');
    expect(timed.digest).not.toBe(snap.digest);
    // Loaded again, its document (written from the packed table) proves the same digest from its parsed entries.
    const other = SnapshotStore.openSync(join(base, 'store'));
    expect(other.get(timed.digest).toJSON()).toEqual(timed.toJSON());
    other.closeSync();
    // Unchanged times, the same digest: the snapshot already stored is reused.
    expect((await store.capture({ source: repo, copy: ['one', 'two'], keepTimes: true })).captureReport).toMatchObject({ reused: true });
    setMtime(join(repo, 'two'), -1_000_000_000n);
    expect((await store.capture({ source: repo, copy: ['one', 'two'], keepTimes: true })).digest).not.toBe(timed.digest);
    await store.close();
  });

  it('a file whose bytes are unchanged but whose mtime moved is read again, not reused from the stat cache, and its new mtime recorded', async () => {
    const base = tempDir();
    const repo = timedRepo(base);
    // Its records made past the racy rule's 2 s: the cache may trust what it records.
    const store = await SnapshotStore.open(join(base, 'store'), SETTLED);
    const first = await store.capture({ source: repo, copy: ROOTS, keepTimes: true });
    const again = await store.capture({ source: repo, copy: ROOTS, keepTimes: true });
    expect([again.digest, again.captureReport]).toEqual([first.digest, { files: 6, reusedFiles: 6, built: false, reused: true }]);
    setMtime(join(repo, 'src/a.txt'), 1_600_000_000_123_456_000n);
    const moved = await store.capture({ source: repo, copy: ROOTS, keepTimes: true });
    expect(moved.captureReport).toEqual({ files: 6, reusedFiles: 5, built: true, reused: false });
    expect(moved.entries.find((e) => e.path === 'src/a.txt')?.mtime_ns).toBe('1600000000123456000');
    expect(moved.entries.find((e) => e.path === 'src/old.txt')?.mtime_ns).toBe('-1000000001');
    const clone = join(base, 'clone');
    await moved.materialize(clone, { createClone: true });
    expect(mtime(join(clone, 'src/a.txt'))).toBe(1_600_000_000_123_456_000n);
    expect(await moved.verify()).toMatchObject({ entries: 13 });
    await store.close();
  });

  it('mounts keep no times, and a value that is not a boolean is refused', async () => {
    const base = tempDir();
    const repo = timedRepo(base);
    writeTree(repo, { 'deps/pkg/index.js': 'i' });
    const store = await SnapshotStore.open(join(base, 'store'));
    const snap = await store.capture({ source: repo, copy: ['src'], mounts: [{ source: 'deps', target: 'node_modules' }], keepTimes: true });
    expect(snap.mounts[0]!.entries.map((e) => e.mtime_ns)).toEqual([undefined, undefined, undefined, undefined]);
    expect(snap.entries.every((e) => e.mtime_ns !== undefined)).toBe(true);
    expectError(() => store.captureSync({ source: repo, copy: ['src'], keepTimes: 1 as unknown as boolean }), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: /^The "options\.keepTimes" property must be of type boolean\./,
    });
    expect(existsSync(join(base, 'clone'))).toBe(false);
    await store.close();
  });
});

describe('times 64-bit nanoseconds cannot hold (after 2262, before 1677)', () => {
  it('are captured as any other when times are not kept (the manifest the same as for another mtime); keepTimes refuses them with SEAL_LIMIT naming the entry, nothing stored', async () => {
    const base = tempDir('/dev/shm');
    writeTree(base, { 'repo/src/far.txt': 'far', 'repo/src/old/past.txt': 'past', 'twin/src/far.txt': 'far', 'twin/src/old/past.txt': 'past' });
    setMtime(join(base, 'repo/src/far.txt'), 10n ** 19n); // 2286
    setMtime(join(base, 'repo/src/old'), -(10n ** 19n)); // 1653
    setMtime(join(base, 'repo/src'), 10n ** 19n);
    const store = await SnapshotStore.open(join(base, 'store'));
    const snap = await store.capture({ source: join(base, 'repo'), copy: ['src'] });
    const twin = store.captureSync({ source: join(base, 'twin'), copy: ['src'] });
    expect(snap.entries.map((e) => [e.path, e.size])).toEqual([['src', 0], ['src/far.txt', 3], ['src/old', 0], ['src/old/past.txt', 4]]);
    expect(snap.manifestDigest).toBe(twin.manifestDigest);
    const clone = join(base, 'clone');
    mkdirSync(clone);
    await snap.materialize(clone);
    expect(readFileSync(join(clone, 'src/far.txt'), 'utf8')).toBe('far');
    const before = readdirSync(join(base, 'store/snapshots')).sort();
    for (const [path, shown] of [['repo/src/far.txt', 'src/far.txt'], ['repo/src/old', 'src/old']] as const) {
      const source = join(base, 'other');
      rmSync(source, { recursive: true, force: true });
      writeTree(source, { 'src/far.txt': 'far', 'src/old/past.txt': 'past' });
      setMtime(join(source, shown), lstatSync(join(base, path), { bigint: true }).mtimeNs);
      expectError(() => store.captureSync({ source, copy: ['src'], keepTimes: true }), {
        code: 'SEAL_LIMIT',
        message: `mtime outside what keepTimes records (1677-09-21 to 2262-04-11, nanoseconds in 64 bits): ${shown}: set it (touch) or capture without keepTimes`,
        path: shown,
      });
      await expectError(async () => store.capture({ source, copy: ['src'], keepTimes: true }), { code: 'SEAL_LIMIT', path: shown });
    }
    expect(readdirSync(join(base, 'store/snapshots')).sort()).toEqual(before);
    expect(readdirSync(join(base, 'store/tmp'))).toEqual([]);
    await store.close();
  });

  it('on a filesystem that keeps whole seconds (ext4 with 128-byte inodes), a clone\'s kept times are the recorded ones cut to the second: diff and checkClone find nothing, reset changes nothing (a fresh clone read as changed)', async () => {
    if (process.geteuid?.() !== 0) return;
    const base = tempDir();
    const img = join(base, 'small.img');
    const mnt = join(base, 'mnt');
    mkdirSync(mnt);
    execFileSync('truncate', ['-s', '64M', img]);
    execFileSync('mkfs.ext4', ['-q', '-F', '-I', '128', img]);
    execFileSync('mount', ['-o', 'loop', img, mnt]);
    try {
      writeTree(join(base, 'repo'), { 'src/a.txt': 'a', 'src/lib/b.txt': 'b' });
      for (const [p, ns] of [['src/a.txt', 1_600_000_000_123_456_789n], ['src/lib/b.txt', 1_600_000_001_987_654_321n], ['src/lib', 1_600_000_002_500_000_000n], ['src', 1_600_000_003_000_000_001n]] as const) setMtime(join(base, 'repo', p), ns);
      const store = await SnapshotStore.open(join(base, 'store'));
      const snap = await store.capture({ source: join(base, 'repo'), copy: ['src'], keepTimes: true });
      const clone = join(mnt, 'clone');
      await snap.materialize(clone, { createClone: true });
      expect(mtime(join(clone, 'src/a.txt'))).toBe(1_600_000_000_000_000_000n);
      expect(mtime(join(clone, 'src'))).toBe(1_600_000_003_000_000_000n);
      expect(await snap.diff(clone)).toMatchObject({ ok: true, changed: [] });
      expect(await snap.diff(clone, { verify: true })).toMatchObject({ ok: true, changed: [] });
      expect((await snap.checkClone(clone)).ok).toBe(true);
      expect(await snap.reset(clone)).toMatchObject({ changed: [], removed: [], added: [] });
      // A time moved by a second or more is still a change.
      setMtime(join(clone, 'src/lib'), 1_600_000_001_000_000_000n);
      expect((await snap.diff(clone)).changed).toEqual(['src/lib']);
      await store.close();
    } finally {
      execFileSync('umount', [mnt]);
    }
  });
});
