// store-trust.test.ts: a store is used only when no one but you (or root) can have written it; a shared store is an explicit opt-in.
import { chmodSync, chownSync, closeSync, copyFileSync, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';

import { SnapshotStore, spawnSandboxed } from '../../dist/index.js';
import { LOCK_EX, LOCK_NB, sys as nativeSys } from '../../dist/sys/index.js';
import {
  CLOCK_AHEAD_NS,
  DIST_INDEX,
  NOBODY,
  SETTLED,
  SOMEONE,
  canDropPrivileges,
  checkNoFdLeaks,
  childJson,
  chownTree,
  expectError,
  fsTargets,
  isRoot,
  listTree,
  runNodeAs,
  runScriptAs,
  tempDir,
  wrapSys,
  writeTree,
} from '../helpers.js';

checkNoFdLeaks();

const AS_USER = fileURLToPath(new URL('./as-user.mjs', import.meta.url));
const uid = process.geteuid!();
const mode = (p: string): number => statSync(p).mode & 0o7777;

/** A repo and a store made by one capture (so cache/ exists), in a fresh directory. */
function madeStore(): { repo: string; dir: string } {
  const base = tempDir();
  const repo = join(base, 'repo');
  writeTree(repo, { 'src/a': 'a' });
  const dir = join(base, 'store');
  const store = SnapshotStore.openSync(dir);
  store.captureSync({ source: repo, copy: ['src'] });
  store.closeSync();
  return { repo, dir };
}

describe('a store only you (or root) can have written', () => {
  it('a store directory writable by group or others is refused, sync and async, naming it and the fix; nothing is made', async () => {
    for (const [bits, why] of [
      [0o777, 'writable by other users (mode 0777); fix: chmod go-w'],
      [0o703, 'writable by other users (mode 0703); fix: chmod go-w'],
      [0o770, "writable by its group (mode 0770); fix: chmod g-w"],
    ] as const) {
      const dir = join(tempDir(), 'store');
      mkdirSync(dir);
      chmodSync(dir, bits);
      const message = `untrusted store: ${dir} is ${why} ${dir}${bits & 0o002 ? '' : ", or open it as a shared store (trust: 'group')"}`;
      expectError(() => SnapshotStore.openSync(dir), { code: 'SEAL_UNTRUSTED', message, unchanged: dir });
      await expectError(async () => SnapshotStore.open(dir), { code: 'SEAL_UNTRUSTED', message, unchanged: dir });
    }
  });

  it('so is a store below a directory another user can rename it in: others may write it (unless sticky), or it is another user\'s (one swapped a victim\'s store for her own directory between treeseal run\'s checks and bubblewrap\'s binds)', async () => {
    const base = tempDir();
    const shared = join(base, 'shared');
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const store = join(shared, 'store');
    const message = `untrusted store: ${store} is below ${shared} (mode 0777), where other users can rename ${store} and put another directory at its path; fix: chmod o-w ${shared} (or chmod +t: then only an entry's owner may rename it), or keep the store elsewhere`;
    expectError(() => SnapshotStore.openSync(store), { code: 'SEAL_UNTRUSTED', message, path: store });
    await expectError(async () => SnapshotStore.open(store), { code: 'SEAL_UNTRUSTED', message });
    // Refused before anything is made: no store directory is left in the other users' directory.
    expect(readdirSync(shared)).toEqual([]);
    // Sticky (as /tmp is): only the store's owner (you) may rename it.
    chmodSync(shared, 0o1777);
    SnapshotStore.openSync(store).closeSync();
    // Group-writable, even by your own primary group: an ACL granting another user write shows as those bits.
    chmodSync(shared, 0o775);
    chownSync(shared, uid, process.getegid!());
    await expectError(async () => SnapshotStore.open(store), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted store: ${store} is below ${shared} (mode 0775), where its group (gid ${process.getegid!()}) can rename ${store} and put another directory at its path; fix: chmod g-w ${shared} (or chmod +t: then only an entry's owner may rename it), or keep the store elsewhere`,
    });
    // A clone is held to the same rule.
    chmodSync(shared, 0o777);
    writeTree(join(base, 'repo'), { 'src/a.ts': 'a' });
    const own = await SnapshotStore.open(join(base, 'own-store'));
    const snap = await own.capture({ source: join(base, 'repo'), copy: ['src'] });
    const clone = join(shared, 'clone');
    await expectError(async () => snap.materialize(clone, { createClone: true }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted clone: ${clone} is below ${shared} (mode 0777), where other users can rename ${clone} and put another directory at its path; fix: chmod o-w ${shared} (or chmod +t: then only an entry's owner may rename it), or keep the clone elsewhere`,
    });
    expect(readdirSync(shared)).toEqual(['store']);
    chmodSync(shared, 0o1777);
    expect((await snap.materialize(clone, { createClone: true })).files).toBe(1);
    await own.close();
    chmodSync(shared, 0o755);
    if (!isRoot) return;
    // Root only: group-writable by another group, and owned by another user.
    chownSync(shared, SOMEONE, SOMEONE);
    expectError(() => SnapshotStore.openSync(store), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted store: ${store} is below ${shared}, owned by uid ${SOMEONE}, not you (uid 0) or root, who can rename what is in it and put another directory at the store's path; fix: keep the store below directories only you or root own (or chown ${shared})`,
    });
  });

  it('a clone directory others can write, or another user owns, is refused for materialize, reset and a sandboxed run, nothing written; diff still reads it (another user\'s /tmp/clone ran the victim\'s command on her files)', async () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.ts': 'a' });
    const store = await SnapshotStore.open(join(work, 'store'));
    const snap = await store.capture({ source: join(work, 'repo'), copy: ['src'] });
    const clone = join(work, 'clone');
    await snap.materialize(clone, { createClone: true });
    chmodSync(clone, 0o777);
    const message = `untrusted clone: ${clone} is writable by other users (mode 0777); fix: chmod go-w ${clone}`;
    await expectError(async () => snap.materialize(clone), { code: 'SEAL_UNTRUSTED', message, unchanged: clone });
    expectError(() => snap.resetSync(clone), { code: 'SEAL_UNTRUSTED', message, unchanged: clone });
    await expectError(async () => spawnSandboxed(snap, clone, ['true']), { code: 'SEAL_UNTRUSTED', message, unchanged: clone });
    expect((await snap.diff(clone)).changed).toEqual([]);
    chmodSync(clone, 0o700);
    expect((await snap.reset(clone)).method).toBe('reset');
    if (isRoot) {
      chownSync(clone, SOMEONE, SOMEONE);
      const theirs = `untrusted clone: ${clone} is owned by uid ${SOMEONE}, not you (uid 0): its owner can change what is in it at any time; use a clone directory you own`;
      await expectError(async () => snap.materialize(clone), { code: 'SEAL_UNTRUSTED', message: theirs, unchanged: clone });
      await expectError(async () => spawnSandboxed(snap, clone, ['true']), { code: 'SEAL_UNTRUSTED', message: theirs, unchanged: clone });
    }
    await store.close();
  });

  it('so is a store whose snapshots/, tmp/, cache/, lock or leases/ others can write', async () => {
    for (const [part, bits] of [['snapshots', 0o770], ['tmp', 0o777], ['cache', 0o720], ['lock', 0o666], ['leases', 0o777]] as const) {
      const { dir } = madeStore();
      const path = join(dir, part);
      chmodSync(path, bits);
      const why = bits & 0o002 ? `writable by other users (mode 0${bits.toString(8)}); fix: chmod go-w ${path}` : `writable by its group (mode 0${bits.toString(8)}); fix: chmod g-w ${path}, or open it as a shared store (trust: 'group')`;
      await expectError(async () => SnapshotStore.open(dir), { code: 'SEAL_UNTRUSTED', message: `untrusted store: ${path} is ${why}`, unchanged: dir });
      chmodSync(path, bits & ~0o022);
      SnapshotStore.openSync(dir).closeSync();
    }
  });

  it('a new store, its parents, snapshots/ and tmp/ are 0700 and its lock 0600, whatever the umask', () => {
    const base = tempDir();
    const dir = join(base, 'a/b/store');
    const r = runScriptAs(undefined, `process.umask(0); const { SnapshotStore } = await import(${JSON.stringify(DIST_INDEX)}); (await SnapshotStore.open(process.argv[1])).close(); console.log('{}');`, [dir]);
    expect(childJson(r)).toEqual({});
    expect([join(base, 'a'), join(base, 'a/b'), dir, join(dir, 'snapshots'), join(dir, 'tmp'), join(dir, 'lock')].map(mode)).toEqual([0o700, 0o700, 0o700, 0o700, 0o700, 0o600]);
  });

  it('a umask that takes the owner\'s bits is refused before anything is made (0177 made the store\'s parents 0600: EACCES; 0777 as root made frozen files 0000 that failed their own verify)', () => {
    const base = tempDir();
    for (const umask of ['0177', '0777']) {
      const dir = join(base, `u${umask}/store`);
      const script = `process.umask(0o${umask}); const { SnapshotStore } = await import(${JSON.stringify(DIST_INDEX)}); const r = await SnapshotStore.open(process.argv[1]).then(() => 'opened', (e) => [e.code, e.message]); console.log(JSON.stringify(r));`;
      expect(childJson(runScriptAs(undefined, script, [dir]))).toEqual([
        'SEAL_UNAVAILABLE',
        `the umask ${umask} takes the owner's own permissions away: the store's directories and frozen files would be made unusable; run with a umask that leaves the owner's bits (022, 077)`,
      ]);
    }
    expect(readdirSync(base)).toEqual([]);
  });

  it('an open that fails while making the store\'s parents removes the ones it made (a name past 255 bytes, last or between); what stood before stays', async () => {
    const base = tempDir();
    mkdirSync(join(base, 'kept'));
    writeFileSync(join(base, 'kept/file'), 'x');
    const cases: [string, string][] = [
      [join(base, 'a/b/c', 'n'.repeat(256)), 'SEAL_LIMIT'],
      [join(base, 'kept/d/e', 'n'.repeat(256), 'store'), 'SEAL_LIMIT'],
    ];
    for (const [dir, code] of cases) {
      expectError(() => SnapshotStore.openSync(dir), { code, unchanged: base });
      await expectError(async () => SnapshotStore.open(dir), { code, unchanged: base });
    }
    expect(readdirSync(base)).toEqual(['kept']);
    expect(readdirSync(join(base, 'kept'))).toEqual(['file']);
  });

  it('a published snapshot others can write is neither reused by a capture nor read nor materialized', async () => {
    const { repo, dir } = madeStore();
    const store = await SnapshotStore.open(dir);
    const [digest] = store.list();
    const snap = store.get(digest!);
    chmodSync(snap.root, 0o520);
    const rel = `untrusted snapshot: snapshots/${digest} is writable by its group (mode 0520)`;
    for (const capture of [() => store.captureSync({ source: repo, copy: ['src'], statCache: false }), async () => store.capture({ source: repo, copy: ['src'], statCache: false })]) {
      await expectError(capture, { code: 'SEAL_UNTRUSTED', message: rel, unchanged: dir });
    }
    expectError(() => store.get(digest!), { code: 'SEAL_UNTRUSTED', message: rel });
    const clone = join(tempDir(), 'clone');
    mkdirSync(clone);
    await expectError(async () => snap.materialize(clone), { code: 'SEAL_UNTRUSTED', message: rel, unchanged: clone });
    expectError(() => snap.materializeSync(clone), { code: 'SEAL_UNTRUSTED', message: rel, unchanged: clone });
    await expectError(async () => snap.verify(), { code: 'SEAL_UNTRUSTED', message: rel });
    chmodSync(snap.root, 0o500);
    expect((await snap.verify()).entries).toBeGreaterThan(0);
    await store.close();
  });

  it('the stat cache links no file from a snapshot others can write: a recapture reads every file again', async () => {
    const { repo, dir } = madeStore();
    // Its records made past the racy window: the cache trusts every record of the next capture.
    const store = await SnapshotStore.open(dir, SETTLED);
    const first = await store.capture({ source: repo, copy: ['src'] });
    const cached = await store.capture({ source: repo, copy: ['src'] });
    writeFileSync(join(repo, 'src/changed'), 'new');
    chmodSync(cached.root, 0o520);
    const next = await store.capture({ source: repo, copy: ['src'] });
    expect(next.digest).not.toBe(first.digest);
    expect(next.captureReport!.reusedFiles).toBe(0);
    chmodSync(cached.root, 0o500);
    await store.close();
  });
});

describe('the trust option', () => {
  it("is 'owner' or 'group': anything else is Node's TypeError", async () => {
    const dir = join(tempDir(), 'store');
    expectError(() => SnapshotStore.openSync(dir, { trust: 5 as never }), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.trust" property must be of type string. Received type number (5)' });
    await expectError(async () => SnapshotStore.open(dir, { trust: 'world' as never }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.trust' must be one of: 'owner', 'group'. Received 'world'",
    });
    expect(existsSync(dir)).toBe(false);
  });

  it("'group' opens a setgid, group-writable store of your group and makes its parts for the group; others still may not write", async () => {
    const base = tempDir();
    writeTree(join(base, 'repo'), { 'src/a': 'a' });
    const dir = join(base, 'store');
    mkdirSync(dir);
    chmodSync(dir, 0o2770);
    expectError(() => SnapshotStore.openSync(dir), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted store: ${dir} is writable by its group (mode 2770); fix: chmod g-w ${dir}, or open it as a shared store (trust: 'group')`,
      unchanged: dir,
    });
    // Group-writable but not sticky: a member could rename or remove what another made in it.
    expectError(() => SnapshotStore.openSync(dir, { trust: 'group' }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted shared store: ${dir} is group-writable but not sticky (mode 2770): another member could rename or remove what is yours in it; fix: chmod +t ${dir}`,
      unchanged: dir,
    });
    chmodSync(dir, 0o3770);
    const store = await SnapshotStore.open(dir, { trust: 'group' });
    expect(store.trust).toBe('group');
    const snap = await store.capture({ source: join(base, 'repo'), copy: ['src'] });
    expect((await snap.verify()).entries).toBeGreaterThan(0);
    await store.close();
    expect(['snapshots', 'tmp', 'leases', 'cache', 'clones', 'lock'].map((p) => mode(join(dir, p)))).toEqual([0o3770, 0o3770, 0o3770, 0o3770, 0o3770, 0o660]);
    // A part of yours made before the sticky bit was asked for gets it at the next open.
    chmodSync(join(dir, 'snapshots'), 0o2770);
    SnapshotStore.openSync(dir, { trust: 'group' }).closeSync();
    expect(mode(join(dir, 'snapshots'))).toBe(0o3770);
    chmodSync(join(dir, 'tmp'), 0o770);
    expectError(() => SnapshotStore.openSync(dir, { trust: 'group' }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted shared store: ${join(dir, 'tmp')} is group-writable but not setgid (mode 0770); fix: chmod g+s ${join(dir, 'tmp')}`,
      unchanged: dir,
    });
    chmodSync(join(dir, 'tmp'), 0o2777);
    expectError(() => SnapshotStore.openSync(dir, { trust: 'group' }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted store: ${join(dir, 'tmp')} is writable by other users (mode 2777); fix: chmod go-w ${join(dir, 'tmp')}`,
    });
    chmodSync(dir, 0o770);
    expectError(() => SnapshotStore.openSync(dir, { trust: 'group' }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted shared store: ${dir} is not setgid (mode 0770); fix: chmod g+s ${dir}`,
    });
  });

  it("'group' never makes a missing store (made 0700 it would only be refused and left behind): says how to prepare it", async () => {
    const base = tempDir();
    const dir = join(base, 'fleet', 'store');
    const parts = ['', '/snapshots', '/tmp', '/leases', '/cache', '/clones'].map((p) => `${dir}${p}`).join(' ');
    const expected = { code: 'SEAL_UNAVAILABLE', message: `shared store does not exist: ${dir}; prepare it once, as root: install -d -m 3770 -g GROUP ${parts}` };
    expectError(() => SnapshotStore.openSync(dir, { trust: 'group' }), expected);
    await expect(SnapshotStore.open(dir, { trust: 'group' })).rejects.toMatchObject(expected);
    expect(readdirSync(base)).toEqual([]);
  });
});

/** A directory below a root-owned temp dir that anyone may traverse, owned by `owner`. */
/** The fleet's group of the shared-store tests. */
const GROUP = 4242;

/** base/store prepared as a shared store: owned by `owner` (default SOMEONE) and GROUP, setgid, sticky, 3770. */
function sharedStore(base: string, owner = SOMEONE): string {
  const dir = join(base, 'store');
  mkdirSync(dir);
  chownSync(dir, owner, GROUP);
  chmodSync(dir, 0o3770);
  return dir;
}

function ownedDir(owner: number, bits = 0o755, under?: string): string {
  const base = tempDir(under);
  chmodSync(base, 0o755);
  const dir = join(base, 'd');
  mkdirSync(dir);
  chownSync(dir, owner, owner);
  chmodSync(dir, bits);
  return dir;
}

function asUser(user: number, op: string, store: string, args: string[], groups?: number[], env: Record<string, string> = {}): any {
  return childJson(runNodeAs({ uid: user, gid: user, groups }, [AS_USER, DIST_INDEX, op, store, ...args], env));
}

// Other users need root: to make them (setpriv) and to hand them directories (chown).
describe.runIf(canDropPrivileges())('a store another user made', () => {
  it('in a sticky world-writable directory, with a planted file: refused, never reused, the planted bytes never delivered', () => {
    const shared = ownedDir(0, 0o1777);
    const repo = join(ownedDir(0), 'repo');
    writeTree(repo, { 'a.txt': 'genuine\n' });
    chmodSync(join(repo, 'a.txt'), 0o644);
    const dir = join(shared, 'store');
    // The attacker makes the store, captures the victim's world-readable source, rewrites its copy and opens everything up.
    const planted = asUser(NOBODY, 'capture', dir, [repo, 'a.txt']);
    const root = join(dir, 'snapshots', planted.digest);
    for (const d of [join(root, 'copy'), root]) chmodSync(d, 0o755);
    writeFileSync(join(root, 'copy/a.txt'), 'PLANTED\n');
    chmodSync(join(root, 'copy/a.txt'), 0o444);
    chmodSync(join(root, 'manifest.json'), 0o444);
    chmodSync(join(root, 'mounts'), 0o755);
    for (const d of ['', 'snapshots', 'tmp', 'cache']) chmodSync(join(dir, d), 0o777);
    chmodSync(join(dir, 'lock'), 0o666);
    const tree = listTree(dir);
    const clone = join(ownedDir(SOMEONE), 'clone');
    mkdirSync(clone);
    chownSync(clone, SOMEONE, SOMEONE);
    const victim = (): any => asUser(SOMEONE, 'capture', dir, [repo, 'a.txt']);
    // Not hers: she is told so, not to chmod what she cannot (it once said `chmod go-w`).
    expect(victim()).toEqual({ error: { code: 'SEAL_UNTRUSTED', message: `untrusted store: ${dir} is owned by uid ${NOBODY}, not you (uid ${SOMEONE}); use a store you own` } });
    chmodSync(dir, 0o755);
    expect(victim()).toEqual({ error: { code: 'SEAL_UNTRUSTED', message: `untrusted store: ${dir} is owned by uid ${NOBODY}, not you (uid ${SOMEONE}); use a store you own` } });
    expect(asUser(SOMEONE, 'materialize', dir, [planted.digest, clone]).error.code).toBe('SEAL_UNTRUSTED');
    const cli = runNodeAs({ uid: SOMEONE, gid: SOMEONE }, [fileURLToPath(new URL('../../dist/cli.js', import.meta.url)), 'capture', repo, '--copy', 'a.txt'], { TREESEAL_STORE: dir });
    expect(cli).toEqual({ status: 1, stdout: '', stderr: `treeseal: SEAL_UNTRUSTED: untrusted store: ${dir} is owned by uid ${NOBODY}, not you (uid ${SOMEONE}); use a store you own\n` });
    // Root trusts a user's store only where no third user could have made it: not in a sticky shared directory.
    expectError(() => SnapshotStore.openSync(dir), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted store: ${dir} is owned by uid ${NOBODY}, not root, and ${shared} (uid 0, mode 1777) lets another user make or replace it; fix: run as uid ${NOBODY}, or chown -R 0 ${dir}`,
    });
    expect(listTree(dir)).toEqual(tree);
    expect(listTree(clone)).toEqual([]);
    expect(readFileSync(join(root, 'copy/a.txt'), 'utf8')).toBe('PLANTED\n');
  });

  it("root uses a user's store in a directory that user owns below root's", async () => {
    const home = ownedDir(NOBODY);
    const repo = join(home, 'repo');
    writeTree(repo, { 'a.txt': 'mine' });
    chownTree(repo, NOBODY, NOBODY);
    const dir = join(home, 'store');
    const made = asUser(NOBODY, 'capture', dir, [repo, 'a.txt']);
    const store = await SnapshotStore.open(dir);
    const snap = await store.capture({ source: repo, copy: ['a.txt'] });
    expect([snap.digest, snap.captureReport!.reused]).toEqual([made.digest, true]);
    // The parts root makes there (clones/ for a clone's ledger, cache/ for its records) are the owner's: made 0700 for
    // root, they shut the owner out of its own store (every command SEAL_IO, EACCES on clones).
    await snap.materialize(join(tempDir(), 'root-arm'), { createClone: true });
    await store.close();
    for (const part of ['clones', 'cache']) {
      const st = statSync(join(dir, part));
      expect([part, st.uid, st.gid, st.mode & 0o7777]).toEqual([part, NOBODY, NOBODY, 0o700]);
    }
    expect(asUser(NOBODY, 'gc', dir, [])).toMatchObject({});
    expect(asUser(NOBODY, 'capture', dir, [repo, 'a.txt'])).toMatchObject({ digest: made.digest, reused: true });
  });

  for (const [where, under] of fsTargets()) {
    it(`root's capture into a user's store on ${where} publishes a snapshot the user owns, whole: the user verifies and removes it (root-owned 0500, it was "BAD" to verify and rm failed EACCES); root's own stat cache and clone ledger stay root's, and root still recaptures by them`, async () => {
      // A mount's parent (with-mounts.sh's private dir) searchable by the user for the test, as as-unprivileged.sh makes it.
      if (under !== undefined) {
        const parent = dirname(under);
        const was = statSync(parent).mode & 0o7777;
        chmodSync(parent, was | 0o001);
        onTestFinished(() => chmodSync(parent, was));
      }
      const home = ownedDir(NOBODY, 0o755, under);
      const repo = join(home, 'repo');
      writeTree(repo, { 'src/a.txt': 'mine', 'src/deep/b.txt': 'bee', 'src/run.sh': '#!/bin/sh\n' });
      chmodSync(join(repo, 'src/run.sh'), 0o755);
      symlinkSync('a.txt', join(repo, 'src/link'));
      chownTree(repo, NOBODY, NOBODY);
      const dir = join(home, 'store');
      const first = asUser(NOBODY, 'capture', dir, [repo, 'src', 'contained']);
      expect(first).toMatchObject({ digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
      writeFileSync(join(repo, 'src/a.txt'), 'changed by root');
      const store = await SnapshotStore.open(dir, SETTLED);
      const snap = await store.capture({ source: repo, copy: ['src'], links: 'contained' });
      expect(snap.captureReport).toMatchObject({ reused: false, built: true });
      // Root's own clone (a clone must be its user's), materialized twice: the second by its ledger (a reset).
      const arm = join(tempDir(under), 'arm');
      expect(await snap.materialize(arm, { createClone: true })).toMatchObject({ reset: false });
      expect(await snap.materialize(arm)).toMatchObject({ reset: true });
      expect(await snap.diff(arm)).toMatchObject({ ok: true, method: 'ledger' });
      // Root's recapture after one more change links the unchanged files from the snapshot it gave away.
      writeFileSync(join(repo, 'src/deep/b.txt'), 'changed again');
      const again = await store.capture({ source: repo, copy: ['src'], links: 'contained' });
      expect(again.captureReport!.reusedFiles).toBe(2);
      await store.close();
      for (const digest of [snap.digest, again.digest]) {
        const owners = listTree(join(dir, 'snapshots', digest)).map((p) => {
          const st = lstatSync(join(dir, 'snapshots', digest, p.replace(/[/@]$/, '')));
          return `${p} ${st.uid}:${st.gid}`;
        });
        expect(owners.filter((o) => !o.endsWith(` ${NOBODY}:${NOBODY}`))).toEqual([]);
        expect(lstatSync(join(dir, 'snapshots', digest)).uid).toBe(NOBODY);
      }
      // The parts are the user's; the files root wrote in them are root's (its ledger, its stat cache: of use to root alone).
      for (const part of ['cache', 'clones']) expect(statSync(join(dir, part)).uid).toBe(NOBODY);
      expect(readdirSync(join(dir, 'clones')).map((n) => statSync(join(dir, 'clones', n)).uid)).toEqual([0]);
      // The user: the snapshots verify, its recapture finds the same digest, and rm leaves nothing.
      expect(asUser(NOBODY, 'verify', dir, [snap.digest])).toEqual({ entries: snap.entries.length });
      expect(asUser(NOBODY, 'verify', dir, [again.digest])).toEqual({ entries: again.entries.length });
      expect(asUser(NOBODY, 'capture', dir, [repo, 'src', 'contained'])).toMatchObject({ digest: again.digest, reused: true });
      expect(asUser(NOBODY, 'remove', dir, [snap.digest])).toMatchObject({ removed: snap.digest, tmp: [] });
      expect(asUser(NOBODY, 'remove', dir, [again.digest])).toEqual({ removed: again.digest, left: [first.digest], tmp: [] });
    });
  }

  it("parts or snapshots of your store that another user owns are refused; a user gets the kernel's EACCES from root's private store", async () => {
    for (const part of ['snapshots', 'lock']) {
      const { dir } = madeStore();
      chownSync(join(dir, part), NOBODY, NOBODY);
      expectError(() => SnapshotStore.openSync(dir), { code: 'SEAL_UNTRUSTED', message: `untrusted store: ${join(dir, part)} is owned by uid ${NOBODY}, not you (uid 0); use a store you own`, unchanged: dir });
    }
    const { repo, dir } = madeStore();
    const store = SnapshotStore.openSync(dir);
    const digest = store.list()[0]!;
    chownSync(join(dir, 'snapshots', digest), NOBODY, NOBODY);
    expectError(() => store.captureSync({ source: repo, copy: ['src'], statCache: false }), { code: 'SEAL_UNTRUSTED', message: `untrusted snapshot: snapshots/${digest} is owned by uid ${NOBODY}, not you (uid 0): a snapshot is used only by its owner (and root), who alone can have written it`, unchanged: dir });
    store.closeSync();
    chmodSync(join(dir, '..'), 0o755);
    expect(asUser(NOBODY, 'gc', dir, []).error).toEqual({ code: 'SEAL_IO', message: `store directory cannot be opened: ${dir}: EACCES: permission denied, openat '${dir.split('/').pop()}'` });
  });

  it('a shared store: a member of its group opens it and captures into it; a user outside the group is refused', () => {
    const base = ownedDir(0);
    writeTree(join(base, 'repo'), { 'a.txt': 'shared' });
    const dir = sharedStore(base);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    const first = asUser(SOMEONE, 'capture', dir, [join(base, 'repo'), 'a.txt'], [GROUP], env);
    writeFileSync(join(base, 'repo/b.txt'), 'more');
    const second = asUser(NOBODY, 'capture', dir, [join(base, 'repo'), 'b.txt'], [GROUP], env);
    expect([first.reused, second.reused]).toEqual([false, false]);
    expect(statSync(join(dir, 'snapshots', second.digest)).gid).toBe(GROUP);
    // Readable by all, so that an outsider gets as far as the check.
    chmodSync(dir, 0o3775);
    expect(asUser(NOBODY, 'capture', dir, [join(base, 'repo'), 'b.txt'], [], env)).toEqual({
      error: { code: 'SEAL_UNTRUSTED', message: `untrusted shared store: ${dir} belongs to gid ${GROUP}, not a group of yours` },
    });
    expect(asUser(NOBODY, 'capture', dir, [join(base, 'repo'), 'b.txt'], [GROUP]).error.code).toBe('SEAL_UNTRUSTED');
    // A part a member cannot open (another member's private cache/) is still checked, by its name's stat.
    chmodSync(dir, 0o3770);
    chmodSync(join(dir, 'cache'), 0o2700);
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toEqual({ swept: 0, tmp: [] });
    chmodSync(join(dir, 'cache'), 0o2703);
    const tree = listTree(dir);
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toEqual({
      error: { code: 'SEAL_UNTRUSTED', message: `untrusted store: ${join(dir, 'cache')} is writable by other users (mode 2703); fix: chmod go-w ${join(dir, 'cache')}` },
    });
    chmodSync(join(dir, 'cache'), 0o3770);
    chownSync(join(dir, 'tmp'), SOMEONE, SOMEONE);
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toEqual({
      error: { code: 'SEAL_UNTRUSTED', message: `untrusted shared store: ${join(dir, 'tmp')} is writable by gid ${SOMEONE}, not the store's group ${GROUP}; fix: chgrp ${GROUP} ${join(dir, 'tmp')}` },
    });
    expect(listTree(dir)).toEqual(tree);
  });

  it("a shared store: each member keeps its own summary record; another member's snapshot is not listed from any; a record another planted under your name is never read, and your listing goes on", () => {
    const base = ownedDir(0);
    writeTree(join(base, 'repo'), { 'a.txt': 'shared' });
    // Prepared by root, as a fleet's is: the members write their records into its sticky cache/, not a store of their own.
    const dir = sharedStore(base, 0);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    const { digest } = asUser(SOMEONE, 'capture', dir, [join(base, 'repo'), 'a.txt'], [GROUP], env);
    const mine = join(dir, 'cache', `${digest}.${SOMEONE}.summary`);
    expect([statSync(mine).uid, mode(mine)]).toEqual([SOMEONE, 0o600]);
    expect(asUser(SOMEONE, 'summary', dir, [digest], [GROUP], env)).toEqual({ totalBytes: 6, revision: '', entries: 1 });
    // Another member's snapshot: refused as get refuses it (its directory is its owner's alone), whatever the records say; nothing written for it.
    const refused = asUser(NOBODY, 'summary', dir, [digest], [GROUP], env).error;
    expect(refused).toEqual(asUser(NOBODY, 'verify', dir, [digest], [GROUP], env).error);
    expect(refused.code).toBe('SEAL_IO');
    expect(readdirSync(join(dir, 'cache')).filter((n) => n.endsWith('.summary'))).toEqual([`${digest}.${SOMEONE}.summary`]);
    // The other member plants a forged record under the owner's name (the owner's own gone): never read; the owner's
    // listing proves the manifest instead.
    // (With the manifest's true identity, as root reads it here: only whose record it is refuses it.)
    const forged = readFileSync(mine, 'utf8').replace('"totalBytes":6', '"totalBytes":12345');
    expect(forged).toContain('"totalBytes":12345');
    rmSync(mine);
    const plant = `import { writeFileSync } from 'node:fs'; writeFileSync(process.argv.at(-2), process.argv.at(-1), { mode: 0o644 });`;
    expect(runScriptAs({ uid: NOBODY, gid: NOBODY, groups: [GROUP] }, plant, [mine, forged]).status).toBe(0);
    expect(asUser(SOMEONE, 'summary', dir, [digest], [GROUP], env)).toEqual({ totalBytes: 6, revision: '', entries: 1 });
    // Left as planted, or (once the manifest is past the racy rule's 2 s) replaced by the owner's own true record.
    const left = statSync(mine).uid === NOBODY ? readFileSync(mine, 'utf8') : JSON.parse(readFileSync(mine, 'utf8')).summary.totalBytes;
    expect([forged, 6]).toContain(left);
  });

  it("a shared store: another member's snapshot is neither reused nor materialized, whatever its modes (one published forged bytes under the digest another's capture made, which it reused and materialized)", () => {
    const base = ownedDir(0);
    writeTree(join(base, 'repo'), { 'a.txt': 'genuine\n' });
    chmodSync(join(base, 'repo/a.txt'), 0o644);
    const dir = sharedStore(base);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    // The forger captures the other member's (readable) source, rewrites its copy at the same size and opens it to the group.
    const forged = asUser(SOMEONE, 'capture', dir, [join(base, 'repo'), 'a.txt'], [GROUP], env);
    const root = join(dir, 'snapshots', forged.digest);
    chmodSync(join(root, 'copy/a.txt'), 0o640);
    writeFileSync(join(root, 'copy/a.txt'), 'FORGED!\n');
    chmodSync(join(root, 'copy/a.txt'), 0o440);
    for (const d of [join(root, 'copy'), root]) chmodSync(d, 0o550);
    const message = `untrusted snapshot: snapshots/${forged.digest} is owned by uid ${SOMEONE}, not you (uid ${NOBODY}): a snapshot is used only by its owner (and root), who alone can have written it`;
    expect(asUser(NOBODY, 'capture', dir, [join(base, 'repo'), 'a.txt'], [GROUP], env)).toEqual({ error: { code: 'SEAL_UNTRUSTED', message } });
    const clone = join(ownedDir(NOBODY), 'arm');
    mkdirSync(clone);
    chownSync(clone, NOBODY, NOBODY);
    expect(asUser(NOBODY, 'materialize', dir, [forged.digest, clone], [GROUP], env)).toEqual({ error: { code: 'SEAL_UNTRUSTED', message } });
    expect(readdirSync(clone)).toEqual([]);
  });

  it("a shared store: a member cannot rename or remove another's snapshots, builds or leases (its parts are sticky; a swap of two snapshots once made another's capture materialize the other's bytes)", () => {
    const base = ownedDir(0);
    writeTree(join(base, 'one'), { 'app/f': 'one\n' });
    writeTree(join(base, 'two'), { 'app/f': 'two\n' });
    const dir = sharedStore(base, 0);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    const a = asUser(NOBODY, 'capture', dir, [join(base, 'one'), 'app'], [GROUP], env);
    const b = asUser(NOBODY, 'capture', dir, [join(base, 'two'), 'app'], [GROUP], env);
    const tree = listTree(dir);
    const attack = `import { renameSync, rmSync, mkdirSync } from 'node:fs';
      const [dir, a, b] = process.argv.slice(-3);
      const out = [];
      for (const step of [() => renameSync(dir + '/snapshots/' + a, dir + '/snapshots/x'), () => rmSync(dir + '/snapshots/' + b, { recursive: true }), () => renameSync(dir + '/snapshots', dir + '/y')]) {
        try { step(); out.push('done'); } catch (e) { out.push(e.code); }
      }
      console.log(JSON.stringify(out));`;
    const r = runScriptAs({ uid: SOMEONE, gid: SOMEONE, groups: [GROUP] }, attack, [dir, a.digest, b.digest]);
    expect([r.status, r.stdout.trim()]).toEqual([0, JSON.stringify(["EPERM", "EACCES", "EPERM"])]);
    expect(listTree(dir)).toEqual(tree);
    // A build-shaped directory the other member planted and locked in tmp/: left to its owner, not a failure of every open.
    const planted = join(dir, 'tmp', 'build-0123456789abcdef0123456789abcdef');
    mkdirSync(join(planted, 'x'), { recursive: true });
    writeFileSync(join(planted, 'x/f'), 'f');
    chownTree(planted, SOMEONE, GROUP);
    chmodSync(join(planted, 'x'), 0o500);
    chmodSync(planted, 0o500);
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toEqual({ swept: 0, tmp: ['build-0123456789abcdef0123456789abcdef'] });
  });

  it("a shared store: a pull's lock another member left in a root-prepared tmp/ (her pull killed) fails no other member's open or gc, and is left to her (removing it failed every open with EPERM); root sweeps it", () => {
    const base = ownedDir(0);
    writeTree(join(base, 'one'), { 'app/f': 'one\n' });
    const dir = sharedStore(base, 0);
    mkdirSync(join(dir, 'tmp'));
    chownSync(join(dir, 'tmp'), 0, GROUP);
    chmodSync(join(dir, 'tmp'), 0o3770);
    const lock = join(dir, 'tmp', `pull-${'ab'.repeat(32)}`);
    writeFileSync(lock, '');
    chownSync(lock, SOMEONE, GROUP);
    chmodSync(lock, 0o644);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    expect(asUser(NOBODY, 'capture', dir, [join(base, 'one'), 'app'], [GROUP], env)).toMatchObject({ reused: false });
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toEqual({ swept: 0, tmp: [basename(lock)] });
    expect(SnapshotStore.openSync(dir, { trust: 'group' }).sweptAtOpen).toBe(1);
    expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
  });

  it("a shared store: a clone lock another member left in tmp/ (killed holding it, her clone's inode now yours) locks you out of nothing when it is the group's (0660), and one of hers only she can open (0600) is SEAL_IO naming her, not a bare EACCES; gc leaves hers", () => {
    const base = ownedDir(0);
    writeTree(join(base, 'one'), { 'app/f': 'one\n' });
    const dir = sharedStore(base, 0);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    const a = asUser(NOBODY, 'capture', dir, [join(base, 'one'), 'app'], [GROUP], env);
    const clone = join(base, 'clone');
    mkdirSync(clone);
    chownSync(clone, NOBODY, NOBODY);
    const st = statSync(clone, { bigint: true });
    const lock = join(dir, 'tmp', `clone-${st.dev}-${st.ino}.lock`);
    writeFileSync(lock, '');
    chownSync(lock, SOMEONE, GROUP);
    chmodSync(lock, 0o660);
    expect(asUser(NOBODY, 'materialize', dir, [a.digest, clone], [GROUP], env)).toEqual({ files: 1 });
    // Taken and let go: removed with the lock (tmp/ is this member's here). Hers again, only she may open it:
    writeFileSync(lock, '');
    chownSync(lock, SOMEONE, GROUP);
    chmodSync(lock, 0o600);
    expect(asUser(NOBODY, 'materialize', dir, [a.digest, clone], [GROUP], env)).toEqual({
      error: {
        code: 'SEAL_IO',
        message: `clone lock tmp/${basename(lock)} in the store belongs to uid ${SOMEONE}, who made it before shared locks were made group-writable; its owner or an admin removes it: ${clone}`,
      },
    });
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toMatchObject({ swept: 0, tmp: [basename(lock)] });
    // Root sweeps it (unheld).
    expect(SnapshotStore.openSync(dir, { trust: 'group' }).sweptAtOpen).toBe(1);
    expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
  });

  it("a store whose tmp/ its user may not write: the clone lock says so (it said the lock belonged to another user, with no lock there)", () => {
    const home = ownedDir(NOBODY);
    const repo = join(home, 'repo');
    writeTree(repo, { 'a.txt': 'mine' });
    chownTree(repo, NOBODY, NOBODY);
    const dir = join(home, 'store');
    const { digest } = asUser(NOBODY, 'capture', dir, [repo, 'a.txt']);
    const clone = join(home, 'clone');
    mkdirSync(clone);
    chownSync(clone, NOBODY, NOBODY);
    chmodSync(join(dir, 'tmp'), 0o500);
    const st = statSync(clone, { bigint: true });
    expect(asUser(NOBODY, 'materialize', dir, [digest, clone])).toEqual({
      error: { code: 'SEAL_IO', message: `clone lock tmp/clone-${st.dev}-${st.ino}.lock cannot be made: the store's tmp/ is not writable by this user (uid ${NOBODY}): ${clone}` },
    });
    chmodSync(join(dir, 'tmp'), 0o700);
    expect(asUser(NOBODY, 'materialize', dir, [digest, clone])).toEqual({ files: 1 });
  });

  it("a shared store: another member's files in leases/ pin nothing of yours, held, unreadable or stale, and one you cannot remove fails no gc (one planted such files and pinned a member's snapshot for good, and every gc failed EPERM)", () => {
    const base = ownedDir(0);
    writeTree(join(base, 'one'), { 'app/f': 'one\n' });
    writeTree(join(base, 'two'), { 'app/f': 'two\n' });
    const dir = sharedStore(base, 0);
    // Its parts prepared by root, as security.md says: no member owns leases/, so none may remove another's file there.
    mkdirSync(join(dir, 'leases'));
    chownSync(join(dir, 'leases'), 0, GROUP);
    chmodSync(join(dir, 'leases'), 0o3770);
    const env = { TREESEAL_TEST_TRUST: 'group' };
    const a = asUser(NOBODY, 'capture', dir, [join(base, 'one'), 'app'], [GROUP], env);
    const b = asUser(NOBODY, 'capture', dir, [join(base, 'two'), 'app'], [GROUP], env);
    const plant = (digest: string, hex: string, mode: number): string => {
      const path = join(dir, 'leases', `${digest}-${hex}`);
      writeFileSync(path, 'pid 1\n');
      chownSync(path, SOMEONE, GROUP);
      chmodSync(path, mode);
      return path;
    };
    // Held (this process keeps its flock), unreadable to the owner of the snapshot, and stale.
    const held = openSync(plant(a.digest, '0123456789abcdef', 0o640), 'r');
    nativeSys.flock(held, LOCK_EX | LOCK_NB);
    plant(b.digest, 'fedcba9876543210', 0o000);
    const stale = plant(a.digest, '00000000000000ff', 0o640);
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toMatchObject({ swept: 0 });
    expect(existsSync(stale)).toBe(true);
    // Her stale ledger in a root-prepared clones/ (she removed her clone): left, not a failed gc.
    mkdirSync(join(dir, 'clones'), { recursive: true });
    chownSync(join(dir, 'clones'), 0, GROUP);
    chmodSync(join(dir, 'clones'), 0o3770);
    const ledger = join(dir, 'clones', '1-2.ledger');
    writeFileSync(ledger, 'not a ledger of anyone here');
    chownSync(ledger, SOMEONE, GROUP);
    chmodSync(ledger, 0o600);
    expect(asUser(NOBODY, 'gc', dir, [], [GROUP], env)).toMatchObject({ swept: 0 });
    expect(existsSync(ledger)).toBe(true);
    expect(asUser(NOBODY, 'remove', dir, [a.digest], [GROUP], env)).toMatchObject({ removed: a.digest, left: [b.digest] });
    expect(asUser(NOBODY, 'remove', dir, [b.digest], [GROUP], env)).toMatchObject({ removed: b.digest, left: [] });
    closeSync(held);
  });

  it("a shared store: another member's stat cache or clone ledger is not read, even one holding valid records (its records say which files need no reading)", () => {
    const base = ownedDir(0);
    const repo = join(base, 'repo');
    writeTree(repo, { 'src/a.txt': 'alpha\n', 'src/b.txt': 'beta\n' });
    chownSync(repo, NOBODY, NOBODY);
    const dir = sharedStore(base);
    const env = { TREESEAL_TEST_TRUST: 'group', TREESEAL_TEST_CLOCK_AHEAD_NS: String(CLOCK_AHEAD_NS) };
    const first = asUser(NOBODY, 'capture', dir, [repo, 'src'], [GROUP], env);
    const clone = join(ownedDir(NOBODY), 'arm');
    mkdirSync(clone);
    chownSync(clone, NOBODY, NOBODY);
    asUser(NOBODY, 'materialize', dir, [first.digest, clone], [GROUP], env);
    // The member's own files: trusted (the ledger diffs, the cache skips both files).
    expect(asUser(NOBODY, 'diff', dir, [first.digest, clone], [GROUP], env)).toEqual({ method: 'ledger', ok: true });
    expect(asUser(NOBODY, 'capture', dir, [repo, 'src'], [GROUP], env).reusedFiles).toBe(2);
    // Another member replaces each by a copy of its own that the group may read: the same valid bytes, not the owner's.
    for (const sub of ['cache', 'clones']) {
      for (const name of readdirSync(join(dir, sub))) {
        copyFileSync(join(dir, sub, name), join(dir, sub, `${name}.new`));
        chownSync(join(dir, sub, `${name}.new`), SOMEONE, GROUP);
        chmodSync(join(dir, sub, `${name}.new`), 0o640);
        renameSync(join(dir, sub, `${name}.new`), join(dir, sub, name));
      }
    }
    expect(asUser(NOBODY, 'diff', dir, [first.digest, clone], [GROUP], env)).toEqual({ method: 'hash', ok: true });
    expect(asUser(NOBODY, 'capture', dir, [repo, 'src'], [GROUP], env).reusedFiles).toBe(0);
  });

  it('a store whose owner changes between its open and the walk that proves its path: refused', () => {
    const dir = join(ownedDir(NOBODY), 'store');
    asUser(NOBODY, 'gc', dir, []);
    const ino = BigInt(statSync(dir).ino);
    let seen = 0;
    const sys = wrapSys({ fstat: (orig) => (fd) => {
      const st = orig(fd);
      return st.ino === ino && ++seen === 2 ? { ...st, uid: SOMEONE } : st;
    } });
    expectError(() => SnapshotStore.openSync(dir, { sys }), { code: 'SEAL_UNTRUSTED', message: `untrusted store: ${dir} changed owner while it was opened`, unchanged: dir });
  });
});
