// tool-ops.js: the faulted tools: freeze, thaw, readStable, writeFrozenFile, stageFiles and a stage's verify and close.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import { freezeSync, readStableSync, stageFilesSync, thawSync, writeFrozenFileSync } from '../../dist/index.js';
import { freshDir } from './fixtures.js';
import { firstDiff, forceRemove, treeState } from './tree.js';

const TREE = {
  'a/b/c.txt': 'c',
  'a/run.sh': { mode: 0o755, data: '#!/bin/sh\n' },
  'a/empty': null,
  'top.txt': 'top',
  'link': { link: 'a/b/c.txt' },
};
const BYTES = Buffer.from('frozen bytes\n');
const STAGED = [
  { target: 'one.txt', bytes: Buffer.from('one') },
  { target: 'deep/er/two.txt', bytes: Buffer.from('two') },
];

/** Kinds and bytes without modes: what freeze and thaw must never change. */
function contents(state) {
  return new Map([...state].map(([k, v]) => [k, v.replace(/^(dir|file) \d+/, '$1')]));
}

/** freeze or thaw: bytes never change, and a clean rerun gives exactly the modes of a clean run. */
function modesOp(name, apply, start) {
  return {
    name,
    fs: 'shm',
    prepare(env) {
      const { parent, dir } = freshDir(env.shm, 'tree', TREE);
      if (start !== undefined) start(dir);
      const before = treeState(dir);
      apply(dir);
      const after = treeState(dir);
      forceRemove(parent);
      return { base: env.shm, before, after };
    },
    setup(shared, layer) {
      const fx = { ...freshDir(shared.base, 'tree', TREE), sys: layer.sys };
      if (start !== undefined) start(fx.dir);
      return fx;
    },
    run: (shared, fx) => apply(fx.dir, { sys: fx.sys }),
    check(shared, fx, outcome) {
      const now = treeState(fx.dir);
      if (outcome.ok) return firstDiff(shared.after, now) === undefined ? [] : [`${name} succeeded with wrong modes: ${firstDiff(shared.after, now)}`];
      const out = [];
      const diff = firstDiff(contents(shared.before), contents(now));
      if (diff !== undefined) out.push(`${name} changed contents: ${diff}`);
      apply(fx.dir);
      const again = firstDiff(shared.after, treeState(fx.dir));
      if (again !== undefined) out.push(`the next clean ${name} leaves wrong modes: ${again}`);
      return out;
    },
    cleanup: (fx) => forceRemove(fx.parent),
  };
}

/** An operation on a plain directory `dir` (fresh per run). */
function dirOp(name, { setup = () => ({}), run, check }) {
  return {
    name,
    fs: 'shm',
    prepare: (env) => ({ base: env.shm }),
    setup(shared, layer) {
      const fx = { ...freshDir(shared.base, 'dir'), sys: layer.sys };
      return { ...fx, ...setup(fx) };
    },
    run: (shared, fx) => run(fx),
    check: (shared, fx, outcome) => check(fx, outcome),
    cleanup(fx) {
      fx.stage?.close();
      forceRemove(fx.parent);
    },
  };
}

/** Whatever happened, once the stage is closed its parent is empty. */
function stageGone(fx) {
  try {
    fx.stage?.close();
  } catch (err) {
    return [`stage close after the fault fails: ${err.code ?? ''} ${err.message}`];
  }
  const left = readdirSync(fx.dir);
  return left.length === 0 ? [] : [`stage left in its parent: ${left.join(', ')}`];
}

export const TOOL_OPS = [
  modesOp('freeze', (dir, o) => freezeSync(dir, o)),
  modesOp('thaw', (dir, o) => thawSync(dir, o), (dir) => freezeSync(dir)),
  dirOp('readStable', {
    setup: (fx) => {
      writeFrozenFileSync(join(fx.dir, 'f'), BYTES);
      return {};
    },
    run: (fx) => readStableSync(join(fx.dir, 'f'), { maxBytes: 1024, sys: fx.sys }).bytes.toString(),
    check: (fx, outcome) => (outcome.ok && outcome.value !== BYTES.toString() ? [`readStable returned other bytes`] : []),
  }),
  dirOp('writeFrozenFile', {
    run: (fx) => writeFrozenFileSync(join(fx.dir, 'f'), BYTES, { sys: fx.sys }),
    check: (fx, outcome) => {
      const state = treeState(fx.dir);
      const want = outcome.ok ? `file 444 ${'ok'}` : undefined;
      if (!outcome.ok) return state.size === 0 ? [] : [`partial file left: ${[...state.keys()].join(', ')}`];
      const got = state.get('f') ?? 'missing';
      return got.startsWith('file 444 ') && state.size === 1 ? [] : [`writeFrozenFile succeeded but left ${got} (${want})`];
    },
  }),
  dirOp('stageFiles', {
    run: (fx) => {
      fx.stage = stageFilesSync(fx.dir, STAGED, { sys: fx.sys });
      return fx.stage.files.length;
    },
    check: (fx) => stageGone(fx),
  }),
  dirOp('stage verify', {
    setup: (fx) => ({ stage: stageFilesSync(fx.dir, STAGED, { sys: fx.sys }) }),
    run: (fx) => fx.stage.verify(),
    check: (fx) => stageGone(fx),
  }),
  dirOp('stage close', {
    setup: (fx) => ({ stage: stageFilesSync(fx.dir, STAGED, { sys: fx.sys }) }),
    run: (fx) => fx.stage.close(),
    check: (fx) => stageGone(fx),
  }),
];
