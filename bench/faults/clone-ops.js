// clone-ops.js: the faulted clone operations: materialize in each reflink mode, mount points, and an arm's diff and reset.
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { SnapshotStore } from '../../dist/index.js';
import { checkClone, checkStore, withoutStages } from './checks.js';
import { CLONE_TREE, COPY_ROOTS, captureOptions, makeSource, makeStore } from './fixtures.js';
import { firstDiff, forceRemove, outside, treeState, writeTree } from './tree.js';

const STAGE_PREFIX = '.treeseal-materialize-';
const MARKER = '.treeseal-materializing';
const MOUNT_TARGETS = ['node_modules', 'etc'];

/** A snapshot in a store on `fsKey`, and a clone template whose state before and after materialize is known. */
function prepareSnapshot(env, fsKey, reflink) {
  const base = env[fsKey];
  const source = makeSource(base);
  const { root, digests } = makeStore(base, [captureOptions(source)]);
  const shared = { base, storeRoot: root, digest: digests[0], reflink };
  const fx = newClone(shared);
  shared.before = treeState(fx.clone);
  const store = SnapshotStore.openSync(root);
  store.get(shared.digest).materializeSync(fx.clone, { reflink });
  shared.after = treeState(fx.clone);
  const other = newClone(shared);
  store.get(shared.digest).mountPoints(other.clone);
  shared.mounted = treeState(other.clone);
  store.closeSync();
  forceRemove(fx.parent);
  forceRemove(other.parent);
  return shared;
}

function newClone(shared) {
  const parent = mkdtempSync(join(shared.base, 'clone-'));
  const clone = join(parent, 'clone');
  mkdirSync(clone);
  writeTree(clone, CLONE_TREE);
  return { parent, clone };
}

/** An operation on a fresh clone; `ready(shared, fx)`, if given, makes the clone what the call expects first (with the real layer). */
function cloneOp(name, fsKey, reflink, act, check, ready) {
  return {
    name,
    fs: fsKey,
    prepare: (env) => prepareSnapshot(env, fsKey, reflink),
    setup(shared, layer) {
      // A fresh clone directory may get the inode of one removed before (tmpfs reuses them), and with it that
      // clone's ledger: dropped, so the call is the whole materialize this op faults (reset has its own rules).
      forceRemove(join(shared.storeRoot, 'clones'));
      const fx = newClone(shared);
      ready?.(shared, fx);
      fx.store = SnapshotStore.openSync(shared.storeRoot, { sys: layer.sys });
      fx.snap = fx.store.get(shared.digest);
      return fx;
    },
    run: (shared, fx) => act(shared, fx),
    check(shared, fx, outcome) {
      const out = check(shared, fx, outcome);
      out.push(...checkStore(shared.storeRoot, [shared.digest]));
      return out;
    },
    cleanup(fx) {
      fx.store.closeSync();
      forceRemove(fx.parent);
    },
  };
}

/** Then a clean materialize into the same clone must succeed and leave exactly the snapshot's roots. */
function recovers(shared, fx, what, fn, want) {
  const store = SnapshotStore.openSync(shared.storeRoot);
  try {
    fn(store.get(shared.digest));
  } catch (err) {
    return [`the next clean ${what} fails: ${err.code ?? ''} ${err.message}`];
  } finally {
    store.closeSync();
  }
  const diff = firstDiff(want, treeState(fx.clone));
  return diff === undefined ? [] : [`the next clean ${what} leaves a wrong clone: ${diff}`];
}

function materializeOp(name, fsKey, reflink) {
  return cloneOp(
    name,
    fsKey,
    reflink,
    (shared, fx) => fx.snap.materializeSync(fx.clone, { reflink }),
    (shared, fx, outcome) => {
      const out = [];
      if (outcome.ok) {
        // A marker the call could not remove once the roots were in is said as what it left (stageLeft).
        const said = outcome.value.stageLeft?.path === MARKER;
        const now = withoutStages(treeState(fx.clone));
        if (said) now.delete(MARKER);
        const diff = firstDiff(shared.after, now);
        if (diff !== undefined) out.push(`materialize succeeded but the clone differs: ${diff}`);
      } else out.push(...checkClone(fx.clone, COPY_ROOTS, shared.before, shared.after));
      // A stage whose removal was refused may stay until the next materialize sweeps it.
      out.push(...recovers(shared, fx, 'materialize', (snap) => snap.materializeSync(fx.clone, { reflink }), shared.after));
      const stages = [...readdirSync(fx.parent), ...readdirSync(fx.clone)].filter((n) => n.startsWith(STAGE_PREFIX));
      if (stages.length > 0) out.push(`materialize stage left after the next materialize: ${stages.join(', ')}`);
      return out;
    },
  );
}

/** What an agent leaves in a materialized arm: a file rewritten, one added, one removed, a directory added. */
function agentWrites(clone) {
  writeFileSync(join(clone, 'src/z.txt'), 'Z, by the agent');
  writeFileSync(join(clone, 'src/new.txt'), 'added by the agent');
  rmSync(join(clone, 'src/tool.sh'));
  mkdirSync(join(clone, 'src/a/added/deeper'), { recursive: true });
  writeFileSync(join(clone, 'src/a/added/deeper/f'), 'f');
}

/**
 * An arm: a clone materialized (with its ledger, by the real syscall layer) and then written
 * by an agent; the call under test runs on it through the faulted layer.
 */
function armOp(name, act, check) {
  return cloneOp(name, 'shm', 'auto', act, check, (shared, fx) => {
    const clean = SnapshotStore.openSync(shared.storeRoot);
    clean.get(shared.digest).materializeSync(fx.clone);
    clean.closeSync();
    agentWrites(fx.clone);
    fx.written = treeState(fx.clone);
  });
}

/**
 * After a faulted reset: nothing outside the copy roots touched (but its stage, whose removal
 * may have been refused, as materialize's may), and the next clean reset makes the roots
 * exactly the snapshot's and sweeps any stage left.
 */
function resetChecks(shared, fx, outcome) {
  const out = [];
  const now = withoutStages(treeState(fx.clone));
  const rest = firstDiff(outside(fx.written, COPY_ROOTS), outside(now, COPY_ROOTS));
  if (rest !== undefined) out.push(`reset changed the clone outside its roots: ${rest}`);
  if (outcome.ok) {
    const diff = firstDiff(shared.after, now);
    if (diff !== undefined) out.push(`reset succeeded but the clone differs: ${diff}`);
  }
  out.push(...recovers(shared, fx, 'reset', (snap) => snap.resetSync(fx.clone), shared.after));
  const stages = readdirSync(fx.clone).filter((n) => n.startsWith(STAGE_PREFIX));
  if (stages.length > 0) out.push(`reset stage left after the next reset: ${stages.join(', ')}`);
  return out;
}

export const CLONE_OPS = [
  materializeOp('materialize auto', 'shm', 'auto'),
  materializeOp('materialize never', 'shm', 'never'),
  materializeOp('materialize auto (xfs)', 'xfs', 'auto'),
  materializeOp('materialize always (xfs)', 'xfs', 'always'),
  cloneOp(
    'mountPoints',
    'shm',
    'auto',
    (shared, fx) => fx.snap.mountPoints(fx.clone).length,
    (shared, fx, outcome) => {
      const now = treeState(fx.clone);
      if (outcome.ok) {
        const diff = firstDiff(shared.mounted, now);
        return diff === undefined ? [] : [`mount points made but the clone differs: ${diff}`];
      }
      const diff = firstDiff(outside(shared.before, MOUNT_TARGETS), outside(now, MOUNT_TARGETS));
      const out = diff === undefined ? [] : [`clone changed outside the mount targets: ${diff}`];
      out.push(...recovers(shared, fx, 'mountPoints', (snap) => snap.mountPoints(fx.clone), shared.mounted));
      return out;
    },
  ),
  armOp(
    'diff',
    (shared, fx) => fx.snap.diffSync(fx.clone, { all: true }).changed.length,
    (shared, fx, outcome) => {
      const out = [];
      const diff = firstDiff(fx.written, treeState(fx.clone));
      if (diff !== undefined) out.push(`diff changed the clone: ${diff}`);
      if (outcome.ok && outcome.value === 0) out.push('diff found nothing changed in an arm an agent wrote');
      return out;
    },
  ),
  armOp('reset', (shared, fx) => fx.snap.resetSync(fx.clone).changed.length, resetChecks),
];
