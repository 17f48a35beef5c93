// run.js: `npm run bench`: treeseal against `cp -a --reflink=auto` and the seed's Python cache, on ext4 and XFS, in one run.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitorEventLoopDelay } from 'node:perf_hooks';

import { SnapshotStore } from '../dist/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const shared = resolve(root, process.env.TREESEAL_SHARED ?? '../shared');
const work = resolve(process.env.TREESEAL_BENCH_DIR ?? join(root, '.bench'));
const reps = Number(process.env.TREESEAL_BENCH_REPS ?? 3);
const quick = process.env.TREESEAL_BENCH_QUICK === '1';

const TREES = quick
  ? [{ name: '5k+64MiB', files: 5000, big: 64 }]
  : [
      { name: '5k+64MiB', files: 5000, big: 64 },
      { name: '50k small', files: 50000, big: 0 },
    ];

function sh(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], ...opts });
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function dropDir(path) {
  if (!existsSync(path)) return;
  spawnSync('chmod', ['-R', 'u+rwx', path]);
  rmSync(path, { recursive: true, force: true });
}

/** An XFS loop mount with reflink, created as the tests do (root only). */
function xfsMount() {
  if (process.env.TREESEAL_TEST_XFS) return { path: process.env.TREESEAL_TEST_XFS, cleanup: () => {} };
  if (process.getuid?.() !== 0) return undefined;
  const base = mkdtempSync('/tmp/treeseal-bench-xfs.');
  const img = join(base, 'xfs.img');
  const mnt = join(base, 'mnt');
  mkdirSync(mnt);
  sh('truncate', ['-s', '4G', img]);
  sh('mkfs.xfs', ['-q', '-m', 'reflink=1', img]);
  sh('mount', ['-o', 'loop', img, mnt]);
  return {
    path: mnt,
    cleanup: () => {
      spawnSync('umount', [mnt]);
      rmSync(base, { recursive: true, force: true });
    },
  };
}

function seedRunner(dir) {
  const pkg = join(dir, 'seedpy');
  if (!existsSync(join(pkg, 'run.py'))) sh('bash', [join(shared, 'bench/seed_py_setup.sh'), pkg]);
  const timed = join(pkg, 'timed.py');
  writeFileSync(
    timed,
    `import os, sys, tempfile, time, json
from pathlib import Path
sys.path.insert(0, ${JSON.stringify(pkg)})
from wfb.task_assets import TaskAssetCache
repo, name, cache_parent, clone_parent = sys.argv[1:5]
# Not closed: the bench removes the cache after the rep, as it does treeseal's store.
cache = TaskAssetCache(Path(tempfile.mkdtemp(dir=cache_parent)) / "c")
os.sync()
t0 = time.perf_counter()
snap = cache.prepare({"sandbox_copy": [name]}, repo=Path(repo), resolved_sha="bench")
t1 = time.perf_counter()
clone = Path(tempfile.mkdtemp(dir=clone_parent))
os.sync()
t2 = time.perf_counter()
snap.materialize(clone)
t3 = time.perf_counter()
print(json.dumps({"capture": (t1 - t0) * 1000, "materialize": (t3 - t2) * 1000, "manifest": snap.manifest_digest}))
`,
  );
  return timed;
}

/** The inflight counter of the block device holding path (/sys/dev/block/MAJ:MIN/inflight). */
function inflightFile(path) {
  const dev = statSync(path).dev;
  const file = `/sys/dev/block/${Math.floor(dev / 256) & 0xfff}:${(dev & 0xff) | ((dev >> 12) & 0xfff00)}/inflight`;
  return existsSync(file) ? file : undefined;
}

/**
 * Flushes dirty pages and waits for the disk to go quiet (no request in flight for a
 * second, at most a minute): deletions on a discard-mounted disk keep it busy long
 * after rm returns, and would be billed to whatever runs next.
 */
function settle(path) {
  spawnSync('sync');
  const file = inflightFile(path);
  const deadline = Date.now() + 60_000;
  let quietSince = Date.now();
  while (file !== undefined && Date.now() < deadline && Date.now() - quietSince < 1000) {
    const busy = readFileSync(file, 'utf8').trim().split(/\s+/).some((n) => n !== '0');
    if (busy) quietSince = Date.now();
    spawnSync('sleep', ['0.1']);
  }
}

/** Times fn after flushing dirty pages, so no run pays for the writeback of the one before. */
function timeIt(fn) {
  spawnSync('sync');
  const t = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

function benchTree(fsName, base, tree, timed) {
  const dir = join(base, `bench-${tree.files}-${tree.big}`);
  const src = join(dir, 'src');
  if (!existsSync(join(src, 'tree'))) {
    mkdirSync(src, { recursive: true });
    sh('python3', [join(shared, 'bench/gen_tree.py'), join(src, 'tree'), '--files', String(tree.files), '--big-mib', String(tree.big)]);
  }
  const scratch = join(dir, 'scratch');
  dropDir(scratch);
  mkdirSync(scratch, { recursive: true });
  settle(scratch);
  const t = { cp: [], capture: [], materialize: [], seedCapture: [], seedMaterialize: [] };
  let digest = '';
  let seedDigest = '';
  let report;
  for (let i = 0; i < reps; i++) {
    // Nothing is deleted until the rep is over (deletions on a discard-mounted disk stall
    // whatever runs next), and the order rotates so no tool always runs after another.
    const cpDst = join(scratch, `cp-${i}`);
    const storeDir = join(scratch, `store-${i}`);
    const clone = join(scratch, `clone-${i}`);
    const seedCache = join(scratch, `seed-${i}`);
    const ops = [
      () => t.cp.push(timeIt(() => sh('cp', ['-a', '--reflink=auto', join(src, 'tree'), cpDst]))),
      () => {
        const store = SnapshotStore.openSync(storeDir);
        let snap;
        t.capture.push(timeIt(() => (snap = store.captureSync({ source: src, copy: ['tree'], revision: 'bench' }))));
        digest = snap.manifestDigest;
        mkdirSync(clone);
        t.materialize.push(timeIt(() => (report = snap.materializeSync(clone, { fallbackBytes: 4 * 2 ** 30 }))));
        store.closeSync();
      },
      () => {
        mkdirSync(seedCache);
        const out = JSON.parse(sh('python3', [timed, src, 'tree', seedCache, seedCache]));
        t.seedCapture.push(out.capture);
        t.seedMaterialize.push(out.materialize);
        seedDigest = out.manifest;
      },
    ];
    for (let k = 0; k < ops.length; k++) ops[(i + k) % ops.length]();
    for (const dir of [cpDst, storeDir, clone, seedCache]) dropDir(dir);
    settle(scratch);
  }
  dropDir(scratch);
  const m = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)]));
  return { fs: fsName, tree: tree.name, ...m, digestMatch: digest === seedDigest, reflinked: report.reflinked, files: report.files };
}

async function loopDelay(base) {
  const dir = join(base, 'bench-5000-64');
  const store = SnapshotStore.openSync(join(dir, 'store-async'), { ephemeral: true });
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  const t = process.hrtime.bigint();
  await store.capture({ source: join(dir, 'src'), copy: ['tree'], revision: 'async' });
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  h.disable();
  await store.close();
  return { p99: h.percentile(99) / 1e6, max: h.max / 1e6, ms };
}

function peakRss(base) {
  const dir = join(base, 'bench-rss');
  const src = join(dir, 'src');
  if (!existsSync(join(src, 'tree/big.bin'))) {
    mkdirSync(join(src, 'tree'), { recursive: true });
    sh('dd', ['if=/dev/urandom', `of=${join(src, 'tree/big.bin')}`, 'bs=1M', 'count=1024', 'status=none']);
  }
  const script = `import { SnapshotStore } from ${JSON.stringify(join(root, 'dist/index.js'))};
const s = SnapshotStore.openSync(${JSON.stringify(join(dir, 'store'))}, { ephemeral: true });
s.captureSync({ source: ${JSON.stringify(src)}, copy: ['tree'] });
s.closeSync();
console.log(process.resourceUsage().maxRSS);`;
  const out = sh(process.execPath, ['--input-type=module', '-e', script]);
  return Number(out.trim()) / 1024;
}

const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const ratio = (a, b) => `${(a / b).toFixed(2)}×`;

function main() {
  mkdirSync(work, { recursive: true });
  const timed = seedRunner(work);
  const targets = [['ext4', work]];
  const xfs = xfsMount();
  if (xfs) targets.push(['xfs', xfs.path]);
  else console.error('bench: no XFS mount (needs root); measuring ext4 only');
  const rows = [];
  let delay;
  let rss;
  return (async () => {
    try {
      for (const [fsName, base] of targets) {
        for (const tree of TREES) {
          console.error(`bench: ${fsName} ${tree.name} (${reps} reps)…`);
          rows.push(benchTree(fsName, base, tree, timed));
        }
      }
      delay = await loopDelay(targets[0][1]);
      rss = quick ? undefined : peakRss(targets[targets.length - 1][1]);
    } finally {
      xfs?.cleanup();
    }
    const cpu = cpus()[0]?.model ?? 'unknown cpu';
    console.log(`treeseal bench — ${cpus().length} cores (${cpu}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, medians of ${reps}`);
    console.log('');
    console.log('| fs | tree | cp -a --reflink=auto | capture | materialize | seed capture | seed materialize | capture/cp | materialize/cp | seed/capture | seed/materialize |');
    console.log('|---|---|---|---|---|---|---|---|---|---|---|');
    const checks = [];
    for (const r of rows) {
      console.log(
        `| ${r.fs} | ${r.tree} | ${fmt(r.cp)} | ${fmt(r.capture)} | ${fmt(r.materialize)} | ${fmt(r.seedCapture)} | ${fmt(r.seedMaterialize)} | ${ratio(r.capture, r.cp)} | ${ratio(r.materialize, r.cp)} | ${ratio(r.seedCapture, r.capture)} | ${ratio(r.seedMaterialize, r.materialize)} |`,
      );
      checks.push([`${r.fs} ${r.tree}: capture ≤ 1.3× cp`, r.capture <= 1.3 * r.cp]);
      checks.push([`${r.fs} ${r.tree}: materialize ≤ 1.2× cp`, r.materialize <= 1.2 * r.cp]);
      checks.push([`${r.fs} ${r.tree}: capture ≥ 2× faster than the seed`, r.seedCapture >= 2 * r.capture]);
      checks.push([`${r.fs} ${r.tree}: materialize ≥ 4× faster than the seed`, r.seedMaterialize >= 4 * r.materialize]);
      checks.push([`${r.fs} ${r.tree}: manifest digest equals the seed's`, r.digestMatch]);
      if (r.fs === 'xfs') checks.push([`${r.fs} ${r.tree}: every file reflinked (${r.reflinked}/${r.files})`, r.reflinked === r.files]);
    }
    console.log('');
    console.log(`async capture of 5k+64MiB: ${fmt(delay.ms)}, event-loop delay p99 ${delay.p99.toFixed(1)} ms (max ${delay.max.toFixed(1)} ms)`);
    checks.push(['event-loop delay p99 ≤ 20 ms during async capture', delay.p99 <= 20]);
    if (rss !== undefined) {
      console.log(`peak RSS capturing a tree with a 1 GiB file: ${rss.toFixed(0)} MB`);
      checks.push(['peak RSS ≤ 150 MB with a 1 GiB file', rss <= 150]);
    }
    console.log('');
    for (const [name, ok] of checks) console.log(`${ok ? 'met    ' : 'NOT MET'}  ${name}`);
    const missed = checks.filter(([, ok]) => !ok).length;
    console.log(missed === 0 ? '\nall targets met' : `\n${missed} of ${checks.length} targets not met`);
  })();
}

await main();
