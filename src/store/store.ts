// store.ts: SnapshotStore: a directory of published snapshots, the capture entry point, and its lifetime.
import { SealError, isSealError } from '../base/errors.js';
import { escapePath } from '../base/paths.js';
import { hasCode } from '../sys/errno.js';
import { ioError } from '../base/refusal.js';
import { checkBoolean, checkFunction, checkInteger, checkOptions, checkString, invalidArgType, invalidArgValue, outOfRange } from '../base/arg-errors.js';
import { STAT_CLOCK_AHEAD } from '../capture/stat-cache.js';
import { checkRootPath, makeRealDir, openRealDir, own } from '../base/fd.js';
import { DEFAULT_CONCURRENCY, Gate, jobsInFlight, stopIdleWorker, type ToolOptions } from '../base/offload.js';
import { abortedBefore, checkSys, defineOp, readOnce, type OpCall } from '../base/op.js';
import { sealed, sealedAsync } from '../base/refusal.js';
import type { CaptureProgress } from '../capture/walk.js';
import { planCapture, type CaptureOptions, type Plan } from '../capture/plan.js';
import { checkStoreOutside } from '../capture/default-copy.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';
import type { PackedSnapshot, StoredSnapshot } from './document.js';
import { SNAPSHOTS_DIR } from './layout.js';
import { withStoreLock } from './lock.js';
import { readOnlyStore } from './read-only.js';
import { sweepCloneAt } from './clone-stage.js';
import { sweepLedgers } from './clone-ledger.js';
import { sweepStatCaches } from './stat-cache-file.js';
import { buildSnapshot, type CaptureReport } from './publish.js';
import { pullSnapshot } from './registry/pull.js';
import { pushSnapshot } from './registry/push.js';
import type { PullOptions, PullReport, PushOptions, PushReport } from './registry/options.js';
import { checkReference, type SnapshotRef } from './registry/reference.js';
import { Snapshot } from './snapshot.js';
import type { SnapshotSummary } from './snapshot-summary.js';
import { SummaryRecords, sweepSummaryRecords } from './summary-record.js';
import { holdPacked } from './snapshot-ref.js';
import { sweepLeases } from './lease.js';
import { pruneStore, storeUsage, type PrunePolicy, type PruneReport, type SnapshotUsage } from './usage.js';
import { storePartsUsage, type StorePartsUsage } from './parts-usage.js';
import { STORE_TRUSTS, checkPathAbove, checkUmask, openSharedRoot, type StoreTrust } from './trust.js';
import { closeStoreAt, loadSnapshotAt, openStoreAt, refreezeSnapshots, removeSnapshot, sweepStaleBuilds, type OpenedStore, type StoreIdentity } from './store-dir.js';
import { checkDigestPrefix, listDigests, resolveDigestIn } from './digests.js';

export interface StoreOptions extends ToolOptions {
  /** close() thaws and removes the whole store. */
  ephemeral?: boolean | undefined;
  /**
   * Whom the store's contents are trusted from (see README "Store trust"): 'owner' (the
   * default) refuses a store that anyone but you (or root) owns or can write; 'group' opts
   * into a shared store: a setgid directory of a group you are in, group-writable.
   */
  trust?: StoreTrust | undefined;
  /**
   * How many of this store's async calls (and its snapshots') run at once, each on a
   * worker thread of its own (1 to 64; default one per core, at least 2). More wait
   * their turn in the order they were made. Sync calls always run on the caller.
   */
  concurrency?: number | undefined;
}

export interface CaptureCallOptions extends CaptureOptions {
  signal?: AbortSignal | undefined;
  onProgress?: ((p: CaptureProgress) => void) | undefined;
}

/** Every option of capture (CaptureCallOptions). */
const CAPTURE_KEYS = ['source', 'copy', 'exclude', 'mounts', 'revision', 'expectMounts', 'limits', 'keepExecutable', 'keepTimes', 'workspace', 'links', 'parallelism', 'statCache', 'signal', 'onProgress'];

export interface GcOptions {
  /** A clone whose stages left by materializes that died are swept too. */
  clone?: string | undefined;
}

function checkTrust(value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'string') throw invalidArgType('options.trust', 'string', value);
  if (!(STORE_TRUSTS as readonly string[]).includes(value)) {
    throw invalidArgValue('options.trust', value, `must be one of: ${STORE_TRUSTS.map((t) => `'${t}'`).join(', ')}`);
  }
}

/** A published snapshot as an operation returns it: its data on this thread, or packed from the worker. */
type Found = StoredSnapshot | PackedSnapshot;

/**
 * A capture's SEAL_IO for a full or over-quota filesystem says it is the store's (what a
 * capture writes goes there): it named only the source file being copied, which is not at fault.
 */
function storeFull(err: unknown, root: string): unknown {
  const io = isSealError(err) ? err : hasCode(err, 'ENOSPC', 'EDQUOT') ? ioError('capture', err) : undefined;
  if (io === undefined || io.code !== 'SEAL_IO' || !hasCode(io.cause, 'ENOSPC', 'EDQUOT')) return err;
  return new SealError('SEAL_IO', `${io.message} (the store's filesystem is full or over quota: ${escapePath(root)})`, { ...(io.path === undefined ? {} : { path: io.path }), cause: io.cause });
}

export class SnapshotStore {
  readonly root: string;
  readonly ephemeral: boolean;
  readonly trust: StoreTrust;
  /** How many of its async calls run at once (see StoreOptions.concurrency). */
  readonly concurrency: number;
  readonly #sys: Sys;
  readonly #gate: Gate;
  readonly #clockAheadNs: bigint;
  #closed = false;
  /** An ephemeral store closed whose removal has not succeeded yet. */
  #removalDue = false;
  /** The close() under way. */
  #closing: Promise<void> | undefined;
  #sweptAtOpen = 0;
  #readOnly = false;
  /** The directory opened: an ephemeral store's close removes only that one. */
  #identity: StoreIdentity | undefined;

  private constructor(root: string, options: StoreOptions) {
    this.root = root;
    this.ephemeral = options.ephemeral === true;
    this.trust = options.trust ?? 'owner';
    this.#sys = options.sys ?? nativeSys;
    this.concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
    this.#gate = new Gate(this.concurrency);
    this.#clockAheadNs = (options as { [STAT_CLOCK_AHEAD]?: bigint })[STAT_CLOCK_AHEAD] ?? 0n;
  }

  static readonly #open = defineOp('openStore', {
    validate: (dir: string, options: StoreOptions = {}) => {
      checkString('dir', dir);
      const sys = checkSys('options.sys', checkOptions('options', options, { op: 'open', keys: ['ephemeral', 'trust', 'concurrency', 'sys'] }).sys);
      checkBoolean('options.ephemeral', options.ephemeral);
      checkTrust(options.trust);
      if (options.concurrency !== undefined) checkInteger('options.concurrency', options.concurrency, 1, 64);
      const ahead = (options as { [STAT_CLOCK_AHEAD]?: unknown })[STAT_CLOCK_AHEAD];
      if (ahead !== undefined && typeof ahead !== 'bigint') throw invalidArgType('options[STAT_CLOCK_AHEAD]', 'bigint', ahead);
      const root = checkRootPath(dir, 'store directory');
      checkUmask();
      // A shared store is prepared by hand (setgid, the fleet's group): a missing one is refused, not made 0700 and left behind.
      // Nothing is made below a directory another user could rename it in (a refused open once left the store's directory there).
      checkPathAbove(sys, root);
      if (options.trust === 'group') own(sys, openSharedRoot(sys, root))[Symbol.dispose]();
      else own(sys, makeRealDir(sys, root, 'store directory'))[Symbol.dispose]();
      return { sys, args: [root, options.trust ?? 'owner', options.ephemeral === true] as [string, StoreTrust, boolean] };
    },
    core: (sys, [root, trust, ephemeral]): OpenedStore => openStoreAt(sys, root, trust, ephemeral),
    finish: (opened, call, _dir, options = {}) => {
      const store = new SnapshotStore(call.args[0], options);
      store.#sweptAtOpen = opened.swept;
      store.#identity = opened.identity;
      store.#readOnly = opened.readOnly;
      return store;
    },
  });

  /**
   * Opens (creating it 0700 if needed) a store, refuses it (SEAL_UNTRUSTED) unless only
   * users it trusts can have written it (see `trust`), and sweeps builds no live process holds.
   */
  static openSync(dir: string, options: StoreOptions = {}): SnapshotStore {
    return SnapshotStore.#open.sync(dir, options);
  }

  /** openSync's directory work on the worker thread. */
  static open(dir: string, options: StoreOptions = {}): Promise<SnapshotStore> {
    return SnapshotStore.#open.async(dir, options);
  }

  /** How many stale builds and half-removed snapshots opening this store swept. */
  get sweptAtOpen(): number {
    return this.#sweptAtOpen;
  }

  /**
   * The store is on a filesystem mounted read-only (a store bound read-only into runners'
   * containers): it was opened as it stands, nothing made or swept. Reading, verify,
   * materialize, diff, reset, leases and sandboxed runs work from it (no ledger is kept or
   * read); capture, pull (of a snapshot it lacks), remove, gc and prune are SEAL_IO (EROFS)
   * before they start.
   */
  get readOnly(): boolean {
    return this.#readOnly;
  }

  get closed(): boolean {
    return this.#closed;
  }

  #checkOpen(): void {
    if (this.#closed) throw new SealError('SEAL_CLOSED', 'snapshot store is already closed');
  }

  /** A call that writes the store (`what`) on one opened read-only: SEAL_IO (EROFS) before it starts. */
  #checkWritable(what: string): void {
    if (this.#readOnly) throw readOnlyStore(what, this.root);
  }

  /** An operation's call on this open store: its syscall layer and bound, with the core's args. */
  #call<A extends unknown[]>(...args: A): OpCall<A> {
    this.#checkOpen();
    return { sys: this.#sys, gate: this.#gate, args };
  }

  #snapshot(data: StoredSnapshot | PackedSnapshot, report?: CaptureReport): Snapshot {
    return new Snapshot(`${this.root}/${SNAPSHOTS_DIR}/${data.digest}`, data, { sys: this.#sys, report, gate: this.#gate });
  }

  /** Checks the options; every capture then walks the source and applies its own limits (reuse is by digest, after the walk). */
  #prepare(options: CaptureCallOptions): Plan {
    this.#checkOpen();
    if (options !== null && typeof options === 'object') checkOptions('options', options, { op: 'capture', keys: CAPTURE_KEYS });
    const plan = planCapture(options);
    plan.clockAheadNs = this.#clockAheadNs;
    checkFunction('options.onProgress', options.onProgress);
    // Copy roots the source's listing gives (copy omitted) are checked once listed.
    checkStoreOutside(this.root, plan.source, [...plan.copyParts, ...plan.mounts.map((m) => m.sourceParts)]);
    this.#checkWritable('capture');
    abortedBefore('capture', options.signal);
    return plan;
  }

  static readonly #capture = defineOp('capture', {
    validate: (store: SnapshotStore, options: CaptureCallOptions) => ({
      ...store.#call(store.root, store.#prepare(options)),
      signal: options.signal,
      onProgress: options.onProgress,
    }),
    core: (sys, [root, plan], ctx) => {
      try {
        return buildSnapshot(sys, root, plan, { isAborted: ctx.isAborted, onProgress: ctx.onProgress });
      } catch (err) {
        throw storeFull(err, root);
      }
    },
    // The worker keeps what it built for the materialize that usually follows; its entries cross packed.
    reply: ({ data, report }, [root]): { data: Found; report: CaptureReport } => ({
      data: holdPacked(`${root}/${SNAPSHOTS_DIR}/${data.digest}`, data),
      report,
    }),
    // A capture under way when close() was called completes: close waits for it, and what it published is returned.
    finish: ({ data, report }, _call, store) => store.#snapshot(data, report),
  });

  /** Captures (or reuses) a snapshot on the calling thread. */
  captureSync(options: CaptureCallOptions): Snapshot {
    return SnapshotStore.#capture.sync(this, options);
  }

  /** Captures (or reuses) a snapshot on the worker thread; the event loop stays free. */
  capture(options: CaptureCallOptions): Promise<Snapshot> {
    return SnapshotStore.#capture.async(this, options);
  }

  static readonly #get = defineOp('get', {
    validate: (store: SnapshotStore, digestOrPrefix: string) => store.#call(store.root, checkDigestPrefix(digestOrPrefix)),
    core: (sys, [root, prefix]): StoredSnapshot => {
      const digest = resolveDigestIn(sys, root, prefix);
      using snapshots = own(sys, openRealDir(sys, `${root}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
      return loadSnapshotAt(sys, snapshots.fd, digest);
    },
    reply: (data, [root]): Found => holdPacked(`${root}/${SNAPSHOTS_DIR}/${data.digest}`, data),
    finish: (data, _call, store) => store.#snapshot(data),
  });

  static readonly #summary = defineOp('summary', {
    validate: (store: SnapshotStore, digestOrPrefix: string) => store.#call(store.root, checkDigestPrefix(digestOrPrefix)),
    core: (sys, [root, prefix]): SnapshotSummary => {
      const digest = resolveDigestIn(sys, root, prefix);
      using snapshots = own(sys, openRealDir(sys, `${root}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
      using records = new SummaryRecords(sys, root);
      return records.summaryAt(snapshots.fd, digest);
    },
  });

  static readonly #list = defineOp('list', {
    validate: (store: SnapshotStore) => store.#call(store.root),
    core: (sys, [root]) => listDigests(sys, root),
  });

  static readonly #remove = defineOp('remove', {
    validate: (store: SnapshotStore, digestOrPrefix: string) => {
      const call = store.#call(store.root, checkDigestPrefix(digestOrPrefix));
      store.#checkWritable('remove');
      return call;
    },
    core: (sys, [root, prefix]) => {
      const digest = resolveDigestIn(sys, root, prefix);
      withStoreLock(sys, root, true, () => removeSnapshot(sys, root, digest));
      return digest;
    },
  });

  static readonly #gc = defineOp('gc', {
    validate: (store: SnapshotStore, options: GcOptions = {}) => {
      store.#checkOpen();
      // gc sweeps; removing snapshots by a policy is prune's: a policy given here would be ignored without a word.
      const hint = (key: string): string | undefined => (['olderThanMs', 'keepLast', 'maxBytes'].includes(key) ? 'snapshots are removed by a policy with prune()' : undefined);
      const clone = checkOptions('options', options, { op: 'gc', keys: ['clone'], hint }).clone;
      if (clone !== undefined) checkString('options.clone', clone);
      store.#checkWritable('gc');
      return store.#call(store.root, clone);
    },
    core: (sys, [root, clone]) => {
      const swept = withStoreLock(sys, root, true, () => {
        const held = new Set(listDigests(sys, root));
        const has = (digest: string): boolean => held.has(digest);
        sweepSummaryRecords(sys, root, has);
        return sweepStaleBuilds(sys, root) + sweepLeases(sys, root) + sweepLedgers(sys, root, has) + sweepStatCaches(sys, root, has) + refreezeSnapshots(sys, root);
      });
      return clone === undefined ? swept : swept + sweepCloneAt(sys, clone);
    },
  });

  static readonly #usage = defineOp('usage', {
    validate: (store: SnapshotStore) => store.#call(store.root),
    core: (sys, [root]) => storeUsage(sys, root),
  });

  static readonly #partsUsage = defineOp('partsUsage', {
    validate: (store: SnapshotStore) => store.#call(store.root),
    core: (sys, [root]) => storePartsUsage(sys, root),
  });

  static readonly #prune = defineOp('prune', {
    validate: (store: SnapshotStore, policy: PrunePolicy) => {
      store.#checkOpen();
      // Required: prune() with no rule at all is a mistake, not "remove nothing".
      if (policy === undefined) throw invalidArgType('policy', 'object', policy);
      checkOptions('policy', policy, { op: 'prune', keys: ['olderThanMs', 'keepLast', 'maxBytes'] });
      const checked: PrunePolicy = {};
      if (policy.olderThanMs !== undefined) checked.olderThanMs = checkInteger('policy.olderThanMs', policy.olderThanMs, 0);
      if (policy.keepLast !== undefined) checked.keepLast = checkInteger('policy.keepLast', policy.keepLast, 0);
      if (policy.maxBytes !== undefined) checked.maxBytes = checkInteger('policy.maxBytes', policy.maxBytes, 0);
      // A count of 0 with no other rule would remove every snapshot: a mistake more often than a wish.
      if (checked.keepLast === 0 && checked.olderThanMs === undefined && checked.maxBytes === undefined) {
        throw outOfRange('policy.keepLast', '>= 1 when it is the only rule (0 alone would remove every snapshot)', 0);
      }
      store.#checkWritable('prune');
      return store.#call(store.root, checked, Date.now());
    },
    core: (sys, [root, policy, now]) => pruneStore(sys, root, policy, now),
  });

  static readonly #close = defineOp('closeStore', {
    // Whether another call of this process (another store's, another handle's) is under way: then a build this
    // process holds may be that call's, not a lock a dead worker thread left (see closeStoreAt).
    validate: (store: SnapshotStore) => ({ sys: store.#sys, gate: store.#gate, args: [store.root, jobsInFlight() > 0, store.#identity] as [string, boolean, StoreIdentity | undefined] }),
    core: (sys, [root, othersBusy, identity]) => closeStoreAt(sys, root, othersBusy, identity),
  });

  /** A published snapshot by its full digest or a unique prefix of it (none: SEAL_UNAVAILABLE; several: SEAL_AMBIGUOUS). */
  get(digestOrPrefix: string): Snapshot {
    return SnapshotStore.#get.sync(this, digestOrPrefix);
  }

  /** get on the worker thread (the sync form keeps the plain name): a big manifest is read and proven off the event loop. */
  getAsync(digestOrPrefix: string): Promise<Snapshot> {
    return SnapshotStore.#get.async(this, digestOrPrefix);
  }

  /**
   * A published snapshot's summary (as `get(d).summary()` gives it) by its full digest or
   * a unique prefix, without loading its entries when this user recorded it before: from a
   * record kept in the store beside the identity of the manifest.json it was proven from,
   * used only while that identity is unchanged (a chmod, a write, a rename or a link of
   * the file moves its ctime; docs/security.md says what it cannot see). Errors as `get`'s.
   */
  summary(digestOrPrefix: string): SnapshotSummary {
    return SnapshotStore.#summary.sync(this, digestOrPrefix);
  }

  /** summary on the worker thread (the sync form keeps the plain name). */
  summaryAsync(digestOrPrefix: string): Promise<SnapshotSummary> {
    return SnapshotStore.#summary.async(this, digestOrPrefix);
  }

  /** Digests of every published snapshot, sorted. */
  list(): string[] {
    return SnapshotStore.#list.sync(this);
  }

  /** list on the worker thread (the sync form keeps the plain name). */
  listAsync(): Promise<string[]> {
    return SnapshotStore.#list.async(this);
  }

  /**
   * The full digest a digest or a prefix of one names: not 1 to 64 lower-case hex
   * digits is Node's TypeError (ERR_INVALID_ARG_VALUE), no match SEAL_UNAVAILABLE,
   * more than one SEAL_AMBIGUOUS.
   */
  resolveDigest(digestOrPrefix: string): string {
    this.#checkOpen();
    const prefix = checkDigestPrefix(digestOrPrefix);
    return sealed('resolveDigest', () => resolveDigestIn(this.#sys, this.root, prefix));
  }

  /** Removes a published snapshot (full digest or unique prefix) under the store's exclusive lock; returns its full digest. */
  remove(digestOrPrefix: string): string {
    return SnapshotStore.#remove.sync(this, digestOrPrefix);
  }

  /** remove on the worker thread (the sync form keeps the plain name): a big snapshot's tree is deleted off the event loop. */
  removeAsync(digestOrPrefix: string): Promise<string> {
    return SnapshotStore.#remove.async(this, digestOrPrefix);
  }

  /**
   * Pushes a published snapshot (full digest or unique prefix) to an OCI registry
   * repository (`host[:port]/repository`) under tag `ts-<digest>`; see README
   * "Sharing snapshots through an OCI registry". Failures of the registry are SEAL_REMOTE.
   */
  async push(digestOrPrefix: string, remote: string, options: PushOptions = {}): Promise<PushReport> {
    this.#checkOpen();
    if (typeof remote !== 'string') throw invalidArgType('remote', 'string', remote);
    const digest = this.resolveDigest(digestOrPrefix);
    const once = readOnce(options) as PushOptions;
    return sealedAsync('push', () => pushSnapshot({ sys: this.#sys, digest, root: `${this.root}/${SNAPSHOTS_DIR}/${digest}` }, remote, once));
  }

  /**
   * Pulls a snapshot from an OCI registry repository into this store: by its digest (all
   * 64 digits, from tag `ts-<digest>`), by `{ tag }` (a tag push set) or by `{ manifest }`
   * (its image manifest's digest, `sha256:…`, which the manifest's bytes must hash to).
   * Proves the snapshot digest from its metadata (by tag or manifest: the one the manifest
   * claims) and every file's bytes; contents the store already holds are reflinked or
   * copied from local snapshots instead of downloaded. Nothing is published unless
   * everything checks out. Concurrent pulls of one snapshot into one store (in this
   * process or others) download it once: each waits for the one before it, then finds
   * the snapshot published (`existed`). `options.source` publishes it for that local
   * source path (the same tree checked out there), under the digest a capture there gives.
   */
  async pull(snapshot: SnapshotRef, remote: string, options: PullOptions = {}): Promise<PullReport> {
    this.#checkOpen();
    const ref = checkReference(readOnce(snapshot) as SnapshotRef);
    const target = { sys: this.#sys, storeRoot: this.root, has: (d: string) => this.list().includes(d), checkWritable: () => this.#checkWritable('pull') };
    const once = readOnce(options) as PullOptions;
    const report = await sealedAsync('pull', () => pullSnapshot(target, ref, remote, once));
    this.#checkOpen();
    return report;
  }

  /**
   * Sweeps stale builds, half-removed snapshots, leases whose holder is gone and the
   * ledgers of clones no longer where they were made (or of snapshots removed) under the
   * store's exclusive lock and, given a clone, the stages materializes that died left
   * inside it; returns how many.
   */
  gc(options: GcOptions = {}): number {
    return SnapshotStore.#gc.sync(this, options);
  }

  /** gc on the worker thread (the sync form keeps the plain name). */
  gcAsync(options: GcOptions = {}): Promise<number> {
    return SnapshotStore.#gc.async(this, options);
  }

  /** Every published snapshot's creation time, logical and on-disk bytes, oldest first. */
  usage(): SnapshotUsage[] {
    return SnapshotStore.#usage.sync(this);
  }

  /** usage on the worker thread. */
  usageAsync(): Promise<SnapshotUsage[]> {
    return SnapshotStore.#usage.async(this);
  }

  /** What the store holds besides its snapshots: its stat caches, clone ledgers and unfinished builds (`treeseal du` adds them up). */
  partsUsage(): StorePartsUsage {
    return SnapshotStore.#partsUsage.sync(this);
  }

  /** partsUsage on the worker thread. */
  partsUsageAsync(): Promise<StorePartsUsage> {
    return SnapshotStore.#partsUsage.async(this);
  }

  /**
   * Removes snapshots by age, count and size, oldest first: the newest `keepLast` are
   * kept, then every one older than `olderThanMs` goes, then the oldest until the rest
   * take at most `maxBytes` on disk; `keepLast` alone (at least 1) removes all but the
   * newest `keepLast` that load. Leased snapshots are kept (reported in `leased`).
   */
  prune(policy: PrunePolicy): PruneReport {
    return SnapshotStore.#prune.sync(this, policy);
  }

  /** prune on the worker thread. */
  pruneAsync(policy: PrunePolicy): Promise<PruneReport> {
    return SnapshotStore.#prune.async(this, policy);
  }

  /**
   * Closes the store: later calls are SEAL_CLOSED, async calls under way complete. An
   * ephemeral store is then removed, unless a lease or another process's build holds it
   * (SEAL_BUSY; it is left whole) or async calls on it are still under way (SEAL_BUSY,
   * the store left open: await close() instead). Idempotent; a removal that failed is
   * tried again by the next call.
   */
  closeSync(): void {
    if (this.#closed && !this.#removalDue) return;
    if (this.ephemeral && this.#gate.pending > 0) {
      throw new SealError('SEAL_BUSY', `ephemeral store cannot be removed while ${this.#gate.pending} async call(s) on it are under way: await close() instead`);
    }
    this.#closed = true;
    this.#removalDue = this.ephemeral;
    if (this.ephemeral) SnapshotStore.#close.sync(this);
    this.#removalDue = false;
  }

  /** Resolves once every async call under way has settled: its work done, and its caller's promise settled before this one. */
  async #settled(): Promise<void> {
    await this.#gate.idle();
    // The calls' own promises settle a few microtasks after their work: a turn of the event loop lets them go first.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /**
   * closeSync's work, after every async call under way on the store (and its snapshots)
   * has settled; the removal runs on the worker thread, which is then stopped if nothing
   * else uses it. A second call while the first runs waits for the same result.
   */
  close(): Promise<void> {
    if (this.#closing !== undefined) return this.#closing;
    // Closed already (closeSync): still resolves only once the calls under way have settled.
    if (this.#closed && !this.#removalDue) return this.#settled();
    this.#closed = true;
    this.#removalDue = this.ephemeral;
    const closing = (async () => {
      await this.#settled();
      if (this.#removalDue) await SnapshotStore.#close.async(this);
      this.#removalDue = false;
      await stopIdleWorker();
    })();
    this.#closing = closing;
    const done = (): void => {
      if (this.#closing === closing) this.#closing = undefined;
    };
    closing.then(done, done);
    return closing;
  }
}
