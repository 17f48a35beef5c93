// http.ts: one HTTP exchange with a registry: retries with backoff, abort, bounded body reads, and SEAL_REMOTE errors.
import { SealError } from '../../base/errors.js';

/** Network failures that will not heal by asking again right away. */
const PERMANENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'CERT_HAS_EXPIRED', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'ERR_TLS_CERT_ALTNAME_INVALID', 'SELF_SIGNED_CERT_IN_CHAIN']);

export interface Transport {
  /** Where messages say the request went, e.g. `registry 127.0.0.1:5000`. */
  label: string;
  signal: AbortSignal | undefined;
  /** Further attempts after a 429, a 5xx or a lost connection. */
  retries: number;
  /** First backoff in ms, doubled each attempt (Retry-After wins when the registry sends one, up to 10 s). */
  backoffMs: number;
  /** What was being done, for SEAL_ABORTED. */
  what: string;
}

export function aborted(t: Transport): SealError {
  return new SealError('SEAL_ABORTED', `${t.what} was aborted`);
}

function causeCode(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (cause !== undefined && typeof cause.code === 'string') return cause.code;
  if (cause !== undefined && typeof cause.message === 'string') return cause.message;
  return err instanceof Error ? err.message : String(err);
}

export function lostConnection(t: Transport, err: unknown, doing: string): SealError {
  if (t.signal?.aborted) return aborted(t);
  if (err instanceof SealError) return err;
  return new SealError('SEAL_REMOTE', `${t.label} is unreachable or dropped the connection while ${doing}: ${causeCode(err)}`, { cause: err });
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
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

function retryDelay(t: Transport, attempt: number, res: Response | undefined): number {
  const after = Number(res?.headers.get('retry-after'));
  if (Number.isFinite(after) && after >= 0) return Math.min(after * 1000, 10_000);
  return Math.min(t.backoffMs * 2 ** attempt, 5_000) * (0.75 + Math.random() / 2);
}

function retryable(status: number): boolean {
  return status === 429 || status === 408 || status >= 500;
}

/**
 * fetch with retries: a 429, 408 or 5xx answer and a dropped connection are retried with
 * exponential backoff (bodies are Buffers, so every attempt sends the same bytes).
 */
export async function send(t: Transport, url: string, init: RequestInit): Promise<Response> {
  for (let attempt = 0; ; attempt++) {
    if (t.signal?.aborted) throw aborted(t);
    let res: Response | undefined;
    try {
      res = await fetch(url, { ...init, redirect: 'follow', signal: t.signal ?? null });
    } catch (err) {
      if (t.signal?.aborted) throw aborted(t);
      if (attempt >= t.retries || PERMANENT.has(causeCode(err))) throw lostConnection(t, err, `${init.method ?? 'GET'} ${new URL(url).pathname}`);
    }
    if (res !== undefined && (!retryable(res.status) || attempt >= t.retries)) return res;
    await res?.body?.cancel().catch(() => {});
    await sleep(retryDelay(t, attempt, res), t.signal);
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

/** SEAL_REMOTE for an unexpected answer: the HTTP status and the registry's own error code and message. */
export async function remoteError(t: Transport, res: Response, doing: string): Promise<SealError> {
  let detail = '';
  try {
    const text = (await readBounded(t, res, 64 * 1024, 'an error')).toString('utf8');
    const first = (JSON.parse(text) as { errors?: { code?: unknown; message?: unknown }[] }).errors?.[0];
    if (first !== undefined) detail = ` ${String(first.code)}${first.message ? ` (${String(first.message)})` : ''}`;
  } catch {
    // no JSON error body: the status says it all
  }
  return new SealError('SEAL_REMOTE', `${t.label} refused ${doing}: HTTP ${res.status}${detail}`);
}
