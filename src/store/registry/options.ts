// options.ts: push/pull options, reports and progress, their validation, and the client they configure.
import { checkBoolean, checkFunction, checkInteger, checkOneOf, checkOptions as checkObject, checkSignal, checkString, invalidArgValue, type KnownKeys } from '../../base/arg-errors.js';
import type { Progress } from '../../base/progress.js';
import { RegistryClient } from './client.js';
import { findCredentials, type CredentialSource, type Credentials } from './credentials.js';
import { checkTimeouts, type Deadlines, type Timeouts } from './deadline.js';
import { parseRemote, type Remote } from './remote.js';
import { proxyEnv } from './proxy-env.js';
import type { RetryNotice } from './http.js';
import type { ConnectionPool } from './network.js';

export type { Timeouts } from './deadline.js';
export type { RetryNotice } from './http.js';

/** Blobs done so far (`entries`) and blob bytes moved (`bytes`), with the totals to move. */
export interface TransferProgress extends Progress {
  totalEntries: number;
  totalBytes: number;
}

export interface RemoteOptions {
  /** Blobs moved at once (default 8, 1..64). */
  concurrency?: number | undefined;
  signal?: AbortSignal | undefined;
  onProgress?: ((p: TransferProgress) => void) | undefined;
  /**
   * Told of each retry before its wait: what failed (a request, or reading or uploading a
   * blob), why (`HTTP 503`, a connection error's code), the retry's number of `retries`,
   * and the wait in ms. The CLI says each on stderr. A callback that throws is ignored.
   */
  onRetry?: ((r: RetryNotice) => void) | undefined;
  /** Allows plain HTTP to a registry that is not on a loopback address. */
  insecure?: boolean | undefined;
  /**
   * Else TREESEAL_REGISTRY_USER / TREESEAL_REGISTRY_PASSWORD, else ~/.docker/config.json
   * (its credential helpers, identity tokens and auths).
   */
  credentials?: Credentials | undefined;
  /**
   * A PEM file of CA certificates to trust besides Node's own (else TREESEAL_CA_FILE): for
   * a registry, token realm or HTTPS proxy whose certificate a private CA signed.
   */
  caFile?: string | undefined;
  /** Further attempts after a 429, a 5xx, a dropped connection or a passed deadline (default 4, backoff from 200 ms doubling). */
  retries?: number | undefined;
  /**
   * Deadlines of every exchange with the registry (defaults: 30 s for the response headers,
   * 30 s without a byte of a body moving, and at least 1 KiB/s averaged over 30 s). A
   * deadline that passes counts as a dropped connection: retried, then SEAL_REMOTE.
   */
  timeouts?: Timeouts | undefined;
  /**
   * Whose connections the call uses. `own` (default): a connection pool of the call's own,
   * closed when it ends, so no socket outlives it. `shared`: Node's global one (what a bare
   * `fetch` uses), which keeps idle connections alive for the next call and spares loading a
   * second HTTP client (about 100 ms and 5 MB in a fresh process; the `treeseal` command
   * uses it). With a proxy in the environment or a CA file the call has its own pool either way.
   */
  connections?: 'own' | 'shared' | undefined;
}

export interface PushOptions extends RemoteOptions {
  /** Repositories of the same registry to mount blobs from before uploading them. */
  mountFrom?: string[] | undefined;
  /** Bytes per PATCH of a chunked upload (default 4 MiB, 64 KiB to 1 GiB). */
  chunkBytes?: number | undefined;
  /**
   * The largest blob sent in one PUT (POST, then PUT with the whole body); a larger one
   * is uploaded in chunks of chunkBytes (default 32 MiB, 0 to 1 GiB; 0 chunks every blob).
   */
  monolithicBytes?: number | undefined;
  /**
   * A tag of your own to point at the snapshot besides `ts-<digest>` (the OCI tag grammar,
   * `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`, not of the `ts-<64 hex digits>` form). Default: a
   * tag derived from the snapshot's revision (the revision itself when it is a tag), none
   * for a snapshot captured without one.
   */
  tag?: string | undefined;
}

export interface PullOptions extends RemoteOptions {
  /**
   * The local source path to publish the snapshot for (absolute, canonical): the same tree
   * as captured at this path, so its digest is the one a capture here would give. The
   * snapshot is proven as the registry holds it first. Default: the path it was captured at.
   */
  source?: string | undefined;
  /**
   * Take each content the store's snapshots already hold from them rather than download
   * it (default true). false downloads every content: the registry then cannot tell, from
   * the blobs never asked for, which of the contents it offers the store holds.
   */
  reuseLocal?: boolean | undefined;
}

export interface PushReport {
  digest: string;
  remote: string;
  /** `ts-<digest>`, the tag every pushed snapshot has. */
  tag: string;
  /** Every tag that names the snapshot's manifest once the push is done: `ts-<digest>`, then the named or derived one. */
  tags: string[];
  /** sha256 of the OCI image manifest (`sha256:…`): what `pull({ manifest })` takes. */
  manifestDigest: string;
  /** `ts-<digest>` already named this snapshot: no blob was sent (a named tag may still have been pointed at it). */
  existed: boolean;
  blobs: number;
  uploaded: number;
  mounted: number;
  skipped: number;
  bytesUploaded: number;
  elapsedMs: number;
}

export interface PullReport {
  /** The snapshot's digest, recomputed from the config pulled (or the one asked for, when the store held it); for options.source, the local one. */
  digest: string;
  /** The snapshot digest the registry holds: `digest`, unless options.source published it for another path. */
  remoteDigest: string;
  remote: string;
  /** The tag pulled: `ts-<digest>` for a pull by digest, the tag for a pull by tag; undefined for a pull by manifest digest. */
  tag: string | undefined;
  /** sha256 of the image manifest pulled; undefined when the store held the snapshot asked for by digest (nothing was read). */
  manifestDigest: string | undefined;
  /**
   * The store already held the snapshot, or another pull of it (in this process or
   * another) published it while this one waited its turn: no blob was fetched.
   */
  existed: boolean;
  blobs: number;
  downloaded: number;
  bytesDownloaded: number;
  /** Contents taken from snapshots already in the store, and their bytes. */
  reused: number;
  reusedBytes: number;
  elapsedMs: number;
}

function intOption(value: unknown, name: string, min: number, max: number, fallback: number): number {
  return value === undefined ? fallback : checkInteger(`options.${name}`, value, min, max);
}

export interface Checked {
  remote: Remote;
  concurrency: number;
  retries: number;
  deadlines: Deadlines;
  credentials: CredentialSource;
  /** The CA file to trust (options.caFile, else TREESEAL_CA_FILE), if any. */
  caFile: string | undefined;
  connections: 'own' | 'shared';
}

function checkCaFile(value: unknown, env: NodeJS.ProcessEnv): string | undefined {
  if (value === undefined) return env.TREESEAL_CA_FILE || undefined;
  if (checkString('options.caFile', value) === '') throw invalidArgValue('options.caFile', value, 'must be a path to a PEM file');
  return value as string;
}

/** Every option RemoteOptions holds. */
export const REMOTE_KEYS = ['concurrency', 'signal', 'onProgress', 'onRetry', 'insecure', 'credentials', 'caFile', 'retries', 'timeouts', 'connections'] as const;

/** What push and pull take besides RemoteOptions. */
export const PUSH_KEYS: KnownKeys = { op: 'push', keys: [...REMOTE_KEYS, 'mountFrom', 'chunkBytes', 'monolithicBytes', 'tag'] };
export const PULL_KEYS: KnownKeys = { op: 'pull', keys: [...REMOTE_KEYS, 'source', 'reuseLocal'] };

/** Validates the options shared by push and pull and parses the remote. */
export function checkRemoteOptions(remoteText: unknown, o: RemoteOptions, known?: KnownKeys): Checked {
  checkObject('options', o, known);
  checkFunction('options.onProgress', o.onProgress);
  checkFunction('options.onRetry', o.onRetry);
  checkSignal('options.signal', o.signal);
  checkBoolean('options.insecure', o.insecure);
  const concurrency = intOption(o.concurrency, 'concurrency', 1, 64, 8);
  const retries = intOption(o.retries, 'retries', 0, 20, 4);
  const deadlines = checkTimeouts(o.timeouts);
  const caFile = checkCaFile(o.caFile, process.env);
  const connections = checkOneOf('options.connections', o.connections, ['own', 'shared'] as const) ?? 'own';
  const remote = parseRemote(remoteText, o.insecure === true);
  return { remote, concurrency, retries, deadlines, credentials: findCredentials(remote.host, o.credentials), caFile, connections };
}

const MIB = 1024 * 1024;

/** chunkBytes (default 4 MiB) and monolithicBytes (default 32 MiB), checked as Node checks integers. */
export function checkUploadSizes(o: PushOptions): { chunkBytes: number; monolithicBytes: number } {
  return {
    chunkBytes: intOption(o.chunkBytes, 'chunkBytes', 64 * 1024, 1024 * MIB, 4 * MIB),
    monolithicBytes: intOption(o.monolithicBytes, 'monolithicBytes', 0, 1024 * MIB, 32 * MIB),
  };
}

/**
 * A client with a connection pool of its own (close it when the push or pull ends): the
 * environment's proxies and the CA file apply to it. The HTTP client (undici) is loaded
 * here, on the first push or pull, not when the library is. With `connections: 'shared'`
 * and neither a proxy nor a CA file, the client uses Node's global pool and loads no
 * client of its own.
 */
export async function makeClient(c: Checked, o: RemoteOptions, scopes: string[], what: string): Promise<RegistryClient> {
  const proxy = proxyEnv(process.env);
  let dispatcher: ConnectionPool | undefined;
  if (c.connections === 'own' || c.caFile !== undefined || proxy.httpProxy !== undefined || proxy.httpsProxy !== undefined) {
    const { connectionPool, trustedCas } = await import('./network.js');
    dispatcher = await connectionPool(proxy, await trustedCas(c.caFile, process.env));
  }
  return new RegistryClient({ remote: c.remote, credentials: c.credentials, scopes, signal: o.signal, retries: c.retries, deadlines: c.deadlines, what, dispatcher, onRetry: o.onRetry });
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
