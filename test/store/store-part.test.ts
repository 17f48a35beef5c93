// store-part.test.ts: what root makes in another user's store is given to that user: giveTree's rules, and a build directory swapped in tmp/.
import { chmodSync, chownSync, linkSync, lstatSync, mkdirSync, readdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { foreignOwner, giveTree } from '../../dist/internal.js';
import { O_DIRECTORY, O_RDONLY, sys as nativeSys } from '../../dist/sys/index.js';
import { NOBODY, SOMEONE, checkNoFdLeaks, expectError, rootOrSkip, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const owner = (p: string): number => lstatSync(p).uid;

describe.runIf(rootOrSkip('chown'))('giveTree', () => {
  it("gives root's entries below and the directory itself, through descriptors: a link's own owner (never its target's), never a file with another name, never another user's entry", () => {
    const work = tempDir();
    const tree = join(work, 'build');
    writeTree(tree, { 'a.txt': 'a', 'deep/b.txt': 'b', 'deep/deeper/c.txt': 'c' });
    const outside = join(work, 'outside.txt');
    writeFileSync(outside, 'root keeps this');
    symlinkSync(outside, join(tree, 'link'));
    // A second name for a file elsewhere (as a stored copy an older snapshot shares): not given.
    linkSync(outside, join(tree, 'shared.txt'));
    writeFileSync(join(tree, 'theirs.txt'), 't');
    chownSync(join(tree, 'theirs.txt'), SOMEONE, SOMEONE);
    const fd = nativeSys.openat(-100, tree, O_RDONLY | O_DIRECTORY, 0);
    try {
      expect(giveTree(nativeSys, fd, { uid: NOBODY, gid: NOBODY })).toBe(true);
    } finally {
      nativeSys.close(fd);
    }
    const owners = Object.fromEntries(['', 'a.txt', 'deep', 'deep/b.txt', 'deep/deeper', 'deep/deeper/c.txt', 'link', 'shared.txt', 'theirs.txt'].map((p) => [p, owner(join(tree, p))]));
    expect(owners).toEqual({ '': NOBODY, 'a.txt': NOBODY, deep: NOBODY, 'deep/b.txt': NOBODY, 'deep/deeper': NOBODY, 'deep/deeper/c.txt': NOBODY, link: NOBODY, 'shared.txt': 0, 'theirs.txt': SOMEONE });
    expect(owner(outside)).toBe(0);
  });

  it('stops where the system refuses a chown (EPERM: root without CAP_CHOWN), leaving the rest root\'s; a tree not root\'s is left as it is', () => {
    const work = tempDir();
    const tree = join(work, 'build');
    writeTree(tree, { 'a/x': 'x', b: 'b' });
    const refusing = wrapSys({ fchownat: () => () => { throw Object.assign(new Error('EPERM: operation not permitted, fchownat'), { code: 'EPERM', errno: -1, syscall: 'fchownat' }); } });
    const fd = nativeSys.openat(-100, tree, O_RDONLY | O_DIRECTORY, 0);
    try {
      expect(giveTree(refusing, fd, { uid: NOBODY, gid: NOBODY })).toBe(false);
      expect(owner(tree)).toBe(0);
      chownSync(tree, SOMEONE, SOMEONE);
      expect(giveTree(nativeSys, fd, { uid: NOBODY, gid: NOBODY })).toBe(true);
      expect([owner(tree), owner(join(tree, 'b'))]).toEqual([SOMEONE, 0]);
    } finally {
      nativeSys.close(fd);
    }
  });

  it("foreignOwner: the owner of a store only that user can write, for root; none for root's own store, a group- or world-writable one", () => {
    const work = tempDir();
    const dir = join(work, 's');
    mkdirSync(dir, { mode: 0o700 });
    const at = (mode: number, uid: number): unknown => {
      chownSync(dir, uid, uid);
      chmodSync(dir, mode);
      const fd = nativeSys.openat(-100, dir, O_RDONLY | O_DIRECTORY, 0);
      try {
        return foreignOwner(nativeSys, fd);
      } finally {
        nativeSys.close(fd);
      }
    };
    expect([at(0o700, NOBODY), at(0o755, NOBODY), at(0o700, 0), at(0o770, NOBODY), at(0o3770, NOBODY)]).toEqual([{ uid: NOBODY, gid: NOBODY }, { uid: NOBODY, gid: NOBODY }, undefined, undefined, undefined]);
  });
});

describe('a build directory swapped in the store\'s tmp/', () => {
  it.runIf(rootOrSkip('chown'))("between its mkdir and its open (another user's directory at its name): SEAL_CHANGED, nothing built in it, nothing published, the other directory left as it was", () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a': 'a' });
    const dir = join(work, 'store');
    SnapshotStore.openSync(dir).closeSync();
    const planted = join(work, 'planted');
    writeTree(planted, { keep: 'theirs' });
    chownSync(planted, NOBODY, NOBODY);
    chmodSync(planted, 0o700);
    const swapping = wrapSys({
      mkdirat: (orig) => (dirfd, name, mode) => {
        orig(dirfd, name, mode);
        if (typeof name === 'string' && name.startsWith('build-')) {
          renameSync(join(dir, 'tmp', name), join(work, 'moved-away'));
          renameSync(planted, join(dir, 'tmp', name));
        }
      },
    });
    const store = SnapshotStore.openSync(dir, { sys: swapping });
    expectError(() => store.captureSync({ source: join(work, 'repo'), copy: ['src'] }), { code: 'SEAL_CHANGED', message: /^the store's tmp\/build-[0-9a-f]{32} was replaced while it was made \(another user's directory, or one not empty, in its place\): try again$/ });
    store.closeSync();
    const [left] = readdirSync(join(dir, 'tmp'));
    expect(readdirSync(join(dir, 'tmp', left!))).toEqual(['keep']);
    expect(owner(join(dir, 'tmp', left!))).toBe(NOBODY);
    expect(readdirSync(join(dir, 'snapshots'))).toEqual([]);
  });
});
