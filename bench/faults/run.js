#!/usr/bin/env node
// run.js: `npm run faults`: records each public operation's syscalls by call site, then fails each call in turn and checks what is left.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';

import { judgeOutcome, openFds } from './checks.js';
import { CLONE_OPS } from './clone-ops.js';
import { FaultLayer } from './layer.js';
import { REGISTRY_OPS, registryAvailable } from './registry-ops.js';
import { STORE_OPS } from './store-ops.js';
import { TOOL_OPS } from './tool-ops.js';
import { forceRemove } from './tree.js';

const args = process.argv.slice(2);
const short = args.includes('--short');
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const verbose = args.includes('--verbose');
/**
 * Left out of --short (CI): variants whose call sites the short run's other operations reach too. Copying without
 * trying a clone is the copy fallback of `materialize auto` on tmpfs (which cannot clone); `always` on XFS is
 * `auto` on XFS less its fallback. `npm run faults` runs them.
 */
const SHORT_SKIPS = new Set(['materialize never', 'materialize always (xfs)']);
const OPS = [...STORE_OPS, ...CLONE_OPS, ...TOOL_OPS, ...REGISTRY_OPS]
  .filter((op) => only === undefined || op.name.includes(only))
  .filter((op) => !short || only !== undefined || !SHORT_SKIPS.has(op.name));

/** A small reflink-capable XFS loop image on /dev/shm (root only), unmounted at exit. */
function mountXfs(base) {
  if (process.getuid?.() !== 0) return undefined;
  const img = join(base, 'xfs.img');
  const dir = join(base, 'xfs');
  mkdirSync(dir);
  execFileSync('truncate', ['-s', '300M', img]);
  execFileSync('mkfs.xfs', ['-q', '-m', 'reflink=1', img]);
  execFileSync('mount', ['-o', 'loop', img, dir]);
  return dir;
}

/** Runs one operation once on a fresh fixture; `target` (optional) is the call to fail. */
async function once(op, shared, target) {
  const layer = new FaultLayer(target);
  const fds = openFds();
  const fx = op.setup(shared, layer);
  let outcome;
  layer.armed = true;
  try {
    outcome = { ok: true, value: await op.run(shared, fx) };
  } catch (err) {
    outcome = { ok: false, err };
  } finally {
    layer.armed = false;
  }
  const violations = [];
  if (target === undefined && !outcome.ok) violations.push(`clean run failed: ${outcome.err?.code ?? ''} ${outcome.err?.message}`);
  if (layer.fired !== undefined) violations.push(...judgeOutcome(outcome, layer.fired));
  violations.push(...(await op.check(shared, fx, outcome)));
  await op.cleanup(fx);
  const after = openFds();
  if (after !== fds) violations.push(`fds left open: ${after.split(',').filter((f) => !fds.split(',').includes(f)).join(', ')}`);
  return { layer, outcome, violations };
}

/** The injections for the sites of a clean run: each site, each errno it can return, its first and last call. */
function plan(sites) {
  const out = [];
  for (const [site, { count, errnos }] of sites) {
    const codes = short ? errnos.slice(0, 1) : errnos;
    const nths = short || count === 1 ? [1] : [1, count];
    for (const code of codes) for (const nth of nths) out.push({ site, nth, code });
  }
  return out;
}

async function runOp(op, env) {
  const shared = await op.prepare(env);
  const clean = await once(op, shared, undefined);
  const row = { name: op.name, sites: clean.layer.sites.size, calls: 0, injections: 0, unreached: 0, violations: [], absorbed: [] };
  for (const { count } of clean.layer.sites.values()) row.calls += count;
  row.violations.push(...clean.violations.map((v) => `clean run: ${v}`));
  for (const target of plan(clean.layer.sites)) {
    const r = await once(op, shared, target);
    if (r.layer.fired === undefined) {
      row.unreached++;
      continue;
    }
    row.injections++;
    if (r.outcome.ok && r.layer.fired.syscall !== 'close') row.absorbed.push(`${target.code} at ${target.site} #${target.nth}`);
    for (const v of r.violations) row.violations.push(`${target.code} at ${target.site} #${target.nth}: ${v}`);
  }
  return row;
}

async function main() {
  const base = mkdtempSync('/dev/shm/treeseal-faults-');
  const env = { shm: join(base, 'shm'), xfs: undefined };
  mkdirSync(env.shm);
  let failed = false;
  try {
    env.xfs = mountXfs(base);
    env.registry = registryAvailable() ? env.shm : undefined;
    const rows = [];
    for (const op of OPS) {
      if (env[op.fs] === undefined) {
        console.log(`${op.name}: skipped (no ${op.fs}${op.fs === 'registry' ? ' binary' : ' mount; run as root'})`);
        if (process.env.CI === 'true') failed = true;
        continue;
      }
      const started = Date.now();
      const row = await runOp(op, env);
      rows.push(row);
      const shown = verbose ? row.violations : row.violations.slice(0, 12);
      console.log(`${op.name}: ${row.sites} call sites (${row.calls} calls), ${row.injections} injections, ${row.violations.length} violations` +
        `${row.unreached > 0 ? `, ${row.unreached} not reached` : ''} [${((Date.now() - started) / 1000).toFixed(1)} s]`);
      for (const v of shown) console.log(`  ${v}`);
      if (args.includes('--absorbed')) for (const a of row.absorbed) console.log(`  absorbed (succeeded anyway): ${a}`);
      if (shown.length < row.violations.length) console.log(`  ... ${row.violations.length - shown.length} more (--verbose)`);
    }
    if (args.includes('--markdown')) {
      console.log('\n| operation | call sites | calls | injections | violations |\n|---|---|---|---|---|');
      for (const r of rows) console.log(`| ${r.name} | ${r.sites} | ${r.calls} | ${r.injections} | ${r.violations.length} |`);
    }
    const total = rows.reduce((t, r) => ({ s: t.s + r.sites, i: t.i + r.injections, v: t.v + r.violations.length }), { s: 0, i: 0, v: 0 });
    console.log(`faults${short ? ' (short)' : ''}: ${rows.length} operations, ${total.s} call sites, ${total.i} injections, ${total.v} violations`);
    if (total.v > 0) failed = true;
  } finally {
    if (env.xfs !== undefined) {
      try {
        execFileSync('umount', [env.xfs]);
      } catch {
        execFileSync('umount', ['-l', env.xfs]);
      }
    }
    forceRemove(env.shm);
    rmSync(base, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

await main();
