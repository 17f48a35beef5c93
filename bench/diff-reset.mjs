// diff-reset.mjs: an arm's diff, reset and result capture against `find`, a fresh materialize and a capture trusting nothing, each call in a fresh process, on RAM-backed XFS; `npm run bench:diff-reset`.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { RamMounts, T5K, T50K, dropDir, median, quick, reps, sourceTree, work } from './measure.js';

const root = fileURLToPath(new URL('..', import.meta.url));
/** Targets (issue: the arm lifecycle). */
export const DIFF_VS_FIND = 2;
export const RESET_VS_MATERIALIZE = 0.15;
export const RESET_VS_FIND = 3;
/** The capture of an arm after a few changes, against one that trusts nothing (as recapture's target). */
export const ARM_CAPTURE_VS_FULL = 0.2;
const CHANGED = 10;
const FIND_FORMAT = '%i %s %T@ %C@\n';

/** Child mode: one call timed in this fresh process (the async API, as a harness calls it); prints JSON. */
async function child({ store, source, clone, op }) {
  const { SnapshotStore } = await import(join(root, 'dist/index.js'));
  const s = await SnapshotStore.open(store);
  const snap = await s.capture({ source, copy: ['tree'], revision: 'bench' });
  const t0 = performance.now();
  let report;
  if (op === 'materialize') report = await snap.materialize(clone, { createClone: true, fallbackBytes: 8 * 2 ** 30 });
  else if (op === 'diff') report = await snap.diff(clone);
  else if (op === 'diffSync') report = snap.diffSync(clone);
  else if (op === 'reset') report = await snap.reset(clone, { fallbackBytes: 8 * 2 ** 30 });
  else if (op === 'check') report = await snap.checkClone(clone);
  // The arm's result kept: by its ledger, or read whole (statCache off).
  else if (op === 'captureArm' || op === 'captureArmFull') report = (await s.capture({ source: clone, copy: ['tree'], statCache: op === 'captureArm' })).captureReport;
  const ms = performance.now() - t0;
  await s.close();
  const { added, removed, changed, ok, method, reset, files, reusedFiles } = report;
  process.stdout.write(JSON.stringify({ ms, digest: snap.digest, ok, method, reset, files, reusedFiles, added: added?.length, removed: removed?.length, changed: changed?.length }));
}


function runChild(args) {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify(args)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  return JSON.parse(out);
}

/** `treeseal <args>` as a user runs it (the bin, a whole process); its wall time, and its exit status checked. */
function timeCommand(args, status = 0) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [join(root, 'dist/cli.js'), ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== status) throw new Error(`treeseal ${args.join(' ')} exited ${r.status}`);
  return performance.now() - t0;
}

/** find over the clone as the issue names it, output discarded; its wall time (a fresh process too). */
function timeFind(clone) {
  const t0 = performance.now();
  const r = spawnSync('find', [clone, '-printf', FIND_FORMAT], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error('find failed');
  return performance.now() - t0;
}

/** Every regular file below dir (for picking the ones an agent changes). */
function filesBelow(dir, out = [], limit = Infinity) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    if (out.length >= limit) break;
    const p = join(dir, e.name);
    if (e.isDirectory()) filesBelow(p, out, limit);
    else if (e.isFile()) out.push(p);
  }
  return out;
}


export function benchDiffReset(fs, base, tree, log = () => {}) {
  const source = sourceTree(base, tree);
  const store = join(base, 'diff-reset-store');
  const clone = join(base, 'diff-reset-arm');
  const materialize = [];
  let digest;
  for (let i = 0; i < reps; i++) {
    const target = i === 0 ? clone : `${clone}-${i}`;
    execFileSync('sync');
    const m = runChild({ store, source, clone: target, op: 'materialize' });
    digest = m.digest;
    materialize.push(m.ms);
    if (i > 0) dropDir(target);
    log(`diff-reset: materialize ${materialize.at(-1).toFixed(0)} ms`);
  }
  const files = filesBelow(join(clone, 'tree'));
  const find = [];
  const diff = [];
  const diffSync = [];
  const diffCommand = [];
  for (let i = 0; i < reps; i++) {
    find.push(timeFind(clone));
    const d = runChild({ store, source, clone, op: 'diff' });
    if (!d.ok || d.method !== 'ledger') throw new Error(`diff of an untouched arm: ${JSON.stringify(d)}`);
    diff.push(d.ms);
    diffSync.push(runChild({ store, source, clone, op: 'diffSync' }).ms);
    diffCommand.push(timeCommand(['diff', '--store', store, digest, clone]));
    log(`diff-reset: find ${find.at(-1).toFixed(0)} ms, diff ${diff.at(-1).toFixed(0)} ms (sync ${diffSync.at(-1).toFixed(0)} ms, command ${diffCommand.at(-1).toFixed(0)} ms)`);
  }
  const reset = [];
  for (let i = 0; i < reps; i++) {
    for (let k = 0; k < CHANGED; k++) writeFileSync(files[(i * CHANGED + k * 997) % files.length], `changed by the agent ${i} ${k}\n`);
    execFileSync('sync');
    const r = runChild({ store, source, clone, op: 'reset' });
    if (r.method !== 'reset' || r.changed !== CHANGED || r.files !== CHANGED) throw new Error(`reset after ${CHANGED} changes: ${JSON.stringify(r)}`);
    reset.push(r.ms);
    log(`diff-reset: reset ${reset.at(-1).toFixed(0)} ms`);
  }
  // The same reset by the command (a whole process: it loads and proves the manifest the library call above had in hand).
  const resetCommand = [];
  for (let i = 0; i < reps; i++) {
    for (let k = 0; k < CHANGED; k++) writeFileSync(files[(i * CHANGED + k * 983 + 3) % files.length], `changed again ${i} ${k}\n`);
    execFileSync('sync');
    resetCommand.push(timeCommand(['reset', '--store', store, digest, clone]));
    log(`diff-reset: treeseal reset ${resetCommand.at(-1).toFixed(0)} ms`);
  }
  const check = runChild({ store, source, clone, op: 'check' });
  if (!check.ok) throw new Error(`reset arm does not verify: ${JSON.stringify(check)}`);
  const armCapture = [];
  const armFull = [];
  for (let i = 0; i < reps; i++) {
    for (let k = 0; k < CHANGED; k++) writeFileSync(files[(i * CHANGED + k * 991 + 7) % files.length], `the agent's result ${i} ${k}\n`);
    execFileSync('sync');
    const byLedger = runChild({ store, source, clone, op: 'captureArm' });
    if (byLedger.reusedFiles !== files.length - CHANGED) throw new Error(`capture of the arm after ${CHANGED} changes: ${JSON.stringify(byLedger)}`);
    armCapture.push(byLedger.ms);
    armFull.push(runChild({ store, source, clone, op: 'captureArmFull' }).ms);
    log(`diff-reset: capture of the arm ${armCapture.at(-1).toFixed(0)} ms (trusting nothing ${armFull.at(-1).toFixed(0)} ms)`);
    // The next task starts from the snapshot again.
    runChild({ store, source, clone, op: 'reset' });
  }
  dropDir(clone);
  dropDir(store);
  const m = {
    materialize: median(materialize),
    find: median(find),
    diff: median(diff),
    diffSync: median(diffSync),
    diffCommand: median(diffCommand),
    reset: median(reset),
    resetCommand: median(resetCommand),
    armCapture: median(armCapture),
    armFull: median(armFull),
  };
  return {
    fs,
    tree: tree.name,
    files: files.length,
    ...m,
    diffMet: m.diff <= DIFF_VS_FIND * m.find,
    resetVsMaterializeMet: m.reset <= RESET_VS_MATERIALIZE * m.materialize,
    resetVsFindMet: m.reset <= RESET_VS_FIND * m.find,
    armCaptureMet: m.armCapture <= ARM_CAPTURE_VS_FULL * m.armFull,
  };
}

const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const verdict = (met) => (met ? 'met' : 'NOT MET');

export function diffResetLines(r) {
  return [
    `| ${r.fs} | ${r.tree} | diff (async, fresh process) vs find | ${fmt(r.diff)} (sync ${fmt(r.diffSync)}) | ${fmt(r.find)} | ${(r.diff / r.find).toFixed(2)}× | ≤ ${DIFF_VS_FIND}× | ${verdict(r.diffMet)} |`,
    `| ${r.fs} | ${r.tree} | reset after ${CHANGED} changed files vs fresh materialize | ${fmt(r.reset)} | ${fmt(r.materialize)} | ${(r.reset / r.materialize).toFixed(3)}× | ≤ ${RESET_VS_MATERIALIZE}× | ${verdict(r.resetVsMaterializeMet)} |`,
    `| ${r.fs} | ${r.tree} | reset after ${CHANGED} changed files vs find | ${fmt(r.reset)} | ${fmt(r.find)} | ${(r.reset / r.find).toFixed(2)}× | ≤ ${RESET_VS_FIND}× | ${verdict(r.resetVsFindMet)} |`,
    `| ${r.fs} | ${r.tree} | \`treeseal diff <digest> <clone>\` (whole process, manifest proven) vs find | ${fmt(r.diffCommand)} | ${fmt(r.find)} | ${(r.diffCommand / r.find).toFixed(2)}× | — | |`,
    `| ${r.fs} | ${r.tree} | \`treeseal reset <digest> <clone>\` after ${CHANGED} changed files (whole process) vs find | ${fmt(r.resetCommand)} | ${fmt(r.find)} | ${(r.resetCommand / r.find).toFixed(2)}× | — | |`,
    `| ${r.fs} | ${r.tree} | capture of the arm after ${CHANGED} changed files (by its ledger) vs one trusting nothing | ${fmt(r.armCapture)} | ${fmt(r.armFull)} | ${(r.armCapture / r.armFull).toFixed(3)}× | ≤ ${ARM_CAPTURE_VS_FULL}× | ${verdict(r.armCaptureMet)} |`,
  ];
}

/** The rows as `npm run bench` checks them: [name, met, figure]. */
export function diffResetChecks(r) {
  const x = (a, b) => `${(a / b).toFixed(3)}×`;
  return [
    [`diff of an untouched arm of the ${r.tree} tree ≤ ${DIFF_VS_FIND}× find (${r.fs})`, r.diffMet, `${x(r.diff, r.find)} (${fmt(r.diff)} vs ${fmt(r.find)})`],
    [`reset after ${CHANGED} changes ≤ ${RESET_VS_MATERIALIZE}× a fresh materialize (${r.fs})`, r.resetVsMaterializeMet, `${x(r.reset, r.materialize)} (${fmt(r.reset)} vs ${fmt(r.materialize)})`],
    [`reset after ${CHANGED} changes ≤ ${RESET_VS_FIND}× find (${r.fs})`, r.resetVsFindMet, `${x(r.reset, r.find)} (${fmt(r.reset)} vs ${fmt(r.find)})`],
    [`capture of the arm after ${CHANGED} changes ≤ ${ARM_CAPTURE_VS_FULL}× one trusting nothing (${r.fs})`, r.armCaptureMet, `${x(r.armCapture, r.armFull)} (${fmt(r.armCapture)} vs ${fmt(r.armFull)})`],
  ];
}

export const DIFF_RESET_HEADER = ['| fs | tree | what | treeseal | baseline | ratio | target | |', '|---|---|---|---|---|---|---|---|'];

if (process.argv[2] === '--child') {
  await child(JSON.parse(process.argv[3]));
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const ram = new RamMounts();
  try {
    mkdirSync(work, { recursive: true });
    const r = benchDiffReset('xfs (RAM)', ram.make('xfs', quick ? '3G' : '6G'), quick ? T5K : T50K, (l) => console.error(l));
    console.log([...DIFF_RESET_HEADER, ...diffResetLines(r)].join('\n'));
  } finally {
    ram.cleanup();
  }
}
