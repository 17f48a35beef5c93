// roots.test.ts: every root path the API takes is absolute, canonical and traverses no symlink, with or without openat2.
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, freezeSync, readStableSync, stageFilesSync, thawSync, writeFrozenFileSync } from '../../dist/index.js';
import type { Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

function enosys(syscall: string): Error {
  return Object.assign(new Error(`ENOSYS: function not implemented, ${syscall}`), { errno: -38, code: 'ENOSYS', syscall });
}

/** The real layer, and one whose openat2 is missing (old kernel) or forbidden (seccomp), to exercise the per-component walk. */
const LAYERS: [string, Sys | undefined][] = [
  ['openat2', undefined],
  ['per-component walk (ENOSYS)', wrapSys({ openat2: () => () => { throw enosys('openat2'); } })],
  ['per-component walk (EPERM)', wrapSys({ openat2: () => () => { throw Object.assign(new Error('EPERM'), { errno: -1, code: 'EPERM', syscall: 'openat2' }); } })],
];

/** <work>/real/inner (a real tree) and <work>/link -> real. */
function linked(): { work: string; real: string; via: string } {
  const work = tempDir();
  const real = join(work, 'real');
  writeTree(real, { 'inner/a/f': 'x', 'inner/file': 'y' });
  symlinkSync(real, join(work, 'link'));
  return { work, real, via: join(work, 'link', 'inner') };
}

describe.each(LAYERS)('root paths (%s)', (_name, sys) => {
  const opts = sys === undefined ? {} : { sys };

  it('a capture source reached through a symlinked ancestor is refused', () => {
    const { work, via } = linked();
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, ...opts });
    expectError(() => store.captureSync({ source: via, copy: ['a'] }), { code: 'SEAL_SYMLINK', message: `source must not traverse symlinks: ${via}` });
    expectError(() => store.captureSync({ source: join(work, 'link'), copy: ['inner'] }), { code: 'SEAL_SYMLINK', message: `source must be a real directory, not a symlink: ${join(work, 'link')}` });
    expect(readdirSync(join(store.root, 'snapshots'))).toEqual([]);
    store.closeSync();
  });

  it('relative and non-canonical roots are refused, not resolved against the cwd', () => {
    const { work, real } = linked();
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, ...opts });
    expectError(() => store.captureSync({ source: 'real/inner', copy: ['a'] }), { code: 'SEAL_BAD_PATH', message: 'source must be an absolute path: real/inner' });
    for (const bad of [`${real}/./inner`, `${real}/../real/inner`, `${real}//inner`]) {
      expectError(() => store.captureSync({ source: bad, copy: ['a'] }), { code: 'SEAL_BAD_PATH', message: `source must be a canonical path (no '.', '..' or empty components): ${bad}` });
    }
    const snap = store.captureSync({ source: `${real}/inner/`, copy: ['a'] });
    expect(snap.source).toBe(`${real}/inner`);
    expectError(() => snap.materializeSync('clone'), { code: 'SEAL_BAD_PATH', message: 'clone must be an absolute path: clone' });
    expectError(() => freezeSync('real', opts), { code: 'SEAL_BAD_PATH', message: 'directory must be an absolute path: real' });
    expectError(() => readStableSync('file', { maxBytes: 10, ...opts }), { code: 'SEAL_BAD_PATH', message: 'file must be an absolute path: file' });
    store.closeSync();
  });

  it('a store, a clone, a stage parent and a freeze root behind a symlink are refused, writing nothing there', () => {
    const { work, real, via } = linked();
    expectError(() => SnapshotStore.openSync(join(via, 'store'), opts), { code: 'SEAL_SYMLINK', message: `store directory must not traverse symlinks: ${join(via, 'store')}` });
    expect(existsSync(join(real, 'inner/store'))).toBe(false);
    expectError(() => stageFilesSync(via, [{ target: 'x', bytes: Buffer.from('x') }], opts), { code: 'SEAL_SYMLINK', message: `stage parent must not traverse symlinks: ${via}` });
    expect(readdirSync(join(real, 'inner')).sort()).toEqual(['a', 'file']);
    expectError(() => freezeSync(via, opts), { code: 'SEAL_SYMLINK', message: `directory must not traverse symlinks: ${via}` });
    expectError(() => thawSync(via, opts), { code: 'SEAL_SYMLINK', message: `directory must not traverse symlinks: ${via}` });
    expectError(() => readStableSync(join(via, 'file'), { maxBytes: 10, ...opts }), { code: 'SEAL_SYMLINK', message: `parent directory must not traverse symlinks: ${via}` });
    expectError(() => writeFrozenFileSync(join(via, 'new'), Buffer.from('x'), opts), { code: 'SEAL_SYMLINK', message: `parent directory must not traverse symlinks: ${via}` });
    expect(existsSync(join(real, 'inner/new'))).toBe(false);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, ...opts });
    writeTree(join(work, 'repo'), { 'src/f': 'z' });
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
    expectError(() => snap.materializeSync(via), { code: 'SEAL_SYMLINK', message: `clone must not traverse symlinks: ${via}` });
    expectError(() => snap.mountPoints(via), { code: 'SEAL_SYMLINK', message: `clone must not traverse symlinks: ${via}` });
    expect(existsSync(join(real, 'inner/src'))).toBe(false);
    store.closeSync();
  });

  it('a missing store is created component by component, never through a link', () => {
    const { work, real } = linked();
    const deep = join(work, 'a/b/c/store');
    const store = SnapshotStore.openSync(deep, opts);
    expect(readdirSync(deep).sort()).toEqual(['leases', 'lock', 'snapshots', 'tmp']);
    store.closeSync();
    const through = join(work, 'link', 'made', 'store');
    expectError(() => SnapshotStore.openSync(through, opts), { code: 'SEAL_SYMLINK', message: `store directory must not traverse symlinks: ${through}` });
    expect(existsSync(join(real, 'made'))).toBe(false);
    mkdirSync(join(work, 'plain'));
    writeFileSync(join(work, 'plain/file'), 'x');
    expectError(() => SnapshotStore.openSync(join(work, 'plain/file/store'), opts), { code: 'SEAL_BAD_PATH', unchanged: join(work, 'plain') });
  });

  it('a store path past what one call takes (4096 bytes) is SEAL_LIMIT, and nothing is made on the way (its first components were, and stayed)', () => {
    const { work } = linked();
    let deep = join(work, 'long');
    while (deep.length < 3800) deep = join(deep, 'x'.repeat(200));
    mkdirSync(deep, { recursive: true });
    const store = join(deep, 'n'.repeat(200), 'm'.repeat(100), 'eph');
    const message = `store directory path is longer than one system call takes (${Buffer.byteLength(store)} bytes, at most 4095): ${store}`;
    expectError(() => SnapshotStore.openSync(store, { ...opts, ephemeral: true }), { code: 'SEAL_LIMIT', message, path: store, unchanged: deep });
  });
});
