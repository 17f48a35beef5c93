// refusals.test.ts: push and pull when the kernel refuses a local call: SEAL_IO with the system error as cause, no fd left, nothing published.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { O_CREAT } from '../../../dist/sys/index.js';
import { failOnce, storeLeftovers, tempDir } from '../../helpers.js';
import { CAPTURE, writeSource } from './fixtures.js';
import { checkNoFileFdLeaks, repoName, testRegistry } from './harness.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p;
  } catch (err) {
    return err as Error & { code?: string };
  }
  throw new Error('call unexpectedly succeeded');
}

async function published(): Promise<{ root: string; digest: string }> {
  const work = tempDir();
  writeSource(join(work, 'source'));
  const store = await SnapshotStore.open(join(work, 'a'));
  const snap = await store.capture({ source: join(work, 'source'), ...CAPTURE });
  await store.close();
  return { root: join(work, 'a'), digest: snap.digest };
}

describe.skipIf(registry === undefined)('push and pull when the kernel refuses', () => {
  it('push: a snapshot file the kernel cannot open (EIO) is SEAL_IO, not SEAL_CORRUPT', async () => {
    const { root, digest } = await published();
    const fault = failOnce('openat2', 'EIO', (_fd, path) => typeof path === 'string' && path.startsWith('copy/'));
    const store = await SnapshotStore.open(root, { sys: fault.sys });
    const err = await rejection(store.push(digest, `${registry!.address}/${repoName('refused-push')}`));
    expect([err.name, err.code, err.cause]).toEqual(['SealError', 'SEAL_IO', fault.injected()]);
    expect(err.message).toMatch(/^snapshot file cannot be opened: copy\/src\/\S+: EIO: injected, openat2$/);
    await store.close();
  });

  it('pull: no space for a pulled file is SEAL_IO (not a raw ENOSPC), and nothing is published or left in tmp/', async () => {
    const { root, digest } = await published();
    const remote = `${registry!.address}/${repoName('refused-pull')}`;
    const source = await SnapshotStore.open(root);
    await source.push(digest, remote);
    await source.close();
    const fault = failOnce('openat2', 'ENOSPC', (_fd, _path, flags) => (flags & O_CREAT) !== 0);
    const target = join(tempDir(), 'b');
    const store = await SnapshotStore.open(target, { sys: fault.sys });
    const err = await rejection(store.pull(digest, remote));
    expect([err.name, err.code, err.cause]).toEqual(['SealError', 'SEAL_IO', fault.injected()]);
    expect(err.message).toMatch(/^pull: ENOSPC: injected, openat2$/);
    await store.close();
    (await SnapshotStore.open(target)).closeSync();
    expect(storeLeftovers(target)).toEqual([]);
  });
});
