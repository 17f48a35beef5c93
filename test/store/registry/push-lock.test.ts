// push-lock.test.ts: push reads the snapshot under the store's shared lock: an rm waits while it reads, and a snapshot removed between reads is SEAL_UNAVAILABLE, never SEAL_CORRUPT.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { AT_FDCWD, LOCK_EX, LOCK_NB, LOCK_UN, O_RDONLY, sys as nativeSys } from '../../../dist/sys/index.js';
import { storeLeftovers, wrapSys } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy } from './harness.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

/** Whether an rm would have to wait now: a non-blocking exclusive flock of the store lock fails. */
function rmWouldWait(storeRoot: string): boolean {
  const fd = nativeSys.openat(AT_FDCWD, join(storeRoot, 'lock'), O_RDONLY, 0);
  try {
    nativeSys.flock(fd, LOCK_EX | LOCK_NB);
    nativeSys.flock(fd, LOCK_UN);
    return false;
  } catch (err) {
    if ((err as { code?: string }).code === 'EWOULDBLOCK' || (err as { code?: string }).code === 'EAGAIN') return true;
    throw err;
  } finally {
    nativeSys.close(fd);
  }
}

async function tagStatus(remote: string, tag: string): Promise<number> {
  const repo = remote.slice(remote.indexOf('/') + 1);
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/${tag}`, { method: 'HEAD', headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
  return res.status;
}

describe.skipIf(registry === undefined)('push and a concurrent rm', () => {
  it('holds the shared lock while it opens the manifest, each pack content and each large file', async () => {
    const { store: first, snap } = await captured();
    const root = first.root;
    await first.close();
    const probed = new Map<string, boolean>();
    let store: SnapshotStore | undefined;
    // At each open of a snapshot file: would an rm wait? If it would not, the rm happens (the race the lock must prevent).
    const probe = (path: unknown): void => {
      if (typeof path !== 'string' || !/^(manifest\.json|copy\/src\/(a\.txt|index\/graph-copy\.bin))$/.test(path) || probed.has(path)) return;
      const held = rmWouldWait(root);
      probed.set(path, held);
      if (!held) store!.remove(snap.digest);
    };
    const sys = wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        probe(path);
        return orig(dirfd, path, flags, mode);
      },
      openat2: (orig) => (dirfd, path, flags, mode, resolve) => {
        probe(path);
        return orig(dirfd, path, flags, mode, resolve);
      },
    });
    store = await SnapshotStore.open(root, { sys });
    const remote = `${registry!.address}/${repoName('locked')}`;
    expect(await store.push(snap.digest, remote, { concurrency: 1 })).toMatchObject({ existed: false, uploaded: 5 });
    expect(Object.fromEntries(probed)).toEqual({ 'manifest.json': true, 'copy/src/a.txt': true, 'copy/src/index/graph-copy.bin': true });
    expect(rmWouldWait(root)).toBe(false);
    await store.close();
  });

  it('a snapshot removed between two reads (before a pack, before a large file) is SEAL_UNAVAILABLE; no tag, nothing left', async () => {
    for (const before of ['pack', 'file'] as const) {
      const proxy = await tokenProxy(registry!.address);
      const { store, snap } = await captured();
      const fileDigest = `sha256:${createHash('sha256').update(readFileSync(join(snap.root, 'copy/src/index/graph.bin'))).digest('hex')}`;
      // Blobs go one at a time: the config, the packs, the large file. The rm runs while push waits on the registry.
      let heads = 0;
      proxy.hooks.onRequest = (method, path) => {
        if (method !== 'HEAD' || !path.includes('/blobs/')) return undefined;
        heads++;
        if ((before === 'pack' && heads === 1) || (before === 'file' && path.endsWith(fileDigest))) store.remove(snap.digest);
        return undefined;
      };
      const remote = `${proxy.address}/${repoName(`removed-${before}`)}`;
      const err = await fails(store.push(snap.digest, remote, { concurrency: 1 }));
      expect([before, err.code, err.message]).toEqual([before, 'SEAL_UNAVAILABLE', `snapshot was removed: ${snap.digest}`]);
      expect(await tagStatus(remote, `ts-${snap.digest}`)).toBe(404);
      expect(storeLeftovers(store.root)).toEqual([]);
      await store.close();
    }
  });
});
