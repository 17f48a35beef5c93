// full-disk.test.ts: a store or clone filesystem that fills up, or turns read-only, in the middle of a call (real ext4 and XFS loop images).
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SnapshotStore, type SealError } from '../../dist/index.js';
import type { Sys } from '../../dist/sys/index.js';
import { firstDiff, treeState } from '../../bench/faults/tree.js';
import { checkNoFdLeaks, rootOrSkip, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

// Root makes the loop images; not root, these skip (under CI=true only in the unprivileged pass).
const isRoot = rootOrSkip('the full-disk tests (their loop images)');
const MiB = 1024 * 1024;

/** A loop image on /dev/shm: ext4 of 32 MiB, or XFS of 300 MiB (its minimum) with a ballast leaving ~16 MiB. */
function loopFs(kind: 'ext4' | 'xfs'): { mnt: string; remount: (mode: 'ro' | 'rw') => void; fill: () => void; free: () => void; unmount: () => void } {
  // Not a tempDir: that one is removed after the file's tests, and this one must be unmounted first.
  const base = mkdtempSync(`/dev/shm/treeseal-full-${kind}-`);
  const img = join(base, 'fs.img');
  const mnt = join(base, 'mnt');
  mkdirSync(mnt);
  execFileSync('truncate', ['-s', kind === 'xfs' ? '300M' : '32M', img]);
  if (kind === 'xfs') execFileSync('mkfs.xfs', ['-q', '-m', 'reflink=1', img]);
  else execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', img]);
  execFileSync('mount', ['-o', 'loop', img, mnt]);
  const avail = (): number => {
    const st = statfsSync(mnt);
    return st.bavail * st.bsize;
  };
  if (kind === 'xfs') execFileSync('fallocate', ['-l', String(avail() - 16 * MiB), join(mnt, 'ballast')]);
  const filler = join(mnt, 'filler');
  return {
    mnt,
    remount: (mode) => execFileSync('mount', ['-o', `remount,${mode}`, mnt]),
    /** Takes every free block: fallocate the bulk, then write until ENOSPC. */
    fill() {
      const fd = openSync(filler, 'a');
      try {
        if (avail() > 2 * MiB) execFileSync('fallocate', ['-l', String(avail() - MiB), filler]);
        for (const size of [64 * 1024, 4096, 512]) {
          const chunk = Buffer.alloc(size, 1);
          try {
            for (;;) writeSync(fd, chunk);
          } catch (err) {
            if ((err as { code?: string }).code !== 'ENOSPC') throw err;
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free: () => rmSync(filler, { force: true }),
    unmount() {
      execFileSync('umount', [mnt]);
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/** The real layer, with `step` run once, just before the first call of `name` that `when` picks. */
function before<K extends keyof Sys>(name: K, when: (...args: Parameters<Sys[K]>) => boolean, step: () => void): Sys {
  let done = false;
  return wrapSys({
    [name]: (orig: Sys[K]) =>
      (...args: Parameters<Sys[K]>) => {
        if (!done && when(...args)) {
          done = true;
          step();
        }
        return (orig as (...a: unknown[]) => unknown)(...args);
      },
  } as never);
}

function sealError(fn: () => unknown): SealError {
  try {
    fn();
  } catch (err) {
    return err as SealError;
  }
  throw new Error('call unexpectedly succeeded');
}

async function sealErrorAsync(p: Promise<unknown>): Promise<SealError> {
  try {
    await p;
  } catch (err) {
    return err as SealError;
  }
  throw new Error('call unexpectedly succeeded');
}

/** The store as its next user sees it: tmp/ empty after open, every published snapshot verifies. */
function expectCleanStore(root: string, published: string[]): void {
  const store = SnapshotStore.openSync(root);
  expect(readdirSync(join(root, 'tmp'))).toEqual([]);
  expect(store.list()).toEqual([...published].sort());
  for (const d of published) store.get(d).verifySync();
  store.closeSync();
}

function source(): string {
  const dir = tempDir('/dev/shm');
  const tree: Record<string, string | Buffer> = { 'src/small.txt': 'small', 'mods/pkg/index.js': 'module.exports = 1;\n' };
  for (let i = 0; i < 6; i++) tree[`src/big/${i}.bin`] = Buffer.alloc(2 * MiB, i + 1);
  writeTree(dir, tree);
  return dir;
}

const definition = (dir: string) => ({ source: dir, copy: ['src'], mounts: [{ source: 'mods', target: 'node_modules' }] });

describe.skipIf(!isRoot).each(['ext4', 'xfs'] as const)('a full %s filesystem', (kind) => {
  let fs: ReturnType<typeof loopFs>;
  beforeAll(() => {
    fs = loopFs(kind);
  });
  afterAll(() => fs?.unmount());

  it('fills the store during a capture: SEAL_IO with the ENOSPC cause, nothing published, tmp/ clean; with space again the capture succeeds', async () => {
    const dir = source();
    const root = join(fs.mnt, 'store');
    const first = SnapshotStore.openSync(root);
    const kept = first.captureSync({ source: dir, copy: ['src/small.txt'] }).digest;
    first.closeSync();
    // The disk fills just as the first big file's bytes are written into the build.
    const sys = before('pwrite', (_fd, _buf, _off, length) => length > MiB / 2, () => fs.fill());
    const store = SnapshotStore.openSync(root, { sys });
    const err = sealError(() => store.captureSync(definition(dir)));
    // The file being written is named (it was a bare "capture: ENOSPC: …, pwrite"), and the store's filesystem as the one full.
    expect([err.name, err.code, (err.cause as { code?: string }).code, err.message, err.path]).toEqual([
      'SealError',
      'SEAL_IO',
      'ENOSPC',
      `file cannot be captured: src/big/0.bin: ENOSPC: no space left on device, pwrite (the store's filesystem is full or over quota: ${root})`,
      'src/big/0.bin',
    ]);
    expectCleanStore(root, [kept]);
    // The async path (worker thread, helper threads) on a disk that is still full.
    const real = await SnapshotStore.open(root);
    const async = await sealErrorAsync(real.capture({ ...definition(dir), parallelism: 2 }));
    expect([async.name, async.code, (async.cause as { code?: string }).code]).toEqual(['SealError', 'SEAL_IO', 'ENOSPC']);
    expect(async.message).toMatch(/ \(the store's filesystem is full or over quota: .*\/store\)$/);
    expectCleanStore(root, [kept]);
    fs.free();
    const snap = await real.capture(definition(dir));
    await snap.verify();
    await real.close();
    expectCleanStore(root, [kept, snap.digest]);
    rmSync(root, { recursive: true, force: true });
  });

  it('fills the clone during a materialize: SEAL_IO with the ENOSPC cause, the clone as it was, no stage left; with space again it succeeds', async () => {
    const dir = source();
    const store = SnapshotStore.openSync(tempDir('/dev/shm'));
    const snap = store.captureSync(definition(dir));
    store.closeSync();
    const clone = join(fs.mnt, 'clone');
    mkdirSync(clone);
    writeTree(clone, { 'src/old.txt': 'old', 'keep.txt': 'keep' });
    const was = treeState(clone);
    const sys = before('pwrite', () => true, () => fs.fill());
    const faulted = SnapshotStore.openSync(store.root, { sys });
    const err = sealError(() => faulted.get(snap.digest).materializeSync(clone));
    faulted.closeSync();
    expect([err.name, err.code, (err.cause as { code?: string }).code]).toEqual(['SealError', 'SEAL_IO', 'ENOSPC']);
    // The entry being made is named (it was a bare "materialize: ENOSPC: …, pwrite").
    expect(err.message).toBe(`could not make ${err.path}: ENOSPC: no space left on device, pwrite`);
    expect(err.path).toMatch(/^src\//);
    expect(firstDiff(was, treeState(clone))).toBeUndefined();
    expect(readdirSync(fs.mnt).filter((n) => n.startsWith('.treeseal'))).toEqual([]);
    const async = await sealErrorAsync(snap.materialize(clone, { reflink: 'never' }));
    expect([async.name, async.code, (async.cause as { code?: string }).code]).toEqual(['SealError', 'SEAL_IO', 'ENOSPC']);
    expect(firstDiff(was, treeState(clone))).toBeUndefined();
    fs.free();
    const report = await snap.materialize(clone);
    expect(report.files).toBe(7);
    expect(readdirSync(join(clone, 'src')).sort()).toEqual(['big', 'small.txt']);
    expect(readdirSync(fs.mnt).filter((n) => n.startsWith('.treeseal'))).toEqual([]);
    rmSync(clone, { recursive: true, force: true });
  });

  it('a read-only remount of the store mid-capture is SEAL_IO with the EROFS cause; after remount rw the next open sweeps and the capture succeeds', () => {
    const dir = source();
    const root = join(fs.mnt, 'ro-store');
    const first = SnapshotStore.openSync(root);
    const kept = first.captureSync({ source: dir, copy: ['src/small.txt'] }).digest;
    first.closeSync();
    // The copy roots are built and closed; the filesystem turns read-only as the mounts' area is made.
    const sys = before('mkdirat', (_fd, name) => name === 'mounts', () => fs.remount('ro'));
    const store = SnapshotStore.openSync(root, { sys });
    let err: SealError;
    try {
      err = sealError(() => store.captureSync(definition(dir)));
    } finally {
      fs.remount('rw');
    }
    expect([err.name, err.code, (err.cause as { code?: string }).code, err.message]).toEqual([
      'SealError',
      'SEAL_IO',
      'EROFS',
      "capture: EROFS: read-only file system, mkdirat 'mounts'",
    ]);
    expectCleanStore(root, [kept]);
    const again = SnapshotStore.openSync(root);
    const snap = again.captureSync(definition(dir));
    snap.verifySync();
    again.closeSync();
    expectCleanStore(root, [kept, snap.digest]);
  });
});
