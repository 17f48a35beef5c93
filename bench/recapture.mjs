// recapture.mjs: `npm run bench:recapture`: full capture vs. stat-cache recapture (unchanged, 10 files changed) vs. find, on XFS and ext4 loop images in /dev/shm.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const shared = resolve(root, process.env.TREESEAL_SHARED ?? '../shared');
const reps = Number(process.env.TREESEAL_BENCH_REPS ?? 3);
const files = Number(process.env.TREESEAL_BENCH_FILES ?? 50000);
/** Longer than the stat cache's timestamp granularity (2 s): files older than this are trusted. */
const SETTLE_MS = 2500;

/** Child mode: one capture in this fresh process, timed around open + capture + close; prints JSON. */
async function child(args) {
  const { SnapshotStore } = await import(join(root, 'dist/index.js'));
  const t0 = performance.now();
  const store = await SnapshotStore.open(args.store);
  const snap = await store.capture({ source: args.source, copy: ['tree'], statCache: args.statCache });
  await store.close();
  const ms = performance.now() - t0;
  process.stdout.write(JSON.stringify({ ms, digest: snap.digest, ...snap.captureReport }));
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

function timeFind(dir) {
  sh('sync', []);
  const t0 = performance.now();
  const r = spawnSync('find', [dir, '-printf', '%i %s %T@ %C@\n'], { stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error('find failed');
  return performance.now() - t0;
}

function dropDir(path) {
  spawnSync('chmod', ['-R', 'u+rwx', path]);
  rmSync(path, { recursive: true, force: true });
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

/** Rewrites 10 files spread over the tree (different bytes, a new size), named by rep. */
function change10(tree, rep) {
  for (let k = 0; k < 10; k++) {
    const i = (rep * 10 + k) * Math.floor(files / 40) + 1;
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

function benchFs(fs) {
  const { mnt, cleanup } = mountImage(fs);
  try {
    const source = join(mnt, 'src');
    mkdirSync(source);
    const tree = join(source, 'tree');
    sh('python3', [join(shared, 'bench/gen_tree.py'), tree, '--files', String(files), '--big-mib', '0']);
    const cached = join(mnt, 'store');
    sleep(SETTLE_MS);
    captureIn(cached, source, true);
    const rows = { full: [], unchanged: [], changed: [], find: [] };
    let digestsEqual = true;
    for (let rep = 0; rep < reps; rep++) {
      sleep(SETTLE_MS);
      change10(tree, rep);
      const changed = captureIn(cached, source, true);
      const fullStore = join(mnt, `full-${rep}`);
      const full = captureIn(fullStore, source, false);
      dropDir(fullStore);
      sleep(SETTLE_MS);
      // Re-records the 10 files changed just before (racy then); the timed run below is the steady state.
      captureIn(cached, source, true);
      const unchanged = captureIn(cached, source, true);
      digestsEqual &&= changed.digest === full.digest && unchanged.digest === full.digest;
      rows.full.push(full.ms);
      rows.changed.push(changed.ms);
      rows.unchanged.push(unchanged.ms);
      rows.find.push(timeFind(tree));
      console.error(`${fs} rep ${rep}: full ${fmt(full.ms)}, 10 changed ${fmt(changed.ms)} (${changed.reusedFiles}/${changed.files} reused), unchanged ${fmt(unchanged.ms)} (built: ${unchanged.built}), find ${fmt(rows.find.at(-1))}`);
    }
    return { fs, full: median(rows.full), unchanged: median(rows.unchanged), changed: median(rows.changed), find: median(rows.find), digestsEqual };
  } finally {
    cleanup();
  }
}

function report(r) {
  const met = (ok) => (ok ? 'met' : 'NOT MET');
  const lines = [
    `${r.fs}: full capture ${fmt(r.full)}, unchanged recapture ${fmt(r.unchanged)}, 10 changed ${fmt(r.changed)}, find ${fmt(r.find)}`,
    `  unchanged <= 0.1x full:  ${(r.unchanged / r.full).toFixed(3)}x  ${met(r.unchanged <= 0.1 * r.full)}`,
    `  unchanged <= 2x find:    ${(r.unchanged / r.find).toFixed(2)}x  ${met(r.unchanged <= 2 * r.find)}`,
    `  10 changed <= 0.2x full: ${(r.changed / r.full).toFixed(3)}x  ${met(r.changed <= 0.2 * r.full)}`,
    `  digests equal a full capture's: ${met(r.digestsEqual)}`,
  ];
  console.log(lines.join('\n'));
}

if (process.argv[2] === '--child') {
  await child(JSON.parse(process.argv[3]));
} else {
  if (process.getuid?.() !== 0) throw new Error('bench:recapture makes loop mounts: run it as root');
  console.log(`recapture benchmark: ${files} files, medians of ${reps}, each capture in a fresh node process (async API)`);
  for (const fs of ['xfs', 'ext4']) report(benchFs(fs));
}
