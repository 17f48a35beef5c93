// driver.mjs: the process that calls treeseal, through its public API only (sync, or async with
// --async). It answers one JSON line per request, counting its own open fds around each call.
import { readdirSync, readlinkSync } from 'node:fs';
import { createInterface } from 'node:readline';
import * as treeseal from 'treeseal';
import * as tsys from 'treeseal/sys';

const { SnapshotStore, SealError, SEAL_CODES } = treeseal;
const ASYNC = process.argv.includes('--async');

export function openFds() {
  const out = {};
  for (const n of readdirSync('/proc/self/fd')) {
    try {
      out[n] = readlinkSync(`/proc/self/fd/${n}`);
    } catch {
      // the listing's own fd, closed by now
    }
  }
  return out;
}

/** The fds open after that were not open before (an fd reused for another file counts too). */
function leaked(before, after) {
  return Object.entries(after)
    .filter(([n, target]) => before[n] !== target)
    .map(([n, target]) => `${n} -> ${target}`);
}

export function describeError(err) {
  if (err === null || typeof err !== 'object') return { name: typeof err, message: String(err) };
  return {
    name: err.constructor?.name ?? err.name,
    code: err.code,
    message: String(err.message),
    sealError: err instanceof SealError,
    knownCode: err instanceof SealError && SEAL_CODES.includes(err.code),
    retryable: err.retryable,
    path: err.path,
    cause: err.cause?.code,
    stack: String(err.stack ?? '').split('\n').slice(0, 6).join('\n'),
  };
}

const open = (dir, opts) => (ASYNC ? SnapshotStore.open(dir, opts) : SnapshotStore.openSync(dir, opts));
const capture = (store, opts) => (ASYNC ? store.capture(opts) : store.captureSync(opts));
const verify = (snap) => (ASYNC ? snap.verify() : snap.verifySync());
const materialize = (snap, clone, opts) => (ASYNC ? snap.materialize(clone, opts) : snap.materializeSync(clone, opts));
const close = (store) => (ASYNC ? store.close() : store.closeSync());
const diff = (snap, clone, opts) => (ASYNC ? snap.diff(clone, opts) : snap.diffSync(clone, opts));
const reset = (snap, clone, opts) => (ASYNC ? snap.reset(clone, opts) : snap.resetSync(clone, opts));
const checkClone = (snap, clone) => (ASYNC ? snap.checkClone(clone) : snap.checkCloneSync(clone));

/** Stores kept open between requests (`keep: true`), by directory: an async store's helper threads start once. */
const kept = new Map();

async function withSnap(dir, digest, fds, fn, keep = false) {
  let store = keep ? kept.get(dir) : undefined;
  if (store === undefined) {
    store = await open(dir);
    if (keep) kept.set(dir, store);
  }
  try {
    const snap = store.get(digest);
    fds.before = openFds();
    return await fn(snap);
  } finally {
    fds.after ??= openFds();
    if (!keep) await close(store);
  }
}

function summary(snap) {
  return { digest: snap.digest, root: snap.root, data: snap.toJSON(), reusedFiles: snap.captureReport?.reusedFiles };
}

const OPS = {
  /** Opens the store, captures, verifies. The fd count is taken once the store is open. */
  async capture({ store: dir, fdsAround, ...opts }, fds) {
    const store = await open(dir);
    try {
      fds.before = openFds();
      const snap = await capture(store, opts);
      const report = await verify(snap);
      return { ...summary(snap), verified: report };
    } finally {
      fds.after ??= openFds();
      await close(store);
    }
  },
  /** Opens the store (which sweeps tmp/), then gets and verifies every snapshot. */
  async verifyAll({ store: dir }, fds) {
    const store = await open(dir);
    try {
      fds.before = openFds();
      const results = [];
      for (const digest of store.list()) {
        try {
          const snap = store.get(digest);
          await verify(snap);
          results.push({ digest, ok: true });
        } catch (err) {
          results.push({ digest, ok: false, error: describeError(err) });
        }
      }
      return results;
    } finally {
      fds.after ??= openFds();
      await close(store);
    }
  },
  async materialize({ store: dir, digest, clone, options = {} }, fds) {
    const store = await open(dir);
    try {
      const snap = store.get(digest);
      fds.before = openFds();
      return await materialize(snap, clone, options);
    } finally {
      fds.after ??= openFds();
      await close(store);
    }
  },
  /** snap.diff, snap.reset or snap.checkClone of a clone (the fd count taken once the snapshot is got). */
  async diff({ store: dir, digest, clone, options = {}, keep }, fds) {
    return withSnap(dir, digest, fds, (snap) => diff(snap, clone, options), keep);
  },
  async reset({ store: dir, digest, clone, options = {}, keep }, fds) {
    return withSnap(dir, digest, fds, (snap) => reset(snap, clone, options), keep);
  },
  async checkClone({ store: dir, digest, clone, keep }, fds) {
    return withSnap(dir, digest, fds, (snap) => checkClone(snap, clone), keep);
  },
  /** materialize through a kept store. */
  async materializeKept({ store: dir, digest, clone, options = {} }, fds) {
    return withSnap(dir, digest, fds, (snap) => materialize(snap, clone, options), true);
  },
  /** Closes the stores kept open. */
  async release() {
    for (const [dir, store] of kept) {
      kept.delete(dir);
      await close(store);
    }
    return true;
  },
  async remove({ store: dir, digest }) {
    const store = await open(dir);
    try {
      return store.remove(digest);
    } finally {
      await close(store);
    }
  },
  async gc({ store: dir }) {
    const store = await open(dir);
    try {
      return store.gc();
    } finally {
      await close(store);
    }
  },
  /** A function given as source text, called as fn({ treeseal, sys, async, args }). */
  async run({ fn, args }, fds) {
    const f = new Function(`return (${fn});`)();
    fds.before = openFds();
    try {
      return await f({ treeseal, sys: tsys, async: ASYNC, args });
    } finally {
      fds.after = openFds();
    }
  },
};

/**
 * The fds still open that were not before. Helper threads close their own event-loop fds as they
 * exit, just after the call returns: only what is still open 2 s later is a leak.
 */
async function leakedAfter(fds) {
  if (fds.before === undefined) return [];
  let now = leaked(fds.before, fds.after ?? openFds());
  for (const wait of [20, 100, 400, 1500]) {
    if (now.length === 0) break;
    await new Promise((r) => setTimeout(r, wait));
    now = leaked(fds.before, openFds());
  }
  return now;
}

async function handle(msg) {
  const fds = {};
  const started = performance.now();
  let reply;
  try {
    reply = { ok: true, result: await OPS[msg.op](msg.args ?? {}, fds) };
  } catch (err) {
    reply = { ok: false, error: describeError(err) };
  }
  reply.ms = performance.now() - started;
  reply.leaked = await leakedAfter(fds);
  return reply;
}

const out = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);
let chain = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  chain = chain.then(async () => {
    const msg = JSON.parse(line);
    if (msg.op === 'start') return out({ start: true });
    out(await handle(msg));
  });
});
out({ ready: true, async: ASYNC, pid: process.pid });
