// diff-reset.test.ts: the clone ledger, diff and reset: what an agent changed in a materialized clone, found by identity
// (unchanged files never opened) and undone without touching the rest; the clone treated as hostile throughout.
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import { AT_FDCWD, LOCK_EX, LOCK_NB, O_CREAT, O_RDONLY, sys as nativeSys, type Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, failOnce, listTree, mkfifo, rootPassOnly, systemError, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const TREE = { 'src/a.ts': 'alpha', 'src/b.ts': 'beta', 'src/lib/c.ts': 'gamma', 'src/lib/d.ts': 'delta', 'src/run.sh': 'echo hi' };

function fixture(copy = ['src'], files = 5, base?: string): { work: string; store: SnapshotStore; snap: Snapshot; clone: string; outside: string } {
  const work = tempDir(base);
  writeTree(join(work, 'repo'), TREE);
  chmodSync(join(work, 'repo/src/run.sh'), 0o755);
  const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
  const snap = store.captureSync({ source: join(work, 'repo'), copy });
  const clone = join(work, 'clone');
  mkdirSync(clone);
  expect(snap.materializeSync(clone)).toMatchObject({ files, reset: false });
  const outside = join(work, 'outside');
  writeTree(outside, { secret: 'do not touch', 'dir/x': 'x' });
  return { work, store, snap, clone, outside };
}

function withSys(snap: Snapshot, sys: Sys): Snapshot {
  return new Snapshot(snap.root, snap.toJSON(), { sys });
}

/** The syscall layer that fails the test when anything it opens is the inode of `path` (an fd is checked by fstat after each open). */
function neverOpens(path: string): Sys {
  const { ino } = statSync(path);
  const check = (fd: number): number => {
    if (nativeSys.fstat(fd).ino === BigInt(ino)) throw new Error(`opened ${path}`);
    return fd;
  };
  return wrapSys({
    openat: (orig) => (dirfd, p, flags, mode) => check(orig(dirfd, p, flags, mode)),
    openat2: (orig) => (dirfd, p, flags, mode, resolve) => check(orig(dirfd, p, flags, mode, resolve)),
  });
}

const ok = { ok: true, marker: false, added: [], removed: [], changed: [], unreadable: [] };

describe('diff', () => {
  it('names what was edited, added, removed, chmodded and renamed over, by the ledger (kills Ledger.same comparing no ctime, and the directory mode check)', async () => {
    const { store, snap, clone } = fixture();
    expect(snap.diffSync(clone)).toEqual({ ...ok, files: 0, bytes: 0, method: 'ledger', outside: [] });
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA'); // same size, rewritten in place
    writeFileSync(join(clone, 'src/new.ts'), 'new');
    unlinkSync(join(clone, 'src/b.ts'));
    chmodSync(join(clone, 'src/run.sh'), 0o600); // already 0600 (copy roots keep no mode): only its ctime moves
    chmodSync(join(clone, 'src/lib'), 0o755);
    writeFileSync(join(clone, 'c.tmp'), 'gamma');
    renameSync(join(clone, 'c.tmp'), join(clone, 'src/lib/c.ts'));
    writeFileSync(join(clone, 'top.txt'), 'outside the roots');
    expect(await snap.diff(clone, { all: true })).toEqual({
      ok: false,
      marker: false,
      added: ['src/new.ts'],
      removed: ['src/b.ts'],
      changed: ['src/a.ts', 'src/lib', 'src/lib/c.ts', 'src/run.sh'],
      unreadable: [],
      files: 0,
      bytes: 0,
      method: 'ledger',
      outside: ['top.txt'],
    });
    // verify re-hashes: bytes that are the snapshot's again with materialize's mode (run.sh) are not changed to it; a
    // mode other than materialize's is (lib 0755, not 0700; c.ts written 0644, not 0600), its bytes unread.
    expect(snap.diffSync(clone, { verify: true })).toMatchObject({ added: ['src/new.ts'], removed: ['src/b.ts'], changed: ['src/a.ts', 'src/lib', 'src/lib/c.ts'], method: 'hash', files: 3 });
    store.closeSync();
  });

  it('opens no file whose identity matches the ledger, only stats it (kills the ledger branch falling through to hashAt)', () => {
    const { store, snap, clone } = fixture();
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    const opened: string[] = [];
    const files = new Set(['a.ts', 'b.ts', 'c.ts', 'd.ts', 'run.sh']);
    const sys = wrapSys({
      openat: (orig) => (dirfd, p, flags, mode) => {
        if (files.has(String(p))) opened.push(String(p));
        return orig(dirfd, p, flags, mode);
      },
      openat2: (orig) => (dirfd, p, flags, mode, resolve) => {
        if (files.has(String(p).split('/').pop()!)) opened.push(String(p));
        return orig(dirfd, p, flags, mode, resolve);
      },
    });
    expect(withSys(snap, sys).diffSync(clone)).toMatchObject({ changed: ['src/a.ts'], method: 'ledger' });
    expect(opened).toEqual([]);
    withSys(snap, sys).diffSync(clone, { verify: true });
    expect(opened.sort()).toEqual(['a.ts', 'b.ts', 'c.ts', 'd.ts', 'run.sh']);
    store.closeSync();
  });

  it('without a ledger of this clone re-hashes; with a torn or another clone\'s ledger too; with another snapshot\'s is SEAL_BINDING', () => {
    const { work, store, snap, clone } = fixture();
    const ledgers = join(work, 'store/clones');
    const [name] = readdirSync(ledgers);
    expect(name).toBe(`${statSync(clone, { bigint: true }).dev}-${statSync(clone, { bigint: true }).ino}.ledger`);
    // torn: its checksum no longer matches
    const bytes = readFileSync(join(ledgers, name!));
    writeFileSync(join(ledgers, name!), bytes.subarray(0, bytes.length - 10));
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'hash', files: 5 });
    // another clone's ledger under this clone's name: ignored
    const other = join(work, 'other');
    mkdirSync(other);
    snap.materializeSync(other);
    const otherSt = statSync(other, { bigint: true });
    writeFileSync(join(ledgers, name!), readFileSync(join(ledgers, `${otherSt.dev}-${otherSt.ino}.ledger`)));
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'hash' });
    // a ledger-shaped file planted in the clone is an added file, nothing more
    writeFileSync(join(clone, 'src/ledger'), bytes);
    expect(snap.diffSync(clone)).toMatchObject({ added: ['src/ledger'], method: 'hash' });
    unlinkSync(join(clone, 'src/ledger'));
    snap.materializeSync(clone);
    const second = store.captureSync({ source: join(work, 'repo'), copy: ['src/lib'] });
    expectError(() => second.diffSync(clone), { code: 'SEAL_BINDING', message: new RegExp(`^clone was materialized from snapshot ${snap.digest}, not ${second.digest}`) });
    expect(second.diffSync(clone, { verify: true })).toMatchObject({ ok: true, method: 'hash' });
    store.closeSync();
  });

  it('a materialize or reset of a clone another call holds is SEAL_BUSY at once, the clone as it was; diff still reads it; once let go both run; a flock of the caller\'s own on the clone directory is no matter (two at once once raced to EEXIST as SEAL_UNAVAILABLE)', async () => {
    const { store, snap, clone } = fixture();
    writeFileSync(join(clone, 'src/a.ts'), 'edited');
    const was = listTree(clone);
    // The lock another call's materialize or reset holds for its run: a flocked file in the store's tmp/, by the clone's identity.
    const st = statSync(clone, { bigint: true });
    const lockPath = join(store.root, 'tmp', `clone-${st.dev}-${st.ino}.lock`);
    const held = nativeSys.openat(AT_FDCWD, lockPath, O_RDONLY | O_CREAT, 0o600);
    nativeSys.flock(held, LOCK_EX | LOCK_NB);
    const busy = { code: 'SEAL_BUSY', message: `clone is in use by another call (a materialize or reset of it, or a sandboxed command running in it); wait for that one: ${clone}`, path: clone };
    // Retryable: the CLI tries again after a pause (--retries), as for a tree that was changing.
    expect(expectError(() => snap.resetSync(clone), busy)).toMatchObject({ retryable: true });
    await expectError(async () => snap.materialize(clone), busy);
    // Another snapshot's materialize, refused, leaves the store as it was: the clone's ledger (it was dropped before the lock).
    const other = store.captureSync({ source: join(dirname(clone), 'repo'), copy: ['src'], revision: 'other' });
    expectError(() => other.materializeSync(clone), busy);
    expect(snap.diffSync(clone)).toMatchObject({ method: 'ledger', changed: ['src/a.ts'] });
    expect(listTree(clone)).toEqual(was);
    expect(readFileSync(join(clone, 'src/a.ts'), 'utf8')).toBe('edited');
    expect(snap.diffSync(clone).changed).toEqual(['src/a.ts']);
    nativeSys.close(held);
    // A shell's `flock CLONE treeseal reset …` holds the clone directory's own flock: the reset inside it runs.
    const own = nativeSys.openat(AT_FDCWD, clone, O_RDONLY);
    nativeSys.flock(own, LOCK_EX | LOCK_NB);
    expect((await snap.reset(clone)).changed).toEqual(['src/a.ts']);
    expect(snap.materializeSync(clone).reset).toBe(true);
    nativeSys.close(own);
    // Each call's lock file goes with it.
    expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);
    store.closeSync();
  });

  it("a clone lock a store's sweep holds for a moment (testing whether its holder is gone) does not make a materialize or reset SEAL_BUSY (it did, naming a call that did not exist)", () => {
    const { store, snap, clone } = fixture();
    writeFileSync(join(clone, 'src/a.ts'), 'edited');
    // The sweep's test of the lock file: its flock taken (and let go at once) just as this call's flock is tried.
    const lockFds = new Set<number>();
    let refused = 0;
    const sys = wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        const fd = orig(dirfd, path, flags, mode);
        if (/^clone-\d+-\d+\.lock$/.test(String(path))) lockFds.add(fd);
        return fd;
      },
      flock: (orig) => (fd, op) => {
        if (lockFds.has(fd) && refused < 2) {
          refused++;
          throw systemError('EAGAIN', 'flock');
        }
        return orig(fd, op);
      },
    });
    expect(withSys(snap, sys).resetSync(clone)).toMatchObject({ method: 'reset', changed: ['src/a.ts'] });
    expect(refused).toBe(2);
    refused = 0;
    expect(withSys(snap, sys).materializeSync(clone)).toMatchObject({ reset: true });
    expect(refused).toBe(2);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);
    store.closeSync();
  });

  it('a clone lock no call holds (its holder was killed) is swept by the next open and by gc; one held is left (they were never swept)', () => {
    const { store, snap, clone } = fixture();
    const tmp = join(store.root, 'tmp');
    const st = statSync(clone, { bigint: true });
    const left = join(tmp, 'clone-1-2.lock');
    writeFileSync(left, '');
    const heldPath = join(tmp, `clone-${st.dev}-${st.ino}.lock`);
    const held = nativeSys.openat(AT_FDCWD, heldPath, O_RDONLY | O_CREAT, 0o600);
    nativeSys.flock(held, LOCK_EX | LOCK_NB);
    const again = SnapshotStore.openSync(store.root);
    expect([again.sweptAtOpen, readdirSync(tmp)]).toEqual([1, [basename(heldPath)]]);
    expectError(() => snap.resetSync(clone), { code: 'SEAL_BUSY', path: clone, fds: false });
    nativeSys.close(held);
    writeFileSync(left, '');
    expect(again.gc()).toBe(2);
    expect(readdirSync(tmp)).toEqual([]);
    expect(snap.resetSync(clone)).toMatchObject({ changed: [] });
    again.closeSync();
    store.closeSync();
  });

  it('bad input is typed: not a directory, a relative path, wrong option types', async () => {
    const { work, store, snap } = fixture();
    writeFileSync(join(work, 'file'), 'x');
    expectError(() => snap.diffSync(join(work, 'file')), { code: 'SEAL_BAD_PATH', message: `clone must be a real directory: ${join(work, 'file')}` });
    expectError(() => snap.diffSync('relative'), { code: 'SEAL_BAD_PATH' });
    expectError(() => snap.diffSync(join(work, 'clone'), { verify: 'yes' as never }), { code: 'ERR_INVALID_ARG_TYPE', message: /options\.verify/ });
    await expectError(async () => snap.reset(join(work, 'clone'), { clean: 1 as never }), { code: 'ERR_INVALID_ARG_TYPE', message: /options\.clean/ });
    await expectError(async () => snap.reset(join(work, 'clone'), { reflink: 'sometimes' as never }), { code: 'ERR_INVALID_ARG_VALUE' });
    store.closeSync();
  });
});

describe('reset', () => {
  it('a restore the kernel refuses (no space) is SEAL_IO naming the entry, as materialize names it (it said only "reset: ENOSPC … pwrite"); the next reset makes the clone whole', () => {
    const { store, snap, clone } = fixture();
    unlinkSync(join(clone, 'src/b.ts'));
    rmSync(join(clone, 'src/lib'), { recursive: true });
    for (const [name, path] of [['b.ts', 'src/b.ts'], ['d.ts', 'src/lib/d.ts']] as const) {
      const { sys, injected } = failOnce('openat', 'ENOSPC', (_dirfd, p, flags) => p === name && (flags & O_CREAT) !== 0);
      expectError(() => withSys(snap, sys).resetSync(clone), { code: 'SEAL_IO', message: `could not make ${path}: ENOSPC: injected, openat`, path });
      expect(injected()).toBeDefined();
    }
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset' });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('restores exact bytes and modes, removes what was added, leaves every unchanged inode as it was (kills resetEntry keeping a changed file, and the fchmod)', async () => {
    const { store, snap, clone } = fixture();
    const inode = (p: string): number => statSync(join(clone, p)).ino;
    const before = { d: inode('src/lib/d.ts'), lib: inode('src/lib') };
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    chmodSync(join(clone, 'src/run.sh'), 0o644);
    chmodSync(join(clone, 'src/b.ts'), 0o600); // the same mode again: its ctime moved, so it is restored
    chmodSync(join(clone, 'src/lib'), 0o755);
    unlinkSync(join(clone, 'src/lib/c.ts'));
    writeTree(clone, { 'src/new/deep/x': 'x', 'src/lib/y': 'y' });
    const report = await snap.reset(clone);
    expect(report).toMatchObject({
      method: 'reset',
      reset: true,
      added: ['src/lib/y', 'src/new'],
      removed: ['src/lib/c.ts'],
      changed: ['src/a.ts', 'src/b.ts', 'src/lib', 'src/run.sh'],
      outside: [],
      files: 4,
    });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(readFileSync(join(clone, 'src/a.ts'), 'utf8')).toBe('alpha');
    expect(statSync(join(clone, 'src/run.sh')).mode & 0o7777).toBe(0o600);
    expect(statSync(join(clone, 'src/a.ts')).mode & 0o7777).toBe(0o600);
    expect(statSync(join(clone, 'src/lib')).mode & 0o7777).toBe(0o700);
    expect({ d: inode('src/lib/d.ts'), lib: inode('src/lib') }).toEqual(before);
    // the new ledger holds what reset made: the next diff is clean by identity
    expect(snap.diffSync(clone)).toMatchObject({ ...ok, method: 'ledger' });
    expect(snap.resetSync(clone)).toMatchObject({ added: [], removed: [], changed: [], files: 0 });
    store.closeSync();
  });

  it('clean removes what lies outside the copy roots, keeping materialize\'s own names and the roots\' parents; diff\'s all names a stage a killed materialize left, never one a live one holds (kills forEachOutside skipping nothing, and isOwn taking a free stage)', () => {
    const { work, store, snap, clone } = fixture(['src/lib', 'src/a.ts'], 3);
    const dead = '.treeseal-materialize-0123456789abcdef01234567';
    const live = '.treeseal-materialize-fedcba9876543210fedcba98';
    writeTree(clone, { 'top.txt': 't', 'src/b.ts': 'not a root', 'build/out': 'o', [`${dead}/new/src/x`]: 'half a root', [`${live}/x`]: 'building' });
    // As a materialize makes its stage: 0700, its own, flocked.
    chmodSync(join(clone, live), 0o700);
    const held = openSync(join(clone, live), 'r');
    try {
      nativeSys.flock(held, LOCK_EX | LOCK_NB);
      // The dead stage (its lock free: the materialize that made it was killed) is outside; the live one is not.
      expect(snap.diffSync(clone, { all: true }).outside).toEqual([dead, 'build', 'src/b.ts', 'top.txt']);
      // A reset sweeps the dead stage first (as every materialize does), then clean removes the rest.
      const report = snap.resetSync(clone, { clean: true });
      expect(report.outside).toEqual(['build', 'src/b.ts', 'top.txt']);
      expect(listTree(clone)).toEqual([`${live}/`, `${live}/x`, 'src/', 'src/a.ts', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts']);
    } finally {
      closeSync(held);
    }
    expect(listTree(join(work, 'repo'))).toContain('src/b.ts');
    store.closeSync();
  });

  it('a link or a file an agent put where a directory on the way to a mount target must be: diff\'s all lists it, clean removes it (never followed), and the mount points are made again (every later run failed SEAL_SYMLINK)', () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.ts': 'a', 'deps/d.js': 'd' });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'deps', target: 'vendor/deps' }] });
    const clone = join(work, 'clone');
    const outside = join(work, 'outside');
    writeTree(outside, { 'keep.txt': 'keep' });
    snap.materializeSync(clone, { createClone: true });
    snap.mountPoints(clone);
    const plants: [string, () => void][] = [
      ['vendor', () => symlinkSync(outside, join(clone, 'vendor'))],
      ['vendor', () => writeFileSync(join(clone, 'vendor'), 'file')],
      // At the target itself: a link is never a mount point; nor a file or a FIFO where a directory is bound (diff --all
      // called such an arm clean, no reset removed it, and every later run failed SEAL_COLLISION or SEAL_SPECIAL_FILE).
      ['vendor/deps', () => (mkdirSync(join(clone, 'vendor')), symlinkSync(outside, join(clone, 'vendor/deps')))],
      ['vendor/deps', () => writeTree(clone, { 'vendor/deps': 'the agent\'s file' })],
      ['vendor/deps', () => (mkdirSync(join(clone, 'vendor')), mkfifo(join(clone, 'vendor/deps')))],
    ];
    for (const [where, plant] of plants) {
      rmSync(join(clone, 'vendor'), { recursive: true, force: true });
      plant();
      expect(snap.diffSync(clone, { all: true }).outside).toEqual([where]);
      expect(snap.resetSync(clone, { clean: true }).outside).toEqual([where]);
      expect(listTree(outside)).toEqual(['keep.txt']);
      expect(snap.mountPoints(clone).map((m) => m.target)).toEqual(['/workspace/vendor/deps']);
      expect(lstatSync(join(clone, 'vendor')).isDirectory()).toBe(true);
      expect(lstatSync(join(clone, 'vendor/deps')).isDirectory()).toBe(true);
    }
    // An empty directory there is the mount point itself: not outside.
    expect(snap.diffSync(clone, { all: true }).outside).toEqual([]);
    store.closeSync();
  });

  it('a single-file mount\'s target holding a directory, a link or a FIFO is outside (diff\'s all, reset\'s clean), and the mount point is made again; the empty file there is the mount point', () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.ts': 'a', 'cfg/app.json': '{}' });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'cfg/app.json', target: 'etc/app.json' }] });
    const clone = join(work, 'clone');
    const outside = join(work, 'outside');
    writeTree(outside, { 'keep.txt': 'keep' });
    snap.materializeSync(clone, { createClone: true });
    expect(snap.mountPoints(clone).map((m) => m.target)).toEqual(['/workspace/etc/app.json']);
    expect(lstatSync(join(clone, 'etc/app.json')).isFile()).toBe(true);
    expect(snap.diffSync(clone, { all: true }).outside).toEqual([]);
    for (const plant of [() => writeTree(clone, { 'etc/app.json/x': 'x' }), () => symlinkSync(join(outside, 'keep.txt'), join(clone, 'etc/app.json')), () => mkfifo(join(clone, 'etc/app.json'))]) {
      rmSync(join(clone, 'etc/app.json'), { recursive: true, force: true });
      plant();
      expect(snap.diffSync(clone, { all: true }).outside).toEqual(['etc/app.json']);
      expect(snap.resetSync(clone, { clean: true }).outside).toEqual(['etc/app.json']);
      expect(listTree(outside)).toEqual(['keep.txt']);
      expect(readFileSync(join(outside, 'keep.txt'), 'utf8')).toBe('keep');
      expect(snap.mountPoints(clone).map((m) => m.target)).toEqual(['/workspace/etc/app.json']);
      expect(lstatSync(join(clone, 'etc/app.json')).isFile()).toBe(true);
    }
    store.closeSync();
  });

  it('a write the agent makes into a file while reset fills it (into a hole the copy never writes) is not recorded as reset\'s: the next diff names it and the next reset restores it (the ledger took the agent\'s bytes as its own)', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'src/a.ts': 'alpha' });
    const big = openSync(join(repo, 'src/big'), 'w');
    writeSync(big, Buffer.alloc(4096, 1), 0, 4096, 0);
    writeSync(big, Buffer.alloc(4096, 2), 0, 4096, 8 << 20);
    closeSync(big);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: repo, copy: ['src'] });
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    unlinkSync(join(clone, 'src/big'));
    let wrote = false;
    const sys = wrapSys({
      fstat: (orig) => (fd) => {
        // Reset has filled the new file and takes its identity: the agent, holding it open, writes into its hole first.
        if (!wrote && String(nativeSys.readlinkat(AT_FDCWD, `/proc/self/fd/${fd}`)) === join(clone, 'src/big')) {
          wrote = true;
          const agent = openSync(join(clone, 'src/big'), 'r+');
          writeSync(agent, Buffer.from('EVIL'), 0, 4, 1 << 20);
          closeSync(agent);
        }
        return orig(fd);
      },
    });
    expect(withSys(snap, sys).resetSync(clone)).toMatchObject({ removed: ['src/big'] });
    expect(wrote).toBe(true);
    expect(readFileSync(join(clone, 'src/big')).subarray(1 << 20, (1 << 20) + 4).toString()).toBe('EVIL');
    expect(snap.diffSync(clone)).toMatchObject({ changed: ['src/big'] });
    expect(snap.resetSync(clone)).toMatchObject({ changed: ['src/big'] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('a materialize into a clone holding its ledger but none of its roots (a new directory that took a removed arm\'s inode) makes them whole, not by a reset that reads back every file it made (four arms at once took twice as long)', () => {
    const { store, snap, clone } = fixture();
    rmSync(join(clone, 'src'), { recursive: true });
    expect(snap.materializeSync(clone)).toMatchObject({ reset: false, files: 5 });
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    // One root left: a reset (which names what it brings back).
    rmSync(join(clone, 'src/lib'), { recursive: true });
    expect(snap.materializeSync(clone)).toMatchObject({ reset: true });
    expect(snap.resetSync(clone)).toMatchObject({ removed: [] });
    rmSync(join(clone, 'src'), { recursive: true });
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset', removed: ['src', 'src/a.ts', 'src/b.ts', 'src/lib', 'src/lib/c.ts', 'src/lib/d.ts', 'src/run.sh'] });
    store.closeSync();
  });

  it("a stage-named directory the agent made unreadable (chmod 0) or gave another mode is the agent's: diff's all lists it, clean and gc remove it (isOwn took any directory it could not open for a stage, and the sweep passed it over: it hid across resets)", () => {
    const { store, snap, clone } = fixture();
    const hidden = '.treeseal-materialize-aaaaaaaaaaaaaaaaaaaaaaaa';
    const open = '.treeseal-materialize-bbbbbbbbbbbbbbbbbbbbbbbb';
    const plant = (): void => {
      writeTree(clone, { [`${hidden}/answer.txt`]: 'TASK-1 SECRET', [`${open}/x`]: 'x' });
      chmodSync(join(clone, hidden), 0o000);
      chmodSync(join(clone, open), 0o755);
    };
    plant();
    expect(snap.diffSync(clone, { all: true }).outside).toEqual([hidden, open]);
    expect(snap.resetSync(clone, { clean: true })).toMatchObject({ outside: [] });
    expect(listTree(clone).filter((p) => p.startsWith('.'))).toEqual([]);
    plant();
    expect(store.gc({ clone })).toBe(2);
    expect(listTree(clone).filter((p) => p.startsWith('.'))).toEqual([]);
    store.closeSync();
  });

  it('a stage whose lock a look took between its mkdir and its flock is removed, not left empty beside the one made instead (a diff --all at that moment left an empty stage in the clone)', () => {
    const { store, snap, clone } = fixture();
    writeFileSync(join(clone, 'src/a.ts'), 'changed');
    let taken = 0;
    const sys = wrapSys({
      flock: (orig) => (fd, op) => {
        // The first flock of a new stage: another process holds it for a moment.
        if (taken === 0 && (op & LOCK_NB) !== 0 && String(nativeSys.readlinkat(AT_FDCWD, `/proc/self/fd/${fd}`)).includes('.treeseal-materialize-')) {
          taken++;
          throw Object.assign(new Error('EWOULDBLOCK: injected, flock'), { code: 'EWOULDBLOCK', errno: -11, syscall: 'flock' });
        }
        return orig(fd, op);
      },
    });
    const other = store.captureSync({ source: join(dirname(clone), 'repo'), copy: ['src'], revision: 'other' });
    expect(withSys(other, sys).materializeSync(clone)).toMatchObject({ reset: false });
    expect(taken).toBe(1);
    expect(readdirSync(clone).filter((n) => n.startsWith('.'))).toEqual([]);
    store.closeSync();
  });

  it("a file, a symlink or a FIFO under a stage's name is the agent's: diff's all lists it, clean and gc remove it, the link never followed (kills isOwn taking every stage name)", () => {
    const { work, store, snap, clone, outside } = fixture();
    const stage = '.treeseal-materialize-';
    const plant = (): void => {
      writeFileSync(join(clone, `${stage}notes`), 'answer=42');
      symlinkSync(outside, join(clone, `${stage}etc`));
      mkfifo(join(clone, `${stage}pipe`));
    };
    plant();
    const names = [`${stage}etc`, `${stage}notes`, `${stage}pipe`];
    expect(snap.diffSync(clone, { all: true }).outside).toEqual(names);
    expect(snap.resetSync(clone, { clean: true }).outside).toEqual(names);
    expect(listTree(clone).filter((p) => p.startsWith('.'))).toEqual([]);
    plant();
    // gc of the clone sweeps them as it sweeps dead stages; reset without clean leaves them (they are outside the roots).
    expect(store.gc({ clone })).toBe(3);
    expect(listTree(clone).filter((p) => p.startsWith('.'))).toEqual([]);
    expect(listTree(outside)).toEqual(['dir/', 'dir/x', 'secret']);
    expect(listTree(work).filter((p) => p.startsWith('outside'))).toEqual(['outside/', 'outside/dir/', 'outside/dir/x', 'outside/secret']);
    store.closeSync();
  });

  it('reset names what it brings back as diff names it: a directory removed, or replaced by a file, and everything below it (kills reportBelow emptied)', () => {
    const { store, snap, clone } = fixture();
    rmSync(join(clone, 'src/lib'), { recursive: true });
    const gone = ['src/lib', 'src/lib/c.ts', 'src/lib/d.ts'];
    expect(snap.diffSync(clone).removed).toEqual(gone);
    expect(snap.resetSync(clone)).toMatchObject({ removed: gone, changed: [], added: [] });
    rmSync(join(clone, 'src/lib'), { recursive: true });
    writeFileSync(join(clone, 'src/lib'), 'a file now');
    expect(snap.diffSync(clone)).toMatchObject({ removed: gone.slice(1), changed: ['src/lib'] });
    expect(snap.resetSync(clone)).toMatchObject({ removed: gone.slice(1), changed: ['src/lib'], added: [] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    store.closeSync();
  });

  it('a planted symlink at a changed path and as a parent is replaced, never followed: nothing outside is read or written', () => {
    const { store, snap, clone, outside } = fixture();
    unlinkSync(join(clone, 'src/a.ts'));
    symlinkSync(join(outside, 'secret'), join(clone, 'src/a.ts'));
    rmSync(join(clone, 'src/lib'), { recursive: true });
    symlinkSync(join(outside, 'dir'), join(clone, 'src/lib'));
    linkSync(join(outside, 'secret'), join(clone, 'src/hard'));
    const sys = neverOpens(join(outside, 'secret'));
    // What stood below the directory the link replaced: removed, in diff and in reset alike.
    expect(withSys(snap, sys).diffSync(clone)).toMatchObject({ added: ['src/hard'], changed: ['src/a.ts', 'src/lib'], removed: ['src/lib/c.ts', 'src/lib/d.ts'], method: 'ledger' });
    expect(withSys(snap, neverOpens(join(outside, 'dir'))).resetSync(clone)).toMatchObject({ added: ['src/hard'], changed: ['src/a.ts', 'src/lib'], removed: ['src/lib/c.ts', 'src/lib/d.ts'] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(listTree(outside)).toEqual(['dir/', 'dir/x', 'secret']);
    expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe('do not touch');
    expect(statSync(join(outside, 'secret')).nlink).toBe(1);
    store.closeSync();
  });

  it('a directory swapped for a symlink between its fstatat and its open is replaced, the link never followed (kills resetEntry\'s ELOOP escape)', () => {
    const { work, store, snap, clone, outside } = fixture();
    let swapped = false;
    const sys = wrapSys({
      fstatat: (orig) => (dirfd, p, flags) => {
        const st = orig(dirfd, p, flags);
        if (p === 'lib' && !swapped) {
          swapped = true;
          renameSync(join(clone, 'src/lib'), join(work, 'lib-moved'));
          symlinkSync(join(outside, 'dir'), join(clone, 'src/lib'));
        }
        return st;
      },
    });
    expect(withSys(snap, sys).resetSync(clone)).toMatchObject({ changed: ['src/lib'], added: [], removed: ['src/lib/c.ts', 'src/lib/d.ts'] });
    expect(swapped).toBe(true);
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(listTree(outside)).toEqual(['dir/', 'dir/x', 'secret']);
    expect(listTree(join(work, 'lib-moved'))).toEqual(['c.ts', 'd.ts']);
    store.closeSync();
  });

  it('a FIFO, a directory for a file, a file for a directory and a symlink planted as a root\'s parent are replaced without blocking or following', () => {
    const { work, store, snap, clone, outside } = fixture(['src/lib'], 2);
    expect(listTree(clone)).toEqual(['src/', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts']);
    unlinkSync(join(clone, 'src/lib/c.ts'));
    mkfifo(join(clone, 'src/lib/c.ts'));
    mkfifo(join(clone, 'src/lib/fifo'));
    unlinkSync(join(clone, 'src/lib/d.ts'));
    writeTree(clone, { 'src/lib/d.ts/inner': 'a directory now' });
    expect(snap.diffSync(clone)).toMatchObject({ added: ['src/lib/fifo'], changed: ['src/lib/c.ts', 'src/lib/d.ts'] });
    expect(snap.diffSync(clone, { verify: true })).toMatchObject({ added: ['src/lib/fifo'], changed: ['src/lib/c.ts', 'src/lib/d.ts'] });
    expect(snap.resetSync(clone)).toMatchObject({ added: ['src/lib/fifo'], changed: ['src/lib/c.ts', 'src/lib/d.ts'] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    // the root replaced by a file, and back by reset
    rmSync(join(clone, 'src/lib'), { recursive: true });
    writeFileSync(join(clone, 'src/lib'), 'a file now');
    expect(snap.resetSync(clone)).toMatchObject({ changed: ['src/lib'] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    // the root's parent a link to a directory holding the root's names: unlinked, never followed, src made again
    renameSync(join(clone, 'src'), join(work, 'moved'));
    writeTree(outside, { 'lib/c.ts': 'gamma', 'lib/d.ts': 'not delta' });
    symlinkSync(outside, join(clone, 'src'));
    const before = listTree(outside);
    expect(snap.diffSync(clone)).toMatchObject({ added: [], removed: ['src/lib', 'src/lib/c.ts', 'src/lib/d.ts'], changed: ['src'] });
    expect(snap.resetSync(clone)).toMatchObject({ added: [], removed: ['src/lib', 'src/lib/c.ts', 'src/lib/d.ts'], changed: ['src'] });
    expect(lstatSync(join(clone, 'src')).isDirectory()).toBe(true);
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(listTree(outside)).toEqual(before);
    expect(readFileSync(join(outside, 'lib/d.ts'), 'utf8')).toBe('not delta');
    expect(listTree(join(work, 'moved'))).toEqual(['lib/', 'lib/c.ts', 'lib/d.ts']);
    store.closeSync();
  });

  it('a file, a link or a FIFO where the parent of two roots must be is named once, changed, by diff, reset and checkClone, and replaced by a directory (kills the parent walk\'s seen mark)', async () => {
    const { store, snap, clone, outside } = fixture(['src/lib', 'src/a.ts'], 3);
    for (const plant of [(p: string) => writeFileSync(p, 'a file now'), (p: string) => symlinkSync(outside, p), (p: string) => mkfifo(p)]) {
      rmSync(join(clone, 'src'), { recursive: true });
      plant(join(clone, 'src'));
      const want = { added: [], removed: ['src/a.ts', 'src/lib', 'src/lib/c.ts', 'src/lib/d.ts'], changed: ['src'] };
      expect(snap.checkCloneSync(clone)).toMatchObject(want);
      expect(await snap.diff(clone)).toMatchObject(want);
      expect(await snap.reset(clone)).toMatchObject({ ...want, reset: true });
      expect(snap.checkCloneSync(clone)).toMatchObject(ok);
      expect(listTree(clone)).toEqual(['src/', 'src/a.ts', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts']);
    }
    // the parent missing altogether: removed, once
    rmSync(join(clone, 'src'), { recursive: true });
    const gone = { added: [], removed: ['src', 'src/a.ts', 'src/lib', 'src/lib/c.ts', 'src/lib/d.ts'], changed: [] };
    expect(snap.diffSync(clone)).toMatchObject(gone);
    expect(snap.resetSync(clone)).toMatchObject(gone);
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(listTree(outside)).toEqual(['dir/', 'dir/x', 'secret']);
    store.closeSync();
  });

  rootPassOnly('a subtree 10000 directories deep is removed in a bounded stack and fds, its files never opened (kills Trash.remove handing directories to the recursive removeAt)', () => {
    const { store, snap, clone } = fixture(['src/lib'], 2);
    execFileSync('python3', ['-c', 'import os, sys\nos.chdir(sys.argv[1])\nfor i in range(10000):\n    os.mkdir("d"); os.chdir("d")\nopen("f", "w").write("x")', join(clone, 'src/lib')]);
    expect(snap.diffSync(clone)).toMatchObject({ added: ['src/lib/d'], method: 'ledger' });
    expect(snap.resetSync(clone)).toMatchObject({ added: ['src/lib/d'], changed: [] });
    expect(listTree(clone)).toEqual(['src/', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts']);
    store.closeSync();
  });

  rootPassOnly('a subtree 50,000 directories deep with a file at each level is removed by reset and by a whole materialize in time that grows with its depth, not its square (each level spelled out the whole path above it for a message never shown: 9 s for 25,000 bare levels, minutes with the files)', { timeout: 40_000 }, () => {
    // On tmpfs: the root disk's speed swings too widely for the timeout to tell the two apart (about 10 s against 80 s here).
    const { work, store, snap, clone } = fixture(['src/lib'], 2, '/dev/shm');
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['src/lib'], revision: 'B' });
    const deep = (): void => {
      execFileSync('python3', ['-c', 'import os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfor i in range(50000):\n    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d))\n    os.mkdir("d", dir_fd=d)\n    n = os.open("d", os.O_RDONLY, dir_fd=d)\n    os.close(d)\n    d = n\nos.close(d)', join(clone, 'src/lib')]);
    };
    deep();
    expect(snap.resetSync(clone)).toMatchObject({ added: ['src/lib/d', 'src/lib/f'], changed: [] });
    expect(listTree(clone)).toEqual(['src/', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts']);
    deep();
    // Whole, and the old tree gone with the stage (it was left there, EMFILE, for a sweep that failed the same way).
    const report = other.materializeSync(clone);
    expect(report).toMatchObject({ reset: false });
    expect(report.stageLeft).toBeUndefined();
    expect(readdirSync(clone)).toEqual(['src']);
    expect(listTree(clone)).toEqual(['src/', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts']);
    store.closeSync();
  });

  it('a file whose path is past PATH_MAX (4,242 bytes: 21 directories of 200-byte names) is restored by reset and by a materialize that resets, reached a directory at a time (it was SEAL_CORRUPT, ENAMETOOLONG, after the file was removed)', () => {
    const work = tempDir();
    const name = 'n'.repeat(200);
    const deep = (root: string, text: string): void => {
      execFileSync('python3', ['-c', 'import os, sys\nos.chdir(sys.argv[1])\nfor i in range(21):\n    os.makedirs(sys.argv[3], exist_ok=True); os.chdir(sys.argv[3])\nopen("leaf", "w").write(sys.argv[2])', root, text, name]);
    };
    mkdirSync(join(work, 'repo'));
    deep(join(work, 'repo'), 'leaf');
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: join(work, 'repo'), limits: { maxPathBytes: 10000 } });
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    const leaf = `${`${name}/`.repeat(21)}leaf`;
    expect(leaf.length).toBe(4225);
    deep(clone, 'LEAF');
    expect(snap.diffSync(clone)).toMatchObject({ changed: [leaf] });
    expect(snap.resetSync(clone)).toMatchObject({ changed: [leaf], method: 'reset' });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    deep(clone, 'LEAF');
    expect(snap.materializeSync(clone)).toMatchObject({ reset: true });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    store.closeSync();
    // Node's rmSync takes whole paths, too long here; rm walks down.
    execFileSync('rm', ['-rf', work]);
  });

  it('a name that is not UTF-8 is removed as added; another snapshot\'s ledger is SEAL_BINDING with nothing changed', () => {
    const { work, store, snap, clone } = fixture();
    writeFileSync(Buffer.concat([Buffer.from(join(clone, 'src/')), Buffer.from([0x66, 0xff, 0x0a])]), 'x');
    // Beside it, a UTF-8 name that spells the escape out: the two are two strings (they once read the same, src/f\xff).
    writeFileSync(join(clone, 'src/f\\xff'), 'y');
    expect(snap.diffSync(clone).added).toEqual(['src/f\\xff', 'src/f\udcff\n']);
    expect(snap.resetSync(clone)).toMatchObject({ added: ['src/f\\xff', 'src/f\udcff\n'] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    const second = store.captureSync({ source: join(work, 'repo'), copy: ['src/lib'] });
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    expectError(() => second.resetSync(clone), { code: 'SEAL_BINDING', unchanged: clone });
    // materialize is how a clone changes snapshot: whole, recording the new ledger
    expect(second.materializeSync(clone)).toMatchObject({ reset: false });
    expect(second.materializeSync(clone)).toMatchObject({ reset: true, files: 0 });
    store.closeSync();
  });

  it('materialize into a clone holding this snapshot\'s ledger resets it; without a ledger reset materializes whole', async () => {
    const { work, store, snap, clone } = fixture();
    const ino = statSync(join(clone, 'src/b.ts')).ino;
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    expect(await snap.materialize(clone)).toMatchObject({ reset: true, files: 1 });
    expect(statSync(join(clone, 'src/b.ts')).ino).toBe(ino);
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    rmSync(join(work, 'store/clones'), { recursive: true });
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    expect(snap.resetSync(clone)).toMatchObject({ method: 'materialize', reset: false, files: 5, changed: [] });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(snap.diffSync(clone)).toMatchObject({ method: 'ledger', ok: true });
    store.closeSync();
  });

  it('a reset that dies midway leaves a clone the next reset repairs (kills recording the old identity of a restored file)', () => {
    const { store, snap, clone } = fixture();
    for (const f of ['src/a.ts', 'src/b.ts', 'src/lib/c.ts']) writeFileSync(join(clone, f), 'agent');
    // dies at the second file it creates: the first is restored, the second removed, the third still the agent's
    let creates = 0;
    const sys = wrapSys({
      openat: (orig) => (dirfd, p, flags, mode) => {
        if ((flags & O_CREAT) !== 0 && String(p).endsWith('.ts') && ++creates === 2) throw Object.assign(new Error('EIO: injected, openat'), { code: 'EIO', errno: -5, syscall: 'openat' });
        return orig(dirfd, p, flags, mode);
      },
    });
    expectError(() => withSys(snap, sys).resetSync(clone), { code: 'SEAL_IO' });
    // in listing order: one restored (changed by the old ledger's identities), one removed, one the agent's
    const left = snap.diffSync(clone);
    expect(left.removed).toHaveLength(1);
    expect([...left.changed, ...left.removed].sort()).toEqual(['src/a.ts', 'src/b.ts', 'src/lib/c.ts']);
    expect(snap.resetSync(clone)).toMatchObject({ changed: left.changed, removed: left.removed });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    store.closeSync();
  });

  it('a failed ledger write leaves nothing of it in the store, and no ledger: the materialize or reset, which is done, succeeds and says so (ledgerNotSaved); diff then re-hashes (kills saveStoreFile not removing its tmp file)', () => {
    const { work, store, snap } = fixture();
    const clone = join(work, 'clone2');
    mkdirSync(clone);
    // The ledger's rename into clones/ (its new file is written beside the others there).
    const ledgerFails = () => failOnce('renameat2', 'EIO', (_from, name) => String(name).startsWith('build-clones-'));
    const { sys, injected } = ledgerFails();
    expect(withSys(snap, sys).materializeSync(clone)).toMatchObject({ files: 5, reset: false, ledgerNotSaved: 'EIO: injected, renameat2' });
    expect(injected()).toBeDefined();
    // The new ledger is written beside the others in clones/ and removed on failure; the clone keeps none.
    expect(readdirSync(join(work, 'store/tmp'))).toEqual([]);
    expect(readdirSync(join(work, 'store/clones')).filter((n) => !n.endsWith('.ledger'))).toEqual([]);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'hash' });
    expect(lstatSync(join(work, 'store/clones')).mode & 0o777).toBe(0o700);
    // Moving the clone to another snapshot drops the old ledger first: one whose new ledger fails keeps none.
    snap.materializeSync(clone);
    const second = store.captureSync({ source: join(work, 'repo'), copy: ['src/lib'] });
    expect(withSys(second, ledgerFails().sys).materializeSync(clone)).toMatchObject({ reset: false, ledgerNotSaved: 'EIO: injected, renameat2' });
    expect(second.diffSync(clone)).toMatchObject({ ok: true, method: 'hash' });
    // A reset whose new ledger fails: the clone is whole, so it succeeds and says so; the old ledger is dropped (it was
    // SEAL_IO after the restore, and the old ledger stayed, so diff called every restored file changed).
    expect(second.materializeSync(clone).ledgerNotSaved).toBeUndefined();
    writeFileSync(join(clone, 'src/lib/d.ts'), 'AGENT');
    expect(withSys(second, ledgerFails().sys).resetSync(clone)).toMatchObject({ method: 'reset', changed: ['src/lib/d.ts'], ledgerNotSaved: 'EIO: injected, renameat2' });
    expect(second.diffSync(clone)).toMatchObject({ ok: true, method: 'hash' });
    expect(second.checkCloneSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });
});

describe('a clone the agent shut', () => {
  it('a clone directory made mode 0000, 0100 or 0500 by the agent (chmod 0 /workspace) is opened up (u+rwx) by reset and materialize, and made whole; diff, which repairs nothing, says SEAL_IO as a user', () => {
    const { store, snap, clone } = fixture();
    writeFileSync(join(clone, 'src/a.ts'), 'the agent\'s');
    for (const shut of [0o000, 0o100, 0o500]) {
      chmodSync(clone, shut);
      if (process.geteuid?.() !== 0 && shut !== 0o500) expectError(() => snap.diffSync(clone), { code: 'SEAL_IO' });
      expect(snap.resetSync(clone)).toMatchObject({ method: 'reset' });
      expect(statSync(clone).mode & 0o777).toBe(0o700);
      expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
      chmodSync(clone, shut);
      expect(snap.materializeSync(clone)).toMatchObject({ reset: true });
      expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    }
    // A directory this store never made a clone of, shut by its owner (a frozen tree, another store's snapshot): left as
    // it is, as a user refused (root is refused nothing).
    if (process.geteuid?.() !== 0) {
      for (const shut of [0o000, 0o500]) {
        const other = join(dirname(clone), `other-${shut.toString(8)}`);
        writeTree(other, { 'src/mine': 'mine' });
        chmodSync(other, shut);
        expectError(() => snap.materializeSync(other), { code: 'SEAL_IO' });
        expect(statSync(other).mode & 0o777).toBe(shut);
        chmodSync(other, 0o700);
        expect(listTree(other)).toEqual(['src/', 'src/mine']);
      }
    }
    store.closeSync();
  });
});

describe('a clone that changes under a call (the agent still at work)', () => {
  it('a directory removed between its stat and its open (diff, checkClone), or made again between reset\'s look and its mkdir, is SEAL_CHANGED naming its path in the clone, which a caller may retry; run again, the call sees the clone as it is (these were SEAL_UNAVAILABLE, not retryable; then named only the last name, with no path)', () => {
    const { store, snap, clone } = fixture();
    const agentAt = (name: string, call: 'openat' | 'mkdirat', act: () => void): Snapshot => {
      let done = false;
      const sys = wrapSys({
        [call]: (orig: (...a: unknown[]) => unknown) =>
          (...args: unknown[]) => {
            if (!done && args[1] === name) {
              done = true;
              act();
            }
            return orig(...args);
          },
      } as never);
      return withSys(snap, sys);
    };
    const changed = (what: string, code: string, path = 'src/lib'): { code: string; message: RegExp; path: string } => ({
      code: 'SEAL_CHANGED',
      message: new RegExp(`^clone changed while it was ${what}: ${path}: ${code}: (no such file or directory|file already exists), [a-z]+ '${path.split('/').pop()}'$`),
      path,
    });
    // The agent removes lib just as diff (and checkClone) opens it.
    const removeLib = (): void => rmSync(join(clone, 'src/lib'), { recursive: true });
    const err = expectError(() => agentAt('lib', 'openat', removeLib).diffSync(clone), changed('compared', 'ENOENT'));
    expect((err as Error & { cause?: { code?: string }; retryable?: boolean })).toMatchObject({ retryable: true, cause: { code: 'ENOENT' } });
    expect(snap.diffSync(clone)).toMatchObject({ removed: ['src/lib', 'src/lib/c.ts', 'src/lib/d.ts'] });
    snap.resetSync(clone);
    expectError(() => agentAt('lib', 'openat', removeLib).checkCloneSync(clone), changed('checked', 'ENOENT'));
    snap.resetSync(clone);
    // The agent makes lib again just as reset restores it.
    removeLib();
    expectError(() => agentAt('lib', 'mkdirat', () => mkdirSync(join(clone, 'src/lib'))).resetSync(clone), changed('reset', 'EEXIST'));
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset' });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    // A file two levels down (its size unchanged, so its bytes are read) removed just as a re-hashing diff opens it: named by its path, not 'c.ts' alone.
    writeFileSync(join(clone, 'src/lib/c.ts'), 'GAMMA');
    const removeC = (): void => rmSync(join(clone, 'src/lib/c.ts'));
    expectError(() => agentAt('c.ts', 'openat', removeC).diffSync(clone, { verify: true }), changed('compared', 'ENOENT', 'src/lib/c.ts'));
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset' });
    store.closeSync();
  });

  it('what fails on the store\'s side of a reset (its clones/ replaced by a link meanwhile) is the store\'s, said as the ledger not saved (the clone is whole), and nothing is written through the link (it would have been SEAL_CHANGED, retried as the clone\'s)', () => {
    const { work, store, snap, clone, outside } = fixture();
    const clones = join(work, 'store/clones');
    writeFileSync(join(clone, 'src/a.ts'), 'changed');
    // The ledger read (the first open of clones/), then clones/ a link before the reset saves its new ledger there.
    let opens = 0;
    const sys = wrapSys({
      openat: (orig) => (dirfd, name, flags, mode) => {
        if (name === 'clones' && ++opens === 2) {
          renameSync(clones, join(work, 'clones-aside'));
          symlinkSync(outside, clones);
        }
        return orig(dirfd, name, flags, mode);
      },
    });
    const report = withSys(snap, sys).resetSync(clone);
    expect(report).toMatchObject({ method: 'reset', changed: ['src/a.ts'] });
    expect(report.ledgerNotSaved).toMatch(/^SEAL_CORRUPT: store clone ledger cannot be saved: (ELOOP|ENOTDIR): /);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    expect(listTree(outside)).toEqual(['dir/', 'dir/x', 'secret']);
    rmSync(clones);
    renameSync(join(work, 'clones-aside'), clones);
    store.closeSync();
  });
});

describe('times 64-bit nanoseconds cannot hold', () => {
  it('entries dated after 2262 or before 1677 (each stat holds the time at its bound): a file so dated is changed and reset puts it back, one added is removed, a directory so dated is no change, and the clone itself so dated is an arm like any other', () => {
    const { store, snap, clone } = fixture(['src'], 5, '/dev/shm');
    const far = 1e10; // the year 2286: 10^19 ns, past int64
    const past = ['-d', '1653-01-01 UTC']; // Node's utimes takes a negative time for now
    utimesSync(join(clone, 'src/a.ts'), far, far);
    writeFileSync(join(clone, 'src/new.ts'), 'planted');
    execFileSync('touch', [...past, join(clone, 'src/new.ts')]);
    utimesSync(join(clone, 'src/lib'), far, far);
    execFileSync('touch', [...past, join(clone, 'src/lib/c.ts')]);
    utimesSync(clone, far, far);
    writeFileSync(join(clone, 'src/b.ts'), 'BETA');
    const want = { added: ['src/new.ts'], changed: ['src/a.ts', 'src/b.ts', 'src/lib/c.ts'], removed: [] };
    expect(snap.diffSync(clone)).toMatchObject({ ...want, method: 'ledger' });
    expect(snap.diffSync(clone, { verify: true })).toMatchObject({ ...want, changed: ['src/b.ts'], method: 'hash' });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ...want, changed: ['src/b.ts'] });
    expect(snap.resetSync(clone)).toMatchObject({ ...want, method: 'reset' });
    expect(snap.checkCloneSync(clone)).toMatchObject(ok);
    expect(snap.diffSync(clone)).toMatchObject({ ...ok, method: 'ledger' });
    expect(listTree(clone)).toEqual(['src/', 'src/a.ts', 'src/b.ts', 'src/lib/', 'src/lib/c.ts', 'src/lib/d.ts', 'src/run.sh']);
    expect(readFileSync(join(clone, 'src/a.ts'), 'utf8')).toBe('alpha');
    expect(statSync(join(clone, 'src/a.ts')).mtimeMs).toBeLessThan(Date.now() + 1000);
    store.closeSync();
  });
});

describe('modes without a ledger', () => {
  it('checkClone and a verifying diff name a file or directory whose mode is not the one materialize gives (setuid, setgid, world-writable, an x bit)', async () => {
    const { store, snap, clone } = fixture();
    chmodSync(join(clone, 'src/a.ts'), 0o4777);
    chmodSync(join(clone, 'src/lib'), 0o2777);
    chmodSync(join(clone, 'src/run.sh'), 0o700);
    const want = { ok: false, added: [], removed: [], changed: ['src/a.ts', 'src/lib', 'src/run.sh'] };
    expect(snap.checkCloneSync(clone)).toMatchObject(want);
    expect(await snap.diff(clone, { verify: true })).toMatchObject({ ...want, method: 'hash' });
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset' });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });
});

describe('ledger files a writer left', () => {
  it('a new ledger file whose writer died (not flocked) is swept when the store is opened; one a live writer holds is kept', () => {
    const { work, store, clone } = fixture();
    const clones = join(work, 'store/clones');
    const [ledger] = readdirSync(clones);
    writeFileSync(join(clones, 'build-clones-0123456789abcdef01234567'), 'a reset killed before its rename');
    writeFileSync(join(clones, 'build-clones-live00000000000000000000'), 'a write in flight');
    const held = nativeSys.openat(AT_FDCWD, join(clones, 'build-clones-live00000000000000000000'), O_RDONLY, 0);
    try {
      nativeSys.flock(held, LOCK_EX | LOCK_NB);
      const again = SnapshotStore.openSync(join(work, 'store'));
      expect(again.sweptAtOpen).toBe(1);
      expect(readdirSync(clones).sort()).toEqual([ledger, 'build-clones-live00000000000000000000'].sort());
      // The ledger itself is untouched: the clone still diffs by it.
      expect(again.get(again.list()[0]!).diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
      again.closeSync();
    } finally {
      nativeSys.close(held);
      store.closeSync();
    }
  });
});

describe('a ledger write and the sweeps of other opens', () => {
  it("a new ledger file its writer removes while an open's sweep holds it (the writer lost the flock to the sweep) fails no open (the sweep's unlink met ENOENT: SEAL_UNAVAILABLE naming build-clones-…)", () => {
    const { work, store } = fixture();
    const clones = join(work, 'store/clones');
    const racing = join(clones, 'build-clones-0123456789abcdef01234567');
    writeFileSync(racing, 'a ledger being written');
    // Between the sweep's checks and its unlink, the writer (refused its flock) removes its own file.
    const sys = wrapSys({
      unlinkat: (orig) => (dirfd, path, flags) => {
        if (String(path).startsWith('build-clones-')) rmSync(racing, { force: true });
        return orig(dirfd, path, flags);
      },
    });
    const again = SnapshotStore.openSync(join(work, 'store'), { sys });
    expect(again.sweptAtOpen).toBe(0);
    expect(readdirSync(clones).filter((n) => n.startsWith('build-'))).toEqual([]);
    again.closeSync();
    store.closeSync();
  });

  it("a ledger write whose new file a sweep takes every time: a reset and a materialize (both done) keep no ledger and say so; no file is left (both threw undefined)", () => {
    const { work, store, snap, clone } = fixture();
    const clones = join(work, 'store/clones');
    const newFiles = new Set<number>();
    let taken = 0;
    const sys = wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        const fd = orig(dirfd, path, flags, mode);
        if (String(path).startsWith('build-clones-')) newFiles.add(fd);
        return fd;
      },
      flock: (orig) => (fd, op) => {
        if (newFiles.has(fd)) {
          taken++;
          throw systemError('EAGAIN', 'flock');
        }
        return orig(fd, op);
      },
    });
    writeFileSync(join(clone, 'src/a.ts'), 'edited');
    const { dev, ino } = statSync(clone, { bigint: true });
    // The clone is whole before the save: the reset succeeds and says why it keeps no ledger (it was SEAL_BUSY, and the
    // old ledger stayed).
    expect(withSys(snap, sys).resetSync(clone)).toMatchObject({
      method: 'reset',
      changed: ['src/a.ts'],
      ledgerNotSaved: `SEAL_BUSY: clones/${dev}-${ino}.ledger in the store could not be written: a sweep by another process opening the store took its new file 5 times; try again`,
    });
    expect(taken).toBe(5);
    expect(readdirSync(clones).filter((n) => n.startsWith('build-'))).toEqual([]);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'hash' });
    taken = 0;
    const other = join(work, 'clone-2');
    expect(withSys(snap, sys).materializeSync(other, { createClone: true })).toMatchObject({ files: 5 });
    expect(taken).toBe(5);
    expect(snap.diffSync(other)).toMatchObject({ ok: true, method: 'hash' });
    expect(readdirSync(clones).filter((n) => n.startsWith('build-'))).toEqual([]);
    store.closeSync();
  });
});

describe('gc and the ledgers of clones that are gone', () => {
  it('drops the ledgers of clones removed or moved, of snapshots removed, and unreadable ones; keeps the rest, which still diff by it (kills sweepLedgers keeping a stale ledger)', () => {
    const { work, store, snap, clone } = fixture();
    const clones = join(work, 'store/clones');
    const arm = (name: string, s: Snapshot = snap): string => {
      const dir = join(work, name);
      mkdirSync(dir);
      s.materializeSync(dir);
      return dir;
    };
    const removed = arm('removed');
    const moved = arm('moved');
    writeFileSync(join(work, 'repo/src/a.ts'), 'another tree');
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
    arm('of-other', other);
    const names = readdirSync(clones).sort();
    expect(names).toHaveLength(4);
    rmSync(removed, { recursive: true });
    renameSync(moved, join(work, 'moved-away'));
    store.remove(other.digest);
    writeFileSync(join(clones, '1-2.ledger'), 'not a ledger');
    writeFileSync(join(clones, 'notes'), 'not named like a ledger: never touched');
    expect(store.gc()).toBe(4);
    const st = statSync(clone, { bigint: true });
    expect(readdirSync(clones).sort()).toEqual([`${st.dev}-${st.ino}.ledger`, 'notes']);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger' });
    expect(snap.diffSync(join(work, 'moved-away'))).toMatchObject({ ok: true, method: 'hash' });
    expect(store.gc()).toBe(0);
    store.closeSync();
  });
});

describe('a snapshot an async capture returned, used by sync calls', () => {
  it('materializeSync of a keepTimes snapshot leaves its entries as they were, and diffSync and resetSync see the arm right (its paths once read back as NULs and reset removed the arm\'s files)', async () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.txt': 'alpha\n', 'src/d/b.txt': 'beta\n' });
    const store = await SnapshotStore.open(join(work, 'store'));
    const snap = await store.capture({ source: join(work, 'repo'), copy: ['src'], keepTimes: true });
    const arm = join(work, 'arm');
    snap.materializeSync(arm, { createClone: true });
    expect(snap.entries.map((e) => e.path)).toEqual(['src', 'src/a.txt', 'src/d', 'src/d/b.txt']);
    writeFileSync(join(arm, 'src/new.txt'), 'agent');
    // src's recorded mtime moved with the new name in it: changed, and put back.
    expect(snap.diffSync(arm)).toMatchObject({ added: ['src/new.txt'], removed: [], changed: ['src'] });
    expect(snap.resetSync(arm)).toMatchObject({ method: 'reset', added: ['src/new.txt'], removed: [], changed: ['src'] });
    expect(snap.checkCloneSync(arm)).toMatchObject({ ok: true });
    expect(listTree(arm)).toEqual(['src/', 'src/a.txt', 'src/d/', 'src/d/b.txt']);
    snap.verifySync();
    await store.close();
  });
});
