// read-only-store.test.ts: a store on a filesystem mounted read-only (a volume shared read-only across runners) opens as it stands: read, verify, materialize, diff, reset and lease from it; every call that would write it is SEAL_IO (EROFS) before it starts, and nothing in it changes.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, chownSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { SnapshotStore, type Lease } from '../../dist/index.js';
import { LOCK_EX, LOCK_NB, O_DIRECTORY, O_RDONLY, sys } from '../../dist/sys/index.js';
import { expectError, rootOrSkip, tempDir, wrapSys, writeTree } from '../helpers.js';

const CLI = new URL('../../dist/cli.js', import.meta.url).pathname;

const mounted: string[] = [];

afterEach(() => {
  for (const dir of mounted.splice(0)) execFileSync('umount', [dir]);
});

/** Every entry of a tree with its mode, size, mtime and ctime: what must not change while the store is read through the read-only mount. */
function stamp(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    const path = rel === '' ? dir : join(dir, rel);
    const st = lstatSync(path, { bigint: true });
    out.push(`${rel} ${st.mode} ${st.size} ${st.mtimeNs} ${st.ctimeNs}`);
    if (st.isDirectory()) for (const name of readdirSync(path).sort()) walk(rel === '' ? name : `${rel}/${name}`);
  };
  walk('');
  return out;
}

/** A store with one snapshot (a writable path to it), the same store bound read-only at `ro`, and a stale build left in its tmp/. */
function readOnlyStore(): { work: string; rw: string; ro: string; digest: string } {
  const work = tempDir();
  writeTree(join(work, 'repo'), { 'src/a.txt': 'alpha', 'src/lib/b.txt': 'beta' });
  const rw = join(work, 'store');
  const store = SnapshotStore.openSync(rw);
  const digest = store.captureSync({ source: join(work, 'repo'), copy: ['src'] }).digest;
  store.closeSync();
  // What a capture killed midway leaves: an open sweeps it, a read-only one cannot.
  mkdirSync(join(rw, 'tmp', 'build-00112233445566778899aabbccddeeff'));
  // Two directories that are no store, for the refusals.
  mkdirSync(join(rw, 'tmp', 'empty'), { mode: 0o700 });
  mkdirSync(join(rw, 'tmp', 'lockonly'), { mode: 0o700 });
  writeFileSync(join(rw, 'tmp', 'lockonly', 'lock'), '', { mode: 0o600 });
  for (const part of ['', '/snapshots', '/tmp']) mkdirSync(join(rw, 'tmp', `noleases${part}`), { mode: 0o700 });
  writeFileSync(join(rw, 'tmp', 'noleases', 'lock'), '', { mode: 0o600 });
  const ro = join(work, 'ro');
  mkdirSync(ro);
  execFileSync('mount', ['--bind', rw, ro]);
  mounted.push(ro);
  execFileSync('mount', ['-o', 'remount,bind,ro', ro]);
  return { work, rw, ro, digest };
}

describe('a store on a read-only filesystem', () => {
  it('opens as it stands (readOnly, nothing swept or made) and reads, lists, sums up and verifies: not a byte or a timestamp of it changes', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { rw, ro, digest } = readOnlyStore();
    const before = stamp(rw);
    const store = await SnapshotStore.open(ro);
    expect([store.readOnly, store.sweptAtOpen]).toEqual([true, 0]);
    expect(store.list()).toEqual([digest]);
    expect(store.summary(digest.slice(0, 8))).toMatchObject({ digest, entries: 4, totalBytes: 9 });
    expect((await store.getAsync(digest)).entries.map((e) => e.path)).toEqual(['src', 'src/a.txt', 'src/lib', 'src/lib/b.txt']);
    expect(store.usage().map((u) => u.digest)).toEqual([digest]);
    expect(await store.get(digest).verify()).toMatchObject({ entries: 4, bytes: 9 });
    await store.close();
    expect(stamp(rw)).toEqual(before);
    // The writable path is a store as any other: its open sweeps the build.
    const writable = SnapshotStore.openSync(rw);
    expect([writable.readOnly, writable.sweptAtOpen]).toEqual([false, 1]);
    writable.closeSync();
  });

  it('capture, pull, remove, gc and prune are SEAL_IO naming the store (cause EROFS) before they start; an ephemeral store there is refused at open; the CLI says the same', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { work, rw, ro, digest } = readOnlyStore();
    const before = stamp(rw);
    const store = SnapshotStore.openSync(ro);
    const message = (what: string, root = ro): string =>
      `store is on a read-only filesystem: ${what} cannot write it: ${root} (read, verify, materialize, diff and reset from it work; capture, pull, remove and gc need it writable)`;
    const calls: [string, () => unknown][] = [
      ['capture', () => store.captureSync({ source: join(work, 'repo'), copy: ['src'] })],
      ['remove', () => store.remove(digest)],
      ['gc', () => store.gc()],
      ['prune', () => store.prune({ keepLast: 1, olderThanMs: 0 })],
    ];
    for (const [what, call] of calls) {
      const err = expectError(call, { code: 'SEAL_IO', message: message(what), path: ro });
      expect((err.cause as NodeJS.ErrnoException).code).toBe('EROFS');
    }
    await expectError(async () => store.capture({ source: join(work, 'repo'), copy: ['src'] }), { code: 'SEAL_IO', message: message('capture') });
    await expectError(async () => store.pull('a'.repeat(64), 'http://127.0.0.1:5000/team/repo'), { code: 'SEAL_IO', message: message('pull') });
    // A pull of a digest the store holds writes nothing: it says so, as on any store.
    expect(await store.pull(digest, 'http://127.0.0.1:5000/team/repo')).toMatchObject({ digest, existed: true, downloaded: 0 });
    // Argument errors come first, as on any store.
    expectError(() => store.remove('XYZ'), { code: 'ERR_INVALID_ARG_VALUE' });
    await expectError(async () => store.pull('a'.repeat(64), 42 as never), { code: 'ERR_INVALID_ARG_TYPE' });
    await expectError(async () => store.pull('a'.repeat(64), 'http://127.0.0.1:5000/team/repo', { bogus: 1 } as never), { code: 'ERR_INVALID_ARG_VALUE' });
    store.closeSync();
    await expectError(async () => SnapshotStore.open(ro, { ephemeral: true }), { code: 'SEAL_IO', message: message('an ephemeral store (removed at its close)') });
    // A directory there that is no store (nothing in it, or no snapshots/ beside its lock) says so; nothing is made.
    for (const [dir, missing] of [['empty', 'lock'], ['lockonly', 'snapshots/'], ['noleases', 'leases/']] as const) {
      await expectError(async () => SnapshotStore.open(join(ro, 'tmp', dir)), { code: 'SEAL_UNAVAILABLE', message: `not a treeseal store: ${join(ro, 'tmp', dir)} holds no ${missing}, and its filesystem is mounted read-only` });
    }
    const cli = spawnSync(process.execPath, [CLI, '--store', ro, 'capture', join(work, 'repo'), '--copy', 'src'], { encoding: 'utf8' });
    expect([cli.status, cli.stdout, cli.stderr]).toEqual([1, '', `treeseal: SEAL_IO: ${message('capture')}\n`]);
    const ls = spawnSync(process.execPath, [CLI, '--store', ro, 'ls'], { encoding: 'utf8' });
    expect([ls.status, ls.stderr, ls.stdout.startsWith(digest.slice(0, 12))]).toEqual([0, '', true]);
    expect(stamp(rw)).toEqual(before);
  });

  it('a shared store whose part lost its sticky bit is refused as it stands, with its fix (an open of the writable store gives it back: there it was a raw EROFS of that chmod)', () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const work = tempDir();
    const rw = join(work, 'store');
    mkdirSync(rw);
    chownSync(rw, 0, 4242);
    chmodSync(rw, 0o3770);
    SnapshotStore.openSync(rw, { trust: 'group' }).closeSync();
    chmodSync(join(rw, 'leases'), 0o2770);
    const ro = join(work, 'ro');
    mkdirSync(ro);
    execFileSync('mount', ['--bind', rw, ro]);
    mounted.push(ro);
    execFileSync('mount', ['-o', 'remount,bind,ro', ro]);
    expectError(() => SnapshotStore.openSync(ro, { trust: 'group' }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted shared store: ${ro}/leases is group-writable but not sticky (mode 2770): another member could rename or remove what is yours in it; fix: chmod +t ${ro}/leases`,
    });
    const fixed = SnapshotStore.openSync(rw, { trust: 'group' });
    expect(statSync(join(rw, 'leases')).mode & 0o7777).toBe(0o3770);
    fixed.closeSync();
    const store = SnapshotStore.openSync(ro, { trust: 'group' });
    expect(store.readOnly).toBe(true);
    store.closeSync();
  });

  it('materializes, diffs, resets and checks a clone from it: no ledger can be saved (said), so diff re-hashes and reset is whole; the clone is exactly the snapshot', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { work, rw, ro, digest } = readOnlyStore();
    const before = stamp(rw);
    const store = await SnapshotStore.open(ro);
    const snap = store.get(digest);
    const clone = join(work, 'clone');
    const made = await snap.materialize(clone, { createClone: true });
    expect([made.files, made.ledgerNotSaved]).toEqual([2, 'the store is on a read-only filesystem']);
    expect(readFileSync(join(clone, 'src/lib/b.txt'), 'utf8')).toBe('beta');
    expect(await snap.diff(clone)).toMatchObject({ ok: true, method: 'hash', files: 2 });
    writeFileSync(join(clone, 'src/a.txt'), 'agent was here');
    writeFileSync(join(clone, 'src/new.txt'), 'new');
    expect(await snap.diff(clone)).toMatchObject({ ok: false, method: 'hash', added: ['src/new.txt'], changed: ['src/a.txt'] });
    const reset = await snap.reset(clone);
    expect([reset.method, reset.ledgerNotSaved]).toEqual(['materialize', 'the store is on a read-only filesystem']);
    expect(await snap.checkClone(clone)).toMatchObject({ ok: true, added: [], changed: [], removed: [] });
    expect(readFileSync(join(clone, 'src/a.txt'), 'utf8')).toBe('alpha');
    await store.close();
    expect(stamp(rw)).toEqual(before);
  });

  it('trusts no ledger a store kept from its writable days (nor a reused inode\'s): another snapshot materializes into the clone, and diff and reset after a read-only reset are true (one failed dropping it, EROFS; the other said DIFFERS by a stale ledger)', () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { work, rw, ro, digest } = readOnlyStore();
    writeFileSync(join(work, 'repo/src/a.txt'), 'alpha 2');
    const writer = SnapshotStore.openSync(rw);
    const other = writer.captureSync({ source: join(work, 'repo'), copy: ['src'] }).digest;
    const clone = join(work, 'clone');
    // Materialized through the writable path: the store keeps a ledger of it.
    expect(writer.get(digest).materializeSync(clone, { createClone: true }).ledgerNotSaved).toBeUndefined();
    writer.closeSync();
    const before = stamp(rw);
    const reader = SnapshotStore.openSync(ro);
    const made = reader.get(other).materializeSync(clone);
    expect([made.reset, made.ledgerNotSaved, readFileSync(join(clone, 'src/a.txt'), 'utf8')]).toEqual([false, 'the store is on a read-only filesystem', 'alpha 2']);
    const snap = reader.get(digest);
    snap.materializeSync(clone);
    writeFileSync(join(clone, 'src/a.txt'), 'agent');
    expect(snap.resetSync(clone).method).toBe('materialize');
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'hash', changed: [] });
    expect(snap.checkCloneSync(clone).ok).toBe(true);
    reader.closeSync();
    expect(stamp(rw)).toEqual(before);
  });

  it('an ephemeral store is not removed at its close while a lease through a read-only mount of it holds a snapshot (it was removed under the reader)', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.txt': 'alpha' });
    const dir = join(work, 'eph');
    const store = await SnapshotStore.open(dir, { ephemeral: true });
    const digest = (await store.capture({ source: join(work, 'repo'), copy: ['src'] })).digest;
    const ro = join(work, 'ro');
    mkdirSync(ro);
    execFileSync('mount', ['--bind', dir, ro]);
    mounted.push(ro);
    execFileSync('mount', ['-o', 'remount,bind,ro', ro]);
    const reader = await SnapshotStore.open(ro);
    const lease = await reader.get(digest).leaseAsync();
    await expectError(async () => store.close(), {
      code: 'SEAL_BUSY',
      message: `ephemeral store is left in place: ${dir}: snapshot ${digest} is leased through a read-only mount of the store (its manifest is flocked); nothing is removed while a lease holds it`,
    });
    expect(readFileSync(join(reader.get(digest).root, 'copy/src/a.txt'), 'utf8')).toBe('alpha');
    lease.release();
    await reader.close();
    execFileSync('umount', [mounted.pop()!]);
    await store.close();
    expect(existsSync(dir)).toBe(false);
  });

  it('locks a clone by its own directory (no lock file can be made in the store): a second call on it meanwhile is SEAL_BUSY', () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { work, ro, digest } = readOnlyStore();
    const store = SnapshotStore.openSync(ro);
    const snap = store.get(digest);
    const clone = join(work, 'clone');
    snap.materializeSync(clone, { createClone: true });
    const held = sys.openat(-100, clone, O_RDONLY | O_DIRECTORY);
    try {
      sys.flock(held, LOCK_EX | LOCK_NB);
      expectError(() => snap.resetSync(clone), {
        code: 'SEAL_BUSY',
        message: `clone is in use: its directory is flocked (by a materialize, reset or sandboxed command through a read-only store, or by any other process holding an flock on it); wait for that one: ${clone}`,
        path: clone,
      });
    } finally {
      sys.close(held);
    }
    expect(snap.resetSync(clone).method).toBe('materialize');
    store.closeSync();
  });

  it('a lease taken through it holds the snapshot against an rm or a prune through the writable mount (SEAL_BUSY), until it is released', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { rw, ro, digest } = readOnlyStore();
    const reader = SnapshotStore.openSync(ro);
    const lease: Lease = await reader.get(digest).leaseAsync();
    const writer = SnapshotStore.openSync(rw);
    expectError(() => writer.remove(digest), {
      code: 'SEAL_BUSY',
      message: `snapshot ${digest} is leased through a read-only mount of the store (its manifest is flocked); nothing is removed while a lease holds it`,
    });
    expect(writer.prune({ keepLast: 1, olderThanMs: 0 }).leased).toEqual([]);
    expect(writer.prune({ olderThanMs: 0 })).toMatchObject({ removed: [], leased: [digest] });
    // A second lease through it, released first, leaves the first holding.
    const second = reader.get(digest).lease();
    second.release();
    expect(() => writer.remove(digest)).toThrow(/leased through a read-only mount/);
    lease.release();
    expect(lease.released).toBe(true);
    expect(writer.remove(digest)).toBe(digest);
    expect(writer.list()).toEqual([]);
    reader.closeSync();
    writer.closeSync();
  });

  it('a snapshot just published through the writable mount can be leased through the read-only one at once (the build keeps its directory flocked until the capture returns: a lease on it was SEAL_BUSY)', () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { work, rw, ro } = readOnlyStore();
    writeFileSync(join(work, 'repo/src/a.txt'), 'alpha 2');
    const reader = SnapshotStore.openSync(ro);
    let lease: Lease | undefined;
    // Right after the rename that publishes the build, while the capture still holds the build's flock.
    const publishing = wrapSys({
      renameat2: (orig) => (olddirfd, oldpath, newdirfd, newpath, flags) => {
        orig(olddirfd, oldpath, newdirfd, newpath, flags);
        if (/^[0-9a-f]{64}$/.test(String(newpath))) lease = reader.get(String(newpath)).lease();
      },
    });
    const writer = SnapshotStore.openSync(rw, { sys: publishing });
    const digest = writer.captureSync({ source: join(work, 'repo'), copy: ['src'] }).digest;
    expect(lease?.digest).toBe(digest);
    writer.closeSync();
    const other = SnapshotStore.openSync(rw);
    expect(() => other.remove(digest)).toThrow(/leased through a read-only mount/);
    lease!.release();
    expect(other.remove(digest)).toBe(digest);
    other.closeSync();
    reader.closeSync();
  });

  it('treeseal run through it: the command runs in the clone; meanwhile an rm through the writable mount and a second run in the clone are SEAL_BUSY; both are let go when it ends', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    if (spawnSync('bwrap', ['--version']).status !== 0) {
      if (process.env.CI === 'true') throw new Error('CI=true but bwrap is not installed (apt-get install -y bubblewrap; .ci/run does)');
      return;
    }
    const { work, rw, ro, digest } = readOnlyStore();
    const clone = join(work, 'arm');
    const env = { ...process.env, TREESEAL_STORE: ro };
    const first = spawn(process.execPath, [CLI, 'run', digest, clone, '--', 'sh', '-c', 'cat src/a.txt; echo; echo started; read line; echo done > src/out.txt'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    first.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    first.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    try {
      for (let i = 0; i < 500 && !out.includes('started'); i++) await new Promise((r) => setTimeout(r, 20));
      expect(out).toBe('alpha\nstarted\n');
      const rm = spawnSync(process.execPath, [CLI, '--store', rw, 'rm', digest], { encoding: 'utf8' });
      expect([rm.status, rm.stderr]).toEqual([1, `treeseal: SEAL_BUSY: snapshot ${digest} is leased through a read-only mount of the store (its manifest is flocked); nothing is removed while a lease holds it\n`]);
      const second = spawnSync(process.execPath, [CLI, '--retries', '0', 'run', digest, clone, '--', 'true'], { encoding: 'utf8', env });
      expect([second.status, second.stderr]).toEqual([125, `treeseal: SEAL_BUSY: clone is in use: its directory is flocked (by a materialize, reset or sandboxed command through a read-only store, or by any other process holding an flock on it); wait for that one: ${clone}\n`]);
    } finally {
      first.stdin!.end('go\n');
    }
    const [code] = (await once(first, 'close')) as [number];
    // No warning that no ledger was saved: a read-only store keeps none, as documented (it was said at every materialize).
    expect([code, err]).toEqual([0, '']);
    expect(readFileSync(join(clone, 'src/out.txt'), 'utf8')).toBe('done\n');
    const rm = spawnSync(process.execPath, [CLI, '--store', rw, 'rm', digest], { encoding: 'utf8' });
    expect([rm.status, rm.stderr]).toEqual([0, '']);
  });
});
