// push.test.ts: push never uploads a damaged store, stops on abort, and leaves no tag when the manifest cannot be stored.
import { chmodSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy } from './harness.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

async function tagStatus(address: string, remote: string, tag: string): Promise<number> {
  const repo = remote.slice(remote.indexOf('/') + 1);
  const res = await fetch(`http://${address}/v2/${repo}/manifests/${tag}`, { method: 'HEAD', headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
  return res.status;
}

describe.skipIf(registry === undefined)('push', () => {
  it('refuses to upload a snapshot file whose bytes no longer match its sha256, small or large, and leaves no tag', async () => {
    for (const rel of ['copy/src/a.txt', 'copy/src/index/graph-copy.bin']) {
      const { store, snap } = await captured();
      const path = join(snap.root, rel);
      chmodSync(join(snap.root, rel, '..'), 0o700);
      chmodSync(path, 0o600);
      writeFileSync(path, rel.endsWith('.bin') ? Buffer.alloc(1536 * 1024, 7) : 'ALPHA\n');
      const remote = `${registry!.address}/${repoName('damaged')}`;
      const err = await fails(store.push(snap.digest, remote));
      expect([err.code, err.message, err.path]).toEqual(['SEAL_CORRUPT', `snapshot file changed: ${rel}`, rel]);
      expect(await tagStatus(registry!.address, remote, `ts-${snap.digest}`)).toBe(404);
      await store.close();
    }
  });

  it('a snapshot file removed, or a link in its place, is SEAL_CORRUPT naming it (it had no path, and a link read as missing)', async () => {
    for (const [damage, says] of [['removed', 'is missing'], ['link', 'is not a regular file']] as const) {
      const { store, snap } = await captured();
      const rel = 'copy/src/a.txt';
      chmodSync(join(snap.root, rel, '..'), 0o700);
      rmSync(join(snap.root, rel));
      if (damage === 'link') symlinkSync('/etc/hostname', join(snap.root, rel));
      const remote = `${registry!.address}/${repoName('missing')}`;
      const err = await fails(store.push(snap.digest, remote));
      expect([err.code, err.message, err.path]).toEqual(['SEAL_CORRUPT', `snapshot file ${says}: ${rel}`, rel]);
      expect(await tagStatus(registry!.address, remote, `ts-${snap.digest}`)).toBe(404);
      await store.close();
    }
  });

  it('a manifest.json that is valid but not canonical (indented) goes as the canonical text of the same snapshot, which a pull takes', async () => {
    const { store, snap } = await captured();
    const path = join(snap.root, 'manifest.json');
    const canonical = readFileSync(path, 'latin1');
    chmodSync(snap.root, 0o700);
    chmodSync(path, 0o600);
    writeFileSync(path, `${JSON.stringify(JSON.parse(canonical), null, 2)}\n`);
    const remote = `${registry!.address}/${repoName('indented')}`;
    const pushed = await store.push(snap.digest, remote, { insecure: true });
    expect(pushed).toMatchObject({ digest: snap.digest, existed: false });
    const other = await SnapshotStore.open(join(tempDir(), 'store'));
    await other.pull(snap.digest, remote, { insecure: true });
    expect(readFileSync(join(other.root, 'snapshots', snap.digest, 'manifest.json'), 'latin1')).toBe(canonical);
    await (await other.get(snap.digest)).verify();
    await other.close();
    await store.close();
  });

  it('an aborted push is SEAL_ABORTED; a manifest the registry will not store leaves no tag', async () => {
    const proxy = await tokenProxy(registry!.address);
    const { store, snap } = await captured();
    const controller = new AbortController();
    proxy.hooks.onRequest = (method) => {
      if (method === 'PATCH' || method === 'PUT') controller.abort();
      return undefined;
    };
    const remote = `${proxy.address}/${repoName('abort')}`;
    const err = await fails(store.push(snap.digest, remote, { signal: controller.signal }));
    expect([err.code, err.message]).toEqual(['SEAL_ABORTED', 'push was aborted']);
    proxy.hooks.onRequest = (method, path) => (method === 'PUT' && path.includes('/manifests/') ? 500 : undefined);
    const refused = await fails(store.push(snap.digest, remote, { retries: 0 }));
    expect(refused.message).toMatch(/refused PUT \/v2\/.+\/manifests\/ts-[0-9a-f]{64}: HTTP 500 TEST_500 \(injected\)$/);
    expect(await tagStatus(registry!.address, remote, `ts-${snap.digest}`)).toBe(404);
    proxy.hooks.onRequest = undefined;
    expect(await store.push(snap.digest, remote)).toMatchObject({ existed: false, uploaded: 0, skipped: 5 });
    expect(await tagStatus(registry!.address, remote, `ts-${snap.digest}`)).toBe(200);
    await store.close();
  });
});
