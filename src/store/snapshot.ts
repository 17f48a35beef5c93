// snapshot.ts: a published, frozen snapshot: its identity, and materialize / mount points / verify.
import { checkOptions, checkString } from '../base/arg-errors.js';
import type { SnapshotData } from './document.js';
import type { ManifestEntry } from '../base/manifest.js';
import { materializeSnapshot, type MaterializeOptions, type MaterializeReport } from './materialize.js';
import { mountPointsOf, type MountPoint, type MountPointOptions } from './mount-points.js';
import type { CapturedMount } from '../capture/mounts.js';
import { inline, offload, type ToolOptions } from '../base/offload.js';
import { sealed } from '../base/refusal.js';
import type { ProgressFn } from '../base/progress.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';
import { verifySnapshotAt, type VerifyReport } from './verify.js';
import type { CaptureReport } from './publish.js';

export class Snapshot {
  /** Absolute path of `<store>/snapshots/<digest>`. */
  readonly root: string;
  /** The snapshot digest (schema 3): names the snapshot in the store. */
  readonly digest: string;
  /** sha256 of the canonical manifest of the copy roots. */
  readonly manifestDigest: string;
  /** The copy roots' entries, sorted by UTF-8 bytes. */
  readonly entries: readonly ManifestEntry[];
  /** File bytes plus symlink target bytes, copy roots and mounts together. */
  readonly totalBytes: number;
  readonly source: string;
  readonly revision: string;
  readonly declarations: readonly string[];
  readonly mounts: readonly CapturedMount[];
  /** How the capture that returned this snapshot went (files reused from the stat cache); undefined when loaded from the store. */
  readonly captureReport: CaptureReport | undefined;
  readonly #data: SnapshotData;
  readonly #sys: Sys;

  /** @internal Snapshots come from a SnapshotStore; `sys` is the store's syscall layer. */
  constructor(root: string, data: SnapshotData, options: ToolOptions & { report?: CaptureReport | undefined } = {}) {
    this.root = root;
    this.#data = data;
    this.#sys = options.sys ?? nativeSys;
    this.digest = data.digest;
    this.manifestDigest = data.manifestDigest;
    this.entries = Object.freeze(data.entries);
    this.totalBytes = data.totalBytes;
    this.source = data.source;
    this.revision = data.revision;
    this.declarations = Object.freeze(data.declarations);
    this.mounts = Object.freeze(data.mounts);
    this.captureReport = options.report === undefined ? undefined : Object.freeze({ ...options.report });
  }

  /** The digests a caller pins with `expectMounts` to fail closed on drift. */
  get mountBinding(): { contentDigest: string; manifestDigest: string } {
    return { ...this.#data.mountBinding };
  }

  /** The stored form (what manifest.json holds). */
  toJSON(): SnapshotData {
    return this.#data;
  }

  materializeSync(clone: string, options: MaterializeOptions = {}): MaterializeReport {
    checkString('clone', clone);
    return sealed('materialize', () => materializeSnapshot(this.#sys, this.root, this.#data, clone, options));
  }

  /** Replaces each copy root in clone with its exact snapshot tree, copy-on-write where possible. */
  async materialize(clone: string, options: MaterializeOptions = {}): Promise<MaterializeReport> {
    checkString('clone', clone);
    checkOptions('options', options);
    if (this.#sys !== nativeSys) return inline(() => this.materializeSync(clone, options));
    const { onProgress, ...rest } = options;
    return offload('materialize', [this.root, this.#data, clone, rest], { onProgress });
  }

  /** Read-only mounts of the frozen payloads, each mount point prepared inside clone. */
  mountPoints(clone: string, options: MountPointOptions = {}): MountPoint[] {
    return sealed('mountPoints', () => mountPointsOf(this.#sys, this.root, this.#data, clone, options));
  }

  verifySync(options: { onProgress?: ProgressFn } = {}): VerifyReport {
    return sealed('verify', () => verifySnapshotAt(this.#sys, this.root, this.#data, options.onProgress));
  }

  /** Re-hashes every file and checks every kind and mode; drift is SEAL_CORRUPT. */
  async verify(options: { onProgress?: ProgressFn } = {}): Promise<VerifyReport> {
    if (this.#sys !== nativeSys) return inline(() => this.verifySync(options));
    return offload('verify', [this.root, this.#data], { onProgress: options.onProgress });
  }
}
