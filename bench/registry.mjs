// registry.mjs: `npm run bench:registry`: push and pull of the 5k tree through a local docker-registry, against one tar blob through the same client; what a new snapshot of the 50k tree uploads; cat of one file of it; peak RSS of push and pull of the 200k tree.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, openSync, readSync, writeSync, closeSync, chmodSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { Writable } from 'node:stream';
import { createServer } from 'node:net';
import { cpus, loadavg, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { SnapshotStore, catRemote } from '../dist/index.js';
import { RegistryClient, parseRemote } from '../dist/internal.js';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const shared = resolve(root, process.env.TREESEAL_SHARED ?? '../shared');
const work = resolve(process.env.TREESEAL_BENCH_DIR ?? join(root, '.bench'));
const reps = Number(process.env.TREESEAL_BENCH_REPS ?? 3);
// The registry's storage and the stores live in RAM (tmpfs): the run measures the client and
// the registry's request handling, not a shared disk's queue.
const ram = process.env.TREESEAL_BENCH_RAM ?? (existsSync('/dev/shm') ? '/dev/shm' : work);
const concurrency = process.env.TREESEAL_BENCH_CONCURRENCY === undefined ? undefined : Number(process.env.TREESEAL_BENCH_CONCURRENCY);
const REGISTRY_BIN = '/usr/bin/docker-registry';
const catReps = Number(process.env.TREESEAL_BENCH_CAT_REPS ?? 5);
const CLI = join(root, 'dist', 'cli.js');

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (ms) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const mb = (n) => `${(n / 1e6).toFixed(2)} MB`;
const dropDir = (path) => {
  if (!existsSync(path)) return;
  spawnSync('chmod', ['-R', 'u+rwx', path]);
  rmSync(path, { recursive: true, force: true });
};

function freePort() {
  return new Promise((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

async function startRegistry(dir) {
  const port = await freePort();
  writeFileSync(
    join(dir, 'config.yml'),
    `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'data')}\nhttp:\n  addr: 127.0.0.1:${port}\n`,
  );
  const child = spawn(REGISTRY_BIN, ['serve', join(dir, 'config.yml')], { stdio: 'ignore' });
  const address = `127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      const r = await fetch(`http://${address}/v2/`);
      await r.body?.cancel();
      if (r.status === 200) return { address, stop: () => child.kill('SIGTERM') };
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGTERM');
  throw new Error('registry did not start');
}

async function timed(fn) {
  spawnSync('sync');
  const t = performance.now();
  const out = await fn();
  return { ms: performance.now() - t, out };
}

/** The reference: the tree as one uncompressed tar blob, chunked PATCHes through the same client. */
async function tarPush(address, repo, src, tarFile) {
  execFileSync('tar', ['-cf', tarFile, '-C', src, 'tree']);
  const client = new RegistryClient({ remote: parseRemote(`${address}/${repo}`), credentials: undefined, scopes: [], what: 'tar push' });
  const file = await open(tarFile, 'r');
  const hash = createHash('sha256');
  const size = (await file.stat()).size;
  let location = await client.startUpload();
  const buf = Buffer.allocUnsafe(16 * 1024 * 1024);
  for (let off = 0; off < size; ) {
    const { bytesRead } = await file.read(buf, 0, Math.min(buf.length, size - off), off);
    const chunk = buf.subarray(0, bytesRead);
    hash.update(chunk);
    location = await client.patchChunk(location, chunk, off);
    off += bytesRead;
  }
  await file.close();
  const digest = `sha256:${hash.digest('hex')}`;
  await client.finishChunked(location, digest);
  return { digest, size };
}

async function tarPull(address, repo, blob, dest) {
  const client = new RegistryClient({ remote: parseRemote(`${address}/${repo}`), credentials: undefined, scopes: [], what: 'tar pull' });
  const { res } = await client.openBlob(blob.digest);
  const tarFile = `${dest}.tar`;
  const file = await open(tarFile, 'wx');
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of res.body) {
    hash.update(chunk);
    await file.write(chunk, 0, chunk.length, size);
    size += chunk.length;
  }
  await file.close();
  if (size !== blob.size || `sha256:${hash.digest('hex')}` !== blob.digest) throw new Error('tar blob differs');
  mkdirSync(dest);
  execFileSync('tar', ['-xf', tarFile, '-C', dest]);
}

function ensureTree(files = 5000, bigMib = 64, base = work) {
  const src = join(base, `bench-${files}-${bigMib}`, 'src');
  if (!existsSync(join(src, 'tree'))) {
    mkdirSync(src, { recursive: true });
    execFileSync('python3', [join(shared, 'bench/gen_tree.py'), join(src, 'tree'), '--files', String(files), '--big-mib', String(bigMib)]);
  }
  return src;
}

/**
 * Peak RSS of `treeseal push` and `treeseal pull` of the 200k-file tree (no large files), each
 * command from start to exit under /usr/bin/time -f %M, as a runner runs them. The tree and its
 * store are kept in RAM between runs (making and capturing them takes a minute).
 */
async function bigRows(address, scratch) {
  const src = ensureTree(200_000, 0, ram);
  const store = join(ram, 'bench-200000-0', 'store');
  const captured = spawnSync(process.execPath, [CLI, 'capture', '--store', store, src, '--max-entries', '1000000', '--json'], { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (captured.status !== 0) throw new Error(`capture of the 200k tree failed: ${captured.stderr}`);
  const { digest, entries } = JSON.parse(captured.stdout);
  const remote = `${address}/bench/big`;
  const time = (args) => {
    const r = spawnSync('/usr/bin/time', ['-f', '%M %e', process.execPath, CLI, ...args], { encoding: 'utf8', maxBuffer: 1 << 26 });
    if (r.status !== 0) throw new Error(`treeseal ${args[0]} failed: ${r.stderr}`);
    const [kb, s] = r.stderr.trim().split('\n').pop().split(' ').map(Number);
    return { rssMb: kb / 1024, ms: s * 1000 };
  };
  const push = time(['push', '--store', store, '--insecure', digest, remote]);
  const pulled = join(scratch, 'store-200k-pulled');
  const pull = time(['pull', '--store', pulled, '--insecure', digest, remote]);
  dropDir(pulled);
  return { entries, push, pull };
}

/** Times catRemote in a fresh process (the call alone, after the import): what a script that cats one file pays. */
const FRESH_CAT = `
const [remote, ref, path] = process.argv.slice(1);
const { catRemote } = await import(${JSON.stringify(join(root, 'dist', 'index.js'))});
const t = performance.now();
const bytes = await catRemote(remote, JSON.parse(ref), path);
process.stdout.write(JSON.stringify({ ms: performance.now() - t, sha256: (await import('node:crypto')).createHash('sha256').update(bytes).digest('hex') }));
`;

/**
 * cat of one file of the 50k-file snapshot (its config is about 9.6 MB): the library call in
 * this process, the same call in a fresh process, and `treeseal cat` from start to exit;
 * a different file each time, its bytes checked.
 */
async function catRows(address, scratch) {
  const src = ensureTree(50000, 0);
  const dir = join(scratch, 'cat');
  mkdirSync(dir, { recursive: true });
  const a = await SnapshotStore.open(join(dir, 'a'));
  const snap = await a.capture({ source: src, copy: ['tree'], revision: 'bench' });
  const remote = `${address}/bench/cat-${Date.now()}`;
  const { manifestDigest } = await a.push(snap.digest, remote);
  // What a new snapshot of this tree sends: with one small file changed, and unchanged but captured at another path.
  const changed = changedSource(src, dir);
  const delta = await a.push((await a.capture({ source: changed.source, copy: ['tree'], revision: 'bench' })).digest, remote);
  dropDir(changed.source);
  const elsewhere = join(dir, 'job-2', 'checkout');
  mkdirSync(dirname(elsewhere), { recursive: true });
  execFileSync('cp', ['-a', '--reflink=auto', src, elsewhere]);
  const moved = await a.push((await a.capture({ source: elsewhere, copy: ['tree'], revision: 'bench' })).digest, remote);
  dropDir(elsewhere);
  const files = snap.entries.filter((e) => e.kind === 'file');
  const configBytes = statSync(join(snap.root, 'manifest.json')).size;
  // By snapshot digest (every piece, proven against the digest) and by manifest digest (one piece and the pack's index).
  const by = { digest: { ref: snap.digest, args: [snap.digest] }, manifest: { ref: { manifest: manifestDigest }, args: ['--manifest', manifestDigest] } };
  const t = Object.fromEntries(Object.keys(by).map((k) => [k, { lib: [], fresh: [], cli: [], bytes: 0 }]));
  const version = [];
  for (let i = 0; i < catReps; i++) {
    // What any command costs here before it does anything: the baseline of the last row.
    const t0 = performance.now();
    spawnSync(process.execPath, [CLI, '--version']);
    version.push(performance.now() - t0);
    const f = files[((i + 1) * 7919) % files.length];
    const want = readFileSync(join(snap.root, 'copy', f.path));
    for (const [kind, { ref, args }] of Object.entries(by)) {
      const into = t[kind];
      const t0 = performance.now();
      const bytes = await catRemote(remote, ref, f.path);
      into.lib.push(performance.now() - t0);
      if (!bytes.equals(want)) throw new Error(`cat gave other bytes for ${f.path}`);
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', FRESH_CAT, remote, JSON.stringify(ref), f.path], { encoding: 'utf8' });
      const out = JSON.parse(r.stdout);
      if (out.sha256 !== f.sha256) throw new Error(`cat in a fresh process gave other bytes for ${f.path}: ${r.stderr}`);
      into.fresh.push(out.ms);
      const t2 = performance.now();
      const c = spawnSync(process.execPath, [CLI, 'cat', ...(kind === 'digest' ? [remote, ...args] : [...args, remote]), f.path]);
      into.cli.push(performance.now() - t2);
      if (c.status !== 0 || !c.stdout.equals(want)) throw new Error(`treeseal cat failed for ${f.path}: ${c.stderr}`);
      const sink = new Writable({ write: (_c, _e, done) => done() });
      into.bytes = (await catRemote(remote, ref, f.path, { output: sink })).bytesDownloaded;
    }
  }
  await a.close();
  dropDir(dir);
  const medians = (x) => ({ lib: median(x.lib), fresh: median(x.fresh), cli: median(x.cli), bytes: x.bytes });
  return {
    byDigest: medians(t.digest),
    byManifest: medians(t.manifest),
    version: median(version),
    files: files.length,
    configBytes,
    deltaBytes: delta.bytesUploaded,
    deltaBlobs: delta.uploaded,
    movedBytes: moved.bytesUploaded,
    movedBlobs: moved.uploaded,
  };
}

/** A copy of the source with one small file changed. */
function changedSource(src, dir) {
  const out = join(dir, 'src-changed');
  execFileSync('cp', ['-a', '--reflink=auto', src, out]);
  const victim = join(out, 'tree', 'd00000', 'f00001.ts');
  const path = existsSync(victim) ? victim : execFileSync('sh', ['-c', `find ${join(out, 'tree')} -name '*.ts' | sort | head -1`], { encoding: 'utf8' }).trim();
  chmodSync(path, 0o644);
  const fd = openSync(path, 'r+');
  const b = Buffer.alloc(1);
  readSync(fd, b, 0, 1, 0);
  b[0] ^= 0xff;
  writeSync(fd, b, 0, 1, 0);
  closeSync(fd);
  return { source: out, size: statSync(path).size };
}

async function rep(i, address, src, scratch) {
  const dir = join(scratch, `rep-${i}`);
  mkdirSync(dir, { recursive: true });
  const a = await SnapshotStore.open(join(dir, 'a'));
  const snap = await a.capture({ source: src, copy: ['tree'], revision: 'bench' });
  const changed = changedSource(src, dir);
  const snap2 = await a.capture({ source: changed.source, copy: ['tree'], revision: 'bench' });
  const repo = `bench/rep-${i}-${Date.now()}`;
  const remote = `${address}/${repo}`;
  const r = {};
  const opts = concurrency === undefined ? {} : { concurrency };
  const cold = await timed(() => a.push(snap.digest, remote, opts));
  r.coldPush = cold.ms;
  r.layers = cold.out.blobs;
  r.bytes = cold.out.bytesUploaded;
  r.rePush = (await timed(() => a.push(snap.digest, remote, opts))).ms;
  const delta = await timed(() => a.push(snap2.digest, remote, opts));
  r.deltaPush = delta.ms;
  // The root document, the changed piece of the entry list, the packs of the old and the new content.
  r.deltaBlobs = delta.out.uploaded;
  r.deltaBytes = delta.out.bytesUploaded;
  const b = await SnapshotStore.open(join(dir, 'b'));
  const pull = await timed(() => b.pull(snap.digest, remote, opts));
  r.pull = pull.ms;
  r.siblingPull = (await timed(() => b.pull(snap2.digest, remote, opts))).ms;
  await a.close();
  await b.close();
  const tarFile = join(dir, 'tree.tar');
  const tarRepo = `bench/tar-${i}-${Date.now()}`;
  const tp = await timed(() => tarPush(address, tarRepo, src, tarFile));
  r.tarPush = tp.ms;
  rmSync(tarFile);
  r.tarPull = (await timed(() => tarPull(address, tarRepo, tp.out, join(dir, 'untar')))).ms;
  dropDir(dir);
  return r;
}

/** `TREESEAL_BENCH_ONLY=200k`: only the 200k tree's push and pull. */
async function only200k() {
  const scratch = mkdtempSync(join(ram, 'treeseal-bench-registry-'));
  const reg = await startRegistry(scratch);
  let big;
  try {
    big = await bigRows(reg.address, scratch);
  } finally {
    reg.stop();
    dropDir(scratch);
  }
  console.log(`| \`treeseal push\`, 200k-file tree (${big.entries} entries): peak RSS | ${big.push.rssMb.toFixed(0)} MB (${fmt(big.push.ms)}) |`);
  console.log(`| \`treeseal pull\`, 200k-file tree: peak RSS | ${big.pull.rssMb.toFixed(0)} MB (${fmt(big.pull.ms)}) |`);
  console.log(`${big.push.rssMb <= 150 ? 'met    ' : 'NOT MET'}  push of the 200k-file tree ≤ 150 MB peak RSS`);
  console.log(`${big.pull.rssMb <= 150 ? 'met    ' : 'NOT MET'}  pull of the 200k-file tree ≤ 150 MB peak RSS`);
}

async function main() {
  if (!existsSync(REGISTRY_BIN)) throw new Error(`bench:registry needs ${REGISTRY_BIN} (apt-get install docker-registry)`);
  if (process.env.TREESEAL_BENCH_ONLY === '200k') return only200k();
  mkdirSync(work, { recursive: true });
  const src = ensureTree();
  const scratch = mkdtempSync(join(ram, 'treeseal-bench-registry-'));
  const reg = await startRegistry(scratch);
  const rows = [];
  let cat;
  let big;
  try {
    for (let i = 0; i < reps; i++) {
      console.error(`bench:registry rep ${i + 1}/${reps}…`);
      rows.push(await rep(i, reg.address, src, scratch));
    }
    console.error(`bench:registry cat of one file of the 50k tree, ${catReps} times…`);
    cat = await catRows(reg.address, scratch);
    if (process.env.TREESEAL_BENCH_200K !== '0') {
      console.error('bench:registry push and pull of the 200k-file tree as commands (TREESEAL_BENCH_200K=0 skips)…');
      big = await bigRows(reg.address, scratch);
    }
  } finally {
    reg.stop();
    dropDir(scratch);
  }
  const m = Object.fromEntries(Object.keys(rows[0]).map((k) => [k, median(rows.map((r) => r[k]))]));
  console.log(`treeseal bench:registry — ${cpus().length} cores (${cpus()[0]?.model ?? 'cpu'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, docker-registry on 127.0.0.1, registry storage and stores in ${ram}, 5k+64MiB tree, medians of ${reps}; cat: 50k-file tree, medians of ${catReps}; load average at the end ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log('');
  console.log('| operation | treeseal | one tar blob | ratio |');
  console.log('|---|---|---|---|');
  console.log(`| cold push (${m.layers} blobs, ${mb(m.bytes)}) | ${fmt(m.coldPush)} | ${fmt(m.tarPush)} | ${(m.coldPush / m.tarPush).toFixed(2)}× |`);
  console.log(`| pull with verification | ${fmt(m.pull)} | ${fmt(m.tarPull)} | ${(m.pull / m.tarPull).toFixed(2)}× |`);
  console.log(`| re-push (unchanged) | ${fmt(m.rePush)} | | |`);
  console.log(`| push after one changed file | ${fmt(m.deltaPush)}: ${m.deltaBlobs} blobs, ${mb(m.deltaBytes)} in all | | |`);
  console.log(`| pull next to the sibling snapshot | ${fmt(m.siblingPull)} | | |`);
  console.log(`| 50k-file tree, push after one changed file | ${cat.deltaBlobs} blobs, ${mb(cat.deltaBytes)} in all | | |`);
  console.log(`| 50k-file tree, push of the same tree captured at another path | ${cat.movedBlobs} blob, ${mb(cat.movedBytes)} in all | | |`);
  for (const [label, c] of [['by snapshot digest', cat.byDigest], ['by manifest digest', cat.byManifest]]) {
    console.log(`| cat of one file ${label}, 50k-file snapshot (${mb(cat.configBytes)} of entry lists; ${mb(c.bytes)} fetched): the call in this process | ${fmt(c.lib)} | | |`);
    console.log(`| … the call in a fresh process (after the import) | ${fmt(c.fresh)} | | |`);
    console.log(`| … \`treeseal cat\`, process start to exit | ${fmt(c.cli)} | | |`);
  }
  console.log(`| (\`treeseal --version\`, process start to exit, for scale) | ${fmt(cat.version)} | | |`);
  if (big !== undefined) {
    console.log(`| \`treeseal push\`, 200k-file tree (${big.entries} entries): peak RSS | ${big.push.rssMb.toFixed(0)} MB (${fmt(big.push.ms)}) | | |`);
    console.log(`| \`treeseal pull\`, 200k-file tree: peak RSS | ${big.pull.rssMb.toFixed(0)} MB (${fmt(big.pull.ms)}) | | |`);
  }
  const checks = [
    ['cold push ≤ 2× the tar reference', m.coldPush <= 2 * m.tarPush],
    ['pull with verification ≤ 1.5× the tar reference', m.pull <= 1.5 * m.tarPull],
    ['re-push ≤ 0.3 s', m.rePush <= 300],
    ['one changed file uploads ≤ 4 blobs (root, one piece, two packs)', Math.max(...rows.map((r) => r.deltaBlobs)) <= 4],
    ['one changed file of the 50k tree uploads ≤ 2 MB in all', cat.deltaBytes <= 2e6],
    ['the 50k tree captured at another path uploads only its root document (1 blob, ≤ 64 KB)', cat.movedBlobs === 1 && cat.movedBytes <= 64e3],
    ['cat of one file from the 50k snapshot by snapshot digest ≤ 0.3 s (the call in this process)', cat.byDigest.lib <= 300],
    ['cat of one file from the 50k snapshot by snapshot digest ≤ 0.3 s (treeseal cat, process start to exit)', cat.byDigest.cli <= 300],
    ['cat of one file from the 50k snapshot by manifest digest ≤ 0.3 s (the call in this process)', cat.byManifest.lib <= 300],
    ['cat of one file from the 50k snapshot by manifest digest ≤ 0.3 s (treeseal cat, process start to exit)', cat.byManifest.cli <= 300],
    ...(big === undefined
      ? []
      : [
          ['push of the 200k-file tree ≤ 150 MB peak RSS', big.push.rssMb <= 150],
          ['pull of the 200k-file tree ≤ 150 MB peak RSS', big.pull.rssMb <= 150],
        ]),
  ];
  console.log('');
  for (const [name, ok] of checks) console.log(`${ok ? 'met    ' : 'NOT MET'}  ${name}`);
  const missed = checks.filter(([, ok]) => !ok).length;
  console.log(missed === 0 ? '\nall targets met' : `\n${missed} of ${checks.length} targets not met`);
}

await main();
