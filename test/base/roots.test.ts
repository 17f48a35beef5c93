// roots.test.ts: every root path the API takes is absolute, canonical and traverses no symlink, with or without openat2.
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, freezeSync, readStableSync, stageFilesSync, thawSync, writeFrozenFileSync, type SealError } from '../../dist/index.js';
import type { Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectSealError, tempDir, wrapSys, writeTree } from '../helpers.js';

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

function expectCode(err: SealError, code: string, message: string): void {
  expect([err.code, err.message]).toEqual([code, message]);
}

describe.each(LAYERS)('root paths (%s)', (_name, sys) => {
  const opts = sys === undefined ? {} : { sys };

  it('a capture source reached through a symlinked ancestor is refused', () => {
    const { work, via } = linked();
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, ...opts });
    expectCode(expectSealError(() => store.captureSync({ source: via, copy: ['a'] })), 'SEAL_SYMLINK', `source must not traverse symlinks: ${via}`);
    expectCode(expectSealError(() => store.captureSync({ source: join(work, 'link'), copy: ['inner'] })), 'SEAL_SYMLINK', `source must be a real directory, not a symlink: ${join(work, 'link')}`);
    expect(readdirSync(join(store.root, 'snapshots'))).toEqual([]);
    store.closeSync();
  });

  it('relative and non-canonical roots are refused, not resolved against the cwd', () => {
    const { work, real } = linked();
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, ...opts });
    expectCode(expectSealError(() => store.captureSync({ source: 'real/inner', copy: ['a'] })), 'SEAL_BAD_PATH', 'source must be an absolute path: real/inner');
    for (const bad of [`${real}/./inner`, `${real}/../real/inner`, `${real}//inner`]) {
      expectCode(expectSealError(() => store.captureSync({ source: bad, copy: ['a'] })), 'SEAL_BAD_PATH', `source must be a canonical path (no '.', '..' or empty components): ${bad}`);
    }
    const snap = store.captureSync({ source: `${real}/inner/`, copy: ['a'] });
    expect(snap.source).toBe(`${real}/inner`);
    expectCode(expectSealError(() => snap.materializeSync('clone')), 'SEAL_BAD_PATH', 'clone must be an absolute path: clone');
    expectCode(expectSealError(() => freezeSync('real', opts)), 'SEAL_BAD_PATH', 'directory must be an absolute path: real');
    expectCode(expectSealError(() => readStableSync('file', { maxBytes: 10, ...opts })), 'SEAL_BAD_PATH', 'parent directory must be an absolute path: .');
    store.closeSync();
  });

  it('a store, a clone, a stage parent and a freeze root behind a symlink are refused, writing nothing there', () => {
    const { work, real, via } = linked();
    expectCode(expectSealError(() => SnapshotStore.openSync(join(via, 'store'), opts)), 'SEAL_SYMLINK', `store directory must not traverse symlinks: ${join(via, 'store')}`);
    expect(existsSync(join(real, 'inner/store'))).toBe(false);
    expectCode(expectSealError(() => stageFilesSync(via, [{ target: 'x', bytes: Buffer.from('x') }], opts)), 'SEAL_SYMLINK', `stage parent must not traverse symlinks: ${via}`);
    expect(readdirSync(join(real, 'inner')).sort()).toEqual(['a', 'file']);
    expectCode(expectSealError(() => freezeSync(via, opts)), 'SEAL_SYMLINK', `directory must not traverse symlinks: ${via}`);
    expectCode(expectSealError(() => thawSync(via, opts)), 'SEAL_SYMLINK', `directory must not traverse symlinks: ${via}`);
    expectCode(expectSealError(() => readStableSync(join(via, 'file'), { maxBytes: 10, ...opts })), 'SEAL_SYMLINK', `parent directory must not traverse symlinks: ${via}`);
    expectCode(expectSealError(() => writeFrozenFileSync(join(via, 'new'), Buffer.from('x'), opts)), 'SEAL_SYMLINK', `parent directory must not traverse symlinks: ${via}`);
    expect(existsSync(join(real, 'inner/new'))).toBe(false);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true, ...opts });
    writeTree(join(work, 'repo'), { 'src/f': 'z' });
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
    expectCode(expectSealError(() => snap.materializeSync(via)), 'SEAL_SYMLINK', `clone must not traverse symlinks: ${via}`);
    expectCode(expectSealError(() => snap.mountPoints(via)), 'SEAL_SYMLINK', `clone must not traverse symlinks: ${via}`);
    expect(existsSync(join(real, 'inner/src'))).toBe(false);
    store.closeSync();
  });

  it('a missing store is created component by component, never through a link', () => {
    const { work, real } = linked();
    const deep = join(work, 'a/b/c/store');
    const store = SnapshotStore.openSync(deep, opts);
    expect(readdirSync(deep).sort()).toEqual(['lock', 'snapshots', 'tmp']);
    store.closeSync();
    const through = join(work, 'link', 'made', 'store');
    expectCode(expectSealError(() => SnapshotStore.openSync(through, opts)), 'SEAL_SYMLINK', `store directory must not traverse symlinks: ${through}`);
    expect(existsSync(join(real, 'made'))).toBe(false);
    mkdirSync(join(work, 'plain'));
    writeFileSync(join(work, 'plain/file'), 'x');
    expect(expectSealError(() => SnapshotStore.openSync(join(work, 'plain/file/store'), opts)).code).toBe('SEAL_BAD_PATH');
  });
});
