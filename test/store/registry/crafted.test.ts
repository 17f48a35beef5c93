// crafted.test.ts: an artifact whose every digest was recomputed to match a document capture would refuse is refused by pull, before anything is built.
import { readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../../dist/index.js';
import { CONFIG_TYPE, EMPTY_BLOB, EMPTY_DIGEST, chooseLayout, layersOf, manifestOf, sha256Hex } from '../../../dist/internal.js';
import { storeLeftovers, tempDir } from '../../helpers.js';
import { CASES, text, valid, validWithLinks, type Doc } from '../documents.js';
import { checkNoFileFdLeaks, repoName, testRegistry } from './harness.js';

const registry = await testRegistry('plain');
const OCI = 'application/vnd.oci.image.manifest.v1+json';

checkNoFileFdLeaks();

async function putBlob(repo: string, bytes: Buffer): Promise<string> {
  const digest = `sha256:${sha256Hex(bytes)}`;
  const start = await fetch(`http://${registry!.address}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  expect(start.status).toBe(202);
  const location = new URL(start.headers.get('location')!, `http://${registry!.address}`);
  location.searchParams.set('digest', digest);
  const put = await fetch(location, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: bytes });
  expect(put.status).toBe(201);
  return digest;
}

/** Publishes the document as a treeseal artifact (config, the empty layer, the manifest at its usual tag). */
async function publish(d: Doc): Promise<{ digest: string; remote: string }> {
  const { digest, text: config } = text(d);
  const repo = repoName('crafted');
  const configBytes = Buffer.from(config);
  const configDigest = await putBlob(repo, configBytes);
  expect(await putBlob(repo, EMPTY_BLOB)).toBe(EMPTY_DIGEST);
  // Every file is empty: the layout has no packs and no file blobs, only the empty layer.
  const layout = chooseLayout({ ...d, digest, entries: d.entries, mounts: d.mounts } as never);
  const manifest = manifestOf(digest, layout, { mediaType: CONFIG_TYPE, digest: configDigest, size: configBytes.length }, layersOf(layout, []));
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/ts-${digest}`, { method: 'PUT', headers: { 'content-type': OCI }, body: manifest });
  expect(res.status).toBe(201);
  return { digest, remote: `${registry!.address}/${repo}` };
}

describe.skipIf(registry === undefined)('pull of a crafted artifact', () => {
  it('the valid template pulls and verifies (so each refusal below is the one change)', async () => {
    const { digest, remote } = await publish(valid());
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    await store.pull(digest, remote);
    await (await store.get(digest)).verify();
    await store.close();
  });

  it('a template with contained copy-root links pulls and verifies, its links made', async () => {
    const { digest, remote } = await publish(validWithLinks());
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    await store.pull(digest, remote);
    const snap = await store.get(digest);
    await snap.verify();
    expect(readlinkSync(join(snap.root, 'copy/src/m'))).toBe('../node_modules/i.js');
    await store.close();
  });

  it.each(CASES)('is SEAL_CORRUPT and leaves nothing: %s', async (_name, mutate, why) => {
    const d = valid();
    mutate(d);
    const { digest, remote } = await publish(d);
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    const err = await store.pull(digest, remote).then(() => undefined, (e: unknown) => e as SealError);
    expect(err).toBeInstanceOf(SealError);
    expect([err!.code, err!.message]).toEqual(['SEAL_CORRUPT', `${remote}:ts-${digest} does not hold a valid snapshot manifest: snapshot manifest is corrupt: ${why}`]);
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});
