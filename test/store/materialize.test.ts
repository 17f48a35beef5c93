// materialize.test.ts: clones from snapshots: exact-root publish, budgets, hazards in the clone, reports, mount points.
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, readdirSync, rmSync, statSync, statfsSync, symlinkSync, truncateSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, Snapshot, SnapshotStore, type MaterializeOptions } from '../../dist/index.js';
import { SEEK_DATA, SEEK_HOLE, sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, failOnce, mkfifo, reflinkMount, tempDir, unprivilegedPass, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const MiB = 1 << 20;

function fixture(base: string | undefined, tree: Record<string, string | Buffer | null>, copy: string[], mounts = false): { snap: Snapshot; store: SnapshotStore; work: string } {
  const work = tempDir(base);
  const repo = join(work, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
  const snap = store.captureSync({ source: repo, copy, ...(mounts ? { mounts: [{ source: 'node_modules', target: 'node_modules' }] } : {}) });
  return { snap, store, work };
}

/** The filesystems of the store and the clone below work, as SEAL_NO_REFLINK names them (both below one directory here). */
function fsPair(work: string): string {
  const names: Record<number, string> = { 0xef53: 'ext4', 0x58465342: 'xfs', 0x9123683e: 'btrfs', 0x01021994: 'tmpfs', 0x794c7630: 'overlayfs' };
  const type = statfsSync(work).type;
  const name = names[type] ?? `0x${type.toString(16)}`;
  return `store on ${name}, clone on ${name}`;
}

function clone(work: string, tree: Record<string, string | Buffer | null> = {}): string {
  const dir = join(work, `clone-${Math.random().toString(16).slice(2)}`);
  mkdirSync(dir);
  writeTree(dir, tree);
  return dir;
}

/** Stages or markers left inside the clone or beside it. */
function stagesLeft(cloneDir: string): string[] {
  const inside = existsSync(cloneDir) && statSync(cloneDir).isDirectory() ? readdirSync(cloneDir) : [];
  return [...readdirSync(dirname(cloneDir)), ...inside].filter((n) => n.startsWith('.treeseal-materializ'));
}

function tree(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const path = rel === '' ? name : `${rel}/${name}`;
    const st = lstatSync(join(dir, path));
    out.push(`${path}${st.isDirectory() ? '/' : st.isSymbolicLink() ? '@' : ''}`);
    if (st.isDirectory()) out.push(...tree(dir, path));
  }
  return out;
}

describe('materialize on this filesystem (buffered fallback)', () => {
  it('reuses one snapshot across two clones with writes isolated and inodes distinct', async () => {
    const { snap, store, work } = fixture(undefined, { 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta' }, ['src']);
    const one = clone(work);
    const two = clone(work);
    const r1 = snap.materializeSync(one);
    const r2 = await snap.materialize(two);
    expect(r1).toMatchObject({ files: 2, directories: 2, reflinked: 0, copied: 2, bytesCopied: 9 });
    expect(r1.copyReason).toMatch(/^the filesystems cannot share extents \(store on \w+, clone on \w+\)$/);
    expect(r2).toMatchObject({ files: 2, directories: 2, copied: 2 });
    expect(r1.elapsedMs).toBeGreaterThanOrEqual(0);
    writeFileSync(join(one, 'src/a.ts'), 'changed in clone one');
    expect(readFileSync(join(two, 'src/a.ts'), 'utf8')).toBe('alpha');
    expect(readFileSync(join(snap.root, 'copy/src/a.ts'), 'utf8')).toBe('alpha');
    const inodes = [one, two, join(snap.root, 'copy')].map((d) => statSync(join(d, 'src/lib/b.ts')).ino);
    expect(new Set(inodes).size).toBe(3);
    expect(statSync(join(two, 'src/lib/b.ts')).mode & 0o7777).toBe(0o600);
    expect(statSync(join(two, 'src/lib')).mode & 0o7777).toBe(0o700);
    expect(stagesLeft(one)).toEqual([]);
    store.closeSync();
  });

  it('in a setgid clone (a shared project directory) every directory is still 0700, and the clone verifies (the kernel made them 02700: checkClone failed a fresh clone)', async () => {
    const { snap, store, work } = fixture(undefined, { 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta' }, ['src']);
    const one = clone(work);
    chmodSync(one, 0o2700);
    await snap.materialize(one);
    expect([statSync(join(one, 'src')).mode & 0o7777, statSync(join(one, 'src/lib')).mode & 0o7777]).toEqual([0o700, 0o700]);
    expect((await snap.checkClone(one)).ok).toBe(true);
    expect((await snap.diff(one, { verify: true })).changed).toEqual([]);
    rmSync(join(one, 'src/lib'), { recursive: true });
    expect((await snap.reset(one)).removed).toEqual(['src/lib', 'src/lib/b.ts']);
    expect(statSync(join(one, 'src/lib')).mode & 0o7777).toBe(0o700);
    expect((await snap.checkClone(one)).ok).toBe(true);
    store.closeSync();
  });

  it('the buffered budget: exactly at the limit passes; over it fails before publish and cleans up', () => {
    const { snap, store, work } = fixture(undefined, { 'a/x': Buffer.alloc(1000, 1), 'a/y': Buffer.alloc(24, 2) }, ['a']);
    const ok = clone(work);
    expect(snap.materializeSync(ok, { fallbackBytes: 1024 }).bytesCopied).toBe(1024);
    const over = clone(work, { 'a/old': 'keep' });
    expectError(() => snap.materializeSync(over, { fallbackBytes: 1023 }), { code: 'SEAL_NO_REFLINK', message: `filesystem cannot reflink the snapshot (${fsPair(work)}) and the buffered fallback limit would be exceeded (1023 bytes; fallbackBytes or --fallback-bytes raises it): a/y`, unchanged: dirname(over) });
    expect(tree(over)).toEqual(['a/', 'a/old']);
    store.closeSync();
  });

  it('a 20 MiB file fits the default budget', () => {
    const big = Buffer.alloc(20 * MiB, 3);
    big.write('end', 20 * MiB - 3);
    const { snap, store, work } = fixture(undefined, { 'index/graph.bin': big }, ['index/graph.bin']);
    const dir = clone(work);
    expect(snap.materializeSync(dir)).toMatchObject({ files: 1, copied: 1, bytesCopied: 20 * MiB });
    expect(Buffer.compare(readFileSync(join(dir, 'index/graph.bin')), big)).toBe(0);
    store.closeSync();
  });

  it("'always' on a filesystem that cannot clone is SEAL_NO_REFLINK with nothing published", async () => {
    const { snap, store, work } = fixture(undefined, { 'a/x': 'x' }, ['a']);
    const dir = clone(work);
    expectError(() => snap.materializeSync(dir, { reflink: 'always' }), { code: 'SEAL_NO_REFLINK', message: `filesystem cannot reflink the snapshot (${fsPair(work)}): a/x`, unchanged: dirname(dir) });
    expect(tree(dir)).toEqual([]);
    expectError(() => snap.materializeSync(dir, { reflink: 'sometimes' as never }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.reflink' must be 'auto', 'always' or 'never'. Received 'sometimes'",
      unchanged: dirname(dir),
    });
    expectError(() => snap.materializeSync(dir, { fallbackBytes: -1 }), {
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.fallbackBytes" is out of range. It must be >= 0 && <= 9007199254740991. Received -1',
      unchanged: dirname(dir),
    });
    // The same errors, with their class and code, from the worker thread.
    await expectError(async () => snap.materialize(dir, { reflink: 'sometimes' as never }), { code: 'ERR_INVALID_ARG_VALUE', unchanged: dirname(dir) });
    await expectError(async () => snap.materialize(dir, { fallbackBytes: 1.5 }), { code: 'ERR_OUT_OF_RANGE', unchanged: dirname(dir) });
    store.closeSync();
  });

  it('removes stale children exactly and replaces type conflicts both ways', () => {
    const { snap, store, work } = fixture(undefined, { 'root/keep': 'new', 'root/sub/f': 'f', 'file': 'now a file', 'dir/inner': 'now a dir' }, ['root', 'file', 'dir']);
    const dir = clone(work, { 'root/keep': 'old', 'root/stale': 'x', 'root/stale-dir/deep/y': 'y', 'file/was-dir': 'z', dir: 'was a file', untouched: 'u' });
    snap.materializeSync(dir);
    expect(tree(dir)).toEqual(['dir/', 'dir/inner', 'file', 'root/', 'root/keep', 'root/sub/', 'root/sub/f', 'untouched']);
    expect(readFileSync(join(dir, 'root/keep'), 'utf8')).toBe('new');
    expect(readFileSync(join(dir, 'file'), 'utf8')).toBe('now a file');
    store.closeSync();
  });

  it('creates missing parents and replaces a regular file standing where a parent must be', () => {
    const { snap, store, work } = fixture(undefined, { 'assets/index': 'original' }, ['assets/index']);
    const dir = clone(work, { assets: 'a file in the way' });
    snap.materializeSync(dir);
    expect(tree(dir)).toEqual(['assets/', 'assets/index']);
    const fresh = clone(work);
    snap.materializeSync(fresh);
    expect(readFileSync(join(fresh, 'assets/index'), 'utf8')).toBe('original');
    store.closeSync();
  });

  it('removes a stale child symlink without following it; the outside canary stays intact', () => {
    const { snap, store, work } = fixture(undefined, { 'root/f': 'new' }, ['root']);
    const outside = join(work, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'canary'), 'alive');
    const dir = clone(work, { 'root/f': 'old' });
    symlinkSync(outside, join(dir, 'root/evil'));
    symlinkSync(join(outside, 'canary'), join(dir, 'root/evil-file'));
    snap.materializeSync(dir);
    expect(tree(dir)).toEqual(['root/', 'root/f']);
    expect(readFileSync(join(outside, 'canary'), 'utf8')).toBe('alive');
    expect(readdirSync(outside)).toEqual(['canary']);
    store.closeSync();
  });

  it('refuses a symlinked clone root, writing nothing; renames out whole, never followed, a link or a FIFO standing above a root or at its place', () => {
    const { snap, store, work } = fixture(undefined, { 'a/b/c': 'x', 'z': 'z' }, ['a/b', 'z']);
    const real = clone(work);
    const link = join(work, 'clone-link');
    symlinkSync(real, link);
    expectError(() => snap.materializeSync(link), { code: 'SEAL_SYMLINK', message: `clone must be a real directory, not a symlink: ${link}`, unchanged: dirname(link) });
    expect(readdirSync(real)).toEqual([]);

    const outside = join(work, 'outside');
    mkdirSync(outside);
    // A link above a root (the agent's `rm -rf a && ln -s /elsewhere a`): renamed out and unlinked, a directory made in its place.
    const withParentLink = clone(work);
    symlinkSync(outside, join(withParentLink, 'a'));
    mkdirSync(join(outside, 'b'));
    writeFileSync(join(outside, 'b/c'), 'the caller\'s');
    expect(snap.materializeSync(withParentLink)).toMatchObject({ files: 2, reset: false });
    expect(tree(withParentLink)).toEqual(['a/', 'a/b/', 'a/b/c', 'z']);
    expect(readFileSync(join(withParentLink, 'a/b/c'), 'utf8')).toBe('x');
    expect(tree(outside)).toEqual(['b/', 'b/c']);
    expect(readFileSync(join(outside, 'b/c'), 'utf8')).toBe('the caller\'s');
    expect(stagesLeft(withParentLink)).toEqual([]);
    expect(snap.checkCloneSync(withParentLink)).toMatchObject({ ok: true });
    rmSync(join(outside, 'b'), { recursive: true });

    // A link at a root's own place is renamed out whole and removed, never followed (one a materialize of a root that was a link left there, say).
    const withTargetLink = clone(work, { 'a/keep': 'k' });
    symlinkSync(outside, join(withTargetLink, 'a/b'));
    writeFileSync(join(outside, 'mine'), 'the caller\'s');
    snap.materializeSync(withTargetLink);
    expect(lstatSync(join(withTargetLink, 'a/b')).isDirectory()).toBe(true);
    expect(readdirSync(outside)).toEqual(['mine']);
    expect(snap.checkCloneSync(withTargetLink)).toMatchObject({ ok: true });
    unlinkSync(join(outside, 'mine'));

    // A FIFO at a root's place and one above a root: renamed out whole, never opened (an open would block).
    const withFifo = clone(work);
    mkfifo(join(withFifo, 'z'));
    mkfifo(join(withFifo, 'a'));
    expect(snap.materializeSync(withFifo)).toMatchObject({ files: 2 });
    expect(tree(withFifo)).toEqual(['a/', 'a/b/', 'a/b/c', 'z']);
    expect(readFileSync(join(withFifo, 'z'), 'utf8')).toBe('z');
    expect(stagesLeft(withFifo)).toEqual([]);

    const notDir = join(work, 'plain-file');
    writeFileSync(notDir, '');
    expectError(() => snap.materializeSync(notDir), { code: 'SEAL_BAD_PATH', unchanged: dirname(notDir) });
    expectError(() => snap.materializeSync(join(work, 'missing')), { code: 'SEAL_UNAVAILABLE', unchanged: dirname(join(work, 'missing')) });
    // A missing clone is said with the option that makes it (not by reset, which has none; nor below a missing parent, which it would not make).
    expect(() => snap.materializeSync(join(work, 'missing'))).toThrow(/^clone is unavailable: .*\/missing: ENOENT: .* \(createClone: true makes it\)$/);
    expect(() => snap.resetSync(join(work, 'missing'))).toThrow(/ENOENT: [^(]*$/);
    expect(() => snap.materializeSync(join(work, 'no/missing'))).toThrow(/ENOENT: [^(]*$/);
    store.closeSync();
  });

  it('refuses a clone inside the store, or one whose copy root holds the store, leaving the snapshot intact', async () => {
    const { snap, store, work } = fixture(undefined, { 'store/x': 'one', 'z': 'z' }, ['store', 'z']);
    for (const dir of [join(snap.root, 'copy'), store.root, join(store.root, 'tmp'), work]) {
      const expected = { code: 'SEAL_OVERLAP', message: `clone overlaps the snapshot store: ${dir}`, unchanged: work };
      expectError(() => snap.materializeSync(dir), expected);
      await expectError(async () => snap.materialize(dir), expected);
    }
    expectError(() => snap.mountPoints(join(snap.root, 'copy')), { code: 'SEAL_OVERLAP', unchanged: work });
    await snap.verify();
    store.closeSync();
  });

  it('a tampered snapshot file (size changed) is SEAL_CORRUPT and nothing is published', () => {
    const { snap, store, work } = fixture(undefined, { 'a/x': 'original' }, ['a']);
    const file = join(snap.root, 'copy/a/x');
    chmodSync(file, 0o600);
    truncateSync(file, 3);
    const dir = clone(work);
    expectError(() => snap.materializeSync(dir), { code: 'SEAL_CORRUPT', message: 'snapshot file changed: a/x', path: 'a/x', unchanged: dirname(dir) });
    expect(tree(dir)).toEqual([]);
    store.closeSync();
  });

  it('materializes across devices (store on disk, clone on tmpfs)', () => {
    const { snap, store } = fixture(undefined, { 'a/x': 'cross' }, ['a']);
    const dir = clone(tempDir('/dev/shm'));
    expect(snap.materializeSync(dir)).toMatchObject({ files: 1, copied: 1, reflinked: 0 });
    expect(readFileSync(join(dir, 'a/x'), 'utf8')).toBe('cross');
    store.closeSync();
  });
});

/** mountPoints in a clone where `link` is a symlink to a directory outside: SEAL_SYMLINK, and nothing is made outside. */
function refusedThroughLink(snap: Snapshot, work: string, link: string, message: string): void {
  const outside = join(work, `outside-${link}`);
  mkdirSync(outside);
  const dir = clone(work);
  symlinkSync(outside, join(dir, link));
  expect(() => snap.mountPoints(dir)).toThrow(expect.objectContaining({ code: 'SEAL_SYMLINK', message }));
  expect(readdirSync(outside)).toEqual([]);
}

/** A sparse file of `size` bytes whose only data is `data` at `at`. */
function sparseFile(path: string, size: number, at: number, data: Buffer): void {
  mkdirSync(dirname(path), { recursive: true });
  const fd = openSync(path, 'wx');
  try {
    writeSync(fd, data, 0, data.length, at);
    truncateSync(path, size);
  } finally {
    closeSync(fd);
  }
}

/**
 * The sha256 of `size` bytes that are zeros but for `data` at `at`, computed without a file:
 * what a capture of the sparse file must record.
 */
function sparseSha256(size: number, at: number, data: Buffer): string {
  const hash = createHash('sha256');
  const zeros = Buffer.alloc(MiB);
  const zeroRun = (n: number): void => {
    for (let left = n; left > 0; left -= Math.min(left, MiB)) hash.update(zeros.subarray(0, Math.min(left, MiB)));
  };
  zeroRun(at);
  hash.update(data);
  zeroRun(size - at - data.length);
  return hash.digest('hex');
}

interface Sparse {
  snap: Snapshot;
  store: SnapshotStore;
  work: string;
  size: number;
  at: number;
  data: Buffer;
}

/**
 * A snapshot of one sparse file (`index/graph.bin`, size bytes, 4 KiB of data in the middle)
 * captured on base's filesystem; the recorded sha256 is checked against the content's.
 */
function sparseFixture(base: string | undefined, size: number): Sparse {
  const work = tempDir(base);
  const at = size / 2;
  const data = randomBytes(4096);
  sparseFile(join(work, 'repo/index/graph.bin'), size, at, data);
  // Past the window in which capture proves a just-written file twice (a second read of every byte).
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
  const snap = store.captureSync({ source: join(work, 'repo'), copy: ['index'] });
  expect(snap.entries.find((e) => e.path === 'index/graph.bin')!.sha256).toBe(sparseSha256(size, at, data));
  return { snap, store, work, size, at, data };
}

/** A 1 GiB sparse file's zeros are hashed twice (the capture, and the digest the test expects): on a loaded 2-core machine, more than the default minute. */
const SPARSE_TIMEOUT_MS = 240_000;

/**
 * The clone's copy of the sparse file: its size, no more than a few blocks, and its bytes.
 * Only its data segments are read (SEEK_DATA/SEEK_HOLE, called directly): a hole reads as
 * zeros, and reading a 1 GiB one costs seconds of page cache. Each segment must hold the
 * fixture's data where it lies and zeros elsewhere, and the segments must cover the data.
 */
function sparseCopy(dir: string, { size, at, data }: Sparse): void {
  const path = join(dir, 'index/graph.bin');
  const st = statSync(path);
  expect([st.size, st.blocks * 512 <= 64 * 1024]).toEqual([size, true]);
  const fd = openSync(path, 'r');
  let covered = 0;
  try {
    for (let pos = 0; ; ) {
      let start: number;
      try {
        start = sys.lseek(fd, pos, SEEK_DATA);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENXIO') break;
        throw err;
      }
      const end = sys.lseek(fd, start, SEEK_HOLE);
      const got = Buffer.alloc(end - start);
      expect(readSync(fd, got, 0, got.length, start)).toBe(got.length);
      const want = Buffer.alloc(got.length);
      const from = Math.max(start, at);
      const to = Math.min(end, at + data.length);
      if (from < to) {
        data.copy(want, from - start, from - at, to - at);
        covered += to - from;
      }
      expect(got.equals(want)).toBe(true);
      pos = end;
    }
  } finally {
    closeSync(fd);
  }
  expect(covered).toBe(data.length);
}

describe('sparse files: holes are not copied, and not counted', () => {
  it('the budget and the report count data bytes, for kernel and buffered copies alike', () => {
    const sparse = sparseFixture(undefined, 64 * MiB);
    const { snap, store, work } = sparse;
    for (const reflink of ['auto', 'never'] as const) {
      const dir = clone(work);
      expect(snap.materializeSync(dir, { reflink, fallbackBytes: 4096 })).toMatchObject({ files: 1, copied: 1, bytesCopied: 4096 });
      sparseCopy(dir, sparse);
    }
    const over = clone(work);
    expectError(() => snap.materializeSync(over, { reflink: 'never', fallbackBytes: 4095 }), {
      code: 'SEAL_NO_REFLINK',
      message: `filesystem cannot reflink the snapshot (${fsPair(work)}) and the buffered fallback limit would be exceeded (4095 bytes; fallbackBytes or --fallback-bytes raises it): index/graph.bin`,
      unchanged: dirname(over),
    });
    store.closeSync();
  });

  it('a data segment that reads short, a byte past the size, or a failing lseek, fails the call typed and leaves the clone as it was', () => {
    const { snap, store, work } = sparseFixture(undefined, 64 * MiB);
    const dir = clone(work, { 'index/old': 'o' });
    const short = new Snapshot(snap.root, snap.toJSON(), { sys: wrapSys({ pread: () => () => 0 }) });
    expectError(() => short.materializeSync(dir, { reflink: 'never' }), {
      code: 'SEAL_CORRUPT',
      message: 'snapshot file changed while materializing: index/graph.bin',
      path: 'index/graph.bin',
      unchanged: work,
    });
    // A byte past the recorded size, seen by the buffered copy itself (the file's fstat unchanged).
    const longer = wrapSys({ pread: (orig) => (fd, buf, off, len, pos) => (pos >= 64 * MiB && len > 0 ? 1 : orig(fd, buf, off, len, pos)) });
    expectError(() => new Snapshot(snap.root, snap.toJSON(), { sys: longer }).materializeSync(dir, { reflink: 'never' }), {
      code: 'SEAL_CORRUPT',
      message: 'snapshot file changed while materializing: index/graph.bin',
      path: 'index/graph.bin',
      unchanged: work,
    });
    const { sys, injected } = failOnce('lseek', 'EIO');
    const failing = new Snapshot(snap.root, snap.toJSON(), { sys });
    const err = expectError(() => failing.materializeSync(dir, { reflink: 'never' }), { code: 'SEAL_IO', unchanged: work });
    expect(err.cause).toBe(injected());
    expect(err.message).toMatch(/: EIO: injected, lseek$/);
    expect(readFileSync(join(dir, 'index/old'), 'utf8')).toBe('o');
    store.closeSync();
  });

  const ext4 = reflinkMount('ext4');
  it.skipIf(ext4 === undefined || unprivilegedPass)('ext4: a 1 GiB file holding 4 KiB fits the default budget; auto and never copy 4 KiB and keep the holes', async () => {
    const sparse = sparseFixture(ext4, 1024 * MiB);
    const { snap, store, work } = sparse;
    const one = clone(work);
    expect(snap.materializeSync(one)).toMatchObject({ files: 1, reflinked: 0, copied: 1, bytesCopied: 4096 });
    sparseCopy(one, sparse);
    const two = clone(work);
    expect(await snap.materialize(two, { reflink: 'never' })).toMatchObject({ files: 1, copied: 1, bytesCopied: 4096 });
    sparseCopy(two, sparse);
    store.closeSync();
  }, SPARSE_TIMEOUT_MS);

  const xfs = reflinkMount('xfs');
  it.skipIf(xfs === undefined || unprivilegedPass)('xfs: never copies the 4 KiB of a 1 GiB file and keeps the holes (whatever the budget)', () => {
    const sparse = sparseFixture(xfs, 1024 * MiB);
    const { snap, store, work } = sparse;
    const dir = clone(work);
    expect(snap.materializeSync(dir, { reflink: 'never', fallbackBytes: 2048 * MiB })).toMatchObject({ files: 1, reflinked: 0, copied: 1, bytesCopied: 4096 });
    sparseCopy(dir, sparse);
    store.closeSync();
  }, SPARSE_TIMEOUT_MS);

  it.skipIf(xfs === undefined || ext4 === undefined)('a store on xfs, a clone on ext4: SEAL_NO_REFLINK names both filesystems, and the option that raises the budget', () => {
    const { snap, store } = fixture(xfs, { 'a/x': 'xyz' }, ['a']);
    const dir = clone(tempDir(ext4));
    expectError(() => snap.materializeSync(dir, { reflink: 'always' }), {
      code: 'SEAL_NO_REFLINK',
      message: 'filesystem cannot reflink the snapshot (store on xfs, clone on ext4): a/x',
      path: 'a/x',
      unchanged: dir,
    });
    expectError(() => snap.materializeSync(dir, { fallbackBytes: 2 }), {
      code: 'SEAL_NO_REFLINK',
      message: 'filesystem cannot reflink the snapshot (store on xfs, clone on ext4) and the buffered fallback limit would be exceeded (2 bytes; fallbackBytes or --fallback-bytes raises it): a/x',
      path: 'a/x',
      unchanged: dir,
    });
    expect(snap.materializeSync(dir, { fallbackBytes: 3 })).toMatchObject({ files: 1, reflinked: 0, copied: 1, bytesCopied: 3 });
    store.closeSync();
  });
});

describe('mount points', () => {
  it('lists frozen payloads as read-only sources and prepares mount points in the clone', () => {
    const { snap, store, work } = fixture(undefined, { 'node_modules/p/index.js': '1', 'a/x': 'x' }, ['a'], true);
    const dir = clone(work);
    const mounts = snap.mountPoints(dir);
    expect(mounts).toEqual([{ source: join(snap.root, 'mounts/00000/payload'), target: '/workspace/node_modules', readOnly: true, tmpfs: ['/workspace/node_modules/.vite-temp'] }]);
    expect(statSync(join(dir, 'node_modules')).isDirectory()).toBe(true);
    expect(snap.mountPoints(dir, { workspace: '/w/' })[0]!.target).toBe('/w/node_modules');
    refusedThroughLink(snap, work, 'node_modules', 'mount target cannot be a symlink: node_modules');
    store.closeSync();
  });

  it('refuses a symlink parent of a mount target', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'deps/f': 'x' });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'deps', target: 'lib/deps' }] });
    refusedThroughLink(snap, work, 'lib', 'mount target has a symlink parent: lib/deps');
    store.closeSync();
  });
});

for (const kind of ['xfs', 'btrfs'] as const) {
  const mount = reflinkMount(kind);
  describe.skipIf(mount === undefined)(`materialize on ${kind} (real reflink)`, () => {
    it('reflinks every file, and clones stay independent', () => {
      const big = Buffer.alloc(4 * MiB, 5);
      const { snap, store, work } = fixture(mount, { 'src/a': 'alpha', 'src/b/c': 'gamma', 'index/graph.bin': big }, ['src', 'index']);
      const one = clone(work);
      const report = snap.materializeSync(one, { reflink: 'always' });
      // On btrfs both directory roots are one snapshot each of their subvolume in the store (see btrfs.test.ts).
      const shared = kind === 'btrfs' ? { reflinked: 0, snapshotted: 2 } : { reflinked: 3, snapshotted: 0 };
      expect(report).toMatchObject({ files: 3, ...shared, copied: 0, bytesCopied: 0 });
      writeFileSync(join(one, 'index/graph.bin'), 'rewritten');
      expect(Buffer.compare(readFileSync(join(snap.root, 'copy/index/graph.bin')), big)).toBe(0);
      const two = clone(work);
      // Copies asked for ('never') have no copyReason; neither has an auto that cloned every file.
      const copied = snap.materializeSync(two, { reflink: 'never' });
      expect(copied).toMatchObject({ files: 3, reflinked: 0, copied: 3, bytesCopied: 4 * MiB + 10 });
      expect(copied.copyReason).toBeUndefined();
      expect(Buffer.compare(readFileSync(join(two, 'index/graph.bin')), big)).toBe(0);
      // A reflink budget does not apply to cloned bytes.
      const three = clone(work);
      const auto = snap.materializeSync(three, { fallbackBytes: 0 });
      expect(auto).toMatchObject(shared);
      expect(auto.copyReason).toBeUndefined();
      store.closeSync();
    });

    it('capture clones into the store and records the same digests as the buffered path', () => {
      const tree = { 'd/a': Buffer.alloc(3 * MiB + 1, 9), 'd/b': 'small', 'd/e': '' };
      const onXfs = fixture(mount, tree, ['d']);
      const onDisk = fixture(undefined, tree, ['d']);
      expect(onXfs.snap.manifestDigest).toBe(onDisk.snap.manifestDigest);
      onXfs.store.closeSync();
      onDisk.store.closeSync();
    });
  });
}

describe('renameat2 refused by the filesystem', () => {
  it('falls back to remove-then-rename when RENAME_EXCHANGE / RENAME_NOREPLACE give EINVAL', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'root/f': 'new', other: 'o' });
    const refusing = wrapSys({
      renameat2: (orig) => (a, b, c, d, flags) => {
        if (flags !== 0) throw Object.assign(new Error('EINVAL: invalid argument, renameat2'), { code: 'EINVAL', errno: -22, syscall: 'renameat2' });
        orig(a, b, c, d, flags);
      },
    });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const data = store.captureSync({ source: repo, copy: ['root', 'other'] });
    const snap = new Snapshot(data.root, data.toJSON(), { sys: refusing });
    const dir = clone(work, { 'root/stale': 's' });
    expect(snap.materializeSync(dir)).toMatchObject({ files: 2 });
    expect(tree(dir)).toEqual(['other', 'root/', 'root/f']);
    expect(stagesLeft(dir)).toEqual([]);
    store.closeSync();
  });
});

describe('mount point collisions', () => {
  it('a mount target of another type in the clone is SEAL_COLLISION, and the file is kept', () => {
    const { snap, store, work } = fixture(undefined, { 'node_modules/p/index.js': '1', 'a/x': 'x' }, ['a'], true);
    const dir = clone(work, { node_modules: 'a file' });
    expect(() => snap.mountPoints(dir)).toThrow(expect.objectContaining({ code: 'SEAL_COLLISION', message: 'mount target exists with another type: node_modules' }));
    expect(readFileSync(join(dir, 'node_modules'), 'utf8')).toBe('a file');
    store.closeSync();
  });

  /** A snapshot with two mounts: web/node_modules (first) and api/node_modules. */
  function twoMounts(): { snap: Snapshot; store: SnapshotStore; work: string } {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'web/node_modules/p/i.js': '1', 'api/node_modules/q/i.js': '2', 'a/x': 'x' });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const mounts = ['web/node_modules', 'api/node_modules'].map((m) => ({ source: m, target: m }));
    return { snap: store.captureSync({ source: repo, copy: ['a'], mounts }), store, work };
  }

  it('a regular file where a target\'s parent directory must be is SEAL_COLLISION, kept, and no target is made', () => {
    const { snap, store, work } = twoMounts();
    const dir = clone(work, { api: 'a file where a directory must be' });
    expectError(() => snap.mountPoints(dir), {
      code: 'SEAL_COLLISION',
      message: 'mount target parent exists with another type: api/node_modules',
      path: 'api/node_modules',
      unchanged: dir,
    });
    expect(readFileSync(join(dir, 'api'), 'utf8')).toBe('a file where a directory must be');
    store.closeSync();
  });

  it('the targets are made, parents included, when nothing is in the way', () => {
    const { snap, store, work } = twoMounts();
    const dir = clone(work, { 'web/keep': 'k' });
    expect(snap.mountPoints(dir).map((m) => m.target)).toEqual(['/workspace/web/node_modules', '/workspace/api/node_modules']);
    expect(tree(dir)).toEqual(['api/', 'api/node_modules/', 'web/', 'web/keep', 'web/node_modules/']);
    store.closeSync();
  });
});
