// pool.ts: FilePool, helper threads that clone/copy and hash files handed over as fds, in shared-memory slots.
import { availableParallelism } from 'node:os';
import { getSystemErrorMap, getSystemErrorName } from 'node:util';
import { Worker } from 'node:worker_threads';

import { own } from '../base/fd.js';
import { fillFile, type Filled } from './copy-file.js';
import type { FileIdentity } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';

export const SLOTS = 64;
export const INTS = 8;
/** Header ints. */
export const H = { SEQ: 0, DONE: 1, STOP: 2, EXITED: 3 } as const;
const HEADER = 8;
/** Slot ints. */
export const S = { STATE: 0, SRC: 1, DEST: 2, CLONE: 3, CLONED: 4, ERRNO: 5, SYSCALL: 6 } as const;
export const STATE = { FREE: 0, READY: 1, RUNNING: 2, OK: 3, CHANGED: 4, ERROR: 5 } as const;
const EXIT_WAIT_MS = 5000;
export const SYSCALLS = ['pread', 'pwrite', 'ficlone', 'fstat', 'close', 'unknown'] as const;

/** The shared memory of a pool; the helper threads see the same buffers. */
export interface SharedSlots {
  ctrl: Int32Array;
  sizes: Float64Array;
  ids: BigInt64Array;
  sha: Uint8Array;
}

export function allocSlots(): SharedSlots {
  return {
    ctrl: new Int32Array(new SharedArrayBuffer(4 * (HEADER + SLOTS * INTS))),
    sizes: new Float64Array(new SharedArrayBuffer(8 * SLOTS)),
    ids: new BigInt64Array(new SharedArrayBuffer(8 * 5 * SLOTS)),
    sha: new Uint8Array(new SharedArrayBuffer(32 * SLOTS)),
  };
}

export const slotBase = (slot: number): number => HEADER + slot * INTS;

export function readIdentity(m: SharedSlots, slot: number): FileIdentity {
  const i = slot * 5;
  return { dev: m.ids[i]!, ino: m.ids[i + 1]!, mtimeNs: m.ids[i + 2]!, ctimeNs: m.ids[i + 3]!, mode: Number(m.ids[i + 4]!), size: m.sizes[slot]! };
}

/**
 * Runs the job in `slot` (already claimed: RUNNING) and marks it done; closes both
 * fds whatever happens. Used by the helpers and by the submitting thread alike.
 */
export function runSlot(sys: Sys, buffer: Buffer, m: SharedSlots, slot: number): void {
  const base = slotBase(slot);
  const src = m.ctrl[base + S.SRC]!;
  const dest = m.ctrl[base + S.DEST]!;
  let state: number = STATE.ERROR;
  try {
    using _src = own(sys, src);
    using _dest = own(sys, dest);
    const r = fillFile(sys, buffer, src, dest, readIdentity(m, slot), m.ctrl[base + S.CLONE] === 1);
    if (r === 'changed') state = STATE.CHANGED;
    else {
      m.sha.set(Buffer.from(r.sha256, 'hex'), slot * 32);
      m.ctrl[base + S.CLONED] = r.cloned ? 1 : 0;
      state = STATE.OK;
    }
  } catch (err) {
    const e = err as { errno?: number; syscall?: string };
    m.ctrl[base + S.ERRNO] = typeof e.errno === 'number' ? e.errno : -5;
    const idx = SYSCALLS.indexOf((e.syscall ?? 'unknown') as (typeof SYSCALLS)[number]);
    m.ctrl[base + S.SYSCALL] = idx < 0 ? SYSCALLS.length - 1 : idx;
  }
  Atomics.store(m.ctrl, base + S.STATE, state);
  Atomics.add(m.ctrl, H.DONE, 1);
  Atomics.notify(m.ctrl, H.DONE);
}

export type JobResult = Filled | 'changed' | Error;

interface Pending {
  onDone: (r: JobResult) => void;
}

function systemError(errno: number, syscall: string): Error {
  const code = getSystemErrorName(errno);
  const text = getSystemErrorMap().get(errno)?.[1] ?? 'unknown error';
  return Object.assign(new Error(`${code}: ${text}, ${syscall}`), { errno, code, syscall });
}

/** How many helper threads to use for `parallelism` (undefined: one per spare core, at most 4). */
export function helperCount(parallelism: number | undefined): number {
  if (parallelism !== undefined) return Math.max(0, Math.floor(parallelism));
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

/**
 * A fixed set of helper threads fed through SLOTS shared slots. The submitting
 * thread hands over (and stops owning) a source and a destination fd per file; it
 * runs queued jobs itself when every slot is taken, and each job's onDone runs
 * on the submitting thread. At most SLOTS jobs (2×SLOTS fds) are in flight.
 */
export class FilePool {
  readonly #m = allocSlots();
  readonly #pending: (Pending | undefined)[] = new Array(SLOTS).fill(undefined);
  readonly #workers: Worker[] = [];
  readonly #sys: Sys;
  readonly #buffer: Buffer;
  #inFlight = 0;
  #firstError: unknown;

  constructor(sys: Sys, buffer: Buffer, helpers: number) {
    this.#sys = sys;
    this.#buffer = buffer;
    for (let i = 0; i < helpers; i++) {
      const worker = new Worker(new URL('./pool-worker.js', import.meta.url), { workerData: this.#m });
      worker.unref();
      this.#workers.push(worker);
    }
  }

  /** Queues one file; onDone gets the result later, on this thread. */
  submit(src: number, dest: number, before: FileIdentity, tryClone: boolean, onDone: (r: JobResult) => void): void {
    // Ours until queued: an earlier job that fails while this one waits for a slot closes them here.
    using srcFd = own(this.#sys, src);
    using destFd = own(this.#sys, dest);
    let slot = this.#freeSlot();
    while (slot < 0) {
      this.#helpOrWait();
      this.#harvest();
      slot = this.#freeSlot();
    }
    srcFd.release();
    destFd.release();
    const m = this.#m;
    const base = slotBase(slot);
    m.ctrl[base + S.SRC] = src;
    m.ctrl[base + S.DEST] = dest;
    m.ctrl[base + S.CLONE] = tryClone ? 1 : 0;
    m.sizes[slot] = before.size;
    const i = slot * 5;
    m.ids[i] = before.dev;
    m.ids[i + 1] = before.ino;
    m.ids[i + 2] = before.mtimeNs;
    m.ids[i + 3] = before.ctimeNs;
    m.ids[i + 4] = BigInt(before.mode);
    this.#pending[slot] = { onDone };
    this.#inFlight++;
    Atomics.store(m.ctrl, base + S.STATE, STATE.READY);
    Atomics.add(m.ctrl, H.SEQ, 1);
    Atomics.notify(m.ctrl, H.SEQ, 1);
  }

  /** Waits for every queued job and runs their onDone; rethrows the first failure of one. */
  drain(): void {
    while (this.#inFlight > 0) {
      this.#helpOrWait();
      this.#harvest();
    }
    this.#rethrow();
  }

  /** Waits for in-flight jobs (their fds close), stops the helpers and waits for them to leave. */
  close(): void {
    while (this.#inFlight > 0) {
      this.#helpOrWait();
      this.#harvest(true);
    }
    const ctrl = this.#m.ctrl;
    Atomics.store(ctrl, H.STOP, 1);
    Atomics.notify(ctrl, H.SEQ);
    // Idle helpers leave at once; one that never started (it failed to load) must not hang us.
    const deadline = Date.now() + EXIT_WAIT_MS;
    while (Atomics.load(ctrl, H.EXITED) < this.#workers.length && Date.now() < deadline) {
      Atomics.wait(ctrl, H.EXITED, Atomics.load(ctrl, H.EXITED), 50);
    }
    for (const w of this.#workers) void w.terminate();
  }

  #freeSlot(): number {
    for (let s = 0; s < SLOTS; s++) if (this.#pending[s] === undefined) return s;
    return -1;
  }

  /** Runs one queued job here if any is still queued, else waits for a helper to finish one. */
  #helpOrWait(): void {
    const ctrl = this.#m.ctrl;
    const done = Atomics.load(ctrl, H.DONE);
    for (let s = 0; s < SLOTS; s++) {
      if (Atomics.compareExchange(ctrl, slotBase(s) + S.STATE, STATE.READY, STATE.RUNNING) === STATE.READY) {
        runSlot(this.#sys, this.#buffer, this.#m, s);
        return;
      }
    }
    if (!this.#anyFinished()) Atomics.wait(ctrl, H.DONE, done, 1000);
  }

  #anyFinished(): boolean {
    for (let s = 0; s < SLOTS; s++) if (this.#pending[s] !== undefined && Atomics.load(this.#m.ctrl, slotBase(s) + S.STATE) >= STATE.OK) return true;
    return false;
  }

  #harvest(quiet = false): void {
    const m = this.#m;
    for (let s = 0; s < SLOTS; s++) {
      const pending = this.#pending[s];
      if (pending === undefined) continue;
      const base = slotBase(s);
      const state = Atomics.load(m.ctrl, base + S.STATE);
      if (state < STATE.OK) continue;
      let result: JobResult;
      if (state === STATE.OK) {
        result = { sha256: Buffer.from(m.sha.subarray(s * 32, s * 32 + 32)).toString('hex'), cloned: m.ctrl[base + S.CLONED] === 1 };
      } else if (state === STATE.CHANGED) result = 'changed';
      else result = systemError(m.ctrl[base + S.ERRNO]!, SYSCALLS[m.ctrl[base + S.SYSCALL]!] ?? 'unknown');
      this.#pending[s] = undefined;
      this.#inFlight--;
      Atomics.store(m.ctrl, base + S.STATE, STATE.FREE);
      if (quiet || this.#firstError !== undefined) continue;
      try {
        pending.onDone(result);
      } catch (err) {
        this.#firstError = err;
      }
    }
    if (!quiet && this.#firstError !== undefined) {
      // Let every job in flight finish (and close its fds) before failing.
      while (this.#inFlight > 0) {
        this.#helpOrWait();
        this.#harvest(true);
      }
      this.#rethrow();
    }
  }

  #rethrow(): void {
    if (this.#firstError === undefined) return;
    const err = this.#firstError;
    this.#firstError = undefined;
    throw err;
  }
}
