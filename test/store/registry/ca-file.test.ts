// ca-file.test.ts: a registry whose certificate a private CA signed (docker-registry with http.tls): refused without the CA, trusted
// through options.caFile, TREESEAL_CA_FILE and --ca-file, also through an HTTPS_PROXY tunnel (CONNECT); bad CA files and values.
import { execFile } from 'node:child_process';
import { truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { mkfifo, storeLeftovers, tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, ownRegistry, repoName } from './harness.js';
import { forwardProxy, privateCa } from './servers.js';

const ca = privateCa();
const registry = await ownRegistry({ certFile: ca.certFile, keyFile: ca.keyFile, caPem: ca.caPem });
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));

checkNoFileFdLeaks();

const VARS = ['TREESEAL_CA_FILE', 'HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy', 'NO_PROXY', 'no_proxy'];
const saved = Object.fromEntries(VARS.map((k) => [k, process.env[k]]));
for (const k of VARS) delete process.env[k];
afterEach(() => {
  for (const k of VARS) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

/** treeseal with the given store and environment (asynchronous: the proxy answering it runs in this process). */
function cli(store: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, '--store', store, ...args], { encoding: 'utf8', env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : Number((err as { code?: number }).code), stdout, stderr });
    });
  });
}

describe.skipIf(registry === undefined)('a registry signed by a private CA', () => {
  it('is refused without the CA (not retried); trusted with options.caFile, TREESEAL_CA_FILE and --ca-file', async () => {
    const { work, store: a, snap } = await captured();
    const repo = repoName('private-ca');
    const remote = `https://${registry!.address}/${repo}`;
    const started = performance.now();
    const refused = await fails(a.push(snap.digest, remote));
    expect([refused.code, refused.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${registry!.address} is unreachable or dropped the connection while GET /v2/${repo}/manifests/ts-${snap.digest}: UNABLE_TO_VERIFY_LEAF_SIGNATURE`,
    ]);
    expect(performance.now() - started).toBeLessThan(2_000);

    const pushed = await a.push(snap.digest, remote, { caFile: ca.caFile });
    expect(pushed).toMatchObject({ existed: false, uploaded: pushed.blobs });
    process.env.TREESEAL_CA_FILE = ca.caFile;
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote)).toMatchObject({ downloaded: pushed.blobs });
    expect(b.get(snap.digest).toJSON()).toEqual(snap.toJSON());
    delete process.env.TREESEAL_CA_FILE;

    const pulled = await cli(join(work, 'c'), ['pull', snap.digest, remote, '--ca-file', ca.caFile, '--json']);
    expect([pulled.status, pulled.stderr]).toEqual([0, '']);
    expect(JSON.parse(pulled.stdout)).toMatchObject({ digest: snap.digest, downloaded: pushed.blobs });
    const again = await cli(join(work, 'a'), ['push', snap.digest, remote, '--ca-file', ca.caFile, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ existed: true });
    const without = await cli(join(work, 'd'), ['pull', snap.digest, remote]);
    expect([without.status, without.stderr]).toEqual([1, `treeseal: SEAL_REMOTE: ${refused.message}\n`]);
    const usage = await cli(join(work, 'd'), ['pull', snap.digest, remote, '--ca-file=']);
    expect([usage.status, usage.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --ca-file takes the path of a PEM file']);
    await a.close();
    await b.close();
  });

  it('through HTTPS_PROXY: one CONNECT tunnel to the registry, the CA trusted inside it; the proxy sees no request or credentials', async () => {
    const proxy = await forwardProxy();
    const { work, store: a, snap } = await captured();
    const remote = `https://${registry!.address}/${repoName('tunnel')}`;
    process.env.HTTPS_PROXY = `http://${proxy.address}`;
    process.env.NO_PROXY = 'example.invalid';
    const pushed = await a.push(snap.digest, remote, { caFile: ca.caFile, credentials: { username: 'u', password: 'never-seen-by-the-proxy' } });
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote, { caFile: ca.caFile })).toMatchObject({ downloaded: pushed.blobs });
    expect(proxy.seen.length).toBeGreaterThan(0);
    expect(proxy.seen.map((s) => [s.line, s.authorization])).toEqual(proxy.seen.map(() => [`CONNECT ${registry!.address}`, undefined]));
    // A proxy that refuses the tunnel: typed, named, not retried.
    const strict = await forwardProxy('Basic bm9ib2R5Om5vdGhpbmc=');
    process.env.HTTPS_PROXY = `http://${strict.address}`;
    const c = await SnapshotStore.open(join(work, 'c'));
    const err = await fails(c.pull(snap.digest, remote, { caFile: ca.caFile }));
    expect([err.code, err.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${registry!.address} is unreachable or dropped the connection while GET ${new URL(remote).pathname.replace(/^/, '/v2')}/manifests/ts-${snap.digest}: the proxy refused it: Proxy response (407) !== 200 when HTTP Tunneling`,
    ]);
    expect(strict.seen).toHaveLength(1);
    expect(storeLeftovers(c.root)).toEqual([]);
    await a.close();
    await b.close();
    await c.close();
  });

  it('a CA file that cannot be read or holds no certificate is SEAL_REMOTE naming it; a caFile that is not a path is Node\'s error', async () => {
    const dir = tempDir();
    const store = await SnapshotStore.open(join(dir, 's'));
    const remote = `https://${registry!.address}/x/y`;
    const digest = 'e'.repeat(64);
    let err = await fails(store.pull(digest, remote, { caFile: join(dir, 'missing.pem') }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `CA file cannot be read: ${join(dir, 'missing.pem')}: ENOENT`]);
    writeFileSync(join(dir, 'key.pem'), ca.key);
    process.env.TREESEAL_CA_FILE = join(dir, 'key.pem');
    err = await fails(store.pull(digest, remote));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `CA file holds no PEM certificate: ${join(dir, 'key.pem')}`]);
    delete process.env.TREESEAL_CA_FILE;
    // A device or a FIFO is no CA file: refused at once (/dev/zero was read until the heap gave out, a FIFO waited for a writer for ever).
    mkfifo(join(dir, 'fifo.pem'));
    for (const file of ['/dev/zero', join(dir, 'fifo.pem')]) {
      err = await fails(store.pull(digest, remote, { caFile: file }));
      expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `CA file cannot be read: ${file}: not a regular file`]);
    }
    // Bounded at 16 MiB: one byte more is refused before a byte is read; exactly that much is read (and holds no certificate).
    const big = join(dir, 'big.pem');
    writeFileSync(big, '');
    truncateSync(big, 16 * 1024 * 1024 + 1);
    err = await fails(store.pull(digest, remote, { caFile: big }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `CA file cannot be read: ${big}: larger than 16777216 bytes`]);
    truncateSync(big, 16 * 1024 * 1024);
    err = await fails(store.pull(digest, remote, { caFile: big }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `CA file holds no PEM certificate: ${big}`]);
    await expect(store.pull(digest, remote, { caFile: 7 as never })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.caFile" property must be of type string. Received type number (7)',
    });
    await expect(store.pull(digest, remote, { caFile: '' })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.caFile' must be a path to a PEM file. Received ''",
    });
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});
