// jobs.ts: the registry's disk work (reading packs, building a pull) as operations push and pull run on the worker thread.
import { defineOp, type Op } from '../../base/op.js';
import type { Sys } from '../../sys/native.js';
import { locateFile, type CatLocation, type CatManifest } from './cat-locate.js';
import type { Content, LayoutSummary } from './mapping.js';
import { localConfigDigest, openPushFile, readPack } from './pack.js';
import type { FetchedRef } from './prove.js';
import type { RootDocument } from './pieces.js';
import { beginDocument, dropDocument, putPiece, wholeDocument } from './pull-document.js';
import { endPush, planPack, planPush, pushDocumentSent, pushPiece, startPush, type PushStart } from './push-plan.js';
import { releasePullLock, tryPullLock } from './pull-lock.js';
import { abortPull, finishPull, openPulledFile, startPull, writePack, type PullStart } from './pull-build.js';

/** The registry's jobs: what each gets and returns. */
interface RegistryJobs {
  pushStart: { args: [snapshotRoot: string, digest: string]; result: PushStart };
  pushPiece: { args: [push: number, index: number]; result: Uint8Array };
  pushSent: { args: [push: number]; result: void };
  readPack: { args: [snapshotRoot: string, digest: string, plan: number, index: number]; result: { bytes: Uint8Array; digest: string } };
  pushOpenFile: { args: [snapshotRoot: string, digest: string, content: Content]; result: number };
  pushPlan: { args: [push: number]; result: LayoutSummary };
  pushEnd: { args: [plan: number]; result: void };
  pullDocBegin: { args: [storeRoot: string, root: RootDocument, sizes: [string, number][], maxBytes: number, where: string]; result: number };
  pullDocWhole: { args: [bytes: Uint8Array]; result: number };
  pullDocPut: { args: [document: number, digest: string, piece: Uint8Array]; result: void };
  pullDocDrop: { args: [document: number]; result: void };
  pullStart: { args: [storeRoot: string, fetched: FetchedRef]; result: PullStart };
  pullWritePack: { args: [id: number, index: number, bytes: Uint8Array]; result: void };
  pullOpenFile: { args: [id: number, index: number]; result: number };
  pullFinish: { args: [id: number, streamed: number[]]; result: void };
  pullAbort: { args: [id: number]; result: void };
  pullLock: { args: [storeRoot: string, digest: string]; result: number };
  pullUnlock: { args: [storeRoot: string, digest: string, fd: number]; result: void };
  localConfig: { args: [storeRoot: string, digest: string, root: boolean]; result: string | undefined };
  catLocate: { args: [config: Uint8Array, manifest: CatManifest, path: string, digest: string]; result: CatLocation };
}

type Name = keyof RegistryJobs;
type Args<K extends Name> = RegistryJobs[K]['args'];
type Result<K extends Name> = RegistryJobs[K]['result'];

/**
 * A step of push or pull: its arguments are already checked (validate only names the
 * syscall layer), push and pull map its errors under their own names, and it runs on
 * the first worker thread, where the pull's build lives from one step to the next.
 */
function job<K extends Name>(name: K, core: (sys: Sys, args: Args<K>) => Result<K>): Op<[Sys, Args<K>], Result<K>> {
  return defineOp(name, { validate: (sys: Sys, args: Args<K>) => ({ sys, args }), core: (sys, args) => core(sys, args), sealAs: false, pinned: true, callerInput: false });
}

const OPS: { [K in Name]: Op<[Sys, Args<K>], Result<K>> } = {
  pushStart: job('pushStart', (sys, [root, digest]) => startPush(sys, root, digest)),
  pushPiece: job('pushPiece', (sys, [push, index]) => pushPiece(sys, push, index)),
  pushSent: job('pushSent', (_sys, [push]) => pushDocumentSent(push)),
  readPack: job('readPack', (sys, [root, digest, plan, index]) => readPack(sys, root, digest, planPack(plan, index))),
  pushOpenFile: job('pushOpenFile', (sys, [root, digest, content]) => openPushFile(sys, root, digest, content)),
  pushPlan: job('pushPlan', (_sys, [push]) => planPush(push)),
  pushEnd: job('pushEnd', (_sys, [plan]) => endPush(plan)),
  pullDocBegin: job('pullDocBegin', (sys, [storeRoot, root, sizes, maxBytes, where]) => beginDocument(sys, storeRoot, root, sizes, maxBytes, where)),
  pullDocWhole: job('pullDocWhole', (_sys, [bytes]) => wholeDocument(bytes)),
  pullDocPut: job('pullDocPut', (_sys, [id, digest, piece]) => putPiece(id, digest, piece)),
  pullDocDrop: job('pullDocDrop', (_sys, [id]) => dropDocument(id)),
  pullStart: job('pullStart', (sys, [storeRoot, fetched]) => startPull(sys, storeRoot, fetched)),
  pullWritePack: job('pullWritePack', (sys, [id, index, bytes]) => writePack(sys, id, index, bytes)),
  pullOpenFile: job('pullOpenFile', (sys, [id, index]) => openPulledFile(sys, id, index)),
  pullFinish: job('pullFinish', (sys, [id, streamed]) => finishPull(sys, id, streamed)),
  pullAbort: job('pullAbort', (sys, [id]) => abortPull(sys, id)),
  pullLock: job('pullLock', (sys, [storeRoot, digest]) => tryPullLock(sys, storeRoot, digest)),
  pullUnlock: job('pullUnlock', (sys, [storeRoot, digest, fd]) => releasePullLock(sys, storeRoot, digest, fd)),
  localConfig: job('localConfig', (sys, [storeRoot, digest, root]) => localConfigDigest(sys, storeRoot, digest, root)),
  catLocate: job('catLocate', (_sys, [config, manifest, path, digest]) => locateFile(config, manifest, path, digest)),
};

/** Runs a registry job on the worker thread, or inline with an injected syscall layer. */
export function runJob<K extends Name>(sys: Sys, op: K, args: Args<K>): Promise<Result<K>> {
  return (OPS[op] as Op<[Sys, Args<K>], Result<K>>).async(sys, args);
}

/** Runs a registry job on the calling thread (its sync twin): for a step too short to be worth a worker thread's start. */
export function runJobSync<K extends Name>(sys: Sys, op: K, args: Args<K>): Result<K> {
  return (OPS[op] as Op<[Sys, Args<K>], Result<K>>).sync(sys, args);
}
