// jobs.ts: the single-file and tree tools' jobs for the worker thread (freeze, thaw, readStable, writeFrozenFile, stageFiles).
import type { JobContext } from '../base/jobs.js';
import type { StableRead } from '../base/io.js';
import { freezeSync, thawSync } from './freeze.js';
import { writeFrozenFileSync, type WriteFrozenOptions } from './frozen-file.js';
import { readStableSync } from './stable-read.js';
import { openStage, type StageHandle, type StageFile } from './stage.js';

declare module '../base/jobs.js' {
  interface JobMap {
    freeze: { args: [dir: string]; result: void };
    thaw: { args: [dir: string]; result: void };
    readStable: { args: [path: string, maxBytes: number]; result: StableRead };
    writeFrozenFile: { args: [path: string, bytes: Uint8Array, options: Omit<WriteFrozenOptions, 'sys'>]; result: void };
    stageFiles: { args: [parent: string, files: StageFile[], prefix: string | undefined, maxPathBytes: number | undefined]; result: StageHandle };
  }
}

type Ctx = JobContext;

export const JOBS = {
  freeze: ([dir]: [string], _ctx: Ctx) => freezeSync(dir),
  thaw: ([dir]: [string], _ctx: Ctx) => thawSync(dir),
  readStable: ([path, maxBytes]: [string, number], _ctx: Ctx) => readStableSync(path, { maxBytes }),
  writeFrozenFile: ([path, bytes, options]: [string, Uint8Array, Omit<WriteFrozenOptions, 'sys'>], _ctx: Ctx) =>
    writeFrozenFileSync(path, bytes, options),
  stageFiles: ([parent, files, prefix, maxPathBytes]: [string, StageFile[], string | undefined, number | undefined], _ctx: Ctx) =>
    openStage(parent, files, { prefix, maxPathBytes }),
};
