// recapture.mjs: full capture vs. stat-cache recapture (unchanged, 10 files changed) vs. find; part of `npm run bench`, alone as `npm run bench:recapture`.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const shared = resolve(root, process.env.TREESEAL_SHARED ?? '../shared');
const quick = process.env.TREESEAL_BENCH_QUICK === '1';
const reps = Math.max(3, Number(process.env.TREESEAL_BENCH_REPS ?? 3));
/** Files in the recapture tree (the 5k tree's count in a quick run). */
export const RECAPTURE_FILES = Number(process.env.TREESEAL_BENCH_FILES ?? (quick ? 5000 : 50000));
/** Longer than the stat cache's timestamp granularity (2 s): files older than this are trusted. */
const SETTLE_MS = 2500;

/** Child mode: one capture in this fresh process, timed around open + capture + close; prints JSON (wall ms and the process's CPU ms over the same span). */
async function child(args) {
  const { SnapshotStore } = await import(join(root, 'dist/index.js'));
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const store = await SnapshotStore.open(args.store);
  const snap = await store.capture({ source: args.source, copy: ['tree'], statCache: args.statCache });
  await store.close();
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  process.stdout.write(JSON.stringify({ ms, cpu: (cpu.user + cpu.system) / 1000, digest: snap.digest, ...snap.captureReport }));
}

function sh(cmd, args) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 28 });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const fmt = (ms) => (ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(2)} s`);
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function captureIn(store, source, statCache) {
  sh('sync', []);
  const out = sh(process.execPath, [fileURLToPath(import.meta.url), '--child', JSON.stringify({ store, source, statCache })]);
  return JSON.parse(out);
}

/** find's wall time, and its CPU time (user + sys, from /usr/bin/time). */
function timeFind(dir) {
  sh('sync', []);
  const t0 = performance.now();
  const find = ['find', dir, '-printf', '%i %s %T@ %C@\n'];
  const timed = existsSync('/usr/bin/time');
  const [cmd, ...args] = timed ? ['/usr/bin/time', '-f', '%U %S', ...find] : find;
  const r = spawnSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`find failed: ${r.stderr}`);
  if (!timed) return { ms, cpu: NaN };
  const [user, system] = r.stderr.trim().split('\n').at(-1).split(' ').map(Number);
  return { ms, cpu: (user + system) * 1000 };
}

function dropDir(path) {
  spawnSync('chmod', ['-R', 'u+rwx', path]);
  rmSync(path, { recursive: true, force: true });
}

/** Rewrites 10 files spread over the tree (different bytes, a new size), named by rep. */
function change10(tree, rep) {
  for (let k = 0; k < 10; k++) {
    const i = (rep * 10 + k) * Math.floor(RECAPTURE_FILES / 40) + 1;
    writeFileSync(join(tree, findFile(tree, i)), `rep ${rep} file ${i}\n`.repeat(k + 1));
  }
}

const pathsCache = new Map();
function findFile(tree, i) {
  let paths = pathsCache.get(tree);
  if (paths === undefined) {
    paths = sh('find', [tree, '-type', 'f', '-printf', '%P\n']).trim().split('\n').sort();
    pathsCache.set(tree, paths);
  }
  return paths[i % paths.length];
}

/**
 * The recapture rows on one filesystem: `source` holds the tree to capture (`tree`, its
 * files rewritten by the run), `scratch` an empty directory for the stores (removed after).
 */
export function benchRecapture(fs, source, scratch, log = (m) => console.error(m)) {
  const tree = join(source, 'tree');
  mkdirSync(scratch, { recursive: true });
  try {
    const cached = join(scratch, 'store');
    sleep(SETTLE_MS);
    captureIn(cached, source, true);
    const rows = { full: [], unchanged: [], changed: [], find: [], fullCpu: [], unchangedCpu: [], changedCpu: [], findCpu: [] };
    let digestsEqual = true;
    for (let rep = 0; rep < reps; rep++) {
      sleep(SETTLE_MS);
      change10(tree, rep);
      const changed = captureIn(cached, source, true);
      const fullStore = join(scratch, `full-${rep}`);
      const full = captureIn(fullStore, source, false);
      dropDir(fullStore);
      sleep(SETTLE_MS);
      // Re-records the 10 files changed just before (racy then); the timed run below is the steady state.
      captureIn(cached, source, true);
      const unchanged = captureIn(cached, source, true);
      const find = timeFind(tree);
      digestsEqual &&= changed.digest === full.digest && unchanged.digest === full.digest;
      for (const [k, v] of [['full', full], ['changed', changed], ['unchanged', unchanged], ['find', find]]) {
        rows[k].push(v.ms);
        rows[`${k}Cpu`].push(v.cpu);
      }
      log(`recapture ${fs} rep ${rep}: full ${fmt(full.ms)}, 10 changed ${fmt(changed.ms)} (${changed.reusedFiles}/${changed.files} reused), unchanged ${fmt(unchanged.ms)} (built: ${unchanged.built}), find ${fmt(find.ms)}`);
    }
    const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
    return { fs, files: RECAPTURE_FILES, ...m, digestsEqual };
  } finally {
    dropDir(scratch);
  }
}

/** The row's figures, one line (wall, then the CPU time of the same process). */
export function recaptureLine(r) {
  const both = (ms, cpu) => `${fmt(ms)} (CPU ${Number.isNaN(cpu) ? '—' : fmt(cpu)})`;
  return `  ${r.fs} ${r.files} files: full capture ${both(r.full, r.fullCpu)}, unchanged recapture ${both(r.unchanged, r.unchangedCpu)}, 10 changed ${both(r.changed, r.changedCpu)}, find ${both(r.find, r.findCpu)}`;
}

/** issue 13's targets for one row: [name, met, figure]. */
export function recaptureChecks(r) {
  const x = (a, b) => `${(a / b).toFixed(3)}×`;
  const name = (what) => `recapture ${r.fs} ${r.files} files: ${what}`;
  return [
    [name('unchanged ≤ 0.1× a full capture'), r.unchanged <= 0.1 * r.full, `${x(r.unchanged, r.full)} (${fmt(r.unchanged)} vs ${fmt(r.full)})`],
    [name('10 changed ≤ 0.2× a full capture'), r.changed <= 0.2 * r.full, `${x(r.changed, r.full)} (${fmt(r.changed)} vs ${fmt(r.full)})`],
    [name("unchanged within 2× of find -printf '%i %s %T@ %C@'"), r.unchanged <= 2 * r.find, `${x(r.unchanged, r.find)} (${fmt(r.unchanged)} vs ${fmt(r.find)})`],
    [name("digests equal a full capture's"), r.digestsEqual, r.digestsEqual ? 'equal' : 'differ'],
  ];
}

/** A loop image in /dev/shm with the filesystem `fs`, mounted; returns the mount point and its cleanup. */
function mountImage(fs) {
  const base = mkdtempSync(join('/dev/shm', `treeseal-recapture-${fs}.`));
  const img = join(base, 'img');
  const mnt = mkdtempSync(join('/tmp', `treeseal-recapture-${fs}.`));
  sh('truncate', ['-s', '6G', img]);
  if (fs === 'xfs') sh('mkfs.xfs', ['-q', '-m', 'reflink=1', img]);
  else sh('mkfs.ext4', ['-q', '-F', img]);
  sh('mount', ['-o', 'loop', img, mnt]);
  const cleanup = () => {
    spawnSync('umount', [mnt]);
    rmSync(mnt, { recursive: true, force: true });
    rmSync(base, { recursive: true, force: true });
  };
  const onSignal = () => {
    cleanup();
    process.exit(130);
  };
  process.once('SIGINT', onSignal).once('SIGTERM', onSignal);
  return {
    mnt,
    cleanup: () => {
      process.off('SIGINT', onSignal).off('SIGTERM', onSignal);
      cleanup();
    },
  };
}

/** Alone (`npm run bench:recapture`): its own XFS and ext4 images, the tree generated in each. */
function main() {
  if (process.getuid?.() !== 0) throw new Error('bench:recapture makes loop mounts: run it as root');
  console.log(`recapture benchmark: ${RECAPTURE_FILES} files, medians of ${reps}, each capture in a fresh node process (async API)`);
  for (const fs of ['xfs', 'ext4']) {
    const { mnt, cleanup } = mountImage(fs);
    try {
      const source = join(mnt, 'src');
      mkdirSync(source);
      sh('python3', [join(shared, 'bench/gen_tree.py'), join(source, 'tree'), '--files', String(RECAPTURE_FILES), '--big-mib', '0']);
      const r = benchRecapture(`${fs} (RAM)`, source, join(mnt, 'scratch'));
      console.log(recaptureLine(r));
      for (const [n, ok, figure] of recaptureChecks(r)) console.log(`${ok ? 'met    ' : 'NOT MET'}  ${n}: ${figure}`);
    } finally {
      cleanup();
    }
  }
}

if (process.argv[2] === '--child') await child(JSON.parse(process.argv[3]));
else if (process.argv[1] === fileURLToPath(import.meta.url)) main();
