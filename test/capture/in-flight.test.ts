// in-flight.test.ts: a write already running when a file is first examined (its timestamps set before the fstat) is caught on filesystems without reflink.
import { spawnSync } from 'node:child_process';
import { statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, readStableSync } from '../../dist/index.js';
import type { Stat, Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, countingPreads, expectError, inFlight, storeLeftovers, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

describe('a write in flight at the first fstat', () => {
  it('is SEAL_CHANGED once it is over (the source no longer hashes to what was copied), nothing left behind', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': Buffer.alloc(256 * 1024, 0x41) });
    const path = join(root, 'repo/tree/f');
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys: inFlight(path, Buffer.alloc(256 * 1024, 0x42)) });
    expectError(() => store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false }), {
      code: 'SEAL_CHANGED',
      message: 'file changed while snapshotting: tree/f',
      path: 'tree/f',
    });
    expect(storeLeftovers(join(root, 'store'))).toEqual([]);
    store.closeSync();
  });

  it('a file last changed outside the window is captured with no second look', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'settled' });
    const start = Date.now();
    while (Date.now() - start < 400) {
      // let the file age past the in-flight window
    }
    const counting = countingPreads();
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys: counting.sys });
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false });
    expect(snap.entries.map((e) => [e.path, e.size])).toEqual([['tree', 0], ['tree/f', 7]]);
    expect(counting.preads()).toBe(1);
    store.closeSync();
  });
});

/** Lets the file's ctime settle past the in-flight window (a utimensat set it to now). */
function settle(): void {
  const start = Date.now();
  while (Date.now() - start < 400) {
    // spin: the tests below are synchronous
  }
}

/** The real layer, but path's ctime as a clock 90 s ahead would show it (a network filesystem's server, a clock stepped back since), with preads counted. */
function ctimeAhead(path: string): { sys: Sys; preads: () => number } {
  const ino = BigInt(statSync(path).ino);
  const ctimeNs = BigInt(Date.now() + 90_000) * 1_000_000n;
  const ahead = (st: Stat): Stat => (st.ino === ino ? { ...st, ctimeNs } : st);
  let n = 0;
  const sys = wrapSys({
    fstat: (orig) => (fd) => ahead(orig(fd)),
    fstatat: (orig) => (dirfd, name, flags) => ahead(orig(dirfd, name, flags)),
    pread: (orig) => (...args) => {
      n++;
      return orig(...args);
    },
  });
  return { sys, preads: () => n };
}

/** Runs an ES module script in a fresh node (importing the built package as `t`), killed after 30 s: a wait until the year 2100 fails here instead of hanging the suite. */
function freshNode(script: string): { status: number | null; signal: string | null; stdout: string; stderr: string } {
  const dist = pathToFileURL(join(fileURLToPath(new URL('../..', import.meta.url)), 'dist/index.js')).href;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `import * as t from ${JSON.stringify(dist)};\n${script}`], { encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
}

describe('times after now (a tarball from a clock that ran ahead, touch -d 2100, a skewed server)', () => {
  it('a file dated 2100 is captured (sync and async) and read stably at once, in a fresh node (they waited until 2100)', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'from the future', 'repo/tree/g': 'settled' });
    utimesSync(join(root, 'repo/tree/f'), 4102444800, 4102444800); // 2100-01-01
    const r = freshNode(`
      const [repo, stores] = ${JSON.stringify([join(root, 'repo'), root])};
      const sync = t.SnapshotStore.openSync(stores + '/sync', { ephemeral: true });
      const a = sync.captureSync({ source: repo, copy: ['tree'], parallelism: 0 });
      sync.closeSync();
      const store = await t.SnapshotStore.open(stores + '/async', { ephemeral: true });
      const b = await store.capture({ source: repo, copy: ['tree'] });
      await store.close();
      const read = await t.readStable(repo + '/tree/f', { maxBytes: 100 });
      console.log(JSON.stringify([a.digest === b.digest, a.entries.map((e) => [e.path, e.size]), read.bytes.toString(), t.readStableSync(repo + '/tree/f', { maxBytes: 100 }).bytes.toString()]));
    `);
    expect([r.status, r.signal, r.stderr]).toEqual([0, null, '']);
    expect(JSON.parse(r.stdout)).toEqual([true, [['tree', 0], ['tree/f', 15], ['tree/g', 7]], 'from the future', 'from the future']);
  });

  it('an mtime ahead of the clock, set by hand, says nothing of a write: one read of the file, as for any settled file', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'ahead', 'repo/tree/g': 'settled' });
    // 90 s ahead: waiting until then (as before) fails this test by its timeout instead of hanging the suite.
    utimesSync(join(root, 'repo/tree/f'), Date.now() / 1000 + 90, Date.now() / 1000 + 90);
    settle();
    const counting = countingPreads();
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys: counting.sys });
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false });
    expect(snap.entries.map((e) => [e.path, e.size])).toEqual([['tree', 0], ['tree/f', 5], ['tree/g', 7]]);
    expect(counting.preads()).toBe(2);
    store.closeSync();
    const read = countingPreads();
    expect(readStableSync(join(root, 'repo/tree/f'), { maxBytes: 100, sys: read.sys }).bytes.toString()).toBe('ahead');
    // One pass: the bytes, then end of file.
    expect(read.preads()).toBe(2);
  });

  it('a ctime ahead of the clock (a skewed server, a clock stepped back) counts as now: proven again after one window, not when that time comes', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'skewed', 'repo/tree/g': 'settled' });
    const path = join(root, 'repo/tree/f');
    settle();
    const skewed = ctimeAhead(path);
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys: skewed.sys });
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false });
    expect(snap.entries.map((e) => [e.path, e.size])).toEqual([['tree', 0], ['tree/f', 6], ['tree/g', 7]]);
    // f: copied, then (once the window is over) the source and the copy read again; g: once.
    expect(skewed.preads()).toBe(4);
    store.closeSync();
    const read = ctimeAhead(path);
    expect(readStableSync(path, { maxBytes: 100, sys: read.sys }).bytes.toString()).toBe('skewed');
    expect(read.preads()).toBe(4);
  });
});

describe('the store\'s own self-proving files are read once, however fresh', () => {
  it('a manifest.json published a moment ago loads with one read (its digest proves it; no wait, no second read)', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'f' });
    const store = SnapshotStore.openSync(join(root, 'store'));
    const digest = store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0 }).digest;
    const counting = countingPreads();
    const again = SnapshotStore.openSync(join(root, 'store'), { sys: counting.sys });
    expect(again.get(digest).entries.map((e) => e.path)).toEqual(['tree', 'tree/f']);
    // One pass: the bytes, then end of file. A second pass after the in-flight wait would double it.
    expect(counting.preads()).toBe(2);
    again.closeSync();
    store.closeSync();
  });

  it('a stat cache written a moment ago is loaded with one read (its trailer checksum proves it)', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'f' });
    const start = Date.now();
    while (Date.now() - start < 400) {
      // the source file ages past the in-flight window: only the cache is fresh
    }
    const store = SnapshotStore.openSync(join(root, 'store'));
    store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0 });
    const counting = countingPreads();
    const again = SnapshotStore.openSync(join(root, 'store'), { sys: counting.sys });
    const snap = again.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0 });
    expect(snap.captureReport).toMatchObject({ files: 1, reused: true });
    // The cache: its bytes, then end of file; the source file (racy against the cache's record time): one hash read.
    expect(counting.preads()).toBeLessThanOrEqual(3);
    again.closeSync();
    store.closeSync();
  });

  it('verify right after the capture reads each stored file once (it proves them against the manifest; no wait for writes in flight)', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'f'.repeat(1000) });
    const start = Date.now();
    while (Date.now() - start < 400) {
      // the source ages past the in-flight window, so the capture copies at once and its copy is fresh
    }
    const store = SnapshotStore.openSync(join(root, 'store'));
    const digest = store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false }).digest;
    const snap = store.get(digest);
    const counting = countingPreads();
    const again = SnapshotStore.openSync(join(root, 'store'), { sys: counting.sys });
    const loaded = again.get(digest);
    const afterLoad = counting.preads();
    expect(loaded.verifySync({ parallelism: 0 })).toEqual({ entries: 2, bytes: 1000 });
    expect(counting.preads() - afterLoad).toBe(1);
    expect(snap.digest).toBe(digest);
    again.closeSync();
    store.closeSync();
  });
});
