// refusals.test.ts: push and pull when the kernel refuses a local call: SEAL_IO with the system error as cause, no fd left, nothing published.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { O_CREAT } from '../../../dist/sys/index.js';
import { failOnce, storeLeftovers, tempDir, wrapSys } from '../../helpers.js';
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

  it("pull: a store whose tmp/ cannot take the snapshot manifest's unnamed file assembles it in memory instead, and the pull is whole", async () => {
    const { root, digest } = await published();
    const remote = `${registry!.address}/${repoName('document-in-memory')}`;
    const source = await SnapshotStore.open(root);
    await source.push(digest, remote);
    await source.close();
    // As a pull makes it: in tmp/, unlinked at once (so nothing is left whatever ends the pull), then written.
    const seen: string[] = [];
    const record = wrapSys({
      openat: (orig) => (fd: number, path: string, ...rest: number[]) => {
        if (String(path).startsWith('build-document-')) seen.push(`openat ${String(path).slice(0, 'build-document-'.length)}`);
        return (orig as (...a: unknown[]) => number)(fd, path, ...rest);
      },
      unlinkat: (orig) => (fd: number, path: string, flags: number) => {
        if (String(path).startsWith('build-document-')) seen.push(`unlinkat ${String(path).slice(0, 'build-document-'.length)}`);
        return (orig as (...a: unknown[]) => void)(fd, path, flags);
      },
    } as never);
    const first = await SnapshotStore.open(join(tempDir(), 'a'), { sys: record });
    expect(await first.pull(digest, remote)).toMatchObject({ digest, existed: false });
    expect(seen).toEqual(['openat build-document-', 'unlinkat build-document-']);
    await first.close();
    const fault = failOnce('openat', 'ENOSPC', (_fd, path) => String(path).startsWith('build-document-'));
    const target = join(tempDir(), 'b');
    const store = await SnapshotStore.open(target, { sys: fault.sys });
    expect(await store.pull(digest, remote)).toMatchObject({ digest, existed: false });
    expect(fault.injected()).toBeDefined();
    expect(await store.get(digest).verify()).toMatchObject({ entries: expect.any(Number) });
    await store.close();
    expect(readdirSync(join(target, 'tmp'))).toEqual([]);
  });
});
