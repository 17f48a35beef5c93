// http.ts: one HTTP exchange with a registry: retries with backoff, deadlines, redirects by the transport rules, abort, bounded body reads, and SEAL_REMOTE errors.
import type { ConnectionPool } from './network.js';

import { SealError, abortedError } from '../../base/errors.js';
import { escapePath } from '../../base/paths.js';
import { TimedOut, Watch, bufferBody, watchedResponse, watchedUpload, type BodySource, type Deadlines } from './deadline.js';
import { checkDestination } from './rules.js';

/** Network failures that will not heal by asking again right away. */
const PERMANENT = new Set(['bad port', 'ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'CERT_HAS_EXPIRED', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'ERR_TLS_CERT_ALTNAME_INVALID', 'SELF_SIGNED_CERT_IN_CHAIN']);

/** Redirect statuses followed (by hand: each hop is checked against the transport rules first). */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
const MAX_REDIRECTS = 10;

export interface Transport {
  /** Where messages say the request went, e.g. `registry 127.0.0.1:5000`. */
  label: string;
  signal: AbortSignal | undefined;
  /** Further attempts after a 429, a 5xx, a lost connection or a passed deadline. */
  retries: number;
  /** First backoff in ms, doubled each attempt (Retry-After wins when the registry sends one, up to 10 s). */
  backoffMs: number;
  /** What was being done, for SEAL_ABORTED. */
  what: string;
  /** Plain HTTP to any host (else only to loopback hosts); never from HTTPS down to HTTP. */
  insecure: boolean;
  deadlines: Deadlines;
  /** The operation's own connection pool: closed when it ends, so no socket outlives a push or pull (undefined: Node's global one). */
  dispatcher: ConnectionPool | undefined;
  /** Told of each retry before its wait (the options' onRetry). */
  onRetry?: ((r: RetryNotice) => void) | undefined;
}

/** A retry about to happen, as onRetry is told of it. */
export interface RetryNotice {
  /** What failed: `GET /v2/…/blobs/sha256:…`, or `reading blob sha256:…`, `uploading blob sha256:…`. */
  what: string;
  /** Why: `HTTP 503`, or the connection's error code (`ECONNRESET`, `UND_ERR_SOCKET`, a deadline's `ETIMEDOUT`). */
  reason: string;
  /** This retry's number (1 for the first) and how many are allowed. */
  attempt: number;
  retries: number;
  /** How long it waits first, in ms. */
  waitMs: number;
}

/** Tells t.onRetry of a retry; a callback that throws does not stop the transfer. */
export function noticeRetry(t: Transport, notice: RetryNotice): void {
  try {
    t.onRetry?.(notice);
  } catch {
    // the caller's own problem, not the transfer's
  }
}

/**
 * The retries one transfer may still make, shared by its requests and its resumes (a blob
 * cut short and resumed does not start a new count: a registry that stalls each answer
 * gets `retries` more tries in all, not `retries` per resume).
 */
export class RetryBudget {
  used = 0;
  constructor(readonly retries: number) {}
  /** Takes one retry; false when none is left. */
  take(): boolean {
    if (this.used >= this.retries) return false;
    this.used++;
    return true;
  }
}

/** One request: its body is read anew for every attempt and every redirect, so each sends the same bytes. */
export interface Outgoing {
  method: string;
  headers: Record<string, string>;
  body?: Buffer | BodySource | null;
  /**
   * Whether a 429, 408 or 5xx answer and a lost connection are retried here (default true).
   * False for a request whose lost answer may hide work the registry did (an upload's PATCH
   * or closing PUT): its caller asks the registry what happened instead.
   */
  retry?: boolean;
  /** The transfer's shared retries (default: `retries` for this request alone). */
  budget?: RetryBudget | undefined;
}

/** The HTTP status behind a SEAL_REMOTE made of a registry's answer (remoteError). */
const statuses = new WeakMap<SealError, number>();

export function statusOf(err: unknown): number | undefined {
  return err instanceof SealError ? statuses.get(err) : undefined;
}

/** The URL each response came from (the last hop of its redirects): a 401 is answered only when that is the registry's origin. */
const answeredFrom = new WeakMap<Response, URL>();

/** The URL that sent res (after its redirects), for responses that came through send. */
export function responseUrl(res: Response): URL | undefined {
  return answeredFrom.get(res);
}

export function aborted(t: Transport): SealError {
  return abortedError(t.what, t.signal);
}

/** undici's words for a proxy that refused the request or the tunnel (HTTP_PROXY / HTTPS_PROXY). */
const PROXY_REFUSAL = /^Proxy Authentication Required \(407\)$|^Proxy response \(\d+\) !== 200 when HTTP Tunneling$/;

/** A proxy that refused with 403 or 407 will refuse again. */
const PROXY_FINAL = /^the proxy refused it: .*\((?:403|407)\)/;

/** undici's proxy refusal somewhere in err's chain of causes (a refused tunnel comes two deep). */
function proxyRefusal(err: unknown): string | undefined {
  let e = (err as { cause?: unknown }).cause;
  for (let depth = 0; depth < 4 && e !== null && typeof e === 'object'; depth++) {
    const { message, cause } = e as { message?: unknown; cause?: unknown };
    if (typeof message === 'string' && PROXY_REFUSAL.test(message)) return message;
    e = cause;
  }
  return undefined;
}

/** What a failed exchange says: the proxy's refusal, else its cause's code or message, else its own message. */
export function causeCode(err: unknown): string {
  const refusal = proxyRefusal(err);
  if (refusal !== undefined) return `the proxy refused it: ${refusal}`;
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause !== undefined && typeof cause.code === 'string') return cause.code;
  if (cause !== undefined && typeof cause.message === 'string') return cause.message;
  return err instanceof Error ? err.message : String(err);
}

/** SEAL_REMOTEs that stand for a dropped connection or a passed deadline (lostConnection). */
const lost = new WeakSet<SealError>();

/** Whether err is a dropped connection or a passed deadline: the registry may have done the work, or may answer next time. */
export function isLost(err: unknown): boolean {
  return err instanceof SealError && lost.has(err);
}

export function lostConnection(t: Transport, err: unknown, doing: string): SealError {
  if (t.signal?.aborted) return aborted(t);
  if (err instanceof SealError) return err;
  // fetch refuses the ports the Fetch standard blocks (6000, 6665–6669, 10080, …) before it connects: no retry changes that.
  if (causeCode(err) === 'bad port') {
    return new SealError(
      'SEAL_REMOTE',
      `${t.label} cannot be reached while ${doing}: Node's fetch refuses to connect to the port asked (the registry's, its token realm's or a redirect's: one the Fetch standard blocks, such as 6000, 5060, 6665–6669 or 10080); serve them on another port`,
      { cause: err },
    );
  }
  const e =
    err instanceof TimedOut
      ? new SealError('SEAL_REMOTE', `${t.label} timed out while ${doing}: ${err.message}`, { cause: err })
      : new SealError('SEAL_REMOTE', `${t.label} is unreachable or dropped the connection while ${doing}: ${registryText(causeCode(err))}`, { cause: err });
  if (!PERMANENT.has(causeCode(err)) && !PROXY_FINAL.test(causeCode(err))) lost.add(e);
  return e;
}

/** Waits ms (or until the signal aborts; the caller checks which). */
export function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/**
 * How long to wait before retry `attempt`: what the answer's Retry-After says (seconds, or
 * an HTTP date; at most 10 s), else backoff doubling from backoffMs with jitter. No header
 * is no header: `Number(null)` is 0, and every retry once went at once.
 */
function retryDelay(t: Pick<Transport, 'backoffMs'>, attempt: number, res: Response | undefined): number {
  const header = res?.headers.get('retry-after')?.trim();
  if (header !== undefined && header !== '') {
    // Seconds, or an HTTP date (it names a weekday or month); anything else (`-5`, which Date.parse reads as a year) is no header.
    const ms = /^\d+$/.test(header) ? Number(header) * 1000 : /[a-z]/i.test(header) ? Date.parse(header) - Date.now() : NaN;
    if (Number.isFinite(ms)) return Math.min(Math.max(ms, 0), 10_000);
  }
  return Math.min(t.backoffMs * 2 ** attempt, 5_000) * (0.75 + Math.random() / 2);
}

function retryable(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

/** One exchange under its own deadlines; a redirect comes back as it is (the caller follows it). */
async function exchange(t: Transport, url: URL, method: string, headers: Record<string, string>, body: BodySource | null): Promise<Response> {
  const w = new Watch(t.deadlines, t.signal);
  // A body read that fails (a snapshot file that changed) fails the request with its own error.
  let bodyFailure: { err: unknown } | undefined;
  try {
    // Node's fetch takes any undici dispatcher; its types (undici-types) and the undici package's name the same interface twice.
    const dispatcher = t.dispatcher as unknown as RequestInit['dispatcher'];
    const init: RequestInit & { duplex?: 'half' } = { method, headers, redirect: 'manual', signal: w.signal, ...(dispatcher === undefined ? {} : { dispatcher }) };
    if (body !== null && body.size > 0) {
      const source: BodySource = {
        size: body.size,
        read: async (position, length) => {
          try {
            return await body.read(position, length);
          } catch (err) {
            bodyFailure ??= { err };
            throw err;
          }
        },
      };
      init.body = watchedUpload(source, w);
      init.duplex = 'half';
      init.headers = { ...headers, 'content-length': String(body.size) };
    } else if (body !== null) init.body = Buffer.alloc(0);
    w.awaitHeaders();
    const res = await fetch(url, init);
    w.gotHeaders();
    return watchedResponse(res, w);
  } catch (err) {
    w.end();
    if (bodyFailure !== undefined) throw bodyFailure.err;
    throw w.timedOut ?? err;
  }
}

/**
 * Sends req to start and follows redirects by hand: each hop must pass the transport
 * rules (see checkDestination) before anything connects to it, and the Authorization
 * header never leaves the origin it was meant for: once a hop leaves it, no later hop
 * carries it (not even one back to that origin).
 */
async function follow(t: Transport, start: URL, req: Outgoing): Promise<Response> {
  let url = start;
  let method = req.method;
  let body: BodySource | null = req.body === undefined || req.body === null ? null : Buffer.isBuffer(req.body) ? bufferBody(req.body) : req.body;
  const headers = { ...req.headers };
  const doing = `${req.method} ${start.pathname}`;
  for (let hops = 0; ; hops++) {
    const res = await exchange(t, url, method, headers, body);
    const location = REDIRECTS.has(res.status) ? res.headers.get('location') : null;
    if (location === null) {
      answeredFrom.set(res, url);
      return res;
    }
    await res.body?.cancel().catch(() => {});
    if (hops >= MAX_REDIRECTS) throw new SealError('SEAL_REMOTE', `${t.label} redirected ${doing} more than ${MAX_REDIRECTS} times`);
    let next: URL;
    try {
      next = new URL(location, url);
    } catch (err) {
      throw new SealError('SEAL_REMOTE', `${t.label} redirected ${doing} to a bad location`, { cause: err });
    }
    checkDestination(next, t.insecure, `${t.label}'s redirect of ${doing}`, url);
    if (res.status === 303 || ((res.status === 301 || res.status === 302) && method === 'POST')) {
      if (method !== 'HEAD') method = 'GET';
      body = null;
      delete headers['content-type'];
    }
    if (next.origin !== start.origin) delete headers.authorization;
    url = next;
  }
}

/**
 * Sends one request with retries: a 429, 408 or 5xx answer, a dropped connection and a
 * passed deadline are retried with exponential backoff; a refused destination is not.
 */
export async function send(t: Transport, url: string, req: Outgoing): Promise<Response> {
  const start = new URL(url);
  const budget = req.budget ?? new RetryBudget(t.retries);
  for (;;) {
    if (t.signal?.aborted) throw aborted(t);
    let res: Response | undefined;
    let reason = '';
    try {
      res = await follow(t, start, req);
    } catch (err) {
      if (t.signal?.aborted) throw aborted(t);
      if (err instanceof SealError) throw err;
      const code = causeCode(err);
      if (req.retry === false || PERMANENT.has(code) || PROXY_FINAL.test(code) || !budget.take()) throw lostConnection(t, err, `${req.method} ${start.pathname}`);
      reason = code === '' ? 'connection lost' : code;
    }
    if (res !== undefined && (!retryable(res.status) || req.retry === false || !budget.take())) return res;
    await res?.body?.cancel().catch(() => {});
    const waitMs = retryDelay(t, budget.used - 1, res);
    noticeRetry(t, { what: `${req.method} ${start.pathname}`, reason: res === undefined ? reason : `HTTP ${res.status}`, attempt: budget.used, retries: t.retries, waitMs: Math.round(waitMs) });
    await sleep(waitMs, t.signal);
  }
}

/** Reads a body of at most `max` bytes (a longer one is refused without reading it all). */
export async function readBounded(t: Transport, res: Response, max: number, what: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let got = 0;
  try {
    if (res.body !== null) {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        got += chunk.length;
        if (got > max) {
          await res.body.cancel().catch(() => {});
          throw new SealError('SEAL_CORRUPT', `${t.label} sent more than ${max} bytes for ${what}`);
        }
        parts.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
      }
    }
  } catch (err) {
    throw lostConnection(t, err, `reading ${what}`);
  }
  return Buffer.concat(parts, got);
}

/**
 * Text a registry or token server sent (an error's code and message, a header, a realm),
 * for a message: an Authorization value it echoed masked, control characters escaped (a
 * registry must not write escape sequences to a terminal), at most 300 characters.
 */
export function registryText(text: string): string {
  // Up to the next space, quote or closing mark: a token may hold any printable character.
  const masked = text.replace(/\b(Basic|Bearer)\s+[^\s"'`,;)\]}>]+/gi, '$1 ***');
  return escapePath(masked.length > 300 ? `${masked.slice(0, 300)}…` : masked);
}

/** SEAL_REMOTE for an unexpected answer: the HTTP status and the registry's own error code and message. */
export async function remoteError(t: Transport, res: Response, doing: string): Promise<SealError> {
  let detail = '';
  try {
    const text = (await readBounded(t, res, 64 * 1024, 'an error')).toString('utf8');
    const first = (JSON.parse(text) as { errors?: { code?: unknown; message?: unknown }[] }).errors?.[0];
    if (first !== undefined) detail = ` ${registryText(String(first.code))}${first.message ? ` (${registryText(String(first.message))})` : ''}`;
  } catch {
    // no JSON error body: the status says it all
  }
  const err = new SealError('SEAL_REMOTE', `${t.label} refused ${doing}: HTTP ${res.status}${detail}`);
  statuses.set(err, res.status);
  return err;
}
