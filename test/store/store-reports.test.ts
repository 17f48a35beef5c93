// store-reports.test.ts: what a capture and a store open report: reused vs new snapshots, builds swept at open.
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

describe('capture reports whether it reused a snapshot', () => {
  it('new, then reused in the same store and by another store object, sync or async; get() has no capture report', async () => {
    const base = tempDir();
    const repo = join(base, 'repo');
    writeTree(repo, { 'src/a': 'a' });
    const dir = join(base, 'store');
    const first = await SnapshotStore.open(dir);
    const a = await first.capture({ source: repo, copy: ['src'] });
    expect(a.captureReport!.reused).toBe(false);
    const again = await first.capture({ source: repo, copy: ['src'] });
    expect([again.captureReport!.reused, again.digest]).toEqual([true, a.digest]);
    expect(first.captureSync({ source: repo, copy: ['src'] }).captureReport!.reused).toBe(true);
    const second = SnapshotStore.openSync(dir);
    expect(second.captureSync({ source: repo, copy: ['src'] }).captureReport!.reused).toBe(true);
    const third = await SnapshotStore.open(dir);
    expect((await third.capture({ source: repo, copy: ['src'] })).captureReport!.reused).toBe(true);
    await third.close();
    expect((await second.capture({ source: repo, copy: ['src'], revision: 'r' })).captureReport!.reused).toBe(false);
    expect(second.get(a.digest).captureReport).toBeUndefined();
    await first.close();
    second.closeSync();
  });
});

describe('store open reports what it swept', () => {
  it('counts stale builds and half-removed snapshots, sync and async; gc then finds none', async () => {
    const dir = join(tempDir(), 'store');
    SnapshotStore.openSync(dir).closeSync();
    mkdirSync(join(dir, 'tmp', `build-${'a'.repeat(32)}`));
    writeTree(join(dir, 'tmp', `build-${'b'.repeat(32)}`), { 'copy/f': 'x' });
    mkdirSync(join(dir, 'tmp', `rm-${'c'.repeat(24)}`));
    const store = await SnapshotStore.open(dir);
    expect(store.sweptAtOpen).toBe(3);
    expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
    expect(store.gc()).toBe(0);
    // A policy belongs to prune: given to gc it was ignored without a word (nothing removed, 0 returned).
    expectError(() => store.gc({ keepLast: 1 } as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.keepLast' is not an option of gc (clone): snapshots are removed by a policy with prune(). Received 1",
    });
    await store.close();
    mkdirSync(join(dir, 'tmp', `build-${'d'.repeat(32)}`));
    const sync = SnapshotStore.openSync(dir);
    expect(sync.sweptAtOpen).toBe(1);
    expect(SnapshotStore.openSync(dir).sweptAtOpen).toBe(0);
    sync.closeSync();
  });
});

describe('a directory that is not a store', () => {
  it('one that holds anything a store does not is SEAL_COLLISION naming it, sync and async, ephemeral or not; nothing written, and an ephemeral open never removes it', async () => {
    const base = tempDir();
    const project = join(base, 'project');
    writeTree(project, { 'src/main.c': 'code\n', README: 'readme\n' });
    const before = readdirSync(project).sort();
    const message = `not a treeseal store: ${project} holds README (a store holds only snapshots/, tmp/, leases/, cache/, clones/ and lock): name a new or empty directory, or a store`;
    for (const ephemeral of [false, true]) {
      expect(() => SnapshotStore.openSync(project, { ephemeral })).toThrow(expect.objectContaining({ code: 'SEAL_COLLISION', message, path: project }));
      await expect(SnapshotStore.open(project, { ephemeral })).rejects.toMatchObject({ code: 'SEAL_COLLISION', message, path: project });
    }
    expect(readdirSync(project).sort()).toEqual(before);
    expect(readdirSync(join(project, 'src'))).toEqual(['main.c']);
    // An empty directory, a store, and a filesystem's lost+found beside a store's parts are fine.
    const empty = join(base, 'empty');
    mkdirSync(empty);
    SnapshotStore.openSync(empty).closeSync();
    mkdirSync(join(empty, 'lost+found'));
    const again = await SnapshotStore.open(empty, { ephemeral: true });
    await again.close();
    expect(readdirSync(base).sort()).toEqual(['project']);
    // A store holding a part a later treeseal added (a file, a directory): still a store, the part left alone (it locked
    // every build out of the store: SEAL_COLLISION). A directory that only holds a lock file or snapshots/ is none.
    const store = join(base, 'store');
    SnapshotStore.openSync(store).closeSync();
    writeTree(store, { VERSION: '2\n', 'registry/x': 'later' });
    const later = SnapshotStore.openSync(store);
    expect(later.sweptAtOpen).toBe(0);
    later.closeSync();
    expect(readdirSync(store).sort()).toEqual(['VERSION', 'lock', 'registry', 'leases', 'snapshots', 'tmp'].sort());
    // Opened ephemeral, whose close removes the whole directory: those names are refused as before.
    expect(() => SnapshotStore.openSync(store, { ephemeral: true })).toThrow(expect.objectContaining({ code: 'SEAL_COLLISION' }));
    expect(readdirSync(store)).toContain('VERSION');
    // A home directory that happens to hold a lock file and a snapshots/ directory is no store: nothing made, nothing removed.
    const home = join(base, 'home');
    writeTree(home, { lock: '', 'snapshots/': null, 'Documents/thesis.txt': 'mine' });
    for (const ephemeral of [false, true]) expect(() => SnapshotStore.openSync(home, { ephemeral })).toThrow(expect.objectContaining({ code: 'SEAL_COLLISION' }));
    expect(readdirSync(home).sort()).toEqual(['Documents', 'lock', 'snapshots']);
  });
});
