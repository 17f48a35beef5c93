// parallel-arms.test.ts: concurrent async calls on one store run on worker threads of their own, up to the store's `concurrency`; the rest wait their turn.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { stopIdleWorker, workerCount } from '../../dist/internal.js';
import { expectError, tempDir, writeTree } from '../helpers.js';

afterEach(async () => {
  await stopIdleWorker();
});

function repo(): { root: string; source: string } {
  const root = tempDir();
  const tree: Record<string, string | null> = { 'arm-0': null, 'arm-1': null, 'arm-2': null, 'arm-3': null };
  for (let i = 0; i < 200; i++) tree[`repo/src/d${i % 10}/f${i}.txt`] = `file ${i}\n`;
  writeTree(root, tree);
  return { root, source: join(root, 'repo') };
}

describe('arms in parallel', () => {
  it('four materializes at once each get a worker thread of their own, and every arm is the snapshot', async () => {
    const { root, source } = repo();
    const store = await SnapshotStore.open(join(root, 'store'), { concurrency: 4 });
    expect(store.concurrency).toBe(4);
    const snap = await store.capture({ source, copy: ['src'] });
    await stopIdleWorker();
    expect(workerCount()).toBe(0);
    const arms = [0, 1, 2, 3].map((i) => join(root, `arm-${i}`));
    const running = arms.map((arm) => snap.materialize(arm));
    // All four were sent at once: none waits behind another.
    expect(workerCount()).toBe(4);
    const reports = await Promise.all(running);
    expect(reports.map((r) => r.files)).toEqual([200, 200, 200, 200]);
    for (const arm of arms) {
      expect(await snap.checkClone(arm)).toMatchObject({ ok: true, added: [], removed: [], changed: [] });
      expect(readFileSync(join(arm, 'src/d7/f17.txt'), 'utf8')).toBe('file 17\n');
    }
    await store.close();
  });

  it('a store with concurrency 1 runs its calls one after another, in the order they were made, on one thread', async () => {
    const { root, source } = repo();
    const store = await SnapshotStore.open(join(root, 'store'), { concurrency: 1 });
    const snap = await store.capture({ source, copy: ['src'] });
    await stopIdleWorker();
    const order: number[] = [];
    const running = [0, 1, 2, 3].map((i) => snap.materialize(join(root, `arm-${i}`)).then(() => order.push(i)));
    expect(workerCount()).toBe(1);
    await Promise.all(running);
    expect(order).toEqual([0, 1, 2, 3]);
    await store.close();
  });

  it('stores share the pool: two stores of concurrency 2 run four calls at once', async () => {
    const { root, source } = repo();
    const a = await SnapshotStore.open(join(root, 'store-a'), { concurrency: 2 });
    const b = await SnapshotStore.open(join(root, 'store-b'), { concurrency: 2 });
    const [sa, sb] = await Promise.all([a.capture({ source, copy: ['src'] }), b.capture({ source, copy: ['src'] })]);
    expect(sa.digest).toBe(sb.digest);
    await stopIdleWorker();
    const running = [sa.verify(), sa.verify(), sb.verify(), sb.verify()];
    expect(workerCount()).toBe(4);
    expect(await Promise.all(running)).toEqual(Array(4).fill({ entries: 211, bytes: sa.totalBytes }));
    await a.close();
    await b.close();
  });

  it('concurrency must be an integer from 1 to 64', async () => {
    const root = tempDir();
    for (const bad of [0, 65, 1.5]) {
      await expectError(async () => SnapshotStore.open(join(root, 'store'), { concurrency: bad }), {
        code: 'ERR_OUT_OF_RANGE',
        message: new RegExp(`^The value of "options\\.concurrency" is out of range\\. It must be .*\\. Received ${String(bad).replace('.', '\\.')}$`),
      });
    }
    await expectError(async () => SnapshotStore.open(join(root, 'store'), { concurrency: '2' as unknown as number }), { code: 'ERR_INVALID_ARG_TYPE' });
    expect(() => SnapshotStore.openSync(join(root, 'store'), { concurrency: 0 })).toThrow(RangeError);
  });
});
