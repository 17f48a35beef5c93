// fixtures.js: the trees, stores and clones the faulted operations run on, made with the real syscall layer.
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, utimesSync } from 'node:fs';
import { join } from 'node:path';

import { SnapshotStore } from '../../dist/index.js';
import { STAT_CLOCK_AHEAD } from '../../dist/internal.js';
import { writeTree } from './tree.js';

/** Two chunks (1 MiB each) and a bit: the copy loops run more than once. */
const BLOB = Buffer.alloc(1024 * 1024 + 3000, 7);

export const SOURCE_TREE = {
  'src/a/b/c.txt': 'c',
  'src/a/empty': null,
  'src/tool.sh': { mode: 0o755, data: '#!/bin/sh\n' },
  'src/z.txt': 'z',
  'data/blob.bin': BLOB,
  'data/other.txt': 'not copied',
  'node_modules/pkg/index.js': 'module.exports = 1;\n',
  'node_modules/pkg/package.json': '{}\n',
  'node_modules/.bin/tool': { link: '../pkg/index.js' },
  'cfg/settings.json': '{"a":1}\n',
};

export const COPY_ROOTS = ['src', 'data/blob.bin'];

export function captureOptions(source) {
  return {
    source,
    copy: COPY_ROOTS,
    mounts: [
      { source: 'node_modules', target: 'node_modules' },
      { source: 'cfg/settings.json', target: 'etc/settings.json' },
    ],
    revision: 'a'.repeat(40),
    parallelism: 0,
  };
}

/** captureOptions without the blob: a store holding it knows every file of captureOptions' but one. */
export function partialOptions(source) {
  return { ...captureOptions(source), copy: ['src'] };
}

export function otherOptions(source) {
  return { source, copy: ['src/z.txt'], parallelism: 0 };
}

/** What a clone holds before materialize: an old `src` to be exchanged, no `data`, a file left alone. */
export const CLONE_TREE = {
  'src/old.txt': 'old',
  'src/a': 'a file where the snapshot has a directory',
  'keep.txt': 'keep',
  // Two chains deeper than the levels the look before the swap keeps open and the removal holds (128): the look opens
  // a closed level again to reach the second, and the removal moves their deep directories up.
  [`src/deep/${'a/'.repeat(140)}f`]: 'deep',
  [`src/deep/${'b/'.repeat(140)}f`]: 'deep',
};

/**
 * Store options whose stat cache records as if its racy window (2 s) had passed (the internal
 * STAT_CLOCK_AHEAD option), so every run takes the same path through it without a sleep.
 */
export const SETTLED = { [STAT_CLOCK_AHEAD]: 3_000_000_000n };

export function makeSource(base) {
  const source = mkdtempSync(join(base, 'source-'));
  writeTree(source, SOURCE_TREE);
  return source;
}

/** A store with the given definitions captured by the real layer; returns its root and their digests. */
export function makeStore(base, definitions) {
  const root = mkdtempSync(join(base, 'store-'));
  const store = SnapshotStore.openSync(root, SETTLED);
  try {
    const digests = definitions.map((d) => store.captureSync(d).digest);
    // Each one created a second apart, in order: two captured within one clock tick (a
    // snapshot's creation is its directory's mtime, which the kernel keeps to a tick) would
    // be ordered by digest, and a prune keeping the newest might keep the first one.
    const now = Date.now() / 1000;
    digests.forEach((digest, i) => utimesSync(join(root, 'snapshots', digest), now - (digests.length - i), now - (digests.length - i)));
    return { root, digests };
  } finally {
    store.closeSync();
  }
}

/** A build no process holds, and a half-removed snapshot, left in tmp/ as a crash would leave them. */
export function plantStale(storeRoot) {
  const tmp = join(storeRoot, 'tmp');
  for (const name of [`build-${'0'.repeat(32)}`, `rm-${'1'.repeat(24)}`]) {
    writeTree(join(tmp, name), { 'copy/d/f.txt': 'stale', 'copy/e': null });
    chmodSync(join(tmp, name, 'copy/d/f.txt'), 0o400);
    for (const dir of ['copy/d', 'copy/e', 'copy', '.']) chmodSync(join(tmp, name, dir), 0o500);
  }
}

/** A fresh directory below base holding one empty directory `name`; returns both paths. */
export function freshDir(base, name, tree = {}) {
  const parent = mkdtempSync(join(base, 'dir-'));
  const dir = join(parent, name);
  mkdirSync(dir);
  writeTree(dir, tree);
  return { parent, dir };
}

export function names(dir) {
  return readdirSync(dir).sort();
}
