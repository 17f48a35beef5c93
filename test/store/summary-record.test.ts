// summary-record.test.ts: store.summary and listing from a record of the proven summary, used only while the manifest.json it was proven from keeps its identity.
import { chmodSync, chownSync, existsSync, linkSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { chownTree, expectError, mkfifo, openFds, rootPassOnly, tempDir, wrapSys, writeTree } from '../helpers.js';
import { cli, json } from '../cli/run-cli.js';

interface Setup {
  root: string;
  storeRoot: string;
  store: SnapshotStore;
  digest: string;
  manifest: string;
  record: string;
}

function setup(): Setup {
  const root = tempDir();
  writeTree(root, { 'repo/src/a.ts': 'alpha', 'repo/src/b/c.ts': 'gamma', 'repo/deps/p/index.js': '1' });
  const storeRoot = join(root, 'store');
  const store = SnapshotStore.openSync(storeRoot);
  const snap = store.captureSync({ source: join(root, 'repo'), copy: ['src'], mounts: [{ source: 'deps', target: 'deps' }], revision: 'r1' });
  return { root, storeRoot, store, digest: snap.digest, manifest: join(snap.root, 'manifest.json'), record: join(storeRoot, 'cache', `${snap.digest}.${process.geteuid!()}.summary`) };
}

/** The record as JSON, changed by `edit`, written back in place (its mode and owner kept). */
function editRecord(path: string, edit: (r: any) => void): void {
  const r = JSON.parse(readFileSync(path, 'utf8'));
  edit(r);
  writeFileSync(path, `${JSON.stringify(r)}\n`);
}

/** Blocks this thread for ms (synchronously: also inside a wrapped syscall), without spinning. */
function sleepPast(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe('store.summary', () => {
  it('is get(d).summary(), from the record a capture made of what it published, by digest or prefix, sync and async', async () => {
    const { store, digest, record } = setup();
    expect(existsSync(record)).toBe(true);
    expect(statSync(record).mode & 0o777).toBe(0o600);
    const expected = store.get(digest).summary();
    expect(expected).toMatchObject({ digest, revision: 'r1', declarations: ['src'], entries: 7, totalBytes: 11 });
    expect(store.summary(digest)).toEqual(expected);
    expect(store.summary(digest.slice(0, 8))).toEqual(expected);
    expect(await store.summaryAsync(digest)).toEqual(expected);
    expect(JSON.parse(readFileSync(record, 'utf8'))).toMatchObject({ format: 'treeseal-summary', version: 1, digest, summary: expected });
    expectError(() => store.summary('0'.repeat(64)), { code: 'SEAL_UNAVAILABLE', message: `no such snapshot: ${'0'.repeat(64)}` });
    expectError(() => store.summary('xyz'), { code: 'ERR_INVALID_ARG_VALUE' });
    store.closeSync();
  });

  it('looks a whole digest up by its name, never listing the snapshots: ls of N snapshots listed them N times (22 s for 3,000)', () => {
    const { storeRoot, store, digest } = setup();
    const snapshotsDir = statSync(join(storeRoot, 'snapshots'));
    let listed = 0;
    const counting = wrapSys({
      readdir: (orig) => (fd) => {
        const st = statSync(`/proc/self/fd/${fd}`);
        if (st.ino === snapshotsDir.ino && st.dev === snapshotsDir.dev) listed++;
        return orig(fd);
      },
    });
    const again = SnapshotStore.openSync(storeRoot, { sys: counting });
    listed = 0;
    expect(again.summary(digest)).toEqual(store.summary(digest));
    expect(again.get(digest).digest).toBe(digest);
    expect(listed).toBe(0);
    // A prefix is still resolved by listing them.
    expect(again.summary(digest.slice(0, 8)).digest).toBe(digest);
    expect(listed).toBe(1);
    again.closeSync();
    store.closeSync();
  });

  it('takes a record whose manifest identity matches as it is: ls reads no manifest', () => {
    const { storeRoot, store, digest, record } = setup();
    editRecord(record, (r) => {
      r.summary.totalBytes = 12345;
    });
    expect(store.summary(digest).totalBytes).toBe(12345);
    expect(store.usage()[0]!.logicalBytes).toBe(12345);
    expect(cli(storeRoot, 'ls').stdout).toContain('12.1 KiB');
    expect(store.get(digest).summary().totalBytes).toBe(11);
    store.closeSync();
  });

  it('proves the manifest again once it was written, even with its size and mtime put back: a tampered one is SEAL_CORRUPT in summary, ls and usage', () => {
    const { storeRoot, store, digest, manifest } = setup();
    const before = statSync(manifest);
    const text = readFileSync(manifest, 'utf8');
    chmodSync(manifest, 0o600);
    writeFileSync(manifest, text.replace('"r1"', '"r2"'));
    chmodSync(manifest, 0o400);
    utimesSync(manifest, before.atime, before.mtime);
    expect(statSync(manifest).size).toBe(before.size);
    expectError(() => store.summary(digest), { code: 'SEAL_CORRUPT' });
    expect(store.usage()[0]!.error?.code).toBe('SEAL_CORRUPT');
    expect(cli(storeRoot, 'ls').stdout).toMatch(new RegExp(`^${digest.slice(0, 12)}  SEAL_CORRUPT: `));
    store.closeSync();
  });

  it('proves the manifest again when it was replaced by a copy of itself (another inode), and records it once that is older than 2 s', () => {
    const { store, digest, manifest, record } = setup();
    const expected = store.get(digest).summary();
    editRecord(record, (r) => {
      r.summary.totalBytes = 12345;
    });
    const copy = `${manifest}.copy`;
    chmodSync(join(manifest, '..'), 0o700);
    writeFileSync(copy, readFileSync(manifest), { mode: 0o400 });
    renameSync(copy, manifest);
    chmodSync(join(manifest, '..'), 0o500);
    expect(store.summary(digest)).toEqual(expected);
    // Proven, but not recorded: the manifest changed less than 2 s ago (a write in the same tick could follow unseen).
    expect(JSON.parse(readFileSync(record, 'utf8')).summary.totalBytes).toBe(12345);
    sleepPast(2100);
    expect(store.summary(digest)).toEqual(expected);
    const r = JSON.parse(readFileSync(record, 'utf8'));
    expect(r.summary).toEqual(expected);
    expect(r.manifest.ino).toBe(String(statSync(manifest, { bigint: true }).ino));
    store.closeSync();
  });

  it('ignores a record another user could have written, a link, a FIFO, garbage, one of another snapshot or one off the manifest\'s identity in any field: the manifest is proven instead', () => {
    const { root, store, digest, record } = setup();
    const expected = store.summary(digest);
    const good = readFileSync(record, 'utf8');
    const forged = good.replace('"totalBytes":11', '"totalBytes":12345');
    const extraKey = JSON.parse(forged);
    extraKey.summary.extra = 1;
    const badCount = JSON.parse(forged);
    badCount.summary.entries = -1;
    const cases: [string, () => void][] = [
      ['writable by others', () => (writeFileSync(record, forged), chmodSync(record, 0o622))],
      ['a symlink to a forged record', () => (writeFileSync(join(root, 'forged'), forged), symlinkSync(join(root, 'forged'), record))],
      ['a FIFO', () => mkfifo(record)],
      ['a second name of a forged record', () => (writeFileSync(join(root, 'forged2'), forged, { mode: 0o600 }), linkSync(join(root, 'forged2'), record))],
      ...(process.geteuid!() === 0 ? [['owned by another user', () => (writeFileSync(record, forged, { mode: 0o600 }), chownSync(record, 999, 999))] as [string, () => void]] : []),
      ['garbage', () => writeFileSync(record, 'not json')],
      ['torn', () => writeFileSync(record, forged.slice(0, 100))],
      ['with a key too many', () => writeFileSync(record, JSON.stringify(extraKey))],
      ['with a negative count', () => writeFileSync(record, JSON.stringify(badCount))],
      ['null', () => writeFileSync(record, 'null')],
      ['of another format', () => writeFileSync(record, JSON.stringify({ ...JSON.parse(forged), format: 'other' }))],
      ['of another version', () => writeFileSync(record, JSON.stringify({ ...JSON.parse(forged), version: 2 }))],
      ['naming another digest at its top', () => writeFileSync(record, JSON.stringify({ ...JSON.parse(forged), digest: 'f'.repeat(64) }))],
      ['with no manifest identity', () => writeFileSync(record, JSON.stringify({ ...JSON.parse(forged), manifest: null }))],
      ['with a manifest identity that is a string', () => writeFileSync(record, JSON.stringify({ ...JSON.parse(forged), manifest: 'x' }))],
    ];
    // A record that differs from the manifest's identity in one field alone (the ctime kept) is not the manifest's.
    for (const field of ['dev', 'ino', 'mode', 'size', 'mtimeNs', 'ctimeNs']) {
      const r = JSON.parse(forged);
      r.manifest[field] = typeof r.manifest[field] === 'number' ? r.manifest[field] + 1 : String(BigInt(r.manifest[field]) + 1n);
      cases.push([`one off in ${field}`, () => writeFileSync(record, JSON.stringify(r))]);
    }
    // The forged record itself, with the manifest's identity, is taken: the cases above fail by what they change alone.
    rmSync(record);
    writeFileSync(record, forged, { mode: 0o600 });
    expect(store.summary(digest).totalBytes).toBe(12345);
    for (const [what, plant] of cases) {
      rmSync(record, { force: true });
      plant();
      expect({ what, summary: store.summary(digest) }).toEqual({ what, summary: expected });
    }
    store.closeSync();
  });

  it('a record does not stand in for the snapshot directory\'s own checks: one others can write is SEAL_UNTRUSTED', () => {
    const { store, digest, manifest, record } = setup();
    expect(existsSync(record)).toBe(true);
    chmodSync(join(manifest, '..'), 0o520);
    expectError(() => store.summary(digest), { code: 'SEAL_UNTRUSTED', message: /^untrusted snapshot: snapshots\/[0-9a-f]{64} is writable by its group \(mode 0520\)/ });
    chmodSync(join(manifest, '..'), 0o500);
    expect(store.summary(digest).digest).toBe(digest);
    store.closeSync();
  });

  it('a snapshot whose manifest is gone or is a directory is SEAL_CORRUPT, its record notwithstanding', () => {
    const { store, digest, manifest, record } = setup();
    expect(existsSync(record)).toBe(true);
    chmodSync(join(manifest, '..'), 0o700);
    renameSync(manifest, `${manifest}.away`);
    expectError(() => store.summary(digest), { code: 'SEAL_CORRUPT', message: `snapshot has no readable manifest: ${digest}` });
    mkdirSync(manifest);
    expectError(() => store.summary(digest), { code: 'SEAL_CORRUPT' });
    rmSync(manifest, { recursive: true });
    renameSync(`${manifest}.away`, manifest);
    chmodSync(join(manifest, '..'), 0o500);
    store.closeSync();
  });

  rootPassOnly('root listing another user\'s store writes nothing into it: no cache/ of root\'s, no record in the owner\'s', () => {
    const { storeRoot, store, digest } = setup();
    store.closeSync();
    const cache = join(storeRoot, 'cache');
    rmSync(cache, { recursive: true });
    chownTree(storeRoot, 999, 999);
    // chown moved every ctime: past the racy rule, a listing by the owner would record.
    sleepPast(2100);
    expect(cli(storeRoot, 'ls').status).toBe(0);
    expect(existsSync(cache)).toBe(false);
    mkdirSync(cache, { mode: 0o700 });
    chownSync(cache, 999, 999);
    expect(cli(storeRoot, 'ls').status).toBe(0);
    expect(cli(storeRoot, 'du').status).toBe(0);
    expect(readdirSync(cache)).toEqual([]);
    expect(json(cli(storeRoot, 'ls', '--json'))[0].digest).toBe(digest);
    // Sticky but the owner's alone (not a shared store's group-writable part): still nothing of root's.
    chmodSync(cache, 0o1700);
    expect(cli(storeRoot, 'ls').status).toBe(0);
    expect(readdirSync(cache)).toEqual([]);
  });

  it('treeseal gc with a policy drops the records of the snapshots it removed in the same run (they stayed until the next gc)', () => {
    const { root, storeRoot, store, digest, record } = setup();
    writeTree(root, { 'repo/src/a.ts': 'changed' });
    const second = store.captureSync({ source: join(root, 'repo'), copy: ['src'], mounts: [{ source: 'deps', target: 'deps' }], revision: 'r2' });
    const older = new Date(Date.now() - 86_400_000);
    utimesSync(store.get(digest).root, older, older);
    store.closeSync();
    const r = cli(storeRoot, 'gc', '--keep-last', '1', '--json');
    expect([r.status, JSON.parse(r.stdout)]).toMatchObject([0, { removed: [digest] }]);
    expect(existsSync(record)).toBe(false);
    expect(readdirSync(join(storeRoot, 'cache')).filter((n) => n.endsWith('.summary'))).toEqual([`${second.digest}.${process.geteuid!()}.summary`]);
  });

  it('gc removes the records of removed snapshots and keeps the others', () => {
    const { root, store, digest, record } = setup();
    writeTree(root, { 'repo/src/a.ts': 'changed' });
    const second = store.captureSync({ source: join(root, 'repo'), copy: ['src'], mounts: [{ source: 'deps', target: 'deps' }], revision: 'r2' });
    const cache = join(root, 'store', 'cache');
    const records = (): string[] => readdirSync(cache).filter((n) => n.endsWith('.summary')).sort();
    const uid = process.geteuid!();
    expect(records()).toEqual([`${digest}.${uid}.summary`, `${second.digest}.${uid}.summary`].sort());
    // Another member's record of the removed snapshot goes too; a name that is no record stays.
    writeFileSync(join(cache, `${digest}.4242.summary`), '{}');
    // Names that are no record's, and a directory under a record's name (left, not a failure).
    const strays = [`${digest}.summary`, `x${digest}.0.summary`, `${digest}.0.summary.bak`, `${digest}.1.summary`];
    for (const n of strays.slice(0, 3)) writeFileSync(join(cache, n), '{}');
    mkdirSync(join(cache, strays[3]!));
    store.remove(digest);
    store.gc();
    expect(records()).toEqual([...strays, `${second.digest}.${uid}.summary`].filter((n) => n.endsWith('.summary')).sort());
    expect(readdirSync(cache).filter((n) => n.includes(digest)).sort()).toEqual([...strays].sort());
    expect(existsSync(record)).toBe(false);
    expect(store.summary(second.digest).revision).toBe('r2');
    // A store without cache/ (removed by hand): gc, summary and usage go on, and the listing records again.
    rmSync(cache, { recursive: true });
    expect(store.gc()).toBe(0);
    writeTree(root, { 'repo/src/a.ts': 'third' });
    const third = store.captureSync({ source: join(root, 'repo'), copy: ['src'], mounts: [{ source: 'deps', target: 'deps' }], revision: 'r3' });
    const fds = openFds().length;
    expect(store.summary(second.digest).revision).toBe('r2');
    // Two snapshots listed from their records through one open cache/, closed after.
    expect(store.usage().map((u) => u.digest).sort()).toEqual([second.digest, third.digest].sort());
    expect(openFds().length).toBe(fds);
    store.closeSync();
  });

  it('records no summary whose proof began too close to the manifest\'s last change, or took over a second', () => {
    const { storeRoot, store, digest, manifest, record } = setup();
    const expected = store.summary(digest);
    store.closeSync();
    // A copy of the manifest (another inode, new times) in its place: the record no longer matches.
    chmodSync(join(manifest, '..'), 0o700);
    writeFileSync(`${manifest}.copy`, readFileSync(manifest), { mode: 0o400 });
    renameSync(`${manifest}.copy`, manifest);
    chmodSync(join(manifest, '..'), 0o500);
    const stalled = (ms: number): SnapshotStore =>
      SnapshotStore.openSync(storeRoot, {
        sys: wrapSys({
          openat: (orig) => (dirfd, name, flags, mode) => {
            if (name === 'manifest.json') sleepPast(ms);
            return orig(dirfd, name, flags, mode);
          },
        }),
      });
    rmSync(record);
    // 1.5 s after the change, a read stalled 0.6 s: 2.1 s old at the record's time, but only 1.5 s when the read began.
    sleepPast(1500);
    let s = stalled(600);
    expect(s.summary(digest)).toEqual(expected);
    expect(existsSync(record)).toBe(false);
    s.closeSync();
    // Old enough, but the read took over a second (the clock between its start and the record is not trusted that far).
    sleepPast(700);
    s = stalled(1100);
    expect(s.summary(digest)).toEqual(expected);
    expect(existsSync(record)).toBe(false);
    s.closeSync();
    // Old enough and quick: recorded.
    s = SnapshotStore.openSync(storeRoot);
    expect(s.summary(digest)).toEqual(expected);
    expect(existsSync(record)).toBe(true);
    s.closeSync();
  });
});
