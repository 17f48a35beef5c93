// failures.test.ts: a registry that lies, breaks or vanishes: each pull fails with a clear error and leaves nothing in the store.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type RetryNotice } from '../../../dist/index.js';
import { storeLeftovers, tempDir } from '../../helpers.js';
import { CAPTURE, writeSource } from './fixtures.js';
import { blobPath, checkNoFileFdLeaks, ownRegistry, repoName, tokenProxy } from './harness.js';

const registry = await ownRegistry();
const INDEX = fileURLToPath(new URL('../../../dist/index.js', import.meta.url));
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));
const OCI = 'application/vnd.oci.image.manifest.v1+json';

checkNoFileFdLeaks();

async function pushed(label: string, via?: string) {
  const work = tempDir();
  const source = join(work, 'source');
  writeSource(source);
  const a = await SnapshotStore.open(join(work, 'a'));
  const snap = await a.capture({ source, ...CAPTURE });
  const repo = repoName(label);
  await a.push(snap.digest, `${registry!.address}/${repo}`);
  await a.close();
  const remote = `${via ?? registry!.address}/${repo}`;
  const fresh = () => SnapshotStore.open(join(work, `b-${randomBytes(4).toString('hex')}`));
  return { work, source, snap, repo, remote, fresh };
}

async function getManifest(repo: string, tag: string): Promise<any> {
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/${tag}`, { headers: { accept: OCI } });
  return res.json();
}

async function putManifest(repo: string, tag: string, manifest: unknown): Promise<void> {
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/${tag}`, { method: 'PUT', headers: { 'content-type': OCI }, body: JSON.stringify(manifest) });
  expect(res.status).toBe(201);
}

async function pullFails(store: SnapshotStore, digest: string, remote: string, options = {}): Promise<SealError> {
  const err = await store.pull(digest, remote, options).then(
    () => new Error('pull unexpectedly succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SealError);
  expect(storeLeftovers(store.root)).toEqual([]);
  await store.close();
  return err as SealError;
}

const layerOf = (m: any, type: string) => m.layers.find((l: { mediaType: string }) => l.mediaType === type);
const PACK = 'application/vnd.treeseal.pack.v2';
const FILE = 'application/vnd.treeseal.file.v1';

describe.skipIf(registry === undefined)('pull refuses what the registry got wrong', () => {
  it('a tampered pack or file blob (same size, other bytes) is SEAL_CORRUPT: a pack by the sha256 of the content the byte fell in, naming its file; a file blob by its own', async () => {
    for (const type of [PACK, FILE]) {
      const { snap, repo, remote, fresh } = await pushed('tamper');
      const layer = layerOf(await getManifest(repo, `ts-${snap.digest}`), type);
      const path = blobPath(registry!.storage!, layer.digest);
      const bytes = readFileSync(path);
      bytes[bytes.length >> 1] ^= 0xff;
      writeFileSync(path, bytes);
      const err = await pullFails(await fresh(), snap.digest, remote);
      expect(err.code).toBe('SEAL_CORRUPT');
      if (type === FILE) {
        expect(err.message).toBe(`registry ${registry!.address} sent blob ${layer.digest} with other content`);
        continue;
      }
      expect(err.message).toMatch(new RegExp(`^pack ${layer.annotations['vnd.treeseal.bucket']} holds other bytes than the manifest says for (copy|mounts/00000/payload)/\\S+$`));
      expect(err.message.endsWith(` for ${err.path}`)).toBe(true);
    }
  });

  it('a pack whose blob digest was recomputed over other bytes is refused by its per-content sha256, naming the file (mutation: the check in writePack dropped)', async () => {
    const { snap, repo, remote, fresh } = await pushed('repacked');
    const manifest = await getManifest(repo, `ts-${snap.digest}`);
    const layer = layerOf(manifest, PACK);
    const bytes = readFileSync(blobPath(registry!.storage!, layer.digest));
    bytes[0] ^= 0xff;
    const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    const start = await fetch(`http://${registry!.address}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
    const location = new URL(start.headers.get('location')!, `http://${registry!.address}`);
    location.searchParams.set('digest', digest);
    expect((await fetch(location, { method: 'PUT', body: bytes, headers: { 'content-type': 'application/octet-stream' } })).status).toBe(201);
    layer.digest = digest;
    await putManifest(repo, `ts-${snap.digest}`, manifest);
    const err = await pullFails(await fresh(), snap.digest, remote);
    expect(err.code).toBe('SEAL_CORRUPT');
    expect(err.message).toMatch(new RegExp(`^pack ${layer.annotations['vnd.treeseal.bucket']} holds other bytes than the manifest says for (copy|mounts/00000/payload)/\\S+$`));
    expect(err.path).toMatch(/^(copy|mounts\/00000\/payload)\//);
  });

  it('a blob of the wrong size, in the manifest or on the wire, is SEAL_CORRUPT', async () => {
    const { snap, repo, remote, fresh } = await pushed('size');
    const tag = `ts-${snap.digest}`;
    const manifest = await getManifest(repo, tag);
    const pack = layerOf(manifest, PACK);
    const lying = structuredClone(manifest);
    layerOf(lying, PACK).size += 1;
    await putManifest(repo, tag, lying);
    let err = await pullFails(await fresh(), snap.digest, remote);
    expect(err.code).toBe('SEAL_CORRUPT');
    expect(err.message).toBe(`${remote}:${tag} does not match its snapshot manifest: pack 0 has size ${pack.size + 1}, its contents and their index add up to ${pack.size}`);

    await putManifest(repo, tag, manifest);
    truncateSync(blobPath(registry!.storage!, pack.digest), pack.size - 10);
    err = await pullFails(await fresh(), snap.digest, remote);
    expect(err.message).toBe(`registry ${registry!.address} sent ${pack.size - 10} bytes for blob ${pack.digest}, its manifest says ${pack.size}`);
  });

  it('a tag moved to another snapshot is SEAL_CORRUPT naming both digests', async () => {
    const first = await pushed('moved');
    const second = await pushed('moved-other');
    const other = await getManifest(second.repo, `ts-${second.snap.digest}`);
    // The other snapshot's blobs must exist in this repository for the registry to take its manifest.
    const store = await SnapshotStore.open(join(second.work, 'a'));
    await store.push(second.snap.digest, first.remote);
    await store.close();
    await putManifest(first.repo, `ts-${first.snap.digest}`, other);
    const err = await pullFails(await first.fresh(), first.snap.digest, first.remote);
    expect(err.code).toBe('SEAL_CORRUPT');
    expect(err.message).toBe(
      `${first.remote}:ts-${first.snap.digest} holds snapshot ${second.snap.digest}, not ${first.snap.digest} (the tag was moved or the registry lies)`,
    );
  });

  it('a response cut short is SEAL_REMOTE; an unreachable registry too', async () => {
    const proxy = await tokenProxy(registry!.address);
    for (const type of [PACK, FILE]) {
      const { snap, repo, remote, fresh } = await pushed('cut', proxy.address);
      const layer = layerOf(await getManifest(repo, `ts-${snap.digest}`), type);
      proxy.hooks.onRequest = (method, path) => (method === 'GET' && path.endsWith(layer.digest) ? 'truncate' : undefined);
      const err = await pullFails(await fresh(), snap.digest, remote, { retries: 0 });
      expect(err.code).toBe('SEAL_REMOTE');
      // cut in the headers' wake (fetch fails) or mid-body (the read fails): either way the blob is named
      expect(err.message).toMatch(new RegExp(`^registry ${proxy.address} is unreachable or dropped the connection while (reading blob |GET /v2/${repo}/blobs/)${layer.digest}: UND_ERR_SOCKET$`));
    }
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    const work = tempDir();
    const err = await pullFails(await SnapshotStore.open(join(work, 's')), 'a'.repeat(64), `127.0.0.1:${port}/x/y`);
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `registry 127.0.0.1:${port} is unreachable or dropped the connection while GET /v2/x/y/manifests/ts-${'a'.repeat(64)}: ECONNREFUSED`]);
  });

  it('a registry on a port fetch refuses (6000) is said as such at once, not retried as unreachable', async () => {
    // A listener there must see nothing: fetch refuses the port before it connects.
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.end();
    });
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(6000, '127.0.0.1', () => resolve(true));
    });
    try {
      const work = tempDir();
      const retried: unknown[] = [];
      const t = performance.now();
      const err = await pullFails(await SnapshotStore.open(join(work, 's')), 'a'.repeat(64), '127.0.0.1:6000/x/y', { onRetry: (r: unknown) => retried.push(r) });
      expect([err.code, err.message]).toEqual([
        'SEAL_REMOTE',
        `registry 127.0.0.1:6000 cannot be reached while GET /v2/x/y/manifests/ts-${'a'.repeat(64)}: Node's fetch refuses to connect to the port asked (the registry's, its token realm's or a redirect's: one the Fetch standard blocks, such as 6000, 5060, 6665–6669 or 10080); serve them on another port`,
      ]);
      expect(retried).toEqual([]);
      expect(performance.now() - t).toBeLessThan(2000);
      if (listening) expect(seen).toEqual([]);
    } finally {
      if (listening) await new Promise((resolve) => server.close(resolve));
    }
  });

  it('an aborted pull is SEAL_ABORTED and leaves nothing', async () => {
    const proxy = await tokenProxy(registry!.address);
    const { snap, remote, fresh } = await pushed('abort', proxy.address);
    const controller = new AbortController();
    proxy.hooks.onRequest = (method, path) => {
      if (method === 'GET' && path.includes('/blobs/') && !path.endsWith('uploads/')) controller.abort();
      return undefined;
    };
    const err = await pullFails(await fresh(), snap.digest, remote, { signal: controller.signal });
    expect([err.code, err.message, err.cause]).toEqual(['SEAL_ABORTED', 'pull was aborted', controller.signal.reason]);
  });

  it('a pull killed mid-way (SIGKILL) leaves no partial snapshot; the next open sweeps its build', async () => {
    const proxy = await tokenProxy(registry!.address);
    const { snap, repo, remote, work } = await pushed('kill', proxy.address);
    const file = layerOf(await getManifest(repo, `ts-${snap.digest}`), FILE);
    let stalled = false;
    proxy.hooks.onRequest = (method, path) => {
      if (method !== 'GET' || !path.endsWith(file.digest)) return undefined;
      stalled = true;
      return 'stall';
    };
    const storeDir = join(work, 'killed');
    const script = `import { SnapshotStore } from ${JSON.stringify(INDEX)};
const s = await SnapshotStore.open(${JSON.stringify(storeDir)});
await s.pull(${JSON.stringify(snap.digest)}, ${JSON.stringify(remote)});`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    const deadline = Date.now() + 30_000;
    while (!(stalled && readdirSync(join(storeDir, 'tmp')).some((n) => n.startsWith('build-')))) {
      if (Date.now() > deadline) throw new Error('the child never reached the stalled blob');
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGKILL');
    await exited;
    expect(readdirSync(join(storeDir, 'snapshots'))).toEqual([]);
    const reopened = await SnapshotStore.open(storeDir);
    expect(storeLeftovers(storeDir)).toEqual([]);
    proxy.hooks.onRequest = undefined;
    await reopened.pull(snap.digest, remote);
    expect(reopened.list()).toEqual([snap.digest]);
    await reopened.close();
  });

  it('retries a 503 with backoff, and names the registry error when it keeps failing', async () => {
    const proxy = await tokenProxy(registry!.address);
    const { snap, remote, fresh, work } = await pushed('retry', proxy.address);
    let failures = 2;
    proxy.hooks.onRequest = (method) => (method === 'GET' && failures-- > 0 ? 503 : undefined);
    const store = await fresh();
    const notices: RetryNotice[] = [];
    await store.pull(snap.digest, remote, { onRetry: (r) => notices.push(r), retries: 3 });
    expect(proxy.log.filter((l) => l.endsWith('-> 503'))).toHaveLength(2);
    // Each retry told before its wait: the request, the status, its number of the allowed, and the wait.
    expect(notices).toEqual([
      { what: expect.stringMatching(/^GET \/v2\//), reason: 'HTTP 503', attempt: 1, retries: 3, waitMs: expect.any(Number) },
      { what: expect.stringMatching(/^GET \/v2\//), reason: 'HTTP 503', attempt: 2, retries: 3, waitMs: expect.any(Number) },
    ]);
    // No Retry-After: backoff from 200 ms, doubling, ±25 % (a missing header once read as 0 s: every retry at once).
    const waits = notices.map((n) => n.waitMs);
    expect([waits[0]! >= 150 && waits[0]! <= 250, waits[1]! >= 300 && waits[1]! <= 500]).toEqual([true, true]);
    // A callback that is not a function is Node's TypeError, before anything is sent.
    await expect(store.pull(snap.digest, remote, { onRetry: 1 as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
    await store.close();
    // The command says each retry on stderr, and still succeeds.
    failures = 1;
    const cliStore = join(work, 'cli-store');
    // Spawned without blocking: the proxy answering it runs in this process.
    const cli = await new Promise<{ status: number | null; stderr: string }>((done) => {
      const child = spawn(process.execPath, [CLI, '--store', cliStore, 'pull', snap.digest, remote], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
      child.on('close', (status) => done({ status, stderr }));
    });
    expect([cli.status, cli.stderr.split('\n').length]).toEqual([0, 2]);
    expect(cli.stderr).toMatch(/^treeseal: pull: GET \/v2\/\S+ failed \(HTTP 503\); retry 1 of 4 in \d+\.\d s\n$/);
    proxy.hooks.onRequest = (method, path) => (method === 'PUT' && path.includes('/manifests/') ? 500 : undefined);
    const a = await SnapshotStore.open(join(work, 'a'));
    const other = `${proxy.address}/${repoName('retry-other')}`;
    const err = await a.push(snap.digest, other, { retries: 1 }).then(
      () => undefined,
      (e: SealError) => e,
    );
    expect([err?.code, err?.message]).toEqual(['SEAL_REMOTE', `registry ${proxy.address} refused PUT /v2/${other.slice(other.indexOf('/') + 1)}/manifests/ts-${snap.digest}: HTTP 500 TEST_500 (injected)`]);
    expect(proxy.log.filter((l) => l.endsWith('-> 500'))).toHaveLength(2);
    await a.close();
  });
});
