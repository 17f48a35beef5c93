// kernel-copy.test.ts: on ext4 (no reflink), capture and materialize copy in the kernel (copy_file_range), keep holes, and catch changes.
import { appendFileSync, mkdirSync, openSync, closeSync, readFileSync, statSync, writeSync, ftruncateSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../dist/index.js';
import type { Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, openFds, reflinkMount, storeLeftovers, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const MiB = 1 << 20;
const ext4 = reflinkMount('ext4');

/** A 100 MiB file with 4 KiB of data at 1 MiB and at 60 MiB; the rest holes. */
function sparseFile(path: string): Buffer {
  const fd = openSync(path, 'w');
  ftruncateSync(fd, 100 * MiB);
  writeSync(fd, Buffer.alloc(4096, 0x61), 0, 4096, MiB);
  writeSync(fd, Buffer.alloc(4096, 0x62), 0, 4096, 60 * MiB);
  closeSync(fd);
  return readFileSync(path);
}

/** Counts copy_file_range calls and the bytes that went through pwrite. */
function counting(): { sys: Sys; calls: { copy_file_range: number; pwriteBytes: number } } {
  const calls = { copy_file_range: 0, pwriteBytes: 0 };
  const sys = wrapSys({
    copy_file_range: (orig) => (fdIn, offIn, fdOut, offOut, len) => {
      calls.copy_file_range++;
      return orig(fdIn, offIn, fdOut, offOut, len);
    },
    pwrite: (orig) => (fd, buf, off, len, pos) => {
      const n = orig(fd, buf, off, len, pos);
      calls.pwriteBytes += n;
      return n;
    },
  });
  return { sys, calls };
}

/** The size of the ledger the store keeps of a clone (clones/<dev>-<ino>.ledger). */
function ledgerBytes(store: SnapshotStore, clone: string): number {
  const st = statSync(clone, { bigint: true });
  return statSync(join(store.root, 'clones', `${st.dev}-${st.ino}.ledger`)).size;
}

const KiB64 = 64 * 1024;

/**
 * A capture of repo's tree into a new ephemeral store at `root` through `sys` that must fail:
 * its error, once the store is checked to hold nothing of it and no fd was left open.
 */
function failedCapture(root: string, repo: string, sys: Sys): SealError {
  const store = SnapshotStore.openSync(root, { ephemeral: true, sys });
  const fds = openFds().length;
  let caught: unknown;
  try {
    store.captureSync({ source: repo, copy: ['tree'] });
  } catch (err) {
    caught = err;
  }
  expect(storeLeftovers(store.root)).toEqual([]);
  expect(openFds().length).toBe(fds);
  store.closeSync();
  return caught as SealError;
}

describe.skipIf(ext4 === undefined)('kernel copies on ext4', () => {
  it('a 100 MiB sparse file takes next to no blocks in the store and in each clone (auto), with the right bytes', async () => {
    const work = tempDir(ext4);
    const repo = join(work, 'repo');
    mkdirSync(join(repo, 'tree'), { recursive: true });
    const bytes = sparseFile(join(repo, 'tree/sparse.bin'));
    const store = await SnapshotStore.open(join(work, 'store'), { ephemeral: true });
    const snap = await store.capture({ source: repo, copy: ['tree'] });
    const stored = statSync(join(snap.root, 'copy/tree/sparse.bin'));
    expect(stored.size).toBe(100 * MiB);
    expect(stored.blocks * 512).toBeLessThan(KiB64 * 4);
    expect(snap.entries.find((e) => e.path === 'tree/sparse.bin')?.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    for (let i = 0; i < 2; i++) {
      const clone = join(work, `clone-${i}`);
      mkdirSync(clone);
      const report = await snap.materialize(clone);
      // Holes are neither copied nor counted: two 4 KiB data blocks.
      expect(report).toMatchObject({ files: 1, reflinked: 0, copied: 1, bytesCopied: 2 * 4096 });
      const st = statSync(join(clone, 'tree/sparse.bin'));
      expect(st.size).toBe(100 * MiB);
      expect(st.blocks * 512).toBeLessThan(KiB64 * 4);
      expect(readFileSync(join(clone, 'tree/sparse.bin')).equals(bytes)).toBe(true);
    }
    await store.close();
  });

  it('capture and auto materialize use copy_file_range; never uses plain read/write', () => {
    const work = tempDir(ext4);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    writeTree(repo, { 'tree/a': 'alpha', 'tree/big': Buffer.alloc(3 * MiB, 9) });
    const { sys, calls } = counting();
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, sys });
    const snap = store.captureSync({ source: repo, copy: ['tree'] });
    // Only the store's own small files (manifest.json, the stat cache) went through pwrite.
    expect([calls.copy_file_range >= 2, calls.pwriteBytes < 64 * 1024]).toEqual([true, true]);
    calls.copy_file_range = 0;
    calls.pwriteBytes = 0;
    const auto = join(work, 'auto');
    mkdirSync(auto);
    expect(snap.materializeSync(auto)).toMatchObject({ files: 2, copied: 2, reflinked: 0 });
    // Only the in-progress marker (one short line of JSON) and the clone's ledger in the store went through pwrite.
    const marker = calls.pwriteBytes - ledgerBytes(store, auto);
    expect([calls.copy_file_range >= 2, marker > 0 && marker < 256]).toEqual([true, true]);
    calls.copy_file_range = 0;
    calls.pwriteBytes = 0;
    const never = join(work, 'never');
    mkdirSync(never);
    expect(snap.materializeSync(never, { reflink: 'never' })).toMatchObject({ files: 2, copied: 2 });
    expect([calls.copy_file_range, calls.pwriteBytes]).toEqual([0, 3 * MiB + 5 + marker + ledgerBytes(store, never)]);
    expect(readFileSync(join(never, 'tree/big')).equals(readFileSync(join(auto, 'tree/big')))).toBe(true);
    expect(readFileSync(join(auto, 'tree/a'), 'utf8')).toBe('alpha');
    store.closeSync();
  });

  it('a write to the source during copy_file_range is SEAL_CHANGED, and nothing is left behind', () => {
    const work = tempDir(ext4);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    writeTree(repo, { 'tree/big': Buffer.alloc(3 * MiB, 7), 'tree/small': 'small' });
    let done = false;
    const sys = wrapSys({
      copy_file_range: (orig) => (fdIn, offIn, fdOut, offOut, len) => {
        const n = orig(fdIn, offIn, fdOut, offOut, len);
        if (!done && len > MiB) {
          done = true;
          appendFileSync(join(repo, 'tree/big'), 'x');
        }
        return n;
      },
    });
    const caught = failedCapture(join(work, 'store'), repo, sys);
    expect(done).toBe(true);
    expect(caught).toBeInstanceOf(SealError);
    expect([caught.code, caught.message]).toEqual(['SEAL_CHANGED', 'file changed while snapshotting: tree/big']);
  });

  it('hashes what copy_file_range wrote, not a second read of the source: bytes changed unseen between the two (a write through a shared mapping moves no time) never make a snapshot its own verify refuses', () => {
    const work = tempDir(ext4);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    writeTree(repo, { 'tree/big': Buffer.alloc(3 * MiB, 7), 'tree/small': 'small' });
    // Past the in-flight window (a file changed in the last 250 ms is read again once it is over).
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 400);
    // After the copy, every read of the source sees other bytes, as a mapped write would leave them: no timestamp moved.
    const copiedFrom = new Set<number>();
    const sys = wrapSys({
      copy_file_range: (orig) => (fdIn, offIn, fdOut, offOut, len) => {
        copiedFrom.add(fdIn);
        return orig(fdIn, offIn, fdOut, offOut, len);
      },
      pread: (orig) => (fd, buf, off, len, pos) => {
        const n = orig(fd, buf, off, len, pos);
        if (copiedFrom.has(fd)) buf.fill(0x78, off, off + n);
        return n;
      },
      close: (orig) => (fd) => {
        copiedFrom.delete(fd);
        return orig(fd);
      },
    });
    const store = SnapshotStore.openSync(join(work, 'store'), { sys });
    const snap = store.captureSync({ source: repo, copy: ['tree'], statCache: false });
    expect(copiedFrom.size).toBe(0);
    const big = snap.entries.find((e) => e.path === 'tree/big')!;
    expect(big.sha256).toBe(createHash('sha256').update(Buffer.alloc(3 * MiB, 7)).digest('hex'));
    expect(readFileSync(join(snap.root, 'copy/tree/big')).equals(Buffer.alloc(3 * MiB, 7))).toBe(true);
    expect(snap.verifySync().entries).toBe(snap.entries.length);
    store.closeSync();
  });

  it('capture reads only the data of a sparse file (its holes hashed as zeros) and a buffered copy keeps the holes', () => {
    const work = tempDir(ext4);
    const repo = join(work, 'repo');
    mkdirSync(join(repo, 'tree'), { recursive: true });
    const bytes = sparseFile(join(repo, 'tree/sparse.bin'));
    let read = 0;
    const sys = wrapSys({
      copy_file_range: () => () => {
        throw Object.assign(new Error('EXDEV: cross-device link, copy_file_range'), { errno: -18, code: 'EXDEV', syscall: 'copy_file_range' });
      },
      pread: (orig) => (fd, buf, off, len, pos) => {
        const n = orig(fd, buf, off, len, pos);
        read += n;
        return n;
      },
    });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, sys });
    const before = read;
    const snap = store.captureSync({ source: repo, copy: ['tree'] });
    // The two 4 KiB blocks, and the store's own small documents; never the 100 MiB of holes.
    expect(read - before).toBeLessThan(KiB64);
    expect(snap.entries.find((e) => e.path === 'tree/sparse.bin')?.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
    const stored = statSync(join(snap.root, 'copy/tree/sparse.bin'));
    expect([stored.size, stored.blocks * 512 < KiB64]).toEqual([100 * MiB, true]);
    expect(readFileSync(join(snap.root, 'copy/tree/sparse.bin')).equals(bytes)).toBe(true);
    store.closeSync();
  });

  it('a sparse file that shrinks under the read, grows past its size, or has a hole filled once its holes were found is SEAL_CHANGED; nothing is left', () => {
    const attacks: Record<string, (repo: string) => Parameters<typeof wrapSys>[0]> = {
      shrinks: () => ({ pread: (orig) => (fd, buf, off, len, pos) => (pos === 60 * MiB ? 0 : orig(fd, buf, off, len, pos)) }),
      grows: () => ({ pread: (orig) => (fd, buf, off, len, pos) => (pos === 100 * MiB && len === 1 ? 1 : orig(fd, buf, off, len, pos)) }),
      'hole filled': (repo) => {
        let done = false;
        return {
          lseek: (orig) => (fd, offset, whence) => {
            const at = orig(fd, offset, whence);
            if (!done) {
              done = true;
              const w = openSync(join(repo, 'tree/sparse.bin'), 'r+');
              writeSync(w, 'x', 80 * MiB);
              closeSync(w);
            }
            return at;
          },
        };
      },
    };
    for (const [name, attack] of Object.entries(attacks)) {
      const work = tempDir(ext4);
      const repo = join(work, 'repo');
      mkdirSync(join(repo, 'tree'), { recursive: true });
      sparseFile(join(repo, 'tree/sparse.bin'));
      const caught = failedCapture(join(work, 'store'), repo, wrapSys(attack(repo)));
      expect([name, caught.code, caught.message]).toEqual([name, 'SEAL_CHANGED', 'file changed while snapshotting: tree/sparse.bin']);
    }
  });

  it('falls back to read/write where copy_file_range refuses the pair (EXDEV)', () => {
    const work = tempDir(ext4);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    writeTree(repo, { 'tree/a': 'alpha', 'tree/b': Buffer.alloc(2 * MiB, 3) });
    const sys = wrapSys({
      copy_file_range: () => () => {
        throw Object.assign(new Error('EXDEV: cross-device link, copy_file_range'), { errno: -18, code: 'EXDEV', syscall: 'copy_file_range' });
      },
    });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, sys });
    const snap = store.captureSync({ source: repo, copy: ['tree'] });
    expect(readFileSync(join(snap.root, 'copy/tree/b')).equals(Buffer.alloc(2 * MiB, 3))).toBe(true);
    const clone = join(work, 'clone');
    mkdirSync(clone);
    expect(snap.materializeSync(clone)).toMatchObject({ files: 2, copied: 2 });
    expect(readFileSync(join(clone, 'tree/a'), 'utf8')).toBe('alpha');
    store.closeSync();
  });
});
