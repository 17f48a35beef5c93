// store-ops.js: the faulted store operations: capture (with copy roots and mounts), recapture, republish, open, gc, remove, get, verify.
import { SnapshotStore } from '../../dist/index.js';
import { checkStore } from './checks.js';
import { SETTLED, captureOptions, makeSource, makeStore, otherOptions, partialOptions, plantStale } from './fixtures.js';
import { forceRemove } from './tree.js';

/**
 * capture into a store that already holds another snapshot (`first`, captured with the
 * stat cache on); `republish`: the same one is already published.
 */
function captureOp(name, fsKey, republish, first = otherOptions) {
  return {
    name,
    fs: fsKey,
    prepare(env) {
      const base = env[fsKey];
      const source = makeSource(base);
      const { root, digests } = makeStore(base, [captureOptions(source)]);
      forceRemove(root);
      return { base, source, digest: digests[0] };
    },
    setup(shared, layer) {
      const defs = [first(shared.source), ...(republish ? [captureOptions(shared.source)] : [])];
      const { root, digests } = makeStore(shared.base, defs);
      const store = SnapshotStore.openSync(root, { ...SETTLED, sys: layer.sys });
      return { root, store, mustHave: digests };
    },
    run(shared, fx) {
      return fx.store.captureSync(captureOptions(shared.source)).digest;
    },
    check(shared, fx, outcome) {
      const out = [];
      if (outcome.ok && outcome.value !== shared.digest) out.push(`capture returned another digest: ${outcome.value}`);
      out.push(...checkStore(fx.root, outcome.ok ? [...fx.mustHave, shared.digest] : fx.mustHave));
      return out;
    },
    cleanup(fx) {
      forceRemove(fx.root);
    },
  };
}

/** An operation on a store holding two published snapshots (`main` and `other`), through a faulted store. */
function storeOp(name, { stale = false, openFaulted = false, loaded = false, act, mustKeep }) {
  return {
    name,
    fs: 'shm',
    prepare(env) {
      return { base: env.shm, source: makeSource(env.shm) };
    },
    setup(shared, layer) {
      const { root, digests } = makeStore(shared.base, [captureOptions(shared.source), otherOptions(shared.source)]);
      const store = openFaulted ? undefined : SnapshotStore.openSync(root, { sys: layer.sys });
      if (stale) plantStale(root);
      const snap = loaded ? store.get(digests[0]) : undefined;
      return { root, store, snap, layer, main: digests[0], other: digests[1] };
    },
    run(shared, fx) {
      return act(fx);
    },
    check(shared, fx) {
      return checkStore(fx.root, mustKeep(fx));
    },
    cleanup(fx) {
      fx.store?.closeSync();
      forceRemove(fx.root);
    },
  };
}

export const STORE_OPS = [
  captureOp('capture', 'shm', false),
  captureOp('capture (xfs, reflink)', 'xfs', false),
  captureOp('capture (republish)', 'shm', true),
  // Every file but one is the stat cache's: a deferred build links the rest from the stored snapshot and rewrites the cache.
  captureOp('recapture (stat cache, xfs)', 'xfs', false, partialOptions),
  storeOp('store open', {
    stale: true,
    openFaulted: true,
    act: (fx) => SnapshotStore.openSync(fx.root, { sys: fx.layer.sys }).closeSync(),
    mustKeep: (fx) => [fx.main, fx.other],
  }),
  storeOp('store gc', { stale: true, act: (fx) => fx.store.gc(), mustKeep: (fx) => [fx.main, fx.other] }),
  storeOp('store remove', { act: (fx) => fx.store.remove(fx.main), mustKeep: (fx) => [fx.other] }),
  storeOp('store prune', { act: (fx) => fx.store.prune({ keepLast: 1 }).removed.length, mustKeep: (fx) => [fx.other] }),
  storeOp('store usage', { act: (fx) => fx.store.usage().length, mustKeep: (fx) => [fx.main, fx.other] }),
  storeOp('lease', {
    loaded: true,
    act: (fx) => {
      const lease = fx.snap.lease();
      lease.release();
      return fx.store.remove(fx.main);
    },
    mustKeep: (fx) => [fx.other],
  }),
  storeOp('store get', { act: (fx) => fx.store.get(fx.main).digest, mustKeep: (fx) => [fx.main, fx.other] }),
  storeOp('verify', { loaded: true, act: (fx) => fx.snap.verifySync(), mustKeep: (fx) => [fx.main, fx.other] }),
];
