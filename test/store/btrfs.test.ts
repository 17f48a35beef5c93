// btrfs.test.ts: a store on btrfs keeps directory copy roots as read-only subvolumes; materialize snapshots them (on the btrfs loop mount; required when CI=true).
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, symlinkSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SnapshotStore, thawSync, type Snapshot } from '../../dist/index.js';
import * as S from '../../dist/sys/index.js';
import {
  DIST_INDEX,
  NOBODY,
  canDropPrivileges,
  checkNoFdLeaks,
  childJson,
  chownTree,
  expectError,
  fdCountingSys,
  isRoot,
  reflinkMount,
  runNodeAs,
  systemError,
  tempDir,
  wrapSys,
  writeTree,
  type RunAs,
} from '../helpers.js';

checkNoFdLeaks();

const btrfs = reflinkMount('btrfs');
const xfs = reflinkMount('xfs');
const TREE = { 'app/main.js': 'main', 'app/lib/a.js': 'alpha', 'app/run.sh': '#!/bin/sh\n', 'top.txt': 'top' };
const COPY = ['app', 'top.txt'];

/** The read-only flag of the subvolume at path; undefined when it is not a subvolume's root. */
function subvolumeFlags(path: string): number | undefined {
  const fd = S.sys.openat(S.AT_FDCWD, path, S.O_RDONLY | S.O_DIRECTORY | S.O_NOFOLLOW);
  try {
    return S.sys.btrfs_subvol_getflags(fd);
  } catch (err) {
    if (S.hasCode(err, 'EINVAL', 'ENOTTY')) return undefined;
    throw err;
  } finally {
    S.sys.close(fd);
  }
}

function setSubvolumeFlags(path: string, flags: number): void {
  const fd = S.sys.openat(S.AT_FDCWD, path, S.O_RDONLY | S.O_DIRECTORY | S.O_NOFOLLOW);
  try {
    S.sys.btrfs_subvol_setflags(fd, flags);
  } finally {
    S.sys.close(fd);
  }
}

const mode = (path: string): number => statSync(path).mode & 0o7777;

/** A source tree (app/run.sh executable) in a new directory below base. */
function repo(base: string): string {
  const dir = join(tempDir(base), 'repo');
  writeTree(dir, TREE);
  chmodSync(join(dir, 'app/run.sh'), 0o755);
  return dir;
}

describe.skipIf(btrfs === undefined)('a store on btrfs', () => {
  const capture = (store: SnapshotStore, source: string, keepTimes = false): Snapshot =>
    store.captureSync({ source, copy: COPY, keepExecutable: true, keepTimes, links: 'contained' });

  it('keeps each directory copy root as a read-only subvolume at a clone\'s modes; a file root stays frozen; the digest is the one any store gives', () => {
    const base = tempDir(btrfs);
    const source = repo(base);
    symlinkSync('a.js', join(source, 'app/lib/link.js'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const snap = capture(store, source);
    const copy = join(snap.root, 'copy');
    expect(statSync(join(copy, 'app')).ino).toBe(256);
    expect(subvolumeFlags(join(copy, 'app'))).toBe(S.BTRFS_SUBVOL_RDONLY);
    expect([mode(join(copy, 'app')), mode(join(copy, 'app/lib')), mode(join(copy, 'app/main.js')), mode(join(copy, 'app/run.sh'))]).toEqual([0o700, 0o700, 0o600, 0o700]);
    expect([mode(copy), mode(join(copy, 'top.txt')), subvolumeFlags(copy)]).toEqual([0o500, 0o400, undefined]);
    expect(() => writeFileSync(join(copy, 'app/main.js'), 'x')).toThrow(expect.objectContaining({ code: 'EROFS' }));
    expect(snap.verifySync().entries).toBe(7);
    const elsewhere = SnapshotStore.openSync(join(tempDir(), 'store'), { ephemeral: true });
    expect(capture(elsewhere, source).digest).toBe(snap.digest);
    elsewhere.closeSync();
    store.closeSync();
    expect(existsSync(join(base, 'store'))).toBe(false);
  });

  it('materialize makes one writable snapshot per directory root: reported, exact (checkClone), the modes of any clone, writable without touching the store; again over it', () => {
    const base = tempDir(btrfs);
    const source = repo(base);
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    for (const keepTimes of [false, true]) {
      if (keepTimes) utimesSync(join(source, 'app/lib/a.js'), 1_600_000_000, 1_600_000_000);
      const snap = capture(store, source, keepTimes);
      const clone = join(base, `clone-${String(keepTimes)}`);
      const report = snap.materializeSync(clone, { createClone: true });
      expect(report).toMatchObject({ files: 4, directories: 2, snapshotted: 1, fallbacks: [], reflinked: 1, copied: 0 });
      expect(snap.checkCloneSync(clone).ok).toBe(true);
      expect([statSync(join(clone, 'app')).ino, subvolumeFlags(join(clone, 'app'))]).toEqual([256, 0]);
      expect([mode(join(clone, 'app')), mode(join(clone, 'app/lib')), mode(join(clone, 'app/main.js')), mode(join(clone, 'app/run.sh')), mode(join(clone, 'top.txt'))]).toEqual([0o700, 0o700, 0o600, 0o700, 0o600]);
      if (keepTimes) expect(statSync(join(clone, 'app/lib/a.js')).mtimeMs).toBe(1_600_000_000_000);
      writeFileSync(join(clone, 'app/main.js'), 'changed in the arm');
      writeFileSync(join(clone, 'app/new.txt'), 'new');
      // With keepTimes the root's recorded mtime is compared too (a new name in it moved it).
      expect(snap.checkCloneSync(clone)).toMatchObject({ ok: false, added: ['app/new.txt'], changed: keepTimes ? ['app', 'app/main.js'] : ['app/main.js'] });
      snap.verifySync();
      // The kernel made the root's entries: the store keeps no ledger of this clone, so diff
      // re-hashes (and finds what the arm did) and reset snapshots the root again.
      expect(existsSync(join(base, 'store/clones')) ? readdirSync(join(base, 'store/clones')) : []).toEqual([]);
      expect(snap.diffSync(clone)).toMatchObject({ method: 'hash', added: ['app/new.txt'] });
      expect(snap.resetSync(clone)).toMatchObject({ method: 'materialize', snapshotted: 1 });
      expect(snap.checkCloneSync(clone).ok).toBe(true);
      writeFileSync(join(clone, 'app/new.txt'), 'new');
      // Again over the arm: the old subvolume is swapped out and removed with the stage.
      expect(snap.materializeSync(clone)).toMatchObject({ snapshotted: 1, reset: false });
      expect(snap.checkCloneSync(clone).ok).toBe(true);
      expect(readdirSync(clone).sort()).toEqual(['app', 'top.txt']);
    }
    store.closeSync();
  });

  it('an agent\'s tree 3,000 levels deep in a snapshotted root is removed with the stage in a bounded number of fds: its deep directories are moved up within the root\'s own subvolume (into the stage above they failed EXDEV, and the removal held a descriptor per level: past 20,000 levels the tree stayed in a stage for good)', () => {
    const base = tempDir(btrfs);
    const source = repo(base);
    const { sys, most, reset } = fdCountingSys();
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true, sys });
    const snap = capture(store, source);
    const clone = join(base, 'clone');
    expect(snap.materializeSync(clone, { createClone: true })).toMatchObject({ snapshotted: 1 });
    const deep = (): void => {
      execFileSync('python3', ['-c', 'import os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfor i in range(3000):\n    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d))\n    os.mkdir("d", dir_fd=d)\n    n = os.open("d", os.O_RDONLY, dir_fd=d)\n    os.close(d)\n    d = n\nos.close(d)', join(clone, 'app')]);
    };
    deep();
    reset();
    // reset of a snapshotted clone is a whole materialize: the old root, a subvolume, goes with the stage.
    const report = snap.resetSync(clone);
    expect(report).toMatchObject({ method: 'materialize', snapshotted: 1 });
    expect(report.stageLeft).toBeUndefined();
    expect(readdirSync(clone).sort()).toEqual(['app', 'top.txt']);
    expect(snap.checkCloneSync(clone).ok).toBe(true);
    // The look keeps 24 + 128 open, the removal 128 or so at a time, beside the materialize's own.
    expect(most()).toBeGreaterThan(128);
    expect(most()).toBeLessThan(200);
    store.closeSync();
  });

  it('a clone on another filesystem, reflink never, or a snapshot the kernel refuses (EPERM, EDQUOT): built per file as today, the reason in the report', () => {
    const base = tempDir(btrfs);
    const source = repo(base);
    const refusing = (code: string): S.Sys => wrapSys({ btrfs_snap_create: () => () => { throw systemError(code, 'btrfs_snap_create'); } });
    const cases: [string, S.Sys | undefined, string, RegExp, object][] = [
      ['elsewhere', undefined, join(tempDir(xfs), 'clone'), /not on the store's btrfs filesystem/, {}],
      ['never', undefined, join(base, 'clone-never'), /reflink: 'never'/, { reflink: 'never' }],
      ['EPERM', refusing('EPERM'), join(base, 'clone-eperm'), /refused the snapshot \(EPERM/, {}],
      ['EDQUOT', refusing('EDQUOT'), join(base, 'clone-edquot'), /refused the snapshot \(EDQUOT/, {}],
    ];
    for (const [name, sys, clone, reason, options] of cases) {
      const store = SnapshotStore.openSync(join(base, `store-${name}`), { ephemeral: true, ...(sys === undefined ? {} : { sys }) });
      const snap = capture(store, source);
      const report = snap.materializeSync(clone, { createClone: true, ...options });
      expect([name, report.snapshotted, report.fallbacks.length, report.files]).toEqual([name, 0, 1, 4]);
      expect(report.fallbacks[0]!.root).toBe('app');
      expect(report.fallbacks[0]!.reason).toMatch(reason);
      expect(snap.checkCloneSync(clone).ok).toBe(true);
      expect(mode(join(clone, 'app/main.js'))).toBe(0o600);
      store.closeSync();
    }
  });

  it('an arm whose snapshotted root the agent made read-only (its own subvolume: btrfs property set ro true) is reset and materialized again: the flag cleared, the root exchanged (it was SEAL_IO, EROFS, renameat2, for good)', () => {
    const base = tempDir(btrfs);
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const snap = capture(store, repo(base));
    const clone = join(base, 'arm');
    expect(snap.materializeSync(clone, { createClone: true })).toMatchObject({ snapshotted: 1, fallbacks: [] });
    writeFileSync(join(clone, 'app/main.js'), 'agent');
    writeFileSync(join(clone, 'app/added.js'), 'agent');
    setSubvolumeFlags(join(clone, 'app'), S.BTRFS_SUBVOL_RDONLY);
    expect(snap.resetSync(clone)).toMatchObject({ snapshotted: 1, fallbacks: [] });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    expect(subvolumeFlags(join(clone, 'app'))).toBe(0);
    expect(readdirSync(clone).sort()).toEqual(['app', 'top.txt']);
    setSubvolumeFlags(join(clone, 'app'), S.BTRFS_SUBVOL_RDONLY);
    expect(snap.materializeSync(clone)).toMatchObject({ snapshotted: 1 });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('a subvolume made writable behind the store\'s back: verify is SEAL_CORRUPT naming it; materialize builds it per file, saying why', () => {
    const base = tempDir(btrfs);
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const snap = capture(store, repo(base));
    setSubvolumeFlags(join(snap.root, 'copy/app'), 0);
    expectError(() => snap.verifySync(), { code: 'SEAL_CORRUPT', message: /1 entry differs from its manifest, first: copy\/app$/, path: 'copy/app' });
    const clone = join(base, 'clone');
    const report = snap.materializeSync(clone, { createClone: true });
    expect(report.fallbacks).toEqual([{ root: 'app', reason: "the copy root's subvolume in the store is writable (verify the snapshot)" }]);
    expect(snap.checkCloneSync(clone).ok).toBe(true);
    store.closeSync();
  });

  it('rm, gc of a stale build and an ephemeral close remove read-only subvolumes; thaw opens one up', () => {
    const base = tempDir(btrfs);
    const source = repo(base);
    const dir = join(base, 'store');
    const store = SnapshotStore.openSync(dir);
    const snap = capture(store, source);
    const other = store.captureSync({ source, copy: ['app'] });
    expect(store.remove(snap.digest)).toBe(snap.digest);
    expect([readdirSync(join(dir, 'snapshots')), readdirSync(join(dir, 'tmp'))]).toEqual([[other.digest], []]);
    // A build left by a process that died, its subvolume sealed.
    const build = join(dir, 'tmp', `build-${'e'.repeat(32)}`);
    mkdirSync(build);
    const fd = S.sys.openat(S.AT_FDCWD, build, S.O_RDONLY | S.O_DIRECTORY);
    S.sys.btrfs_subvol_create(fd, 'copy');
    S.sys.close(fd);
    writeFileSync(join(build, 'copy/f'), 'x');
    setSubvolumeFlags(join(build, 'copy'), S.BTRFS_SUBVOL_RDONLY);
    expect(store.gc()).toBe(1);
    expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
    thawSync(other.root);
    expect([subvolumeFlags(join(other.root, 'copy/app')), mode(join(other.root, 'copy/app'))]).toEqual([0, 0o700]);
    writeFileSync(join(other.root, 'copy/app/main.js'), 'thawed');
    store.closeSync();
    const eph = SnapshotStore.openSync(join(base, 'eph'), { ephemeral: true });
    capture(eph, source);
    eph.closeSync();
    expect(existsSync(join(base, 'eph'))).toBe(false);
  });

  it('a recapture from the stat cache builds its subvolumes too (files cloned into them), and materialize snapshots them', async () => {
    const base = tempDir(btrfs);
    const source = repo(base);
    // Older than the stat cache's granularity (2 s): the recapture reuses the unchanged files.
    await new Promise((r) => setTimeout(r, 2100));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    capture(store, source);
    writeFileSync(join(source, 'app/main.js'), 'changed');
    const again = capture(store, source);
    expect(again.captureReport).toMatchObject({ reusedFiles: 3, built: true, reused: false });
    expect(subvolumeFlags(join(again.root, 'copy/app'))).toBe(S.BTRFS_SUBVOL_RDONLY);
    again.verifySync();
    const clone = join(base, 'clone');
    expect(again.materializeSync(clone, { createClone: true }).snapshotted).toBe(1);
    expect(snapCheck(again, clone)).toBe(true);
    store.closeSync();
  });
});

const snapCheck = (snap: Snapshot, clone: string): boolean => snap.checkCloneSync(clone).ok;

describe.skipIf(xfs === undefined)('a store elsewhere (XFS)', () => {
  it('makes no subvolume and asks for none: materialize reports no snapshot and no fallback', () => {
    const base = tempDir(xfs);
    let calls = 0;
    const count = <F>(orig: F): F => ((...args: unknown[]) => (calls++, (orig as (...a: unknown[]) => unknown)(...args))) as F;
    const sys = wrapSys({ btrfs_subvol_create: count, btrfs_snap_create: count, btrfs_subvol_getflags: count, btrfs_subvol_setflags: count, btrfs_snap_destroy: count });
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true, sys });
    const snap = store.captureSync({ source: repo(base), copy: COPY });
    const report = snap.materializeSync(join(base, 'clone'), { createClone: true });
    expect(report).toMatchObject({ snapshotted: 0, fallbacks: [], reflinked: 4 });
    snap.verifySync();
    store.closeSync();
    expect(calls).toBe(0);
  });
});

const AS_USER = fileURLToPath(new URL('./as-user.mjs', import.meta.url));
/** Root runs the children as nobody; a run that is not root (the unprivileged CI pass) runs them as itself. */
const as: RunAs | undefined = isRoot ? { uid: NOBODY, gid: NOBODY } : undefined;

describe.skipIf(btrfs === undefined || !(!isRoot || canDropPrivileges()))(`on btrfs as a user without root (${as === undefined ? 'this process' : `uid ${NOBODY}`})`, () => {
  const op = (name: string, store: string, ...args: string[]): any => childJson(runNodeAs(as, [AS_USER, DIST_INDEX, name, store, ...args]));
  let base = '';
  let source = '';
  let restore = (): void => {};
  afterAll(() => restore());
  beforeAll(() => {
    // The mount's parent (with-mounts.sh's private dir) readable and searchable by the user for the pass (o+rx), as as-unprivileged.sh makes it.
    if (as !== undefined) {
      const parent = dirname(btrfs!);
      const was = statSync(parent).mode & 0o7777;
      chmodSync(parent, was | 0o005);
      restore = () => chmodSync(parent, was);
    }
    base = tempDir(btrfs);
    chmodSync(base, 0o755);
    source = repo(base);
    if (as !== undefined) chownTree(base, as.uid, as.gid);
  });

  it('captures subvolumes, materializes snapshots of them, rm and an ephemeral close remove them, and a clone holding them is removable', () => {
    const r = op('lifecycle', join(base, 'store'), source, COPY.join(','), join(base, 'clone'));
    const run = { files: 4, snapshotted: 1, fallbacks: [], reflinked: 1, ok: true };
    // Run twice: the second swaps the first's snapshot out of the clone and removes it (emptied, then rmdir).
    expect(r).toEqual({ sealed: 'EROFS', runs: [run, run], removed: true, left: 0, ephemeral: 1, gone: true });
  });

  it.runIf(isRoot)('a read-only subvolume another user owns: thaw says who can clear its flag and how', () => {
    const dir = join(base, 'foreign');
    mkdirSync(dir);
    const fd = S.sys.openat(S.AT_FDCWD, dir, S.O_RDONLY | S.O_DIRECTORY);
    S.sys.btrfs_subvol_create(fd, 'sv');
    S.sys.close(fd);
    setSubvolumeFlags(join(dir, 'sv'), S.BTRFS_SUBVOL_RDONLY);
    chownSync(dir, NOBODY, NOBODY);
    const r = op('thaw', join(base, 'unused'), dir);
    expect(r.error.code).toBe('SEAL_IO');
    expect(r.error.message).toMatch(/sv is a read-only btrfs subvolume of uid 0.*btrfs property set -f sv ro false.*btrfs subvolume delete sv/);
    setSubvolumeFlags(join(dir, 'sv'), 0);
  });
});
