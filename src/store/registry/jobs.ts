// jobs.ts: the registry's disk work as worker jobs (reading packs, building a pull), and how push/pull run them.
import { inline, offload } from '../../base/offload.js';
import type { JobArgs, JobName, JobResult } from '../../base/jobs.js';
import { sys as nativeSys, type Sys } from '../../sys/native.js';
import type { Content, Layout, Pack } from './mapping.js';
import { openPushFile, readPack, readPushConfig } from './pack.js';
import { planPush, type Fetched } from './prove.js';
import { abortPull, finishPull, openPulledFile, startPull, writePack, type PullStart } from './pull-build.js';

declare module '../../base/jobs.js' {
  interface JobMap {
    pushConfig: { args: [snapshotRoot: string, digest: string]; result: Uint8Array };
    readPack: { args: [snapshotRoot: string, digest: string, pack: Pack]; result: { bytes: Uint8Array; digest: string } };
    pushOpenFile: { args: [snapshotRoot: string, digest: string, content: Content]; result: number };
    pushPlan: { args: [config: string, digest: string]; result: Layout };
    pullStart: { args: [storeRoot: string, fetched: Fetched]; result: PullStart };
    pullWritePack: { args: [id: number, index: number, bytes: Uint8Array]; result: void };
    pullOpenFile: { args: [id: number, index: number]; result: number };
    pullFinish: { args: [id: number, streamed: number[]]; result: void };
    pullAbort: { args: [id: number]; result: void };
  }
}

type RegistryJob = 'pushConfig' | 'readPack' | 'pushOpenFile' | 'pushPlan' | 'pullStart' | 'pullWritePack' | 'pullOpenFile' | 'pullFinish' | 'pullAbort';
type Cores = { [K in RegistryJob]: (sys: Sys, args: JobArgs<K>) => JobResult<K> };

const CORES: Cores = {
  pushConfig: (sys, [root, digest]) => readPushConfig(sys, root, digest),
  readPack: (sys, [root, digest, pack]) => readPack(sys, root, digest, pack),
  pushOpenFile: (sys, [root, digest, content]) => openPushFile(sys, root, digest, content),
  pushPlan: (_sys, [config, digest]) => planPush(config, digest),
  pullStart: (sys, [storeRoot, fetched]) => startPull(sys, storeRoot, fetched),
  pullWritePack: (sys, [id, index, bytes]) => writePack(sys, id, index, bytes),
  pullOpenFile: (sys, [id, index]) => openPulledFile(sys, id, index),
  pullFinish: (sys, [id, streamed]) => finishPull(sys, id, streamed),
  pullAbort: (sys, [id]) => abortPull(sys, id),
};

export const JOBS = {
  pushConfig: (args: JobArgs<'pushConfig'>) => CORES.pushConfig(nativeSys, args),
  readPack: (args: JobArgs<'readPack'>) => CORES.readPack(nativeSys, args),
  pushOpenFile: (args: JobArgs<'pushOpenFile'>) => CORES.pushOpenFile(nativeSys, args),
  pushPlan: (args: JobArgs<'pushPlan'>) => CORES.pushPlan(nativeSys, args),
  pullStart: (args: JobArgs<'pullStart'>) => CORES.pullStart(nativeSys, args),
  pullWritePack: (args: JobArgs<'pullWritePack'>) => CORES.pullWritePack(nativeSys, args),
  pullOpenFile: (args: JobArgs<'pullOpenFile'>) => CORES.pullOpenFile(nativeSys, args),
  pullFinish: (args: JobArgs<'pullFinish'>) => CORES.pullFinish(nativeSys, args),
  pullAbort: (args: JobArgs<'pullAbort'>) => CORES.pullAbort(nativeSys, args),
};

/** Runs a registry job on the worker thread, or inline with an injected syscall layer. */
export function runJob<K extends RegistryJob & JobName>(sys: Sys, op: K, args: JobArgs<K>): Promise<JobResult<K>> {
  if (sys === nativeSys) return offload(op, args);
  return inline(() => (CORES[op] as (sys: Sys, args: JobArgs<K>) => JobResult<K>)(sys, args));
}
