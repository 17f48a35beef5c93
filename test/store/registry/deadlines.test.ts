// deadlines.test.ts: a registry that never answers, trickles or stalls fails push and pull typed within a bounded time; a normal pull is unaffected.
import { execFile } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { storeLeftovers, tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry } from './harness.js';
import { forward, httpOn, silentServer } from './servers.js';

const registry = await testRegistry('plain');
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));
const OCI = 'application/vnd.oci.image.manifest.v1+json';
const FILE = 'application/vnd.treeseal.file.v1';
const PACK = 'application/vnd.treeseal.pack.v2';

checkNoFileFdLeaks();

type Mode = 'trickle' | 'silent' | 'stall-uploads' | undefined;

/** A proxy in front of the test registry that misbehaves on GETs of one blob (or on every upload) as told. */
async function slowProxy(): Promise<{ address: string; set: (mode: Mode, digest?: string) => void; gets: () => number }> {
  let mode: Mode;
  let target = '';
  let gets = 0;
  const address = await httpOn((req, res) => {
    const url = req.url ?? '/';
    if (mode === 'stall-uploads' && (req.method === 'PUT' || req.method === 'PATCH') && Number(req.headers['content-length'] ?? 0) > 0) {
      req.pause();
      return;
    }
    if (req.method !== 'GET' || !url.endsWith(`/blobs/${target}`) || mode === undefined || mode === 'stall-uploads') {
      forward(registry!.address, req, res);
      return;
    }
    gets++;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(10 * 1024 * 1024) });
    res.flushHeaders();
    if (mode === 'silent') return;
    const timer = setInterval(() => res.write('x'), 50);
    res.on('close', () => clearInterval(timer));
  });
  return {
    address,
    set: (m, digest) => {
      mode = m;
      target = digest ?? '';
    },
    gets: () => gets,
  };
}

async function layer(repo: string, digest: string, type: string): Promise<string> {
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/ts-${digest}`, { headers: { accept: OCI } });
  const m = (await res.json()) as { layers: { mediaType: string; digest: string }[] };
  return m.layers.find((l) => l.mediaType === type)!.digest;
}

async function timed<T>(p: Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const v = await p;
  return [v, performance.now() - started];
}

describe('a registry that accepts and never answers', () => {
  it('fails typed after the headers deadline, each attempt retried, within a bounded time', async () => {
    const silent = await silentServer();
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const digest = 'b'.repeat(64);
    const [err, ms] = await timed(fails(store.pull(digest, `${silent.address}/x/y`, { timeouts: { headersMs: 300 }, retries: 1 })));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `registry ${silent.address} timed out while GET /v2/x/y/manifests/ts-${digest}: no response in 300 ms`]);
    // Each attempt connected (undici may open a spare connection beside the one an attempt uses) ...
    expect(silent.connections()).toBeGreaterThanOrEqual(2);
    expect(silent.connections()).toBeLessThanOrEqual(4);
    // ... and the pull closed every connection it opened before it returned.
    expect(await silent.open()).toBe(0);
    expect(ms).toBeLessThan(5_000);
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  }, 20_000);

  it('treeseal pull --timeout SECONDS sets the deadline; a bad value is a usage error', async () => {
    const silent = await silentServer();
    const store = join(tempDir(), 's');
    const run = (...args: string[]) =>
      new Promise<{ status: number; stderr: string }>((resolve) => {
        execFile(process.execPath, [CLI, '--store', store, ...args], { encoding: 'utf8' }, (err, _stdout, stderr) => {
          resolve({ status: err === null ? 0 : Number((err as { code?: number }).code), stderr });
        });
      });
    const digest = 'c'.repeat(64);
    const [r, ms] = await timed(run('pull', digest, `${silent.address}/x/y`, '--timeout', '0.2'));
    // Each of the default 4 retries said as it happens, then the error.
    const request = `GET /v2/x/y/manifests/ts-${digest}`;
    const lines = r.stderr.split('\n');
    expect([r.status, lines.length, lines.slice(4)]).toEqual([1, 6, [`treeseal: SEAL_REMOTE: registry ${silent.address} timed out while ${request}: no response in 200 ms`, '']]);
    lines.slice(0, 4).forEach((line, i) => expect(line).toMatch(new RegExp(`^treeseal: pull: ${request} failed \\(no response in 200 ms\\); retry ${i + 1} of 4 in \\d+\\.\\d s$`)));
    // The default 4 retries with backoff from 200 ms: five attempts, a few seconds in all.
    expect(silent.connections()).toBeGreaterThanOrEqual(5);
    expect(ms).toBeLessThan(15_000);
    const usage = await run('pull', digest, `${silent.address}/x/y`, '--timeout', '0');
    expect([usage.status, usage.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --timeout takes seconds from 0.001 to 86400, not "0"']);
  }, 30_000);
});

describe.skipIf(registry === undefined)('a registry that trickles or stalls', () => {
  it('a blob trickled below the rate floor, or that stops, fails typed; nothing is left; a normal pull is unaffected', async () => {
    const { work, store: a, snap } = await captured();
    const repo = repoName('slow');
    await a.push(snap.digest, `${registry!.address}/${repo}`);
    const proxy = await slowProxy();
    const remote = `${proxy.address}/${repo}`;
    const file = await layer(repo, snap.digest, FILE);
    const pack = await layer(repo, snap.digest, PACK);

    proxy.set('trickle', file);
    const b = await SnapshotStore.open(join(work, 'b'));
    const timeouts = { idleMs: 400, minBytesPerSecond: 1000 };
    let [err, ms] = await timed(fails(b.pull(snap.digest, remote, { timeouts, retries: 0 })));
    expect(err.code).toBe('SEAL_REMOTE');
    // A loaded machine can starve the trickle long enough that the idle deadline fires first: either is this deadline's failure.
    expect(err.message).toMatch(new RegExp(`^registry ${proxy.address} timed out while reading blob ${file}: (slower than 1000 bytes/s over 400 ms|no data for 400 ms)$`));
    expect(ms).toBeLessThan(5_000);
    expect(storeLeftovers(b.root)).toEqual([]);

    // Headers, then nothing: the idle deadline, and the blob is asked for again (retries: 1).
    proxy.set('silent', pack);
    [err, ms] = await timed(fails(b.pull(snap.digest, remote, { timeouts: { idleMs: 300 }, retries: 1 })));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `registry ${proxy.address} timed out while reading blob ${pack}: no data for 300 ms`]);
    expect(proxy.gets()).toBe(1 + 2);
    expect(ms).toBeLessThan(5_000);
    expect(storeLeftovers(b.root)).toEqual([]);

    proxy.set(undefined);
    expect(await b.pull(snap.digest, remote, { timeouts: { headersMs: 5_000, idleMs: 5_000, minBytesPerSecond: 1024 } })).toMatchObject({ downloaded: 5 });
    const c = await SnapshotStore.open(join(work, 'c'));
    expect(await c.pull(snap.digest, remote)).toMatchObject({ downloaded: 5 });
    expect(await b.get(snap.digest).verify()).toEqual(await c.get(snap.digest).verify());

    // A registry that stops reading an upload and never answers: push fails typed too.
    proxy.set('stall-uploads');
    [err, ms] = await timed(fails(a.push(snap.digest, `${proxy.address}/${repoName('stalled')}`, { timeouts: { headersMs: 300, idleMs: 300 }, retries: 0 })));
    expect(err.code).toBe('SEAL_REMOTE');
    // The upload stalls. On a loaded machine another request of the upload (the POST that opens it, the HEAD
    // that asks whether the stalled blob landed) can be the first to pass 300 ms: each is this deadline's failure.
    expect(err.message).toMatch(new RegExp(`^registry ${proxy.address} timed out while (POST|PUT|PATCH|HEAD) /v2/\\S+: (no response|could not send) (in|for) 300 ms$`));
    expect(ms).toBeLessThan(5_000);
    for (const s of [a, b, c]) await s.close();
  }, 30_000);
});

describe('options.timeouts', () => {
  it('is checked as Node checks options', async () => {
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const pull = (timeouts: unknown) => store.pull('d'.repeat(64), '127.0.0.1:1/x', { timeouts: timeouts as never });
    await expect(pull('5')).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: `The "options.timeouts" property must be of type object. Received type string ('5')`,
    });
    await expect(pull({ headersMs: '5' })).rejects.toMatchObject({
      name: 'TypeError',
      code: 'ERR_INVALID_ARG_TYPE',
      message: `The "options.timeouts.headersMs" property must be of type number. Received type string ('5')`,
    });
    await expect(pull({ idleMs: 0 })).rejects.toMatchObject({
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.timeouts.idleMs" is out of range. It must be >= 1 && <= 2147483647. Received 0',
    });
    await expect(pull({ minBytesPerSecond: 1.5 })).rejects.toMatchObject({
      name: 'RangeError',
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.timeouts.minBytesPerSecond" is out of range. It must be an integer. Received 1.5',
    });
    await store.close();
  });
});

describe('connections', () => {
  it('a pull closes every connection it opened before it returns, keep-alive ones included', async () => {
    const sockets = new Set<import('node:net').Socket>();
    const server = createHttpServer((_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN"}]}'));
    server.on('connection', (s) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = `127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}`;
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const err = await fails(store.pull('c'.repeat(64), `${address}/x/y`));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `snapshot ${'c'.repeat(64)} is not in ${address}/x/y (no tag ts-${'c'.repeat(64)}): HTTP 404 MANIFEST_UNKNOWN`]);
    await new Promise((r) => setTimeout(r, 100));
    expect(sockets.size).toBe(0);
    await store.close();
    server.close();
  });
});
