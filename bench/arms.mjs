// arms.mjs: four arms of one snapshot materialized at once vs one after another, each way in a fresh process; part of `npm run bench`, alone as `npm run bench:arms`.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { RamMounts, T5K, T50K, dropDir, median, quick, reps, sourceTree, work } from './measure.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const ARMS = 4;
/** Target: four at once take at most this share of four in series. */
export const ARMS_TARGET = 0.6;

/** Child mode: capture (or reuse), then ARMS materializes in series or at once, timed; prints JSON. */
async function child({ store, source, clones, parallel }) {
  const { SnapshotStore } = await import(join(root, 'dist/index.js'));
  const s = await SnapshotStore.open(store, { concurrency: ARMS });
  const snap = await s.capture({ source, copy: ['tree'], revision: 'bench' });
  // A harness that has run a round already: every worker thread started and its code warm (one round of
  // ARMS at once into scratch clones, removed before the clock), whichever way is timed next.
  const scratch = clones.map((c) => `${c}.warm`);
  await Promise.all(scratch.map((c) => snap.materialize(c, { createClone: true, fallbackBytes: 8 * 2 ** 30 })));
  for (const c of scratch) dropDir(c);
  execFileSync('sync');
  const t0 = performance.now();
  if (parallel) await Promise.all(clones.map((c) => snap.materialize(c, { createClone: true, fallbackBytes: 8 * 2 ** 30 })));
  else for (const c of clones) await snap.materialize(c, { createClone: true, fallbackBytes: 8 * 2 ** 30 });
  const ms = performance.now() - t0;
  await s.close();
  process.stdout.write(JSON.stringify({ ms }));
}



/** Medians of `reps` runs of each way (order rotating), on the tree below base. */
export async function benchArms(fs, base, tree, log = () => {}) {
  const source = sourceTree(base, tree);
  const store = join(base, 'arms-store');
  const run = (parallel, i) => {
    const clones = Array.from({ length: ARMS }, (_, k) => join(base, `arms-${i}-${parallel ? 'p' : 's'}-${k}`));
    const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify({ store, source, clones, parallel })], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    for (const c of clones) dropDir(c);
    return JSON.parse(out).ms;
  };
  // The same four copies made by `cp -a --reflink=auto`, one process each, in series and at once: what the
  // filesystem itself allows four writers cloning the same source files at once.
  const cp = async (parallel, i) => {
    const clones = Array.from({ length: ARMS }, (_, k) => join(base, `cp-${i}-${parallel ? 'p' : 's'}-${k}`));
    const one = (c) =>
      new Promise((resolve, reject) => {
        spawn('cp', ['-a', '--reflink=auto', join(source, 'tree'), c], { stdio: 'inherit' })
          .on('error', reject)
          .on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`cp exited ${code}`))));
      });
    execFileSync('sync');
    const t0 = performance.now();
    if (parallel) await Promise.all(clones.map(one));
    else for (const c of clones) await one(c);
    const ms = performance.now() - t0;
    for (const c of clones) dropDir(c);
    return ms;
  };
  const series = [];
  const atOnce = [];
  const cpSeries = [];
  const cpAtOnce = [];
  for (let i = 0; i < reps; i++) {
    const ways = i % 2 === 0 ? [false, true] : [true, false];
    for (const parallel of ways) (parallel ? atOnce : series).push(run(parallel, i));
    for (const parallel of ways) (parallel ? cpAtOnce : cpSeries).push(await cp(parallel, i));
    log(`arms: rep ${i + 1}/${reps}: series ${series.at(-1).toFixed(0)} ms, at once ${atOnce.at(-1).toFixed(0)} ms; cp series ${cpSeries.at(-1).toFixed(0)} ms, at once ${cpAtOnce.at(-1).toFixed(0)} ms`);
  }
  dropDir(store);
  const s = median(series);
  const p = median(atOnce);
  const cpRatio = median(cpAtOnce) / median(cpSeries);
  return { fs, tree: tree.name, arms: ARMS, series: s, atOnce: p, ratio: p / s, cpRatio, met: p / s <= ARMS_TARGET };
}

export function armsLine(r) {
  const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
  return `| ${r.fs} | ${r.tree} | ${r.arms} | ${fmt(r.series)} | ${fmt(r.atOnce)} | ${r.ratio.toFixed(2)}× | ${r.cpRatio.toFixed(2)}× | ≤ ${ARMS_TARGET}× | ${r.met ? 'met' : 'NOT MET'} |`;
}

export const ARMS_HEADER = ['| fs | tree | arms | in series | at once | at once / series | cp -a --reflink=auto: at once / series | target | |', '|---|---|---|---|---|---|---|---|---|'];

if (process.argv[2] === '--child') {
  await child(JSON.parse(process.argv[3]));
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const ram = new RamMounts();
  try {
    mkdirSync(work, { recursive: true });
    const rows = [];
    for (const fs of ['xfs', 'ext4']) rows.push(await benchArms(`${fs} (RAM)`, ram.make(fs, quick ? '3G' : '6G'), quick ? T5K : T50K, (l) => console.error(l)));
    console.log([...ARMS_HEADER, ...rows.map(armsLine)].join('\n'));
  } finally {
    ram.cleanup();
  }
}
