/// <reference types="node" preserve="true" />
// index.ts: the public API of treeseal.
export { SealError, isSealError, SEAL_CODES, type SealCode, type SealErrorDetail } from './base/errors.js';
export { escapePath } from './base/paths.js';
export { DEFAULT_LIMITS, type LimitOptions, type Limits } from './base/limits.js';
export type { ManifestEntry, Json } from './base/manifest.js';
export {
  checkedCanonicalJson as canonicalJson,
  checkedManifestDigest as manifestDigest,
  checkedMountDigests as mountDigests,
  checkedSnapshotDigest as snapshotDigest,
} from './base/digest-args.js';
export type { CaptureOptions, MountDeclaration, MountBinding } from './capture/plan.js';
export type { CapturedMount } from './capture/mounts.js';
export type { CaptureProgress } from './capture/walk.js';
export type { LinkMode } from './capture/links.js';
export type { SnapshotData } from './store/document.js';
export type { MaterializeOptions, MaterializeReport, ReflinkMode, SnapshotFallback, StageLeft } from './store/materialize.js';
export type { MountPoint, MountPointOptions } from './store/mount-points.js';
export { checkSandboxArgs, checkSandboxClone, findBubblewrap, sandboxArgs, sandboxArgsAsync, spawnSandboxed, type SandboxArgs, type SandboxOptions, type SpawnSandboxedOptions } from './store/sandbox.js';
export type { SandboxedChild } from './store/sandbox-status.js';
export { seccompFilter } from './store/sandbox-seccomp.js';
export type { VerifyOptions, VerifyReport } from './store/verify.js';
export type { CloneReport } from './store/clone-check.js';
export type { DiffOptions, DiffReport, ResetOptions, ResetReport } from './store/clone-reset.js';
export type { CaptureReport } from './store/publish.js';
export { Snapshot, type SnapshotSummary } from './store/snapshot.js';
export type { Lease } from './store/lease.js';
export type { PrunePolicy, PruneReport, SnapshotUsage } from './store/usage.js';
export type { PartUsage, StorePartsUsage } from './store/parts-usage.js';
export { SnapshotStore, type StoreOptions, type CaptureCallOptions, type GcOptions } from './store/store.js';
export type { StoreTrust } from './store/trust.js';
export { freeze, thaw, freezeSync, thawSync } from './tools/freeze.js';
export { readStable, readStableSync, readStableAt, type StableRead, type ReadStableOptions } from './tools/stable-read.js';
export { writeFrozenFile, writeFrozenFileSync, type WriteFrozenOptions } from './tools/frozen-file.js';
export { stageFiles, stageFilesSync, Stage, type StageFile, type StageOptions, type StagedFile } from './tools/stage.js';
export type { PushOptions, PullOptions, PushReport, PullReport, RemoteOptions, RetryNotice, TransferProgress, Timeouts } from './store/registry/options.js';
export type { Credentials } from './store/registry/credentials.js';
export type { SnapshotRef } from './store/registry/reference.js';
export { catRemote, type CatOptions, type CatReport } from './store/registry/cat.js';
