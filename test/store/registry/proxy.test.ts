// proxy.test.ts: HTTP_PROXY / HTTPS_PROXY / NO_PROXY (and their lower-case forms) through undici's EnvHttpProxyAgent, against a real
// forward proxy written here: loopback registries direct while NO_PROXY is unset, NO_PROXY as undici matches it, proxy credentials.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { DIST_INDEX, storeLeftovers } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry } from './harness.js';
import { forwardProxy } from './servers.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

const VARS = ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy'];
const saved = Object.fromEntries(VARS.map((k) => [k, process.env[k]]));
function clearProxyEnv(): void {
  for (const k of VARS) delete process.env[k];
}
clearProxyEnv();
afterEach(() => {
  clearProxyEnv();
  for (const k of VARS) if (saved[k] !== undefined) process.env[k] = saved[k];
});

describe.skipIf(registry === undefined)('proxies from the environment', () => {
  it('with HTTP_PROXY and HTTPS_PROXY set and NO_PROXY unset, a loopback registry is reached directly', async () => {
    const proxy = await forwardProxy();
    const { work, store: a, snap } = await captured();
    const remote = `${registry!.address}/${repoName('proxy-direct')}`;
    process.env.HTTP_PROXY = `http://${proxy.address}`;
    process.env.https_proxy = `http://${proxy.address}`;
    await a.push(snap.digest, remote);
    const b = await SnapshotStore.open(join(work, 'b'));
    await b.pull(snap.digest, remote);
    process.env.NO_PROXY = '';
    expect(await a.push(snap.digest, remote)).toMatchObject({ existed: true });
    expect(proxy.seen).toEqual([]);
    await a.close();
    await b.close();
  });

  it('once NO_PROXY is set, it alone decides: a loopback registry it does not name goes through the proxy (absolute-form), push and pull complete', async () => {
    const proxy = await forwardProxy();
    const { work, store: a, snap } = await captured();
    const repo = repoName('proxied');
    const remote = `${registry!.address}/${repo}`;
    process.env.HTTP_PROXY = `http://${proxy.address}`;
    process.env.NO_PROXY = 'registry.example.invalid';
    const pushed = await a.push(snap.digest, remote, { chunkBytes: 512 * 1024, monolithicBytes: 1024 * 1024 });
    const lines = proxy.seen.map((s) => s.line);
    expect(lines.every((l) => new RegExp(`^(GET|HEAD|POST|PUT|PATCH) http://${registry!.address}/v2/`).test(l))).toBe(true);
    expect(lines).toContain(`PUT http://${registry!.address}/v2/${repo}/manifests/ts-${snap.digest}`);
    expect(lines.filter((l) => l.startsWith('PATCH '))).toHaveLength(3);
    proxy.seen.length = 0;
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote)).toMatchObject({ downloaded: pushed.blobs });
    expect(proxy.seen.filter((s) => s.line.startsWith('GET ') && s.line.includes('/blobs/sha256:'))).toHaveLength(pushed.blobs);
    expect(b.get(snap.digest).toJSON()).toEqual(snap.toJSON());
    await a.close();
    await b.close();
  });

  it('NO_PROXY as undici matches it: a host, host:port, another port, a domain suffix, *; the lower-case forms first', async () => {
    const proxy = await forwardProxy();
    const { store, snap } = await captured();
    const port = registry!.address.split(':')[1]!;
    const repo = repoName('no-proxy');
    await store.push(snap.digest, `${registry!.address}/${repo}`);
    // Two GETs per probe (ts-<digest> already names the snapshot, and the revision's tag already holds its manifest): through the proxy or not.
    // reg.localhost resolves nowhere here: reached directly it fails ENOTFOUND, sent to the proxy it is seen there.
    const proxied = async (host: string, noProxy: string): Promise<boolean> => {
      process.env.HTTP_PROXY = `http://${proxy.address}`;
      process.env.NO_PROXY = noProxy;
      const before = proxy.seen.length;
      // A name below .localhost is no loopback host (DNS may answer it): plain HTTP to it needs insecure.
      const pushed = store.push(snap.digest, `${host}:${port}/${repo}`, { retries: 0, insecure: host === 'reg.localhost' });
      if (host === 'reg.localhost') await pushed.catch(() => undefined);
      else expect(await pushed).toMatchObject({ existed: true });
      return proxy.seen.length > before;
    };
    expect(await proxied('127.0.0.1', '127.0.0.1')).toBe(false);
    expect(await proxied('127.0.0.1', `other.example, 127.0.0.1:${port}`)).toBe(false);
    expect(await proxied('127.0.0.1', '127.0.0.1:1')).toBe(true);
    expect(await proxied('127.0.0.1', '*')).toBe(false);
    expect(await proxied('127.0.0.1', 'localhost')).toBe(true);
    expect(await proxied('localhost', 'localhost')).toBe(false);
    expect(await proxied('reg.localhost', '.localhost')).toBe(false);
    expect(await proxied('reg.localhost', '*.localhost')).toBe(false);
    expect(await proxied('reg.localhost', 'other.localhost')).toBe(true);
    // no_proxy before NO_PROXY, http_proxy before HTTP_PROXY (which names a port nothing listens on).
    process.env.no_proxy = 'example.invalid';
    expect(await proxied('127.0.0.1', '127.0.0.1')).toBe(true);
    delete process.env.no_proxy;
    process.env.http_proxy = `http://${proxy.address}`;
    process.env.HTTP_PROXY = 'http://127.0.0.1:1';
    process.env.NO_PROXY = 'example.invalid';
    const before = proxy.seen.length;
    expect(await store.push(snap.digest, `${registry!.address}/${repo}`)).toMatchObject({ existed: true });
    expect(proxy.seen.length).toBe(before + 2);
    await store.close();
  });

  it('credentials in the proxy URL go as Proxy-Authorization; a proxy that refuses is SEAL_REMOTE saying so, not retried', async () => {
    const want = `Basic ${Buffer.from('runner:proxy pw').toString('base64')}`;
    const proxy = await forwardProxy(want);
    const { work, store, snap } = await captured();
    const remote = `${registry!.address}/${repoName('proxy-auth')}`;
    process.env.NO_PROXY = 'example.invalid';
    process.env.HTTP_PROXY = `http://runner:proxy%20pw@${proxy.address}`;
    await store.push(snap.digest, remote);
    expect(proxy.seen.length).toBeGreaterThan(3);
    expect(proxy.seen.every((s) => s.proxyAuthorization === want)).toBe(true);

    process.env.HTTP_PROXY = `http://${proxy.address}`;
    proxy.seen.length = 0;
    const b = await SnapshotStore.open(join(work, 'b'));
    const err = await fails(b.pull(snap.digest, remote));
    expect([err.code, err.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${registry!.address} is unreachable or dropped the connection while GET /v2/${remote.slice(remote.indexOf('/') + 1)}/manifests/ts-${snap.digest}: the proxy refused it: Proxy Authentication Required (407)`,
    ]);
    expect(proxy.seen).toHaveLength(1);
    expect(storeLeftovers(b.root)).toEqual([]);
    await store.close();
    await b.close();
  });
});

describe('a proxy variable that is not an HTTP proxy URL', () => {
  it('is SEAL_BAD_PATH naming the variable, its credentials hidden, before anything connects (a typo was a raw TypeError; socks5:// was tried as a SOCKS proxy)', async () => {
    const { store } = await captured();
    const before = storeLeftovers(store.root);
    for (const [name, value, shown] of [
      ['HTTPS_PROXY', 'socks5://runner:secret@127.0.0.1:1080', 'socks5://***@127.0.0.1:1080'],
      ['http_proxy', 'proxy.internal:3128', 'proxy.internal:3128'],
      ['HTTP_PROXY', 'http://', 'http://'],
    ]) {
      process.env[name] = value;
      try {
        const err = await fails(store.pull('0'.repeat(64), '127.0.0.1:9/none/x', { retries: 0 }));
        expect([err.code, err.message]).toEqual(['SEAL_BAD_PATH', `${name} is not an http:// or https:// proxy URL (SOCKS proxies are not supported): ${shown}`]);
      } finally {
        clearProxyEnv();
      }
    }
    // A user or password with a bare '%' (it is percent-decoded when the proxy is used): it was an untyped URIError, 'URI malformed'.
    for (const name of ['https_proxy', 'HTTP_PROXY']) {
      process.env[name] = 'http://ciproxy:50%off@127.0.0.1:3128';
      try {
        const err = await fails(store.pull('0'.repeat(64), '127.0.0.1:9/none/x', { retries: 0 }));
        expect([err.code, err.message]).toEqual(['SEAL_BAD_PATH', `${name} holds a user or password that is not percent-encoded (write a '%' in it as %25, an '@' as %40): http://***@127.0.0.1:3128`]);
      } finally {
        clearProxyEnv();
      }
    }
    expect(storeLeftovers(store.root)).toEqual(before);
    await store.close();
  });
});

describe("undici's classes", () => {
  it('load from their own modules, not the package index (about 100 ms less for every registry command), in a fresh process', () => {
    // A cat against a closed port: the client is made, the connection refused.
    const script = `
      import { createRequire } from 'node:module';
      const { catRemote } = await import(${JSON.stringify(DIST_INDEX)});
      const code = await catRemote('127.0.0.1:9/none/x', '${'0'.repeat(64)}', 'a', { retries: 0 }).then(() => 'ok', (e) => e.code);
      const loaded = Object.keys(createRequire(import.meta.url).cache).filter((p) => p.includes('/node_modules/undici/')).map((p) => p.slice(p.lastIndexOf('/node_modules/undici/') + 21));
      process.stdout.write(JSON.stringify({ code, index: loaded.includes('index.js'), agent: loaded.includes('lib/dispatcher/agent.js') }));
    `;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect([r.stderr, JSON.parse(r.stdout)]).toEqual(['', { code: 'SEAL_REMOTE', index: false, agent: true }]);
  });
});
