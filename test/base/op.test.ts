// op.test.ts: defineOp: where each call runs (worker or calling thread), the one test for an injected layer, and the async twins of get, list, remove, gc and mountPoints.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, freeze, freezeSync, readStable, thaw } from '../../dist/index.js';
import { sys as nativeSys } from '../../dist/sys/index.js';
import { defineOp, isInjected, stopIdleWorker, workerThreadId } from '../../dist/internal.js';
import { expectError, failOnce, tempDir, wrapSys, writeTree } from '../helpers.js';

afterEach(async () => {
  await stopIdleWorker();
});

describe('defineOp', () => {
  it('one test for an injected layer: the addon\'s own layer is not injected, a copy of it is', () => {
    expect(isInjected(nativeSys)).toBe(false);
    expect(isInjected({ ...nativeSys })).toBe(true);
    expect(isInjected(wrapSys({}))).toBe(true);
  });

  it('passing the addon\'s own layer as `sys` still runs the async twin on the worker thread (freeze, thaw, readStable)', async () => {
    const root = tempDir();
    writeTree(root, { 'tree/a': 'a' });
    await stopIdleWorker();
    await freeze(join(root, 'tree'), { sys: nativeSys });
    expect(workerThreadId()).toBeTypeOf('number');
    await stopIdleWorker();
    await thaw(join(root, 'tree'), { sys: nativeSys });
    expect(workerThreadId()).toBeTypeOf('number');
    await stopIdleWorker();
    expect((await readStable(join(root, 'tree/a'), { maxBytes: 10, sys: nativeSys })).bytes.toString()).toBe('a');
    expect(workerThreadId()).toBeTypeOf('number');
  });

  it('an injected layer runs the core on the calling thread, after the current microtask, and starts no worker', async () => {
    const root = tempDir();
    writeTree(root, { 'tree/a': 'a' });
    const calls: string[] = [];
    const sys = wrapSys({
      fchmod: (orig) => (...args) => {
        calls.push('fchmod');
        return orig(...args);
      },
    });
    await stopIdleWorker();
    const pending = freeze(join(root, 'tree'), { sys });
    // Nothing ran yet: the core starts after the current microtask.
    expect(calls).toEqual([]);
    await pending;
    expect(calls.length).toBeGreaterThan(0);
    expect(workerThreadId()).toBeUndefined();
  });

  it('argument errors are thrown by the sync call and rejected by the async twin, checked on the calling thread without starting the worker', async () => {
    await stopIdleWorker();
    expectError(() => freezeSync(42 as unknown as string), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "dir" argument must be of type string. Received type number (42)',
    });
    const err = await expectError(async () => freeze(42 as unknown as string), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "dir" argument must be of type string. Received type number (42)',
    });
    expect(err).toBeInstanceOf(TypeError);
    expect(workerThreadId()).toBeUndefined();
  });

  it('a name is defined once: a second operation of the same name is refused', () => {
    expect(() => defineOp('freeze', { validate: () => ({ sys: nativeSys, args: [] }), core: () => undefined })).toThrow('operation defined twice: freeze');
  });

  it('a system error of the core becomes the same SealError on either thread, labelled with the operation', async () => {
    const root = tempDir();
    writeTree(root, { 'tree/a': 'a' });
    const { sys } = failOnce('fchmod', 'EIO');
    const inline = await expectError(async () => freeze(join(root, 'tree'), { sys }), { code: 'SEAL_IO' });
    expect(inline.message).toMatch(/^freeze of \.: EIO: injected, fchmod/);
    const missing = await expectError(async () => freeze(join(root, 'nope')), { code: 'SEAL_UNAVAILABLE' });
    expect(missing).toBeInstanceOf(SealError);
    // The worker's cause has the sync call's own keys, in its order (it once had a `name` of its own).
    const sync = expectError(() => freezeSync(join(root, 'nope')), { code: 'SEAL_UNAVAILABLE' });
    expect(Object.keys(missing.cause as object)).toEqual(Object.keys(sync.cause as object));
    expect(Object.keys(missing.cause as object)).toEqual(['errno', 'code', 'syscall', 'path']);
  });
});

describe('async twins of the calls that were sync', () => {
  async function published(): Promise<{ root: string; store: SnapshotStore; digests: string[] }> {
    const root = tempDir();
    writeTree(root, { 'repo/a': 'a', 'repo/b': 'b', 'repo/dep/x': 'x', clone: null });
    const store = await SnapshotStore.open(join(root, 'store'));
    const one = await store.capture({ source: join(root, 'repo'), copy: ['a'] });
    const two = await store.capture({ source: join(root, 'repo'), copy: ['b'], mounts: [{ source: 'dep', target: 'node_modules' }] });
    return { root, store, digests: [one.digest, two.digest].sort() };
  }

  it('listAsync and getAsync give what list and get give, run on the worker', async () => {
    const { store, digests } = await published();
    await stopIdleWorker();
    expect(await store.listAsync()).toEqual(digests);
    expect(workerThreadId()).toBeTypeOf('number');
    expect(store.list()).toEqual(digests);
    const got = await store.getAsync(digests[1]!.slice(0, 12));
    const sync = store.get(digests[1]!);
    expect(got.digest).toBe(digests[1]);
    expect(got.entries).toEqual(sync.entries);
    expect(got.mounts).toEqual(sync.mounts);
    expect(JSON.stringify(got)).toBe(JSON.stringify(sync));
    await store.close();
  });

  it('getAsync and removeAsync refuse what get and remove refuse, with the same errors', async () => {
    const { store, digests } = await published();
    for (const call of ['getAsync', 'removeAsync'] as const) {
      await expectError(async () => store[call]('XYZ'), {
        code: 'ERR_INVALID_ARG_VALUE',
        message: "The argument 'digest' must be a snapshot digest or a prefix of one (1 to 64 lower-case hex digits). Received 'XYZ'",
      });
      await expectError(async () => store[call]('f'.repeat(64)), { code: 'SEAL_UNAVAILABLE', message: `no such snapshot: ${'f'.repeat(64)}` });
      // Both digests start with some hex digit: the empty-ish prefix of one digit may match both.
      const shared = digests[0]![0] === digests[1]![0] ? digests[0]![0]! : undefined;
      if (shared !== undefined) await expectError(async () => store[call](shared), { code: 'SEAL_AMBIGUOUS' });
    }
    await store.close();
    await expectError(async () => store.listAsync(), { code: 'SEAL_CLOSED' });
    await expectError(async () => store.removeAsync(digests[0]!), { code: 'SEAL_CLOSED' });
    await expectError(async () => store.gcAsync(), { code: 'SEAL_CLOSED' });
  });

  it('removeAsync unpublishes and deletes the whole snapshot tree on the worker and returns the full digest', async () => {
    const { root, store, digests } = await published();
    await stopIdleWorker();
    expect(await store.removeAsync(digests[0]!.slice(0, 10))).toBe(digests[0]);
    expect(workerThreadId()).toBeTypeOf('number');
    expect(store.list()).toEqual([digests[1]]);
    expect(readdirSync(join(root, 'store/snapshots'))).toEqual([digests[1]]);
    expect(readdirSync(join(root, 'store/tmp'))).toEqual([]);
    await store.close();
  });

  it('gcAsync sweeps what gc sweeps: a stale build, and a dead materialize stage inside a clone', async () => {
    const { root, store } = await published();
    // A build no process holds: what a SIGKILLed capture leaves.
    writeTree(root, { 'store/tmp/build-0123456789abcdef/x': 'x', 'clone/.treeseal-materialize-0123456789abcdef0123456789abcdef/y': 'y' });
    expect(await store.gcAsync({ clone: join(root, 'clone') })).toBe(2);
    expect(readdirSync(join(root, 'store/tmp'))).toEqual([]);
    expect(readdirSync(join(root, 'clone'))).toEqual([]);
    expect(await store.gcAsync()).toBe(0);
    await expectError(async () => store.gcAsync({ clone: 7 as unknown as string }), { code: 'ERR_INVALID_ARG_TYPE' });
    await store.close();
  });

  it('mountPointsAsync makes the same mount points as mountPoints and refuses the same clone', async () => {
    const { root, store, digests } = await published();
    const snap = store.get(digests.find((d) => store.get(d).mounts.length > 0)!);
    const points = await snap.mountPointsAsync(join(root, 'clone'), { workspace: '/workspace' });
    expect(points).toEqual([{ source: `${snap.root}/mounts/00000/payload`, target: '/workspace/node_modules', readOnly: true, tmpfs: ['/workspace/node_modules/.vite-temp'] }]);
    expect(existsSync(join(root, 'clone/node_modules'))).toBe(true);
    expect(snap.mountPoints(join(root, 'clone'), { workspace: '/workspace' })).toEqual(points);
    await expectError(async () => snap.mountPointsAsync(join(root, 'store')), { code: 'SEAL_OVERLAP' });
    await expectError(async () => snap.mountPointsAsync(5 as unknown as string), { code: 'ERR_INVALID_ARG_TYPE' });
    await store.close();
  });
});
