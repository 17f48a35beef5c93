// jobs.ts: the store's jobs for the worker thread: open, capture, materialize, verify, checkClone, close.
import { basename, dirname } from 'node:path';

import type { JobContext } from '../base/jobs.js';
import type { Plan } from '../capture/plan.js';
import { sys } from '../sys/native.js';
import { openRealDir, own } from '../base/fd.js';
import { SealError } from '../base/errors.js';
import { packSnapshot, type PackedSnapshot, type StoredSnapshot } from './document.js';
import { materializeSnapshot, type MaterializeOptions, type MaterializeReport } from './materialize.js';
import { buildSnapshot, type CaptureReport } from './publish.js';
import { closeStoreAt, loadSnapshotAt, openStoreAt } from './store-dir.js';
import { SNAPSHOTS_DIR } from './layout.js';
import { verifySnapshotAt, type VerifyReport } from './verify.js';
import { checkCloneAt, type CloneReport } from './clone-check.js';

export type MaterializeJobOptions = Omit<MaterializeOptions, 'onProgress'>;

declare module '../base/jobs.js' {
  interface JobMap {
    openStore: { args: [root: string]; result: number };
    closeStore: { args: [root: string]; result: void };
    capture: { args: [storeRoot: string, plan: Plan]; result: { packed: PackedSnapshot; report: CaptureReport } };
    materialize: { args: [snapshotRoot: string, digest: string, clone: string, options: MaterializeJobOptions]; result: MaterializeReport };
    verify: { args: [snapshotRoot: string, digest: string, parallelism: number | undefined]; result: VerifyReport };
    checkClone: { args: [snapshotRoot: string, digest: string, clone: string]; result: CloneReport };
  }
}

/** Snapshots this worker captured or loaded lately, by root: a job names one, its entries never cross threads again. */
const held = new Map<string, StoredSnapshot>();
const HELD_MAX = 4;

function hold(root: string, data: StoredSnapshot): StoredSnapshot {
  held.delete(root);
  held.set(root, data);
  if (held.size > HELD_MAX) held.delete(held.keys().next().value!);
  return data;
}

/** The snapshot at root: held, else read from its manifest.json and proven against its digest. */
function snapshotAt(root: string, digest: string): StoredSnapshot {
  const known = held.get(root);
  if (known !== undefined && known.digest === digest) return hold(root, known);
  if (basename(root) !== digest) throw new SealError('SEAL_CORRUPT', `snapshot root does not name its digest: ${digest}`);
  using snapshots = own(sys, openRealDir(sys, dirname(root), 'store snapshots directory'));
  return hold(root, loadSnapshotAt(sys, snapshots.fd, digest));
}

function capture(storeRoot: string, plan: Plan, ctx: JobContext): { packed: PackedSnapshot; report: CaptureReport } {
  const { data, report } = buildSnapshot(sys, storeRoot, plan, { isAborted: ctx.isAborted, onProgress: ctx.onProgress });
  hold(`${storeRoot}/${SNAPSHOTS_DIR}/${data.digest}`, data);
  return { packed: packSnapshot(data), report };
}

export const JOBS = {
  openStore: ([root]: [string], _ctx: JobContext) => openStoreAt(sys, root),
  closeStore: ([root]: [string], _ctx: JobContext) => closeStoreAt(sys, root),
  capture: ([storeRoot, plan]: [string, Plan], ctx: JobContext) => capture(storeRoot, plan, ctx),
  materialize: ([root, digest, clone, options]: [string, string, string, MaterializeJobOptions], ctx: JobContext) =>
    materializeSnapshot(sys, root, snapshotAt(root, digest), clone, { ...options, onProgress: ctx.onProgress }),
  verify: ([root, digest, parallelism]: [string, string, number | undefined], ctx: JobContext) =>
    verifySnapshotAt(sys, root, snapshotAt(root, digest), { onProgress: ctx.onProgress, parallelism }),
  checkClone: ([root, digest, clone]: [string, string, string], _ctx: JobContext) => checkCloneAt(sys, snapshotAt(root, digest), clone),
};
