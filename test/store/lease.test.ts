// lease.test.ts: a leased snapshot cannot be removed (SEAL_BUSY naming the holder) until the lease ends, by release or by the death of its process.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, rmdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { LOCK_UN } from '../../dist/sys/index.js';
import { expectError, failOnce, mkfifo, tempDir, writeTree } from '../helpers.js';

const INDEX = new URL('../../dist/index.js', import.meta.url).href;

function published(): { root: string; store: SnapshotStore; digest: string } {
  const root = tempDir();
  writeTree(root, { 'repo/src/a.txt': 'alpha' });
  const store = SnapshotStore.openSync(join(root, 'store'));
  const digest = store.captureSync({ source: join(root, 'repo'), copy: ['src'] }).digest;
  return { root, store, digest };
}

/** A child process that leases the snapshot, says so, and waits to be killed. */
async function leasedElsewhere(storeRoot: string, digest: string): Promise<{ pid: number; kill: () => Promise<void> }> {
  const script = `
    import { SnapshotStore } from ${JSON.stringify(INDEX)};
    const store = SnapshotStore.openSync(${JSON.stringify(storeRoot)});
    store.get(${JSON.stringify(digest)}).lease();
    console.log('leased');
    setInterval(() => {}, 1000);
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  return {
    pid: child.pid!,
    kill: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  };
}

const CLI = new URL('../../dist/cli.js', import.meta.url).pathname;

describe('leases', () => {
  it('treeseal rm --wait says once that the snapshot is leased, and removes it when the holder goes', async () => {
    const { root, store, digest } = published();
    const holder = await leasedElsewhere(join(root, 'store'), digest);
    const rm = spawn(process.execPath, [CLI, '--store', join(root, 'store'), 'rm', '--wait', digest.slice(0, 10)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out = { stdout: '', stderr: '' };
    rm.stdout.on('data', (b: Buffer) => (out.stdout += b.toString()));
    const said = new Promise<void>((resolve) => rm.stderr.on('data', (b: Buffer) => ((out.stderr += b.toString()), out.stderr.includes('\n') && resolve())));
    await said;
    // Still there while the lease is held, however long rm has waited.
    expect(store.list()).toEqual([digest]);
    const [leaseFile] = readdirSync(join(root, 'store/leases'));
    const status = new Promise<number | null>((resolve) => rm.once('exit', resolve));
    await holder.kill();
    expect(await status).toBe(0);
    expect(out).toEqual({
      stdout: `removed ${digest}\n`,
      stderr: `treeseal: snapshot ${digest} is leased by pid ${holder.pid} (leases/${leaseFile}); nothing is removed while a lease holds it; waiting (--wait)\n`,
    });
    expect(store.list()).toEqual([]);
    store.closeSync();
  });


  it('remove of a leased snapshot is SEAL_BUSY naming this process, and removes once the lease is released', async () => {
    const { root, store, digest } = published();
    const snap = store.get(digest);
    const lease = snap.lease();
    expect([lease.digest, lease.released]).toEqual([digest, false]);
    const leases = readdirSync(join(root, 'store/leases'));
    expect(leases).toHaveLength(1);
    expect(leases[0]).toMatch(new RegExp(`^${digest}-[0-9a-f]{16}$`));
    expectError(() => store.remove(digest), {
      code: 'SEAL_BUSY',
      message: `snapshot ${digest} is leased by pid ${process.pid} (leases/${leases[0]}); nothing is removed while a lease holds it`,
      unchanged: join(root, 'store/snapshots'),
    });
    await expectError(async () => store.removeAsync(digest.slice(0, 8)), { code: 'SEAL_BUSY', fds: false });
    expect(readdirSync(join(root, 'store/tmp'))).toEqual([]);
    lease.release();
    lease.release();
    expect(lease.released).toBe(true);
    expect(readdirSync(join(root, 'store/leases'))).toEqual([]);
    expect(store.remove(digest)).toBe(digest);
    expect(store.list()).toEqual([]);
    store.closeSync();
  });

  it('`using` releases; two leases both hold; leaseAsync gives the same', async () => {
    const { store, digest } = published();
    const snap = store.get(digest);
    {
      using _a = snap.lease();
      const b = await snap.leaseAsync();
      expectError(() => store.remove(digest), { code: 'SEAL_BUSY', fds: false });
      b.release();
      expectError(() => store.remove(digest), { code: 'SEAL_BUSY', fds: false });
    }
    expect(store.remove(digest)).toBe(digest);
    store.closeSync();
  });

  it('a lease another live process holds names its pid; once that process dies the lease holds nothing and gc sweeps its file', async () => {
    const { root, store, digest } = published();
    const other = await leasedElsewhere(join(root, 'store'), digest);
    expect(() => store.remove(digest)).toThrow(`snapshot ${digest} is leased by pid ${other.pid} (`);
    await other.kill();
    expect(readdirSync(join(root, 'store/leases'))).toHaveLength(1);
    expect(store.gc()).toBe(1);
    expect(readdirSync(join(root, 'store/leases'))).toEqual([]);
    expect(store.remove(digest)).toBe(digest);
    store.closeSync();
  });

  it('remove sweeps a dead holder\'s lease itself, without a gc first', async () => {
    const { root, store, digest } = published();
    const other = await leasedElsewhere(join(root, 'store'), digest);
    await other.kill();
    expect(store.remove(digest)).toBe(digest);
    expect(readdirSync(join(root, 'store/leases'))).toEqual([]);
    store.closeSync();
  });

  it('what stands under a lease\'s name but is no lease (a link, a FIFO, a directory) holds nothing: swept, never followed (a link once failed every rm and gc with ELOOP; a FIFO was never swept)', () => {
    const { root, store, digest } = published();
    const leases = join(root, 'store/leases');
    symlinkSync('/etc/passwd', join(leases, `${digest}-0000000000000000`));
    mkfifo(join(leases, `${digest}-0000000000000001`));
    mkdirSync(join(leases, `${digest}-0000000000000002`));
    expect(store.gc()).toBe(3);
    expect(readdirSync(leases)).toEqual([]);
    symlinkSync('/etc/passwd', join(leases, `${digest}-0000000000000003`));
    // A lease file this user cannot open (another member's, 0000): its flock cannot be tested, so it holds; gc goes on past it.
    const lease = store.get(digest).lease();
    const { sys } = failOnce('openat', 'EACCES', (_dirfd, name) => String(name).startsWith(`${digest}-`) && String(name) !== `${digest}-0000000000000003`);
    const member = SnapshotStore.openSync(store.root, { sys });
    expectError(() => member.remove(digest), { code: 'SEAL_BUSY', message: new RegExp(`^snapshot ${digest} is leased \\(leases/${digest}-[0-9a-f]{16}\\)`) });
    member.closeSync();
    lease.release();
    expect(store.remove(digest)).toBe(digest);
    expect(readdirSync(leases)).toEqual([]);
    store.closeSync();
  });

  it('a removed snapshot cannot be leased; a store without leases/ gets one when opened; one anyone can write is SEAL_UNTRUSTED', () => {
    const { root, store, digest } = published();
    const snap = store.get(digest);
    store.remove(digest);
    expectError(() => snap.lease(), { code: 'SEAL_UNAVAILABLE', message: `no such snapshot: ${digest}` });
    store.closeSync();
    rmdirSync(join(root, 'store/leases'));
    SnapshotStore.openSync(join(root, 'store')).closeSync();
    expect(readdirSync(join(root, 'store')).sort()).toEqual(['cache', 'leases', 'lock', 'snapshots', 'tmp']);
    chmodSync(join(root, 'store/leases'), 0o777);
    expectError(() => SnapshotStore.openSync(join(root, 'store')), { code: 'SEAL_UNTRUSTED' });
  });

  it('a store lock whose unlock fails still hands over the lease: the close releases the lock, and the lease fd is not lost', () => {
    const { root, store, digest } = published();
    const { sys, injected } = failOnce('flock', 'ENOLCK', (_fd, op) => op === LOCK_UN);
    const other = SnapshotStore.openSync(join(root, 'store'), { sys });
    const lease = other.get(digest).lease();
    expect(injected()?.code).toBe('ENOLCK');
    // The store lock is free (the exclusive take below would wait forever otherwise) and the lease holds.
    expectError(() => store.remove(digest), { code: 'SEAL_BUSY', fds: false });
    lease.release();
    expect(store.remove(digest)).toBe(digest);
    other.closeSync();
    store.closeSync();
  });

  it('treeseal rm of a snapshot a lease holds exits 1 with SEAL_BUSY and removes nothing', async () => {
    const { root, store, digest } = published();
    using _lease = store.get(digest).lease();
    const r = spawnSync(process.execPath, [new URL('../../dist/cli.js', import.meta.url).pathname, 'rm', digest.slice(0, 12)], {
      encoding: 'utf8',
      env: { ...process.env, TREESEAL_STORE: join(root, 'store') },
    });
    expect([r.status, r.stderr.split(':').slice(0, 2).join(':')]).toEqual([1, 'treeseal: SEAL_BUSY']);
    expect(store.list()).toEqual([digest]);
    store.closeSync();
  });
});
