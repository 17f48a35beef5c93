// usage.test.ts: what each snapshot costs (usage, treeseal du, ls --long) and pruning by age, count and size, oldest first, leased ones kept.
import { chmodSync, closeSync, lstatSync, openSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { STAT_CLOCK_AHEAD } from '../../dist/internal.js';
import { LOCK_EX, LOCK_NB, sys } from '../../dist/sys/index.js';
import { expectError, rootPassOnly, systemError, tempDir, wrapSys, writeTree } from '../helpers.js';
import { cli, json } from '../cli/run-cli.js';

const DAY = 86_400_000;

/** A store of three snapshots published (by their directories' mtimes) 30, 10 and 1 days ago, oldest first. */
function aged(): { root: string; store: SnapshotStore; digests: string[] } {
  const root = tempDir();
  const store = SnapshotStore.openSync(join(root, 'store'));
  const digests: string[] = [];
  for (const [i, days] of [30, 10, 1].entries()) {
    writeTree(root, { [`repo/v${i}/data`]: Buffer.alloc(64 * 1024, i + 1) });
    const snap = store.captureSync({ source: join(root, 'repo'), copy: [`v${i}`], statCache: false });
    const when = new Date(Date.now() - days * DAY);
    utimesSync(snap.root, when, when);
    digests.push(snap.digest);
  }
  return { root, store, digests };
}

describe('usage', () => {
  it('lists every snapshot oldest first with when it was published, its bytes and its bytes on disk', async () => {
    const { store, digests } = aged();
    const usage = store.usage();
    expect(usage.map((u) => u.digest)).toEqual(digests);
    for (const [i, u] of usage.entries()) {
      expect(u.logicalBytes).toBe(64 * 1024);
      // The data file's blocks, at least, and a few directories and the manifest.
      expect(u.diskBytes).toBeGreaterThanOrEqual(64 * 1024);
      expect(Math.abs(Date.now() - [30, 10, 1][i]! * DAY - u.createdMs)).toBeLessThan(60_000);
    }
    expect(await store.usageAsync()).toEqual(usage);
    store.closeSync();
  });

  it('a file two snapshots share by a hard link (the stat cache links it) counts once on disk', () => {
    const root = tempDir();
    writeTree(root, { 'repo/a/big': Buffer.alloc(256 * 1024, 7), 'repo/a/x': 'x' });
    const start = Date.now();
    while (Date.now() - start < 2200) {
      // past the stat cache's granularity: the second capture links the big file from the first
    }
    const store = SnapshotStore.openSync(join(root, 'store'));
    store.captureSync({ source: join(root, 'repo'), copy: ['a'] });
    writeTree(root, { 'repo/a/x': 'y' });
    const second = store.captureSync({ source: join(root, 'repo'), copy: ['a'] });
    expect(second.captureReport?.reusedFiles).toBe(1);
    const [one, two] = [...store.usage()].sort((p, q) => (p.digest < q.digest ? -1 : 1));
    expect(one!.diskBytes + two!.diskBytes).toBeLessThan(2 * 256 * 1024);
    store.closeSync();
  });
});

/** st_blocks × 512 of path and everything below it (no link followed), each inode once: what du counts, by Node's own lstat. */
function blocksBelow(path: string, seen = new Set<string>()): number {
  const st = lstatSync(path, { bigint: true });
  const key = `${st.dev}:${st.ino}`;
  let total = seen.has(key) ? 0 : Number(st.blocks) * 512;
  seen.add(key);
  if (st.isDirectory()) for (const name of readdirSync(path)) total += blocksBelow(join(path, name), seen);
  return total;
}

describe('partsUsage', () => {
  it('counts a store in use: a build, lock or cache file gone between its listing and its look, or a build directory gone between its open and its listing, counts as gone (du failed SEAL_UNAVAILABLE, not retryable, naming only the entry)', () => {
    const root = tempDir();
    const dir = join(root, 'store');
    SnapshotStore.openSync(dir).closeSync();
    const tmp = join(dir, 'tmp');
    for (const build of ['build-a', 'build-b', 'build-c']) mkdirSync(join(tmp, build, 'copy'), { recursive: true });
    writeFileSync(join(tmp, 'build-a/copy/f'), Buffer.alloc(8192, 1));
    writeFileSync(join(tmp, 'clone-1-2.lock'), '');
    // Held, as a live capture and a live materialize hold them: the open's sweep leaves them.
    const held = ['build-a', 'build-b', 'build-c', 'clone-1-2.lock'].map((name) => {
      const fd = openSync(join(tmp, name), 'r');
      sys.flock(fd, LOCK_EX | LOCK_NB);
      return fd;
    });
    // Each goes as it is about to be looked at, as another process's capture, publish or unlock takes it.
    const gone = new Set<string>();
    let armed = false;
    const racing = wrapSys({
      fstatat: (orig) => (fd, name, flags) => {
        if (armed && (name === 'clone-1-2.lock' || name === 'f')) {
          if (!gone.has(String(name))) rmSync(name === 'f' ? join(tmp, 'build-a/copy/f') : join(tmp, 'clone-1-2.lock'));
          gone.add(String(name));
        }
        return orig(fd, name, flags);
      },
      openat: (orig) => (fd, name, flags, mode) => {
        const opened = orig(fd, name, flags, mode);
        if (!armed) return opened;
        if (name === 'build-b' && !gone.has('build-b')) {
          rmSync(join(tmp, 'build-b'), { recursive: true });
          gone.add('build-b');
        }
        if (name === 'build-c' && !gone.has('build-c')) {
          gone.add('build-c');
          rmSync(join(tmp, 'build-c'), { recursive: true });
          writeFileSync(join(tmp, 'build-c'), 'a file now');
        }
        return opened;
      },
    });
    const store = SnapshotStore.openSync(dir, { sys: racing });
    armed = true;
    const parts = store.partsUsage();
    expect([...gone].sort()).toEqual(['build-b', 'build-c', 'clone-1-2.lock', 'f']);
    expect(parts.builds).toEqual({ entries: 4, diskBytes: expect.any(Number) });
    expect(parts.builds.diskBytes).toBeLessThan(8192 + blocksBelow(tmp) + 4096 * 8);
    store.closeSync();
    for (const fd of held) closeSync(fd);
  });

  it('counts the stat caches, clone ledgers and unfinished builds a store holds besides its snapshots, each as du counts it; a part the store does not have yet is none; one replaced by a link is SEAL_SYMLINK, a file SEAL_CORRUPT', async () => {
    const root = tempDir();
    writeTree(root, { 'repo/a/big': Buffer.alloc(96 * 1024, 3), 'repo/a/x': 'x' });
    const dir = join(root, 'store');
    const store = SnapshotStore.openSync(dir);
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['a'] });
    snap.materializeSync(join(root, 'arm-1'), { createClone: true });
    snap.materializeSync(join(root, 'arm-2'), { createClone: true });
    // What a capture that died left: a build directory with a file in it.
    mkdirSync(join(dir, 'tmp/build-dead/copy/a'), { recursive: true });
    writeFileSync(join(dir, 'tmp/build-dead/copy/a/big'), Buffer.alloc(40 * 1024, 1));
    const parts = store.partsUsage();
    expect(parts).toEqual({
      // The source's stat cache and the snapshot's summary record.
      statCaches: { entries: 2, diskBytes: blocksBelow(join(dir, 'cache')) },
      cloneLedgers: { entries: 2, diskBytes: blocksBelow(join(dir, 'clones')) },
      builds: { entries: 1, diskBytes: blocksBelow(join(dir, 'tmp')) },
    });
    expect(parts.builds.diskBytes).toBeGreaterThanOrEqual(40 * 1024);
    expect(await store.partsUsageAsync()).toEqual(parts);
    // The CLI adds them to the snapshots' total, once it has swept what a dead capture left (as every command does).
    const du = json(cli(dir, 'du', '--json'));
    expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
    expect(du.parts).toEqual({ ...parts, builds: { entries: 0, diskBytes: blocksBelow(join(dir, 'tmp')) } });
    expect(du.parts).toEqual(store.partsUsage());
    expect(du.storeDiskBytes).toBe(du.diskBytes + du.parts.statCaches.diskBytes + du.parts.cloneLedgers.diskBytes + du.parts.builds.diskBytes);
    expect(cli(dir, 'du').stdout.trimEnd().split('\n').at(-2)).toMatch(/^besides the snapshots: caches [\d.]+ KiB \(2\), clone ledgers [\d.]+ KiB \(2\), unfinished builds and downloads [\d.]+ K?i?B \(0\)$/);
    mkdirSync(join(dir, 'tmp/build-dead'));
    // A store made before ledgers existed has no clones/: none.
    rmSync(join(dir, 'clones'), { recursive: true });
    expect(store.partsUsage().cloneLedgers).toEqual({ entries: 0, diskBytes: 0 });
    // cache/ replaced by a link to a directory elsewhere: not followed, the store is damaged.
    mkdirSync(join(root, 'elsewhere'));
    writeFileSync(join(root, 'elsewhere/f'), 'x');
    rmSync(join(dir, 'cache'), { recursive: true });
    symlinkSync(join(root, 'elsewhere'), join(dir, 'cache'));
    expectError(() => store.partsUsage(), { code: 'SEAL_SYMLINK', message: `store part must be a real directory, not a symlink: ${join(dir, 'cache')}` });
    rmSync(join(dir, 'cache'));
    writeFileSync(join(dir, 'cache'), 'a file');
    expectError(() => store.partsUsage(), { code: 'SEAL_CORRUPT', message: `store part must be a real directory, not a file: ${join(dir, 'cache')}` });
    rmSync(join(dir, 'cache'));
    mkdirSync(join(dir, 'cache'), { mode: 0o700 });
    // A part this user may not list (another member's, in a shared store): named so, not counted (root lists it all).
    chmodSync(join(dir, 'tmp'), 0o000);
    try {
      expect(store.partsUsage().builds).toEqual(process.geteuid?.() === 0 ? { entries: 1, diskBytes: blocksBelow(join(dir, 'tmp')) } : { entries: 0, diskBytes: 0, unreadable: true });
    } finally {
      chmodSync(join(dir, 'tmp'), 0o700);
    }
    store.closeSync();
    expectError(() => store.partsUsage(), { code: 'SEAL_CLOSED' });
  });
});

describe('prune', () => {
  it('removes what is older than the age, keeps the newest N, then the oldest until the rest fit the size', () => {
    const { store, digests } = aged();
    expect(store.prune({ olderThanMs: 20 * DAY })).toMatchObject({ removed: [digests[0]], leased: [] });
    expect(store.list()).toEqual([...digests.slice(1)].sort());
    expect(store.prune({ olderThanMs: 0, keepLast: 2 })).toMatchObject({ removed: [] });
    const left = store.usage();
    const report = store.prune({ maxBytes: left[1]!.diskBytes });
    expect(report).toEqual({ removed: [digests[1]], leased: [], diskBytes: left[1]!.diskBytes });
    expect(store.list()).toEqual([digests[2]]);
    store.closeSync();
  });

  it('by size, a file two snapshots link (a recapture\'s hard link) is freed only with the last of them: the rest is measured as it is (it was counted freed with the first in digest order, and prune stopped over the size)', () => {
    const root = tempDir();
    // The recapture's records trusted at once (as 3 s later), so the big file is linked, not copied.
    const store = SnapshotStore.openSync(join(root, 'store'), { [STAT_CLOCK_AHEAD]: 3_000_000_000n } as object);
    const big = Buffer.alloc(4 << 20, 7);
    writeTree(root, { 'repo/big': big, 'repo/small': 'one' });
    const first = store.captureSync({ source: join(root, 'repo'), revision: 'r1' });
    writeFileSync(join(root, 'repo/small'), 'two');
    const second = store.captureSync({ source: join(root, 'repo'), revision: 'r2' });
    expect(lstatSync(join(second.root, 'copy/big')).ino).toBe(lstatSync(join(first.root, 'copy/big')).ino);
    // The one usage counts the big file in (the first in digest order) is made the older: prune by size removes it first.
    const [counted, other] = [first, second].sort((a, b) => (a.digest < b.digest ? -1 : 1));
    utimesSync(counted!.root, new Date(Date.now() - 10 * DAY), new Date(Date.now() - 10 * DAY));
    utimesSync(other!.root, new Date(Date.now() - DAY), new Date(Date.now() - DAY));
    const usage = store.usage();
    expect(usage.map((u) => u.digest)).toEqual([counted!.digest, other!.digest]);
    expect(usage[0]!.diskBytes).toBeGreaterThan(big.length);
    expect(usage[1]!.diskBytes).toBeLessThan(1 << 20);
    // Both fit 8 MiB: nothing goes.
    expect(store.prune({ maxBytes: 8 << 20 })).toMatchObject({ removed: [], diskBytes: usage[0]!.diskBytes + usage[1]!.diskBytes });
    // 1 MiB: removing the older frees only its own small bytes (the big file stays, linked by the other), so the other goes too.
    expect(store.prune({ maxBytes: 1 << 20 })).toEqual({ removed: [counted!.digest, other!.digest], leased: [], diskBytes: 0 });
    expect(store.list()).toEqual([]);
    store.closeSync();
  });

  it('a snapshot published in the future (a clock that was ahead) is aged from the first prune that meets it, its time set to then (it was never old enough, and stayed the newest)', () => {
    const { store, digests } = aged();
    const future = new Date('2100-01-01T00:00:00Z');
    utimesSync(store.get(digests[0]!).root, future, future);
    const before = Date.now();
    expect(store.prune({ olderThanMs: 5 * DAY })).toMatchObject({ removed: [digests[1]] });
    const at = lstatSync(store.get(digests[0]!).root).mtimeMs;
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(store.usage().map((u) => u.digest)).toEqual([digests[2], digests[0]]);
    store.closeSync();
  });

  it('a count alone keeps the newest N and removes the rest; an empty policy removes nothing', () => {
    const { store, digests } = aged();
    expect(store.prune({})).toMatchObject({ removed: [] });
    expect(store.prune({ keepLast: 3 })).toMatchObject({ removed: [] });
    expect(store.prune({ keepLast: 1 })).toMatchObject({ removed: [digests[0], digests[1]], leased: [] });
    expect(store.list()).toEqual([digests[2]]);
    // 0 alone would remove every snapshot: refused, as a wrong option is.
    expectError(() => store.prune({ keepLast: 0 }), { code: 'ERR_OUT_OF_RANGE', message: 'The value of "policy.keepLast" is out of range. It must be >= 1 when it is the only rule (0 alone would remove every snapshot). Received 0' });
    expect(store.prune({ keepLast: 0, olderThanMs: 60 * DAY })).toMatchObject({ removed: [] });
    expect(store.list()).toEqual([digests[2]]);
    store.closeSync();
    const gc = cli(join(dirname(store.root), 'store'), 'gc', '--keep-last', '0');
    expect([gc.status, gc.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --keep-last 0 alone would remove every snapshot: give at least 1, or add --older-than or --max-size']);
  });

  it('a snapshot this user may not read (another member\'s, in a shared store) is its own row, SEAL_IO, and prune leaves it alone (usage and prune once failed whole)', () => {
    const { store, digests } = aged();
    const denied = wrapSys({
      openat: (orig) => (dirfd, name, flags, mode) => {
        if (String(name) === digests[0]) throw systemError('EACCES', 'openat');
        return orig(dirfd, name, flags, mode);
      },
    });
    const member = SnapshotStore.openSync(store.root, { sys: denied });
    const rows = member.usage();
    expect(rows.map((u) => [u.digest, u.error?.code])).toEqual([[digests[0], 'SEAL_IO'], [digests[1], undefined], [digests[2], undefined]]);
    expect(member.prune({ keepLast: 1 })).toMatchObject({ removed: [digests[1]], leased: [] });
    expect(store.list().sort()).toEqual([digests[0], digests[2]].sort());
    member.closeSync();
    store.closeSync();
  });

  it('a snapshot a later treeseal made (a manifest of a newer schema) is SEAL_UNAVAILABLE saying so, not corrupt: a prune leaves it, verify does not call it corrupt (gc --keep-last removed it as damaged); a schema-3 manifest whose version alone was altered is SEAL_CORRUPT', () => {
    const { store, digests } = aged();
    const rewrite = (digest: string, edit: (doc: Record<string, unknown>) => Record<string, unknown>): void => {
      const manifest = join(store.root, 'snapshots', digest, 'manifest.json');
      const doc = JSON.parse(readFileSync(manifest, 'utf8')) as Record<string, unknown>;
      chmodSync(dirname(manifest), 0o700);
      chmodSync(manifest, 0o600);
      writeFileSync(manifest, JSON.stringify(edit(doc)));
      chmodSync(manifest, 0o400);
      chmodSync(dirname(manifest), 0o500);
    };
    // A flipped bit (3 → 7) or a hand that wanted it kept: its entries still prove it a schema-3 manifest.
    rewrite(digests[1]!, (doc) => ({ ...doc, schema_version: 7 }));
    expectError(() => store.get(digests[1]!), { code: 'SEAL_CORRUPT', message: 'snapshot manifest is corrupt: schema_version altered: 7 in a schema-3 manifest' });
    // A later format (its entries under another name, say): not one this build can read.
    rewrite(digests[0]!, (doc) => ({ ...doc, schema_version: 4, entries: undefined, files: doc.entries }));
    const message = 'snapshot manifest is schema 4, newer than this treeseal reads (3): a later treeseal made it; upgrade treeseal to use it';
    expect(store.usage().map((u) => [u.digest, u.error?.code])).toEqual([[digests[0], 'SEAL_UNAVAILABLE'], [digests[1], 'SEAL_CORRUPT'], [digests[2], undefined]]);
    expectError(() => store.get(digests[0]!), { code: 'SEAL_UNAVAILABLE', message });
    expect(store.prune({ keepLast: 1 })).toMatchObject({ removed: [digests[1]], leased: [] });
    expect(store.list().sort()).toEqual([digests[0], digests[2]].sort());
    const verified = cli(store.root, 'verify', digests[0]!, '--json');
    expect([verified.status, JSON.parse(verified.stdout)]).toMatchObject([1, { snapshots: [{ ok: false, corrupt: false, error: { code: 'SEAL_UNAVAILABLE', message } }] }]);
    store.closeSync();
  });

  it('a snapshot whose directory others could write (loosened to 0777) is its own row, SEAL_UNTRUSTED, removed by a policy like a damaged one (du and gc policies once failed whole)', () => {
    const { store, digests } = aged();
    chmodSync(join(store.root, 'snapshots', digests[2]!), 0o777);
    const rows = store.usage();
    expect(rows.map((u) => [u.digest, u.error?.code])).toEqual([[digests[0], undefined], [digests[1], undefined], [digests[2], 'SEAL_UNTRUSTED']]);
    // Never one of the newest kept: the newest that loads is.
    expect(store.prune({ keepLast: 1 })).toMatchObject({ removed: [digests[0], digests[2]], leased: [] });
    expect(store.list()).toEqual([digests[1]]);
    store.closeSync();
  });

  it('keeps a leased snapshot and says so; refuses a bad policy as Node does', async () => {
    const { store, digests } = aged();
    using _lease = store.get(digests[0]!).lease();
    expect(await store.pruneAsync({ olderThanMs: 5 * DAY })).toMatchObject({ removed: [digests[1]], leased: [digests[0]] });
    expectError(() => store.prune({ keepLast: -1 }), { code: 'ERR_OUT_OF_RANGE', fds: false });
    expectError(() => store.prune({ maxBytes: 1.5 }), { code: 'ERR_OUT_OF_RANGE', fds: false });
    expectError(() => store.prune({ olderThanMs: '7d' as unknown as number }), { code: 'ERR_INVALID_ARG_TYPE', fds: false });
    expectError(() => store.prune(null as never), { code: 'ERR_INVALID_ARG_TYPE', fds: false });
    // No policy at all: Node's error, not a TypeError from reading a field of undefined.
    expectError(() => (store.prune as () => unknown)(), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "policy" argument must be of type object. Received undefined', fds: false });
    await expectError(async () => (store.pruneAsync as () => Promise<unknown>)(), { code: 'ERR_INVALID_ARG_TYPE', fds: false });
    expect(store.list()).toEqual([digests[0], digests[2]].sort());
    store.closeSync();
  });
});

describe('treeseal du, ls --long, gc policies', () => {
  rootPassOnly('du prints each snapshot and the total; ls --long adds created and on-disk bytes; gc --older-than/--keep-last/--max-size prune', () => {
    const { root, store, digests } = aged();
    store.closeSync();
    const dir = join(root, 'store');
    const du = json(cli(dir, 'du', '--json'));
    expect(du.snapshots.map((s: { digest: string }) => s.digest)).toEqual(digests);
    expect(du.snapshots[0].created).toBe(new Date(du.snapshots[0].createdMs).toISOString());
    const text = cli(dir, 'du');
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines.at(-3)).toMatch(/^3 snapshots, [\d.]+ KiB on disk$/);
    // statCache: false: no stat cache, only the three snapshots' summary records; never materialized: no ledger.
    expect(lines.at(-2)).toMatch(/^besides the snapshots: caches [\d.]+ K?i?B \(3\), clone ledgers [\d.]+ K?i?B \(0\), unfinished builds and downloads [\d.]+ K?i?B \(0\)$/);
    expect(lines.at(-1)).toBe(`store: ${lines.at(-1)!.slice('store: '.length)}`);
    expect(du.storeDiskBytes).toBe(du.diskBytes + du.parts.statCaches.diskBytes + du.parts.cloneLedgers.diskBytes + du.parts.builds.diskBytes);
    const long = cli(dir, 'ls', '--long');
    expect(long.stdout).toMatch(new RegExp(`^${digests[0]!.slice(0, 12)}  \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z .* on disk `, 'm'));
    const gc = cli(dir, 'gc', '--older-than', '20d');
    expect([gc.status, gc.stdout]).toEqual([0, `swept 0 stale items\nremoved ${digests[0]}\n1 snapshot removed, ${gc.stdout.split('\n')[2]!.split('removed, ')[1]}\n`]);
    expect(json(cli(dir, 'gc', '--keep-last', '1', '--max-size', '0', '--json'))).toMatchObject({ removed: [digests[1]], leased: [] });
    for (const [flag, value, message] of [
      ['--older-than', 'a week', 'treeseal: --older-than takes a duration with its unit, such as 90s, 30m, 12h, 7d or 2w, not "a week"'],
      // A bare number was taken as seconds: `gc --older-than 7` removed snapshots a few seconds old.
      ['--older-than', '7', 'treeseal: --older-than takes a duration with its unit, such as 90s, 30m, 12h, 7d or 2w, not "7"'],
      ['--max-size', '5 GB', 'treeseal: --max-size takes a size such as 500M, 50G or 1TiB, not "5 GB"'],
      // A fraction without a unit was floored: 0.5 bytes removed everything.
      ['--max-size', '0.5', 'treeseal: --max-size takes a size such as 500M, 50G or 1TiB, not "0.5"'],
      ['--keep-last', 'all', 'treeseal: --keep-last takes a count, not "all"'],
    ] as const) {
      const bad = cli(dir, 'gc', flag, value);
      expect([bad.status, bad.stderr.split('\n')[0]]).toEqual([2, message]);
    }
    expect(json(cli(dir, 'ls', '--json')).map((s: { digest: string }) => s.digest)).toEqual([digests[2]]);
  });

  it('a snapshot whose manifest was tampered with, or a file under a digest\'s name, is its own row (du, ls --long, usage), not the end of them; a prune never keeps one', async () => {
    const { root, store, digests } = aged();
    // The newest snapshot's total changed by one digit: still JSON, no longer the snapshot.
    const manifest = join(root, 'store/snapshots', digests[2]!, 'manifest.json');
    const text = readFileSync(manifest, 'latin1');
    const tampered = text.replace('"total_bytes":65536', '"total_bytes":95536');
    expect(tampered).not.toBe(text);
    chmodSync(join(root, 'store/snapshots', digests[2]!), 0o700);
    chmodSync(manifest, 0o600);
    writeFileSync(manifest, tampered, 'latin1');
    chmodSync(manifest, 0o400);
    chmodSync(join(root, 'store/snapshots', digests[2]!), 0o500);
    const planted = 'e'.repeat(64);
    writeFileSync(join(root, 'store/snapshots', planted), 'not a snapshot');
    utimesSync(join(root, 'store/snapshots', planted), new Date(Date.now() - 20 * DAY), new Date(Date.now() - 20 * DAY));
    const message = 'snapshot manifest is corrupt: total_bytes 95536 but the entries hold 65536';
    const usage = store.usage();
    expect(usage.map((u) => [u.digest, u.logicalBytes, u.error])).toEqual([
      [digests[0], 64 * 1024, undefined],
      [planted, 0, { code: 'SEAL_CORRUPT', message: `snapshot is not a real directory: ${planted}` }],
      [digests[1], 64 * 1024, undefined],
      [digests[2], 0, { code: 'SEAL_CORRUPT', message }],
    ]);
    expect(usage[3]!.diskBytes).toBeGreaterThanOrEqual(64 * 1024);
    expect(await store.usageAsync()).toEqual(usage);
    store.closeSync();
    const dir = join(root, 'store');
    const du = cli(dir, 'du');
    expect(du.status).toBe(0);
    expect(du.stdout.split('\n')[3]).toMatch(new RegExp(`^${digests[2]!.slice(0, 12)}  \\d{4}-[\\d:.T-]+Z  SEAL_CORRUPT: ${message}  +[\\d.]+ KiB on disk$`));
    const long = cli(dir, 'ls', '--long');
    // ls lists by digest.
    expect(long.status).toBe(0);
    expect(long.stdout.split('\n').find((l) => l.startsWith(digests[2]!.slice(0, 12)))).toBe(`${digests[2]!.slice(0, 12)}  SEAL_CORRUPT: ${message}`);
    // --keep-last 1 alone keeps the newest snapshot that loads, and removes the rest, the damaged ones included.
    expect(json(cli(dir, 'gc', '--keep-last', '1', '--json'))).toMatchObject({ removed: [digests[0], planted, digests[2]], leased: [] });
    expect(json(cli(dir, 'ls', '--json')).map((s: { digest: string }) => s.digest)).toEqual([digests[1]]);
  });
});

describe('rm of a snapshot the kernel will not delete all of', () => {
  it('says it is removed from the store, what is left where and how to free it; later opens still work, and sweep it once it can be', () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.txt': 'alpha', 'src/b.txt': 'bravo' });
    const root = join(work, 'store');
    const first = SnapshotStore.openSync(root);
    const digest = first.captureSync({ source: join(work, 'repo'), copy: ['src'] }).digest;
    first.closeSync();
    // As an immutable file (chattr +i) makes it: its unlink is EPERM, even for root.
    const immutable = wrapSys({
      unlinkat: (orig) => (dirfd, path, flags) => {
        if (String(path) === 'a.txt') throw systemError('EPERM', 'unlinkat');
        orig(dirfd, path, flags);
      },
    });
    const store = SnapshotStore.openSync(root, { sys: immutable });
    const err = expectError(() => store.remove(digest), {
      code: 'SEAL_IO',
      message: new RegExp(
        `^snapshot ${digest} is removed from the store, but not all its files could be deleted: EPERM: injected, unlinkat; what is left is in ${root}/tmp/rm-[0-9a-f]{24} \\(an immutable or append-only file: lsattr -R, then chattr -i or -a as root; the next open or gc deletes it once it can\\)$`,
      ),
    });
    expect((err as { path?: string }).path).toMatch(new RegExp(`^${root}/tmp/rm-[0-9a-f]{24}$`));
    expect(store.list()).toEqual([]);
    store.closeSync();
    // A read-only btrfs subvolume of another user (EROFS where it would be opened up): said as such, not as an immutable file.
    const other = SnapshotStore.openSync(root);
    const second = other.captureSync({ source: join(work, 'repo'), copy: ['src'], revision: 'r2' }).digest;
    other.closeSync();
    const readOnly = wrapSys({
      unlinkat: (orig) => (dirfd, path, flags) => {
        if (String(path) === 'a.txt') throw systemError('EROFS', 'fchmodat');
        orig(dirfd, path, flags);
      },
    });
    const third = SnapshotStore.openSync(root, { sys: readOnly });
    expectError(() => third.remove(second), {
      code: 'SEAL_IO',
      message: new RegExp(
        `^snapshot ${second} is removed from the store, but not all its files could be deleted: EROFS: injected, fchmodat; what is left is in ${root}/tmp/rm-[0-9a-f]{24} \\(a read-only btrfs subvolume of another user: as its owner \`btrfs property set -f PATH ro false\`, or as root \`btrfs subvolume delete PATH\`; the next open or gc deletes it once it can\\)$`,
      ),
    });
    third.closeSync();
    // It once failed every open (the sweep's EPERM): now it stays, unpublished, until it can go.
    const again = SnapshotStore.openSync(root, { sys: immutable });
    expect([again.sweptAtOpen, again.list()]).toEqual([0, []]);
    again.closeSync();
    expect(readdirSync(join(root, 'tmp'))).toHaveLength(1);
    const freed = SnapshotStore.openSync(root);
    expect(freed.sweptAtOpen).toBe(1);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    freed.closeSync();
  });
});
