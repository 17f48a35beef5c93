// clone-overlap.test.ts: a clone that is the snapshot's source, lies inside it, holds it, or lies in the store is SEAL_OVERLAP, by device and inode, before anything is made.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { expectError, listTree, rootOrSkip, tempDir, writeTree } from '../helpers.js';

function captured(): { root: string; repo: string; store: SnapshotStore; snap: ReturnType<SnapshotStore['captureSync']> } {
  const root = tempDir();
  writeTree(root, { 'repo/src/a.txt': 'alpha', 'repo/README': 'r' });
  const store = SnapshotStore.openSync(join(root, 'store'));
  const snap = store.captureSync({ source: join(root, 'repo'), copy: ['src'] });
  return { root, repo: join(root, 'repo'), store, snap };
}

describe('a clone apart from the source and the store', () => {
  it('the source itself, a directory inside it (made or not) and one that holds it are SEAL_OVERLAP; nothing is made or changed', async () => {
    const { root, repo, store, snap } = captured();
    const before = listTree(root);
    expectError(() => snap.materializeSync(repo), {
      code: 'SEAL_OVERLAP',
      message: `clone is the snapshot's source or lies inside it (the next capture would take the arm in): ${repo} (source ${repo})`,
      unchanged: root,
    });
    await expectError(async () => snap.materialize(join(repo, 'arms/a'), { createClone: true }), { code: 'SEAL_OVERLAP', unchanged: root });
    expectError(() => snap.materializeSync(join(repo, 'src'), { createClone: true }), { code: 'SEAL_OVERLAP', unchanged: root });
    // root holds the store too, which is said first.
    expectError(() => snap.materializeSync(root), { code: 'SEAL_OVERLAP', message: `clone overlaps the snapshot store: ${root}`, unchanged: root });
    expectError(() => snap.materializeSync(join(root, 'store/tmp'), {}), { code: 'SEAL_OVERLAP', unchanged: root });
    expect(listTree(root)).toEqual(before);
    // A clone that holds the source (and not the store).
    writeTree(root, { 'deep/repo/src/b': 'b' });
    const deep = store.captureSync({ source: join(root, 'deep/repo'), copy: ['src'] });
    expectError(() => deep.materializeSync(join(root, 'deep')), {
      code: 'SEAL_OVERLAP',
      message: `clone holds the snapshot's source: ${join(root, 'deep')} (source ${join(root, 'deep/repo')})`,
    });
    // A sibling is fine.
    expect(snap.materializeSync(join(root, 'arm'), { createClone: true }).files).toBe(1);
    store.closeSync();
  });

  it('a clone that holds the store outside its copy roots is SEAL_OVERLAP too: the agent given the clone would hold the store (run binds the clone writable), and reset --clean would remove it', async () => {
    const root = tempDir();
    writeTree(root, { 'repo/src/a': 'a', 'arm/keep': 'k' });
    const store = SnapshotStore.openSync(join(root, 'arm/.store'));
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['src'] });
    const before = listTree(join(root, 'arm'));
    const expected = { code: 'SEAL_OVERLAP', message: `clone overlaps the snapshot store: ${join(root, 'arm')}` };
    expectError(() => snap.materializeSync(join(root, 'arm')), expected);
    await expectError(async () => snap.reset(join(root, 'arm'), { clean: true }), expected);
    await expectError(async () => snap.mountPointsAsync(join(root, 'arm')), expected);
    expect(listTree(join(root, 'arm'))).toEqual(before);
    store.closeSync();
  });

  it('a source path where nothing is any more overlaps nothing: the directory it was, moved away, can be a clone', () => {
    const { root, repo, store, snap } = captured();
    renameSync(repo, join(root, 'moved'));
    expect(snap.materializeSync(join(root, 'moved')).files).toBe(1);
    // A new directory at the source's path is where the next capture reads: refused again.
    mkdirSync(repo);
    expectError(() => snap.materializeSync(repo), { code: 'SEAL_OVERLAP', unchanged: repo });
    store.closeSync();
  });

  it('the source under another name (a bind mount) is seen by its device and inode', () => {
    if (!rootOrSkip('bind mount')) return;
    const { root, repo, store, snap } = captured();
    const bound = join(root, 'bound');
    mkdirSync(bound);
    execFileSync('mount', ['--bind', repo, bound]);
    try {
      expectError(() => snap.materializeSync(bound), { code: 'SEAL_OVERLAP', unchanged: repo });
      expectError(() => snap.materializeSync(join(bound, 'sub'), { createClone: true }), { code: 'SEAL_OVERLAP', unchanged: repo });
    } finally {
      execFileSync('umount', [bound]);
    }
    store.closeSync();
  });

  it('a clone inside the store, or the store itself, under another name (a bind mount) is SEAL_OVERLAP by device and inode: the path comparison alone misses it', () => {
    if (!rootOrSkip('bind mount')) return;
    const { root, store, snap } = captured();
    const bound = join(root, 'alias');
    mkdirSync(bound);
    execFileSync('mount', ['--bind', store.root, bound]);
    try {
      const inside = join(bound, 'tmp', 'clone');
      expectError(() => snap.materializeSync(inside, { createClone: true }), { code: 'SEAL_OVERLAP', message: `clone overlaps the snapshot store: ${inside}`, unchanged: store.root });
      expectError(() => snap.materializeSync(bound), { code: 'SEAL_OVERLAP', message: `clone overlaps the snapshot store: ${bound}`, unchanged: store.root });
    } finally {
      execFileSync('umount', [bound]);
    }
    store.closeSync();
  });
});
