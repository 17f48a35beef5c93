// run.js: `npm run bench`: treeseal as a harness calls it (fresh process, async API) against `cp -a --reflink=auto` and the seed's Python cache, every speed target with met / NOT MET; writes bench/RESULTS.md.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { RamMounts, T5K, T50K, TREES, benchTree, extras, quick, reps, seedRunner, sourceTree, work } from './measure.js';
import { benchRecapture, recaptureChecks, recaptureLine } from './recapture.mjs';
import { ARMS_TARGET, benchArms } from './arms.mjs';
import { DIFF_RESET_HEADER, benchDiffReset, diffResetChecks, diffResetLines } from './diff-reset.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const fmt = (ms) => (Number.isNaN(ms) ? '—' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const x = (a, b) => `${(a / b).toFixed(2)}×`;
/** A harness's capture: the async open (which starts the worker thread) and the capture call, medians summed. */
const opened = (r) => r.open + r.capture;
/** TREESEAL_BENCH_FS=btrfs[,xfs,ext4]: only those filesystems' rows (RESULTS.md is not written). */
const only = process.env.TREESEAL_BENCH_FS === undefined || process.env.TREESEAL_BENCH_FS === '' ? undefined : process.env.TREESEAL_BENCH_FS.split(',');

async function measureAll(log) {
  const ram = new RamMounts();
  const cleanup = () => ram.cleanup();
  process.once('SIGINT', () => (cleanup(), process.exit(130)));
  process.once('SIGTERM', () => (cleanup(), process.exit(143)));
  const rows = [];
  try {
    mkdirSync(work, { recursive: true });
    const timed = seedRunner(work);
    const row = (r) => (rows.push(r), log(`bench: ${JSON.stringify(r)}`));
    if (only !== undefined) {
      // TREESEAL_BENCH_FS=btrfs (or xfs, ext4): those rows alone, and their targets.
      for (const fs of only) {
        const base = ram.make(fs, quick ? '3G' : '6G');
        for (const tree of TREES) {
          log(`bench: ${fs} (RAM) ${tree.name} (${reps} reps)…`);
          row(benchTree(`${fs} (RAM)`, base, tree, timed));
        }
      }
      return { rows, extra: undefined };
    }
    const xfs = ram.make('xfs', quick ? '3G' : '6G');
    const ext4 = ram.make('ext4', quick ? '3G' : '6G');
    const btrfs = ram.make('btrfs', quick ? '3G' : '6G');
    for (const [fs, base] of [['xfs (RAM)', xfs], ['ext4 (RAM)', ext4], ['btrfs (RAM)', btrfs]]) {
      for (const tree of TREES) {
        log(`bench: ${fs} ${tree.name} (${reps} reps)…`);
        row(benchTree(fs, base, tree, timed));
      }
    }
    log('bench: peak RSS, verify threads, ephemeral close…');
    const extra = extras(xfs);
    log(`bench: ${JSON.stringify(extra)}`);
    // The recapture rows (issue 13's targets) rewrite files of the 50k tree (the 5k tree's in a quick run): after every row that reads it.
    extra.recapture = [];
    for (const [fs, base] of [['xfs (RAM)', xfs], ['ext4 (RAM)', ext4]]) {
      log(`bench: recapture ${fs} (${reps} reps)…`);
      extra.recapture.push(benchRecapture(fs, sourceTree(base, quick ? T5K : T50K), join(base, 'recapture'), log));
    }
    extra.arms = [];
    for (const [fs, base] of [['xfs (RAM)', xfs], ['ext4 (RAM)', ext4]]) {
      log(`bench: four arms at once vs in series, ${fs} (${reps} reps)…`);
      extra.arms.push(await benchArms(fs, base, quick ? T5K : T50K, log));
    }
    log(`bench: an arm's diff, reset and result capture, xfs (RAM) (${reps} reps)…`);
    extra.diffReset = benchDiffReset('xfs (RAM)', xfs, quick ? T5K : T50K, log);
    // Last: the throttled real disk is slow to settle and to delete on.
    log('bench: root fs (real disk) 5k+64MiB…');
    const rootBase = join(work, 'rootfs');
    mkdirSync(rootBase, { recursive: true });
    row(benchTree('root fs (ext4, real disk)', rootBase, T5K, timed));
    return { rows, extra };
  } finally {
    cleanup();
  }
}

function table(rows) {
  const out = [
    '| fs | tree | cp -a --reflink=auto | open + capture (async) | materialize (async) | seed capture | seed materialize | capture/cp | materialize/cp | seed/capture | seed/materialize | capture sync | materialize sync | of which open |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.fs} | ${r.tree} | ${fmt(r.cp)} | ${fmt(opened(r))} | ${fmt(r.materialize)} | ${fmt(r.seedCapture)} | ${fmt(r.seedMaterialize)} | ${x(opened(r), r.cp)} | ${x(r.materialize, r.cp)} | ${x(r.seedCapture, opened(r))} | ${x(r.seedMaterialize, r.materialize)} | ${fmt(r.captureSync)} | ${fmt(r.materializeSync)} | ${fmt(r.open)} |`,
    );
  }
  return out;
}

function rowTargets(r) {
  const c = [];
  const cap = opened(r);
  const add = (name, ok, figure) => c.push([`${r.fs} ${r.tree}: ${name}`, ok, figure]);
  if (r.fs.startsWith('xfs')) {
    add('capture (fresh process: async open + first capture) ≤ 1.3× cp', cap <= 1.3 * r.cp, x(cap, r.cp));
    add('capture ≥ 2× faster than the seed', r.seedCapture >= 2 * cap, x(r.seedCapture, cap));
    add('materialize ≤ 1.1× cp', r.materialize <= 1.1 * r.cp, x(r.materialize, r.cp));
    add('materialize ≥ 4× faster than the seed', r.seedMaterialize >= 4 * r.materialize, x(r.seedMaterialize, r.materialize));
    add(`every file reflinked`, r.reflinked === r.files, `${r.reflinked}/${r.files}`);
  } else if (r.fs.startsWith('btrfs')) {
    // Each directory copy root is one snapshot of its subvolume in the store: O(1) in the tree's size.
    if (r.tree === T50K.name) add('materialize ≤ 0.1× cp (one snapshot per copy root)', r.materialize <= 0.1 * r.cp, x(r.materialize, r.cp));
    add('every copy root snapshotted', r.snapshotted >= 1, `${r.snapshotted} of 1`);
  } else if (r.fs.startsWith('ext4')) {
    add('capture (fresh process: async open + first capture) ≤ 1.5× cp', cap <= 1.5 * r.cp, x(cap, r.cp));
    add('materialize ≤ 1.2× cp', r.materialize <= 1.2 * r.cp, x(r.materialize, r.cp));
    add('capture ≥ 2× faster than the seed', r.seedCapture >= 2 * cap, x(r.seedCapture, cap));
    add('materialize ≥ 2× faster than the seed', r.seedMaterialize >= 2 * r.materialize, x(r.seedMaterialize, r.materialize));
  }
  if (r.cli !== undefined && !r.fs.startsWith('root')) {
    add('CLI capture (whole process) ≤ 1.4× cp', r.cli.capture <= 1.4 * r.cp, `${x(r.cli.capture, r.cp)} (${fmt(r.cli.capture)})`);
    add('CLI materialize (whole process) ≤ 1.3× cp', r.cli.materialize <= 1.3 * r.cp, `${x(r.cli.materialize, r.cp)} (${fmt(r.cli.materialize)})`);
    add('CLI ls of a store of one snapshot ≤ 100 ms', r.cli.ls <= 100, `${fmt(r.cli.ls)} (--version ${fmt(r.cli.version)})`);
  }
  add("manifest digest equals the seed's", r.digestMatch, r.digestMatch ? 'equal' : 'differs');
  return c;
}

function targets(rows, e) {
  const c = rows.flatMap(rowTargets);
  if (e === undefined) return c;
  const ram = rows.filter((r) => !r.fs.startsWith('root'));
  const paired = ram.filter((r) => !Number.isNaN(r.captureOverhead));
  const worstCap = Math.max(...paired.map((r) => r.captureOverhead));
  const worstMat = Math.max(...paired.map((r) => r.materializeOverhead));
  c.push(['async overhead per capture call ≤ 15 ms (worst row)', worstCap <= 15, `${worstCap.toFixed(1)} ms`]);
  c.push(['async overhead per materialize call ≤ 15 ms (worst row)', worstMat <= 15, `${worstMat.toFixed(1)} ms`]);
  const p99 = Math.max(...ram.map((r) => r.loopP99));
  c.push(['event-loop p99 delay ≤ 20 ms during async capture (worst row)', p99 <= 20, `${p99.toFixed(1)} ms`]);
  c.push(['peak RSS ≤ 150 MB capturing a 1 GiB file', e.rss1g <= 150, `${e.rss1g.toFixed(0)} MB`]);
  c.push([`peak RSS ≤ 80 MB capturing the ${e.rssSmall.tree} tree`, e.rssSmall.maxRssMB <= 80, `${e.rssSmall.maxRssMB.toFixed(0)} MB (${e.rssSmall.entries} entries)`]);
  c.push([`RSS growth ≤ 300 B/entry (empty files, ${e.rssSyntheticStart.entries} → ${e.rssSynthetic.entries} entries)`, e.growth <= 300, `${e.growth.toFixed(0)} B/entry (${e.rssSyntheticStart.maxRssMB.toFixed(0)} MB → ${e.rssSynthetic.maxRssMB.toFixed(0)} MB)`]);
  const v = e.verify.pooled / e.verify.single;
  c.push(['verify of the 5k tree ≤ 0.6× single-threaded', v <= 0.6, `${x(e.verify.pooled, e.verify.single)} (${fmt(e.verify.pooled)} vs ${fmt(e.verify.single)})`]);
  const cl = e.close.close / e.close.capture;
  c.push(['ephemeral close < 1/5 of its capture (5k tree, xfs RAM)', cl < 0.2, `${x(e.close.close, e.close.capture)} (${fmt(e.close.close)} vs ${fmt(e.close.capture)})`]);
  for (const r of e.recapture) c.push(...recaptureChecks(r));
  for (const a of e.arms) {
    const cp = `; 4 cp -a --reflink=auto at once ${a.cpRatio.toFixed(2)}× in series`;
    c.push([`${a.arms} arms of the ${a.tree} tree materialized at once ≤ ${ARMS_TARGET}× in series (${a.fs})`, a.met, `${a.ratio.toFixed(2)}× (${fmt(a.atOnce)} vs ${fmt(a.series)}${cp})`]);
  }
  c.push(...diffResetChecks(e.diffReset));
  return c;
}

function report(rows, e, load) {
  const lines = [];
  lines.push(`treeseal bench — ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown cpu'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, medians of ${reps}${quick ? ' (quick)' : ''}`);
  lines.push(`load average before / after: ${load.before.map((n) => n.toFixed(1)).join(' ')} / ${load.after.map((n) => n.toFixed(1)).join(' ')}`);
  lines.push('');
  lines.push(...table(rows));
  lines.push('');
  lines.push('the treeseal command as a user runs it, each a whole process (5k tree): capture into a new store, materialize into a new clone, ls of that store, --version:');
  for (const r of rows.filter((r) => r.cli !== undefined)) lines.push(`  ${r.fs} ${r.tree}: capture ${fmt(r.cli.capture)}, materialize ${fmt(r.cli.materialize)}, ls ${fmt(r.cli.ls)}, --version ${fmt(r.cli.version)} (cp ${fmt(r.cp)})`);
  lines.push('async overhead per call (async minus sync of the same call in the same process, order alternating; 5k tree only):');
  const ms = (v) => (Number.isNaN(v) ? '—' : `${v.toFixed(1)} ms`);
  for (const r of rows) lines.push(`  ${r.fs} ${r.tree}: capture ${ms(r.captureOverhead)}, materialize ${ms(r.materializeOverhead)}; event-loop delay during capture p99 ${ms(r.loopP99)} (max ${ms(r.loopMax)})`);
  if (e === undefined) return [...lines, '', ...targets(rows, e).map(([name, ok, figure]) => `${ok ? 'met    ' : 'NOT MET'}  ${name}: ${figure}`)].join('\n');
  lines.push(`peak RSS: 1 GiB file ${e.rss1g.toFixed(0)} MB; ${e.rssSmall.tree} tree ${e.rssSmall.maxRssMB.toFixed(0)} MB; ${e.rssSyntheticStart.entries} / ${e.rssSynthetic.entries} empty files ${e.rssSyntheticStart.maxRssMB.toFixed(0)} / ${e.rssSynthetic.maxRssMB.toFixed(0)} MB`);
  lines.push(`verify 5k tree: helper pool ${fmt(e.verify.pooled)}, one thread ${fmt(e.verify.single)}; ephemeral close ${fmt(e.close.close)} after a ${fmt(e.close.capture)} capture`);
  lines.push('recapture (stat cache), each capture in a fresh node process (open, async capture, close), against a full capture without the cache and find:');
  for (const r of e.recapture) lines.push(recaptureLine(r));
  lines.push("an arm's diff, reset and result capture, each call in a fresh node process:", ...DIFF_RESET_HEADER, ...diffResetLines(e.diffReset));
  for (const a of e.arms) {
    lines.push(`arms: ${a.arms} materializes of the ${a.tree} tree into fresh clones (${a.fs}), one process each way, store concurrency ${a.arms}: in series ${fmt(a.series)}, at once ${fmt(a.atOnce)}; the same ${a.arms} copies by cp -a --reflink=auto at once ${a.cpRatio.toFixed(2)}× in series`);
  }
  lines.push('');
  const checks = targets(rows, e);
  for (const [name, ok, figure] of checks) lines.push(`${ok ? 'met    ' : 'NOT MET'}  ${name}: ${figure}`);
  const missed = checks.filter(([, ok]) => !ok).length;
  lines.push(missed === 0 ? '\nall targets met' : `\n${missed} of ${checks.length} targets not met`);
  return lines.join('\n');
}

async function main() {
  if (process.getuid?.() !== 0) throw new Error('bench: needs root (loop mounts on /dev/shm)');
  execFileSync('npm', ['run', 'build:ts'], { cwd: join(here, '..'), stdio: 'ignore' });
  const load = { before: loadavg() };
  const { rows, extra } = await measureAll((m) => console.error(m));
  load.after = loadavg();
  const text = report(rows, extra, load);
  console.log(text);
  if (!quick && only === undefined) {
    writeFileSync(
      join(here, 'RESULTS.md'),
      `# Benchmark results\n\nThe latest \`npm run bench\` (see README, "Performance"), verbatim:\n\n\`\`\`\n${text}\n\`\`\`\n`,
    );
  }
}

// Run as a script only: importing this file (to reuse a function) must not start a whole bench.
if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
