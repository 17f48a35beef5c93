// refusal.test.ts: a call the kernel refuses (EIO, ENOSPC, EMFILE) is SEAL_IO with that system error as cause, and leaves nothing behind.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, readStableSync, stageFilesSync, writeFrozenFileSync } from '../../dist/index.js';
import { LOCK_EX, LOCK_NB, O_CREAT, O_TMPFILE, RENAME_NOREPLACE, sys as nativeSys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, failOnce, storeLeftovers, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

function expectIo(err: Error, injected: Error | undefined, message: string): void {
  expect(injected).toBeDefined();
  expect([err.message, err.cause]).toEqual([message, injected]);
}

function storeWithSnapshot(): { root: string; source: string; digest: string } {
  const source = tempDir();
  writeTree(source, { 'src/a.txt': 'a', 'src/d/b.txt': 'b', 'm/x.js': 'x' });
  const root = join(tempDir(), 'store');
  const store = SnapshotStore.openSync(root);
  const digest = store.captureSync({ source, copy: ['src'], mounts: [{ source: 'm', target: 'm' }] }).digest;
  store.closeSync();
  return { root, source, digest };
}

describe('kernel refusals', () => {
  it('capture: an I/O error on a source entry is SEAL_IO, not SEAL_UNAVAILABLE, and the build is removed', () => {
    const source = tempDir();
    writeTree(source, { 'src/a.txt': 'a' });
    const fault = failOnce('fstatat', 'EIO', (_fd, name) => name === 'a.txt');
    const store = SnapshotStore.openSync(join(tempDir(), 'store'), { sys: fault.sys });
    expectIo(expectError(() => store.captureSync({ source, copy: ['src'] }), { code: 'SEAL_IO' }), fault.injected(), 'path cannot be read: src/a.txt: EIO: injected, fstatat');
    expect(storeLeftovers(store.root)).toEqual([]);
  });

  it('a name past 255 bytes (ENAMETOOLONG) is SEAL_LIMIT, as README says, whose cause is the system error; nothing is made', () => {
    const dir = tempDir();
    writeTree(dir, { 'repo/src/f': 'f', stage: null });
    const long = 'n'.repeat(256);
    const calls: [string, () => unknown, string][] = [
      ['open', () => SnapshotStore.openSync(join(dir, long)), `store directory cannot be opened: ${join(dir, long)}`],
      ['capture source', () => SnapshotStore.openSync(join(dir, 's1'), { ephemeral: true }).captureSync({ source: join(dir, long) }), `source cannot be opened: ${join(dir, long)}`],
      ['copy root', () => SnapshotStore.openSync(join(dir, 's2'), { ephemeral: true }).captureSync({ source: join(dir, 'repo'), copy: [long] }), `path cannot be read: ${long}`],
      ['readStable', () => readStableSync(join(dir, long), { maxBytes: 10 }), `file cannot be read: ${join(dir, long)}`],
      ['writeFrozenFile', () => writeFrozenFileSync(join(dir, long), Buffer.from('x')), `cannot create file: ${join(dir, long)}`],
      ['stageFiles', () => stageFilesSync(join(dir, 'stage'), [{ target: long, bytes: Buffer.from('x') }]), 'stageFiles'],
    ];
    for (const [what, call, message] of calls) {
      const err = expectError(call, { code: 'SEAL_LIMIT' }) as Error & { cause?: { code?: string } };
      expect([what, err.message.startsWith(`${message}: ENAMETOOLONG: name too long`), err.cause?.code]).toEqual([what, true, 'ENAMETOOLONG']);
    }
    expect(readdirSync(join(dir, 'stage'))).toEqual([]);
    expect(readdirSync(dir).sort()).toEqual(['repo', 's1', 's2', 'stage']);
  });

  it('a tree deeper than the thread\'s stack can walk (6000 levels, maxDepth raised) is SEAL_LIMIT, not V8\'s RangeError; nothing stored', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'repo'));
    execFileSync('python3', ['-c', 'import os, sys\nos.chdir(sys.argv[1])\nfor i in range(6000):\n    os.mkdir("x"); os.chdir("x")\nopen("leaf", "w").write("x")', join(dir, 'repo')]);
    const store = SnapshotStore.openSync(join(dir, 'store'));
    const err = expectError(() => store.captureSync({ source: join(dir, 'repo'), limits: { maxDepth: 100_000, maxPathBytes: 100_000 } }), {
      code: 'SEAL_LIMIT',
      message: "capture: the tree is deeper than this thread's stack can walk: lower limits.maxDepth (default 256)",
    });
    expect(err.cause).toBeInstanceOf(RangeError);
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
    // Node's rmSync takes whole paths, too long here; rm walks down.
    execFileSync('rm', ['-rf', dir]);
  });

  it('a root directory the kernel cannot open (EMFILE) is SEAL_IO', () => {
    const dir = tempDir();
    const fault = failOnce('openat2', 'EMFILE');
    const err = expectError(() => readStableSync(join(dir, 'f'), { maxBytes: 10, sys: fault.sys }), { code: 'SEAL_IO' });
    expectIo(err, fault.injected(), `parent directory cannot be opened: ${dir}: EMFILE: injected, openat2`);
  });

  it('readStable: an I/O error checking the name after the read is SEAL_IO, not SEAL_CHANGED', () => {
    const dir = tempDir();
    writeTree(dir, { f: 'bytes' });
    const fault = failOnce('fstatat', 'EIO');
    const err = expectError(() => readStableSync(join(dir, 'f'), { maxBytes: 10, sys: fault.sys }), { code: 'SEAL_IO' });
    expectIo(err, fault.injected(), `file cannot be read: ${join(dir, 'f')}: EIO: injected, fstatat`);
  });

  it('writeFrozenFile: no space to create the file is SEAL_IO, not SEAL_UNAVAILABLE', () => {
    const dir = tempDir();
    // The file is made unnamed first (O_TMPFILE), else in place (O_CREAT): no space for either is the same refusal.
    const fault = failOnce('openat', 'ENOSPC', (_fd, _name, flags) => (flags & O_CREAT) !== 0 || (flags & O_TMPFILE) === O_TMPFILE);
    const err = expectError(() => writeFrozenFileSync(join(dir, 'f'), Buffer.from('x'), { sys: fault.sys }), { code: 'SEAL_IO' });
    expectIo(err, fault.injected(), `cannot create file: ${join(dir, 'f')}: ENOSPC: injected, openat`);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('store.get: an I/O error reading manifest.json is SEAL_IO whose cause is the system error, not SEAL_CORRUPT', () => {
    const { root, digest } = storeWithSnapshot();
    const fault = failOnce('pread', 'EIO');
    const store = SnapshotStore.openSync(root, { sys: fault.sys });
    const err = expectError(() => store.get(digest), { code: 'SEAL_IO' });
    expect([err.code, err.cause]).toEqual(['SEAL_IO', fault.injected()]);
    store.closeSync();
  });

  it('verify: a snapshot area the kernel cannot open is SEAL_IO, not a corrupt snapshot', () => {
    const { root, digest } = storeWithSnapshot();
    const fault = failOnce('openat2', 'EMFILE', (_fd, path) => path === 'copy');
    const store = SnapshotStore.openSync(root, { sys: fault.sys });
    const snap = store.get(digest);
    expectIo(expectError(() => snap.verifySync(), { code: 'SEAL_IO' }), fault.injected(), 'snapshot area cannot be opened: copy: EMFILE: injected, openat2');
    store.closeSync();
  });

  it('materialize: a snapshot file the kernel cannot open is SEAL_IO, not SEAL_CORRUPT, and the clone is untouched', () => {
    const { root, digest } = storeWithSnapshot();
    const clone = tempDir();
    writeTree(clone, { 'src/old.txt': 'old' });
    const fault = failOnce('openat', 'EMFILE', (_fd, name) => name === 'b.txt');
    const store = SnapshotStore.openSync(root, { sys: fault.sys });
    const snap = store.get(digest);
    expectIo(expectError(() => snap.materializeSync(clone), { code: 'SEAL_IO' }), fault.injected(), 'snapshot file cannot be opened: src/d/b.txt: EMFILE: injected, openat');
    expect(readdirSync(join(clone, 'src'))).toEqual(['old.txt']);
    store.closeSync();
  });

  it('materialize: a root whose publish is refused leaves no parent directory made for it', () => {
    const source = tempDir();
    writeTree(source, { 'data/deep/f.bin': 'f' });
    const root = join(tempDir(), 'store');
    const made = SnapshotStore.openSync(root);
    const digest = made.captureSync({ source, copy: ['data/deep/f.bin'] }).digest;
    made.closeSync();
    const clone = tempDir();
    writeTree(clone, { 'keep.txt': 'keep' });
    const fault = failOnce('renameat2', 'ENOSPC', (_a, name) => name === 'f.bin');
    const store = SnapshotStore.openSync(root, { sys: fault.sys });
    const err = expectError(() => store.get(digest).materializeSync(clone), { code: 'SEAL_IO' });
    expect([err.code, err.cause]).toEqual(['SEAL_IO', fault.injected()]);
    expect(readdirSync(clone)).toEqual(['keep.txt']);
    store.closeSync();
  });

  it('mountPoints: a payload the kernel cannot stat is SEAL_IO, not SEAL_CORRUPT', () => {
    const { root, digest } = storeWithSnapshot();
    const fault = failOnce('fstatat', 'EIO', (_fd, path) => typeof path === 'string' && path.endsWith('/payload'));
    const store = SnapshotStore.openSync(root, { sys: fault.sys });
    const snap = store.get(digest);
    expectIo(expectError(() => snap.mountPoints(tempDir()), { code: 'SEAL_IO' }), fault.injected(), 'mount snapshot cannot be read: m: EIO: injected, fstatat');
    store.closeSync();
  });

  it('remove: failing to open tmp/ closes the snapshots/ fd already open, and the snapshot stays published', () => {
    const { root, digest } = storeWithSnapshot();
    let armed = false;
    const fault = failOnce('openat2', 'EMFILE', (_fd, path) => armed && typeof path === 'string' && path.endsWith('/tmp'));
    const store = SnapshotStore.openSync(root, { sys: fault.sys });
    armed = true;
    const err = expectError(() => store.remove(digest), { code: 'SEAL_IO' });
    expect([err.code, err.cause]).toEqual(['SEAL_IO', fault.injected()]);
    expect(store.list()).toEqual([digest]);
    store.closeSync();
  });

  it('a publish rename refused for lack of space is SEAL_IO and leaves tmp/ and snapshots/ empty', () => {
    const source = tempDir();
    writeTree(source, { 'src/a.txt': 'a' });
    const fault = failOnce('renameat2', 'ENOSPC', (_a, _b, _c, _d, flags) => flags === RENAME_NOREPLACE);
    const store = SnapshotStore.openSync(join(tempDir(), 'store'), { sys: fault.sys });
    const err = expectError(() => store.captureSync({ source, copy: ['src'] }), { code: 'SEAL_IO' });
    expect([err.code, err.message, err.cause]).toEqual(['SEAL_IO', `capture: ENOSPC: injected, renameat2 (the store's filesystem is full or over quota: ${store.root})`, fault.injected()]);
    expect(storeLeftovers(store.root)).toEqual([]);
  });
});

describe('sweeping stale builds', () => {
  it('a build the kernel would not open (EMFILE) is never removed without its lock: it may be live', () => {
    const root = join(tempDir(), 'store');
    SnapshotStore.openSync(root).closeSync();
    const build = join(root, 'tmp', `build-${'a'.repeat(32)}`);
    mkdirSync(build);
    const held = openSync(build, 'r');
    // An exclusive flock, as a live build's process holds.
    nativeSys.flock(held, LOCK_EX | LOCK_NB);
    try {
      const fault = failOnce('openat', 'EMFILE', (_fd, name) => typeof name === 'string' && name.startsWith('build-'));
      const err = expectError(() => SnapshotStore.openSync(root, { sys: fault.sys }), { code: 'SEAL_IO' });
      expectIo(err, fault.injected(), 'openStore: EMFILE: injected, openat');
      expect(readdirSync(join(root, 'tmp'))).toEqual([`build-${'a'.repeat(32)}`]);
    } finally {
      closeSync(held);
    }
  });
});

describe('stages the kernel refuses to make or remove', () => {
  const files = [{ target: 'deep/f.txt', bytes: Buffer.from('f') }];

  it('a stage directory made but not opened is removed again', () => {
    const parent = tempDir();
    const fault = failOnce('openat', 'EMFILE', (_fd, name) => typeof name === 'string' && name.startsWith('.treeseal-stage-'));
    const err = expectError(() => stageFilesSync(parent, files, { sys: fault.sys }), { code: 'SEAL_IO' });
    expect([err.code, err.cause]).toEqual(['SEAL_IO', fault.injected()]);
    expect(readdirSync(parent)).toEqual([]);
  });

  it('a close the kernel refused is SEAL_IO, and close() again finishes the removal', () => {
    const parent = tempDir();
    const fault = failOnce('unlinkat', 'EIO', (_fd, name) => typeof name === 'string' && name.startsWith('.treeseal-stage-'));
    const stage = stageFilesSync(parent, files, { sys: fault.sys });
    let err: SealError | undefined;
    try {
      stage.close();
    } catch (e) {
      err = e as SealError;
    }
    expect([err?.code, err?.message, err?.cause]).toEqual(['SEAL_IO', 'stage close: EIO: injected, unlinkat', fault.injected()]);
    // Its fd is kept for the retry: the stage is removed through it, never by its name alone.
    expect(stage.closed).toBe(false);
    stage.close();
    expect(stage.closed).toBe(true);
    expect(readdirSync(parent)).toEqual([]);
  });
});

describe('reasonOf: one form for what a report says a call did not do', () => {
  it('the system’s own words where the kernel refused (bare, or as a SEAL_IO’s cause), else CODE: message', async () => {
    const { reasonOf } = await import('../../dist/internal.js');
    const { SealError } = await import('../../dist/index.js');
    let missing: Error | undefined;
    try {
      readdirSync(join(tempDir(), 'missing\nname'));
    } catch (err) {
      missing = err as Error;
    }
    // Node's own: `ENOENT: no such file or directory, scandir '…'`, the path's newline escaped.
    expect(reasonOf(missing)).toMatch(/^ENOENT: no such file or directory, scandir '.*missing\\x0aname'$/);
    const injected = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', errno: -28, syscall: 'write' });
    expect(reasonOf(new SealError('SEAL_IO', 'clone ledger cannot be saved: ENOSPC: no space left on device, write', { cause: injected }))).toBe('ENOSPC: no space left on device, write');
    // A system error whose message does not start with its code gets it in front.
    expect(reasonOf(Object.assign(new Error('injected'), { code: 'EIO', errno: -5, syscall: 'pwrite' }))).toBe('EIO: injected');
    expect(reasonOf(new SealError('SEAL_BUSY', 'clones/1-2.ledger in the store could not be written; try again'))).toBe('SEAL_BUSY: clones/1-2.ledger in the store could not be written; try again');
    // A SEAL_IO without a system cause says its own code.
    expect(reasonOf(new SealError('SEAL_IO', 'stage cannot be removed'))).toBe('SEAL_IO: stage cannot be removed');
    expect(reasonOf(new TypeError('x\ny'))).toBe('TypeError: x\\x0ay');
    expect(reasonOf('plain')).toBe('Error: plain');
  });
});
