// pull-once.test.ts: one download per host: concurrent pulls of one snapshot into one store take turns on its pull lock, the later ones fetch no blob; a waiting pull can be aborted; a dead pull's lock is swept.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, type PullReport } from '../../../dist/index.js';
import { storeLeftovers, wrapSys } from '../../helpers.js';
import { captured, describeTree } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy, type TokenProxy } from './harness.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

const blobGets = (log: string[]): string[] => log.filter((l) => /^GET \/v2\/.+\/blobs\/sha256:/.test(l));

/**
 * Holds the first blob GET through the proxy until release() (or until a second blob GET
 * comes: a second download, which the lock must prevent, must not hang the test).
 */
function holdFirstBlob(proxy: TokenProxy): { release: () => void } {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let first = true;
  proxy.hooks.onRequest = (method, path) => {
    if (method !== 'GET' || !path.includes('/blobs/')) return undefined;
    if (first) {
      first = false;
      return { hold: held };
    }
    release();
    return undefined;
  };
  return { release: () => release() };
}

/** A syscall layer that calls `onBusy` when a non-blocking flock finds the lock held (a pull that must wait its turn). */
function onBusyLock(onBusy: () => void) {
  return wrapSys({
    flock: (orig) => (fd, op) => {
      try {
        return orig(fd, op);
      } catch (err) {
        if ((err as { code?: string }).code === 'EWOULDBLOCK' || (err as { code?: string }).code === 'EAGAIN') onBusy();
        throw err;
      }
    },
  });
}

async function pushed(label: string) {
  const { work, store: a, snap } = await captured();
  const proxy = await tokenProxy(registry!.address);
  const remote = `${proxy.address}/${repoName(label)}`;
  const report = await a.push(snap.digest, remote);
  await a.close();
  proxy.log.length = 0;
  return { work, snap, proxy, remote, blobs: report.blobs };
}

describe.skipIf(registry === undefined)('one download per host', () => {
  it('two concurrent pulls of one snapshot into one store (by digest, and by tag) download each blob once; the one that waited finds it published', async () => {
    for (const second of ['digest', 'tag'] as const) {
      const { work, snap, proxy, remote, blobs } = await pushed(`once-${second}`);
      const root = join(work, 'b');
      const { release } = holdFirstBlob(proxy);
      // The first pull holds the lock and waits on its first blob; once the second finds the lock held, the first goes on.
      const first = await SnapshotStore.open(root);
      const other = await SnapshotStore.open(root, { sys: onBusyLock(release) });
      const one = first.pull(snap.digest, remote);
      // Started once the first is in flight (its blob GET held), so both have seen the store without the snapshot.
      await new Promise<void>((resolve) => {
        const wait = (): void => void (proxy.log.some((l) => l.includes('/blobs/')) ? resolve() : setTimeout(wait, 5));
        wait();
      });
      const two = other.pull(second === 'digest' ? snap.digest : { tag: 'r'.repeat(40) }, remote);
      const reports: PullReport[] = await Promise.all([one, two]);
      expect([second, reports.map((r) => [r.digest, r.existed, r.downloaded])]).toEqual([
        second,
        [
          [snap.digest, false, blobs],
          [snap.digest, true, 0],
        ],
      ]);
      // Each blob once (config, pack, large file): the first pull's.
      expect(blobGets(proxy.log)).toHaveLength(blobs);
      expect(new Set(blobGets(proxy.log)).size).toBe(blobs);
      expect(describeTree(first.get(snap.digest).root)).toEqual(describeTree(snap.root));
      // The lock file went with the first pull's turn: nothing is left in tmp/.
      expect(storeLeftovers(root)).toEqual([`snapshots/${snap.digest}`]);
      await first.close();
      await other.close();
    }
  });

  it('a pull waiting its turn ends SEAL_ABORTED when its signal aborts; the first one still publishes', async () => {
    const { work, snap, proxy, remote } = await pushed('abort-wait');
    const root = join(work, 'b');
    const { release } = holdFirstBlob(proxy);
    const controller = new AbortController();
    const first = await SnapshotStore.open(root);
    const other = await SnapshotStore.open(root, { sys: onBusyLock(() => controller.abort()) });
    const one = first.pull(snap.digest, remote);
    await new Promise<void>((resolve) => {
      const wait = (): void => void (proxy.log.some((l) => l.includes('/blobs/')) ? resolve() : setTimeout(wait, 5));
      wait();
    });
    const err = await fails(other.pull(snap.digest, remote, { signal: controller.signal }));
    expect([err.code, err.message]).toEqual(['SEAL_ABORTED', 'pull was aborted']);
    release();
    expect(await one).toMatchObject({ existed: false });
    expect(storeLeftovers(root)).toEqual([`snapshots/${snap.digest}`]);
    await first.close();
    await other.close();
  });

  it("a dead pull's lock file (no flock on it) is taken over by the next pull, and swept when the store is opened", async () => {
    const { work, snap, remote } = await pushed('stale-lock');
    const root = join(work, 'b');
    const store = await SnapshotStore.open(root);
    writeFileSync(join(root, 'tmp', `pull-${snap.digest}`), '');
    expect(await store.pull(snap.digest, remote)).toMatchObject({ existed: false });
    expect(storeLeftovers(root)).toEqual([`snapshots/${snap.digest}`]);
    await store.close();
    writeFileSync(join(root, 'tmp', `pull-${'e'.repeat(64)}`), '');
    const reopened = await SnapshotStore.open(root);
    expect(reopened.sweptAtOpen).toBe(1);
    expect(storeLeftovers(root)).toEqual([`snapshots/${snap.digest}`]);
    await reopened.close();
  });
});
