// close.test.ts: closing a store: async calls under way complete first, and an ephemeral store is removed only when nothing else holds it.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { LOCK_EX, LOCK_NB, O_DIRECTORY, O_RDONLY, sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, isRoot, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

function source(count = 300): string {
  const dir = join(tempDir(), 'src');
  const files: Record<string, string> = {};
  for (let i = 0; i < count; i++) files[`a/d${i % 10}/f${i}`] = `file ${i}\n`;
  writeTree(dir, files);
  return dir;
}

describe('close with async calls under way', () => {
  it('a capture started before close() completes and returns what it published; close resolves after it', async () => {
    const src = source();
    const root = join(tempDir(), 'store');
    const store = await SnapshotStore.open(root);
    const capturing = store.capture({ source: src, copy: ['a'] });
    const closing = store.close();
    expect(store.closed).toBe(true);
    await expectError(async () => store.capture({ source: src, copy: ['a'] }), { code: 'SEAL_CLOSED', message: 'snapshot store is already closed', fds: false });
    const snap = await capturing;
    await closing;
    const again = SnapshotStore.openSync(root);
    expect(again.list()).toEqual([snap.digest]);
    again.get(snap.digest).verifySync();
    again.closeSync();
  });

  it('close() after closeSync() still resolves only once the calls under way have settled', async () => {
    const src = source();
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    const order: string[] = [];
    const capturing = store.capture({ source: src, copy: ['a'] }).then(() => order.push('capture'));
    store.closeSync();
    await store.close().then(() => order.push('close'));
    await capturing;
    expect(order).toEqual(['capture', 'close']);
  });

  it('an ephemeral store waits for its capture, then is removed whole; two close() calls share the result', async () => {
    const src = source();
    const root = join(tempDir(), 'store');
    const store = await SnapshotStore.open(root, { ephemeral: true });
    const capturing = store.capture({ source: src, copy: ['a'] });
    const first = store.close();
    const second = store.close();
    await expect(capturing).resolves.toMatchObject({ digest: expect.stringMatching(/^[0-9a-f]{64}$/) });
    await Promise.all([first, second]);
    expect(existsSync(root)).toBe(false);
  });

  it('closeSync of an ephemeral store with an async call under way is SEAL_BUSY and leaves it open; once the call settles it removes it', async () => {
    const src = source();
    const root = join(tempDir(), 'store');
    const store = await SnapshotStore.open(root, { ephemeral: true });
    const capturing = store.capture({ source: src, copy: ['a'] });
    expectError(() => store.closeSync(), {
      code: 'SEAL_BUSY',
      message: 'ephemeral store cannot be removed while 1 async call(s) on it are under way: await close() instead',
      fds: false,
    });
    expect(store.closed).toBe(false);
    const snap = await capturing;
    expect(store.list()).toEqual([snap.digest]);
    store.closeSync();
    expect(existsSync(root)).toBe(false);
  });
});

describe('an ephemeral store something else holds', () => {
  it('a lease another handle holds keeps the whole store (SEAL_BUSY naming the snapshot and holder); the next close() removes it once released', async () => {
    const src = source();
    const root = join(tempDir(), 'store');
    const holder = await SnapshotStore.open(root);
    const snap = await holder.capture({ source: src, copy: ['a'] });
    const lease = snap.lease();
    const ephemeral = await SnapshotStore.open(root, { ephemeral: true });
    const err = await expectError(async () => ephemeral.close(), { code: 'SEAL_BUSY' });
    expect(err.message).toMatch(new RegExp(`^ephemeral store is left in place: ${root}: snapshot ${snap.digest} is leased by pid ${process.pid} .*\\(leases/${snap.digest}-[0-9a-f]{16}\\); nothing is removed while a lease holds it$`));
    expect(ephemeral.closed).toBe(true);
    // The holder's snapshot is whole and usable.
    expect(holder.list()).toEqual([snap.digest]);
    await snap.verify();
    lease.release();
    await ephemeral.close();
    expect(existsSync(root)).toBe(false);
    await holder.close();
  });

  it("a build another handle of this process is making keeps the store: SEAL_BUSY, and that capture publishes (the lock was once taken for a dead worker's and the store removed under it)", async () => {
    // Big enough that the capture is still building when the close, called at its first progress report, looks.
    const src = source(4000);
    const root = join(tempDir(), 'store');
    const ephemeral = await SnapshotStore.open(root, { ephemeral: true });
    const other = await SnapshotStore.open(root);
    let closing: Promise<unknown> | undefined;
    const snap = await other.capture({
      source: src,
      copy: ['a'],
      parallelism: 0,
      onProgress: () => {
        closing ??= ephemeral.close().then(
          () => 'closed',
          (err: unknown) => err,
        );
      },
    });
    expect(await closing).toMatchObject({ code: 'SEAL_BUSY', message: expect.stringMatching(/^ephemeral store is left in place: .*: a capture or pull is building into it \(tmp\/build-[0-9a-f]{32}\)$/) });
    expect(other.list()).toEqual([snap.digest]);
    await snap.verify();
    await other.close();
    await ephemeral.close();
    expect(existsSync(root)).toBe(false);
  });

  it('a build another process holds in tmp/ keeps the store (closeSync too); one only this process holds (a worker thread that died) does not', async () => {
    const root = join(tempDir(), 'store');
    const store = SnapshotStore.openSync(root, { ephemeral: true });
    const build = join(root, 'tmp', 'build-0123456789abcdef0123456789abcdef');
    mkdirSync(build);
    const holder = spawn('flock', ['--no-fork', '--exclusive', build, 'sh', '-c', 'echo held; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      await once(holder.stdout!, 'data');
      expectError(() => store.closeSync(), {
        code: 'SEAL_BUSY',
        message: `ephemeral store is left in place: ${root}: a capture or pull is building into it (tmp/build-0123456789abcdef0123456789abcdef)`,
        fds: false,
      });
      expect(readdirSync(root)).toEqual(expect.arrayContaining(['lock', 'snapshots', 'tmp']));
      expect(readdirSync(join(root, 'tmp'))).toEqual(['build-0123456789abcdef0123456789abcdef']);
    } finally {
      holder.kill();
      await once(holder, 'exit');
    }
    // Held by this process alone, as the fds of a worker thread that died mid-capture stay open: no one else is building.
    const fd = sys.openat(-100, build, O_RDONLY | O_DIRECTORY);
    try {
      sys.flock(fd, LOCK_EX | LOCK_NB);
      store.closeSync();
      expect(existsSync(root)).toBe(false);
    } finally {
      sys.close(fd);
    }
  });
});

describe('an ephemeral store that is no longer where it was opened', () => {
  it('close() removes nothing when its path names another directory now (the store moved away, a directory of the user made there): SEAL_CHANGED, both left whole (it removed whatever stood at the path)', async () => {
    const src = source(20);
    const root = join(tempDir(), 'eph');
    const store = await SnapshotStore.open(root, { ephemeral: true });
    const snap = await store.capture({ source: src, copy: ['a'] });
    renameSync(root, `${root}.moved`);
    writeTree(root, { 'tmp/x': '', 'snapshots/y': '', 'src/main.c': 'precious' });
    const message = `ephemeral store is no longer the directory at its path (moved or replaced since it was opened); nothing was removed: ${root}`;
    await expectError(async () => store.close(), { code: 'SEAL_CHANGED', message, path: root });
    expect(readFileSync(join(root, 'src/main.c'), 'utf8')).toBe('precious');
    expect(readdirSync(root).sort()).toEqual(['snapshots', 'src', 'tmp']);
    expect(readdirSync(join(`${root}.moved`, 'snapshots'))).toEqual([snap.digest]);
    // Tried again by the next close, with the same answer; back at its path, the store is removed.
    expectError(() => store.closeSync(), { code: 'SEAL_CHANGED', message });
    rmSync(root, { recursive: true });
    renameSync(`${root}.moved`, root);
    await store.close();
    expect(existsSync(root)).toBe(false);
  });

  it('a close that emptied the store but could not remove its directory (a mount point: EBUSY) says so again when tried again, recreating nothing; unmounted, the directory below is not the store and is left alone', async () => {
    if (!isRoot) return;
    const src = source(20);
    const root = join(tempDir(), 'eph');
    mkdirSync(root);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'mode=0700', 'tmpfs', root]);
    let mounted = true;
    try {
      const store = await SnapshotStore.open(root, { ephemeral: true });
      await store.capture({ source: src, copy: ['a'] });
      const busy = { code: 'SEAL_IO', message: new RegExp(`EBUSY`) };
      await expectError(async () => store.close(), busy);
      expect(readdirSync(root)).toEqual([]);
      await expectError(async () => store.close(), busy);
      // Nothing made again (the second close once made lock and failed SEAL_UNAVAILABLE on the missing tmp/).
      expect(readdirSync(root)).toEqual([]);
      // Unmounted, the path names the directory below it: not the store this handle opened, and left alone.
      execFileSync('umount', [root]);
      mounted = false;
      await expectError(async () => store.close(), { code: 'SEAL_CHANGED', path: root });
      expect(readdirSync(root)).toEqual([]);
    } finally {
      if (mounted) execFileSync('umount', [root]);
    }
  });
});
