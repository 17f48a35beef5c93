// kills.mjs: SIGKILL of capture, materialize, rm and gc at random moments, then: every snapshot
// verifies, the next open sweeps tmp/, each copy root of the clone is whole, and no stage remains
// once the next materialize has run.
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { gen } from './oracle.mjs';
import { runCmd, sleep } from './proc.mjs';
import { ready, startDriver, tmpLeftovers } from './races.mjs';
import { count, row } from './table.mjs';

const ROOTS = ['r0', 'r1', 'r2', 'r3'];
const DIGEST = /^[0-9a-f]{64}$/;

function buildKillSource(dir, seed) {
  for (const r of ROOTS) {
    for (let d = 0; d < 3; d++) {
      mkdirSync(join(dir, r, `d${d}`), { recursive: true });
      for (let i = 0; i < 25; i++) writeFileSync(join(dir, r, `d${d}/f${i}`), gen(seed, `${r}/${d}/${i}`, 1024 + ((i * 977) % 7000)));
    }
    writeFileSync(join(dir, r, 'big'), gen(seed, `${r}/big`, 256 * 1024));
  }
}

/** path -> 'dir' | 'file:<sha256>' | 'link:<target>' | 'other', for one root of a tree on disk. */
function treeState(dir, root) {
  const out = new Map();
  const walk = (rel) => {
    const abs = join(dir, rel);
    let st;
    try {
      st = lstatSync(abs);
    } catch {
      return;
    }
    if (st.isDirectory()) {
      out.set(rel, 'dir');
      for (const n of readdirSync(abs)) walk(`${rel}/${n}`);
    } else if (st.isFile()) out.set(rel, `file:${createHash('sha256').update(readFileSync(abs)).digest('hex')}`);
    else if (st.isSymbolicLink()) out.set(rel, `link:${readlinkSync(abs)}`);
    else out.set(rel, 'other');
  };
  walk(root);
  return out;
}

function manifestState(data, root) {
  const out = new Map();
  for (const e of data.entries) {
    if (e.path !== root && !e.path.startsWith(`${root}/`)) continue;
    out.set(e.path, e.kind === 'directory' ? 'dir' : e.kind === 'file' ? `file:${e.sha256}` : `link:${e.link_target}`);
  }
  return out;
}

function sameState(a, b) {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}

/** Violations of a store after a kill: open must sweep tmp/, every snapshot must verify. */
async function storeViolations(w) {
  const bad = [];
  const res = await w.checker.request({ op: 'verifyAll', args: { store: w.store } }, 120000);
  if (!res.ok) return [`store does not open: ${res.error.code ?? res.error.name}: ${res.error.message}`];
  for (const r of res.result) if (!r.ok) bad.push(`snapshot ${r.digest.slice(0, 12)} does not verify: ${r.error.code}: ${r.error.message}`);
  const left = tmpLeftovers(w.store);
  if (left.length > 0) bad.push(`open did not sweep tmp/: ${left.join(', ')}`);
  const odd = readdirSync(join(w.store, 'snapshots')).filter((n) => !DIGEST.test(n));
  if (odd.length > 0) bad.push(`snapshots/ holds ${odd.join(', ')}`);
  w.digests = res.result.filter((r) => r.ok).map((r) => r.digest);
  return bad;
}

async function call(w, op, args) {
  const res = await w.checker.request({ op, args: { store: w.store, ...args } }, 120000);
  if (!res.ok) throw new Error(`${op} failed: ${res.error.code}: ${res.error.message}`);
  return res;
}

/** Starts a driver, sends one request and SIGKILLs it after a random delay up to `window` ms. */
async function killDuring(ctx, async, msg, windowMs) {
  const d = await ready(startDriver(ctx, async));
  const delay = Math.random() * windowMs;
  d.send(msg);
  await sleep(delay);
  const finished = d.queue.length > 0;
  d.kill('SIGKILL');
  await d.done();
  return { delay, finished };
}

async function killCli(ctx, args, windowMs) {
  const delay = Math.random() * windowMs;
  const r = await runCmd(ctx.cli[0], [...ctx.cli.slice(1), ...args], { killAfterMs: delay, cwd: ctx.project });
  return { delay, finished: r.signal === null };
}

/** A store with snapshots A and B (4 copy roots each, different bytes) and a clone holding A. */
async function world(ctx, fs, root) {
  const dir = join(root, 'kills');
  const w = { fs, dir, store: join(dir, 'store'), clone: join(dir, 'clones/clone'), checker: await ready(startDriver(ctx, false)) };
  mkdirSync(w.clone, { recursive: true });
  for (const v of ['A', 'B']) buildKillSource(join(dir, `src${v}`), `${v}-${fs}`);
  const t0 = performance.now();
  w.A = (await call(w, 'capture', { source: join(dir, 'srcA'), copy: ROOTS })).result;
  w.captureMs = performance.now() - t0;
  w.B = (await call(w, 'capture', { source: join(dir, 'srcB'), copy: ROOTS })).result;
  const t1 = performance.now();
  await call(w, 'materialize', { digest: w.A.digest, clone: w.clone });
  w.materializeMs = performance.now() - t1;
  w.current = w.A;
  const t2 = performance.now();
  await runCmd(ctx.cli[0], [...ctx.cli.slice(1), '--store', w.store, 'gc'], { cwd: ctx.project });
  w.cliMs = performance.now() - t2;
  return w;
}

/** Keeps the store small: removes snapshots other than A and B beyond a few. */
async function prune(w) {
  const extra = (w.digests ?? []).filter((d) => d !== w.A.digest && d !== w.B.digest);
  for (const d of extra.slice(0, Math.max(0, extra.length - 2))) await call(w, 'remove', { digest: d });
}

async function captureKill(ctx, w, t) {
  const source = join(w.dir, t % 2 === 0 ? 'srcA' : 'srcB');
  const msg = { op: 'capture', args: { store: w.store, source, copy: ROOTS, revision: `kill-${t}` } };
  const k = await killDuring(ctx, t % 4 < 2, msg, w.captureMs * 1.3 + 50);
  return { k, bad: await storeViolations(w) };
}

async function materializeKill(ctx, w, t) {
  const target = w.current === w.A ? w.B : w.A;
  const msg = { op: 'materialize', args: { store: w.store, digest: target.digest, clone: w.clone } };
  const k = await killDuring(ctx, t % 4 < 2, msg, w.materializeMs * 1.3 + 50);
  const bad = [];
  for (const r of ROOTS) {
    const have = treeState(w.clone, r);
    if (!sameState(have, manifestState(w.current.data, r)) && !sameState(have, manifestState(target.data, r))) {
      bad.push(`clone root ${r} is neither the old nor the new snapshot's (${have.size} entries)`);
    }
  }
  // The next materialize must succeed, leave exactly the new roots, and sweep every stage.
  const next = await w.checker.request({ op: 'materialize', args: { store: w.store, digest: target.digest, clone: w.clone } }, 120000);
  if (!next.ok) bad.push(`next materialize failed: ${next.error.code ?? next.error.name}: ${next.error.message}`);
  else w.current = target;
  for (const r of ROOTS) if (next.ok && !sameState(treeState(w.clone, r), manifestState(target.data, r))) bad.push(`after the next materialize ${r} is wrong`);
  const inClone = readdirSync(w.clone).filter((n) => !ROOTS.includes(n));
  if (inClone.length > 0) bad.push(`left in the clone after the next materialize: ${inClone.join(', ')}`);
  const beside = readdirSync(join(w.dir, 'clones')).filter((n) => n !== 'clone');
  if (beside.length > 0) bad.push(`left beside the clone: ${beside.length} (${beside.slice(0, 2).join(', ')})`);
  return { k, bad: [...bad, ...(await storeViolations(w))] };
}

async function rmKill(ctx, w, t) {
  const { result } = await call(w, 'capture', { source: join(w.dir, 'srcA'), copy: ROOTS, revision: `rm-${t}` });
  const k = await killCli(ctx, ['--store', w.store, 'rm', result.digest], w.cliMs * 1.3 + 50);
  return { k, bad: await storeViolations(w) };
}

async function gcKill(ctx, w, t) {
  // Leave a stale build first: a capture killed early in its walk.
  const msg = { op: 'capture', args: { store: w.store, source: join(w.dir, 'srcB'), copy: ROOTS, revision: `gc-${t}` } };
  await killDuring(ctx, false, msg, w.captureMs * 0.6);
  const stale = tmpLeftovers(w.store).length;
  const k = await killCli(ctx, ['--store', w.store, 'gc'], w.cliMs * 1.3 + 50);
  const bad = await storeViolations(w);
  return { k, bad, note: stale };
}

const KILLS = [
  ['capture', captureKill, 'sync+async'],
  ['materialize', materializeKill, 'sync+async'],
  ['rm', rmKill, 'cli'],
  ['gc', gcKill, 'cli'],
];

export async function runKills(ctx, { trials, fsRoots, log }) {
  const worlds = [];
  for (const [fs, root] of Object.entries(fsRoots)) worlds.push(await world(ctx, fs, root));
  const fsLabel = worlds.map((w) => w.fs).join('+');
  const rows = KILLS.map(([name, , mode]) => ({ r: row(`SIGKILL ${name}`, fsLabel, mode), finished: 0 }));
  const t0 = performance.now();
  for (let t = 0; t < trials; t++) {
    const w = worlds[t % worlds.length];
    for (const [i, [name, fn]] of KILLS.entries()) {
      const { k, bad } = await fn(ctx, w, t);
      if (k.finished) rows[i].finished++;
      count(rows[i].r, bad, { label: `trial ${t} on ${w.fs}, killed after ${k.delay.toFixed(0)} ms${k.finished ? ' (had finished)' : ''}` });
      void name;
    }
    await prune(w);
  }
  for (const w of worlds) await w.checker.close();
  for (const [i, [name]] of KILLS.entries()) {
    log(`kills ${name}: ${rows[i].r.trials} trials (${rows[i].finished} had finished before the kill), ${rows[i].r.violations} violations`);
  }
  log(`kills took ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
