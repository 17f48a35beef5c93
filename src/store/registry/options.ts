// options.ts: push/pull options, reports and progress, their validation, and the client they configure.
import type { Progress } from '../../base/progress.js';
import { RegistryClient } from './client.js';
import { findCredentials, type Credentials } from './credentials.js';
import { parseRemote, type Remote } from './remote.js';

/** Blobs done so far (`entries`) and blob bytes moved (`bytes`), with the totals to move. */
export interface TransferProgress extends Progress {
  totalEntries: number;
  totalBytes: number;
}

export interface RemoteOptions {
  /** Blobs moved at once (default 8, 1..64). */
  concurrency?: number;
  signal?: AbortSignal;
  onProgress?: (p: TransferProgress) => void;
  /** Allows plain HTTP to a registry that is not on a loopback address. */
  insecure?: boolean;
  /** Else TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD, else ~/.docker/config.json. */
  credentials?: Credentials;
  /** Further attempts after a 429, a 5xx or a dropped connection (default 4, backoff from 200 ms doubling). */
  retries?: number;
}

export interface PushOptions extends RemoteOptions {
  /** Repositories of the same registry to mount blobs from before uploading them. */
  mountFrom?: string[];
  /** Bytes per PATCH of a large file's chunked upload (default 16 MiB). */
  chunkBytes?: number;
}

export type PullOptions = RemoteOptions;

export interface PushReport {
  digest: string;
  remote: string;
  tag: string;
  /** sha256 of the OCI image manifest. */
  manifestDigest: string;
  /** The tag already named this snapshot: nothing was sent. */
  existed: boolean;
  blobs: number;
  uploaded: number;
  mounted: number;
  skipped: number;
  bytesUploaded: number;
  elapsedMs: number;
}

export interface PullReport {
  digest: string;
  remote: string;
  tag: string;
  /** The store already held the snapshot: nothing was fetched. */
  existed: boolean;
  blobs: number;
  downloaded: number;
  bytesDownloaded: number;
  /** Contents taken from snapshots already in the store, and their bytes. */
  reused: number;
  reusedBytes: number;
  elapsedMs: number;
}

function typeError(message: string): TypeError {
  return Object.assign(new TypeError(message), { code: 'ERR_INVALID_ARG_TYPE' });
}

function intOption(value: unknown, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') throw typeError(`${name} must be a number`);
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw Object.assign(new RangeError(`${name} must be an integer from ${min} to ${max}, not ${value}`), { code: 'ERR_OUT_OF_RANGE' });
  }
  return value;
}

export interface Checked {
  remote: Remote;
  concurrency: number;
  retries: number;
  credentials: Credentials | undefined;
}

/** Validates the options shared by push and pull and parses the remote. */
export function checkOptions(remoteText: unknown, o: RemoteOptions): Checked {
  if (typeof o !== 'object' || o === null) throw typeError('options must be an object');
  if (o.onProgress !== undefined && typeof o.onProgress !== 'function') throw typeError('onProgress must be a function');
  if (o.insecure !== undefined && typeof o.insecure !== 'boolean') throw typeError('insecure must be a boolean');
  const remote = parseRemote(remoteText, o.insecure === true);
  return {
    remote,
    concurrency: intOption(o.concurrency, 'concurrency', 1, 64, 8),
    retries: intOption(o.retries, 'retries', 0, 20, 4),
    credentials: findCredentials(remote.host, o.credentials),
  };
}

export function checkChunkBytes(o: PushOptions): number {
  return intOption(o.chunkBytes, 'chunkBytes', 64 * 1024, 1024 * 1024 * 1024, 16 * 1024 * 1024);
}

export function makeClient(c: Checked, o: RemoteOptions, scopes: string[], what: string): RegistryClient {
  return new RegistryClient({ remote: c.remote, credentials: c.credentials, scopes, signal: o.signal, retries: c.retries, what });
}

/** Runs task(item) for every item, at most `concurrency` at once; the first failure stops new starts and is thrown once all settle. */
export async function eachLimited<T>(items: readonly T[], concurrency: number, task: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failure: { err: unknown } | undefined;
  const lane = async (): Promise<void> => {
    while (failure === undefined && next < items.length) {
      const item = items[next++]!;
      try {
        await task(item);
      } catch (err) {
        failure ??= { err };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, lane));
  if (failure !== undefined) throw failure.err;
}

/** Counts blobs and bytes moved and reports them through onProgress, at most every 100 ms (and at the end). */
export class Meter {
  entries = 0;
  bytes = 0;
  #last = 0;

  constructor(
    readonly totalEntries: number,
    readonly totalBytes: number,
    readonly fn: ((p: TransferProgress) => void) | undefined,
  ) {}

  add(bytes: number, entries = 0): void {
    this.bytes += bytes;
    this.entries += entries;
    const now = Date.now();
    if (this.fn === undefined || (now - this.#last < 100 && this.entries < this.totalEntries)) return;
    this.#last = now;
    this.fn({ entries: this.entries, bytes: this.bytes, totalEntries: this.totalEntries, totalBytes: this.totalBytes });
  }
}
