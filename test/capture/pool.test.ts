// pool.test.ts: captures with helper threads give the serial manifest and the serial errors, leaving nothing behind.
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type CaptureCallOptions } from '../../dist/index.js';
import { CLI } from '../cli/run-cli.js';
import { DIST_INDEX, expectError, mkfifo, openFds, reflinkMount, storeLeftovers, tempDir, writeTree } from '../helpers.js';

const bases: [string, string | undefined][] = [
  ['this filesystem', undefined],
  ...(['xfs', 'btrfs'] as const).flatMap((k): [string, string | undefined][] => {
    const m = reflinkMount(k);
    return m === undefined ? [] : [[k, m]];
  }),
];

function bigTree(repo: string): void {
  const tree: Record<string, string | Buffer | null> = { 'tree/empty-dir': null, 'tree/empty': '', 'tree/big.bin': Buffer.alloc(5 << 20, 3) };
  for (let i = 0; i < 400; i++) tree[`tree/d${i % 13}/f${i}`] = Buffer.alloc(i * 37, i % 251);
  writeTree(repo, tree);
}

/** Helper threads have left their loops when capture returns; their teardown (closing their loops' fds) may take a moment on a loaded machine. */
async function settleThreads(fds: number): Promise<void> {
  for (let waited = 0; openFds().length !== fds && waited < 3000; waited += 50) await new Promise((r) => setTimeout(r, 50));
}

describe.each(bases)('helper threads on %s', (_name, base) => {
  it('give exactly the serial manifest and digest', async () => {
    const work = tempDir(base);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    bigTree(repo);
    const fds = openFds().length;
    const digests = [0, 1, 3, undefined].map((parallelism) => {
      const store = SnapshotStore.openSync(join(work, `store-${String(parallelism)}`), { ephemeral: true });
      const snap = store.captureSync({ source: repo, copy: ['tree'], ...(parallelism === undefined ? {} : { parallelism }) });
      const out = [snap.digest, snap.manifestDigest, JSON.stringify(snap.entries), snap.verifySync().entries];
      store.closeSync();
      return out;
    });
    for (const d of digests) expect(d).toEqual(digests[0]);
    await settleThreads(fds);
    expect(openFds().length).toBe(fds);
  });

  it('report a file changed under a helper as SEAL_CHANGED with its path, leaving nothing behind', async () => {
    const work = tempDir(base);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    bigTree(repo);
    // Big enough that reading it spans many of the appender's timeslices, so it is always seen changing.
    writeFileSync(join(repo, 'tree/d5/growing'), Buffer.alloc(48 << 20));
    const fds = openFds().length;
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const appender = new Worker(
      `const { workerData } = require('node:worker_threads'); const fs = require('node:fs');
       while (Atomics.load(workerData.stop, 0) === 0) fs.appendFileSync(workerData.path, 'x');`,
      { eval: true, workerData: { stop, path: join(repo, 'tree/d5/growing') } },
    );
    await new Promise((r) => setTimeout(r, 50));
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    try {
      // On a loaded machine the appender may get no timeslice during one capture: a capture
      // that succeeds must then hold one real version of the file (zeros, then only 'x's).
      let err: unknown;
      for (let attempt = 0; attempt < 5 && err === undefined; attempt++) {
        try {
          const snap = store.captureSync({ source: repo, copy: ['tree'], parallelism: 2 });
          const bytes = readFileSync(join(snap.root, 'copy/tree/d5/growing'));
          const tail = bytes.length - (48 << 20);
          expect(tail >= 0 && bytes.equals(Buffer.concat([Buffer.alloc(48 << 20), Buffer.alloc(tail, 'x')]))).toBe(true);
        } catch (e) {
          err = e;
        }
      }
      expect(err).toBeInstanceOf(SealError);
      expect((err as SealError).code).toBe('SEAL_CHANGED');
      expect(['file changed while snapshotting: tree/d5/growing', 'directory changed while snapshotting: tree/d5']).toContain((err as SealError).message);
      expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);
    } finally {
      Atomics.store(stop, 0, 1);
      await appender.terminate();
    }
    await settleThreads(fds);
    expect(openFds().length).toBe(fds);
    store.closeSync();
  });

  it('walk errors with jobs in flight wait for them, then fail cleanly', async () => {
    const work = tempDir(base);
    const repo = join(work, 'repo');
    mkdirSync(repo);
    bigTree(repo);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const fds = openFds().length;
    await expectError(async () => store.captureSync({ source: repo, copy: ['tree'], parallelism: 2, limits: { maxTotalBytes: 1 << 20 } }), { code: 'SEAL_LIMIT', message: new RegExp(`^capture exceeds the total byte limit \\(${1 << 20} bytes\\): tree/`), unchanged: store.root });
    mkfifo(join(repo, 'tree/d9/zz-pipe'));
    await expectError(async () => store.captureSync({ source: repo, copy: ['tree'], parallelism: 2 }), { code: 'SEAL_SPECIAL_FILE', message: 'capture accepts only regular files and directories: tree/d9/zz-pipe', unchanged: store.root });
    expect(storeLeftovers(store.root)).toEqual([]);
    await settleThreads(fds);
    expect(openFds().length).toBe(fds);
    store.closeSync();
  });
});

describe('parallelism option', () => {
  it('must be an integer from 0 to 64', () => {
    const work = tempDir();
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    for (const [parallelism, range] of [[-1, '>= 0 && <= 64'], [1.5, 'an integer'], [65, '>= 0 && <= 64']] as const) {
      expectError(() => store.captureSync({ source: work, copy: ['x'], parallelism }), {
        code: 'ERR_OUT_OF_RANGE',
        message: `The value of "options.parallelism" is out of range. It must be ${range}. Received ${parallelism}`,
        unchanged: store.root,
      });
    }
    expectError(() => store.captureSync({ source: work, copy: ['x'], parallelism: '2' as never }), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.parallelism" property must be of type number. Received type string (\'2\')',
    });
    store.closeSync();
    appendFileSync(join(work, 'unused'), '');
  });
});

describe('helper threads that cannot start', () => {
  it('are not waited for and end nothing: with no descriptor left (the thread cannot start) or a few (its module cannot load), close returns at once and the process lives on (it waited 5 s for each, and their error events crashed the process)', () => {
    // Every descriptor taken but `spare`, then a pool of two helpers made and closed while they try to start.
    const script = `
      import { openSync, closeSync } from 'node:fs';
      const { FilePool } = await import(${JSON.stringify(DIST_INDEX.replace(/index\.js$/, 'internal.js'))});
      const { sys } = await import(${JSON.stringify(DIST_INDEX.replace(/index\.js$/, 'sys/index.js'))});
      const spare = Number(process.argv[1]);
      const held = [];
      for (;;) { try { held.push(openSync('/dev/null', 'r')); } catch { break; } }
      for (let i = 0; i < spare; i++) closeSync(held.pop());
      const t = performance.now();
      const pool = new FilePool(sys, Buffer.alloc(1 << 16), 2);
      // As a kept pool waits after a call (its helpers up before the call returns), then as a call's own pool closes.
      pool.awaitReady();
      pool.close();
      const ms = performance.now() - t;
      for (const fd of held) closeSync(fd);
      await new Promise((r) => setTimeout(r, 300));
      process.stdout.write(JSON.stringify({ waited: ms > 3000 }));`;
    for (const spare of [0, 2, 4, 6]) {
      const r = spawnSync('bash', ['-c', 'ulimit -n 256 && exec "$@"', 'bash', process.execPath, '--input-type=module', '-e', script, String(spare)], { encoding: 'utf8' });
      expect([spare, r.status, r.stderr, r.stdout]).toEqual([spare, 0, '', '{"waited":false}']);
    }
  });
});

/** A repository of `files` small files in app/, and the digest an unlimited capture of it gives. */
function appRepo(files: number): { work: string; repo: string; want: string } {
  const work = tempDir();
  const repo = join(work, 'repo');
  const tree: Record<string, string> = {};
  for (let i = 0; i < files; i++) tree[`app/f${i}`] = `file ${i}\n`;
  writeTree(repo, tree);
  const unlimited = SnapshotStore.openSync(join(work, 'unlimited'), { ephemeral: true });
  const want = unlimited.captureSync({ source: repo, copy: ['app'] }).digest;
  unlimited.closeSync();
  return { work, repo, want };
}

describe('a low open-files limit', () => {
  it('bounds the jobs in flight, not the call: 300 files of one directory captured and verified under ulimit -n 96, through the async API and the command, with the digest of an unlimited capture (past 64 files in flight it failed EMFILE)', () => {
    const { work, repo, want } = appRepo(300);
    const script = `
      const { SnapshotStore } = await import(${JSON.stringify(DIST_INDEX)});
      const store = await SnapshotStore.open(process.argv[1]);
      const snap = await store.capture({ source: process.argv[2], copy: ['app'] });
      await snap.verify();
      await store.close();
      process.stdout.write(snap.digest);`;
    const limited = (args: string[]): { status: number | null; stdout: string; stderr: string } =>
      spawnSync('bash', ['-c', 'ulimit -n 96 && exec "$@"', 'bash', process.execPath, ...args], { encoding: 'utf8' });
    const lib = limited(['--input-type=module', '-e', script, join(work, 'lib-store'), repo]);
    expect([lib.status, lib.stderr, lib.stdout]).toEqual([0, '', want]);
    const cli = limited([CLI, 'capture', '--store', join(work, 'cli-store'), repo, '--copy', 'app', '--json']);
    expect([cli.status, cli.stderr]).toEqual([0, '']);
    expect((JSON.parse(cli.stdout) as { digest: string }).digest).toBe(want);
    const verified = limited([CLI, 'verify', '--store', join(work, 'cli-store'), want]);
    expect([verified.status, verified.stderr]).toEqual([0, '']);
  });

  it('too few descriptors for helper threads to start (ulimit -n 32 to 48): the call runs without them, and the process lives on (a helper that failed to start crashed it after the call returned, and every call waited 5 s for it)', () => {
    const { work, repo, want } = appRepo(2000);
    // Sync and async calls, then a pause in which a helper's late 'error' event would end the process.
    const script = `
      const { SnapshotStore } = await import(${JSON.stringify(DIST_INDEX)});
      const [dir, source, mode] = process.argv.slice(1);
      const store = SnapshotStore.openSync(dir);
      const snap = mode === 'sync' ? store.captureSync({ source, copy: ['app'] }) : await store.capture({ source, copy: ['app'] });
      const verified = mode === 'sync' ? snap.verifySync() : await snap.verify();
      await new Promise((r) => setTimeout(r, 300));
      store.closeSync();
      process.stdout.write(snap.digest + ' ' + verified.entries);`;
    // (Under 32 the async call's worker thread leaves no descriptor for a file at all: a typed EMFILE, not this test's.)
    for (const [limit, modes] of [[32, ['sync']], [36, ['sync', 'async']], [48, ['sync', 'async']]] as const) {
      for (const mode of modes) {
        const r = spawnSync('bash', ['-c', `ulimit -n ${limit} && exec "$@"`, 'bash', process.execPath, '--input-type=module', '-e', script, join(work, `store-${limit}-${mode}`), repo, mode], { encoding: 'utf8' });
        expect([limit, mode, r.status, r.stderr, r.stdout]).toEqual([limit, mode, 0, '', `${want} 2001`]);
      }
      const cli = spawnSync('bash', ['-c', `ulimit -n ${limit} && exec "$@"`, 'bash', process.execPath, CLI, 'capture', '--store', join(work, `cli-${limit}`), repo, '--copy', 'app', '--json'], { encoding: 'utf8' });
      expect([limit, cli.status, cli.stderr]).toEqual([limit, 0, '']);
      expect((JSON.parse(cli.stdout) as { digest: string }).digest).toBe(want);
    }
  });
});
