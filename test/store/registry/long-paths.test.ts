// long-paths.test.ts: a 4,096-byte path pushes and pulls (files opened fd-relatively); a pulled name over 255 bytes is refused as malformed before anything is built.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, canonicalJson, manifestDigest, snapshotDigest, type ManifestEntry } from '../../../dist/index.js';
import { CONFIG_TYPE, ENTRIES_TYPE } from '../../../dist/internal.js';
import { storeLeftovers, tempDir, writeTree } from '../../helpers.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry } from './harness.js';

const registry = await testRegistry('plain');
const OCI = 'application/vnd.oci.image.manifest.v1+json';
const DIR = 'd'.repeat(250);

checkNoFileFdLeaks();

/** Removes a tree deeper than PATH_MAX (Node's rmSync cannot), frozen parts too. */
function removeDeep(dir: string): void {
  execFileSync('sh', ['-c', 'chmod -R u+rwx "$1" && rm -rf "$1"', 'sh', dir]);
}

/**
 * Writes src/ with two files whose paths are 4,096 bytes exactly ('src' + 16 directories of
 * 250 bytes + a 76-byte name): one small (in a pack), one over the 1 MiB threshold (its own blob).
 */
function writeDeep(source: string): { small: string; large: string } {
  const name = (c: string): string => 'f'.repeat(75) + c;
  writeTree(source, { 'src/top.txt': 'top\n' });
  const script = 'cd "$1/src" && for i in $(seq 16); do mkdir "$2" && cd "$2"; done && printf small > "$3" && head -c 1572864 /dev/urandom > "$4"';
  execFileSync('sh', ['-c', script, 'sh', source, DIR, name('s'), name('l')]);
  const dirs = `src/${Array(16).fill(DIR).join('/')}`;
  return { small: `${dirs}/${name('s')}`, large: `${dirs}/${name('l')}` };
}

describe.skipIf(registry === undefined)('long paths', () => {
  it('a snapshot with 4,096-byte paths (within maxPathBytes) pushes, pulls and verifies', async () => {
    const work = tempDir();
    try {
      const deep = writeDeep(join(work, 'source'));
      expect([Buffer.byteLength(deep.small), Buffer.byteLength(deep.large)]).toEqual([4096, 4096]);
      const a = await SnapshotStore.open(join(work, 'a'));
      const snap = await a.capture({ source: join(work, 'source'), copy: ['src'], revision: 'r'.repeat(40) });
      expect(snap.entries.map((e) => Buffer.byteLength(e.path)).filter((n) => n === 4096)).toHaveLength(2);
      const remote = `${registry!.address}/${repoName('deep')}`;
      expect(await a.push(snap.digest, remote)).toMatchObject({ existed: false, uploaded: 4 });
      const b = await SnapshotStore.open(join(work, 'b'));
      expect(await b.pull(snap.digest, remote)).toMatchObject({ downloaded: 4 });
      expect(await b.get(snap.digest).verify()).toMatchObject({ entries: snap.entries.length });
      expect(storeLeftovers(b.root)).toEqual([`snapshots/${snap.digest}`]);
      await a.close();
      await b.close();
    } finally {
      removeDeep(work);
    }
  });

  it('a pulled snapshot with a 300-byte name is SEAL_CORRUPT (malformed) and nothing is built', async () => {
    const work = tempDir();
    const short = `src/${'x'.repeat(200)}`;
    writeTree(join(work, 'source'), { [short]: 'named long\n' });
    const a = await SnapshotStore.open(join(work, 'a'));
    const snap = await a.capture({ source: join(work, 'source'), copy: ['src'], revision: 'r'.repeat(40) });
    const repo = repoName('longname');
    await a.push(snap.digest, `${registry!.address}/${repo}`);
    await a.close();

    // The same snapshot with the name made 300 bytes, its digests recomputed: well signed, but no filesystem can hold it.
    const original = readFileSync(join(snap.root, 'manifest.json'), 'utf8');
    const doc = JSON.parse(original) as Record<string, unknown> & { entries: ManifestEntry[] };
    expect(`${canonicalJson(doc as never)}\n`).toBe(original);
    const long = `src/${'x'.repeat(300)}`;
    doc.entries = doc.entries.map((e) => (e.path === short ? { ...e, path: long } : e));
    doc.manifest_digest = manifestDigest(doc.entries);
    doc.digest = snapshotDigest({
      source: doc.source as string,
      revision: doc.revision as string,
      declarations: doc.declarations as string[],
      manifestDigest: doc.manifest_digest as string,
      mountContentDigest: doc.mount_content_digest as string,
      mountManifestDigest: doc.mount_manifest_digest as string,
    });
    const config = Buffer.from(`${canonicalJson(doc as never)}\n`);
    const configDigest = `sha256:${createHash('sha256').update(config).digest('hex')}`;
    const base = `http://${registry!.address}/v2/${repo}`;
    const started = await fetch(`${base}/blobs/uploads/`, { method: 'POST' });
    const location = new URL(started.headers.get('location')!, base);
    location.searchParams.set('digest', configDigest);
    expect((await fetch(location, { method: 'PUT', body: config, headers: { 'content-type': 'application/octet-stream' } })).status).toBe(201);
    // Published as the first format does it (the whole manifest.json as the config), which pull still reads.
    const manifest = (await (await fetch(`${base}/manifests/ts-${snap.digest}`, { headers: { accept: OCI } })).json()) as { config: object; layers: { mediaType: string }[] };
    manifest.config = { mediaType: CONFIG_TYPE, digest: configDigest, size: config.length };
    manifest.layers = manifest.layers.filter((l) => l.mediaType !== ENTRIES_TYPE);
    const put = await fetch(`${base}/manifests/ts-${String(doc.digest)}`, { method: 'PUT', body: JSON.stringify(manifest), headers: { 'content-type': OCI } });
    expect(put.status).toBe(201);

    const b = await SnapshotStore.open(join(work, 'b'));
    const err = await fails(b.pull(String(doc.digest), `${registry!.address}/${repo}`));
    expect([err.code, err.message, err.path]).toEqual(['SEAL_CORRUPT', `${registry!.address}/${repo}:ts-${String(doc.digest)} does not hold a valid snapshot manifest: snapshot manifest is corrupt: a path component is longer than 255 bytes: ${long}`, long]);
    expect(storeLeftovers(b.root)).toEqual([]);
    await b.close();
  });
});
