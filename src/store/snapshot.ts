// snapshot.ts: a published, frozen snapshot: its identity, and materialize / mount points / verify / checkClone.
import { checkFunction, checkOptions, checkString } from '../base/arg-errors.js';
import { unpackSnapshot, type PackedSnapshot, type SnapshotData, type StoredSnapshot } from './document.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { materializeSnapshot, type MaterializeOptions, type MaterializeReport } from './materialize.js';
import { mountPointsOf, type MountPoint, type MountPointOptions } from './mount-points.js';
import type { CapturedMount } from '../capture/mounts.js';
import { inline, offload, type ToolOptions } from '../base/offload.js';
import { sealed } from '../base/refusal.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';
import { verifySnapshotAt, type VerifyOptions, type VerifyReport } from './verify.js';
import type { CaptureReport } from './publish.js';
import { checkParallelism } from '../capture/plan.js';
import { checkCloneOutsideStore } from './clone-paths.js';
import { checkCloneAt, type CloneReport } from './clone-check.js';

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
  /** How the capture that returned this snapshot went (files reused from the stat cache); undefined when loaded from the store. */
  readonly captureReport: CaptureReport | undefined;
  #data: StoredSnapshot | undefined;
  #packed: PackedSnapshot | undefined;
  /** The public form (entry lists as arrays), made on first use. */
  #view: SnapshotData | undefined;
  readonly #sys: Sys;

  /** @internal Snapshots come from a SnapshotStore; `sys` is the store's syscall layer. */
  constructor(root: string, data: StoredSnapshot | PackedSnapshot, options: ToolOptions & { report?: CaptureReport | undefined } = {}) {
    this.root = root;
    if ('packedEntries' in data) this.#packed = data;
    else this.#data = data;
    this.#sys = options.sys ?? nativeSys;
    this.digest = data.digest;
    this.manifestDigest = data.manifestDigest;
    this.totalBytes = data.totalBytes;
    this.source = data.source;
    this.revision = data.revision;
    this.declarations = Object.freeze(data.declarations);
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

  /** The stored form (what manifest.json holds). */
  toJSON(): SnapshotData {
    return this.#public;
  }

  materializeSync(clone: string, options: MaterializeOptions = {}): MaterializeReport {
    checkString('clone', clone);
    return sealed('materialize', () => {
      checkCloneOutsideStore(this.root, clone, this.declarations);
      return materializeSnapshot(this.#sys, this.root, this.#full, clone, options);
    });
  }

  /** Replaces each copy root in clone with its exact snapshot tree, copy-on-write where possible. */
  async materialize(clone: string, options: MaterializeOptions = {}): Promise<MaterializeReport> {
    checkString('clone', clone);
    checkOptions('options', options);
    checkFunction('options.onProgress', options.onProgress);
    if (this.#sys !== nativeSys) return inline(() => this.materializeSync(clone, options));
    checkCloneOutsideStore(this.root, clone, this.declarations);
    const { onProgress, ...rest } = options;
    return offload('materialize', [this.root, this.digest, clone, rest], { onProgress });
  }

  /** Read-only mounts of the frozen payloads, each mount point prepared inside clone. */
  mountPoints(clone: string, options: MountPointOptions = {}): MountPoint[] {
    return sealed('mountPoints', () => {
      checkCloneOutsideStore(this.root, clone, []);
      return mountPointsOf(this.#sys, this.root, this.#full, clone, options);
    });
  }

  verifySync(options: VerifyOptions = {}): VerifyReport {
    checkFunction('options.onProgress', options.onProgress);
    const parallelism = checkParallelism(options.parallelism);
    return sealed('verify', () => verifySnapshotAt(this.#sys, this.root, this.#full, { onProgress: options.onProgress, parallelism }));
  }

  /**
   * Re-hashes every file (on helper threads; `parallelism` as for capture) and checks
   * every kind and mode; drift is SEAL_CORRUPT.
   */
  async verify(options: VerifyOptions = {}): Promise<VerifyReport> {
    if (this.#sys !== nativeSys) return inline(() => this.verifySync(options));
    checkFunction('options.onProgress', options.onProgress);
    const parallelism = checkParallelism(options.parallelism);
    return offload('verify', [this.root, this.digest, parallelism], { onProgress: options.onProgress });
  }

  /** Re-hashes clone's copy roots against this manifest: every added, removed and changed path, and the in-progress marker. */
  checkCloneSync(clone: string): CloneReport {
    checkString('clone', clone);
    return sealed('checkClone', () => checkCloneAt(this.#sys, this.#full, clone));
  }

  /** checkCloneSync on the worker thread (on the calling thread when the snapshot has an injected `sys`). */
  async checkClone(clone: string): Promise<CloneReport> {
    checkString('clone', clone);
    if (this.#sys !== nativeSys) return inline(() => this.checkCloneSync(clone));
    return offload('checkClone', [this.root, this.digest, clone]);
  }
}
