// index.ts: the public API of treeseal.
export { SealError, isSealError, SEAL_CODES, type SealCode } from './errors.js';
export { DEFAULT_LIMITS, type Limits } from './limits.js';
export { canonicalJson, manifestDigest, mountDigests, snapshotDigest, type ManifestEntry, type Json } from './manifest.js';
export type { CaptureOptions, MountDeclaration, MountBinding } from './declaration.js';
export type { CaptureProgress } from './capture.js';
export type { SnapshotData } from './document.js';
export type { MaterializeOptions, MaterializeReport, ReflinkMode } from './materialize.js';
export type { MountPoint, MountPointOptions } from './mount-points.js';
export type { VerifyReport } from './verify.js';
export { Snapshot } from './snapshot.js';
export { SnapshotStore, type StoreOptions, type CaptureCallOptions } from './store.js';
export { freeze, thaw, freezeSync, thawSync } from './freeze.js';
export { readStable, readStableSync, readStableAt, type StableRead, type ReadStableOptions } from './stable-read.js';
export { writeFrozenFile, writeFrozenFileSync, type WriteFrozenOptions } from './frozen-file.js';
export { stageFiles, stageFilesSync, Stage, type StageFile, type StageOptions, type StagedFile } from './stage.js';
