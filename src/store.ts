// store.ts: SnapshotStore: a directory of published snapshots, the capture entry point, and its lifetime.
import { mkdirSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

import { SNAPSHOTS_DIR, TMP_DIR, buildSnapshot, loadSnapshotAt, removeSnapshot, sweepStaleBuilds, type BuildHooks } from './build.js';
import { withStoreLock } from './lock.js';
import type { CaptureProgress } from './capture.js';
import { definitionKey, planCapture, type CaptureOptions, type MountBinding, type Plan } from './declaration.js';
import { closeQuietly, openRealDir, removeAt } from './dirs.js';
import type { SnapshotData } from './document.js';
import { SealError } from './errors.js';
import { THAWED, applyModesAt } from './freeze.js';
import { offload } from './offload.js';
import { escapePath } from './paths.js';
import { Snapshot } from './snapshot.js';
import { hasCode } from './sys/errno.js';
import { sys as nativeSys, type Sys } from './sys/native.js';

export interface StoreOptions {
  /** close() thaws and removes the whole store. */
  ephemeral?: boolean;
  /** The syscall layer (tests wrap it); async calls run on the calling thread when given. */
  sys?: Sys;
}

export interface CaptureCallOptions extends CaptureOptions {
  signal?: AbortSignal;
  onProgress?: (p: CaptureProgress) => void;
}

const DIGEST_RE = /^[0-9a-f]{64}$/;

function checkBinding(snapshot: Snapshot, expect: MountBinding | undefined): void {
  if (expect === undefined) return;
  const have = snapshot.mountBinding;
  if (expect.contentDigest !== have.contentDigest || expect.manifestDigest !== have.manifestDigest) {
    throw new SealError('SEAL_BINDING', 'mount content changed after binding');
  }
}

export class SnapshotStore {
  readonly root: string;
  readonly ephemeral: boolean;
  readonly #sys: Sys;
  readonly #byDefinition = new Map<string, Snapshot>();
  #closed = false;

  private constructor(root: string, options: StoreOptions) {
    this.root = root;
    this.ephemeral = options.ephemeral === true;
    this.#sys = options.sys ?? nativeSys;
  }

  /** Opens (creating it 0700 if needed) a store and sweeps builds no live process holds. */
  static openSync(dir: string, options: StoreOptions = {}): SnapshotStore {
    if (typeof dir !== 'string' || dir === '') throw new SealError('SEAL_BAD_PATH', 'store directory must be a path');
    const root = resolve(dir);
    try {
      mkdirSync(root, { recursive: true, mode: 0o700 });
    } catch (err) {
      throw new SealError('SEAL_UNAVAILABLE', `store directory cannot be created: ${escapePath(root)}: ${(err as Error).message}`, { cause: err });
    }
    const store = new SnapshotStore(root, options);
    const sys = store.#sys;
    const fd = openRealDir(sys, root, 'store directory');
    try {
      for (const name of [SNAPSHOTS_DIR, TMP_DIR]) {
        try {
          sys.mkdirat(fd, name, 0o700);
        } catch (err) {
          if (!hasCode(err, 'EEXIST')) throw err;
        }
      }
    } finally {
      closeQuietly(sys, fd);
    }
    withStoreLock(sys, root, true, () => sweepStaleBuilds(sys, root));
    return store;
  }

  static async open(dir: string, options: StoreOptions = {}): Promise<SnapshotStore> {
    return SnapshotStore.openSync(dir, options);
  }

  get closed(): boolean {
    return this.#closed;
  }

  #checkOpen(): void {
    if (this.#closed) throw new SealError('SEAL_CLOSED', 'snapshot store is already closed');
  }

  #snapshot(data: SnapshotData): Snapshot {
    return new Snapshot(`${this.root}/${SNAPSHOTS_DIR}/${data.digest}`, data, this.#sys);
  }

  #prepare(options: CaptureCallOptions): { plan: Plan; key: string; existing: Snapshot | undefined } {
    this.#checkOpen();
    const plan = planCapture(options);
    // A store below the source is fine unless a declared root contains it (it would copy itself).
    for (const parts of [...plan.copyParts, ...plan.mounts.map((m) => m.sourceParts)]) {
      const declared = `${plan.source}/${parts.join('/')}`;
      if (this.root === declared || this.root.startsWith(`${declared}/`)) {
        throw new SealError('SEAL_OVERLAP', `the store lies inside what is being captured: ${escapePath(parts.join('/'))}`);
      }
    }
    const key = definitionKey(plan);
    const existing = this.#byDefinition.get(key);
    if (existing !== undefined) checkBinding(existing, plan.expectMounts);
    if (options.signal?.aborted) throw new SealError('SEAL_ABORTED', 'capture was aborted');
    return { plan, key, existing };
  }

  /** Captures (or reuses) a snapshot on the calling thread. */
  captureSync(options: CaptureCallOptions): Snapshot {
    const { plan, key, existing } = this.#prepare(options);
    if (existing !== undefined) return existing;
    const hooks: BuildHooks = { isAborted: () => options.signal?.aborted === true };
    if (options.onProgress !== undefined) hooks.onProgress = options.onProgress;
    const snapshot = this.#snapshot(buildSnapshot(this.#sys, this.root, plan, hooks));
    this.#byDefinition.set(key, snapshot);
    return snapshot;
  }

  /** Captures (or reuses) a snapshot in a worker thread; the event loop stays free. */
  async capture(options: CaptureCallOptions): Promise<Snapshot> {
    if (this.#sys !== nativeSys) return this.captureSync(options);
    const { plan, key, existing } = this.#prepare(options);
    if (existing !== undefined) return existing;
    const data = await offload<SnapshotData>('capture', [this.root, plan], {
      signal: options.signal,
      onProgress: options.onProgress,
    });
    this.#checkOpen();
    const already = this.#byDefinition.get(key);
    if (already !== undefined) return already;
    const snapshot = this.#snapshot(data);
    this.#byDefinition.set(key, snapshot);
    return snapshot;
  }

  /** A published snapshot by its full digest or a unique prefix of it (SEAL_UNAVAILABLE otherwise). */
  get(digestOrPrefix: string): Snapshot {
    this.#checkOpen();
    const digest = this.resolveDigest(digestOrPrefix);
    const fd = openRealDir(this.#sys, `${this.root}/${SNAPSHOTS_DIR}`, 'store snapshots directory');
    try {
      return this.#snapshot(loadSnapshotAt(this.#sys, fd, digest));
    } finally {
      closeQuietly(this.#sys, fd);
    }
  }

  /** Digests of every published snapshot, sorted. */
  list(): string[] {
    this.#checkOpen();
    const fd = openRealDir(this.#sys, `${this.root}/${SNAPSHOTS_DIR}`, 'store snapshots directory');
    try {
      return this.#sys
        .readdir(fd)
        .map((e) => e.name)
        .filter((n): n is string => typeof n === 'string' && DIGEST_RE.test(n))
        .sort();
    } finally {
      closeQuietly(this.#sys, fd);
    }
  }

  resolveDigest(digestOrPrefix: string): string {
    if (typeof digestOrPrefix !== 'string' || !/^[0-9a-f]{1,64}$/.test(digestOrPrefix)) {
      throw new SealError('SEAL_BAD_PATH', `not a snapshot digest: ${escapePath(String(digestOrPrefix))}`);
    }
    const matches = this.list().filter((d) => d.startsWith(digestOrPrefix));
    if (matches.length === 0) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digestOrPrefix}`);
    if (matches.length > 1) throw new SealError('SEAL_BAD_PATH', `digest prefix is ambiguous: ${digestOrPrefix} (${matches.length} snapshots)`);
    return matches[0]!;
  }

  /** Removes a published snapshot (full digest or unique prefix) under the store lock. */
  remove(digestOrPrefix: string): string {
    this.#checkOpen();
    const digest = this.resolveDigest(digestOrPrefix);
    withStoreLock(this.#sys, this.root, true, () => removeSnapshot(this.#sys, this.root, digest));
    for (const [key, snap] of this.#byDefinition) if (snap.digest === digest) this.#byDefinition.delete(key);
    return digest;
  }

  /** Sweeps stale builds and half-removed snapshots under the store lock; returns how many. */
  gc(): number {
    this.#checkOpen();
    return withStoreLock(this.#sys, this.root, true, () => sweepStaleBuilds(this.#sys, this.root));
  }

  /** Closes the store; an ephemeral store is thawed and removed. Idempotent. */
  closeSync(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#byDefinition.clear();
    if (!this.ephemeral) return;
    const sys = this.#sys;
    let fd: number;
    try {
      fd = openRealDir(sys, this.root, 'store directory');
    } catch (err) {
      if (err instanceof SealError && err.code === 'SEAL_UNAVAILABLE') return;
      throw err;
    }
    try {
      applyModesAt(sys, fd, THAWED);
    } finally {
      closeQuietly(sys, fd);
    }
    const parent = openRealDir(sys, dirname(this.root), 'store parent');
    try {
      removeAt(sys, parent, basename(this.root));
    } finally {
      closeQuietly(sys, parent);
    }
  }

  async close(): Promise<void> {
    this.closeSync();
  }
}
