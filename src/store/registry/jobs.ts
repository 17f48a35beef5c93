// jobs.ts: the registry's disk work as worker jobs (reading packs, building a pull), and how push/pull run them.
import { inline, offload } from '../../base/offload.js';
import type { JobArgs, JobName, JobResult } from '../../base/jobs.js';
import { sys as nativeSys, type Sys } from '../../sys/native.js';
import type { Layout, Pack } from './mapping.js';
import { readPack } from './pack.js';
import { planPush, type Fetched } from './prove.js';
import { abortPull, finishPull, startPull, writePack, type PullStart } from './pull-build.js';

declare module '../../base/jobs.js' {
  interface JobMap {
    readPack: { args: [snapshotRoot: string, pack: Pack]; result: { bytes: Uint8Array; digest: string } };
    pushPlan: { args: [config: string, digest: string]; result: Layout };
    pullStart: { args: [storeRoot: string, fetched: Fetched]; result: PullStart };
    pullWritePack: { args: [id: number, index: number, bytes: Uint8Array]; result: void };
    pullFinish: { args: [id: number, streamed: number[]]; result: void };
    pullAbort: { args: [id: number]; result: void };
  }
}

type RegistryJob = 'readPack' | 'pushPlan' | 'pullStart' | 'pullWritePack' | 'pullFinish' | 'pullAbort';
type Cores = { [K in RegistryJob]: (sys: Sys, args: JobArgs<K>) => JobResult<K> };

const CORES: Cores = {
  readPack: (sys, [root, pack]) => readPack(sys, root, pack),
  pushPlan: (_sys, [config, digest]) => planPush(config, digest),
  pullStart: (sys, [storeRoot, fetched]) => startPull(sys, storeRoot, fetched),
  pullWritePack: (sys, [id, index, bytes]) => writePack(sys, id, index, bytes),
  pullFinish: (sys, [id, streamed]) => finishPull(sys, id, streamed),
  pullAbort: (sys, [id]) => abortPull(sys, id),
};

export const JOBS = {
  readPack: (args: JobArgs<'readPack'>) => CORES.readPack(nativeSys, args),
  pushPlan: (args: JobArgs<'pushPlan'>) => CORES.pushPlan(nativeSys, args),
  pullStart: (args: JobArgs<'pullStart'>) => CORES.pullStart(nativeSys, args),
  pullWritePack: (args: JobArgs<'pullWritePack'>) => CORES.pullWritePack(nativeSys, args),
  pullFinish: (args: JobArgs<'pullFinish'>) => CORES.pullFinish(nativeSys, args),
  pullAbort: (args: JobArgs<'pullAbort'>) => CORES.pullAbort(nativeSys, args),
};

/** Runs a registry job on the worker thread, or inline with an injected syscall layer. */
export function runJob<K extends RegistryJob & JobName>(sys: Sys, op: K, args: JobArgs<K>): Promise<JobResult<K>> {
  if (sys === nativeSys) return offload(op, args);
  return inline(() => (CORES[op] as (sys: Sys, args: JobArgs<K>) => JobResult<K>)(sys, args));
}
