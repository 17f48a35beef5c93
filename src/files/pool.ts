// pool.ts: FilePool, helper threads that clone/copy and hash files handed over as fds, or hash batches of files below a directory fd, in shared-memory slots.
import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';

import { own } from '../base/fd.js';
import { spareFds } from '../base/fd-budget.js';
import { workerThreads } from '../base/lazy-builtins.js';
import { CHUNK_BYTES } from '../base/io.js';
import { fillOwned, type Filled, type FillMethods, type How } from './copy-file.js';
import { asBuffer } from '../base/transfer.js';
import { BATCH_BYTES, allocBatchArea, batchDiffers, receiveBatchArea, runBatchItem, sameFileAt, writeBatch, type BatchArea, type HashBatch } from './hash-batch.js';
import { UV_EIO, systemError } from '../sys/errno.js';
import type { FileIdentity } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';

export const SLOTS = 64;
export const INTS = 8;
/** Header ints. */
export const H = { SEQ: 0, DONE: 1, STOP: 2, EXITED: 3, READY: 4, SEQ_WAITERS: 5, DONE_WAITERS: 6, FAILED: 7, STARTED: 8 } as const;

/**
 * Atomics.wait on ctrl[at] while it holds `value`, counted in ctrl[waiters] meanwhile, so a
 * change is announced (wake) only when a thread sleeps on it: V8's notify takes a process-wide
 * lock even with no one to wake, about 1 µs a file when every queued job and every finished one
 * announced itself. No wake-up is lost: a waker that reads no waiter made its change first, and
 * a wait on a value already changed returns at once.
 */
export function waitCounted(ctrl: Int32Array, at: number, value: number, waiters: number, ms: number): void {
  Atomics.add(ctrl, waiters, 1);
  Atomics.wait(ctrl, at, value, ms);
  Atomics.sub(ctrl, waiters, 1);
}

/** Adds 1 to ctrl[at] and wakes up to `count` threads waitCounted holds on it. */
export function bump(ctrl: Int32Array, at: number, waiters: number, count = 1): void {
  Atomics.add(ctrl, at, 1);
  if (Atomics.load(ctrl, waiters) > 0) Atomics.notify(ctrl, at, count);
}
const HEADER = 12;

/**
 * A slot's ints (INTS of them, the last unused). STATE, KIND, ERRNO and SYSCALL mean
 * the same for every job; ints 1, 2 and 4 mean one thing for a file job (FILE_*) and
 * another for a batch (BATCH_*), as KIND says.
 */
export const SLOT = {
  /** STATE: free, queued, running, or how the job ended (claimed by compare-and-exchange). */
  STATE: 0,
  /** KIND bits: BATCH for a HashBatch, else a file job with the methods it may use. */
  KIND: 3,
  /** A failed job: its errno (negative, as a Node-shaped system error's). */
  ERRNO: 5,
  /** A failed job: the failed call's index in SYSCALLS. */
  SYSCALL: 6,
  /** A file job: the source fd (the job's, closed when it is done). */
  FILE_SRC: 1,
  /** A file job: the destination fd (the job's), or -1 to hash only. */
  FILE_DEST: 2,
  /** A file job done: how its bytes reached the destination (How). */
  FILE_HOW: 4,
  /** A batch: its directory fd (borrowed: the submitter keeps it open). */
  BATCH_DIRFD: 1,
  /** A batch: how many files it holds. */
  BATCH_COUNT: 2,
  /** A batch running or failed: the index of the file being checked (the one that failed, after a throw). */
  BATCH_CURRENT: 4,
} as const;
export const STATE = { FREE: 0, READY: 1, RUNNING: 2, OK: 3, CHANGED: 4, ERROR: 5 } as const;
/** SLOT.KIND bits. */
const KIND = {
  /** A file job may clone (FICLONE). */
  CLONE: 1,
  /** A file job may copy in the kernel (copy_file_range). */
  RANGE: 2,
  /** A HashBatch, not a file job. */
  BATCH: 4,
} as const;
const EXIT_WAIT_MS = 5000;
/** How long awaitReady waits for a helper whose thread has not run its first line: one that cannot start never will. */
const START_GRACE_MS = 1000;

/** The helper module, loaded by a bootstrap that says in H.FAILED when it cannot be (see helperBoot). */
const HELPER_URL = new URL('../files/pool-worker.js', import.meta.url);

/** Errors of a helper that could not start for want of a resource (a low ulimit -n, memory): the pool goes on without it. */
export function isShortage(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e?.code === 'EMFILE' || e?.code === 'ENFILE' || e?.code === 'ENOMEM' || e?.code === 'EAGAIN' || e?.code === 'ERR_WORKER_OUT_OF_MEMORY') return true;
  return e?.code === 'ERR_WORKER_INIT_FAILED' || /\b(EMFILE|ENFILE|ENOMEM|EAGAIN)\b/.test(String(e?.message));
}

/**
 * A helper's first code (CommonJS, run with eval): loads the helper module, and where that
 * fails (EMFILE opening it or the addon under a low ulimit -n) counts the helper in
 * H.FAILED, which the submitting thread sees at once, while it blocks, where an 'error'
 * event would only reach it after the call; then rethrows anything but a shortage.
 */
function helperBoot(): string {
  return `const { workerData } = require('node:worker_threads');
Atomics.add(workerData.ctrl, ${H.STARTED}, 1);
const shortage = ${isShortage.toString()};
import(${JSON.stringify(HELPER_URL.href)}).catch((err) => {
  Atomics.add(workerData.ctrl, ${H.FAILED}, 1);
  Atomics.notify(workerData.ctrl, ${H.FAILED});
  if (!shortage(err)) throw err;
});`;
}
/** A file job's source identity before the copy, in `ids` (IDS per slot; its size is in `sizes`). */
const ID = { DEV: 0, INO: 1, MTIME: 2, CTIME: 3, MODE: 4 } as const;
const IDS = 5;
/** A file job's sha256 (raw), in `sha`. */
const SHA_BYTES = 32;
export const SYSCALLS = ['pread', 'pwrite', 'ficlone', 'copy_file_range', 'lseek', 'ftruncate', 'fstat', 'close', 'openat', 'fstatat', 'unknown'] as const;

/** The shared memory of a pool; the helper threads see the same buffers. */
export interface SharedSlots {
  ctrl: Int32Array;
  sizes: Float64Array;
  ids: BigInt64Array;
  sha: Buffer;
  batch: BatchArea;
}

export function allocSlots(): SharedSlots {
  return {
    ctrl: new Int32Array(new SharedArrayBuffer(4 * (HEADER + SLOTS * INTS))),
    sizes: new Float64Array(new SharedArrayBuffer(8 * SLOTS)),
    ids: new BigInt64Array(new SharedArrayBuffer(8 * IDS * SLOTS)),
    sha: Buffer.from(new SharedArrayBuffer(SHA_BYTES * SLOTS)),
    batch: allocBatchArea(SLOTS),
  };
}

/** The slots as received by a helper thread: the digest area is a Buffer view again (a clone carries a plain Uint8Array). */
export function receiveSlots(data: SharedSlots): SharedSlots {
  return { ...data, sha: asBuffer(data.sha), batch: receiveBatchArea(data.batch) };
}

export const slotBase = (slot: number): number => HEADER + slot * INTS;

export function readIdentity(m: SharedSlots, slot: number): FileIdentity {
  const i = slot * IDS;
  const { ids } = m;
  return { dev: ids[i + ID.DEV]!, ino: ids[i + ID.INO]!, mtimeNs: ids[i + ID.MTIME]!, ctimeNs: ids[i + ID.CTIME]!, mode: Number(ids[i + ID.MODE]!), size: m.sizes[slot]! };
}

/** Checks each file of the batch in `slot`, BATCH_CURRENT naming the one being checked (the one that failed, after a throw). */
function runBatch(sys: Sys, buffer: Buffer, m: SharedSlots, slot: number): void {
  const base = slotBase(slot);
  const dirfd = m.ctrl[base + SLOT.BATCH_DIRFD]!;
  const count = m.ctrl[base + SLOT.BATCH_COUNT]!;
  for (let i = 0; i < count; i++) {
    m.ctrl[base + SLOT.BATCH_CURRENT] = i;
    runBatchItem(sys, buffer, m.batch, slot, dirfd, i);
  }
}

/**
 * Runs the job in `slot` (already claimed: RUNNING) and marks it done; a file job's
 * fds are closed whatever happens (a batch's directory fd is borrowed). Used by the
 * helpers and by the submitting thread alike.
 */
export function runSlot(sys: Sys, buffer: Buffer, m: SharedSlots, slot: number): void {
  const base = slotBase(slot);
  let state: number = STATE.ERROR;
  try {
    const kind = m.ctrl[base + SLOT.KIND]!;
    if (kind & KIND.BATCH) {
      runBatch(sys, buffer, m, slot);
      state = STATE.OK;
    } else {
      state = runFile(sys, buffer, m, slot, kind);
    }
  } catch (err) {
    const e = err as { errno?: number; syscall?: string };
    // A failure that is not a system error (it has no errno) is reported as EIO.
    m.ctrl[base + SLOT.ERRNO] = typeof e.errno === 'number' ? e.errno : UV_EIO;
    const idx = SYSCALLS.indexOf((e.syscall ?? 'unknown') as (typeof SYSCALLS)[number]);
    m.ctrl[base + SLOT.SYSCALL] = idx < 0 ? SYSCALLS.length - 1 : idx;
  }
  Atomics.store(m.ctrl, base + SLOT.STATE, state);
  bump(m.ctrl, H.DONE, H.DONE_WAITERS, Infinity);
}

/** A file job: fills and hashes, closing both fds; the slot's state. */
function runFile(sys: Sys, buffer: Buffer, m: SharedSlots, slot: number, kind: number): number {
  const base = slotBase(slot);
  const src = m.ctrl[base + SLOT.FILE_SRC]!;
  const dest = m.ctrl[base + SLOT.FILE_DEST]!;
  const r = fillOwned(sys, buffer, src, dest, readIdentity(m, slot), { clone: (kind & KIND.CLONE) !== 0, range: (kind & KIND.RANGE) !== 0 });
  if (r === 'changed') return STATE.CHANGED;
  m.sha.write(r.sha256, slot * SHA_BYTES, SHA_BYTES, 'hex');
  m.ctrl[base + SLOT.FILE_HOW] = r.how;
  return STATE.OK;
}

export type JobResult = Filled | 'changed' | Error;

/** What a batch's job gives back: the indices of its files that differ, or the first failure. */
export type BatchResult = number[] | Error;

type Pending = { onDone: (r: JobResult) => void; batch?: undefined } | { onDone: (r: BatchResult) => void; batch: HashBatch };

/** Runs each file of `batch` here: the indices of those that differ (a failure throws). */
export function runBatchHere(sys: Sys, buffer: Buffer, batch: HashBatch): number[] {
  const out: number[] = [];
  for (let i = 0; i < batch.length; i++) {
    if (!sameFileAt(sys, buffer, batch.dirfd, batch.names[i]!, { size: batch.sizes[i]!, perm: batch.perms[i]!, sha256: batch.sha256s[i]! })) out.push(i);
  }
  return out;
}

/**
 * Batches left queued per helper before the submitting thread runs one itself: a helper
 * that finishes one finds the next waiting instead of sleeping until the next submit.
 */
const QUEUED_PER_HELPER = 3;

/** How many helper threads to use for `parallelism` (undefined: one per spare core, at most 4). */
export function helperCount(parallelism: number | undefined): number {
  if (parallelism !== undefined) return Math.max(0, Math.floor(parallelism));
  return Math.max(1, Math.min(4, availableParallelism() - 1));
}

/**
 * A fixed set of helper threads fed through SLOTS shared slots. The submitting
 * thread hands over (and stops owning) a source and a destination fd per file, or a
 * batch of names below a directory fd it keeps open; it runs queued jobs itself when
 * every slot is taken (and batches when they queue up), and each job's onDone runs
 * on the submitting thread. At most SLOTS jobs (2×SLOTS fds) are in flight.
 */
export class FilePool {
  readonly #m = allocSlots();
  readonly #pending: (Pending | undefined)[] = new Array(SLOTS).fill(undefined);
  readonly #workers: Worker[] = [];
  readonly #sys: Sys;
  readonly #buffer: Buffer;
  #inFlight = 0;
  /** Jobs let into flight at once (at most SLOTS): fewer where the process may open few files. */
  #limit = SLOTS;
  #firstError: unknown;
  /** Helpers whose thread failed to start (an 'error' event, seen between calls): never ready, never exiting. */
  #dead = 0;
  readonly helpers: number;

  constructor(sys: Sys, buffer: Buffer, helpers: number) {
    this.#sys = sys;
    this.#buffer = buffer;
    this.helpers = helpers;
    const boot = helperBoot();
    for (let i = 0; i < helpers; i++) {
      // No inherited execArgv: a host run with `node -e`, --input-type or a loader must not break the helpers.
      const worker = new (workerThreads().Worker)(boot, { eval: true, workerData: this.#m, execArgv: [] });
      worker.unref();
      // A thread that cannot start (EMFILE under a low ulimit -n) reports on this thread's event loop, after the call
      // that made it has returned: without a listener that crashed the process. It is gone; the other threads take its
      // jobs. Anything else is a fault of the helper's own and still ends the process.
      worker.once('error', (err) => {
        this.#dead++;
        if (!isShortage(err)) throw err;
      });
      this.#workers.push(worker);
    }
  }

  /** Helpers that will never report: they failed to load (H.FAILED) or to start at all. */
  #gone(): number {
    return Atomics.load(this.#m.ctrl, H.FAILED) + this.#dead;
  }

  /** Lets at most n jobs (at least 1, at most SLOTS) be in flight at once from now on. */
  limitInFlight(n: number): void {
    this.#limit = Math.max(1, Math.min(SLOTS, Math.floor(n)));
  }

  /**
   * Blocks until every helper is running (its thread and event loop set up), at most
   * EXIT_WAIT_MS; a helper whose thread has not run its first line within START_GRACE_MS
   * is not waited for (a thread that cannot start, EMFILE, tells only this thread's event
   * loop, which a blocked call does not run).
   */
  awaitReady(): void {
    this.#waitAll(H.READY);
  }

  /**
   * Waits until every helper has counted itself in ctrl[at] (READY, EXITED) or is gone, at
   * most EXIT_WAIT_MS, and past START_GRACE_MS no longer for one that has not run its first line.
   */
  #waitAll(at: number): void {
    const ctrl = this.#m.ctrl;
    const started = Date.now();
    const deadline = started + EXIT_WAIT_MS;
    for (;;) {
      const done = Atomics.load(ctrl, at) + this.#gone();
      if (done >= this.#workers.length || Date.now() >= deadline) return;
      if (done >= Atomics.load(ctrl, H.STARTED) && Date.now() - started >= START_GRACE_MS) return;
      Atomics.wait(ctrl, at, Atomics.load(ctrl, at), 50);
    }
  }

  /** A free slot, running or waiting for queued jobs until one is (their onDone may throw). */
  #slot(): number {
    let slot = this.#freeSlot();
    while (slot < 0) {
      this.#helpOrWait();
      this.#harvest();
      slot = this.#freeSlot();
    }
    return slot;
  }

  /** Queues one file; onDone gets the result later, on this thread. */
  submit(src: number, dest: number, before: FileIdentity, methods: FillMethods, onDone: (r: JobResult) => void): void {
    let slot: number;
    try {
      slot = this.#slot();
    } catch (err) {
      // Ours until queued: an earlier job that fails while this one waits for a slot closes them here.
      own(this.#sys, src)[Symbol.dispose]();
      if (dest >= 0) own(this.#sys, dest)[Symbol.dispose]();
      throw err;
    }
    const m = this.#m;
    const base = slotBase(slot);
    m.ctrl[base + SLOT.FILE_SRC] = src;
    m.ctrl[base + SLOT.FILE_DEST] = dest;
    m.ctrl[base + SLOT.KIND] = (methods.clone ? KIND.CLONE : 0) | (methods.range ? KIND.RANGE : 0);
    m.sizes[slot] = before.size;
    const i = slot * IDS;
    m.ids[i + ID.DEV] = before.dev;
    m.ids[i + ID.INO] = before.ino;
    m.ids[i + ID.MTIME] = before.mtimeNs;
    m.ids[i + ID.CTIME] = before.ctimeNs;
    m.ids[i + ID.MODE] = BigInt(before.mode);
    this.#pending[slot] = { onDone };
    this.#queue(slot);
  }

  /**
   * Queues a batch (its directory fd must stay open until onDone has run); onDone gets
   * the result later, on this thread. When batches queue up faster than the helpers
   * take them, this thread runs one too, so every core hashes.
   */
  submitBatch(batch: HashBatch, onDone: (r: BatchResult) => void): void {
    const slot = this.#slot();
    const m = this.#m;
    const base = slotBase(slot);
    writeBatch(m.batch, slot, batch);
    m.ctrl[base + SLOT.BATCH_DIRFD] = batch.dirfd;
    m.ctrl[base + SLOT.BATCH_COUNT] = batch.length;
    m.ctrl[base + SLOT.KIND] = KIND.BATCH;
    this.#pending[slot] = { onDone, batch };
    this.#queue(slot);
    if (this.#queued() > QUEUED_PER_HELPER * this.helpers && this.#runOneQueued(true)) this.#harvest();
  }

  #queue(slot: number): void {
    const ctrl = this.#m.ctrl;
    this.#inFlight++;
    Atomics.store(ctrl, slotBase(slot) + SLOT.STATE, STATE.READY);
    bump(ctrl, H.SEQ, H.SEQ_WAITERS);
  }

  /** Jobs queued and not yet taken by any thread. */
  #queued(): number {
    let n = 0;
    for (let s = 0; s < SLOTS; s++) if (this.#pending[s] !== undefined && Atomics.load(this.#m.ctrl, slotBase(s) + SLOT.STATE) === STATE.READY) n++;
    return n;
  }

  /** Waits for every queued job and runs their onDone; rethrows the first failure of one. */
  drain(): void {
    while (this.#inFlight > 0) {
      this.#helpOrWait();
      this.#harvest();
    }
    this.#rethrow();
  }

  /** Waits for in-flight jobs (their fds close, their results dropped); the helpers stay for the next user. */
  release(): void {
    while (this.#inFlight > 0) {
      this.#helpOrWait();
      this.#harvest(true);
    }
    this.#firstError = undefined;
  }

  /** Waits for in-flight jobs (their fds close), stops the helpers and waits for them to leave. */
  close(): void {
    this.release();
    const ctrl = this.#m.ctrl;
    Atomics.store(ctrl, H.STOP, 1);
    // SEQ moves too: a helper between its look at STOP and its wait returns at once rather than after its timeout.
    Atomics.add(ctrl, H.SEQ, 1);
    Atomics.notify(ctrl, H.SEQ);
    // Idle helpers leave at once, one still starting once it is up (it finds STOP). One that failed to load its module
    // is done; one whose thread has not run its first line within START_GRACE_MS never will (it could not start: an
    // 'error' event this blocked thread cannot see) and must not hold the call for EXIT_WAIT_MS.
    this.#waitAll(H.EXITED);
    for (const w of this.#workers) void w.terminate();
  }

  #freeSlot(): number {
    if (this.#inFlight >= this.#limit) return -1;
    for (let s = 0; s < SLOTS; s++) if (this.#pending[s] === undefined) return s;
    return -1;
  }

  /** Runs one queued job here if any is still queued, else waits for a helper to finish one. */
  #helpOrWait(): void {
    const ctrl = this.#m.ctrl;
    const done = Atomics.load(ctrl, H.DONE);
    if (this.#runOneQueued()) return;
    if (!this.#anyFinished()) waitCounted(ctrl, H.DONE, done, H.DONE_WAITERS, 1000);
  }

  /**
   * Claims and runs one queued job on this thread; false when none is queued. With
   * `small`, only a batch of small files: a big file stays for a helper while this
   * thread goes on submitting.
   */
  #runOneQueued(small = false): boolean {
    const ctrl = this.#m.ctrl;
    for (let s = 0; s < SLOTS; s++) {
      if (small && !((this.#pending[s]?.batch?.bytes ?? Infinity) <= BATCH_BYTES)) continue;
      if (Atomics.compareExchange(ctrl, slotBase(s) + SLOT.STATE, STATE.READY, STATE.RUNNING) === STATE.READY) {
        runSlot(this.#sys, this.#buffer, this.#m, s);
        return true;
      }
    }
    return false;
  }

  #anyFinished(): boolean {
    for (let s = 0; s < SLOTS; s++) if (this.#pending[s] !== undefined && Atomics.load(this.#m.ctrl, slotBase(s) + SLOT.STATE) >= STATE.OK) return true;
    return false;
  }

  #harvest(quiet = false): void {
    const m = this.#m;
    for (let s = 0; s < SLOTS; s++) {
      const pending = this.#pending[s];
      if (pending === undefined) continue;
      const state = Atomics.load(m.ctrl, slotBase(s) + SLOT.STATE);
      if (state < STATE.OK) continue;
      const result = this.#result(s, state, pending);
      this.#pending[s] = undefined;
      this.#inFlight--;
      Atomics.store(m.ctrl, slotBase(s) + SLOT.STATE, STATE.FREE);
      if (quiet || this.#firstError !== undefined) continue;
      try {
        if (pending.batch === undefined) pending.onDone(result as JobResult);
        else pending.onDone(result as BatchResult);
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

  /** What the finished job in slot s gave. */
  #result(s: number, state: number, pending: Pending): JobResult | BatchResult {
    const m = this.#m;
    const base = slotBase(s);
    if (state === STATE.ERROR) {
      const syscall = SYSCALLS[m.ctrl[base + SLOT.SYSCALL]!] ?? 'unknown';
      // A batch's file that could not be looked up or opened is named as the addon names it.
      const named = syscall === 'openat' || syscall === 'fstatat';
      const path = pending.batch !== undefined && named ? pending.batch.names[m.ctrl[base + SLOT.BATCH_CURRENT]!] : undefined;
      return systemError(m.ctrl[base + SLOT.ERRNO]!, syscall, path);
    }
    if (pending.batch !== undefined) return batchDiffers(m.batch, s, pending.batch.length);
    if (state === STATE.CHANGED) return 'changed';
    return { sha256: m.sha.toString('hex', s * SHA_BYTES, (s + 1) * SHA_BYTES), how: m.ctrl[base + SLOT.FILE_HOW] as How };
  }

  #rethrow(): void {
    if (this.#firstError === undefined) return;
    const err = this.#firstError;
    this.#firstError = undefined;
    throw err;
  }
}

let kept: FilePool | undefined;
let keep = false;

/**
 * Keeps helper threads alive for the life of this thread (the long-lived worker calls
 * this at start): the first call with enough files starts them, and later captures
 * and verifies start no thread.
 */
export function keepHelpers(): void {
  keep = true;
}

/** Stops the kept helpers (a thread about to end calls this); idempotent. */
export function dropHelpers(): void {
  const pool = kept;
  kept = undefined;
  keep = false;
  pool?.close();
}

/** This thread's kept pool for `parallelism` (undefined: the default), started on first use. */
function keptPool(sys: Sys, parallelism: number | undefined): FilePool | undefined {
  if (!keep || (parallelism !== undefined && parallelism !== helperCount(undefined))) return undefined;
  kept ??= new FilePool(sys, Buffer.allocUnsafe(CHUNK_BYTES), helperCount(undefined));
  return kept;
}

/** Files seen before a call starts helper threads of its own (a small tree is not worth them). */
const AUTO_POOL_FILES = 128;

/** Descriptors a call keeps beside its jobs' (the walk's directories, the store's, a module a thread loads). */
const FD_RESERVE = 32;

/** How many jobs may be in flight within `spare` descriptors (spareFds): a file job holds two (its source and destination). */
function jobsWithin(spare: number): number {
  return Math.floor((spare - FD_RESERVE) / 2);
}

/** Descriptors a helper thread takes to start: its event loop's, and the modules and addon it opens. */
const HELPER_FDS = 8;
/** Jobs kept room for beside the helpers' own descriptors. */
const MIN_JOBS = 4;

/** How many of `helpers` threads can start within `spare` descriptors (spareFds; 0: the call runs here). */
function helpersWithin(spare: number, helpers: number): number {
  return Math.max(0, Math.min(helpers, Math.floor((spare - FD_RESERVE - 2 * MIN_JOBS) / HELPER_FDS)));
}

/**
 * The file jobs of one call (a capture, a verify): run on this thread's kept pool
 * when it has one, else on a pool of the call's own once AUTO_POOL_FILES files were
 * seen (at once for an explicit parallelism), else here. Each job owns, and closes,
 * its fds; onDone runs on this thread.
 */
export class FileJobs {
  #pool: FilePool | undefined;
  #kept = false;
  #files = 0;
  #helpers: number;

  constructor(
    readonly sys: Sys,
    readonly buffer: Buffer,
    /** Helper threads (undefined: one per spare core); 0 keeps every job on this thread. */
    readonly parallelism: number | undefined,
    /** The real syscall layer (an injected one cannot cross threads). */
    native: boolean,
  ) {
    this.#helpers = native ? helperCount(parallelism) : 0;
  }

  #poolFor(): FilePool | undefined {
    if (this.#pool !== undefined || this.#helpers === 0) return this.#pool;
    if (this.#files < (this.parallelism === undefined ? AUTO_POOL_FILES : 1)) return undefined;
    // Under a low open-files limit, fewer helpers or none (each thread needs descriptors to start); read once a call
    // (/proc, two opens), for the helpers and the jobs in flight alike: no thread takes a descriptor before it runs.
    const spare = spareFds();
    const helpers = helpersWithin(spare, this.#helpers);
    if (helpers === 0) {
      this.#helpers = 0;
      return undefined;
    }
    const kept = helpers === this.#helpers ? keptPool(this.sys, this.parallelism) : undefined;
    this.#kept = kept !== undefined;
    this.#pool = kept ?? new FilePool(this.sys, this.buffer, helpers);
    // A low open-files limit (ulimit -n 128) bounds the jobs in flight, not the call: it once failed EMFILE past 64 files.
    this.#pool.limitInFlight(jobsWithin(spare));
    return this.#pool;
  }

  run(src: number, dest: number, before: FileIdentity, methods: FillMethods, onDone: (r: JobResult) => void): void {
    this.#files++;
    const pool = this.#poolFor();
    if (pool !== undefined) {
      pool.submit(src, dest, before, methods, onDone);
      return;
    }
    onDone(fillOwned(this.sys, this.buffer, src, dest, before, methods));
  }

  /** Counts `files` the call will hand over as if seen already (a verify knows its tree): a big one starts the helpers at once. */
  expect(files: number): void {
    this.#files += files;
  }

  /** Hashes and compares a batch's files (its directory fd kept open until onDone has run); onDone runs on this thread. */
  hashBatch(batch: HashBatch, onDone: (r: BatchResult) => void): void {
    this.#files += batch.length;
    const pool = this.#poolFor();
    if (pool !== undefined) {
      pool.submitBatch(batch, onDone);
      return;
    }
    onDone(runBatchHere(this.sys, this.buffer, batch));
  }

  /** Waits for every job; throws the first failure. */
  drain(): void {
    this.#pool?.drain();
  }

  /**
   * Lets go of the helpers after the jobs in flight (their fds closed); idempotent. A
   * kept pool stays, every helper up before this returns (no thread still starting,
   * its fds still opening, once the call is over).
   */
  close(): void {
    const pool = this.#pool;
    this.#pool = undefined;
    if (!this.#kept) return pool?.close();
    pool?.release();
    pool?.awaitReady();
  }
}
