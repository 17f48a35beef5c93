// store-lock.test.ts: the store lock (src/store/lock.ts): readers share it and writers hold it alone; what stands at its name
// (a symlink, a directory, a FIFO, a socket) is refused typed, never followed and never blocks; the kernel's refusals are
// SEAL_IO; a reader of a store without a lock file runs unlocked. Each title names the mutation it kills.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import { LOCK_EX, LOCK_NB, LOCK_SH, LOCK_UN, sys as nativeSys, type Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, failOnce, mkfifo, systemError, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/** A store holding one snapshot; `lock` is the store lock's path. */
function stored(): { work: string; store: SnapshotStore; snap: Snapshot; lock: string } {
  const work = tempDir();
  writeTree(join(work, 'repo'), { 'src/a': 'alpha', 'src/b': 'beta' });
  const store = SnapshotStore.openSync(join(work, 'store'));
  const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
  return { work, store, snap, lock: join(store.root, 'lock') };
}

function withSys(snap: Snapshot, sys: Sys): Snapshot {
  return new Snapshot(snap.root, snap.toJSON(), { sys });
}

/** Whether a flock of `op` (LOCK_SH or LOCK_EX) on another open of the lock file can be taken right now. */
function canTake(lock: string, op: number): boolean {
  const fd = openSync(lock, 'r');
  try {
    nativeSys.flock(fd, op | LOCK_NB);
    nativeSys.flock(fd, LOCK_UN);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'EAGAIN' || (err as { code?: string }).code === 'EWOULDBLOCK') return false;
    throw err;
  } finally {
    closeSync(fd);
  }
}

/** A syscall layer that runs probe once, right after the store lock's flock was taken. */
function afterLockTaken(probe: () => void): Sys {
  let done = false;
  return wrapSys({
    flock: (orig) => (fd, op) => {
      orig(fd, op);
      if (!done && (op === LOCK_SH || op === LOCK_EX)) {
        done = true;
        probe();
      }
    },
  });
}

/** A syscall layer whose `name` call on the store lock (opened by its name `lock`) fails once with code. */
function lockCallFails(name: 'openat' | 'fstat' | 'flock', code: string): Sys {
  let lockFd = -1;
  let thrown = false;
  const fail = (): never => {
    thrown = true;
    throw systemError(code, name);
  };
  return wrapSys({
    openat: (orig) => (dirfd, path, flags, mode) => {
      if (path === 'lock' && name === 'openat' && !thrown) fail();
      const fd = orig(dirfd, path, flags, mode);
      if (path === 'lock') lockFd = fd;
      return fd;
    },
    fstat: (orig) => (fd) => {
      if (fd === lockFd && name === 'fstat' && !thrown) fail();
      return orig(fd);
    },
    flock: (orig) => (fd, op) => {
      if (fd === lockFd && name === 'flock' && !thrown) fail();
      orig(fd, op);
    },
  });
}

describe('shared for readers, exclusive for writers', () => {
  it('verify and materialize hold it shared: another reader gets in, a writer does not (kills LOCK_SH replaced by LOCK_EX: exclusive ? … → true)', () => {
    const { work, store, snap, lock } = stored();
    const seen: [boolean, boolean][] = [];
    const probe = (): void => {
      seen.push([canTake(lock, LOCK_SH), canTake(lock, LOCK_EX)]);
    };
    withSys(snap, afterLockTaken(probe)).verifySync();
    const clone = join(work, 'clone');
    mkdirSync(clone);
    withSys(snap, afterLockTaken(probe)).materializeSync(clone);
    expect(seen).toEqual([
      [true, false],
      [true, false],
    ]);
    expect(canTake(lock, LOCK_EX)).toBe(true);
    store.closeSync();
  });

  it('remove and gc hold it exclusively: no reader gets in (kills LOCK_EX replaced by LOCK_SH: exclusive ? … → false)', () => {
    const { store, snap, lock } = stored();
    const seen: boolean[] = [];
    const writer = SnapshotStore.openSync(store.root, { sys: afterLockTaken(() => seen.push(canTake(lock, LOCK_SH))) });
    writer.gc();
    const remover = SnapshotStore.openSync(store.root, { sys: afterLockTaken(() => seen.push(canTake(lock, LOCK_SH))) });
    expect(remover.remove(snap.digest)).toBe(snap.digest);
    expect(seen).toEqual([false, false]);
    expect(canTake(lock, LOCK_EX)).toBe(true);
    for (const s of [writer, remover, store]) s.closeSync();
  });
});

describe('a snapshot removed while it is loaded', () => {
  it('get of a snapshot rm takes away while its manifest is read is SEAL_UNAVAILABLE, never SEAL_CORRUPT (it was: no readable manifest)', async () => {
    const { store, snap } = stored();
    const other = SnapshotStore.openSync(store.root);
    let removed = false;
    const sys = wrapSys({
      pread: (orig) => (...args: Parameters<Sys['pread']>) => {
        if (!removed) {
          removed = true;
          other.remove(snap.digest);
        }
        return orig(...args);
      },
    });
    const reader = SnapshotStore.openSync(store.root, { sys });
    expectError(() => reader.get(snap.digest), { code: 'SEAL_UNAVAILABLE', message: `no such snapshot (removed while it was read): ${snap.digest}` });
    expect(removed).toBe(true);
    reader.closeSync();
    other.closeSync();
    store.closeSync();
  });
});

describe('a store without a lock file', () => {
  it('a reader runs unlocked and makes none; a writer makes it again (kills the create flag and the ENOENT escape of openLock dropped or forced)', async () => {
    const { work, store, snap, lock } = stored();
    rmSync(lock);
    expect(snap.verifySync()).toEqual({ entries: 3, bytes: 9 });
    await snap.verify();
    const clone = join(work, 'clone');
    mkdirSync(clone);
    snap.materializeSync(clone);
    expect(snap.mountPoints(clone)).toEqual([]);
    expect(existsSync(lock)).toBe(false);
    store.gc();
    expect(existsSync(lock)).toBe(true);
    store.closeSync();
  });
});

describe('what stands at a store part\'s name is refused, never followed', () => {
  it('a symlink at snapshots/, tmp/, leases/, cache/ or clones/ is SEAL_SYMLINK naming it, a file there SEAL_CORRUPT; the link\'s target untouched (it was SEAL_UNAVAILABLE, ENOTDIR, naming only the part)', () => {
    const { work, store } = stored();
    const root = store.root;
    store.closeSync();
    const outside = join(work, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'keep'), 'keep');
    for (const part of ['snapshots', 'tmp', 'leases', 'cache', 'clones']) {
      const saved = join(work, `saved-${part}`);
      // clones/ is made by the first materialize: made here.
      mkdirSync(join(root, part), { recursive: true, mode: 0o700 });
      renameSync(join(root, part), saved);
      symlinkSync(outside, join(root, part));
      const err = expectError(() => SnapshotStore.openSync(root), { code: 'SEAL_SYMLINK', message: `store part must be a real directory, not a symlink: ${join(root, part)}` });
      expect((err as Error & { cause?: { code?: string } }).cause?.code).toMatch(/^(ELOOP|ENOTDIR)$/);
      rmSync(join(root, part));
      writeFileSync(join(root, part), 'a file');
      expectError(() => SnapshotStore.openSync(root), { code: 'SEAL_CORRUPT', message: `store part must be a real directory, not a file: ${join(root, part)}` });
      rmSync(join(root, part));
      renameSync(saved, join(root, part));
    }
    expect(readdirSync(outside)).toEqual(['keep']);
    SnapshotStore.openSync(root).closeSync();
  });
});

describe('what stands at the lock name is refused, never followed, never waited on', () => {
  it('a symlink is SEAL_SYMLINK for a writer (open) and a reader (verify, sync and on the worker thread); its target untouched (kills the ELOOP branch of lockError, and its { cause } emptied)', async () => {
    const { work, store, snap, lock } = stored();
    const outside = join(work, 'outside');
    writeFileSync(outside, 'not a lock');
    rmSync(lock);
    symlinkSync(outside, lock);
    const message = `store lock must not be a symlink: ${lock}`;
    expectError(() => SnapshotStore.openSync(store.root), { code: 'SEAL_SYMLINK', message });
    const err = expectError(() => snap.verifySync(), { code: 'SEAL_SYMLINK', message });
    expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('ELOOP');
    await expectError(async () => snap.verify(), { code: 'SEAL_SYMLINK', message });
    expect(readFileSync(outside, 'utf8')).toBe('not a lock');
    store.closeSync();
  });

  it('a directory is SEAL_CORRUPT: EISDIR for a writer, the fstat for a reader (kills the EISDIR branch of lockError and its { cause } emptied, and the isReg check of openLock)', () => {
    const { store, snap, lock } = stored();
    rmSync(lock);
    mkdirSync(lock);
    const message = `store lock is not a regular file: ${lock}`;
    const err = expectError(() => SnapshotStore.openSync(store.root), { code: 'SEAL_CORRUPT', message });
    expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('EISDIR');
    expectError(() => snap.verifySync(), { code: 'SEAL_CORRUPT', message });
    store.closeSync();
  });

  it('a FIFO is SEAL_CORRUPT for a writer and a reader, at once (kills the isReg check of openLock)', () => {
    const { store, snap, lock } = stored();
    rmSync(lock);
    mkfifo(lock);
    const message = `store lock is not a regular file: ${lock}`;
    expectError(() => SnapshotStore.openSync(store.root), { code: 'SEAL_CORRUPT', message });
    expectError(() => snap.verifySync(), { code: 'SEAL_CORRUPT', message });
    store.closeSync();
  });

  it('a socket (open fails with ENXIO) is SEAL_CORRUPT (kills the ENXIO code of lockError emptied)', () => {
    const { store, snap, lock } = stored();
    rmSync(lock);
    execFileSync('python3', ['-c', 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])', lock]);
    const message = `store lock is not a regular file: ${lock}`;
    expectError(() => SnapshotStore.openSync(store.root), { code: 'SEAL_CORRUPT', message });
    expectError(() => snap.verifySync(), { code: 'SEAL_CORRUPT', message });
    store.closeSync();
  });
});

describe('the kernel refusing the lock', () => {
  for (const call of ['openat', 'fstat', 'flock'] as const) {
    it(`${call} refused (EACCES) is SEAL_IO naming the lock; another failure (EINVAL) SEAL_UNAVAILABLE with its message (kills lockError's ${call} catch and its messages emptied)`, () => {
      const { snap, store, lock } = stored();
      expectError(() => withSys(snap, lockCallFails(call, 'EACCES')).verifySync(), { code: 'SEAL_IO', message: `store lock cannot be taken: ${lock}: EACCES: injected, ${call}` });
      const err = expectError(() => withSys(snap, lockCallFails(call, 'EINVAL')).verifySync(), {
        code: 'SEAL_UNAVAILABLE',
        message: `store lock is unavailable: ${lock}: EINVAL: injected, ${call}`,
      });
      expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('EINVAL');
      expectError(() => SnapshotStore.openSync(store.root, { sys: lockCallFails(call, 'EINVAL') }), { code: 'SEAL_UNAVAILABLE', message: `store lock is unavailable: ${lock}: EINVAL: injected, ${call}` });
      expect(canTake(lock, LOCK_EX)).toBe(true);
      store.closeSync();
    });
  }
});

describe('the directories the lock is taken in', () => {
  it('a store directory swapped for a symlink is refused naming the store directory (kills the label "store directory" emptied)', () => {
    const { store, snap } = stored();
    renameSync(store.root, `${store.root}-moved`);
    symlinkSync(`${store.root}-moved`, store.root);
    const err = expectError(() => snap.verifySync(), { code: 'SEAL_SYMLINK' });
    expect(err.message).toMatch(/^store directory /);
    rmSync(store.root);
    renameSync(`${store.root}-moved`, store.root);
    store.closeSync();
  });

  it('a snapshot removed before the read is "snapshot was removed" with the ENOENT as cause (kills its { cause } emptied)', () => {
    const { store, snap } = stored();
    store.remove(snap.digest);
    const err = expectError(() => snap.verifySync(), { code: 'SEAL_UNAVAILABLE', message: `snapshot was removed: ${snap.digest}` });
    expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('ENOENT');
    store.closeSync();
  });

  it('a snapshot directory swapped for a symlink is refused as such, not as removed (kills the label "snapshot" emptied, and the removed test replaced by true)', () => {
    const { store, snap } = stored();
    renameSync(snap.root, `${snap.root}-moved`);
    symlinkSync(`${snap.root}-moved`, snap.root);
    const err = expectError(() => snap.verifySync(), { code: 'SEAL_SYMLINK' });
    expect(err.message).toMatch(/^snapshot /);
    rmSync(snap.root);
    renameSync(`${snap.root}-moved`, snap.root);
    store.closeSync();
  });

  it('a snapshot directory that cannot be opened for another reason (EINVAL) is not "removed" (kills the removed test\'s && turned into ||)', () => {
    const { store, snap } = stored();
    const { sys, injected } = failOnce('openat2', 'EINVAL', (_dirfd, path) => String(path).endsWith(snap.digest));
    const err = expectError(() => withSys(snap, sys).verifySync(), { code: 'SEAL_UNAVAILABLE', message: `snapshot is unavailable: ${snap.root}: EINVAL: injected, openat2` });
    expect((err as Error & { cause?: unknown }).cause).toBe(injected());
    store.closeSync();
  });
});
