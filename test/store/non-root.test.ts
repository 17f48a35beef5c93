// non-root.test.ts: rm, gc, ephemeral close and thaw as a user without root: a snapshot sharing files by hard links keeps their modes and verifies.
import { chmodSync, linkSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import {
  CLOCK_AHEAD_NS,
  DIST_INDEX,
  NOBODY,
  canDropPrivileges,
  checkNoFdLeaks,
  childJson,
  chownTree,
  expectError,
  failOnce,
  isRoot,
  listTree,
  runNodeAs,
  tempDir,
  writeTree,
  type RunAs,
} from '../helpers.js';

checkNoFdLeaks();

const AS_USER = fileURLToPath(new URL('./as-user.mjs', import.meta.url));
const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
/** Root runs the children as nobody; a test run that is not root runs them as itself. */
const as: RunAs | undefined = isRoot ? { uid: NOBODY, gid: NOBODY } : undefined;
const runnable = !isRoot || canDropPrivileges();

const TREE = { 'tree/a.txt': 'alpha', 'tree/b.txt': 'bravo', 'tree/sub/c.txt': 'charlie', 'tree/x.sh': '#!/bin/sh\n' };

/** Runs one as-user.mjs operation as the unprivileged user, its stat cache recording past the racy window; its JSON result. */
function op(name: string, store: string, ...args: string[]): any {
  return childJson(runNodeAs(as, [AS_USER, DIST_INDEX, name, store, ...args], { TREESEAL_TEST_CLOCK_AHEAD_NS: String(CLOCK_AHEAD_NS) }));
}

/** A repo and a store path in a directory the unprivileged user owns (below a root dir anyone may traverse). */
function workDir(): { repo: string; store: string } {
  const base = tempDir();
  chmodSync(base, 0o755);
  const work = join(base, 'w');
  writeTree(join(work, 'repo'), TREE);
  chmodSync(join(work, 'repo/tree/x.sh'), 0o755);
  for (const rel of Object.keys(TREE)) utimesSync(join(work, 'repo', rel), 1_700_000_000, 1_700_000_000);
  if (as !== undefined) chownTree(work, as.uid, as.gid);
  return { repo: join(work, 'repo'), store: join(work, 'store') };
}

/** Every entry of a snapshot's tree with its mode, inode and link count. */
function modes(root: string): Record<string, [number, number]> {
  const out: Record<string, [number, number]> = {};
  for (const rel of listTree(root)) {
    const st = statSync(join(root, rel.replace(/\/$/, '')));
    out[rel] = [st.mode & 0o7777, st.ino];
  }
  return out;
}

/** Two snapshots of repo: the second, after a.txt changed, shares every other file with the first by a hard link. */
function linkedPair(repo: string, store: string): { old: string; young: string; youngRoot: string } {
  const old = op('capture', store, repo, 'tree');
  writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
  const young = op('capture', store, repo, 'tree');
  expect([old.reused, young.reused, young.reusedFiles]).toEqual([false, false, 3]);
  const youngRoot = join(store, 'snapshots', young.digest);
  expect(statSync(join(youngRoot, 'copy/tree/b.txt')).ino).toBe(statSync(join(store, 'snapshots', old.digest, 'copy/tree/b.txt')).ino);
  expect(statSync(join(youngRoot, 'copy/tree/b.txt')).nlink).toBe(2);
  return { old: old.digest, young: young.digest, youngRoot };
}

const works: Record<string, { repo: string; store: string }> = {};

describe.runIf(runnable)(`as a user without root (${as === undefined ? 'this process' : `uid ${NOBODY}`})`, () => {
  beforeAll(async () => {
    for (const name of ['rm', 'cli', 'thaw', 'gc', 'ephemeral', 'reset', 'whole', 'foreign', 'unreadable', 'traverse', 'place']) works[name] = workDir();
  }, 30_000);

  it('a store made below a directory the user may pass through but not list (0311 here, as a root-owned 0711 directory is to others) opens, captures and opens again (each directory on the way was opened for reading: EACCES)', () => {
    const { repo, store } = works.traverse!;
    const pass = join(dirname(store), 'pass');
    mkdirSync(pass);
    if (as !== undefined) chownTree(pass, as.uid, as.gid);
    chmodSync(pass, 0o311);
    const below = join(pass, 'deeper', 'store');
    const first = op('capture', below, repo, 'tree');
    expect(first).toMatchObject({ reused: false });
    expect(op('capture', below, repo, 'tree')).toMatchObject({ digest: first.digest, reused: true });
    chmodSync(pass, 0o755);
  });

  it('in a directory of their own the user may pass through and write but not list (0311), a file is read, frozen files written (fsync: false; with fsync the error says why), a stage made and removed, an ephemeral store and a clone made below it and the store closed (each parent was opened for reading: EACCES)', () => {
    const { repo, store } = works.place!;
    const dir = join(dirname(store), 'place');
    mkdirSync(dir);
    writeFileSync(join(dir, 'f'), 'listed nowhere');
    mkdirSync(`${dir}-closed`);
    if (as !== undefined) for (const d of [dir, `${dir}-closed`]) chownTree(d, as.uid, as.gid);
    chmodSync(dir, 0o311);
    chmodSync(`${dir}-closed`, 0o200);
    const result = op('place', store, dir, repo, 'tree');
    chmodSync(dir, 0o755);
    chmodSync(`${dir}-closed`, 0o700);
    expect(result).toEqual({
      read: 'listed nowhere',
      frozen: 'written',
      synced: {
        code: 'SEAL_IO',
        message: `parent directory cannot be opened: ${dir}: EACCES: permission denied, openat2 '${dir}' (fsync of the new name needs read permission on its directory; fsync: false needs search permission only)`,
      },
      unsearchable: ['SEAL_IO', `parent directory cannot be opened: ${dir}-closed: EACCES: permission denied, openat2 '${dir}-closed'`, 'SEAL_IO'],
      staged: { held: 's', after: false },
      files: 4,
      ok: true,
      closed: 'closed',
      storeLeft: false,
    });
    expect(readdirSync(dir).sort()).toEqual(['clone', 'f', 'g']);
    expect(readdirSync(`${dir}-closed`)).toEqual([]);
    expect([statSync(join(dir, 'g')).mode & 0o7777, readFileSync(join(dir, 'g'), 'utf8')]).toEqual([0o444, 'g']);
    expect(listTree(join(dir, 'clone')).sort()).toEqual(['tree/', 'tree/a.txt', 'tree/b.txt', 'tree/sub/', 'tree/sub/c.txt', 'tree/x.sh']);
  });

  it('reset --clean repairs directories the agent made unreadable (mode 0, 0100), in the copy roots, added and outside them (kills the EACCES repair in openRepairableDir)', () => {
    const { repo, store } = works.reset!;
    const user = (...args: string[]) => runNodeAs(as, [CLI, ...args], { TREESEAL_STORE: store });
    const { digest } = JSON.parse(user('capture', repo, '--copy', 'tree', '--json').stdout) as { digest: string };
    const clone = join(dirname(store), 'arm');
    expect(user('materialize', digest, clone).status).toBe(0);
    const pristine = modes(clone);
    // What an agent does to what it owns: directories it cannot read or list, new ones too.
    mkdirSync(join(clone, 'tree/added/inner'), { recursive: true });
    writeFileSync(join(clone, 'tree/added/inner/f'), 'f');
    mkdirSync(join(clone, 'outside/deep'), { recursive: true });
    if (as !== undefined) for (const made of ['tree/added', 'outside']) chownTree(join(clone, made), as.uid, as.gid);
    chmodSync(join(clone, 'tree/added/inner'), 0o000);
    chmodSync(join(clone, 'tree/added'), 0o100);
    chmodSync(join(clone, 'outside'), 0o000);
    chmodSync(join(clone, 'tree/sub'), 0o000);
    // diff only reads: what the agent locked is changed and unreadable, nothing below it reported removed.
    const diff = user('diff', digest, clone);
    expect(diff).toEqual({
      status: 1,
      stdout: `+ tree/added\n~ tree/sub\n? tree/sub  (this user may not list it: what lies below is not known)\nDIFFERS (ledger)  ${clone}: 1 added, 0 removed, 1 changed, 1 unreadable\n`,
      stderr: '',
    });
    const check = user('verify', digest, '--clone', clone, '--json');
    expect([check.status, check.stderr]).toEqual([1, '']);
    expect(JSON.parse(check.stdout)).toMatchObject({ ok: false, added: ['tree/added'], removed: [], changed: ['tree/sub'], unreadable: ['tree/sub'] });
    const r = user('reset', digest, clone, '--clean', '--json');
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(JSON.parse(r.stdout)).toMatchObject({ added: ['tree/added'], changed: ['tree/sub'], outside: ['outside'] });
    expect(readdirSync(clone).sort()).toEqual(['tree']);
    const now = modes(clone);
    for (const rel of Object.keys(pristine)) expect([rel, now[rel]![0]]).toEqual([rel, pristine[rel]![0]]);
    expect(Object.keys(now).sort()).toEqual(Object.keys(pristine).sort());
    expect(user('verify', digest, '--clone', clone).status).toBe(0);
  });

  it('a whole materialize (another snapshot, or no ledger) replaces roots holding directories the agent locked (mode 0, 0100, 0400) (kills checkRemovable passing over EACCES)', () => {
    const { repo, store } = works.whole!;
    const user = (...args: string[]) => runNodeAs(as, [CLI, ...args], { TREESEAL_STORE: store });
    const first = JSON.parse(user('capture', repo, '--copy', 'tree', '--json').stdout) as { digest: string };
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const second = JSON.parse(user('capture', repo, '--copy', 'tree', '--json').stdout) as { digest: string };
    const clone = join(dirname(store), 'arm');
    expect(user('materialize', first.digest, clone).status).toBe(0);
    for (const [rel, mode] of [['tree/l0', 0o000], ['tree/l100', 0o100], ['tree/l400', 0o400]] as const) {
      mkdirSync(join(clone, rel, 'inner'), { recursive: true });
      writeFileSync(join(clone, rel, 'inner/f'), 'f');
      if (as !== undefined) chownTree(join(clone, rel), as.uid, as.gid);
      chmodSync(join(clone, rel), mode);
    }
    // The arm moves to the other snapshot: its roots are replaced whole, the locked directories with them.
    const moved = user('materialize', second.digest, clone, '--reflink', 'never');
    expect([moved.status, moved.stderr]).toEqual([0, '']);
    expect(readdirSync(join(clone, 'tree')).sort()).toEqual(readdirSync(join(repo, 'tree')).sort());
    expect(user('verify', second.digest, '--clone', clone).status).toBe(0);
  });

  it.runIf(as !== undefined)("reset --clean removes another user's empty locked directory and refuses a full one, naming it, its owner and its mode (kills the EPERM path of openRepairableDir and the Trash)", () => {
    const { repo, store } = works.foreign!;
    const user = (...args: string[]) => runNodeAs(as, [CLI, ...args], { TREESEAL_STORE: store });
    const { digest } = JSON.parse(user('capture', repo, '--copy', 'tree', '--json').stdout) as { digest: string };
    const clone = join(dirname(store), 'arm');
    expect(user('materialize', digest, clone).status).toBe(0);
    // Made by root (uid 0) in the user's clone: mode 0, one empty, one holding a directory; one outside the copy roots, 0755 and full.
    mkdirSync(join(clone, 'tree/empty'));
    mkdirSync(join(clone, 'tree/sub/full/z'), { recursive: true });
    mkdirSync(join(clone, 'outside/locked'), { recursive: true });
    chmodSync(join(clone, 'tree/empty'), 0o000);
    chmodSync(join(clone, 'tree/sub/full'), 0o000);
    const refusal = (path: string, mode: string) =>
      `treeseal: SEAL_IO: EACCES: ${path} is a directory of uid 0 with mode ${mode}, which this user (uid ${as!.uid}) may not move or empty, nor chmod so it could; its owner or root must remove it\n`;
    const full = user('reset', digest, clone, '--clean');
    expect([full.status, full.stdout, full.stderr]).toEqual([1, '', refusal('tree/sub/full', '0000')]);
    expect(readdirSync(join(clone, 'tree'))).not.toContain('empty');
    rmSync(join(clone, 'tree/sub/full'), { recursive: true });
    const outside = user('reset', digest, clone, '--clean');
    expect([outside.status, outside.stderr]).toEqual([1, refusal('outside', '0755')]);
    rmSync(join(clone, 'outside'), { recursive: true });
    const r = user('reset', digest, clone, '--clean', '--json');
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(readdirSync(clone)).toEqual(['tree']);
    expect(user('verify', digest, '--clone', clone).status).toBe(0);

    // At a snapshot path: an empty locked one is replaced (removed where it is, restored); a full one, readable but
    // with a mode this user may not set, is refused naming it.
    rmSync(join(clone, 'tree/sub'), { recursive: true });
    mkdirSync(join(clone, 'tree/sub'), { mode: 0o000 });
    chmodSync(join(clone, 'tree/sub'), 0o000);
    const replaced = user('reset', digest, clone, '--json');
    expect([replaced.status, replaced.stderr]).toEqual([0, '']);
    expect(JSON.parse(replaced.stdout)).toMatchObject({ changed: ['tree/sub'] });
    expect(user('verify', digest, '--clone', clone).status).toBe(0);
    rmSync(join(clone, 'tree/sub'), { recursive: true });
    mkdirSync(join(clone, 'tree/sub'));
    writeFileSync(join(clone, 'tree/sub/c.txt'), 'charlie');
    chmodSync(join(clone, 'tree/sub'), 0o755);
    const kept = user('reset', digest, clone);
    expect([kept.status, kept.stderr]).toEqual([1, refusal('tree/sub', '0755')]);
    rmSync(join(clone, 'tree/sub'), { recursive: true });

    // Writable but not listable (0333): moved aside, then found locked; the message says where it is now.
    mkdirSync(join(clone, 'tree/dropbox/inner'), { recursive: true });
    chmodSync(join(clone, 'tree/dropbox'), 0o333);
    const moved = user('reset', digest, clone);
    expect(moved.status).toBe(1);
    const stage = readdirSync(clone).find((n) => n.startsWith('.treeseal-'));
    expect(moved.stderr).toBe(
      `treeseal: SEAL_IO: EACCES: tree/dropbox (moved to ${stage}/old/0 in the clone) is a directory of uid 0 with mode 0333, which this user (uid ${as!.uid}) may not move or empty, nor chmod so it could; its owner or root must remove it\n`,
    );
    rmSync(join(clone, stage!), { recursive: true });
    const last = user('reset', digest, clone);
    expect([last.status, last.stderr]).toEqual([0, '']);
    expect(user('verify', digest, '--clone', clone).status).toBe(0);
  });

  it('diff: a directory the user may not list is unreadable once however many roots lie below it, one it may list but not search too; --all passes over it', () => {
    const { repo, store } = works.unreadable!;
    const user = (...args: string[]) => runNodeAs(as, [CLI, ...args], { TREESEAL_STORE: store });
    const { digest } = JSON.parse(user('capture', repo, '--copy', 'tree/a.txt', '--copy', 'tree/sub', '--copy', 'tree/x.sh', '--json').stdout) as { digest: string };
    const clone = join(dirname(store), 'arm');
    expect(user('materialize', digest, clone).status).toBe(0);
    try {
      chmodSync(join(clone, 'tree'), 0o000);
      const locked = user('diff', digest, clone, '--all');
      expect(locked).toEqual({ status: 1, stdout: `~ tree\n? tree  (this user may not list it: what lies below is not known)\nDIFFERS (ledger)  ${clone}: 0 added, 0 removed, 1 changed, 1 unreadable\n`, stderr: '' });
      chmodSync(join(clone, 'tree'), 0o700);
      chmodSync(join(clone, 'tree/sub'), 0o600);
      const check = user('verify', digest, '--clone', clone, '--json');
      expect([check.status, check.stderr]).toEqual([1, '']);
      expect(JSON.parse(check.stdout)).toMatchObject({ ok: false, added: [], removed: [], changed: ['tree/sub'], unreadable: ['tree/sub'] });
    } finally {
      chmodSync(join(clone, 'tree'), 0o700);
      chmodSync(join(clone, 'tree/sub'), 0o700);
    }
    expect(user('diff', digest, clone).status).toBe(0);
  });

  it('rm removes the old snapshot; the newer one, sharing its files by hard links, keeps their modes and verifies', () => {
    const { repo, store } = works.rm!;
    const { old, young, youngRoot } = linkedPair(repo, store);
    const before = modes(youngRoot);
    expect(op('remove', store, old)).toEqual({ removed: old, left: [young], tmp: [] });
    expect(modes(youngRoot)).toEqual(before);
    expect(statSync(join(youngRoot, 'copy/tree/b.txt')).nlink).toBe(1);
    expect(op('verify', store, young).entries).toBe(6);
  });

  it('treeseal rm as that user', () => {
    const { repo, store } = works.cli!;
    const { old, young, youngRoot } = linkedPair(repo, store);
    const before = modes(youngRoot);
    const r = runNodeAs(as, [CLI, 'rm', old.slice(0, 12)], { TREESEAL_STORE: store });
    expect(r).toEqual({ status: 0, stdout: `removed ${old}\n`, stderr: '' });
    expect(readdirSync(join(store, 'snapshots'))).toEqual([young]);
    expect(modes(youngRoot)).toEqual(before);
  });

  it('thaw of the old snapshot copies its shared files instead of chmodding them; rm then leaves the newer one intact', () => {
    const { repo, store } = works.thaw!;
    const { old, young, youngRoot } = linkedPair(repo, store);
    const before = modes(youngRoot);
    const oldRoot = join(store, 'snapshots', old);
    expect(op('thaw', store, oldRoot)).toEqual({});
    expect(modes(youngRoot)).toEqual(before);
    expect(statSync(join(oldRoot, 'copy/tree/b.txt')).mode & 0o7777).toBe(0o600);
    expect(statSync(join(oldRoot, 'copy/tree/b.txt')).ino).not.toBe(statSync(join(youngRoot, 'copy/tree/b.txt')).ino);
    expect(readdirSync(join(oldRoot, 'copy/tree')).sort()).toEqual(['a.txt', 'b.txt', 'sub', 'x.sh']);
    expect(op('remove', store, old).left).toEqual([young]);
    expect(modes(youngRoot)).toEqual(before);
    expect(op('verify', store, young).entries).toBe(6);
  });

  it('gc sweeps a stale build holding a link to a published file (its dirs frozen) and leaves that file as it was', () => {
    const { repo, store } = works.gc!;
    const { young, youngRoot } = linkedPair(repo, store);
    const build = join(store, 'tmp', `build-${'e'.repeat(32)}`);
    mkdirSync(join(build, 'copy'), { recursive: true });
    linkSync(join(youngRoot, 'copy/tree/b.txt'), join(build, 'copy/b.txt'));
    if (as !== undefined) chownTree(build, as.uid, as.gid);
    chmodSync(join(build, 'copy'), 0o500);
    chmodSync(build, 0o500);
    const before = modes(youngRoot);
    expect(op('gc', store)).toEqual({ swept: 1, tmp: [] });
    expect(modes(youngRoot)).toEqual(before);
    expect(op('verify', store, young).entries).toBe(6);
  });

  it('an ephemeral store with linked snapshots is removed whole at close', () => {
    const { repo, store } = works.ephemeral!;
    const r = op('ephemeral', store, repo, 'tree', 'tree/a.txt');
    expect([r.reusedFiles, r.gone]).toEqual([3, true]);
  });
});

describe('rm that fails', () => {
  it('a rename the kernel refuses: SEAL_IO, the snapshot stays published and frozen (0500), nothing left behind', () => {
    const base = tempDir();
    writeTree(join(base, 'repo'), { 'f': 'x' });
    const dir = join(base, 'store');
    const { sys, injected } = failOnce('renameat2', 'EIO', (_a, _b, _c, newpath) => String(newpath).startsWith('rm-'));
    const store = SnapshotStore.openSync(dir, { sys });
    const snap = store.captureSync({ source: join(base, 'repo'), copy: ['f'] });
    expectError(() => store.remove(snap.digest), { code: 'SEAL_IO', message: 'remove: EIO: injected, renameat2', unchanged: dir });
    expect(injected()).toBeDefined();
    expect(statSync(snap.root).mode & 0o7777).toBe(0o500);
    expect(store.list()).toEqual([snap.digest]);
    store.closeSync();
  });
});
