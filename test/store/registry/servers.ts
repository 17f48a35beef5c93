// servers.ts: small loopback servers for the network-rule tests (HTTP, HTTPS with a self-signed cert, raw TCP) and a fetch guard that refuses any other address.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as httpsServer } from 'node:https';
import { connect as netConnect, createServer as netServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll } from 'vitest';

import { isLoopback } from '../../../dist/internal.js';
import { tempDir } from '../../helpers.js';

const closers: (() => void)[] = [];
afterAll(() => {
  for (const close of closers.splice(0)) close();
});

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

async function listen(server: Server | ReturnType<typeof netServer>, host = '127.0.0.1'): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(() => {
    (server as Server).closeAllConnections?.();
    server.close();
  });
  return `${host}:${(server.address() as AddressInfo).port}`;
}

/** An HTTP server on 127.0.0.1 (or another loopback address); returns host:port. */
export function httpOn(handler: Handler, host = '127.0.0.1'): Promise<string> {
  return listen(createServer(handler), host);
}

/** A self-signed certificate for 127.0.0.1 (key, cert, and the cert's file for NODE_EXTRA_CA_CERTS). */
export function selfSigned(): { key: Buffer; cert: Buffer; certFile: string } {
  const dir = tempDir();
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], {
    stdio: 'ignore',
  });
  return { key: readFileSync(keyFile), cert: readFileSync(certFile), certFile };
}

export interface PrivateCa {
  /** The CA's certificate (PEM) and its file: what a client is told to trust. */
  caPem: Buffer;
  caFile: string;
  /** A server certificate the CA signed, for 127.0.0.1 and localhost, with its key. */
  certFile: string;
  keyFile: string;
  cert: Buffer;
  key: Buffer;
}

/** A CA of the test's own and a server certificate it signed for 127.0.0.1 (no client trusts it unless told). */
export function privateCa(): PrivateCa {
  const dir = tempDir();
  const f = (name: string): string => join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const openssl = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'ignore' });
  openssl(['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '2', '-subj', '/CN=treeseal test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  openssl(['req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'), '-subj', '/CN=127.0.0.1']);
  writeFileSync(f('ext.cnf'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  openssl(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-out', f('server.pem'), '-days', '2', '-extfile', f('ext.cnf')]);
  return { caPem: readFileSync(f('ca.pem')), caFile: f('ca.pem'), certFile: f('server.pem'), keyFile: f('server.key'), cert: readFileSync(f('server.pem')), key: readFileSync(f('server.key')) };
}

export interface ForwardProxy {
  address: string;
  /** What passed through: `CONNECT host:port` for a tunnel, `METHOD absolute-url` for a plain HTTP request, with its headers. */
  seen: { line: string; authorization: string | undefined; proxyAuthorization: string | undefined }[];
}

/**
 * A forward proxy on 127.0.0.1 (node:http): plain HTTP requests in absolute form are sent
 * on, CONNECT opens a tunnel; each is recorded. With `requireAuth` (a Proxy-Authorization
 * value), anything else is answered 407.
 */
export async function forwardProxy(requireAuth?: string): Promise<ForwardProxy> {
  const p: ForwardProxy = { address: '', seen: [] };
  const sockets = new Set<Socket>();
  const refused = (proxyAuthorization: string | undefined): boolean => requireAuth !== undefined && proxyAuthorization !== requireAuth;
  const server = createServer((req, res) => {
    const proxyAuthorization = req.headers['proxy-authorization'];
    p.seen.push({ line: `${req.method} ${req.url}`, authorization: req.headers.authorization, proxyAuthorization });
    if (refused(proxyAuthorization)) {
      req.resume();
      res.writeHead(407, { 'proxy-authenticate': 'Basic realm="proxy"' }).end();
      return;
    }
    const url = new URL(req.url ?? '/');
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const out = request({ host: url.hostname, port: Number(url.port || 80), method: req.method, path: `${url.pathname}${url.search}`, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('connect', (req: IncomingMessage, client: Socket, head: Buffer) => {
    const proxyAuthorization = req.headers['proxy-authorization'];
    p.seen.push({ line: `CONNECT ${req.url}`, authorization: req.headers.authorization, proxyAuthorization });
    client.on('error', () => {});
    if (refused(proxyAuthorization)) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="proxy"\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const [host, port] = (req.url ?? '').split(/:(?=\d+$)/);
    const up = netConnect(Number(port), host!, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    sockets.add(up);
    up.on('close', () => sockets.delete(up));
    up.on('error', () => client.destroy());
  });
  p.address = await listen(server);
  closers.push(() => sockets.forEach((s) => s.destroy()));
  return p;
}

/** An HTTPS server on 127.0.0.1 with the given key and cert; returns host:port. */
export function httpsOn(tls: { key: Buffer; cert: Buffer }, handler: Handler): Promise<string> {
  return listen(httpsServer(tls, handler) as unknown as Server);
}

/** A TCP server on 127.0.0.1 that accepts connections and never answers; counts them. */
export async function silentServer(): Promise<{ address: string; connections: () => number; open: () => Promise<number> }> {
  const sockets: Socket[] = [];
  const closed = new Set<Socket>();
  const server = netServer((s) => {
    sockets.push(s);
    s.on('error', () => {});
    // Read (and drop) what the client sends, so its FIN ends and closes the socket here.
    s.resume();
    s.on('close', () => closed.add(s));
  });
  const address = await listen(server);
  closers.push(() => sockets.forEach((s) => s.destroy()));
  // Sockets the client has not closed yet (a short wait lets its FIN arrive).
  const open = async (): Promise<number> => {
    await new Promise((r) => setTimeout(r, 100));
    return sockets.filter((s) => !closed.has(s)).length;
  };
  return { address, connections: () => sockets.length, open };
}

/**
 * Passes a request on to the registry at upstream (host:port) and its answer back; a
 * Location it answers with is passed through `location` (given the URL it names).
 */
export function forward(upstream: string, req: IncomingMessage, res: ServerResponse, path = req.url ?? '/', location?: (url: URL) => string): void {
  const [host, port] = upstream.split(':');
  const headers = { ...req.headers, host: upstream };
  const out = request({ host, port: Number(port), method: req.method, path, headers }, (up) => {
    const answer = { ...up.headers };
    if (location !== undefined && typeof answer.location === 'string') answer.location = location(new URL(answer.location, `http://${upstream}`));
    res.writeHead(up.statusCode ?? 502, answer);
    up.pipe(res);
  });
  out.on('error', () => res.destroy());
  req.pipe(out);
}

/**
 * Replaces fetch for the rest of the file: a URL whose host is not loopback is refused
 * before any connection and recorded; every other request goes through.
 */
export function guardFetch(): { refused: string[]; seen: { url: string; authorization: string | undefined }[] } {
  const real = globalThis.fetch;
  const state = { refused: [] as string[], seen: [] as { url: string; authorization: string | undefined }[] };
  globalThis.fetch = (async (input: string | URL, init?: RequestInit) => {
    const url = new URL(String(input));
    const headers = (init?.headers ?? {}) as Record<string, string>;
    state.seen.push({ url: url.toString(), authorization: headers.authorization });
    if (!isLoopback(url.host)) {
      state.refused.push(url.toString());
      throw new TypeError('fetch failed', { cause: Object.assign(new Error('the test refuses every non-loopback address'), { code: 'ETESTGUARD' }) });
    }
    return real(input, init);
  }) as typeof fetch;
  closers.push(() => {
    globalThis.fetch = real;
  });
  return state;
}
