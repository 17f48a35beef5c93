// deep-tree.test.ts: a snapshot deeper than the main thread's stack could recurse (captured on the worker) is measured, removed and swept by the sync calls too.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { tempDir } from '../helpers.js';

const DEPTH = 4000;

/** source/a/a/…/a/leaf, DEPTH directories deep (past PATH_MAX as one path: made a level at a time). */
function deepSource(): string {
  const source = join(tempDir(), 'src');
  execFileSync('python3', ['-c', `import os\nos.makedirs(${JSON.stringify(source)})\nos.chdir(${JSON.stringify(source)})\nfor _ in range(${DEPTH}):\n    os.mkdir('a'); os.chdir('a')\nopen('leaf', 'w').write('deep')\n`]);
  return source;
}

describe('a snapshot deeper than a recursive walk could go on the main thread', () => {
  it('sync usage, prune and remove handle it, and the store stays usable (remove once failed after unpublishing it, and every later openSync refused the store)', async () => {
    const source = deepSource();
    const root = join(tempDir(), 'store');
    const limits = { maxDepth: DEPTH + 10, maxPathBytes: 2 * DEPTH + 100 };
    const store = await SnapshotStore.open(root);
    const first = await store.capture({ source, copy: ['a'], limits, revision: 'first' });
    const second = await store.capture({ source, copy: ['a'], limits, revision: 'second' });
    const last = await store.capture({ source, copy: ['a/a/a'], limits, revision: 'last' });
    expect(second.entries).toHaveLength(DEPTH + 1);
    const rows = store.usage();
    expect(rows.map((r) => r.digest)).toEqual([first.digest, second.digest, last.digest]);
    expect(rows.every((r) => r.error === undefined && r.diskBytes > 0)).toBe(true);
    expect(store.prune({ keepLast: 2 }).removed).toEqual([first.digest]);
    expect(store.remove(second.digest)).toBe(second.digest);
    expect(store.list()).toEqual([last.digest]);
    expect(readdirSync(join(root, 'tmp'))).toEqual([]);
    await store.close();
    const again = SnapshotStore.openSync(root);
    expect(again.list()).toEqual([last.digest]);
    expect(again.remove(last.digest)).toBe(last.digest);
    again.closeSync();
    // Node's own recursive rmSync (the tests' cleanup) recurses on the stack: the source goes by rm.
    execFileSync('rm', ['-rf', source]);
  });
});
