// offload.test.ts: the async API from a fresh `node` with flags of its own, and one reused worker thread.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, freeze, readStable, stageFiles, thaw } from '../../dist/index.js';
import { killWorker, reviveError, serializeError } from '../../dist/internal.js';
import { expectError, tempDir, writeTree } from '../helpers.js';

const INDEX = new URL('../../dist/index.js', import.meta.url).href;

describe('async calls', () => {
  it('run from `node --input-type=module -e` (the worker does not inherit execArgv)', () => {
    const root = tempDir();
    writeTree(root, { 'repo/one': '1', 'repo/two': '2', clone: null });
    const script = `
      import { SnapshotStore } from ${JSON.stringify(INDEX)};
      const store = await SnapshotStore.open(${JSON.stringify(join(root, 'store'))}, { ephemeral: true });
      const snap = await store.capture({ source: ${JSON.stringify(join(root, 'repo'))}, copy: ['one', 'two'] });
      const report = await snap.materialize(${JSON.stringify(join(root, 'clone'))});
      await store.close();
      console.log(JSON.stringify({ manifest: snap.manifestDigest, files: report.files }));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '--no-warnings', '-e', script], { encoding: 'utf8', input: '' });
    expect(JSON.parse(out.trim())).toEqual({ manifest: '9ae5789c2ed0b9aac154a385a78feda0255b76213fd2be5f2022e06e48b5e31e', files: 2 });
  });

  it('a sync capture big enough for helper threads runs from `node --input-type=module -e` too', () => {
    const root = tempDir();
    const tree: Record<string, string> = {};
    for (let i = 0; i < 300; i++) tree[`repo/d/f${i}`] = `file ${i}`;
    writeTree(root, tree);
    const script = `
      import { SnapshotStore } from ${JSON.stringify(INDEX)};
      const store = SnapshotStore.openSync(${JSON.stringify(join(root, 'store'))}, { ephemeral: true });
      const snap = store.captureSync({ source: ${JSON.stringify(join(root, 'repo'))}, copy: ['d'] });
      store.closeSync();
      console.log(snap.entries.length);
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '--no-warnings', '-e', script], { encoding: 'utf8', input: '' });
    expect(out.trim()).toBe('301');
  });

  it('reuse one worker thread: many calls in a row and at once give the sync results', async () => {
    const root = tempDir();
    writeTree(root, { 'repo/a/x': 'x', 'repo/b': 'bbb', clone: null });
    const store = await SnapshotStore.open(join(root, 'store'), { ephemeral: true });
    const snaps = await Promise.all([
      store.capture({ source: join(root, 'repo'), copy: ['a'] }),
      store.capture({ source: join(root, 'repo'), copy: ['b'] }),
      readStable(join(root, 'repo/b'), { maxBytes: 10 }),
    ]);
    expect(snaps[2].bytes.toString()).toBe('bbb');
    for (let i = 0; i < 5; i++) await snaps[0].materialize(join(root, 'clone'));
    await freeze(join(root, 'clone'));
    await thaw(join(root, 'clone'));
    await expect(snaps[1].verify()).resolves.toEqual({ entries: 1, bytes: 3 });
    await store.close();
  });

  it('errors cross the thread as the sync call throws them: TypeError/RangeError keep their code', async () => {
    const parent = tempDir();
    // stageFiles checks its prefix on the calling thread, before any job is sent.
    const err = await expectError(async () => stageFiles(parent, [], { prefix: '../x' }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.prefix' must be a plain name. Received '../x'",
      unchanged: parent,
    });
    expect(err).toBeInstanceOf(TypeError);
    await expectError(async () => stageFiles(parent, [], { maxPathBytes: -1 }), { code: 'ERR_OUT_OF_RANGE', unchanged: parent });
    await expectError(async () => stageFiles(parent, [{ target: '../x', bytes: Buffer.from('x') }]), {
      code: 'SEAL_BAD_PATH',
      message: "stage target must not contain '..': ../x",
      unchanged: parent,
    });
  });

  it('an option no thread can be sent (a function, a symbol) is Node\'s TypeError on the calling thread; later calls run and the process exits (a refused send once left its job pending: every call after two hung)', () => {
    const root = tempDir();
    writeTree(root, { 'repo/f': 'f', clone: null });
    const INTERNAL = new URL('../../dist/internal.js', import.meta.url).href;
    const script = `
      import { SnapshotStore } from ${JSON.stringify(INDEX)};
      import { offload, workerCount } from ${JSON.stringify(INTERNAL)};
      const store = await SnapshotStore.open(${JSON.stringify(join(root, 'store'))});
      const snap = await store.capture({ source: ${JSON.stringify(join(root, 'repo'))} });
      const clone = ${JSON.stringify(join(root, 'clone'))};
      const seen = [];
      const bad = [() => 1, Symbol('s')];
      for (const call of ['materialize', 'reset']) {
        for (const reflink of bad) seen.push(await snap[call](clone, { reflink }).then(() => 'ok', (e) => [e.constructor.name, e.code, e.message]));
        for (const fallbackBytes of bad) seen.push(await snap[call](clone, { fallbackBytes }).then(() => 'ok', (e) => [e.constructor.name, e.code]));
      }
      // The pool's own guard, for whatever reaches it: the call is refused, the lane stays free.
      for (let i = 0; i < 3; i++) seen.push(await offload('diff', [() => 1]).then(() => 'ok', (e) => [e.constructor.name, e.code, e.cause?.name]));
      await snap.materialize(clone);
      seen.push((await snap.diff(clone)).ok, workerCount() <= 2);
      await store.close();
      console.log(JSON.stringify(seen));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '--no-warnings', '-e', script], { encoding: 'utf8', input: '', timeout: 30_000 });
    const seen = JSON.parse(out.trim()) as unknown[];
    const reflinkType = (name: string) => ['TypeError', 'ERR_INVALID_ARG_VALUE', `The property 'options.reflink' must be 'auto', 'always' or 'never'. Received ${name}`];
    expect(seen.slice(0, 4)).toEqual([reflinkType('[Function (anonymous)]'), reflinkType('Symbol(s)'), ['TypeError', 'ERR_INVALID_ARG_TYPE'], ['TypeError', 'ERR_INVALID_ARG_TYPE']]);
    expect(seen.slice(4, 8)).toEqual(seen.slice(0, 4));
    expect(seen.slice(8)).toEqual([...Array(3).fill(['TypeError', 'ERR_INVALID_ARG_VALUE', 'DataCloneError']), true, true]);
  });


  it('an onProgress that throws aborts the call, which rejects (or throws, sync) with what it threw; nothing is left and the process goes on (it once died of an uncaught exception, the call never settled)', () => {
    const root = tempDir();
    const tree: Record<string, string | null> = { clone: null };
    for (let i = 0; i < 300; i++) tree[`repo/d/f${i}`] = `file ${i}`;
    writeTree(root, tree);
    const script = `
      import { readdirSync } from 'node:fs';
      import { SnapshotStore } from ${JSON.stringify(INDEX)};
      const storeDir = ${JSON.stringify(join(root, 'store'))};
      const store = await SnapshotStore.open(storeDir);
      const source = ${JSON.stringify(join(root, 'repo'))};
      const clone = ${JSON.stringify(join(root, 'clone'))};
      const boom = (what) => () => { throw new Error(what); };
      const seen = [];
      const settled = (p) => p.then(() => 'settled without an error', (e) => e.message);
      seen.push(await settled(store.capture({ source, statCache: false, onProgress: boom('capture') })));
      try { store.captureSync({ source, statCache: false, onProgress: boom('captureSync') }); seen.push('no error'); } catch (e) { seen.push(e.message); }
      seen.push(readdirSync(storeDir + '/snapshots').length, readdirSync(storeDir + '/tmp').length);
      const snap = await store.capture({ source });
      seen.push(await settled(snap.materialize(clone, { onProgress: boom('materialize') })), readdirSync(clone).length);
      seen.push(await settled(snap.verify({ onProgress: boom('verify') })));
      seen.push((await snap.verify()).entries);
      await store.close();
      console.log(JSON.stringify(seen));
    `;
    const out = execFileSync(process.execPath, ['--input-type=module', '--no-warnings', '-e', script], { encoding: 'utf8', input: '', timeout: 30_000 });
    expect(JSON.parse(out.trim())).toEqual(['capture', 'captureSync', 0, 0, 'materialize', 0, 'verify', 301]);
  });
  it('a SealError crosses the thread with its code, path, cause and retryable flag', () => {
    const cause = Object.assign(new Error("ENOENT: no such file or directory, fstatat 'b'"), { code: 'ENOENT', errno: -2, syscall: 'fstatat' });
    for (const [code, retryable] of [['SEAL_UNAVAILABLE', true], ['SEAL_UNAVAILABLE', false], ['SEAL_CHANGED', true]] as const) {
      const back = reviveError(serializeError(new SealError(code, 'path is unavailable: b', { path: 'b', cause, retryable })));
      expect(back).toBeInstanceOf(SealError);
      expect([(back as SealError).code, (back as SealError).path, (back as SealError).retryable, back.message]).toEqual([code, 'b', retryable, 'path is unavailable: b']);
      expect(back.cause).toMatchObject({ code: 'ENOENT', errno: -2, syscall: 'fstatat' });
    }
  });

  it('a worker that dies mid-job rejects the pending call with a SealError, and the next call starts a new one', async () => {
    const root = tempDir();
    const tree: Record<string, string> = {};
    for (let i = 0; i < 3000; i++) tree[`repo/d${i % 30}/f${i}`] = `file ${i}`;
    writeTree(root, { ...tree, clone: null });
    const store = await SnapshotStore.open(join(root, 'store'), { ephemeral: true });
    const source = join(root, 'repo');
    let killed: Promise<void> | undefined;
    // Killed at its first progress report: the capture is under way on the worker.
    await expectError(
      async () =>
        store.capture({
          source,
          copy: ['d0', 'd1', 'd2', 'd3', 'd4', 'd5', 'd6', 'd7', 'd8', 'd9'],
          parallelism: 0,
          onProgress: () => {
            killed ??= killWorker();
          },
        }),
      // A thread killed mid-job never closes what it held open: no fd count here.
      { code: 'SEAL_UNAVAILABLE', message: 'treeseal worker thread stopped: exit code 1', fds: false },
    );
    expect(killed).toBeDefined();
    await killed;
    const snap = await store.capture({ source, copy: ['d0'] });
    expect(snap.entries.length).toBe(101);
    await expect(snap.materialize(join(root, 'clone'))).resolves.toMatchObject({ files: 100 });
    await store.close();
  });
});
