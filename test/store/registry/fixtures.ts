// fixtures.ts: source trees for the registry tests, and a byte-exact comparison of two published snapshots.
import { chmodSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

import { SnapshotStore, type Snapshot } from '../../../dist/index.js';
import { tempDir, writeTree } from '../../helpers.js';

/** Random bytes seeded by nothing: every run's contents are new to the registry. */
export function noise(n: number): Buffer {
  return randomBytes(n);
}

/**
 * A source with copy root `src` (nested dirs, an empty dir, an empty file, a file over
 * the 1 MiB threshold twice under two names, many small files) and mount `deps`
 * (an executable, a relative symlink, an empty dir).
 */
export function writeSource(root: string, smallFiles = 40): void {
  const tree: Record<string, string | Buffer | null> = {
    'src/a.txt': 'alpha\n',
    'src/empty.txt': '',
    'src/emptydir': null,
    'src/lib/deep/b.ts': 'export const b = 2;\n',
    'src/index/graph.bin': noise(1536 * 1024),
    'src/index/graph-copy.bin': null,
    'src/dup1.txt': 'same bytes\n',
    'src/lib/dup2.txt': 'same bytes\n',
    'deps/pkg/index.js': 'module.exports = 1;\n',
    'deps/pkg/bin/run': '#!/bin/sh\necho run\n',
    'deps/.vite-temp': null,
    'deps/pkg/empty': '',
  };
  delete tree['src/index/graph-copy.bin'];
  for (let i = 0; i < smallFiles; i++) tree[`src/many/f${String(i).padStart(3, '0')}.ts`] = noise(100 + i * 37);
  writeTree(root, tree);
  writeTree(root, { 'src/index/graph-copy.bin': readFileSync(join(root, 'src/index/graph.bin')) });
  chmodSync(join(root, 'deps/pkg/bin/run'), 0o755);
  symlinkSync('bin/run', join(root, 'deps/pkg/run-link'));
  mkdirSync(join(root, 'deps/pkg/emptydir'));
}

export const CAPTURE = { copy: ['src'], mounts: [{ source: 'deps', target: 'node_modules' }], revision: 'r'.repeat(40) };

/** A fresh work dir whose store `a` holds one capture of a small writeSource tree. */
export async function captured(): Promise<{ work: string; store: SnapshotStore; snap: Snapshot }> {
  const work = tempDir();
  const source = join(work, 'source');
  writeSource(source, 5);
  const store = await SnapshotStore.open(join(work, 'a'));
  const snap = await store.capture({ source, ...CAPTURE });
  return { work, store, snap };
}

/** Every path below dir with its type, permission bits and bytes or link target. */
export function describeTree(dir: string, rel = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(dir, rel)).sort()) {
    const path = rel === '' ? name : `${rel}/${name}`;
    const st = lstatSync(join(dir, path));
    const perm = (st.mode & 0o7777).toString(8);
    if (st.isSymbolicLink()) out.push(`l ${path} -> ${readlinkSync(join(dir, path))}`);
    else if (st.isDirectory()) {
      out.push(`d ${perm} ${path}`);
      out.push(...describeTree(dir, path));
    } else out.push(`f ${perm} ${path} ${readFileSync(join(dir, path)).toString('base64')}`);
  }
  return out;
}
