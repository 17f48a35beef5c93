// client.ts: the distribution API over fetch: manifests, blob HEAD/GET, uploads (monolithic, chunked), cross-repository mount.
import { sha256Digest } from '../../base/manifest.js';
import type { ConnectionPool } from './network.js';

import { releasable } from '../../base/growable.js';
import { SealError } from '../../base/errors.js';
import { Authorizer } from './auth.js';
import type { CredentialSource } from './credentials.js';
import { DEFAULT_TIMEOUTS, type BodySource, type Deadlines } from './deadline.js';
import { aborted, causeCode, isLost, lostConnection, noticeRetry, readBounded, registryText, remoteError, RetryBudget, responseUrl, send, sleep, statusOf, type RetryNotice, type Transport } from './http.js';
import type { Remote } from './remote.js';
import { checkDestination } from './rules.js';

/** Blobs of at least this many bytes are read into releasable memory (base/growable.ts). */
const RELEASABLE_BYTES = 64 * 1024;

/**
 * The successes each write may answer with: what the distribution spec names (201 for a
 * stored blob or manifest, 202 for an accepted chunk, 204 for an upload's status or its
 * deletion) and the other 2xx registries are known to send in its place (ECR answers a
 * chunk with 201; some proxies a PUT with 200 or 204).
 */
const STORED = [200, 201, 204];
const CHUNK_TAKEN = [201, 202, 204];
const UPLOAD_STATUS = [200, 204];
const UPLOAD_DELETED = [200, 202, 204];

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
  /** The client's own connection pool (closed by close()); undefined: Node's global one, left open. */
  dispatcher: ConnectionPool | undefined;
  onRetry?: ((r: RetryNotice) => void) | undefined;
}

/** A failure's reason as a retry notice gives it: the registry's status, else what the connection's error says (causeCode). */
function reasonOf(err: unknown): string {
  const status = statusOf(err);
  return status === undefined ? causeCode(err) : `HTTP ${status}`;
}

interface Call {
  method: string;
  /** A path below the origin, or an absolute URL (upload locations). */
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | BodySource;
  /** Statuses that are not errors. */
  ok: number[];
  doing: string;
  /** False: a lost answer or a 5xx is not retried here (see Outgoing.retry). */
  retry?: boolean;
  /** The transfer's shared retries (see RetryBudget). */
  budget?: RetryBudget;
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
      onRetry: o.onRetry,
    };
    this.#auth = new Authorizer({ remote: o.remote, credentials: o.credentials, signal: o.signal, scopes: o.scopes,
      send: (url, init) => send(this.transport, url, init),
      read: (res, max, what, label) => readBounded({ ...this.transport, label }, res, max, what),
    });
  }

  /** Closes every connection the client opened (requests still running fail): call once its operation is over. With Node's global pool, nothing. */
  async close(): Promise<void> {
    await this.transport.dispatcher?.destroy();
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
      const res = await send(this.transport, url.toString(), { method: c.method, headers, body: c.body ?? null, retry: c.retry ?? true, budget: c.budget });
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
    const res = await this.call({ method: 'PUT', path, headers: { 'content-type': OCI_MANIFEST }, body: bytes, ok: STORED, doing: `PUT ${path}` });
    await res.body?.cancel().catch(() => {});
    const digest = sha256Digest(bytes);
    const said = res.headers.get('docker-content-digest');
    if (said !== null && said !== digest) {
      throw new SealError('SEAL_REMOTE', `${this.transport.label} stored manifest ${tag} as ${registryText(said)}, not ${digest}`);
    }
    return digest;
  }

  /** Whether the repository holds the blob (HEAD); given a size, only when it reports that size. */
  async hasBlob(digest: string, size?: number): Promise<boolean> {
    const path = `${this.#repo()}/blobs/${digest}`;
    const res = await this.call({ method: 'HEAD', path, ok: [200, 404], doing: `HEAD ${path}` });
    await res.body?.cancel().catch(() => {});
    if (res.status !== 200) return false;
    const length = res.headers.get('content-length');
    return size === undefined || length === null || Number(length) === size;
  }

  /**
   * GETs a blob as a stream from byte `from` on (a Range request past 0), up to byte
   * `last` when given (`bytes=from-last`). The answer is 206 from `from`, or 200 with the
   * whole blob (a registry may ignore Range): `start` says which byte the body begins with.
   * The caller checks the size and the digest, and stops reading after `last`.
   */
  async openBlob(digest: string, from = 0, last?: number, budget?: RetryBudget): Promise<{ res: Response; start: number }> {
    const path = `${this.#repo()}/blobs/${digest}`;
    const ranged = from > 0 || last !== undefined;
    const headers: Record<string, string> = ranged ? { range: `bytes=${from}-${last ?? ''}` } : {};
    const res = await this.call({ method: 'GET', path, headers, ok: ranged ? [200, 206] : [200], doing: `GET ${path}`, budget });
    if (res.status === 200) return { res, start: 0 };
    const range = /^bytes (\d+)-\d+\/(?:\d+|\*)$/.exec(res.headers.get('content-range') ?? '');
    if (range === null || Number(range[1]) !== from) {
      await res.body?.cancel().catch(() => {});
      throw new SealError('SEAL_CORRUPT', `${this.transport.label} answered a Range request for blob ${digest} from byte ${from} with Content-Range ${registryText(JSON.stringify(res.headers.get('content-range')))}`);
    }
    return { res, start: from };
  }

  /**
   * GETs a whole blob into memory and proves its size and sha256 (`prove` false: its size
   * only, for a caller that proves the bytes more strictly itself). A body cut short (a
   * dropped connection, a passed deadline) is resumed with a Range request from the last
   * byte received, up to `retries` times; the blob is proven as a whole.
   */
  async getBlob(digest: string, size: number, prove = true): Promise<Buffer> {
    // A large blob's memory can be given back as soon as its bytes are used (release()).
    const bytes = size >= RELEASABLE_BYTES ? releasable(size) : Buffer.allocUnsafe(size);
    let got = 0;
    let over = false;
    const budget = new RetryBudget(this.transport.retries);
    for (;;) {
      const { res, start } = await this.openBlob(digest, got, undefined, budget);
      got = start;
      try {
        for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
          if (got + chunk.length > size) {
            over = true;
            await res.body?.cancel().catch(() => {});
            break;
          }
          bytes.set(chunk, got);
          got += chunk.length;
          this.bytesDown += chunk.length;
        }
        break;
      } catch (err) {
        const e = this.lost(err, `reading blob ${digest}`);
        if (!isLost(e) || !budget.take()) throw e;
        await this.pause(budget.used - 1, `reading blob ${digest}`, e);
      }
    }
    if (over) throw new SealError('SEAL_CORRUPT', `${this.transport.label} sent more than ${size} bytes for blob ${digest}`);
    if (got !== size) {
      throw new SealError('SEAL_CORRUPT', `${this.transport.label} sent ${got} bytes for blob ${digest}, its manifest says ${size}`);
    }
    if (prove && sha256Digest(bytes) !== digest) throw new SealError('SEAL_CORRUPT', `${this.transport.label} sent blob ${digest} with other content`);
    return bytes;
  }

  /**
   * GETs bytes [start, start + length) of a blob with a Range request (`bytes=start-end`),
   * handing them to `sink` in order, each byte once. A 206 must begin at the byte asked
   * for; a registry that ignores Range and answers 200 with the whole blob is read up to
   * the range's end and the bytes before it are dropped. A body cut short is resumed from
   * the byte after the last one handed on, up to `retries` times. Only the length is
   * proven here: the caller proves the bytes (the sha256 the snapshot manifest gives them).
   */
  async readRange(digest: string, start: number, length: number, sink: (chunk: Uint8Array) => void | Promise<void>): Promise<void> {
    let got = 0;
    const last = start + length - 1;
    const budget = new RetryBudget(this.transport.retries);
    while (got < length) {
      const { res, start: at } = await this.openBlob(digest, start + got, last, budget);
      // The whole blob (Range ignored): skip to the range; what came before counts for nothing.
      let skip = at === 0 ? start + got : 0;
      // A failed sink is the caller's failure (a disk, an output), not the connection's.
      let sinking = false;
      try {
        for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
          this.bytesDown += chunk.length;
          let piece = chunk;
          if (skip > 0) {
            const dropped = Math.min(skip, piece.length);
            skip -= dropped;
            piece = piece.subarray(dropped);
          }
          piece = piece.subarray(0, Math.min(piece.length, length - got));
          if (piece.length > 0) {
            sinking = true;
            await sink(piece);
            sinking = false;
            got += piece.length;
          }
          if (got === length) {
            await res.body?.cancel().catch(() => {});
            break;
          }
        }
        if (got < length) throw new SealError('SEAL_CORRUPT', `${this.transport.label} sent fewer than the ${length} bytes asked for from byte ${start} of blob ${digest}`);
      } catch (err) {
        if (sinking) {
          await res.body?.cancel().catch(() => {});
          throw err;
        }
        const e = this.lost(err, `reading blob ${digest}`);
        if (!isLost(e) || !budget.take()) throw e;
        await this.pause(budget.used - 1, `reading blob ${digest}`, e);
      }
    }
  }

  /**
   * Waits before the next try of `what`, which failed `attempt` times (backoff from
   * backoffMs, doubling, up to 5 s), onRetry told first with `err`'s reason; ends early on abort.
   */
  async pause(attempt: number, what: string, err: unknown): Promise<void> {
    const waitMs = Math.min(this.transport.backoffMs * 2 ** attempt, 5_000) * (0.75 + Math.random() / 2);
    noticeRetry(this.transport, { what, reason: reasonOf(err), attempt: attempt + 1, retries: this.transport.retries, waitMs: Math.round(waitMs) });
    await sleep(waitMs, this.transport.signal);
    if (this.transport.signal?.aborted) throw aborted(this.transport);
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

  /**
   * Finishes an upload with one PUT carrying the whole blob (monolithic). Not retried here:
   * a lost answer may hide a blob the registry stored (the caller asks with HEAD).
   */
  async putBlob(location: string, digest: string, body: BodySource): Promise<void> {
    const res = await this.call({
      method: 'PUT',
      path: this.#withDigest(location, digest),
      headers: { 'content-type': 'application/octet-stream' },
      body,
      ok: STORED,
      doing: `PUT blob ${digest}`,
      retry: false,
    });
    await res.body?.cancel().catch(() => {});
    this.bytesUp += body.size;
  }

  /** Sends one chunk at offset (PATCH with Content-Range) and returns the next location. Not retried here (see uploadStatus). */
  async patchChunk(location: string, chunk: BodySource, offset: number): Promise<string> {
    const res = await this.call({
      method: 'PATCH',
      path: location,
      headers: { 'content-type': 'application/octet-stream', 'content-range': `${offset}-${offset + chunk.size - 1}` },
      body: chunk,
      ok: CHUNK_TAKEN,
      doing: `PATCH upload at ${offset}`,
      retry: false,
    });
    await res.body?.cancel().catch(() => {});
    this.bytesUp += chunk.size;
    const next = res.headers.get('location');
    return next === null ? location : new URL(next, this.remote.origin).toString();
  }

  /**
   * How much of an upload session the registry holds (GET on its location: 204 (or 200) with
   * `Range: 0-<last>`), and the location to go on with; undefined when the session is gone.
   */
  async uploadStatus(location: string): Promise<{ next: number; location: string } | undefined> {
    const res = await this.call({ method: 'GET', path: location, ok: [...UPLOAD_STATUS, 404], doing: 'GET upload status' });
    await res.body?.cancel().catch(() => {});
    if (res.status === 404) return undefined;
    const range = /^(?:bytes=)?0-(\d+)$/.exec(res.headers.get('range') ?? '');
    // `0-0` is what Docker Distribution says of a session holding nothing yet (a first PATCH
    // lost before it arrived): nothing held, not one byte (no chunk of a push is one byte).
    const next = range === null || range[1] === '0' ? 0 : Number(range[1]) + 1;
    const moved = res.headers.get('location');
    return { next, location: moved === null ? location : new URL(moved, this.remote.origin).toString() };
  }

  /** Closes a chunked upload: PUT with the digest and no body. Not retried here (a lost answer may hide a stored blob). */
  async finishChunked(location: string, digest: string): Promise<void> {
    const res = await this.call({ method: 'PUT', path: this.#withDigest(location, digest), body: Buffer.alloc(0), ok: STORED, doing: `PUT blob ${digest}`, retry: false });
    await res.body?.cancel().catch(() => {});
  }

  /** Abandons an upload session (best effort). */
  async cancelUpload(location: string): Promise<void> {
    try {
      const res = await this.call({ method: 'DELETE', path: location, ok: [...UPLOAD_DELETED, 404], doing: 'DELETE upload' });
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
