// snapshot.ts: a published, frozen snapshot: its identity, and materialize / mount points / verify / checkClone / lease.
import { dirname } from 'node:path';

import { checkBoolean, checkFunction, checkOptions } from '../base/arg-errors.js';
import { checkRootPath } from '../base/fd.js';
import { checkWorkspace } from '../base/paths.js';
import { unpackSnapshot, type PackedSnapshot, type SnapshotData, type StoredSnapshot } from './document.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { checkMaterializeOptions, type MaterializeOptions, type MaterializeReport } from './materialize.js';
import { diffClone, materializeClone, resetClone, type DiffOptions, type DiffReport, type ResetOptions, type ResetReport } from './clone-reset.js';
import { mountPointsOf, type MountPoint, type MountPointOptions } from './mount-points.js';
import type { CapturedMount } from '../capture/mounts.js';
import type { Gate, ToolOptions } from '../base/offload.js';
import { abortedBefore, defineOp, type OpCall } from '../base/op.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';
import { verifySnapshotAt, type VerifyOptions, type VerifyReport } from './verify.js';
import type { CaptureReport } from './publish.js';
import { checkParallelism } from '../capture/plan.js';
import { checkCloneOutsideStore } from './clone-paths.js';
import { checkCloneAt, type CloneReport } from './clone-check.js';
import { whileCloneChanges } from './clone-changing.js';
import { dataOf, sendRef, type SnapshotRef } from './snapshot-ref.js';
import { Lease, takeLease, type LeaseHandle } from './lease.js';
import { summaryOf, type SnapshotSummary } from './snapshot-summary.js';

export type { SnapshotSummary };

type MaterializeArgs = [snapshot: SnapshotRef, clone: string, options: Omit<MaterializeOptions, 'onProgress' | 'signal'>];

export class Snapshot {
  /** Absolute path of `<store>/snapshots/<digest>`. */
  readonly root: string;
  /** The snapshot digest (schema 3): names the snapshot in the store. */
  readonly digest: string;
  /** sha256 of the canonical manifest of the copy roots. */
  readonly manifestDigest: string;
  /** File bytes plus symlink target bytes, copy roots and mounts together. */
  readonly totalBytes: number;
  readonly source: string;
  readonly revision: string;
  readonly declarations: readonly string[];
  /** The exclude patterns it was captured with (none: empty). */
  readonly exclude: readonly string[];
  /** How the capture that returned this snapshot went (files reused from the stat cache); undefined when loaded from the store. */
  readonly captureReport: CaptureReport | undefined;
  #data: StoredSnapshot | undefined;
  #packed: PackedSnapshot | undefined;
  /** The public form (entry lists as arrays), made on first use. */
  #view: SnapshotData | undefined;
  readonly #sys: Sys;
  readonly #gate: Gate | undefined;

  /** @internal Snapshots come from a SnapshotStore; `sys` is the store's syscall layer, `gate` its bound on calls at once. */
  constructor(root: string, data: StoredSnapshot | PackedSnapshot, options: ToolOptions & { report?: CaptureReport | undefined; gate?: Gate | undefined } = {}) {
    this.root = root;
    if ('packedEntries' in data) this.#packed = data;
    else this.#data = data;
    this.#sys = options.sys ?? nativeSys;
    this.#gate = options.gate;
    this.digest = data.digest;
    this.manifestDigest = data.manifestDigest;
    this.totalBytes = data.totalBytes;
    this.source = data.source;
    this.revision = data.revision;
    this.declarations = Object.freeze(data.declarations);
    this.exclude = Object.freeze(data.exclude ?? []);
    this.captureReport = options.report === undefined ? undefined : Object.freeze({ ...options.report });
  }

  /** Everything, its entry lists packed tables or arrays (an async capture sends them packed). */
  get #full(): StoredSnapshot {
    if (this.#data === undefined) {
      this.#data = unpackSnapshot(this.#packed!);
      this.#packed = undefined;
    }
    return this.#data;
  }

  /** Everything with its entry lists as frozen arrays of entries, made on first use. */
  get #public(): SnapshotData {
    if (this.#view === undefined) {
      const { entries, mounts, ...rest } = this.#full;
      const list = (e: Entries): ManifestEntry[] => Object.freeze(Array.isArray(e) ? e : Array.from(e)) as ManifestEntry[];
      const view = { ...rest, entries: list(entries), mounts: mounts.map((m) => ({ ...m, entries: list(m.entries) })) };
      Object.freeze(view.mounts);
      this.#view = view;
    }
    return this.#view;
  }

  /** The copy roots' entries, sorted by UTF-8 bytes. */
  get entries(): readonly ManifestEntry[] {
    return this.#public.entries;
  }

  get mounts(): readonly CapturedMount[] {
    return this.#public.mounts;
  }

  /** The digests a caller pins with `expectMounts` to fail closed on drift. */
  get mountBinding(): { contentDigest: string; manifestDigest: string } {
    return { ...(this.#data ?? this.#packed!).mountBinding };
  }

  /**
   * What the snapshot is without its entries: each list's count in its place. Cheap
   * for any tree: no entry is made into an object (`entries` and `toJSON` make them all).
   */
  summary(): SnapshotSummary {
    return summaryOf(this.#data ?? this.#packed!);
  }

  /** The stored form (what manifest.json holds). */
  toJSON(): SnapshotData {
    return this.#public;
  }

  /** This snapshot for an operation: its data is loaded again only on another thread. */
  get #ref(): SnapshotRef {
    return { root: this.root, digest: this.digest, load: () => this.#full };
  }

  /** An operation's call on this snapshot: the store's syscall layer and bound, with the core's args. */
  #call<A extends unknown[]>(...args: A): OpCall<A> {
    return { sys: this.#sys, gate: this.#gate, args };
  }

  static readonly #materialize = defineOp('materialize', {
    validate: (snap: Snapshot, clone: string, options: MaterializeOptions = {}) => {
      checkRootPath(clone, 'clone');
      checkOptions('options', options, { op: 'materialize', keys: ['createClone', 'reflink', 'fallbackBytes', 'onProgress', 'signal'] });
      checkFunction('options.onProgress', options.onProgress);
      checkBoolean('options.createClone', options.createClone);
      checkMaterializeOptions(options);
      checkCloneOutsideStore(snap.root, clone);
      const { onProgress, signal, ...rest } = options;
      abortedBefore('materialize', signal);
      return { ...snap.#call<MaterializeArgs>(snap.#ref, clone, rest), onProgress, signal };
    },
    core: (sys, [ref, clone, options], ctx) => {
      const data = dataOf(sys, ref);
      return whileCloneChanges('materialized', () => materializeClone(sys, ref.root, data, clone, { ...options, onProgress: ctx.onProgress, isAborted: ctx.isAborted, op: 'materialize' }));
    },
    send: ([ref, clone, options]): MaterializeArgs => [sendRef(ref), clone, options],
  });

  static readonly #diff = defineOp('diff', {
    validate: (snap: Snapshot, clone: string, options: DiffOptions = {}) => {
      checkRootPath(clone, 'clone');
      checkOptions('options', options, { op: 'diff', keys: ['verify', 'all'] });
      const verify = checkBoolean('options.verify', options.verify);
      const all = checkBoolean('options.all', options.all);
      return snap.#call<[SnapshotRef, string, DiffOptions]>(snap.#ref, clone, { verify, all });
    },
    core: (sys, [ref, clone, options]) => {
      const data = dataOf(sys, ref);
      return whileCloneChanges('compared', () => diffClone(sys, ref.root, data, clone, options));
    },
    send: ([ref, clone, options]): [SnapshotRef, string, DiffOptions] => [sendRef(ref), clone, options],
  });

  static readonly #reset = defineOp('reset', {
    validate: (snap: Snapshot, clone: string, options: ResetOptions = {}) => {
      checkRootPath(clone, 'clone');
      checkOptions('options', options, { op: 'reset', keys: ['clean', 'reflink', 'fallbackBytes', 'onProgress', 'signal'] });
      checkFunction('options.onProgress', options.onProgress);
      checkBoolean('options.clean', options.clean);
      checkMaterializeOptions(options);
      checkCloneOutsideStore(snap.root, clone);
      const { onProgress, signal, ...rest } = options;
      abortedBefore('reset', signal);
      return { ...snap.#call<[SnapshotRef, string, Omit<ResetOptions, 'onProgress' | 'signal'>]>(snap.#ref, clone, rest), onProgress, signal };
    },
    core: (sys, [ref, clone, options], ctx) => {
      const data = dataOf(sys, ref);
      return whileCloneChanges('reset', () => resetClone(sys, ref.root, data, clone, { ...options, onProgress: ctx.onProgress, isAborted: ctx.isAborted, op: 'reset' }));
    },
    send: ([ref, clone, options]): [SnapshotRef, string, Omit<ResetOptions, 'onProgress' | 'signal'>] => [sendRef(ref), clone, options],
  });

  static readonly #mountPoints = defineOp('mountPoints', {
    validate: (snap: Snapshot, clone: string, options: MountPointOptions = {}) => {
      checkRootPath(clone, 'clone');
      checkOptions('options', options, { op: 'mountPoints', keys: ['workspace'] });
      // Here as well as in the core: a workspace that is no string is the same TypeError, sync and async (never sent to the worker).
      checkWorkspace(options.workspace, 'options.workspace');
      checkCloneOutsideStore(snap.root, clone);
      return snap.#call(snap.#ref, clone, options);
    },
    core: (sys, [ref, clone, options]) => mountPointsOf(sys, ref.root, dataOf(sys, ref), clone, options),
    send: ([ref, clone, options]): [SnapshotRef, string, MountPointOptions] => [sendRef(ref), clone, options],
  });

  static readonly #verify = defineOp('verify', {
    validate: (snap: Snapshot, options: VerifyOptions = {}) => {
      checkOptions('options', options, { op: 'verify', keys: ['onProgress', 'parallelism', 'signal'] });
      checkFunction('options.onProgress', options.onProgress);
      const parallelism = checkParallelism(options.parallelism);
      abortedBefore('verify', options.signal);
      return { ...snap.#call(snap.#ref, parallelism), onProgress: options.onProgress, signal: options.signal };
    },
    core: (sys, [ref, parallelism], ctx) => verifySnapshotAt(sys, ref.root, dataOf(sys, ref), { onProgress: ctx.onProgress, parallelism }, ctx.isAborted),
    send: ([ref, parallelism]): [SnapshotRef, number | undefined] => [sendRef(ref), parallelism],
  });

  static readonly #checkClone = defineOp('checkClone', {
    validate: (snap: Snapshot, clone: string) => {
      checkRootPath(clone, 'clone');
      return snap.#call(snap.#ref, clone);
    },
    core: (sys, [ref, clone]) => {
      const data = dataOf(sys, ref);
      return whileCloneChanges('checked', () => checkCloneAt(sys, data, clone));
    },
    send: ([ref, clone]): [SnapshotRef, string] => [sendRef(ref), clone],
  });

  static readonly #lease = defineOp('lease', {
    validate: (snap: Snapshot) => snap.#call(dirname(dirname(snap.root)), snap.digest),
    core: (sys, [storeRoot, digest]): LeaseHandle => takeLease(sys, storeRoot, digest),
    finish: (handle, call) => new Lease(call.sys, call.args[0], call.args[1], handle),
  });

  /**
   * Leases this snapshot: until the lease is released (`release()`, or `using`), or its
   * process ends, removing the snapshot is SEAL_BUSY naming this process.
   */
  lease(): Lease {
    return Snapshot.#lease.sync(this);
  }

  /** lease on the worker thread (the lease's fd is the process's). */
  leaseAsync(): Promise<Lease> {
    return Snapshot.#lease.async(this);
  }

  /**
   * Replaces each copy root in clone with its exact snapshot tree, copy-on-write where
   * possible, and records what it made in the store's ledger of the clone (see diff). A
   * clone that holds this snapshot's ledger is reset instead (only what differs is
   * restored; the report's `reset` is true), unless `reflink: 'never'` asks for copies and
   * the ledger's files were not made so.
   */
  materializeSync(clone: string, options: MaterializeOptions = {}): MaterializeReport {
    return Snapshot.#materialize.sync(this, clone, options);
  }

  /** materializeSync on the worker thread (on the calling thread when the store's `sys` is another layer than the addon's). */
  materialize(clone: string, options: MaterializeOptions = {}): Promise<MaterializeReport> {
    return Snapshot.#materialize.async(this, clone, options);
  }

  /** Read-only mounts of the frozen payloads, each mount point prepared inside clone. */
  mountPoints(clone: string, options: MountPointOptions = {}): MountPoint[] {
    return Snapshot.#mountPoints.sync(this, clone, options);
  }

  /** mountPoints on the worker thread (the sync form keeps the plain name). */
  mountPointsAsync(clone: string, options: MountPointOptions = {}): Promise<MountPoint[]> {
    return Snapshot.#mountPoints.async(this, clone, options);
  }

  /**
   * Re-hashes every file (on helper threads; `parallelism` as for capture) and checks
   * every kind and mode; drift is SEAL_CORRUPT.
   */
  verifySync(options: VerifyOptions = {}): VerifyReport {
    return Snapshot.#verify.sync(this, options);
  }

  /** verifySync on the worker thread. */
  verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    return Snapshot.#verify.async(this, options);
  }

  /**
   * Compares clone's copy roots with this snapshot, in O(entries) stat calls: each entry's
   * identity (inode, size, mode, mtime, ctime) against the ledger the store keeps of what
   * materialize made there (never anything read from the clone). A file whose identity
   * matches is not opened: an agent without privileges cannot keep a file's ctime while it
   * writes, chmods, renames or links it. `verify` re-hashes every file instead, as
   * checkClone does; a clone the store holds no ledger of is re-hashed too (`method` says
   * which). A ledger of another snapshot is SEAL_BINDING (`verify` compares with this one).
   */
  diffSync(clone: string, options: DiffOptions = {}): DiffReport {
    return Snapshot.#diff.sync(this, clone, options);
  }

  /** diffSync on the worker thread. */
  diff(clone: string, options: DiffOptions = {}): Promise<DiffReport> {
    return Snapshot.#diff.async(this, clone, options);
  }

  /**
   * Makes clone's copy roots exactly this snapshot again, touching only what differs from
   * its ledger (see diff): added entries removed, changed and removed ones restored from the
   * snapshot (a reflink where the filesystem can), directory modes fixed; with `clean`, what
   * lies outside the copy roots and mount targets removed too. Nothing in the clone is
   * followed. Without a ledger of this clone, it materializes the copy roots whole; a
   * ledger of another snapshot is SEAL_BINDING, nothing changed. A reset that is killed
   * leaves a clone the next reset or materialize repairs.
   */
  resetSync(clone: string, options: ResetOptions = {}): ResetReport {
    return Snapshot.#reset.sync(this, clone, options);
  }

  /** resetSync on the worker thread. */
  reset(clone: string, options: ResetOptions = {}): Promise<ResetReport> {
    return Snapshot.#reset.async(this, clone, options);
  }

  /** Re-hashes clone's copy roots against this manifest: every added, removed and changed path, and the in-progress marker. */
  checkCloneSync(clone: string): CloneReport {
    return Snapshot.#checkClone.sync(this, clone);
  }

  /** checkCloneSync on the worker thread. */
  checkClone(clone: string): Promise<CloneReport> {
    return Snapshot.#checkClone.async(this, clone);
  }
}
