// transport.test.ts: plain HTTP only to loopback hosts or with insecure, for the registry, its token realm and every redirect; HTTPS never falls to HTTP; credentials stay with their origin.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { storeLeftovers, tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry } from './harness.js';
import { forward, guardFetch, httpOn, httpsOn, selfSigned } from './servers.js';

const registry = await testRegistry('plain');
const INDEX = fileURLToPath(new URL('../../../dist/index.js', import.meta.url));
const run = promisify(execFile);
const credentials = { username: 'robot', password: 'cleartext-would-leak' };
const BLOB_GET = /^\/v2\/.+\/blobs\/sha256:[0-9a-f]{64}$/;

checkNoFileFdLeaks();
// Every request the library makes goes through this guard: none may leave this machine.
const guard = guardFetch();

/** A snapshot pushed to the plain test registry: its digest and repository. */
async function pushedSnapshot(label: string): Promise<{ digest: string; repo: string; work: string }> {
  const { work, store, snap } = await captured();
  const repo = repoName(label);
  await store.push(snap.digest, `${registry!.address}/${repo}`);
  await store.close();
  return { digest: snap.digest, repo, work };
}

describe('the Bearer token realm', () => {
  it('a loopback registry whose realm is plain HTTP elsewhere is refused before any connection; insecure allows it', async () => {
    const fake = await httpOn((_req, res) => {
      res.writeHead(401, { 'www-authenticate': 'Bearer realm="http://10.255.255.1/token",service="reg"', 'content-type': 'application/json' });
      res.end('{"errors":[{"code":"UNAUTHORIZED"}]}');
    });
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const digest = 'a'.repeat(64);
    const err = await fails(store.pull(digest, `${fake}/team/x`, { credentials }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', 'token realm http://10.255.255.1/token is not HTTPS; plain HTTP needs --insecure']);
    expect(guard.refused).toEqual([]);
    expect(guard.seen.map((s) => new URL(s.url).host)).toEqual([fake]);
    // With insecure the realm is asked (the guard stops it before it connects).
    const asked = await fails(store.pull(digest, `${fake}/team/x`, { credentials, insecure: true, retries: 0 }));
    expect([asked.code, asked.message]).toEqual(['SEAL_REMOTE', `registry ${fake} is unreachable or dropped the connection while GET /token: ETESTGUARD`]);
    expect(guard.refused).toEqual(['http://10.255.255.1/token?service=reg&scope=repository%3Ateam%2Fx%3Apull']);
    guard.refused.length = 0;
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});

describe('loopback hosts', () => {
  it("a name below .localhost is none: plain HTTP to it, and so the registry's Basic credentials, need insecure (it was spoken to in clear by its spelling, and the system's resolver may send it to DNS, which can answer any address)", async () => {
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    const digest = 'a'.repeat(64);
    for (const host of ['reg.localhost:5999', 'k3d-registry.localhost:5999']) {
      const err = await fails(store.pull(digest, `http://${host}/team/x`, { credentials }));
      expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `plain HTTP to ${host} needs --insecure (only loopback registries are spoken to without TLS)`]);
    }
    // Bare, it is spoken to over HTTPS (the guard stops it before it connects).
    const bare = await fails(store.pull(digest, 'reg.localhost:5999/team/x', { credentials, retries: 0 }));
    expect(bare.code).toBe('SEAL_REMOTE');
    expect(guard.refused).toEqual([`https://reg.localhost:5999/v2/team/x/manifests/ts-${digest}`]);
    guard.refused.length = 0;
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});

describe.skipIf(registry === undefined)('redirects from a loopback registry', () => {
  it('follows one to another loopback origin without the Authorization header; refuses plain HTTP elsewhere before connecting', async () => {
    const { digest, repo, work } = await pushedSnapshot('redirect');
    const blobHost: (string | undefined)[] = [];
    const elsewhere = await httpOn((req, res) => {
      blobHost.push(req.headers.authorization);
      forward(registry!.address, req, res);
    });
    let target = elsewhere;
    let authorized = 0;
    const front = await httpOn((req, res) => {
      if (req.headers.authorization === undefined) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="front"', 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAUTHORIZED"}]}');
        return;
      }
      authorized++;
      if (req.method === 'GET' && BLOB_GET.test(req.url ?? '')) {
        res.writeHead(307, { location: `http://${target}${req.url}` }).end();
        return;
      }
      forward(registry!.address, req, res);
    });
    const a = await SnapshotStore.open(join(work, 'a-redirect'));
    expect(await a.pull(digest, `${front}/${repo}`, { credentials })).toMatchObject({ downloaded: 5 });
    expect(blobHost).toEqual(Array(5).fill(undefined));
    expect(authorized).toBeGreaterThan(3);
    await a.close();

    // An address the rule does not count as loopback (IPv4-mapped): refused before any connection
    // (and, being this machine after all, a build that wrongly followed it would reach nothing else).
    const port = elsewhere.split(':')[1];
    target = `[::ffff:127.0.0.1]:${port}`;
    const b = await SnapshotStore.open(join(work, 'b-redirect'));
    const err = await fails(b.pull(digest, `${front}/${repo}`, { credentials }));
    expect(err.code).toBe('SEAL_REMOTE');
    expect(err.message).toMatch(
      new RegExp(
        `^registry ${front}'s redirect of GET /v2/${repo}/blobs/(sha256:[0-9a-f]{64}) is plain HTTP to \\[::ffff:7f00:1\\]:${port} \\(http://\\[::ffff:7f00:1\\]:${port}/v2/${repo}/blobs/\\1\\); plain HTTP needs --insecure \\(only loopback hosts are spoken to without TLS\\)$`,
      ),
    );
    expect(blobHost).toHaveLength(5);
    expect(guard.refused).toEqual([]);
    expect(storeLeftovers(b.root)).toEqual([]);
    await b.close();
  });
});

describe.skipIf(registry === undefined)('redirects from an HTTPS registry', () => {
  it('follows HTTPS to HTTPS, and never HTTPS to plain HTTP, not even to loopback or with insecure', async () => {
    const { digest, repo, work } = await pushedSnapshot('https');
    const tls = selfSigned();
    let toHttp = false;
    let front = '';
    front = await httpsOn(tls, (req, res) => {
      const url = req.url ?? '/';
      if (req.method === 'GET' && BLOB_GET.test(url)) {
        res.writeHead(307, { location: toHttp ? `http://${registry!.address}${url}` : `https://${front}/moved${url}` }).end();
        return;
      }
      forward(registry!.address, req, res, url.replace(/^\/moved/, ''));
    });
    // The client trusts the test's certificate only through NODE_EXTRA_CA_CERTS: a child process.
    const pull = async (name: string, insecure: boolean): Promise<{ code?: string; message?: string; downloaded?: number; leftovers?: string[] }> => {
      const dir = join(work, name);
      const script = `import { SnapshotStore } from ${JSON.stringify(INDEX)};
const s = await SnapshotStore.open(${JSON.stringify(dir)});
let out;
try { out = { downloaded: (await s.pull(${JSON.stringify(digest)}, ${JSON.stringify(`https://${front}/${repo}`)}, { insecure: ${insecure} })).downloaded }; }
catch (e) { out = { code: e.code, message: e.message }; }
await s.close();
process.stdout.write(JSON.stringify(out));`;
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, NODE_EXTRA_CA_CERTS: tls.certFile } });
      return { ...(JSON.parse(stdout) as object), leftovers: storeLeftovers(dir) };
    };
    expect(await pull('https-to-https', false)).toEqual({ downloaded: 5, leftovers: [`snapshots/${digest}`] });
    toHttp = true;
    const refused = new RegExp(
      `^registry ${front}'s redirect of GET /v2/${repo}/blobs/(sha256:[0-9a-f]{64}) leads from HTTPS to plain HTTP \\(http://${registry!.address}/v2/${repo}/blobs/\\1\\); refused even with --insecure$`,
    );
    for (const insecure of [false, true]) {
      const r = await pull(`https-to-http-${insecure}`, insecure);
      expect([r.code, r.leftovers]).toEqual(['SEAL_REMOTE', []]);
      expect(r.message).toMatch(refused);
    }
  });
});
