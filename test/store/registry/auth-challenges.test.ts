// auth-challenges.test.ts: registry authorization (src/store/registry/auth.ts) against a scripted loopback registry and token
// server: WWW-Authenticate parsing, what the token request carries (service, scopes, credentials, accept), and every way a
// token server or a challenge can be wrong. Each title names the mutation it kills.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as netServer, type AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { describe, expect, it } from 'vitest';

import { SealError } from '../../../dist/index.js';
import { parseChallenge, parseRemote, RegistryClient } from '../../../dist/internal.js';
import { httpOn } from './servers.js';

const BLOB = `sha256:${'0'.repeat(64)}`;
const credentials = { username: 'robot', password: 'pw:with colon' };
const basic = `Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;

interface Script {
  /** The WWW-Authenticate of the registry's 401 (the realm may use {self} for the server's host:port). */
  challenge: string | undefined;
  /** The token server's answer: its body, or what writes it (a body that never ends, or stalls). */
  token?: { status?: number; body: string | ((res: ServerResponse) => void) };
  /** The Authorization the registry accepts (default `Bearer good`). */
  accepts?: string;
}

interface Seen {
  /** The token requests: their query (as `key=value` pairs in order) and headers. */
  tokenRequests: { query: string[]; authorization: string | undefined; accept: string | undefined }[];
  /** The Authorization header of each registry request. */
  registry: (string | undefined)[];
}

/** A loopback registry (one repository, team/x) with its token server at /token, following the script. */
async function scripted(script: Script): Promise<{ address: string; seen: Seen }> {
  const seen: Seen = { tokenRequests: [], registry: [] };
  let self = '';
  const address = await httpOn((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', `http://${self}`);
    req.resume();
    if (url.pathname === '/token') {
      seen.tokenRequests.push({ query: [...url.searchParams].map(([k, v]) => `${k}=${v}`), authorization: req.headers.authorization, accept: req.headers.accept });
      const t = script.token ?? { body: JSON.stringify({ token: 'good' }) };
      res.writeHead(t.status ?? 200, { 'content-type': 'application/json' });
      if (typeof t.body === 'string') res.end(t.body);
      else t.body(res);
      return;
    }
    seen.registry.push(req.headers.authorization);
    if (req.headers.authorization === (script.accepts ?? 'Bearer good')) {
      res.writeHead(200, { 'content-length': '0' }).end();
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (script.challenge !== undefined) headers['www-authenticate'] = script.challenge.replaceAll('{self}', self);
    res.writeHead(401, headers).end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
  });
  self = address;
  return { address, seen };
}

/** A RegistryClient for team/x at address, with no retries (and its own connection pool, for clients that take one). */
function newClient(address: string, creds: typeof credentials | undefined, scopes: string[], insecure = false): RegistryClient {
  return new RegistryClient({ remote: parseRemote(`${address}/team/x`, insecure), credentials: creds, scopes, what: 'test', retries: 0, dispatcher: new Agent() } as ConstructorParameters<typeof RegistryClient>[0]);
}

/** HEAD of a blob through a RegistryClient (no retries) with the given credentials (null: none) and insecure flag. */
async function head(address: string, creds: typeof credentials | null = credentials, insecure = false, more: object = {}): Promise<boolean> {
  const client = new RegistryClient({
    ...({ remote: parseRemote(`${address}/team/x`, insecure), credentials: creds ?? undefined, scopes: ['repository:team/x:pull'], what: 'test', retries: 0, dispatcher: new Agent() } as ConstructorParameters<typeof RegistryClient>[0]),
    ...more,
  });
  try {
    return await client.hasBlob(BLOB);
  } finally {
    await client.close();
  }
}

async function failure(p: Promise<unknown>): Promise<SealError> {
  const err = await p.then(
    () => new Error('unexpectedly succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SealError);
  return err as SealError;
}

async function refusal(p: Promise<unknown>): Promise<[string, string]> {
  const err = await failure(p);
  return [err.code, err.message];
}

describe('parseChallenge', () => {
  it('takes the scheme and parameter names in any case, with spaces around = and before commas (kills the i flag, the toLowerCase calls, the \\s* of both patterns)', () => {
    expect(parseChallenge('  BEARER   Realm = "https://a/t" ,SERVICE=reg ,Scope="repository:a/b:pull"')).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://a/t', service: 'reg', scope: 'repository:a/b:pull' },
    });
    expect(parseChallenge('bAsIc realm="r"')).toEqual({ scheme: 'basic', params: { realm: 'r' } });
  });

  it('unescapes quoted-pairs in quoted strings, keeps commas and spaces inside them, and takes unquoted tokens up to a comma (kills the quoted-pair pattern and its $1)', () => {
    expect(parseChallenge('Bearer realm="https://a/t?x=\\"q\\"",scope="a b,c",service=svc_1-x,error=insufficient_scope')).toEqual({
      scheme: 'bearer',
      params: { realm: 'https://a/t?x="q"', scope: 'a b,c', service: 'svc_1-x', error: 'insufficient_scope' },
    });
  });

  it('a bare scheme has no parameters; a longer word, a scheme not at the start, or another scheme is no challenge (kills the ^ anchor and the \\b boundary)', () => {
    expect(parseChallenge('Basic')).toEqual({ scheme: 'basic', params: {} });
    expect(parseChallenge('Bearer')).toEqual({ scheme: 'bearer', params: {} });
    expect(parseChallenge('Bearerish realm="x"')).toBeUndefined();
    expect(parseChallenge('Basically realm="x"')).toBeUndefined();
    expect(parseChallenge('Digest realm="x", Basic realm="y"')).toBeUndefined();
    expect(parseChallenge('')).toBeUndefined();
  });

  it('stops at the first text that is not a parameter (kills the sticky y flag)', () => {
    expect(parseChallenge('Bearer realm="r", !garbage, service="s"')).toEqual({ scheme: 'bearer', params: { realm: 'r' } });
  });
});

describe('the Bearer token request', () => {
  it('carries the service, the client\'s scopes then the challenge\'s new ones once each, the credentials as Basic, and asks for JSON (kills the service, scope and header lines)', async () => {
    const { address, seen } = await scripted({ challenge: 'Bearer realm="http://{self}/token",service="reg.test",scope="repository:team/x:pull repository:other/y:pull"' });
    expect(await head(address)).toBe(true);
    expect(seen.tokenRequests).toEqual([
      { query: ['service=reg.test', 'scope=repository:team/x:pull', 'scope=repository:other/y:pull'], authorization: basic, accept: 'application/json' },
    ]);
    expect(seen.registry).toEqual([undefined, 'Bearer good']);
  });

  it('without service or scope in the challenge asks for the client\'s scope only, and anonymously without credentials (kills service !== undefined replaced by true, s !== "" by true, credentials !== undefined by true)', async () => {
    const { address, seen } = await scripted({ challenge: 'Bearer realm="http://{self}/token"' });
    expect(await head(address, null)).toBe(true);
    expect(seen.tokenRequests).toEqual([{ query: ['scope=repository:team/x:pull'], authorization: undefined, accept: 'application/json' }]);
  });

  it('takes access_token when token is missing, empty or not a string (kills the token choice of #fetchToken)', async () => {
    for (const body of [{ access_token: 'good' }, { token: '', access_token: 'good' }, { token: 7, access_token: 'good' }, { token: 'good', access_token: 'other' }]) {
      const { address } = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { body: JSON.stringify(body) } });
      expect(await head(address)).toBe(true);
    }
  });
});

describe('a token server or a challenge that is wrong is SEAL_REMOTE, naming it', () => {
  it('no token, an empty one, or a body that is not JSON, with the parse error as cause (kills the no-token check, the JSON catch and its { cause } emptied)', async () => {
    for (const body of ['{}', '{"token":""}', '{"token":"","access_token":""}', '{"access_token":5}']) {
      const { address } = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { body } });
      expect(await refusal(head(address))).toEqual(['SEAL_REMOTE', `token server ${address} sent no token`]);
    }
    const { address } = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { body: 'token=good' } });
    const err = await failure(head(address));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `token server ${address} sent a body that is not JSON`]);
    expect(err.cause).toBeInstanceOf(SyntaxError);
  });

  it('401 or 403 refuses the credentials, or asks for some without; another error status is named (kills the 401 || 403 test and !res.ok)', async () => {
    for (const status of [401, 403]) {
      const { address } = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { status, body: '{}' } });
      expect(await refusal(head(address))).toEqual(['SEAL_REMOTE', `token server ${address} refused the credentials for ${address}: HTTP ${status}`]);
      expect((await refusal(head(address, null)))[1]).toMatch(new RegExp(`^registry ${address} requires authentication \\(HTTP ${status} UNAUTHORIZED\\)`));
    }
    const { address } = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { status: 404, body: '{"token":"good"}' } });
    expect(await refusal(head(address))).toEqual(['SEAL_REMOTE', `token server ${address} answered HTTP 404`]);
    // The status decides before any body is read: a refusal with a body past the answer's bound is still the refusal.
    const long = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { status: 401, body: 'x'.repeat(2 * 1024 * 1024) } });
    expect(await refusal(head(long.address))).toEqual(['SEAL_REMOTE', `token server ${long.address} refused the credentials for ${long.address}: HTTP 401`]);
  });

  it('a challenge without a realm, a realm that is no URL (its TypeError as cause), or one neither HTTPS nor loopback HTTP (kills the realm checks, the bad realm\'s { cause } emptied, and the protocol test)', async () => {
    let s = await scripted({ challenge: 'Bearer service="reg"' });
    expect(await refusal(head(s.address))).toEqual(['SEAL_REMOTE', `registry ${s.address} sent a Bearer challenge without a realm`]);
    s = await scripted({ challenge: 'Bearer realm="not a url"' });
    const bad = await failure(head(s.address));
    expect([bad.code, bad.message]).toEqual(['SEAL_REMOTE', `registry ${s.address} sent a bad token realm: not a url`]);
    expect(bad.cause).toMatchObject({ code: 'ERR_INVALID_URL' });
    s = await scripted({ challenge: 'Bearer realm="ftp://{self}/token"' });
    // Neither HTTP nor HTTPS: refused as such, --insecure or not (it was told --insecure would do).
    const neither = `token realm ftp://${s.address}/token is neither HTTPS nor HTTP: a token is asked for over one of them only`;
    expect(await refusal(head(s.address))).toEqual(['SEAL_REMOTE', neither]);
    expect(await refusal(head(s.address, credentials, true))).toEqual(['SEAL_REMOTE', neither]);
    expect(s.seen.tokenRequests).toEqual([]);
  });

  it('an answer that never ends is refused past 1 MiB (it once filled memory: GBs in seconds), one that stalls times out, an abort while it comes is SEAL_ABORTED', async () => {
    const endless = await scripted({
      challenge: 'Bearer realm="http://{self}/token"',
      token: {
        body: (res) => {
          res.write('{"token":"');
          const chunk = Buffer.alloc(64 * 1024, 0x41);
          const more = (): void => {
            while (!res.destroyed && res.write(chunk));
            if (!res.destroyed) res.once('drain', more);
          };
          more();
        },
      },
    });
    expect(await refusal(head(endless.address))).toEqual(['SEAL_CORRUPT', `token server ${endless.address} sent more than 1048576 bytes for its answer`]);
    const stalled = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { body: (res) => res.write('{"token":') } });
    const slow = await failure(head(stalled.address, credentials, false, { deadlines: { headersMs: 2000, idleMs: 300, minBytesPerSecond: 0 } }));
    expect([slow.code, slow.message]).toEqual(['SEAL_REMOTE', `token server ${stalled.address} timed out while reading its answer: no data for 300 ms`]);
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 200);
    expect((await refusal(head(stalled.address, credentials, false, { signal: abort.signal })))[0]).toBe('SEAL_ABORTED');
  });

  it("a registry's error text reaches the message escaped (no escape sequence for a terminal), the Authorization it echoed masked; a token with a line break is refused", async () => {
    const address = await httpOn((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      if (req.headers.authorization === undefined) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="r"' }).end();
        return;
      }
      const errors = [{ code: 'BAD\u001b[31mRED\u0007', message: `you sent ${req.headers.authorization}, Bearer ab:cd!ef\r\ntreeseal: pulled, all verified` }];
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ errors }));
    });
    const client = newClient(address, credentials, ['repository:team/x:push']);
    const err = await failure(client.putManifest('t', Buffer.from('{}')));
    await client.close();
    expect([err.code, err.message]).toEqual([
      'SEAL_REMOTE',
      `registry ${address} refused PUT /v2/team/x/manifests/t: HTTP 400 BAD\\x1b[31mRED\\x07 (you sent Basic ***, Bearer ***\\x0d\\x0atreeseal: pulled, all verified)`,
    ]);
    // A token that is no header value (it was sent, failed in the client with the token in the message, and was retried).
    const s = await scripted({ challenge: 'Bearer realm="http://{self}/token"', token: { body: JSON.stringify({ token: 'abc\r\nX-Injected: 1' }) } });
    expect(await refusal(head(s.address))).toEqual(['SEAL_REMOTE', `token server ${s.address} sent a token that cannot be sent in a header (not printable ASCII)`]);
    expect(s.seen.registry).toEqual([undefined]);
  });

  it('a realm or an upload location with credentials in its URL is refused at once, not sent and retried ("Request cannot be constructed")', async () => {
    const s = await scripted({ challenge: 'Bearer realm="http://u:pw@{self}/token"' });
    expect(await refusal(head(s.address))).toEqual(['SEAL_REMOTE', `token realm of ${s.address} has credentials in its URL (http://${s.address}/token); refused`]);
    expect(s.seen.tokenRequests).toEqual([]);
    let posts = 0;
    const address = await httpOn((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      posts++;
      res.writeHead(202, { location: `http://u:pw@${address}/v2/team/x/blobs/uploads/1`, 'content-length': '0' }).end();
    });
    const client = newClient(address, undefined, ['repository:team/x:push']);
    const location = await client.startUpload();
    const err = await failure(client.patchChunk(location as string, Buffer.from('x'), 0));
    await client.close();
    expect([err.code, err.message, posts]).toEqual(['SEAL_REMOTE', `registry ${address}'s upload location has credentials in its URL (http://${address}/v2/team/x/blobs/uploads/1); refused`, 1]);
  });

  it('a Retry-After that is neither seconds nor an HTTP date (-5, which Date.parse reads as a year) is no header: the backoff waits, not 0 ms', async () => {
    let gets = 0;
    const address = await httpOn((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      if (gets++ === 0) res.writeHead(503, { 'retry-after': '-5', 'content-length': '0' }).end();
      else res.writeHead(200, { 'content-length': '0' }).end();
    });
    const waits: number[] = [];
    const client = new RegistryClient({
      ...({ remote: parseRemote(`${address}/team/x`), credentials: undefined, scopes: [], what: 'test', retries: 1, dispatcher: new Agent() } as ConstructorParameters<typeof RegistryClient>[0]),
      onRetry: (r: { waitMs: number }) => waits.push(r.waitMs),
    });
    expect(await client.hasBlob(BLOB)).toBe(true);
    await client.close();
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(150);
  });

  it('a 401 without a challenge is the registry\'s own refusal (kills the undefined challenge check)', async () => {
    const { address, seen } = await scripted({ challenge: undefined });
    expect(await refusal(head(address))).toEqual(['SEAL_REMOTE', `registry ${address} refused HEAD /v2/team/x/blobs/${BLOB}: HTTP 401`]);
    expect(seen.registry).toEqual([undefined]);
  });
});

describe('Basic', () => {
  it('answers a Basic challenge once, then a refused Basic header is the registry\'s refusal (kills the startsWith("Basic ") test)', async () => {
    const { address, seen } = await scripted({ challenge: 'Basic realm="r"', accepts: 'Basic nothing-matches' });
    expect((await refusal(head(address)))[0]).toBe('SEAL_REMOTE');
    expect(seen.registry).toEqual([undefined, basic]);
  });

  it('a Basic challenge to a Bearer token switches to Basic (kills the startsWith("Basic ") prefix emptied)', async () => {
    let n = 0;
    const address = await httpOn((req, res) => {
      req.resume();
      if ((req.url ?? '').startsWith('/token')) {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"t1"}');
        return;
      }
      n++;
      if (req.headers.authorization === basic) {
        res.writeHead(200, { 'content-length': '0' }).end();
        return;
      }
      const challenge = req.headers.authorization === undefined ? `Bearer realm="http://${address}/token"` : 'Basic realm="r"';
      res.writeHead(401, { 'www-authenticate': challenge, 'content-type': 'application/json' }).end('{}');
    });
    expect(await head(address)).toBe(true);
    expect(n).toBe(3);
  });
});

describe('more of the Bearer flow', () => {
  it('an HTTPS realm, on loopback too, is asked (kills the protocol !== "https:" test replaced by true, and "https:" emptied)', async () => {
    // A loopback port nothing listens on (free a moment ago).
    const port = await new Promise<number>((resolve) => {
      const s = netServer().listen(0, '127.0.0.1', () => {
        const { port: p } = s.address() as AddressInfo;
        s.close(() => resolve(p));
      });
    });
    const { address } = await scripted({ challenge: `Bearer realm="https://127.0.0.1:${port}/token"` });
    expect(await refusal(head(address))).toEqual(['SEAL_REMOTE', `registry ${address} is unreachable or dropped the connection while GET /token: ECONNREFUSED`]);
  });

  it('a request refused with a token another request already replaced retries with the new one, fetching none (kills sent !== header replaced by false, and its return true by false)', async () => {
    const live = new Set<string>();
    let issued = 0;
    const held: ServerResponse[] = [];
    let stale = 0;
    const address = await httpOn((req, res) => {
      req.resume();
      if ((req.url ?? '').startsWith('/token')) {
        const token = `t${++issued}`;
        live.add(token);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token }));
        return;
      }
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
      const challenge = { 'www-authenticate': `Bearer realm="http://${address}/token"`, 'content-type': 'application/json' };
      if (token !== undefined && live.has(token)) {
        res.writeHead(200, { 'content-length': '0' }).end();
        // The first request is through with the new token: now answer the one held back.
        for (const r of held.splice(0)) r.writeHead(401, challenge).end('{}');
        return;
      }
      // Of two requests refused with the same old token, the second is answered only once the first got its new token.
      if (token !== undefined && ++stale === 2) {
        held.push(res);
        return;
      }
      res.writeHead(401, challenge).end('{}');
    });
    const client = newClient(address, credentials, []);
    try {
      expect(await client.hasBlob(BLOB)).toBe(true);
      expect(issued).toBe(1);
      live.clear();
      expect(await Promise.all([client.hasBlob(BLOB), client.hasBlob(BLOB)])).toEqual([true, true]);
      expect(issued).toBe(2);
    } finally {
      await client.close();
    }
  });
});
