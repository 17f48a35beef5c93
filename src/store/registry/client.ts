// client.ts: the distribution API over fetch: manifests, blob HEAD/GET, uploads (monolithic, chunked), cross-repository mount.
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';

import { SealError } from '../../base/errors.js';
import { Authorizer } from './auth.js';
import type { CredentialSource } from './credentials.js';
import { DEFAULT_TIMEOUTS, type Deadlines } from './deadline.js';
import { lostConnection, readBounded, remoteError, responseUrl, send, type Transport } from './http.js';
import type { Remote } from './remote.js';
import { checkDestination } from './rules.js';

/** The largest manifest accepted (registries refuse bigger ones too). */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';

export interface ClientOptions {
  remote: Remote;
  /** Known credentials, a credential helper to ask when the registry first wants them, or none. */
  credentials: CredentialSource;
  /** Token scopes for the Bearer flow. */
  scopes: string[];
  signal?: AbortSignal | undefined;
  retries?: number;
  backoffMs?: number;
  /** Per-exchange deadlines (default DEFAULT_TIMEOUTS). */
  deadlines?: Deadlines;
  what: string;
  /** The client's own connection pool (closed by close()). */
  dispatcher: Dispatcher;
}

interface Call {
  method: string;
  /** A path below the origin, or an absolute URL (upload locations). */
  path: string;
  headers?: Record<string, string>;
  body?: Buffer;
  /** Statuses that are not errors. */
  ok: number[];
  doing: string;
}

export function sha256Digest(bytes: Uint8Array): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

export class RegistryClient {
  readonly remote: Remote;
  readonly transport: Transport;
  readonly #auth: Authorizer;
  /** Bytes sent in blob bodies and received in blob bodies. */
  bytesUp = 0;
  bytesDown = 0;

  constructor(o: ClientOptions) {
    this.remote = o.remote;
    this.transport = {
      label: `registry ${o.remote.host}`,
      signal: o.signal,
      retries: o.retries ?? 4,
      backoffMs: o.backoffMs ?? 200,
      what: o.what,
      insecure: o.remote.insecure,
      deadlines: o.deadlines ?? DEFAULT_TIMEOUTS,
      dispatcher: o.dispatcher,
    };
    this.#auth = new Authorizer({ remote: o.remote, credentials: o.credentials, signal: o.signal, scopes: o.scopes, send: (url, init) => send(this.transport, url, init) });
  }

  /** Closes every connection the client opened (requests still running fail): call once its operation is over. */
  async close(): Promise<void> {
    await this.transport.dispatcher.destroy();
  }

  /** A path below the origin, or a Location the registry sent (held to the transport rules). */
  #url(path: string): URL {
    const origin = new URL(this.remote.origin);
    if (!/^[a-z][a-z0-9+.-]*:/i.test(path)) return new URL(`${this.remote.origin}${path}`);
    const url = new URL(path);
    checkDestination(url, this.remote.insecure, `${this.transport.label}'s upload location`, origin);
    return url;
  }

  /**
   * A 401 that came from another origin than the registry's (a redirect's or an upload
   * location's): its challenge is never answered, so no credentials and no token request
   * go where it points.
   */
  async #foreignChallenge(res: Response, doing: string): Promise<SealError | undefined> {
    const from = responseUrl(res);
    const own = new URL(this.remote.origin).origin;
    if (from === undefined || from.origin === own) return undefined;
    await res.body?.cancel().catch(() => {});
    return new SealError(
      'SEAL_REMOTE',
      `${this.transport.label}: ${doing} went to ${from.origin}, which asked for authentication (HTTP 401); credentials go only to ${own} and its token realm`,
    );
  }

  /** One call: authorization learned from 401 challenges (at most twice per call), errors as SEAL_REMOTE. */
  async call(c: Call): Promise<Response> {
    const refused = (res: Response): Promise<SealError> => remoteError(this.transport, res, c.doing);
    for (let authTries = 0; ; authTries++) {
      const url = this.#url(c.path);
      // Credentials go to the registry's own origin only (an upload location elsewhere gets none).
      const sent = url.origin === new URL(this.remote.origin).origin ? this.#auth.header : undefined;
      const headers: Record<string, string> = { ...c.headers };
      if (sent !== undefined) headers.authorization = sent;
      const res = await send(this.transport, url.toString(), { method: c.method, headers, body: c.body ?? null });
      if (c.ok.includes(res.status)) return res;
      if (res.status === 401) {
        const foreign = await this.#foreignChallenge(res, c.doing);
        if (foreign !== undefined) throw foreign;
      }
      if (res.status === 401 && authTries < 2 && (await this.#auth.challenged(res, sent, await refused(res.clone())))) {
        await res.body?.cancel().catch(() => {});
        continue;
      }
      throw await refused(res);
    }
  }

  #repo(): string {
    return `/v2/${this.remote.repository}`;
  }

  /**
   * The manifest under reference (tag or digest). When there is none: undefined, or,
   * given `missing`, the SEAL_REMOTE it makes of the registry's status and error code.
   */
  async getManifest(reference: string, missing?: (detail: string) => SealError): Promise<Buffer | undefined> {
    const path = `${this.#repo()}/manifests/${reference}`;
    const res = await this.call({ method: 'GET', path, headers: { accept: OCI_MANIFEST }, ok: [200, 404], doing: `GET ${path}` });
    if (res.status === 404) {
      const err = await remoteError(this.transport, res, `GET ${path}`);
      if (missing !== undefined) throw missing(err.message.slice(err.message.indexOf('HTTP 404')));
      return undefined;
    }
    return readBounded(this.transport, res, MAX_MANIFEST_BYTES, `manifest ${reference}`);
  }

  /** PUTs a manifest under tag and checks the digest the registry reports against the bytes sent. */
  async putManifest(tag: string, bytes: Buffer): Promise<string> {
    const path = `${this.#repo()}/manifests/${tag}`;
    const res = await this.call({ method: 'PUT', path, headers: { 'content-type': OCI_MANIFEST }, body: bytes, ok: [201], doing: `PUT ${path}` });
    await res.body?.cancel().catch(() => {});
    const digest = sha256Digest(bytes);
    const said = res.headers.get('docker-content-digest');
    if (said !== null && said !== digest) {
      throw new SealError('SEAL_REMOTE', `${this.transport.label} stored manifest ${tag} as ${said}, not ${digest}`);
    }
    return digest;
  }

  /** Whether the repository holds the blob (HEAD), with the size it reports. */
  async hasBlob(digest: string): Promise<boolean> {
    const path = `${this.#repo()}/blobs/${digest}`;
    const res = await this.call({ method: 'HEAD', path, ok: [200, 404], doing: `HEAD ${path}` });
    await res.body?.cancel().catch(() => {});
    return res.status === 200;
  }

  /** GETs a blob as a stream; the caller checks its size and digest. */
  async openBlob(digest: string): Promise<Response> {
    const path = `${this.#repo()}/blobs/${digest}`;
    return this.call({ method: 'GET', path, ok: [200], doing: `GET ${path}` });
  }

  /** GETs a whole blob into memory and proves its size and sha256; a connection dropped mid-body is retried. */
  async getBlob(digest: string, size: number): Promise<Buffer> {
    let bytes: Buffer;
    for (let attempt = 0; ; attempt++) {
      const res = await this.openBlob(digest);
      try {
        bytes = await readBounded(this.transport, res, size, `blob ${digest}`);
        break;
      } catch (err) {
        if (!(err instanceof SealError && err.code === 'SEAL_REMOTE') || attempt >= this.transport.retries) throw err;
      }
    }
    this.bytesDown += bytes.length;
    if (bytes.length !== size) {
      throw new SealError('SEAL_CORRUPT', `${this.transport.label} sent ${bytes.length} bytes for blob ${digest}, its manifest says ${size}`);
    }
    if (sha256Digest(bytes) !== digest) throw new SealError('SEAL_CORRUPT', `${this.transport.label} sent blob ${digest} with other content`);
    return bytes;
  }

  /**
   * Starts an upload (POST); with `mountFrom`, asks to mount the blob from that repository
   * of the same registry instead. Returns 'mounted' or the upload location.
   */
  async startUpload(mount?: { digest: string; from: string }): Promise<'mounted' | string> {
    const query = mount === undefined ? '' : `?mount=${encodeURIComponent(mount.digest)}&from=${encodeURIComponent(mount.from)}`;
    const path = `${this.#repo()}/blobs/uploads/${query}`;
    const res = await this.call({ method: 'POST', path, body: Buffer.alloc(0), ok: [201, 202], doing: `POST ${path}` });
    await res.body?.cancel().catch(() => {});
    if (res.status === 201 && mount !== undefined) return 'mounted';
    const location = res.headers.get('location');
    if (location === null) throw new SealError('SEAL_REMOTE', `${this.transport.label} started an upload without a Location`);
    return new URL(location, this.remote.origin).toString();
  }

  #withDigest(location: string, digest: string): string {
    const url = new URL(location);
    url.searchParams.set('digest', digest);
    return url.toString();
  }

  /** Finishes an upload with one PUT carrying the whole blob (monolithic). */
  async putBlob(location: string, digest: string, bytes: Buffer): Promise<void> {
    const res = await this.call({
      method: 'PUT',
      path: this.#withDigest(location, digest),
      headers: { 'content-type': 'application/octet-stream' },
      body: bytes,
      ok: [201],
      doing: `PUT blob ${digest}`,
    });
    await res.body?.cancel().catch(() => {});
    this.bytesUp += bytes.length;
  }

  /** Sends one chunk (PATCH with Content-Range) and returns the next location. */
  async patchChunk(location: string, chunk: Buffer, offset: number): Promise<string> {
    const res = await this.call({
      method: 'PATCH',
      path: location,
      headers: { 'content-type': 'application/octet-stream', 'content-range': `${offset}-${offset + chunk.length - 1}` },
      body: chunk,
      ok: [202],
      doing: `PATCH upload at ${offset}`,
    });
    await res.body?.cancel().catch(() => {});
    this.bytesUp += chunk.length;
    const next = res.headers.get('location');
    return next === null ? location : new URL(next, this.remote.origin).toString();
  }

  /** Closes a chunked upload: PUT with the digest and no body. */
  async finishChunked(location: string, digest: string): Promise<void> {
    const res = await this.call({ method: 'PUT', path: this.#withDigest(location, digest), body: Buffer.alloc(0), ok: [201], doing: `PUT blob ${digest}` });
    await res.body?.cancel().catch(() => {});
  }

  /** Abandons an upload session (best effort). */
  async cancelUpload(location: string): Promise<void> {
    try {
      const res = await this.call({ method: 'DELETE', path: location, ok: [204, 404], doing: 'DELETE upload' });
      await res.body?.cancel().catch(() => {});
    } catch {
      // the registry expires abandoned sessions itself
    }
  }

  /** A lost connection while streaming a body, as SEAL_REMOTE (or SEAL_ABORTED). */
  lost(err: unknown, doing: string): SealError {
    return lostConnection(this.transport, err, doing);
  }
}
