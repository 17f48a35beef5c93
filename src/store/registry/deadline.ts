// deadline.ts: the deadlines of one HTTP exchange: response headers, an idle body, and the slowest transfer rate accepted.
import { checkInteger, checkOptions } from '../../base/arg-errors.js';

/** How long a registry may keep push or pull waiting (see README "Deadlines"). */
export interface Timeouts {
  /** Longest wait for a response's headers once the request is out: connect, TLS and the server's answer (ms, default 30 000). */
  headersMs?: number | undefined;
  /** Longest wait for the next chunk of a body, sent or received (ms, default 30 000). */
  idleMs?: number | undefined;
  /**
   * Slowest transfer accepted: bytes per second, averaged over each idleMs spent waiting on the
   * network for a body (default 1024; 0 turns the floor off).
   */
  minBytesPerSecond?: number | undefined;
}

export type Deadlines = { [K in keyof Timeouts]-?: Exclude<Timeouts[K], undefined> };

export const DEFAULT_TIMEOUTS: Readonly<Deadlines> = Object.freeze({ headersMs: 30_000, idleMs: 30_000, minBytesPerSecond: 1024 });

/** setTimeout's largest delay (about 24.8 days). */
const MAX_MS = 2 ** 31 - 1;

/** Validates options.timeouts (Node's TypeError / RangeError) and fills in the defaults. */
export function checkTimeouts(value: unknown): Deadlines {
  const t = checkOptions<Timeouts>('options.timeouts', value as Timeouts | undefined, { op: 'timeouts', keys: ['headersMs', 'idleMs', 'minBytesPerSecond'] });
  const pick = (key: keyof Timeouts, min: number, max: number): number =>
    t[key] === undefined ? DEFAULT_TIMEOUTS[key] : checkInteger(`options.timeouts.${key}`, t[key], min, max);
  return { headersMs: pick('headersMs', 1, MAX_MS), idleMs: pick('idleMs', 1, MAX_MS), minBytesPerSecond: pick('minBytesPerSecond', 0, Number.MAX_SAFE_INTEGER) };
}

/** A deadline that passed: the exchange was aborted; its message says which one. */
export class TimedOut extends Error {
  override readonly name = 'TimedOut';
}

/**
 * The deadlines of one exchange (one request, one response). `signal` aborts the fetch when
 * a deadline passes (the reason is the TimedOut) or when the caller's signal aborts.
 * Body time counts only the waits on the network, so a slow consumer is never blamed.
 */
export class Watch {
  readonly signal: AbortSignal;
  readonly #controller = new AbortController();
  readonly #d: Deadlines;
  readonly #outer: AbortSignal | undefined;
  readonly #onOuter = (): void => this.#controller.abort(this.#outer?.reason);
  #timer: NodeJS.Timeout | undefined;
  #fired: TimedOut | undefined;
  #ended = false;
  /** Network wait (ms) and bytes so far, and samples of both for the sliding rate window. */
  #waited = 0;
  #bytes = 0;
  #samples: [waited: number, bytes: number][] = [[0, 0]];

  constructor(deadlines: Deadlines, outer: AbortSignal | undefined) {
    this.#d = deadlines;
    this.#outer = outer;
    this.signal = this.#controller.signal;
    if (outer?.aborted) this.#onOuter();
    else outer?.addEventListener('abort', this.#onOuter, { once: true });
  }

  /** The deadline that passed, if one did. */
  get timedOut(): TimedOut | undefined {
    return this.#fired;
  }

  #fire(err: TimedOut): TimedOut {
    this.#fired ??= err;
    this.#clear();
    this.#controller.abort(this.#fired);
    return this.#fired;
  }

  #arm(ms: number, why: string): void {
    this.#clear();
    if (this.#ended) return;
    this.#timer = setTimeout(() => this.#fire(new TimedOut(why)), ms);
  }

  #clear(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** From now, the response headers must come within headersMs. */
  awaitHeaders(): void {
    this.#arm(this.#d.headersMs, `no response in ${this.#d.headersMs} ms`);
  }

  /** Headers came: no deadline until the body is read. */
  gotHeaders(): void {
    this.#clear();
  }

  /** From now, the next chunk must move within idleMs. */
  awaitChunk(sending: boolean): void {
    this.#arm(this.#d.idleMs, sending ? `could not send for ${this.#d.idleMs} ms` : `no data for ${this.#d.idleMs} ms`);
  }

  /**
   * Counts a chunk that took `waitedMs` on the network; throws (and aborts) when the bytes
   * moved in the last idleMs of waiting fall below minBytesPerSecond.
   */
  moved(waitedMs: number, bytes: number): void {
    this.#clear();
    if (this.#ended) return;
    this.#waited += waitedMs;
    this.#bytes += bytes;
    const { idleMs, minBytesPerSecond } = this.#d;
    if (minBytesPerSecond === 0) return;
    this.#samples.push([this.#waited, this.#bytes]);
    const from = this.#waited - idleMs;
    if (from < 0) return;
    // The last sample at or before the window's start stays: it is the window's base.
    let base = 0;
    while (base + 1 < this.#samples.length && this.#samples[base + 1]![0] <= from) base++;
    this.#samples.splice(0, base);
    const [, then] = this.#samples[0]!;
    if (this.#bytes - then < (minBytesPerSecond * idleMs) / 1000) {
      throw this.#fire(new TimedOut(`slower than ${minBytesPerSecond} bytes/s over ${idleMs} ms`));
    }
  }

  /** Times one wait for a body chunk: `read` must settle within idleMs; a failure after a deadline is that deadline. */
  async chunk<T>(read: () => Promise<T>, size: (v: T) => number): Promise<T> {
    const started = performance.now();
    this.awaitChunk(false);
    let v: T;
    try {
      v = await read();
    } catch (err) {
      throw this.#fired ?? err;
    } finally {
      this.#clear();
    }
    this.moved(performance.now() - started, size(v));
    return v;
  }

  /** The exchange is over: no timer, no listener left. */
  end(): void {
    this.#ended = true;
    this.#clear();
    this.#outer?.removeEventListener('abort', this.#onOuter);
  }
}

/** Bytes handed to fetch per pull of an upload's stream. */
export const UPLOAD_PIECE = 64 * 1024;

/**
 * A request body that can be sent again (each attempt, each redirect, reads it anew):
 * `read` gives the bytes at [position, position + length), from memory or from a file.
 */
export interface BodySource {
  readonly size: number;
  read(position: number, length: number): Promise<Buffer> | Buffer;
}

/** A Buffer as a BodySource. */
export function bufferBody(bytes: Buffer): BodySource {
  return { size: bytes.length, read: (position, length) => bytes.subarray(position, position + length) };
}

/**
 * A request body the Watch can time: fetch pulls one piece when the socket took the last,
 * so the wait between pulls is the network's (the piece's own read, from memory or disk,
 * is not counted). Once the last piece is taken, the headers are due. A read that fails
 * fails the request.
 */
export function watchedUpload(body: BodySource, w: Watch): ReadableStream<Uint8Array> {
  let offset = 0;
  let since: number | undefined;
  let last = 0;
  return new ReadableStream<Uint8Array>(
    {
      async pull(ctrl) {
        if (since !== undefined) w.moved(performance.now() - since, last);
        if (offset >= body.size) {
          ctrl.close();
          w.awaitHeaders();
          return;
        }
        const piece = await body.read(offset, Math.min(UPLOAD_PIECE, body.size - offset));
        offset += piece.length;
        last = piece.length;
        since = performance.now();
        ctrl.enqueue(piece);
        w.awaitChunk(true);
      },
    },
    { highWaterMark: 0 },
  );
}

/** The response with its body read under the Watch's idle and rate deadlines; the Watch ends with the body. */
export function watchedResponse(res: Response, w: Watch): Response {
  if (res.body === null) {
    w.end();
    return res;
  }
  const reader = res.body.getReader();
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(ctrl) {
        let r: Awaited<ReturnType<typeof reader.read>>;
        try {
          r = await w.chunk(
            () => reader.read(),
            (x) => x.value?.length ?? 0,
          );
        } catch (err) {
          w.end();
          reader.cancel().catch(() => {});
          throw err;
        }
        if (r.done) {
          w.end();
          ctrl.close();
        } else ctrl.enqueue(r.value);
      },
      cancel(reason) {
        w.end();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}
