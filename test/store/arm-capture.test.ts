// arm-capture.test.ts: a capture of a materialized clone uses the clone's ledger as its stat cache: only what changed since is read, the digests those of a full capture.
import { chmodSync, mkdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, type Snapshot } from '../../dist/index.js';
import { AT_FDCWD, sys as nativeSys, type Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const TREE = { 'src/a.ts': 'alpha', 'src/b.ts': 'beta', 'src/lib/c.ts': 'gamma', 'src/lib/d.ts': 'delta', 'src/run.sh': 'echo hi' };

function fixture(): { work: string; store: SnapshotStore; snap: Snapshot; clone: string } {
  const work = tempDir();
  writeTree(join(work, 'repo'), TREE);
  const store = SnapshotStore.openSync(join(work, 'store'));
  const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
  const clone = join(work, 'clone');
  mkdirSync(clone);
  snap.materializeSync(clone);
  return { work, store, snap, clone };
}

/** A syscall layer that notes the path (below `under`'s device and inode numbers) of every regular file it opens. */
function noting(under: string): { sys: Sys; opened: Map<bigint, string> } {
  const dev = BigInt(statSync(under).dev);
  const opened = new Map<bigint, string>();
  const note = (p: unknown, fd: number): number => {
    const st = nativeSys.fstat(fd);
    if (st.dev === dev && (st.mode & 0o170000) === 0o100000) opened.set(st.ino, String(p));
    return fd;
  };
  const sys = wrapSys({
    openat: (orig) => (dirfd, p, flags, mode) => note(p, orig(dirfd, p, flags, mode)),
    openat2: (orig) => (dirfd, p, flags, mode, resolve) => note(p, orig(dirfd, p, flags, mode, resolve)),
  });
  return { sys, opened };
}

/** The clone's own inodes (the store's copies are on the same device: only these count as reads of the arm). */
function inodes(clone: string, paths: string[]): Map<bigint, string> {
  return new Map(paths.map((p) => [BigInt(statSync(join(clone, p)).ino), p]));
}

describe('capture of an arm', () => {
  it('reads only the files that changed since the materialize, and publishes the digest a full capture does (kills ledgerEntries returning none, and trusting a ledger record whose ctime moved)', () => {
    const { work, store, clone } = fixture();
    // What an agent does: a file rewritten at the same size with its mtime put back, one added, one removed, one chmodded.
    const before = nativeSys.fstatat(AT_FDCWD, join(clone, 'src/a.ts'), 0);
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    const [sec, nsec] = [Number(before.mtimeNs / 1_000_000_000n), Number(before.mtimeNs % 1_000_000_000n)];
    nativeSys.utimensat(AT_FDCWD, join(clone, 'src/a.ts'), sec, nsec, sec, nsec, 0);
    expect(nativeSys.fstatat(AT_FDCWD, join(clone, 'src/a.ts'), 0)).toMatchObject({ size: before.size, mtimeNs: before.mtimeNs, ino: before.ino });
    writeFileSync(join(clone, 'src/new.ts'), 'new');
    unlinkSync(join(clone, 'src/b.ts'));
    chmodSync(join(clone, 'src/run.sh'), 0o700);
    const arm = inodes(clone, ['src/a.ts', 'src/new.ts', 'src/run.sh', 'src/lib/c.ts', 'src/lib/d.ts']);
    const { sys, opened } = noting(clone);
    const again = SnapshotStore.openSync(join(work, 'store'), { sys });
    const result = again.captureSync({ source: clone, copy: ['src'] });
    expect(result.captureReport).toMatchObject({ files: 5, reusedFiles: 2 });
    const read = [...opened.keys()].filter((ino) => arm.has(ino)).map((ino) => arm.get(ino)).sort();
    expect(read).toEqual(['src/a.ts', 'src/new.ts', 'src/run.sh']);
    // A capture that trusts nothing: the same digest, and the snapshot proves its bytes.
    const full = SnapshotStore.openSync(join(work, 'full'), { ephemeral: true });
    expect(full.captureSync({ source: clone, copy: ['src'], statCache: false }).digest).toBe(result.digest);
    expect(result.verifySync()).toEqual({ entries: 7, bytes: 25 });
    full.closeSync();
    again.closeSync();
    store.closeSync();
  });

  it('another store, or the same one once the snapshot is removed, reads every file; a ledger of another clone is never taken', () => {
    const { work, store, snap, clone } = fixture();
    writeFileSync(join(clone, 'src/new.ts'), 'new');
    const other = SnapshotStore.openSync(join(work, 'other'), { ephemeral: true });
    const fromOther = other.captureSync({ source: clone, copy: ['src'] });
    expect(fromOther.captureReport).toMatchObject({ files: 6, reusedFiles: 0 });
    // A directory with the same tree that is not the clone (another inode): no ledger, nothing trusted.
    const twin = join(work, 'twin');
    writeTree(twin, { ...TREE, 'src/new.ts': 'new' });
    expect(store.captureSync({ source: twin, copy: ['src'] }).captureReport).toMatchObject({ reusedFiles: 0 });
    store.remove(snap.digest);
    const after = SnapshotStore.openSync(join(work, 'store'));
    const again = after.captureSync({ source: clone, copy: ['src'] });
    expect(again.captureReport).toMatchObject({ files: 6, reusedFiles: 0 });
    expect(again.digest).toBe(fromOther.digest);
    after.closeSync();
    other.closeSync();
    store.closeSync();
  });

  it('an async capture of the arm (on the worker thread) uses the ledger too', async () => {
    const { work, store, clone } = fixture();
    writeFileSync(join(clone, 'src/new.ts'), 'new');
    const again = await SnapshotStore.open(join(work, 'store'));
    const result = await again.capture({ source: clone, copy: ['src'] });
    expect(result.captureReport).toMatchObject({ files: 6, reusedFiles: 5 });
    await again.close();
    store.closeSync();
  });
});
