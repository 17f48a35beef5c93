// in-flight.test.ts: a write already running when a file is first examined (its timestamps set before the fstat) is caught on filesystems without reflink.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, countingPreads, expectError, inFlight, storeLeftovers, tempDir, writeTree } from '../helpers.js';

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
