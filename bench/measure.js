// measure.js: the benchmark's measurements: each tool in a fresh process, the device quiet before it, rotating order, medians; RAM-backed loop images; one-off extras.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const dist = join(root, 'dist');
const shared = resolve(root, process.env.TREESEAL_SHARED ?? '../shared');
const work = resolve(process.env.TREESEAL_BENCH_DIR ?? join(root, '.bench'));
const quick = process.env.TREESEAL_BENCH_QUICK === '1';
const reps = Math.max(3, Number(process.env.TREESEAL_BENCH_REPS ?? 3));
const T5K = { name: '5k+64MiB', files: 5000, big: 64 };
const T50K = { name: '50k small', files: 50000, big: 0 };
const TREES = quick ? [T5K] : [T5K, T50K];
const SYNTHETIC_ENTRIES = quick ? 100_000 : 500_000;

function sh(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20, ...opts });
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function dropDir(path) {
  if (!existsSync(path)) return;
  if (spawnSync('chmod', ['-R', 'u+rwx', path], { stdio: 'ignore' }).status !== 0) {
    // A store on btrfs: its copy roots are read-only subvolumes (root ino 256), their flag cleared first.
    const roots = spawnSync('find', [path, '-type', 'd', '-inum', '256'], { encoding: 'utf8' }).stdout.split('\n').filter((p) => p !== '');
    for (const r of roots) spawnSync('btrfs', ['property', 'set', '-f', '-ts', r, 'ro', 'false'], { stdio: 'ignore' });
    spawnSync('chmod', ['-R', 'u+rwx', path]);
  }
  rmSync(path, { recursive: true, force: true });
}

/** Loop images backed by /dev/shm (RAM), so the rows measure code, not a throttled disk; removed on exit. */
class RamMounts {
  base = mkdtempSync('/dev/shm/treeseal-bench.');
  mounts = [];

  make(fs, size) {
    const img = join(this.base, `${fs}.img`);
    const mnt = join(this.base, fs);
    mkdirSync(mnt);
    sh('truncate', ['-s', size, img]);
    if (fs === 'xfs') sh('mkfs.xfs', ['-q', '-m', 'reflink=1', img]);
    else if (fs === 'btrfs') sh('mkfs.btrfs', ['-q', img]);
    else sh('mkfs.ext4', ['-q', '-F', img]);
    sh('mount', ['-o', 'loop', img, mnt]);
    this.mounts.push(mnt);
    return mnt;
  }

  cleanup() {
    for (const mnt of this.mounts.splice(0)) if (spawnSync('umount', [mnt]).status !== 0) spawnSync('umount', ['-l', mnt]);
    rmSync(this.base, { recursive: true, force: true });
  }
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

/** How long the device must show no request in flight before a timed tool starts. */
const QUIET_MS = 500;

/** Flushes dirty pages and waits for the device to go quiet (no request in flight for QUIET_MS, at most a minute). */
function settle(path) {
  spawnSync('sync');
  const file = inflightFile(path);
  const deadline = Date.now() + 60_000;
  let quietSince = Date.now();
  while (file !== undefined && Date.now() < deadline && Date.now() - quietSince < QUIET_MS) {
    const busy = readFileSync(file, 'utf8').trim().split(/\s+/).some((n) => n !== '0');
    if (busy) quietSince = Date.now();
    spawnSync('sleep', ['0.1']);
  }
}

/** Milliseconds a whole process takes, the device quiet before it. */
function timeProcess(scratch, cmd, args) {
  settle(scratch);
  const t = process.hrtime.bigint();
  sh(cmd, args);
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/** The source tree of `tree` on this filesystem: generated once in RAM, copied in. */
function sourceTree(base, tree) {
  const src = join(base, `src-${tree.files}-${tree.big}`);
  if (existsSync(join(src, 'tree'))) return src;
  const gen = join(work, 'trees', `${tree.files}-${tree.big}`);
  if (!existsSync(join(gen, 'tree'))) {
    mkdirSync(gen, { recursive: true });
    sh('python3', [join(shared, 'bench/gen_tree.py'), join(gen, 'tree'), '--files', String(tree.files), '--big-mib', String(tree.big)]);
  }
  mkdirSync(src, { recursive: true });
  sh('cp', ['-a', join(gen, 'tree'), join(src, 'tree')]);
  return src;
}

/** The `treeseal` command as a user runs it (the bin, its `#!/usr/bin/env node` line): wall ms and stdout. */
function timeCli(scratch, args) {
  settle(scratch);
  const t = process.hrtime.bigint();
  const stdout = sh(join(dist, 'cli.js'), args);
  return { ms: Number(process.hrtime.bigint() - t) / 1e6, stdout };
}

/** The CLI's rows: capture into a new store, materialize into a new clone, then ls of that store (one snapshot), --version. */
function cliRun(scratch, dir, src, t) {
  const store = join(dir, 'cli-store');
  const cap = timeCli(scratch, ['--store', store, '--json', 'capture', src, '--copy', 'tree', '--revision', 'bench']);
  const { digest } = JSON.parse(cap.stdout);
  const mat = timeCli(scratch, ['--store', store, 'materialize', digest, join(dir, 'cli-clone'), '--fallback-bytes', String(8 * 2 ** 30)]);
  const ls = timeCli(scratch, ['--store', store, 'ls']);
  const version = timeCli(scratch, ['--version']);
  t.cli.push({ capture: cap.ms, materialize: mat.ms, ls: ls.ms, version: version.ms });
}

/** One rep: the tools in a rotating order, each in a fresh process; nothing deleted until the rep is over. */
function rep(i, scratch, src, timed, t) {
  const dir = join(scratch, `rep-${i}`);
  mkdirSync(dir);
  // The sync/async pairs (the overhead per call) run on the 5k tree only: on the 50k tree they would double the bench.
  const ts = { dist, source: src, flip: i % 2 === 1, pairs: t.pairs, clones: [1, 2, 3].map((k) => join(dir, `clone-${k}`)) };
  for (const k of ['A', 'B', 'C']) ts[`store${k}`] = join(dir, `store-${k.toLowerCase()}`);
  const ops = [
    () => t.cp.push(timeProcess(scratch, 'cp', ['-a', '--reflink=auto', join(src, 'tree'), join(dir, 'cp')])),
    () => {
      settle(scratch);
      t.ts.push(JSON.parse(sh(process.execPath, [join(here, 'treeseal-run.mjs'), JSON.stringify(ts)])));
    },
    () => {
      mkdirSync(join(dir, 'seed'));
      settle(scratch);
      t.seed.push(JSON.parse(sh('python3', [timed, src, 'tree', join(dir, 'seed'), join(dir, 'seed')])));
    },
  ];
  if (t.cli !== undefined) ops.push(() => cliRun(scratch, dir, src, t));
  for (let k = 0; k < ops.length; k++) ops[(i + k) % ops.length]();
  dropDir(dir);
  settle(scratch);
}

function benchTree(fs, base, tree, timed) {
  const src = sourceTree(base, tree);
  const scratch = join(base, `scratch-${tree.files}`);
  dropDir(scratch);
  mkdirSync(scratch, { recursive: true });
  // The CLI rows (and the sync/async pairs) on the 5k tree only.
  const t = { cp: [], ts: [], seed: [], pairs: tree.files <= 5000, cli: tree.files <= 5000 ? [] : undefined };
  for (let i = 0; i < reps; i++) rep(i, scratch, src, timed, t);
  dropDir(scratch);
  const m = (key) => median(t.ts.map((r) => r[key]));
  return {
    fs,
    tree: tree.name,
    cp: median(t.cp),
    open: m('open'),
    capture: m('capture'),
    materialize: m('materialize'),
    captureSync: t.pairs ? m('captureSync') : NaN,
    materializeSync: t.pairs ? m('materializeSync') : NaN,
    captureOverhead: t.pairs ? median(t.ts.map((r) => r.captureAsync - r.captureSync)) : NaN,
    // Every pair of every rep: the first call's of each, and the further pairs each process made.
    materializeOverhead: t.pairs ? median(t.ts.flatMap((r) => [r.materializeAsync - r.materializeSync, ...(r.materializeDiffs ?? [])])) : NaN,
    loopP99: m('loopP99'),
    loopMax: m('loopMax'),
    seedCapture: median(t.seed.map((r) => r.capture)),
    seedMaterialize: median(t.seed.map((r) => r.materialize)),
    cli: t.cli === undefined ? undefined : Object.fromEntries(['capture', 'materialize', 'ls', 'version'].map((k) => [k, median(t.cli.map((r) => r[k]))])),
    digestMatch: t.ts.every((r) => r.manifest === t.seed[0].manifest),
    reflinked: Math.min(...t.ts.map((r) => r.reflinked)),
    snapshotted: Math.min(...t.ts.map((r) => r.snapshotted ?? 0)),
    files: t.ts[0].files,
  };
}

/** A tree of `entries` empty files, 1,000 to a directory. */
function syntheticTree(base, entries) {
  const src = join(base, `synthetic-${entries}`);
  if (existsSync(join(src, 'tree'))) return src;
  sh('python3', ['-c', `import os, sys
root = sys.argv[1]; n = int(sys.argv[2])
for d in range(0, n, 1000):
    p = os.path.join(root, "d%04d" % (d // 1000)); os.makedirs(p)
    for i in range(min(1000, n - d)): os.close(os.open(os.path.join(p, "f%04d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
`, join(src, 'tree'), String(entries - Math.ceil(entries / 1000) - 1)]);
  return src;
}

function bigFileTree(base) {
  const src = join(base, 'rss-1g');
  if (!existsSync(join(src, 'tree/big.bin'))) {
    mkdirSync(join(src, 'tree'), { recursive: true });
    sh('dd', ['if=/dev/urandom', `of=${join(src, 'tree/big.bin')}`, 'bs=1M', 'count=1024', 'status=none']);
  }
  return src;
}

function extra(mode, base, source) {
  const store = join(base, `extras-${mode}-store`);
  dropDir(store);
  settle(base);
  const out = JSON.parse(sh(process.execPath, [join(here, 'treeseal-extras.mjs'), mode, JSON.stringify({ dist, source, store })]));
  dropDir(store);
  return out;
}

/** Peak RSS (big file, 50k tree, synthetic tree), verify threads, ephemeral close: each in a fresh process on RAM-backed XFS. */
function extras(base) {
  const x = {};
  x.rss1g = extra('rss', base, bigFileTree(base)).maxRssMB;
  dropDir(join(base, 'rss-1g'));
  const small = extra('rss', base, sourceTree(base, T50K));
  // Growth per entry between two trees of the same shape (empty files), 50k and SYNTHETIC_ENTRIES.
  const start = extra('rss', base, syntheticTree(base, 50_000));
  const synthetic = extra('rss', base, syntheticTree(base, SYNTHETIC_ENTRIES));
  for (const n of [50_000, SYNTHETIC_ENTRIES]) dropDir(join(base, `synthetic-${n}`));
  x.rssSmall = { ...small, tree: T50K.name };
  x.rssSyntheticStart = start;
  x.rssSynthetic = synthetic;
  x.growth = ((synthetic.maxRssMB - start.maxRssMB) * 1024 * 1024) / (synthetic.entries - start.entries);
  const v = extra('verify', base, sourceTree(base, T5K));
  x.verify = { single: median(v.single), pooled: median(v.pooled) };
  const closes = [0, 1, 2].map(() => extra('close', base, sourceTree(base, T5K)));
  x.close = { capture: median(closes.map((c) => c.capture)), close: median(closes.map((c) => c.close)) };
  return x;
}

export { benchTree, dropDir, extras, median, quick, reps, RamMounts, seedRunner, sourceTree, work, T5K, T50K, TREES };
