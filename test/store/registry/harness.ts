// harness.ts: the real registry the registry tests use (from .ci/run's env, or started here), and a token-issuing proxy in front of it.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { get as httpsGet } from 'node:https';
import { createServer as netServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

import { SealError } from '../../../dist/index.js';
import { stopIdleWorker } from '../../../dist/internal.js';

export const REGISTRY_BIN = '/usr/bin/docker-registry';

export interface TestRegistry {
  /** host:port */
  address: string;
  /** The registry's filesystem storage root, when known (to tamper with blobs). */
  storage: string | undefined;
  user?: string;
  password?: string;
}

const stops: (() => void)[] = [];
afterAll(() => {
  for (const stop of stops.splice(0)) stop();
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = netServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

/** GET /v2/'s status, over HTTPS trusting `ca` when given. */
function v2Status(address: string, ca: Buffer | undefined): Promise<number> {
  if (ca === undefined) return fetch(`http://${address}/v2/`).then(async (res) => (await res.body?.cancel(), res.status));
  return new Promise((resolve, reject) => {
    const req = httpsGet(`https://${address}/v2/`, { ca }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
  });
}

/** Waits until GET /v2/ answers with one of the statuses (the auth registry answers 401). */
export async function waitForRegistry(address: string, statuses = [200, 401], ca?: Buffer): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      if (statuses.includes(await v2Status(address, ca))) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`registry at ${address} did not answer GET /v2/`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A registry's TLS: its certificate and key files, and the CA that signed it (PEM). */
export interface RegistryTls {
  certFile: string;
  keyFile: string;
  caPem: Buffer;
}

/**
 * Starts Debian's docker-registry on 127.0.0.1 with storage in a temp dir (htpasswd basic
 * auth when given a user; HTTPS with the given certificate when given tls).
 */
export async function startRegistry(auth?: { user: string; password: string }, tls?: RegistryTls): Promise<TestRegistry> {
  const dir = mkdtempSync(join(tmpdir(), 'treeseal-registry-'));
  const port = await freePort();
  const storage = join(dir, 'data');
  let authYaml = '';
  if (auth !== undefined) {
    execFileSync('htpasswd', ['-B', '-C', '4', '-b', '-c', join(dir, 'htpasswd'), auth.user, auth.password], { stdio: 'ignore' });
    authYaml = `auth:\n  htpasswd:\n    realm: treeseal-test\n    path: ${join(dir, 'htpasswd')}\n`;
  }
  const tlsYaml = tls === undefined ? '' : `  tls:\n    certificate: ${tls.certFile}\n    key: ${tls.keyFile}\n`;
  const config = `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${storage}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n${tlsYaml}${authYaml}`;
  writeFileSync(join(dir, 'config.yml'), config);
  const child: ChildProcess = spawn(REGISTRY_BIN, ['serve', join(dir, 'config.yml')], { stdio: 'ignore' });
  const stop = (): void => {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
  stops.push(stop);
  process.once('exit', stop);
  const address = `127.0.0.1:${port}`;
  await waitForRegistry(address, [200, 401], tls?.caPem);
  return { address, storage, ...(auth ?? {}) };
}

const started = new Map<string, Promise<TestRegistry>>();

/**
 * The registry for this test file: TREESEAL_TEST_REGISTRY (no auth) or
 * TREESEAL_TEST_REGISTRY_AUTH (basic auth, with TREESEAL_TEST_REGISTRY_USER/PASSWORD)
 * from .ci/run, else one started here when the binary exists. Under CI=true a
 * missing registry fails; elsewhere the caller skips (undefined).
 */
export async function testRegistry(kind: 'plain' | 'basic'): Promise<TestRegistry | undefined> {
  const env = process.env;
  const address = kind === 'plain' ? env.TREESEAL_TEST_REGISTRY : env.TREESEAL_TEST_REGISTRY_AUTH;
  if (address !== undefined && address !== '') {
    const storage = kind === 'plain' ? env.TREESEAL_TEST_REGISTRY_STORAGE : undefined;
    return kind === 'plain' ? { address, storage } : { address, storage, user: env.TREESEAL_TEST_REGISTRY_USER ?? '', password: env.TREESEAL_TEST_REGISTRY_PASSWORD ?? '' };
  }
  if (!existsSync(REGISTRY_BIN)) {
    if (env.CI === 'true') throw new Error(`CI=true but no registry: set TREESEAL_TEST_REGISTRY (see .ci/run) or install docker-registry`);
    return undefined;
  }
  let p = started.get(kind);
  if (p === undefined) started.set(kind, (p = startRegistry(kind === 'basic' ? { user: 'tester', password: 'secret-pw' } : undefined)));
  return p;
}

/** A registry of our own (a file's tampering must not touch blobs other files share); HTTPS when given tls. */
export async function ownRegistry(tls?: RegistryTls): Promise<TestRegistry | undefined> {
  if (!existsSync(REGISTRY_BIN)) {
    if (process.env.CI === 'true') throw new Error('CI=true but docker-registry is not installed');
    return undefined;
  }
  return startRegistry(undefined, tls);
}

/** The path of a blob's bytes in a filesystem-backed registry. */
export function blobPath(storage: string, digest: string): string {
  const hex = digest.replace(/^sha256:/, '');
  return join(storage, 'docker/registry/v2/blobs/sha256', hex.slice(0, 2), hex, 'data');
}

/** A repository name no other test uses. */
export function repoName(label: string): string {
  return `treeseal-test/${label}-${randomBytes(4).toString('hex')}`;
}

/**
 * A fault for one request: 'truncate' cuts the answer's body at its half, `{ cut: n }`
 * after n bytes (the connection then drops; with `garble`, each of those bytes is 0xff); 'stall' never answers; a number answers that
 * status without passing the request on; 'lose-answer' passes it on, lets the registry
 * finish it, then drops the connection unanswered; `{ replace: status }` passes it on and,
 * once the registry has answered, answers that status instead; 'ignore-range' passes it
 * on without its Range header (as a registry that ignores Range would answer); `{ hold }`
 * passes it on once the promise settles.
 */
export type Fault = 'truncate' | 'stall' | number | { cut: number; garble?: boolean } | 'lose-answer' | { replace: number } | 'ignore-range' | { hold: Promise<unknown> } | { status: number };

export interface ProxyHooks {
  /** Called for each proxied request (its method, path and whole URL); returns the fault to inject, if any. */
  onRequest?: (method: string, path: string, url: URL) => Fault | undefined;
}

export interface TokenProxy {
  address: string;
  /** Requests answered by the registry behind the proxy, as `METHOD path`. */
  log: string[];
  /** Each request the registry answered in full through the proxy: its log line, its status and its response body's bytes. */
  bodies: { request: string; status: number; bytes: number }[];
  tokensIssued: number;
  /** Makes every token issued so far invalid (as if expired). */
  expireTokens(): void;
  hooks: ProxyHooks;
  /** The POSTs to /token (OAuth2 grants): their form fields and headers. */
  grants: { form: Record<string, string>; contentType: string | undefined; authorization: string | undefined }[];
}

function forward(upstream: string, self: string, req: IncomingMessage, res: ServerResponse, action: Fault | undefined, answered?: (status: number, bytes: number) => void): void {
  const [host, port] = upstream.split(':');
  const headers = { ...req.headers, host: upstream };
  delete headers.authorization;
  if (action === 'ignore-range') delete headers.range;
  const out = request({ host, port: Number(port), method: req.method, path: req.url, headers }, (up) => {
    if (action === 'lose-answer' || (typeof action === 'object' && 'replace' in action)) {
      // The registry has done the work; its answer never reaches the client.
      up.resume();
      up.on('end', () => {
        if (action === 'lose-answer') res.socket?.destroy();
        else res.writeHead(action.replace, { 'content-type': 'application/json' }).end(`{"errors":[{"code":"TEST_${action.replace}","message":"injected after the work"}]}`);
      });
      return;
    }
    const h = { ...up.headers };
    if (typeof h.location === 'string') h.location = h.location.replace(`http://${upstream}`, `http://${self}`);
    res.writeHead(typeof action === 'object' && 'status' in action ? action.status : (up.statusCode ?? 502), h);
    const total = Number(up.headers['content-length'] ?? 0);
    const cutAt = action === 'truncate' ? Math.ceil(total / 2) : typeof action === 'object' && 'cut' in action ? action.cut : undefined;
    if (cutAt === undefined) {
      let bytes = 0;
      up.on('data', (chunk: Buffer) => (bytes += chunk.length));
      up.on('end', () => answered?.(up.statusCode ?? 502, bytes));
      up.pipe(res);
      return;
    }
    let sent = 0;
    up.on('data', (chunk: Buffer) => {
      if (sent >= cutAt) return;
      const cut = chunk.subarray(0, cutAt - sent);
      const part = typeof action === 'object' && 'garble' in action && action.garble === true ? Buffer.alloc(cut.length, 0xff) : cut;
      sent += part.length;
      // Every byte before the cut reaches the client; then the connection drops.
      if (sent >= cutAt) res.write(part, () => res.socket?.destroy());
      else res.write(part);
    });
  });
  out.on('error', () => res.destroy());
  req.pipe(out);
}

/**
 * A token server and proxy on 127.0.0.1 in front of a registry without auth: /token
 * issues opaque tokens (checking Basic credentials when given; given a refresh token, only
 * to a POSTed refresh_token grant with it or one it handed back), /v2/ answers 401 with a
 * Bearer challenge (realm, service, scope) unless the request carries a live token.
 */
export async function tokenProxy(upstream: string, creds?: { user: string; password: string } | { refreshToken: string }): Promise<TokenProxy> {
  const live = new Set<string>();
  const state: TokenProxy = { address: '', log: [], bodies: [], tokensIssued: 0, expireTokens: () => live.clear(), hooks: {}, grants: [] };
  // The refresh tokens the realm takes: the first one, then each one it handed back.
  const refresh = new Set(creds !== undefined && 'refreshToken' in creds ? [creds.refreshToken] : []);
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://${state.address}`);
    if (url.pathname === '/token' && req.method === 'POST') {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        const form = Object.fromEntries(new URLSearchParams(Buffer.concat(parts).toString('utf8')));
        state.grants.push({ form, contentType: req.headers['content-type'], authorization: req.headers.authorization });
        if (form.grant_type !== 'refresh_token' || !refresh.has(form.refresh_token ?? '')) {
          res.writeHead(401, { 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAUTHORIZED"}]}');
          return;
        }
        const token = randomBytes(16).toString('hex');
        const next = `rotated-${state.grants.length}`;
        refresh.add(next);
        live.add(token);
        state.tokensIssued++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: token, refresh_token: next, expires_in: 300 }));
      });
      return;
    }
    if (url.pathname === '/token') {
      if (refresh.size > 0) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAUTHORIZED","message":"this realm takes refresh tokens only"}]}');
        return;
      }
      const want = creds === undefined || 'refreshToken' in creds ? undefined : `Basic ${Buffer.from(`${creds.user}:${creds.password}`).toString('base64')}`;
      if (want !== undefined && req.headers.authorization !== want) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAUTHORIZED"}]}');
        return;
      }
      const token = randomBytes(16).toString('hex');
      live.add(token);
      state.tokensIssued++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token, expires_in: 300 }));
      return;
    }
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (token === undefined || !live.has(token)) {
      const repo = /^\/v2\/(.+?)\/(?:manifests|blobs|tags)\//.exec(url.pathname)?.[1];
      const scope = repo === undefined ? '' : `,scope="repository:${repo}:pull"`;
      res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${state.address}/token",service="treeseal-test"${scope}`, 'content-type': 'application/json' });
      res.end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
      return;
    }
    const action = state.hooks.onRequest?.(req.method ?? 'GET', url.pathname, url);
    if (action === 'stall') return;
    if (typeof action === 'number') {
      state.log.push(`${req.method} ${url.pathname} -> ${action}`);
      req.resume();
      res.writeHead(action, { 'content-type': 'application/json' }).end(`{"errors":[{"code":"TEST_${action}","message":"injected"}]}`);
      return;
    }
    const range = req.headers.range === undefined ? '' : ` range=${req.headers.range}`;
    const fault = action === undefined ? '' : ` -> ${typeof action === 'string' ? action : typeof action === 'object' && 'hold' in action ? 'hold' : JSON.stringify(action)}`;
    const line = `${req.method} ${url.pathname}${range}${fault}`;
    state.log.push(line);
    const answered = (status: number, bytes: number): number => state.bodies.push({ request: line, status, bytes });
    if (typeof action === 'object' && 'hold' in action) {
      const go = (): void => forward(upstream, state.address, req, res, undefined, answered);
      action.hold.then(go, go);
      return;
    }
    forward(upstream, state.address, req, res, action, answered);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  stops.push(() => {
    server.closeAllConnections();
    server.close();
  });
  return state;
}

/** Makes the proxy's tokens expire at the first blob request after this call (as a token running out mid-transfer). */
export function expireTokensAtFirstBlob(proxy: TokenProxy): void {
  let expired = false;
  proxy.hooks.onRequest = (_method, path) => {
    if (!expired && path.includes('/blobs/')) {
      expired = true;
      proxy.expireTokens();
    }
    return undefined;
  };
}

/** Open fds that are not sockets (keep-alive connections to the registry come and go with the HTTP client). */
export function fileFds(): string[] {
  return readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return target.startsWith('socket:') ? [] : [`${fd} ${target}`];
    } catch {
      return [];
    }
  });
}

/** Asserts the file's tests leave no file or directory fd open (sockets aside). */
export function checkNoFileFdLeaks(): void {
  let before: string[] = [];
  beforeAll(async () => {
    await stopIdleWorker();
    before = fileFds();
  });
  afterAll(async () => {
    await stopIdleWorker();
    expect(fileFds().length).toBe(before.length);
  });
}

/** Awaits a call that must fail with a SealError, and returns it. */
export async function fails(p: Promise<unknown>): Promise<SealError> {
  const err = await p.then(
    () => new Error('unexpectedly succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SealError);
  return err as SealError;
}
