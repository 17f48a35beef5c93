// clone-paths.test.ts: the clone-side path checks (src/store/clone-paths.ts): createClone makes only the clone itself, below a
// real parent; a special file on the way to a copy root is renamed out; a mount target's parent swapped for a symlink,
// a file or a special file after the checks and before it is opened is still refused. Each title names the mutation it kills.
import { chownSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import { O_CREAT, type Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, failOnce, listTree, mkfifo, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

function fixture(tree: Record<string, string | null>, options: { copy?: string[]; mounts?: string[] }): { work: string; store: SnapshotStore; snap: Snapshot } {
  const work = tempDir();
  writeTree(join(work, 'repo'), tree);
  const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
  const snap = store.captureSync({ source: join(work, 'repo'), copy: options.copy ?? [], mounts: (options.mounts ?? []).map((m) => ({ source: m, target: m })) });
  return { work, store, snap };
}

function withSys(snap: Snapshot, sys: Sys): Snapshot {
  return new Snapshot(snap.root, snap.toJSON(), { sys });
}

describe('createClone', () => {
  it('makes a missing clone on the worker thread, 0700 whatever the umask (an agent\'s workspace; 0777 less a umask of 0 made a clone its own check refused), and fills an existing one (kills makeCloneDir emptied, and its EEXIST escape replaced by true)', async () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    const clone = join(work, 'clone');
    expect(await snap.materialize(clone, { createClone: true })).toMatchObject({ files: 1 });
    expect(statSync(clone).mode & 0o7777).toBe(0o700);
    expect(readFileSync(join(clone, 'src/a'), 'utf8')).toBe('alpha');
    writeFileSync(join(clone, 'keep'), 'k');
    writeFileSync(join(clone, 'src/a'), 'changed');
    expect(await snap.materialize(clone, { createClone: true })).toMatchObject({ files: 1, reset: true });
    expect(readFileSync(join(clone, 'src/a'), 'utf8')).toBe('alpha');
    expect(readdirSync(clone).sort()).toEqual(['keep', 'src']);
    expect(snap.materializeSync(join(work, 'sync-clone'), { createClone: true })).toMatchObject({ files: 1 });
    store.closeSync();
  });

  it('a clone the kernel will not make (EINVAL) is SEAL_UNAVAILABLE naming it and its cause, nothing made (kills the EEXIST check replaced by false, and the message emptied)', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    const clone = join(work, 'clone');
    const { sys, injected } = failOnce('mkdirat', 'EINVAL', (_dirfd, name) => name === basename(clone));
    const err = expectError(() => withSys(snap, sys).materializeSync(clone, { createClone: true }), {
      code: 'SEAL_UNAVAILABLE',
      message: `clone cannot be created: ${clone}: EINVAL: injected, mkdirat`,
      unchanged: work,
    });
    expect((err as Error & { cause?: unknown }).cause).toBe(injected());
    store.closeSync();
  });

  it('a clone the kernel refuses to make (EACCES) is SEAL_IO, as every other refusal', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    const clone = join(work, 'clone');
    const { sys } = failOnce('mkdirat', 'EACCES', (_dirfd, name) => name === basename(clone));
    expectError(() => withSys(snap, sys).materializeSync(clone, { createClone: true }), {
      code: 'SEAL_IO',
      message: `clone cannot be created: ${clone}: EACCES: injected, mkdirat`,
      unchanged: work,
    });
    store.closeSync();
  });

  it('a materialize that fails removes the clone it made, empty, sync and async; a clone that was there already, or a made one that holds entries, stays (kills removeMadeClone emptied)', async () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    const clone = join(work, 'clone');
    // The copy of src/a fails (an injected EIO when the stage's file is made): nothing was swapped in.
    const failing = failOnce('openat', 'EIO', (_dirfd, name, flags) => name === 'a' && (flags & O_CREAT) !== 0).sys;
    expectError(() => withSys(snap, failing).materializeSync(clone, { createClone: true }), { code: 'SEAL_IO', unchanged: work });
    expect(readdirSync(work).sort()).toEqual(['repo', 'store']);
    // The same through the CLI's path and the async call: no clone left for a later run to take as one.
    await expect(withSys(snap, failOnce('openat', 'EIO', (_dirfd, name, flags) => name === 'a' && (flags & O_CREAT) !== 0).sys).materialize(clone, { createClone: true })).rejects.toMatchObject({ code: 'SEAL_IO' });
    expect(readdirSync(work).sort()).toEqual(['repo', 'store']);
    // A clone directory that was there before the call is the caller's: it stays, empty.
    mkdirSync(clone);
    expectError(() => withSys(snap, failOnce('openat', 'EIO', (_dirfd, name, flags) => name === 'a' && (flags & O_CREAT) !== 0).sys).materializeSync(clone, { createClone: true }), { code: 'SEAL_IO' });
    expect(readdirSync(clone)).toEqual([]);
    rmSync(clone, { recursive: true });
    // Replaced meanwhile (moved away, another empty directory made at its name, as the copy fails): neither is
    // removed, the one there now not being the one made (kills removeMadeClone's identity check replaced by true).
    const swapping = failOnce('openat', 'EIO', (_dirfd, name, flags) => {
      if (name !== 'a' || (flags & O_CREAT) === 0) return false;
      renameSync(clone, `${clone}.moved`);
      mkdirSync(clone);
      return true;
    }).sys;
    expectError(() => withSys(snap, swapping).materializeSync(clone, { createClone: true }), { code: 'SEAL_IO' });
    expect(readdirSync(work).sort()).toEqual(['clone', 'clone.moved', 'repo', 'store']);
    store.closeSync();
  });

  it('a clone whose parent is reached through a symlink is refused naming the clone parent, nothing made there (kills the label "clone parent" emptied)', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    mkdirSync(join(work, 'real'));
    symlinkSync(join(work, 'real'), join(work, 'link'));
    const err = expectError(() => snap.materializeSync(join(work, 'link/clone'), { createClone: true }), { code: 'SEAL_SYMLINK', unchanged: work });
    expect(err.message).toMatch(/^clone parent /);
    expect(readdirSync(join(work, 'real'))).toEqual([]);
    store.closeSync();
  });
});

describe('a special file on the way to a copy root', () => {
  it('a FIFO where a copy root\'s parent must be is renamed out whole, never opened, and a directory made there, on the worker thread and on the caller\'s (the swap\'s displacement of what is not a directory)', async () => {
    const { work, store, snap } = fixture({ 'a/b/c': 'x' }, { copy: ['a/b'] });
    for (const run of [async (c: string) => snap.materialize(c), async (c: string) => snap.materializeSync(c)]) {
      const clone = join(work, `clone-${Math.random().toString(16).slice(2)}`);
      mkdirSync(clone);
      // The copy root is a/b: a FIFO stands where its parent directory a must be.
      mkfifo(join(clone, 'a'));
      expect(await run(clone)).toMatchObject({ files: 1, directories: 2 });
      expect(listTree(clone)).toEqual(['a/', 'a/b/', 'a/b/c']);
      expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    }
    store.closeSync();
  });
});

describe('a mount target\'s parent changed after the checks, before it is opened', () => {
  /** Two mounts, web/node_modules (prepared first) and api/node_modules; the clone holds web/ and api/ already. */
  function twoMounts(): { work: string; store: SnapshotStore; snap: Snapshot; clone: string; outside: string } {
    const { work, store, snap } = fixture({ 'web/node_modules/p/i.js': '1', 'api/node_modules/q/i.js': '2' }, { mounts: ['web/node_modules', 'api/node_modules'] });
    const clone = join(work, 'clone');
    writeTree(clone, { 'web/keep': 'k', 'api/keep': 'k' });
    const outside = join(work, 'outside');
    mkdirSync(outside);
    return { work, store, snap, clone, outside };
  }

  /**
   * A syscall layer that, once the first mount target is made (its mkdirat), runs swap right
   * before the next `call` (fstatat or openat) of the name `api`: after every check, before
   * openMountParent looks at api again.
   */
  function swapApiAfterFirstTarget(call: 'fstatat' | 'openat', swap: () => void): Sys {
    let made = false;
    let swapped = false;
    const maybe = (path: string): void => {
      if (made && !swapped && path === 'api') {
        swapped = true;
        swap();
      }
    };
    return wrapSys({
      mkdirat: (orig) => (dirfd, path, mode) => {
        orig(dirfd, path, mode);
        made = true;
      },
      fstatat: (orig) => (dirfd, path, flags) => {
        if (call === 'fstatat') maybe(String(path));
        return orig(dirfd, path, flags);
      },
      openat: (orig) => (dirfd, path, flags, mode) => {
        if (call === 'openat') maybe(String(path));
        return orig(dirfd, path, flags, mode);
      },
    });
  }

  it('swapped for a symlink before its fstatat: SEAL_SYMLINK, nothing made through it (kills openMountParent\'s isLink check replaced by false)', () => {
    const { store, snap, clone, outside } = twoMounts();
    const sys = swapApiAfterFirstTarget('fstatat', () => {
      renameSync(join(clone, 'api'), join(clone, 'api-moved'));
      symlinkSync(outside, join(clone, 'api'));
    });
    expectError(() => withSys(snap, sys).mountPoints(clone), { code: 'SEAL_SYMLINK', message: 'mount target cannot traverse a symlink: api/node_modules', path: 'api/node_modules' });
    expect(readdirSync(outside)).toEqual([]);
    store.closeSync();
  });

  it('swapped for a symlink between its fstatat and its open: SEAL_SYMLINK with the open\'s ENOTDIR as cause (kills openMountParent\'s catch emptied, its test replaced by false, or its ENOTDIR emptied)', () => {
    const { store, snap, clone, outside } = twoMounts();
    const sys = swapApiAfterFirstTarget('openat', () => {
      renameSync(join(clone, 'api'), join(clone, 'api-moved'));
      symlinkSync(outside, join(clone, 'api'));
    });
    const err = expectError(() => withSys(snap, sys).mountPoints(clone), { code: 'SEAL_SYMLINK', message: 'mount target cannot traverse a symlink: api/node_modules', path: 'api/node_modules' });
    // openat(O_DIRECTORY | O_NOFOLLOW) of a symlink: Linux answers ENOTDIR.
    expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('ENOTDIR');
    expect(readdirSync(outside)).toEqual([]);
    store.closeSync();
  });

  it('swapped for a regular file before its fstatat: SEAL_COLLISION, the file kept (kills openMountParent\'s isDir check replaced by false)', () => {
    const { store, snap, clone } = twoMounts();
    const sys = swapApiAfterFirstTarget('fstatat', () => {
      renameSync(join(clone, 'api'), join(clone, 'api-moved'));
      writeFileSync(join(clone, 'api'), 'a file');
    });
    expectError(() => withSys(snap, sys).mountPoints(clone), { code: 'SEAL_COLLISION', message: 'mount target parent exists with another type: api/node_modules', path: 'api/node_modules' });
    expect(readFileSync(join(clone, 'api'), 'utf8')).toBe('a file');
    store.closeSync();
  });
});

describe('a mount target\'s parent that cannot be opened for another reason', () => {
  function twoMountsCloned(): { store: SnapshotStore; snap: Snapshot; clone: string } {
    const { work, store, snap } = fixture({ 'web/node_modules/p/i.js': '1', 'api/node_modules/q/i.js': '2' }, { mounts: ['web/node_modules', 'api/node_modules'] });
    const clone = join(work, 'clone');
    writeTree(clone, { 'web/keep': 'k', 'api/keep': 'k' });
    return { store, snap, clone };
  }

  /** Like swapApiAfterFirstTarget('openat'), but the openat of api itself fails with code (nothing is swapped). */
  function apiOpenFailsAfterFirstTarget(code: string): Sys {
    let made = false;
    let failed = false;
    return wrapSys({
      mkdirat: (orig) => (dirfd, path, mode) => {
        orig(dirfd, path, mode);
        made = true;
      },
      openat: (orig) => (dirfd, path, flags, mode) => {
        if (made && !failed && path === 'api') {
          failed = true;
          throw Object.assign(new Error(`${code}: injected, openat`), { code, errno: code === 'EMFILE' ? -24 : -40, syscall: 'openat' });
        }
        return orig(dirfd, path, flags, mode);
      },
    });
  }

  it('EMFILE is SEAL_IO, not a symlink (kills the ELOOP/ENOTDIR test of openMountParent\'s catch replaced by true)', () => {
    const { store, snap, clone } = twoMountsCloned();
    expectError(() => withSys(snap, apiOpenFailsAfterFirstTarget('EMFILE')).mountPoints(clone), { code: 'SEAL_IO', message: 'mountPoints: EMFILE: injected, openat' });
    store.closeSync();
  });

  it('ELOOP (how an open of a symlink with O_NOFOLLOW fails without O_DIRECTORY) is SEAL_SYMLINK with it as cause (kills the ELOOP code of openMountParent\'s catch emptied)', () => {
    const { store, snap, clone } = twoMountsCloned();
    const err = expectError(() => withSys(snap, apiOpenFailsAfterFirstTarget('ELOOP')).mountPoints(clone), { code: 'SEAL_SYMLINK', message: 'mount target cannot traverse a symlink: api/node_modules' });
    expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('ELOOP');
    store.closeSync();
  });
});

describe('more clone checks', () => {
  it('mountPoints with a clone that is not a string is Node\'s TypeError naming "clone" (kills checkCloneOutsideStore\'s typeof check replaced by false)', () => {
    const { store, snap } = fixture({ 'deps/f': 'x' }, { mounts: ['deps'] });
    expect(() => snap.mountPoints(123 as never)).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: expect.stringMatching(/^The "clone" argument must be of type string/) }));
    store.closeSync();
  });

  it('a stat of a copy root in the clone that fails (EIO) is SEAL_IO, not taken for a missing root (kills statOrNull\'s ENOENT test replaced by true)', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    const clone = join(work, 'clone');
    writeTree(clone, { 'src/old': 'old' });
    const { sys } = failOnce('fstatat', 'EIO', (_dirfd, name) => name === 'src');
    expectError(() => withSys(snap, sys).materializeSync(clone), { code: 'SEAL_IO', message: 'materialize: EIO: injected, fstatat', unchanged: work });
    store.closeSync();
  });

  it('a symlink two levels down a copy root\'s path is renamed out, never written through: nothing is made below the link (kills the swap\'s walk above a root stopping at the first level)', () => {
    const { work, store, snap } = fixture({ 'a/b/c/d': 'x' }, { copy: ['a/b/c'] });
    const clone = join(work, 'clone');
    mkdirSync(join(clone, 'a'), { recursive: true });
    mkdirSync(join(work, 'outside'));
    writeFileSync(join(work, 'outside/keep'), 'k');
    symlinkSync(join(work, 'outside'), join(clone, 'a/b'));
    const writes: string[] = [];
    const sys = wrapSys({
      mkdirat: (orig) => (dirfd, path, mode) => {
        writes.push(`mkdirat ${String(path)}`);
        orig(dirfd, path, mode);
      },
    });
    expect(withSys(snap, sys).materializeSync(clone)).toMatchObject({ files: 1 });
    expect(listTree(clone)).toEqual(['a/', 'a/b/', 'a/b/c/', 'a/b/c/d']);
    expect(listTree(join(work, 'outside'))).toEqual(['keep']);
    // b made in the clone in the link's place (the stage's own directories aside): never c below the link.
    expect(writes.filter((w) => w === 'mkdirat b' || w === 'mkdirat c')).toEqual(['mkdirat b', 'mkdirat c', 'mkdirat b']);
    store.closeSync();
  });

  it('two top-level mount targets are both made, each on its own open of the clone (kills openMountParent\'s reopen of the clone for no parts replaced by false)', () => {
    const { work, store, snap } = fixture({ 'node_modules/p/i.js': '1', 'vendor/v/i.js': '2' }, { mounts: ['node_modules', 'vendor'] });
    const clone = join(work, 'clone');
    mkdirSync(clone);
    expect(snap.mountPoints(clone).map((m) => m.target)).toEqual(['/workspace/node_modules', '/workspace/vendor']);
    expect(listTree(clone)).toEqual(['node_modules/', 'vendor/']);
    expect(snap.mountPoints(clone).map((m) => m.target)).toEqual(['/workspace/node_modules', '/workspace/vendor']);
    store.closeSync();
  });

  it('a mount target of another type names its path (kills targetCollision\'s { path } emptied)', () => {
    const { work, store, snap } = fixture({ 'node_modules/p/i.js': '1' }, { mounts: ['node_modules'] });
    const clone = join(work, 'clone');
    writeTree(clone, { node_modules: 'a file' });
    expectError(() => snap.mountPoints(clone), { code: 'SEAL_COLLISION', message: 'mount target exists with another type: node_modules', path: 'node_modules', unchanged: clone });
    store.closeSync();
  });

  it('a FIFO at a mount target or at its parent is SEAL_SPECIAL_FILE naming the target, and nothing is opened or made (kills preflightMount\'s type check, its message and its { path })', () => {
    const { work, store, snap } = fixture({ 'lib/deps/p/i.js': '1' }, { mounts: ['lib/deps'] });
    const atTarget = join(work, 'at-target');
    mkdirSync(join(atTarget, 'lib'), { recursive: true });
    mkfifo(join(atTarget, 'lib/deps'));
    expectError(() => snap.mountPoints(atTarget), { code: 'SEAL_SPECIAL_FILE', message: 'mount target has an unsupported type: lib/deps', path: 'lib/deps', unchanged: atTarget });
    const atParent = join(work, 'at-parent');
    mkdirSync(atParent);
    mkfifo(join(atParent, 'lib'));
    expectError(() => snap.mountPoints(atParent), { code: 'SEAL_SPECIAL_FILE', message: 'mount target parent has an unsupported type: lib/deps', path: 'lib/deps', unchanged: atParent });
    store.closeSync();
  });

  it('a symlink two levels up a mount target is SEAL_SYMLINK naming the target, and nothing is made through it; a regular file there is a parent collision (kills preflightMount\'s walk stopping at the first level, and its { path })', () => {
    const { work, store, snap } = fixture({ 'a/b/deps/p/i.js': '1' }, { mounts: ['a/b/deps'] });
    const clone = join(work, 'clone');
    mkdirSync(join(clone, 'a'), { recursive: true });
    mkdirSync(join(work, 'outside'));
    symlinkSync(join(work, 'outside'), join(clone, 'a/b'));
    expectError(() => snap.mountPoints(clone), { code: 'SEAL_SYMLINK', message: 'mount target has a symlink parent: a/b/deps', path: 'a/b/deps', unchanged: work });
    expect(readdirSync(join(work, 'outside'))).toEqual([]);
    rmSync(join(clone, 'a/b'));
    writeFileSync(join(clone, 'a/b'), 'a file');
    expectError(() => snap.mountPoints(clone), { code: 'SEAL_COLLISION', message: 'mount target parent exists with another type: a/b/deps', path: 'a/b/deps', unchanged: clone });
    store.closeSync();
  });

  it('a clone whose path runs through a regular file is refused as that, not as an overlap check\'s raw ENOTDIR (kills identityAt\'s ENOTDIR escape)', async () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, { copy: ['src'] });
    writeFileSync(join(work, 'file'), 'f');
    const clone = join(work, 'file/clone');
    expectError(() => snap.materializeSync(clone, { createClone: true }), { code: 'SEAL_BAD_PATH', message: `clone parent must be a real directory: ${join(work, 'file')}`, unchanged: work });
    await expect(snap.materialize(clone, { createClone: true })).rejects.toMatchObject({ code: 'SEAL_BAD_PATH', message: `clone parent must be a real directory: ${join(work, 'file')}` });
    expectError(() => snap.diffSync(clone), { code: 'SEAL_BAD_PATH', message: `clone must be a real directory: ${clone}` });
    expect(readdirSync(work).sort()).toEqual(['file', 'repo', 'store']);
    store.closeSync();
  });

  it.skipIf(process.geteuid?.() !== 0)('a directory above a copy root given to another user between its stat and its open is SEAL_UNTRUSTED, checked again on the open fd, which is closed (kills openRootParentDir\'s second owner check and its close on the way out)', () => {
    const { work, store, snap } = fixture({ 'deps/lib/a': 'alpha' }, { copy: ['deps/lib'] });
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    writeFileSync(join(clone, 'deps/lib/a'), 'changed');
    let given = false;
    const sys = wrapSys({
      openat: (orig) => (dirfd, name, flags, mode) => {
        if (!given && name === 'deps') {
          given = true;
          chownSync(join(clone, 'deps'), 999, 999);
        }
        return orig(dirfd, name, flags, mode);
      },
    });
    expectError(() => withSys(snap, sys).resetSync(clone), { code: 'SEAL_UNTRUSTED', message: "untrusted clone: deps, above a copy root, is owned by uid 999, not by the clone's owner (uid 0); fix: remove it", path: 'deps' });
    expect(given).toBe(true);
    expect(readFileSync(join(clone, 'deps/lib/a'), 'utf8')).toBe('changed');
    store.closeSync();
  });
});
