// document-check.test.ts: a snapshot document that capture would refuse is refused on every load, whoever wrote it, and nothing outside the clone is made from it.
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, tempDir, writeTree } from '../helpers.js';
import { CASES, plant, text, timed, valid, validWithLinks } from './documents.js';

checkNoFdLeaks();

describe('a snapshot document capture would refuse', () => {
  it('the valid template loads (the cases below differ from it by one thing each)', () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const digest = plant(store.root, valid());
    expect(store.get(digest).digest).toBe(digest);
    store.closeSync();
  });

  it('a template with exclude patterns loads: they leave nothing of it out, and a mount keeps its empty directories', () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const d = valid();
    d.exclude = ['*.log', '!keep.log', '.vite-temp/', 'payload'];
    d.mounts[0]!.entries.splice(1, 0, { kind: 'directory', path: 'payload/.vite-temp', size: 0, sha256: '', mode: 0, link_target: '' });
    const digest = plant(store.root, d);
    expect(store.get(digest).exclude).toEqual(['*.log', '!keep.log', '.vite-temp/', 'payload']);
    store.closeSync();
  });

  it("a snapshot in the store whose patterns a capture now refuses (a ** right after a pattern's start and before a /: an older build's) loads and verifies: it is not called damaged, nor removed by gc", () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const d = valid();
    d.exclude = ['**/node_modules/**/test/**', 'src/*-*-*.log', 'src/lib**/x'];
    const digest = plant(store.root, d);
    expect(store.get(digest).exclude).toEqual(['**/node_modules/**/test/**', 'src/*-*-*.log', 'src/lib**/x']);
    expect(store.prune({ keepLast: 1 }).removed).toEqual([]);
    store.closeSync();
  });

  it('copy-root links that are contained load: to a sibling, and into a mount payload', () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const digest = plant(store.root, validWithLinks());
    expect(store.get(digest).entries.filter((e) => e.kind === 'symlink').map((e) => `${e.path} -> ${e.link_target}`)).toEqual(['src/l -> a', 'src/m -> ../node_modules/i.js']);
    store.closeSync();
  });

  it('a template that keeps times loads, each entry of its copy roots with its mtime', () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const digest = plant(store.root, timed());
    expect(store.get(digest).entries.map((e) => [e.path, e.mtime_ns])).toEqual([
      ['src', '1600000000000000000'],
      ['src/a', '1600000000000000001'],
    ]);
    store.closeSync();
  });

  it('an mtime that is a JSON number, not a decimal string, is SEAL_CORRUPT (a malformed entry)', () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const digest = plant(store.root, timed());
    const path = join(store.root, 'snapshots', digest, 'manifest.json');
    const { text: t } = text(timed());
    expect(t).toContain('"mtime_ns":"1600000000000000001"');
    chmodSync(path, 0o600);
    writeFileSync(path, t.replace('"mtime_ns":"1600000000000000001"', '"mtime_ns":1600000000000000001'));
    expectError(() => store.get(digest), { code: 'SEAL_CORRUPT', message: 'snapshot manifest is corrupt: an entry is malformed' });
    store.closeSync();
  });

  it.each(CASES)('is SEAL_CORRUPT on load: %s', (_name, mutate, why) => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    const d = valid();
    mutate(d);
    const digest = plant(store.root, d);
    expectError(() => store.get(digest), { code: 'SEAL_CORRUPT', message: `snapshot manifest is corrupt: ${why}` });
    store.closeSync();
  });

  it('mounts of a planted snapshot create nothing outside the clone, and the listing is refused', async () => {
    const base = tempDir();
    const store = await SnapshotStore.open(join(base, 'store'));
    const d = valid();
    d.mounts[0]!.target = '../outside/newdir/sub/created-file';
    const digest = plant(store.root, d);
    const clone = join(base, 'clone');
    mkdirSync(clone);
    await expectError(async () => (await store.get(digest)).mountPoints(clone), { code: 'SEAL_CORRUPT' });
    expect(existsSync(join(base, 'outside'))).toBe(false);
    expect(readdirSync(clone)).toEqual([]);
    await store.close();
  });
});

describe('capture refuses what a load would', () => {
  const cases: [string, object, string, string][] = [
    ['a mount target on a copy root', { copy: ['src'], mounts: [{ source: 'deps', target: 'src' }] }, 'SEAL_OVERLAP', 'mount target overlaps a copy root: src and src'],
    ['a mount target inside a copy root', { copy: ['src'], mounts: [{ source: 'deps', target: 'src/deps' }] }, 'SEAL_OVERLAP', 'mount target overlaps a copy root: src/deps and src'],
    ["a mount target on materialize's marker", { copy: ['src'], mounts: [{ source: 'deps', target: '.treeseal-materializing' }] }, 'SEAL_COLLISION', "mount target collides with materialize's own names in the clone: .treeseal-materializing"],
    ["a copy root on materialize's stage prefix", { copy: ['.treeseal-materialize-x'] }, 'SEAL_COLLISION', "copy root collides with materialize's own names in the clone: .treeseal-materialize-x"],
  ];
  it.each(cases)('%s, before anything is stored', async (_name, options, code, message) => {
    const base = tempDir();
    writeTree(join(base, 'repo'), { 'src/a': 'a', 'deps/i.js': 'i', '.treeseal-materialize-x/f': 'f' });
    const store = await SnapshotStore.open(join(base, 'store'));
    await expectError(async () => store.capture({ source: join(base, 'repo'), ...options }), { code, message });
    expect(readdirSync(join(base, 'store', 'snapshots'))).toEqual([]);
    expect(readdirSync(join(base, 'store', 'tmp'))).toEqual([]);
    await store.close();
  });
});
