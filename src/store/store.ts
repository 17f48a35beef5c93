// store.ts: SnapshotStore: a directory of published snapshots, the capture entry point, and its lifetime.
import { SealError } from '../base/errors.js';
import { checkBoolean, checkFunction, checkOptions, checkString, invalidArgType, invalidArgValue } from '../base/arg-errors.js';
import { checkRootPath, makeRealDir, openRealDir, own, type Fd } from '../base/fd.js';
import { inline, offload, stopIdleWorker, type ToolOptions } from '../base/offload.js';
import { escapePath } from '../base/paths.js';
import { sealed, sealedAsync } from '../base/refusal.js';
import type { CaptureProgress } from '../capture/walk.js';
import { planCapture, type CaptureOptions, type Plan } from '../capture/plan.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';
import type { PackedSnapshot, StoredSnapshot } from './document.js';
import { SNAPSHOTS_DIR } from './layout.js';
import { withStoreLock } from './lock.js';
import { sweepCloneAt } from './clone-stage.js';
import { buildSnapshot, type BuildHooks, type CaptureReport } from './publish.js';
import { pullSnapshot } from './registry/pull.js';
import { pushSnapshot } from './registry/push.js';
import type { PullOptions, PullReport, PushOptions, PushReport } from './registry/options.js';
import { Snapshot } from './snapshot.js';
import { STORE_TRUSTS, type StoreTrust } from './trust.js';
import { closeStoreAt, loadSnapshotAt, openStoreAt, removeSnapshot, sweepStaleBuilds } from './store-dir.js';

export interface StoreOptions extends ToolOptions {
  /** close() thaws and removes the whole store. */
  ephemeral?: boolean;
  /**
   * Whom the store's contents are trusted from (see README "Store trust"): 'owner' (the
   * default) refuses a store that anyone but you (or root) owns or can write; 'group' opts
   * into a shared store: a setgid directory of a group you are in, group-writable.
   */
  trust?: StoreTrust;
}

export interface CaptureCallOptions extends CaptureOptions {
  signal?: AbortSignal;
  onProgress?: (p: CaptureProgress) => void;
}

const DIGEST_RE = /^[0-9a-f]{64}$/;

function checkTrust(value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== 'string') throw invalidArgType('options.trust', 'string', value);
  if (!(STORE_TRUSTS as readonly string[]).includes(value)) {
    throw invalidArgValue('options.trust', value, `must be one of: ${STORE_TRUSTS.map((t) => `'${t}'`).join(', ')}`);
  }
}

export class SnapshotStore {
  readonly root: string;
  readonly ephemeral: boolean;
  readonly trust: StoreTrust;
  readonly #sys: Sys;
  #closed = false;
  #sweptAtOpen = 0;

  private constructor(root: string, options: StoreOptions) {
    this.root = root;
    this.ephemeral = options.ephemeral === true;
    this.trust = options.trust ?? 'owner';
    this.#sys = options.sys ?? nativeSys;
  }

  static #prepareOpen(dir: string, options: StoreOptions): SnapshotStore {
    checkString('dir', dir);
    const sys = checkOptions('options', options).sys ?? nativeSys;
    checkBoolean('options.ephemeral', options.ephemeral);
    checkTrust(options.trust);
    const root = checkRootPath(dir, 'store directory');
    own(sys, makeRealDir(sys, root, 'store directory'))[Symbol.dispose]();
    return new SnapshotStore(root, options);
  }

  /**
   * Opens (creating it 0700 if needed) a store, refuses it (SEAL_UNTRUSTED) unless only
   * users it trusts can have written it (see `trust`), and sweeps builds no live process holds.
   */
  static openSync(dir: string, options: StoreOptions = {}): SnapshotStore {
    const store = SnapshotStore.#prepareOpen(dir, options);
    store.#sweptAtOpen = sealed('openStore', () => openStoreAt(store.#sys, store.root, store.trust));
    return store;
  }

  /** openSync's directory work on the worker thread (on the calling thread when `sys` is given, or for a shared store). */
  static async open(dir: string, options: StoreOptions = {}): Promise<SnapshotStore> {
    const store = SnapshotStore.#prepareOpen(dir, options);
    // The worker's open job checks the default trust only: a shared store's few checks run here.
    if (options.sys !== undefined || store.trust !== 'owner') {
      store.#sweptAtOpen = await inline(() => sealed('openStore', () => openStoreAt(store.#sys, store.root, store.trust)));
    } else store.#sweptAtOpen = await offload('openStore', [store.root]);
    return store;
  }

  /** How many stale builds and half-removed snapshots opening this store swept. */
  get sweptAtOpen(): number {
    return this.#sweptAtOpen;
  }

  get closed(): boolean {
    return this.#closed;
  }

  #checkOpen(): void {
    if (this.#closed) throw new SealError('SEAL_CLOSED', 'snapshot store is already closed');
  }

  #snapshot(data: StoredSnapshot | PackedSnapshot, report?: CaptureReport): Snapshot {
    return new Snapshot(`${this.root}/${SNAPSHOTS_DIR}/${data.digest}`, data, { sys: this.#sys, report });
  }

  /** Checks the options; every capture then walks the source and applies its own limits (reuse is by digest, after the walk). */
  #prepare(options: CaptureCallOptions): Plan {
    this.#checkOpen();
    const plan = planCapture(options);
    checkFunction('options.onProgress', options.onProgress);
    // A store below the source is fine unless a declared root contains it (it would copy itself).
    for (const parts of [...plan.copyParts, ...plan.mounts.map((m) => m.sourceParts)]) {
      const declared = `${plan.source}/${parts.join('/')}`;
      if (this.root === declared || this.root.startsWith(`${declared}/`)) {
        throw new SealError('SEAL_OVERLAP', `the store lies inside what is being captured: ${escapePath(parts.join('/'))}`);
      }
    }
    if (options.signal?.aborted) throw new SealError('SEAL_ABORTED', 'capture was aborted');
    return plan;
  }

  /** Captures (or reuses) a snapshot on the calling thread. */
  captureSync(options: CaptureCallOptions): Snapshot {
    const plan = this.#prepare(options);
    const hooks: BuildHooks = { isAborted: () => options.signal?.aborted === true };
    if (options.onProgress !== undefined) hooks.onProgress = options.onProgress;
    const built = sealed('capture', () => buildSnapshot(this.#sys, this.root, plan, hooks));
    return this.#snapshot(built.data, built.report);
  }

  /** Captures (or reuses) a snapshot on the worker thread; the event loop stays free. */
  async capture(options: CaptureCallOptions): Promise<Snapshot> {
    if (this.#sys !== nativeSys) return inline(() => this.captureSync(options));
    const plan = this.#prepare(options);
    const built = await offload('capture', [this.root, plan], {
      signal: options.signal,
      onProgress: options.onProgress,
    });
    this.#checkOpen();
    return this.#snapshot(built.packed, built.report);
  }

  /** A published snapshot by its full digest or a unique prefix of it (none: SEAL_UNAVAILABLE; several: SEAL_AMBIGUOUS). */
  get(digestOrPrefix: string): Snapshot {
    this.#checkOpen();
    const digest = this.resolveDigest(digestOrPrefix);
    return sealed('get', () => {
      using snapshots = this.#openSnapshots();
      return this.#snapshot(loadSnapshotAt(this.#sys, snapshots.fd, digest));
    });
  }

  /** Digests of every published snapshot, sorted. */
  list(): string[] {
    this.#checkOpen();
    return sealed('list', () => {
      using snapshots = this.#openSnapshots();
      return this.#sys
        .readdir(snapshots.fd)
        .map((e) => e.name)
        .filter((n): n is string => typeof n === 'string' && DIGEST_RE.test(n))
        .sort();
    });
  }

  #openSnapshots(): Fd {
    return own(this.#sys, openRealDir(this.#sys, `${this.root}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
  }

  /**
   * The full digest a digest or a prefix of one names: not 1 to 64 lower-case hex
   * digits is Node's TypeError (ERR_INVALID_ARG_VALUE), no match SEAL_UNAVAILABLE,
   * more than one SEAL_AMBIGUOUS.
   */
  resolveDigest(digestOrPrefix: string): string {
    checkString('digest', digestOrPrefix);
    if (!/^[0-9a-f]{1,64}$/.test(digestOrPrefix)) {
      throw invalidArgValue('digest', digestOrPrefix, 'must be a snapshot digest or a prefix of one (1 to 64 lower-case hex digits)');
    }
    const matches = this.list().filter((d) => d.startsWith(digestOrPrefix));
    if (matches.length === 0) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digestOrPrefix}`);
    if (matches.length > 1) throw new SealError('SEAL_AMBIGUOUS', `digest prefix is ambiguous: ${digestOrPrefix} (${matches.length} snapshots)`);
    return matches[0]!;
  }

  /** Removes a published snapshot (full digest or unique prefix) under the store lock. */
  remove(digestOrPrefix: string): string {
    this.#checkOpen();
    const digest = this.resolveDigest(digestOrPrefix);
    sealed('remove', () => withStoreLock(this.#sys, this.root, true, () => removeSnapshot(this.#sys, this.root, digest)));
    return digest;
  }

  /**
   * Pushes a published snapshot (full digest or unique prefix) to an OCI registry
   * repository (`host[:port]/repository`) under tag `ts-<digest>`; see README
   * "Sharing snapshots through an OCI registry". Failures of the registry are SEAL_REMOTE.
   */
  async push(digestOrPrefix: string, remote: string, options: PushOptions = {}): Promise<PushReport> {
    this.#checkOpen();
    const digest = this.resolveDigest(digestOrPrefix);
    return sealedAsync('push', () => pushSnapshot({ sys: this.#sys, digest, root: `${this.root}/${SNAPSHOTS_DIR}/${digest}` }, remote, options));
  }

  /**
   * Pulls snapshot `digest` (full) from an OCI registry repository into this store,
   * proving its digest, every blob and every file; contents the store already holds are
   * reflinked or copied from local snapshots instead of downloaded. Nothing is published
   * unless everything checks out.
   */
  async pull(digest: string, remote: string, options: PullOptions = {}): Promise<PullReport> {
    this.#checkOpen();
    checkString('digest', digest);
    if (!DIGEST_RE.test(digest)) throw invalidArgValue('digest', digest, 'must be a full snapshot digest (64 lower-case hex digits)');
    const target = { sys: this.#sys, storeRoot: this.root, has: (d: string) => this.list().includes(d) };
    const report = await sealedAsync('pull', () => pullSnapshot(target, digest, remote, options));
    this.#checkOpen();
    return report;
  }

  /**
   * Sweeps stale builds and half-removed snapshots under the store lock and, given a
   * clone, the stages materializes that died left inside it; returns how many.
   */
  gc(options: { clone?: string } = {}): number {
    this.#checkOpen();
    const swept = sealed('gc', () => withStoreLock(this.#sys, this.root, true, () => sweepStaleBuilds(this.#sys, this.root)));
    if (options.clone === undefined) return swept;
    const clone = options.clone;
    return swept + sealed('gc', () => sweepCloneAt(this.#sys, clone));
  }

  /** Closes the store; an ephemeral store is thawed and removed. Idempotent. */
  closeSync(): void {
    if (this.#closed) return;
    this.#closed = true;
    if (this.ephemeral) sealed('closeStore', () => closeStoreAt(this.#sys, this.root));
  }

  /** closeSync's removal on the worker thread, which is then stopped if nothing else uses it. */
  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#sys !== nativeSys) return inline(() => this.closeSync());
    this.#closed = true;
    if (this.ephemeral) await offload('closeStore', [this.root]);
    await stopIdleWorker();
  }
}
