// tags.test.ts: push --tag (and the tag derived from a revision), pull by tag and by manifest digest, the OCI annotations, and their bad input, against a real registry.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { rootOrSkip, storeLeftovers } from '../../helpers.js';
import { CAPTURE, captured, describeTree } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy } from './harness.js';
import { httpOn } from './servers.js';

const registry = await testRegistry('plain');
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));
const OCI = 'application/vnd.oci.image.manifest.v1+json';

checkNoFileFdLeaks();

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** A manifest straight from the registry (not through the client under test): its bytes and JSON. */
async function manifestAt(repo: string, reference: string): Promise<{ bytes: Buffer; json: { annotations: Record<string, string> } } | undefined> {
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/${reference}`, { headers: { accept: OCI } });
  if (res.status === 404) return (await res.body?.cancel(), undefined);
  const bytes = Buffer.from(await res.arrayBuffer());
  return { bytes, json: JSON.parse(bytes.toString('utf8')) };
}

const blobRequests = (log: string[]): string[] => log.filter((l) => /\/blobs\//.test(l));

async function setup(label: string) {
  const { work, store: a, snap } = await captured();
  const proxy = await tokenProxy(registry!.address);
  const repo = repoName(label);
  return { work, a, snap, proxy, repo, remote: `${proxy.address}/${repo}` };
}

describe.skipIf(registry === undefined)('tags, pulls by tag and by manifest digest, annotations', () => {
  it('push --tag points ts-<digest> and the tag at one manifest with the OCI annotations; pull by tag and by manifest digest give the same snapshot', async () => {
    const { work, a, snap, proxy, repo, remote } = await setup('tags');
    const pushed = await a.push(snap.digest, remote, { tag: 'release-1.2_x' });
    expect(pushed).toMatchObject({ tag: `ts-${snap.digest}`, tags: [`ts-${snap.digest}`, 'release-1.2_x'], existed: false, uploaded: 5 });
    const byDigest = (await manifestAt(repo, `ts-${snap.digest}`))!;
    const byTag = (await manifestAt(repo, 'release-1.2_x'))!;
    expect(byTag.bytes.equals(byDigest.bytes)).toBe(true);
    expect(pushed.manifestDigest).toBe(`sha256:${sha256(byTag.bytes)}`);
    // created: when the snapshot was published in this store (its directory's mtime), to the second.
    const created = new Date(Number(statSync(snap.root, { bigint: true }).mtimeNs / 1_000_000n)).toISOString().replace(/\.\d{3}Z$/, 'Z');
    expect(byTag.json.annotations).toEqual({
      'org.opencontainers.image.created': created,
      'org.opencontainers.image.revision': 'r'.repeat(40),
      'org.opencontainers.image.source': join(work, 'source'),
      'vnd.treeseal.snapshot': snap.digest,
      'vnd.treeseal.threshold': String(1024 * 1024),
      'vnd.treeseal.buckets': '1',
    });

    const b = await SnapshotStore.open(join(work, 'b'));
    proxy.log.length = 0;
    expect(await b.pull({ tag: 'release-1.2_x' }, remote)).toMatchObject({
      digest: snap.digest,
      tag: 'release-1.2_x',
      manifestDigest: pushed.manifestDigest,
      existed: false,
      downloaded: 5,
    });
    expect(describeTree(b.get(snap.digest).root)).toEqual(describeTree(snap.root));
    expect(blobRequests(proxy.log)).toHaveLength(5);
    // Held already: known from the manifest alone (its config is this snapshot's manifest.json), no blob fetched.
    proxy.log.length = 0;
    expect(await b.pull({ tag: 'release-1.2_x' }, remote)).toMatchObject({ digest: snap.digest, existed: true, downloaded: 0, manifestDigest: pushed.manifestDigest });
    expect(proxy.log).toEqual([`GET /v2/${repo}/manifests/release-1.2_x`]);
    expect(storeLeftovers(b.root)).toEqual([`snapshots/${snap.digest}`]);

    const c = await SnapshotStore.open(join(work, 'c'));
    expect(await c.pull({ manifest: pushed.manifestDigest }, remote)).toMatchObject({ digest: snap.digest, tag: undefined, manifestDigest: pushed.manifestDigest, existed: false, downloaded: 5 });
    expect(c.get(snap.digest).toJSON()).toEqual(snap.toJSON());
    expect(await c.pull({ manifest: pushed.manifestDigest.slice('sha256:'.length) }, remote)).toMatchObject({ existed: true, manifestDigest: pushed.manifestDigest });
    expect(storeLeftovers(c.root)).toEqual([`snapshots/${snap.digest}`]);
    for (const s of [a, b, c]) await s.close();
  });

  it('without a tag the revision names one (as it is, or cleaned and hashed); a re-push points a new tag at the manifest without a blob', async () => {
    const { work, a, snap, proxy, repo, remote } = await setup('derived');
    expect((await a.push(snap.digest, remote)).tags).toEqual([`ts-${snap.digest}`, 'r'.repeat(40)]);
    proxy.log.length = 0;
    const again = await a.push(snap.digest, remote, { tag: 'second' });
    expect(again).toMatchObject({ existed: true, uploaded: 0, bytesUploaded: 0, tags: [`ts-${snap.digest}`, 'second'] });
    expect(proxy.log).toEqual([`GET /v2/${repo}/manifests/ts-${snap.digest}`, `GET /v2/${repo}/manifests/second`, `PUT /v2/${repo}/manifests/second`]);
    expect((await manifestAt(repo, 'second'))!.bytes.equals((await manifestAt(repo, `ts-${snap.digest}`))!.bytes)).toBe(true);
    proxy.log.length = 0;
    await a.push(snap.digest, remote, { tag: 'second' });
    expect(proxy.log.every((l) => l.startsWith('GET '))).toBe(true);

    const source = join(work, 'source');
    const cases: [string, string[]][] = [
      ['feature/x y', [`feature-x-y-${sha256('feature/x y').slice(0, 8)}`]],
      [`ts-${'a'.repeat(64)}`, [`ts-${'a'.repeat(64)}-${sha256(`ts-${'a'.repeat(64)}`).slice(0, 8)}`]],
      ['/', [`rev-${sha256('/').slice(0, 8)}`]],
      ['', []],
    ];
    for (const [revision, named] of cases) {
      const other = await a.capture({ source, ...CAPTURE, revision });
      expect([revision, (await a.push(other.digest, remote)).tags]).toEqual([revision, [`ts-${other.digest}`, ...named]]);
    }
    await a.close();
  });

  it('a bad tag, manifest digest or reference is refused as Node refuses arguments, before anything is sent; nothing is left behind', async () => {
    const { work, a, snap, proxy, repo, remote } = await setup('bad-refs');
    const badTags: [unknown, string][] = [
      ['has space', "The property 'options.tag' must be an OCI tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}). Received 'has space'"],
      ['-lead', "The property 'options.tag' must be an OCI tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}). Received '-lead'"],
      ['x'.repeat(129), `The property 'options.tag' must be an OCI tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}). Received '${'x'.repeat(127)}...`],
      [`ts-${'a'.repeat(64)}`, `The property 'options.tag' is of the form push gives every snapshot (ts-<digest>); pull by the digest instead. Received 'ts-${'a'.repeat(64)}'`],
    ];
    for (const [tag, message] of badTags) {
      await expect(a.push(snap.digest, remote, { tag: tag as string })).rejects.toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE', message });
    }
    await expect(a.push(snap.digest, remote, { tag: 7 as never })).rejects.toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' });
    const b = await SnapshotStore.open(join(work, 'b'));
    const badRefs: [unknown, string, string][] = [
      [{ tag: 'bad tag' }, 'ERR_INVALID_ARG_VALUE', "The property 'snapshot.tag' must be an OCI tag ([a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}). Received 'bad tag'"],
      [{ manifest: 'sha256:abc' }, 'ERR_INVALID_ARG_VALUE', "The property 'snapshot.manifest' must be an image manifest digest (sha256: and 64 lower-case hex digits). Received 'sha256:abc'"],
      [{ manifest: `md5:${'a'.repeat(64)}` }, 'ERR_INVALID_ARG_VALUE', `The property 'snapshot.manifest' must be an image manifest digest (sha256: and 64 lower-case hex digits). Received 'md5:${'a'.repeat(64)}'`],
      [{ tag: 'a', manifest: 'b' }, 'ERR_INVALID_ARG_VALUE', "The argument 'snapshot' must be a snapshot digest, { tag } or { manifest }. Received { tag: 'a', manifest: 'b' }"],
      [{}, 'ERR_INVALID_ARG_VALUE', "The argument 'snapshot' must be a snapshot digest, { tag } or { manifest }. Received {}"],
      [7, 'ERR_INVALID_ARG_TYPE', 'The "snapshot" argument must be one of type string or object. Received type number (7)'],
      [null, 'ERR_INVALID_ARG_TYPE', 'The "snapshot" argument must be one of type string or object. Received null'],
      [{ tag: 5 }, 'ERR_INVALID_ARG_TYPE', 'The "snapshot.tag" property must be of type string. Received type number (5)'],
    ];
    for (const [ref, code, message] of badRefs) {
      await expect(b.pull(ref as never, remote)).rejects.toMatchObject({ name: 'TypeError', code, message });
    }
    expect(proxy.log).toEqual([]);
    expect(await manifestAt(repo, `ts-${snap.digest}`)).toBeUndefined();
    expect(storeLeftovers(b.root)).toEqual([]);
    expect(storeLeftovers(a.root)).toEqual([`snapshots/${snap.digest}`]);
    await a.close();
    await b.close();
  });

  it("a tag or manifest digest the repository lacks is SEAL_REMOTE with the registry's answer; a manifest whose bytes do not hash to the digest asked for is SEAL_CORRUPT", async () => {
    const { work, a, snap, remote } = await setup('missing-refs');
    const pushed = await a.push(snap.digest, remote);
    const b = await SnapshotStore.open(join(work, 'b'));
    let err = await fails(b.pull({ tag: 'missing' }, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `tag missing is not in ${remote}: HTTP 404 MANIFEST_UNKNOWN (manifest unknown)`]);
    err = await fails(b.pull({ manifest: `sha256:${'0'.repeat(64)}` }, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `manifest sha256:${'0'.repeat(64)} is not in ${remote}: HTTP 404 MANIFEST_UNKNOWN (manifest unknown)`]);
    // A registry that answers a manifest digest with other bytes (here: the real manifest, one byte added).
    const real = (await manifestAt(remote.slice(remote.indexOf('/') + 1), pushed.manifestDigest))!.bytes;
    const lying = await httpOn((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': OCI }).end(Buffer.concat([real, Buffer.from(' ')]));
    });
    err = await fails(b.pull({ manifest: pushed.manifestDigest }, `${lying}/team/x`));
    expect([err.code, err.message]).toEqual(['SEAL_CORRUPT', `registry ${lying} answered manifest ${pushed.manifestDigest} with other bytes (sha256:${sha256(Buffer.concat([real, Buffer.from(' ')]))})`]);
    expect(storeLeftovers(b.root)).toEqual([]);
    await a.close();
    await b.close();
  });

  it('treeseal push --tag, pull --tag and pull --manifest; --tag with --manifest, or a <digest> besides either, is a usage error', async () => {
    const { work, a, snap, remote } = await setup('cli-tags');
    await a.close();
    const run = (store: string, ...args: string[]) =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, [CLI, '--store', store, ...args], { encoding: 'utf8' }, (err, stdout, stderr) => {
          resolve({ status: err === null ? 0 : Number((err as { code?: number }).code), stdout, stderr });
        });
      });
    const pushed = await run(join(work, 'a'), 'push', snap.digest, remote, '--tag', 'v1');
    expect(pushed.stderr).toBe('');
    const manifest = /; manifest (sha256:[0-9a-f]{64})\n$/.exec(pushed.stdout)?.[1];
    expect(pushed.stdout).toMatch(new RegExp(`^pushed ${snap.digest.slice(0, 12)} to ${remote}:ts-${snap.digest} \\(also tagged v1\\): 5 of 5 blobs uploaded`));
    const byTag = await run(join(work, 'b'), 'pull', '--tag', 'v1', remote);
    expect([byTag.status, byTag.stderr]).toEqual([0, '']);
    expect(byTag.stdout).toMatch(new RegExp(`^pulled ${snap.digest.slice(0, 12)} from ${remote}:v1: 5 of 5 blobs downloaded`));
    const byManifest = await run(join(work, 'c'), 'pull', '--manifest', manifest!, remote, '--json');
    expect(JSON.parse(byManifest.stdout)).toMatchObject({ digest: snap.digest, manifestDigest: manifest, existed: false });
    const both = await run(join(work, 'd'), 'pull', '--tag', 'v1', '--manifest', manifest!, remote);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/^treeseal: pull takes --tag or --manifest, not both\n/);
    const extra = await run(join(work, 'd'), 'pull', '--tag', 'v1', snap.digest, remote);
    expect(extra.status).toBe(2);
    expect(extra.stderr).toMatch(/^treeseal: pull takes <remote> with --tag \(and no <digest>\)\n/);
  });

  it('through a store on a read-only mount: a pull by tag or manifest digest of a snapshot it holds is `existed`, one of a snapshot it lacks SEAL_IO before a blob is fetched (both were SEAL_IO before the manifest was read)', async () => {
    if (!rootOrSkip('a read-only bind mount')) return;
    const { work, a, snap, proxy, remote } = await setup('read-only');
    const pushed = await a.push(snap.digest, remote, { tag: 'held' });
    const other = await a.capture({ source: join(work, 'source'), ...CAPTURE, revision: 'other' });
    await a.push(other.digest, remote, { tag: 'lacked' });
    await a.remove(other.digest);
    const ro = join(work, 'ro');
    mkdirSync(ro);
    execFileSync('mount', ['--bind', a.root, ro]);
    try {
      execFileSync('mount', ['-o', 'remount,bind,ro', ro]);
      const reader = await SnapshotStore.open(ro);
      expect(reader.readOnly).toBe(true);
      expect(await reader.pull({ tag: 'held' }, remote)).toMatchObject({ digest: snap.digest, existed: true, downloaded: 0 });
      expect(await reader.pull({ manifest: pushed.manifestDigest }, remote)).toMatchObject({ digest: snap.digest, existed: true, downloaded: 0 });
      proxy.log.length = 0;
      await expect(reader.pull({ tag: 'lacked' }, remote)).rejects.toMatchObject({ code: 'SEAL_IO', message: expect.stringMatching(/^store is on a read-only filesystem: pull cannot write it: /) });
      expect(blobRequests(proxy.log)).toEqual([]);
      await reader.close();
    } finally {
      execFileSync('umount', [ro]);
    }
    await a.close();
  });
});

