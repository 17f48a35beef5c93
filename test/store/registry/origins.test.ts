// origins.test.ts: credentials go to the registry's own origin and the token realm its challenge names, never to another origin
// an upload Location or a redirect points at, not even when that origin asks for them with a challenge of its own.
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { storeLeftovers } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry } from './harness.js';
import { forward, httpOn } from './servers.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

const credentials = { username: 'robot', password: 'for-the-registry-only' };
const basic = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
const BLOB_GET = /^\/v2\/.+\/blobs\/sha256:[0-9a-f]{64}$/;
const UNAUTHORIZED = '{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}';

interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
}

interface Origins {
  /** The registry (127.0.0.1): wants Basic credentials, then passes each request on to the test registry. */
  address: string;
  /** Another origin (127.0.0.2): records every request's headers, then passes it on to the test registry. */
  elsewhere: string;
  seen: Seen[];
  /** The WWW-Authenticate the other origin answers every request with (401), `{elsewhere}` standing for its host:port. */
  challenge: string | undefined;
}

/**
 * A registry whose upload locations (`Location` of its POST and PATCH answers) and blob GETs
 * (a 307) point at another origin; that origin forwards to the same test registry, so a
 * push or pull through it completes, and it records what each request carried.
 */
async function twoOrigins(): Promise<Origins> {
  const o: Origins = { address: '', elsewhere: '', seen: [], challenge: undefined };
  const there = (url: URL): string => `http://${o.elsewhere}${url.pathname}${url.search}`;
  o.elsewhere = await httpOn((req, res) => {
    const url = req.url ?? '/';
    o.seen.push({ method: req.method ?? '', path: new URL(url, 'http://x').pathname, authorization: req.headers.authorization });
    if (o.challenge !== undefined) {
      req.resume();
      if (url.startsWith('/token')) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"stolen"}');
        return;
      }
      res.writeHead(401, { 'www-authenticate': o.challenge.replaceAll('{elsewhere}', o.elsewhere), 'content-type': 'application/json' }).end(UNAUTHORIZED);
      return;
    }
    forward(registry!.address, req, res, url, there);
  }, '127.0.0.2');
  o.address = await httpOn((req, res) => {
    const url = req.url ?? '/';
    if (req.headers.authorization !== basic) {
      req.resume();
      res.writeHead(401, { 'www-authenticate': 'Basic realm="registry"', 'content-type': 'application/json' }).end(UNAUTHORIZED);
      return;
    }
    if (req.method === 'GET' && BLOB_GET.test(url)) {
      req.resume();
      res.writeHead(307, { location: there(new URL(url, 'http://x')) }).end();
      return;
    }
    forward(registry!.address, req, res, url, there);
  });
  return o;
}

const none = (seen: Seen[]): (string | undefined)[] => seen.map(() => undefined);

describe.skipIf(registry === undefined)('credentials stay with the registry origin', () => {
  it('an upload Location on another origin (monolithic PUT, chunked PATCHes) and a blob GET redirected there carry no Authorization', async () => {
    const { work, store: a, snap } = await captured();
    const o = await twoOrigins();
    const remote = `${o.address}/${repoName('origins')}`;
    // Blobs over 1 MiB in 256 KiB chunks: the 1.5 MiB file goes up in six PATCHes, the others in one PUT each.
    const pushed = await a.push(snap.digest, remote, { credentials, chunkBytes: 256 * 1024, monolithicBytes: 1024 * 1024 });
    expect(pushed).toMatchObject({ existed: false, uploaded: pushed.blobs, mounted: 0, skipped: 0 });
    const methods = o.seen.map((s) => s.method);
    expect(methods.filter((m) => m === 'PATCH')).toHaveLength(6);
    expect(methods.filter((m) => m === 'PUT')).toHaveLength(pushed.blobs);
    expect(o.seen.map((s) => s.authorization)).toEqual(none(o.seen));

    o.seen.length = 0;
    const b = await SnapshotStore.open(join(work, 'b'));
    expect(await b.pull(snap.digest, remote, { credentials })).toMatchObject({ downloaded: pushed.blobs });
    expect(o.seen.map((s) => `${s.method} ${BLOB_GET.test(s.path)}`)).toEqual(o.seen.map(() => 'GET true'));
    expect(o.seen).toHaveLength(pushed.blobs);
    expect(o.seen.map((s) => s.authorization)).toEqual(none(o.seen));
    expect(b.get(snap.digest).toJSON()).toEqual(snap.toJSON());
    await a.close();
    await b.close();
  });

  it('a 401 from that other origin is never answered: no credentials, no token request to the realm it names; typed, nothing left', async () => {
    for (const challenge of ['Bearer realm="http://{elsewhere}/token",service="thief"', 'Basic realm="thief"']) {
      const { work, store: a, snap } = await captured();
      const o = await twoOrigins();
      const repo = repoName('foreign-401');
      const remote = `${o.address}/${repo}`;
      o.challenge = challenge;
      // One blob at a time: the config's monolithic PUT goes first.
      const pushErr = await fails(a.push(snap.digest, remote, { credentials, retries: 0, concurrency: 1 }));
      expect(pushErr.code).toBe('SEAL_REMOTE');
      expect(pushErr.message).toMatch(
        new RegExp(
          `^registry ${o.address}: PUT blob sha256:[0-9a-f]{64} went to http://${o.elsewhere}, which asked for authentication \\(HTTP 401\\); credentials go only to http://${o.address} and its token realm$`,
        ),
      );
      // No tag: the manifest was never sent.
      expect((await fetch(`http://${registry!.address}/v2/${repo}/manifests/ts-${snap.digest}`, { method: 'HEAD' })).status).toBe(404);

      o.challenge = undefined;
      await a.push(snap.digest, remote, { credentials });
      o.challenge = challenge;
      const b = await SnapshotStore.open(join(work, 'b'));
      const pullErr = await fails(b.pull(snap.digest, remote, { credentials, retries: 0 }));
      expect(pullErr.code).toBe('SEAL_REMOTE');
      expect(pullErr.message).toMatch(
        new RegExp(
          `^registry ${o.address}: GET /v2/${repo}/blobs/sha256:[0-9a-f]{64} went to http://${o.elsewhere}, which asked for authentication \\(HTTP 401\\); credentials go only to http://${o.address} and its token realm$`,
        ),
      );
      expect(storeLeftovers(b.root)).toEqual([]);
      expect(o.seen.filter((s) => s.path === '/token')).toEqual([]);
      expect(o.seen.map((s) => s.authorization)).toEqual(none(o.seen));
      await a.close();
      await b.close();
    }
  });
});
