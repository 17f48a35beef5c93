// clone-stage.test.ts: materialize writes only inside the clone: a locked stage there, swept when stale; failures leave the clone as it was.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, linkSync, lstatSync, mkdirSync, openSync, closeSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import { AT_EMPTY_PATH, LOCK_EX, LOCK_NB, O_CREAT, sys as nativeSys, type Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, fdCountingSys, listTree, mkfifo, rootOrSkip, systemError, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const STAGE = '.treeseal-materialize-';
const MARKER = '.treeseal-materializing';

/** The line a materialize writes in its marker. */
function markerLine(digest = 'd'.repeat(64), stage = `${STAGE}${'0'.repeat(24)}`): string {
  return `${JSON.stringify({ digest, stage })}\n`;
}

function fixture(tree: Record<string, string | null>, copy: string[]): { work: string; store: SnapshotStore; snap: Snapshot } {
  const work = tempDir();
  writeTree(join(work, 'repo'), tree);
  const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
  return { work, store, snap: store.captureSync({ source: join(work, 'repo'), copy }) };
}

/** umount of dir if it is still a mount point (a test that failed midway), quietly. */
function spawnUmount(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'ignore' });
  } catch {
    // not mounted
  }
}

function withSys(snap: Snapshot, sys: Sys): Snapshot {
  return new Snapshot(snap.root, snap.toJSON(), { sys });
}

/** Every path below dir with its contents (files) or '/' (directories). */
function contents(dir: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const path = rel === '' ? name : `${rel}/${name}`;
    try {
      out[path] = readFileSync(join(dir, path), 'utf8');
    } catch {
      out[`${path}/`] = '';
      Object.assign(out, contents(dir, path));
    }
  }
  return out;
}

/** chattr `flag` on `root/rel`, reached a directory at a time (rel is far past PATH_MAX). */
function chattrDeep(root: string, rel: string, flag: string): void {
  const script = 'import os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfor p in sys.argv[2].split("/")[:-1]:\n    n = os.open(p, os.O_RDONLY, dir_fd=d)\n    os.close(d)\n    d = n\nos.fchdir(d)\nsys.exit(os.system("chattr " + sys.argv[3] + " " + sys.argv[2].split("/")[-1]))';
  execFileSync('python3', ['-c', script, root, rel, flag]);
}

/** True when an flock on the directory can be taken now (nobody holds the stage). */
function lockFree(path: string): boolean {
  const fd = openSync(path, 'r');
  try {
    nativeSys.flock(fd, LOCK_EX | LOCK_NB);
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

const immutable: string[] = [];
afterEach(() => {
  for (const path of immutable.splice(0)) execFileSync('chattr', ['-i', path]);
});

describe('the materialize stage lives inside the clone', () => {
  it('is a locked hidden directory in the clone while building, and nothing is written beside the clone', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha', 'src/b/c': 'gamma' }, ['src']);
    const clone = join(work, 'clone');
    mkdirSync(clone);
    const beside = readdirSync(work).sort();
    const seen: string[] = [];
    const spy = withSys(snap, wrapSys({
      mkdirat: (orig) => (dirfd, path, mode) => {
        orig(dirfd, path, mode);
        if (path === 'b') {
          const stages = readdirSync(clone).filter((n) => n.startsWith(STAGE));
          seen.push(...stages.map((n) => `${n.length}:${String(lockFree(join(clone, n)))}`));
          expect(readdirSync(work).sort()).toEqual(beside);
        }
      },
    }));
    spy.materializeSync(clone);
    expect(seen).toEqual([`${STAGE.length + 24}:false`]);
    expect(contents(clone)).toEqual({ 'src/': '', 'src/a': 'alpha', 'src/b/': '', 'src/b/c': 'gamma' });
    expect(readdirSync(work).sort()).toEqual(beside);
    store.closeSync();
  });

  it('sweeps stale stages whose lock is free (materialize and gc --clone) and never a held one', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, ['src']);
    const clone = join(work, 'clone');
    writeTree(clone, { [`${STAGE}dead1/new/src/x`]: 'left by a killed run', [`${STAGE}dead2/old/0/y`]: 'old tree' });
    const held = join(clone, `${STAGE}live`);
    mkdirSync(held);
    const fd = openSync(held, 'r');
    nativeSys.flock(fd, LOCK_EX | LOCK_NB);
    try {
      snap.materializeSync(clone);
      expect(readdirSync(clone).sort()).toEqual([`${STAGE}live`, 'src']);
      writeTree(clone, { [`${STAGE}dead3/new/f`]: 'x' });
      expect(store.gc({ clone })).toBe(1);
      expect(readdirSync(clone).sort()).toEqual([`${STAGE}live`, 'src']);
    } finally {
      closeSync(fd);
    }
    expect(store.gc({ clone })).toBe(1);
    expect(readdirSync(clone)).toEqual(['src']);
    store.closeSync();
  });

  it('gc of a clone removed while it runs (opened, then gone before its listing) sweeps nothing there and succeeds (it was SEAL_UNAVAILABLE naming no path)', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, ['src']);
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    writeTree(clone, { [`${STAGE}dead1/new/f`]: 'x' });
    const dropping = wrapSys({
      readdir: (orig) => (fd) => {
        if (readlinkSync(`/proc/self/fd/${fd}`) === clone) rmSync(clone, { recursive: true });
        return orig(fd);
      },
    });
    const racing = SnapshotStore.openSync(store.root, { sys: dropping });
    expect(racing.gc({ clone })).toBe(0);
    expect(existsSync(clone)).toBe(false);
    racing.closeSync();
    store.closeSync();
  });

  it('an old tree 10,000 directories deep goes with the stage, and its mount point or pinned entry at the bottom is still found and named (the look before the swap recursed: SEAL_LIMIT past 4,096 levels, a stack overflow from about 3,000 on the command line)', () => {
    const { work, store, snap } = fixture({ 'tree/a': 'alpha' }, ['tree']);
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['tree'], revision: 'B' });
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    // Made through directory fds: the path is far past PATH_MAX.
    const deep = (levels: number): void => {
      execFileSync('python3', ['-c', 'import os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfor i in range(int(sys.argv[2])):\n    os.mkdir("d", dir_fd=d)\n    n = os.open("d", os.O_RDONLY, dir_fd=d)\n    os.close(d)\n    d = n\nos.close(os.open("bottom", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d))', join(clone, 'tree'), String(levels)]);
    };
    deep(10_000);
    expect(other.materializeSync(clone)).toMatchObject({ files: 1, reset: false });
    expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    if (process.geteuid?.() === 0) {
      // As deep, a file pinned at the bottom: refused before the swap, naming it, the clone as it was.
      deep(5_000);
      const bottom = `${'d/'.repeat(5_000)}bottom`;
      chattrDeep(join(clone, 'tree'), bottom, '+i');
      expectError(() => snap.materializeSync(clone), { code: 'SEAL_IO', message: `copy target cannot be replaced: tree/${bottom} is immutable or append-only`, path: `tree/${bottom}` });
      chattrDeep(join(clone, 'tree'), bottom, '-i');
      expect(snap.materializeSync(clone)).toMatchObject({ reset: false });
      expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    }
    store.closeSync();
  });

  it('the look before the swap and the removal after it keep a bounded number of fds however deep the old tree (an fd per level: EMFILE past 20,000 levels, the arm stuck, or the old tree left in a stage no sweep could remove), and the look finds what a side branch holds after the levels above it were closed', () => {
    const { work, store, snap } = fixture({ 'tree/a': 'alpha' }, ['tree']);
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['tree'], revision: 'B' });
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    const levels = 3_000;
    // A comb: each level holds the next (d) and a side branch, the side's files at the levels named; `locked`: every level
    // 0500 (as a user, each directory the removal moves up must be opened up first: renaming one rewrites its `..`).
    const comb = (files: number[], locked = false): void => {
      execFileSync('python3', ['-c', 'import os, sys\nd = os.open(sys.argv[1], os.O_RDONLY)\nfiles = set(map(int, sys.argv[3].split(",")))\nmade = []\nfor i in range(int(sys.argv[2])):\n    os.mkdir("side", dir_fd=d)\n    if i in files:\n        os.close(os.open("side/f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=d))\n    os.mkdir("d", dir_fd=d)\n    n = os.open("d", os.O_RDONLY, dir_fd=d)\n    made.append(d)\n    d = n\nmade.append(d)\nfor fd in reversed(made[1:]):\n    if sys.argv[4] == "1":\n        os.fchmod(fd, 0o500)\n    os.close(fd)\nos.close(made[0])', join(clone, 'tree'), String(levels), files.join(','), locked ? '1' : '0']);
    };
    // The next level listed first, so every side branch is looked at after the levels below it: the walk comes back to each.
    const { sys, most } = fdCountingSys({
      readdir: (orig) => (...args: Parameters<Sys['readdir']>) => orig(...args).sort((x, y) => (x.name === 'd' ? -1 : y.name === 'd' ? 1 : 0)),
    });
    comb([0, 1_500, levels - 1], true);
    expect(withSys(other, sys).materializeSync(clone)).toMatchObject({ files: 1, reset: false });
    expect(readdirSync(clone)).toEqual(['tree']);
    expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    // 3,000 levels: the look keeps 24 open (one in 128) and the deepest 128, the removal 128, beside the materialize's own.
    expect(most()).toBeGreaterThan(128);
    expect(most()).toBeLessThan(200);
    if (process.geteuid?.() === 0) {
      // A pinned file in a side branch 1,500 levels down, met after the walk came back up past where it had closed levels: found, named.
      comb([1_500]);
      const side = `${'d/'.repeat(1_500)}side/f`;
      chattrDeep(join(clone, 'tree'), side, '+i');
      try {
        expectError(() => withSys(snap, sys).materializeSync(clone), { code: 'SEAL_IO', message: `copy target cannot be replaced: tree/${side} is immutable or append-only`, path: `tree/${side}` });
      } finally {
        chattrDeep(join(clone, 'tree'), side, '-i');
      }
      expect(snap.materializeSync(clone)).toMatchObject({ reset: false });
      expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    }
    store.closeSync();
  });

  it('an old tree the agent locked itself out of (directories 0300, 0000, 0100) goes with the stage: nothing of it is left in the clone, nor in a stale stage a sweep meets', () => {
    // As a user (the unprivileged pass): the stage's removal could not list those, left them, and the next task's arm held the last one's files.
    const { work, store, snap } = fixture({ 'tree/a': 'alpha' }, ['tree']);
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['tree'], revision: 'B' });
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    writeTree(clone, { 'tree/hide/leak.txt': 'TASK-1 SECRET', 'tree/none/deep/x': 'x', 'tree/search/y': 'y' });
    chmodSync(join(clone, 'tree/none/deep'), 0o000);
    chmodSync(join(clone, 'tree/none'), 0o000);
    chmodSync(join(clone, 'tree/hide'), 0o300);
    chmodSync(join(clone, 'tree/search'), 0o100);
    expect(other.materializeSync(clone)).toMatchObject({ files: 1, reset: false });
    expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    // A killed run's stage holding such a tree: the sweep removes it whole.
    writeTree(clone, { [`${STAGE}dead/new/tree/hide/z`]: 'left' });
    chmodSync(join(clone, `${STAGE}dead/new/tree/hide`), 0o300);
    chmodSync(join(clone, `${STAGE}dead/new`), 0o000);
    expect(store.gc({ clone })).toBe(1);
    expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    // A kernel before 6.6 (no fchmodat2, ENOSYS): opened up through the fd's /proc link instead, never a path walked again.
    const calls: string[] = [];
    const oldKernel = wrapSys({
      fchmodat: (orig) => (dirfd, path, mode, flags) => {
        calls.push(String(path).replace(/\/\d+$/, '/N'));
        if ((flags & AT_EMPTY_PATH) !== 0) throw systemError('ENOSYS', 'fchmodat');
        return orig(dirfd, path, mode, flags);
      },
    });
    writeTree(clone, { 'tree/hide/leak.txt': 'TASK-2 SECRET' });
    chmodSync(join(clone, 'tree/hide'), 0o300);
    expect(withSys(snap, oldKernel).materializeSync(clone)).toMatchObject({ reset: false });
    expect(listTree(clone)).toEqual(['tree/', 'tree/a']);
    // As a user it had to open that directory up; as root nothing is refused, and nothing is asked.
    if (process.geteuid?.() !== 0) expect(calls).toEqual(['', '/proc/self/fd/N']);
    store.closeSync();
  });

  it('a directory above a nested root the agent made unsearchable (0000, 0600) is opened up through its own fd, by a whole materialize and by a reset, and is unreadable to diff (as a user, the walk above the root was EACCES)', async () => {
    const { work, store, snap } = fixture({ 'deps/lib/a': 'alpha', 'deps/lib/b': 'beta' }, ['deps/lib']);
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    writeFileSync(join(clone, 'deps/lib/a'), 'changed');
    chmodSync(join(clone, 'deps'), 0o000);
    // The parent's mode put back (0700) is a change reset names, as diff named it.
    expect(await snap.reset(clone)).toMatchObject({ reset: true, changed: ['deps', 'deps/lib/a'] });
    expect(listTree(clone)).toEqual(['deps/', 'deps/lib/', 'deps/lib/a', 'deps/lib/b']);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    // Without a ledger (another snapshot's clone): the whole materialize's swap walks down to the root.
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['deps/lib'], revision: 'B' });
    chmodSync(join(clone, 'deps'), 0o600);
    // Listed but not searchable: diff and checkClone say so (as a user; root searches it anyway), and reset opens it up.
    const asUser = process.geteuid?.() !== 0;
    const blind = { unreadable: asUser ? ['deps'] : [], changed: ['deps'], removed: [] };
    expect(await snap.diff(clone)).toMatchObject(blind);
    expect(snap.checkCloneSync(clone)).toMatchObject(blind);
    expect(snap.resetSync(clone)).toMatchObject({ reset: true, changed: ['deps'] });
    expect(snap.diffSync(clone)).toMatchObject({ ok: true });
    chmodSync(join(clone, 'deps'), 0o600);
    expect(other.materializeSync(clone)).toMatchObject({ reset: false, files: 2 });
    expect(listTree(clone)).toEqual(['deps/', 'deps/lib/', 'deps/lib/a', 'deps/lib/b']);
    expect(other.checkCloneSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('a directory above a root put under another rule (0777, 0555) is named changed by diff and checkClone and put back to u+rwx, go-w by reset and by a whole materialize; a read-only root is swapped out; another user\'s is SEAL_UNTRUSTED (it was kept, world-writable, and reset failed EACCES under a 0555 one)', async () => {
    const { work, store, snap } = fixture({ 'deps/lib/a': 'alpha', 'deps/lib/b': 'beta' }, ['deps/lib']);
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    const mode = (p: string): number => statSync(join(clone, p)).mode & 0o7777;
    chmodSync(join(clone, 'deps'), 0o777);
    expect(await snap.diff(clone)).toMatchObject({ changed: ['deps'], removed: [], added: [] });
    expect(snap.checkCloneSync(clone)).toMatchObject({ changed: ['deps'] });
    expect(snap.resetSync(clone)).toMatchObject({ changed: ['deps'], removed: [] });
    // Writable by no one else again; what else its mode allows is left as the agent set it.
    expect(mode('deps')).toBe(0o755);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true });
    // The root replaced by a file under a parent made read-only: as a user its unlink was EACCES.
    rmSync(join(clone, 'deps/lib'), { recursive: true });
    writeFileSync(join(clone, 'deps/lib'), 'the agent\'s');
    chmodSync(join(clone, 'deps'), 0o555);
    expect(await snap.reset(clone)).toMatchObject({ changed: ['deps', 'deps/lib'], removed: ['deps/lib/a', 'deps/lib/b'] });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    // A whole materialize (another snapshot): a read-only parent and a read-only old root (its `..` is rewritten by the move).
    const other = store.captureSync({ source: join(work, 'repo'), copy: ['deps/lib'], revision: 'B' });
    chmodSync(join(clone, 'deps/lib'), 0o555);
    chmodSync(join(clone, 'deps'), 0o500);
    expect(other.materializeSync(clone)).toMatchObject({ reset: false, files: 2 });
    expect([mode('deps'), mode('deps/lib')]).toEqual([0o700, 0o700]);
    expect(other.checkCloneSync(clone)).toMatchObject({ ok: true });
    if (process.geteuid?.() === 0) {
      chownSync(join(clone, 'deps'), 999, 999);
      expect(other.diffSync(clone)).toMatchObject({ changed: ['deps'] });
      const untrusted = { code: 'SEAL_UNTRUSTED', message: "untrusted clone: deps, above a copy root, is owned by uid 999, not by the clone's owner (uid 0); fix: remove it", unchanged: clone };
      expectError(() => other.resetSync(clone), untrusted);
      expectError(() => snap.materializeSync(clone), untrusted);
      // Theirs and shut (0000): theirs all the same, said before it is opened (it was SEAL_IO, EACCES).
      chmodSync(join(clone, 'deps'), 0o000);
      expectError(() => other.resetSync(clone), untrusted);
      chmodSync(join(clone, 'deps'), 0o700);
      chownSync(join(clone, 'deps'), 0, 0);
    }
    // Listed but not searchable two levels above a root: diff and checkClone name it unreadable (as a user; root searches
    // it), not SEAL_IO.
    const deep = store.captureSync({ source: join(work, 'repo'), copy: ['deps/lib/a'] });
    deep.materializeSync(join(work, 'deep'), { createClone: true });
    chmodSync(join(work, 'deep/deps'), 0o600);
    const seen = { changed: ['deps'], unreadable: process.geteuid?.() === 0 ? [] : ['deps'], removed: [] };
    expect(deep.diffSync(join(work, 'deep'))).toMatchObject(seen);
    expect(deep.checkCloneSync(join(work, 'deep'))).toMatchObject(seen);
    expect(deep.resetSync(join(work, 'deep'))).toMatchObject({ changed: ['deps'] });
    expect(deep.checkCloneSync(join(work, 'deep'))).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('a chmod of a root the agent makes while a reset walks it is a difference the next diff sees: the ledger records the mode reset set, not the one it found after (it recorded the agent\'s 0777, and diff and reset then kept it)', () => {
    const { work, store, snap } = fixture({ 'deps/lib/a': 'alpha', 'deps/lib/b': 'beta' }, ['deps/lib']);
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    writeFileSync(join(clone, 'deps/lib/a'), 'changed');
    let agent = false;
    const sys = wrapSys({
      readdir: (orig) => (fd) => {
        const out = orig(fd);
        // The root is being reset (its mode already set): the agent widens it now.
        if (!agent && out.some((e) => e.name === 'a')) {
          agent = true;
          chmodSync(join(clone, 'deps/lib'), 0o777);
        }
        return out;
      },
    });
    expect(withSys(snap, sys).resetSync(clone)).toMatchObject({ changed: ['deps/lib/a'] });
    expect(agent).toBe(true);
    expect(statSync(join(clone, 'deps/lib')).mode & 0o7777).toBe(0o777);
    expect(snap.diffSync(clone)).toMatchObject({ changed: ['deps/lib'] });
    expect(snap.resetSync(clone)).toMatchObject({ changed: ['deps/lib'] });
    expect(statSync(join(clone, 'deps/lib')).mode & 0o7777).toBe(0o700);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it.runIf(rootOrSkip('mounting a tmpfs'))('works when the clone is itself a mount point', () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha', other: 'o' }, ['src', 'other']);
    const clone = join(work, 'mounted');
    mkdirSync(clone);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', clone]);
    try {
      writeTree(clone, { 'src/stale': 's', keep: 'k' });
      // A tmpfs root is 1777 unless mounted with mode=: a clone others can write is refused, saying so.
      expectError(() => snap.materializeSync(clone), { code: 'SEAL_UNTRUSTED', message: `untrusted clone: ${clone} is writable by other users (mode 1777); fix: chmod go-w ${clone}` });
      chmodSync(clone, 0o700);
      expect(snap.materializeSync(clone)).toMatchObject({ files: 2 });
      expect(contents(clone)).toEqual({ keep: 'k', other: 'o', 'src/': '', 'src/a': 'alpha' });
    } finally {
      execFileSync('umount', [clone]);
    }
    store.closeSync();
  });

  it.runIf(rootOrSkip('mount --bind'))('a directory bound into an old tree: SEAL_BUSY naming it before anything is written, the bound directory and the clone as they were (a whole materialize emptied it through the mount and left its stage)', () => {
    const { work, store, snap } = fixture({ 'one/a': 'new1' }, ['one']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'one/a': 'old1', 'one/bound/': null });
    const victim = join(work, 'victim');
    writeTree(victim, { v: 'precious', 'sub/p': 'precious too' });
    execFileSync('mount', ['--bind', victim, join(clone, 'one/bound')]);
    try {
      const before = contents(clone);
      expectError(() => snap.materializeSync(clone), {
        code: 'SEAL_BUSY',
        message: "copy target cannot be replaced: one/bound is a mount point (unmount it first: what is mounted there is not the clone's to remove)",
        path: 'one/bound',
        unchanged: clone,
      });
      expect(contents(clone)).toEqual(before);
      expect(contents(victim)).toEqual({ 'sub/': '', 'sub/p': 'precious too', v: 'precious' });
      // A stale stage the sweep meets with a mount inside (bound after its materialize died): the sweep empties nothing
      // across it (removal never enters another mount) and leaves that stage; the materialize goes on.
      execFileSync('umount', [join(clone, 'one/bound')]);
      const stale = join(clone, `${STAGE}${'1'.repeat(24)}`);
      mkdirSync(join(stale, 'old/x/bound'), { recursive: true });
      writeFileSync(join(stale, 'old/x/loose'), 'swept');
      execFileSync('mount', ['--bind', victim, join(stale, 'old/x/bound')]);
      try {
        expect(snap.materializeSync(clone)).toMatchObject({ files: 1 });
        expect(contents(victim)).toEqual({ 'sub/': '', 'sub/p': 'precious too', v: 'precious' });
        expect(existsSync(join(stale, 'old/x/bound/v'))).toBe(true);
        // The same without openat2 (a kernel before 5.6, or a sandbox's filter refusing it): the mount is told by statx.
        const noOpenat2 = wrapSys({ openat2: () => () => { throw systemError('ENOSYS', 'openat2'); } });
        expect(withSys(snap, noOpenat2).materializeSync(clone)).toMatchObject({ reset: true });
        expect(contents(victim)).toEqual({ 'sub/': '', 'sub/p': 'precious too', v: 'precious' });
      } finally {
        execFileSync('umount', [join(stale, 'old/x/bound')]);
      }
      // Unmounted, the next materialize sweeps it.
      snap.materializeSync(clone);
      expect(readdirSync(clone).sort()).toEqual(['one']);
      expect(contents(join(clone, 'one'))).toEqual({ a: 'new1' });
    } finally {
      spawnUmount(join(clone, 'one/bound'));
    }
    store.closeSync();
  });

  it.runIf(rootOrSkip('mount --bind'))('a mount the look before the swap could not see: the materialize succeeds, nothing on the mount removed, and the report says which stage holds the old tree and why (it said nothing); once unmounted, the next materialize sweeps it', () => {
    const { work, store, snap } = fixture({ 'one/a': 'new1' }, ['one']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'one/a': 'old1', 'one/bound/': null, keep: 'k' });
    const victim = join(work, 'victim');
    writeTree(victim, { v: 'precious' });
    execFileSync('mount', ['--bind', victim, join(clone, 'one/bound')]);
    let bound = join(clone, 'one/bound');
    try {
      // A kernel before 5.8: statx reports no STATX_ATTR_MOUNT_ROOT.
      const blind = wrapSys({ statx: (orig) => (dirfd, name, flags) => {
        const st = orig(dirfd, name, flags);
        return { ...st, attributes: st.attributes & ~0x2000 };
      } });
      const report = withSys(snap, blind).materializeSync(clone);
      expect(report.stageLeft).toEqual({ path: expect.stringMatching(new RegExp(`^${STAGE}[0-9a-f]{24}$`)), reason: expect.stringMatching(/^SEAL_BUSY: .*mount/) });
      const stage = report.stageLeft!.path;
      expect(contents(victim)).toEqual({ v: 'precious' });
      expect(readdirSync(clone).sort()).toEqual([stage, 'keep', 'one'].sort());
      expect(contents(join(clone, 'one'))).toEqual({ a: 'new1' });
      // The old tree is where the report says, its mount with it.
      const moved = listTree(join(clone, stage)).find((p) => p.endsWith('/bound/'));
      expect(moved).toBeDefined();
      bound = join(clone, stage, moved!);
      expect(readFileSync(join(bound, 'v'), 'utf8')).toBe('precious');
      // Still mounted: the next materialize's sweep leaves that stage (and its own goes).
      const second = snap.materializeSync(clone);
      expect([second.reset, second.stageLeft]).toEqual([true, undefined]);
      expect(readdirSync(clone).sort()).toEqual([stage, 'keep', 'one'].sort());
      execFileSync('umount', [bound]);
      const again = snap.materializeSync(clone);
      expect(again.stageLeft).toBeUndefined();
      expect(readdirSync(clone).sort()).toEqual(['keep', 'one']);
      expect(contents(victim)).toEqual({ v: 'precious' });
    } finally {
      spawnUmount(bound);
    }
    store.closeSync();
  });

  it.runIf(rootOrSkip('mount --bind'))('a reset by the ledger meeting a directory bound into what it removes: SEAL_BUSY naming it, nothing on the mount removed; once unmounted, the next reset makes the clone whole (it was SEAL_IO, EBUSY, renameat2 naming only its last name)', () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'one/a': 'new1' });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['one'] });
    const clone = join(work, 'arm');
    snap.materializeSync(clone, { createClone: true });
    const victim = join(work, 'victim');
    writeTree(victim, { v: 'precious' });
    const bound = join(clone, 'one/added/bound');
    mkdirSync(bound, { recursive: true });
    execFileSync('mount', ['--bind', victim, bound]);
    let stage: string | undefined;
    try {
      expectError(() => snap.resetSync(clone), {
        code: 'SEAL_BUSY',
        message: new RegExp(`^clone entry cannot be removed: one/added/bound is a mount point \\(what held it was moved into the reset's stage: unmount it at ${STAGE}[0-9a-f]{24}/old/0/bound in the clone, then reset again\\)$`),
        path: 'one/added/bound',
      });
      expect(contents(victim)).toEqual({ v: 'precious' });
      // Moved, with what holds it, into the reset's stage; another reset meanwhile leaves that stage (its removal does not cross the mount).
      stage = readdirSync(clone).find((n) => n.startsWith(STAGE));
      expect(snap.resetSync(clone)).toMatchObject({ method: 'reset', added: [] });
      expect(contents(victim)).toEqual({ v: 'precious' });
    } finally {
      for (const at of [bound, ...(stage === undefined ? [] : [join(clone, stage, 'old/0/bound')])]) spawnUmount(at);
    }
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset', added: [] });
    expect(readdirSync(clone)).toEqual(['one']);
    expect(contents(join(clone, 'one'))).toEqual({ a: 'new1' });
    expect(contents(victim)).toEqual({ v: 'precious' });
    // A file bound over one the reset must remove (it was SEAL_IO, EBUSY, unlinkat): SEAL_BUSY where it stands, the file bound untouched.
    const env = join(clone, 'one/extra.env');
    writeFileSync(env, 'agent');
    writeFileSync(join(work, 'host.env'), 'host');
    execFileSync('mount', ['--bind', join(work, 'host.env'), env]);
    try {
      expectError(() => snap.resetSync(clone), {
        code: 'SEAL_BUSY',
        message: 'clone entry cannot be removed: one/extra.env is a mount point (unmount it, then reset again)',
        path: 'one/extra.env',
      });
      expect(readFileSync(join(work, 'host.env'), 'utf8')).toBe('host');
    } finally {
      spawnUmount(env);
    }
    expect(snap.resetSync(clone)).toMatchObject({ added: ['one/extra.env'] });
    store.closeSync();
  });

  it.runIf(rootOrSkip('chattr +i'))('an immutable file in an old tree: a typed error, the clone as it was, nothing left anywhere', () => {
    const { work, store, snap } = fixture({ 'one/a': 'new1', 'two/b': 'new2' }, ['one', 'two']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'one/a': 'old1', 'two/deep/locked': 'old2', 'two/deep/plain': 'p' });
    const locked = join(clone, 'two/deep/locked');
    execFileSync('chattr', ['+i', locked]);
    immutable.push(locked);
    const before = contents(clone);
    const beside = readdirSync(work).sort();
    expectError(() => snap.materializeSync(clone), {
      code: 'SEAL_IO',
      message: 'copy target cannot be replaced: two/deep/locked is immutable or append-only',
      path: 'two/deep/locked',
      unchanged: clone,
    });
    expect(contents(clone)).toEqual(before);
    expect(readdirSync(work).sort()).toEqual(beside);
    store.closeSync();
  });

  it.runIf(rootOrSkip('chattr +i'))('a reset (or a materialize that resets) meeting an immutable file it must remove stops there with a typed error naming its clone path (and where it was moved to); the next reset, once the flag is cleared, makes the clone whole (it was SEAL_IO, EPERM, unlinkat naming only its last name)', () => {
    const { work, store, snap } = fixture({ 'r/ro/g': 'g', 's/h': 'h' }, ['r', 's']);
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    const whole = contents(clone);
    // However the test ends, nothing pinned is left for the temp directory's removal.
    onTestFinished(() => {
      try {
        execFileSync('chattr', ['-R', '-i', '-a', clone], { stdio: 'ignore' });
      } catch {
        // Gone already.
      }
    });
    // An added file in a root's directory.
    writeFileSync(join(clone, 's/h'), 'AGENT');
    writeFileSync(join(clone, 'r/imm'), 'pinned');
    execFileSync('chattr', ['+i', join(clone, 'r/imm')]);
    for (const call of [() => snap.resetSync(clone), () => snap.materializeSync(clone)]) {
      const err = expectError(call, { code: 'SEAL_IO', message: 'clone entry cannot be removed: r/imm is immutable or append-only (chattr -i or -a as root, then reset again)', path: 'r/imm' });
      expect((err as Error & { cause?: { code?: string } }).cause?.code).toBe('EPERM');
    }
    execFileSync('chattr', ['-i', join(clone, 'r/imm')]);
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset', added: ['r/imm'] });
    expect(contents(clone)).toEqual(whole);
    // An added file in a directory the agent's root made append-only: the directory is what is pinned, said so.
    writeFileSync(join(clone, 's/extra'), 'x');
    execFileSync('chattr', ['+a', join(clone, 's')]);
    expectError(() => snap.resetSync(clone), { code: 'SEAL_IO', message: 'clone entry cannot be removed: s/extra is in an immutable or append-only directory (chattr -i or -a as root, then reset again)', path: 's/extra' });
    execFileSync('chattr', ['-a', join(clone, 's')]);
    expect(snap.resetSync(clone)).toMatchObject({ added: ['s/extra'] });
    expect(contents(clone)).toEqual(whole);
    // One in an added directory, which reset moves aside into its stage before emptying it: both places named.
    writeTree(clone, { 'r/deep/imm': 'pinned', 'r/deep/plain': 'p' });
    execFileSync('chattr', ['+i', join(clone, 'r/deep/imm')]);
    const err = expectError(() => snap.resetSync(clone), { code: 'SEAL_IO', path: 'r/deep/imm' }) as Error;
    const moved = /^clone entry cannot be removed: r\/deep\/imm \(moved to (\.treeseal-[^ ]+\/old\/0\/imm) in the clone\) is immutable or append-only \(chattr -i or -a as root, then reset again\)$/.exec(err.message);
    expect(moved).not.toBeNull();
    execFileSync('chattr', ['-i', join(clone, moved![1]!)]);
    snap.resetSync(clone);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    expect(contents(clone)).toEqual(whole);
    store.closeSync();
  });

  it('a root whose rename fails part way (EXDEV) is rolled back: the clone as it was, the system error as cause', () => {
    const { work, store, snap } = fixture({ 'one/a': 'new1', 'mid/f': 'file in place of a dir', 'two/b': 'new2' }, ['one', 'mid/f', 'two']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'one/a': 'old1', mid: 'a file where a directory goes', 'two/b': 'old2' });
    const before = contents(clone);
    let renames = 0;
    const failing = withSys(snap, wrapSys({
      renameat2: (orig) => (a, b, c, d, flags) => {
        if (d === 'two' && ++renames === 1) throw Object.assign(new Error('EXDEV: cross-device link not permitted, renameat2'), { code: 'EXDEV', errno: -18, syscall: 'renameat2' });
        orig(a, b, c, d, flags);
      },
    }));
    const err = expectError(() => failing.materializeSync(clone), {
      code: 'SEAL_UNAVAILABLE',
      message: "copy target cannot be moved within the clone (EXDEV): it is on another filesystem than the clone, or a directory of an overlay's lower layer, which overlayfs renames only with redirect_dir on: two",
      unchanged: clone,
    });
    expect((err.cause as { code: string }).code).toBe('EXDEV');
    expect(contents(clone)).toEqual(before);
    store.closeSync();
  });
});

describe('an interrupted materialize is detectable', () => {
  it('a marker in the clone records a materialize in progress until the last root is swapped', () => {
    const { work, store, snap } = fixture({ 'one/a': '1', 'two/b': '2' }, ['one', 'two']);
    const clone = join(work, 'clone');
    mkdirSync(clone);
    const markers: boolean[] = [];
    const spy = withSys(snap, wrapSys({
      renameat2: (orig) => (a, b, c, d, flags) => {
        markers.push(existsSync(join(clone, MARKER)));
        orig(a, b, c, d, flags);
      },
    }));
    spy.materializeSync(clone);
    // Then the clone's ledger is renamed into the store, the marker gone.
    expect(markers).toEqual([true, true, false]);
    expect(existsSync(join(clone, MARKER))).toBe(false);
    expect(contents(clone)).toEqual({ 'one/': '', 'one/a': '1', 'two/': '', 'two/b': '2' });
    store.closeSync();
  });

  it('checkClone re-hashes the copy roots and names every difference, and the marker', async () => {
    const { work, store, snap } = fixture({ 'src/a': 'alpha', 'src/b/c': 'gamma', 'src/d': 'delta', 'lib/x/y': 'why' }, ['src', 'lib/x']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'lib/unrelated': 'not a root' });
    snap.materializeSync(clone);
    const clean = { ok: true, marker: false, added: [], removed: [], changed: [] };
    expect(snap.checkCloneSync(clone)).toMatchObject(clean);
    expect(await snap.checkClone(clone)).toMatchObject(clean);
    writeFileSync(join(clone, 'src/a'), 'ALPHA');
    writeFileSync(join(clone, 'src/new'), 'n');
    execFileSync('rm', ['-r', join(clone, 'src/b')]);
    writeFileSync(join(clone, MARKER), markerLine(snap.digest));
    const dirty = { ok: false, marker: true, added: ['src/new'], removed: ['src/b', 'src/b/c'], changed: ['src/a'] };
    expect(snap.checkCloneSync(clone)).toMatchObject(dirty);
    expect(await snap.checkClone(clone)).toMatchObject(dirty);
    execFileSync('rm', ['-r', join(clone, 'lib/x')]);
    writeFileSync(join(clone, 'lib/x'), 'file for dir');
    expect(snap.checkCloneSync(clone)).toMatchObject({ changed: ['lib/x', 'src/a'], removed: ['lib/x/y', 'src/b', 'src/b/c'] });
    snap.materializeSync(clone);
    expect(snap.checkCloneSync(clone)).toMatchObject(clean);
    expectError(() => snap.checkCloneSync(join(work, 'missing')), { code: 'SEAL_UNAVAILABLE' });
    store.closeSync();
  });
});

describe('rm racing materialize, mountPoints and verify', () => {
  /** A store with one snapshot, a second store object on it (`other`), and an empty clone. */
  function racing(): { work: string; store: SnapshotStore; snap: Snapshot; other: SnapshotStore; clone: string } {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a': 'alpha', 'src/b': 'beta', 'deps/f': 'x' });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'deps', target: 'deps' }] });
    const clone = join(work, 'clone');
    mkdirSync(clone);
    return { work, store, snap, other: SnapshotStore.openSync(store.root), clone };
  }

  /** rm of the snapshot, as another process would try it at this exact step: it must wait while a reader holds the store. */
  function tryRemove(storeRoot: string): 'removed' | 'waits' {
    const fd = openSync(join(storeRoot, 'lock'), 'r');
    try {
      nativeSys.flock(fd, LOCK_EX | LOCK_NB);
    } catch {
      closeSync(fd);
      return 'waits';
    }
    closeSync(fd);
    return 'removed';
  }

  it('materialize holds the shared store lock while it reads the snapshot; rm waits and then succeeds', () => {
    const { store, snap, other, clone } = racing();
    const seen: string[] = [];
    const spy = withSys(snap, wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        if (path === 'a' && seen.length === 0) {
          seen.push(tryRemove(store.root));
          if (seen[0] === 'removed') other.remove(snap.digest);
        }
        return orig(dirfd, path, flags, mode);
      },
    }));
    expect(spy.materializeSync(clone)).toMatchObject({ files: 2 });
    expect(seen).toEqual(['waits']);
    expect(contents(clone)).toEqual({ 'src/': '', 'src/a': 'alpha', 'src/b': 'beta' });
    expect(other.remove(snap.digest)).toBe(snap.digest);
    other.closeSync();
    store.closeSync();
  });

  it('a snapshot removed before materialize, mountPoints or verify takes the lock is SEAL_UNAVAILABLE, not SEAL_CORRUPT', async () => {
    const { store, snap, other, clone } = racing();
    let armed = true;
    const removing = withSys(snap, wrapSys({
      flock: (orig) => (fd, op) => {
        if (armed) {
          armed = false;
          other.remove(snap.digest);
        }
        orig(fd, op);
      },
    }));
    for (const call of [() => removing.materializeSync(clone), () => removing.mountPoints(clone), () => removing.verifySync()]) {
      expectError(call, { code: 'SEAL_UNAVAILABLE', message: `snapshot was removed: ${snap.digest}`, unchanged: clone });
    }
    expect(readdirSync(clone)).toEqual([]);
    await expect(snap.materialize(clone)).rejects.toMatchObject({ code: 'SEAL_UNAVAILABLE' });
    await expect(snap.verify()).rejects.toMatchObject({ code: 'SEAL_UNAVAILABLE' });
    other.closeSync();
    store.closeSync();
  });

  it('verify and mountPoints hold the shared lock too', () => {
    const { store, snap, other, clone } = racing();
    const seen: string[] = [];
    const spy = withSys(snap, wrapSys({
      fstatat: (orig) => (dirfd, path, flags) => {
        if (path === 'a' || String(path).endsWith('/payload')) seen.push(tryRemove(store.root));
        return orig(dirfd, path, flags);
      },
    }));
    spy.verifySync();
    spy.mountPoints(clone);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(new Set(seen)).toEqual(new Set(['waits']));
    other.closeSync();
    store.closeSync();
    expect(existsSync(snap.root)).toBe(true);
  });
});

describe('the in-progress marker is created, never trusted', () => {
  /** A snapshot, a clone holding an old tree, and a file outside the clone that holds a marker line (so only its link count gives it away). */
  function planting(): { work: string; store: SnapshotStore; snap: Snapshot; clone: string; victim: string } {
    const { work, store, snap } = fixture({ 'src/a': 'alpha' }, ['src']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'src/old': 'old' });
    const victim = join(work, 'victim.txt');
    writeFileSync(victim, markerLine());
    chmodSync(victim, 0o640);
    return { work, store, snap, clone, victim };
  }

  function refused(what: string): { code: string; message: string; path: string } {
    return { code: 'SEAL_COLLISION', message: `materialize marker in the clone is not one materialize made (${what}): ${MARKER}`, path: MARKER };
  }

  it('a hard link planted as the marker: refused before anything is written; the file it links, and the link, untouched', async () => {
    const { work, store, snap, clone, victim } = planting();
    linkSync(victim, join(clone, MARKER));
    const before = contents(clone);
    expectError(() => snap.materializeSync(clone), { ...refused('a file with 2 links'), unchanged: work });
    await expectError(async () => snap.materialize(clone), { ...refused('a file with 2 links'), unchanged: work });
    expect(readFileSync(victim, 'utf8')).toBe(markerLine());
    expect(lstatSync(victim).mode & 0o7777).toBe(0o640);
    expect(lstatSync(join(clone, MARKER)).ino).toBe(lstatSync(victim).ino);
    expect(contents(clone)).toEqual(before);
    store.closeSync();
  });

  it('a hard link planted while the roots are built (the marker is made O_EXCL): refused, the clone and the linked file as they were', () => {
    const { store, snap, clone, victim } = planting();
    const before = listTree(clone);
    const racing = withSys(snap, wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        if (path === MARKER && (flags & O_CREAT) !== 0 && !existsSync(join(clone, MARKER))) linkSync(victim, join(clone, MARKER));
        return orig(dirfd, path, flags, mode);
      },
    }));
    expectError(() => racing.materializeSync(clone), refused('a file with 2 links'));
    expect(readFileSync(victim, 'utf8')).toBe(markerLine());
    expect(lstatSync(victim).nlink).toBe(2);
    // The stage is gone; the planted link is all that is new.
    expect(listTree(clone)).toEqual([MARKER, ...before].sort());
    expect(readFileSync(join(clone, 'src/old'), 'utf8')).toBe('old');
    store.closeSync();
  });

  it('a symlink, a FIFO, a directory, a file of other bytes or of another owner: refused at once and left in place', () => {
    const { work, store, snap, clone, victim } = planting();
    const cases: [string, () => void][] = [
      ['a symlink', () => symlinkSync(victim, join(clone, MARKER))],
      ['not a regular file', () => mkfifo(join(clone, MARKER))],
      ['a directory', () => writeTree(clone, { [`${MARKER}/inside`]: 'kept' })],
      ['not a marker', () => writeFileSync(join(clone, MARKER), '{}')],
      ['not a marker', () => writeFileSync(join(clone, MARKER), `${markerLine()} `)],
      // Giving a file away takes root.
      ...(rootOrSkip('chown to another uid')
        ? [['owned by uid 4321', () => {
            writeFileSync(join(clone, MARKER), markerLine());
            chownSync(join(clone, MARKER), 4321, 4321);
          }] as [string, () => void]]
        : []),
    ];
    for (const [what, plant] of cases) {
      plant();
      const planted = lstatSync(join(clone, MARKER));
      expectError(() => snap.materializeSync(clone), { ...refused(what), unchanged: work });
      expect(lstatSync(join(clone, MARKER))).toMatchObject({ ino: planted.ino, mode: planted.mode, size: planted.size });
      execFileSync('rm', ['-r', join(clone, MARKER)]);
    }
    expect(readFileSync(victim, 'utf8')).toBe(markerLine());
    expect(snap.materializeSync(clone)).toMatchObject({ files: 1 });
    expect(contents(clone)).toEqual({ 'src/': '', 'src/a': 'alpha' });
    store.closeSync();
  });

  it('a marker that cannot be removed once the roots are in is said as stageLeft, not a failure: the clone keeps it (checkClone says so) until the next materialize replaces it', () => {
    const { work, store, snap } = fixture({ 'one/a': '1' }, ['one']);
    const clone = join(work, 'clone');
    writeTree(clone, { 'one/old': 'o' });
    const sys = wrapSys({
      unlinkat: (orig) => (dirfd, path, flags) => {
        if (String(path) === MARKER) throw systemError('EIO', 'unlinkat');
        orig(dirfd, path, flags);
      },
    });
    const report = withSys(snap, sys).materializeSync(clone);
    expect(report).toMatchObject({ files: 1, reset: false, stageLeft: { path: MARKER, reason: expect.stringMatching(/^EIO: /) } });
    expect(readdirSync(clone).sort()).toEqual([MARKER, 'one']);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: false, marker: true, added: [], removed: [], changed: [] });
    expect(snap.materializeSync(clone).stageLeft).toBeUndefined();
    expect(readdirSync(clone)).toEqual(['one']);
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true, marker: false });
    store.closeSync();
  });

  const deaths = [
    ['at its first swap', 'swap'],
    ['right after creating the marker', 'marker'],
    // The roots swapped in, the last task's files still in the stage: the clone stays marked (it looked clean to diff and checkClone).
    ['while it removes the old trees', 'removal'],
  ] as const;
  for (const [when, step] of deaths) {
    it(`the marker and stage of a materialize killed ${when} are recovered: the next one replaces the marker and removes both`, () => {
      const line = step !== 'marker';
      const { work, store, snap } = fixture({ 'one/a': '1', 'two/b': '2' }, ['one', 'two']);
      const clone = join(work, 'clone');
      writeTree(clone, { 'one/old': 'o', 'two/old': 'o' });
      // A process that SIGKILLs itself at that step.
      const kill = {
        swap: `renameat2: () => process.kill(process.pid, 'SIGKILL')`,
        marker: `openat: (d, p, f, m) => { const fd = sys.openat(d, p, f, m); if (p === ${JSON.stringify(MARKER)}) process.kill(process.pid, 'SIGKILL'); return fd; }`,
        removal: `unlinkat: (d, p, f) => { if (String(p) === 'old') process.kill(process.pid, 'SIGKILL'); return sys.unlinkat(d, p, f); }`,
      }[step];
      const script = `
        const { Snapshot } = await import(${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)});
        const { sys } = await import(${JSON.stringify(new URL('../../dist/sys/index.js', import.meta.url).href)});
        const data = JSON.parse(process.argv[1]);
        const dying = { ...sys, ${kill} };
        new Snapshot(data.root, data.data, { sys: dying }).materializeSync(process.argv[2]);`;
      let signal: string | null = null;
      try {
        execFileSync(process.execPath, ['--input-type=module', '-e', script, JSON.stringify({ root: snap.root, data: snap.toJSON() }), clone], { stdio: 'pipe' });
      } catch (err) {
        signal = (err as { signal: string | null }).signal;
      }
      expect(signal).toBe('SIGKILL');
      const left = readdirSync(clone).sort();
      expect(left).toHaveLength(4);
      const stage = left.find((n) => n.startsWith(STAGE))!;
      expect(readFileSync(join(clone, MARKER), 'utf8')).toBe(line ? markerLine(snap.digest, stage) : '');
      expect(snap.checkCloneSync(clone)).toMatchObject({ ok: false, marker: true });
      expect(snap.materializeSync(clone)).toMatchObject({ files: 2 });
      expect(contents(clone)).toEqual({ 'one/': '', 'one/a': '1', 'two/': '', 'two/b': '2' });
      expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true, marker: false });
      store.closeSync();
    });
  }
});
