// jobs.ts: the store's jobs for the worker thread: open, capture, materialize, verify, close.
import type { JobContext } from '../base/jobs.js';
import type { Plan } from '../capture/plan.js';
import { sys } from '../sys/native.js';
import type { SnapshotData } from './document.js';
import { materializeSnapshot, type MaterializeOptions, type MaterializeReport } from './materialize.js';
import { buildSnapshot, type Built } from './publish.js';
import { closeStoreAt, openStoreAt } from './store-dir.js';
import { verifySnapshotAt, type VerifyReport } from './verify.js';

export type MaterializeJobOptions = Omit<MaterializeOptions, 'onProgress'>;

declare module '../base/jobs.js' {
  interface JobMap {
    openStore: { args: [root: string]; result: number };
    closeStore: { args: [root: string]; result: void };
    capture: { args: [storeRoot: string, plan: Plan]; result: Built };
    materialize: { args: [snapshotRoot: string, data: SnapshotData, clone: string, options: MaterializeJobOptions]; result: MaterializeReport };
    verify: { args: [snapshotRoot: string, data: SnapshotData]; result: VerifyReport };
  }
}

export const JOBS = {
  openStore: ([root]: [string], _ctx: JobContext) => openStoreAt(sys, root),
  closeStore: ([root]: [string], _ctx: JobContext) => closeStoreAt(sys, root),
  capture: ([storeRoot, plan]: [string, Plan], ctx: JobContext) =>
    buildSnapshot(sys, storeRoot, plan, { isAborted: ctx.isAborted, onProgress: ctx.onProgress }),
  materialize: ([root, data, clone, options]: [string, SnapshotData, string, MaterializeJobOptions], ctx: JobContext) =>
    materializeSnapshot(sys, root, data, clone, { ...options, onProgress: ctx.onProgress }),
  verify: ([root, data]: [string, SnapshotData], ctx: JobContext) => verifySnapshotAt(sys, root, data, ctx.onProgress),
};
