// malformed.mjs: runs every case of cases.mjs in a fresh copy of one sandbox (a source, a store
// with one snapshot, a clone, an outside dir) and judges it: a clear typed error, no fd leaked,
// nothing left in the store's tmp/, and nothing changed outside the directory the case names.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import { CASES } from './cases.mjs';
import { dropTree } from './env.mjs';
import { runCmd } from './proc.mjs';
import { ready, startDriver } from './races.mjs';
import { count, row } from './table.mjs';

const NODE_CODES = ['ERR_INVALID_ARG_TYPE', 'ERR_INVALID_ARG_VALUE', 'ERR_OUT_OF_RANGE'];
const DEFAULT_MAY = { staging: ['stage'] };

/** path -> what it is, for every entry under the roots (dir mtimes included: a create-then-delete shows). */
function fingerprint(roots) {
  const out = new Map();
  const walk = (abs) => {
    let st;
    try {
      st = lstatSync(abs, { bigint: true });
    } catch {
      return;
    }
    let what = `${st.mode.toString(8)} ${st.mtimeNs}`;
    if (st.isDirectory()) for (const n of readdirSync(abs)) walk(join(abs, n));
    else if (st.isFile()) what += ` ${createHash('sha256').update(readFileSync(abs)).digest('hex')}`;
    else if (st.isSymbolicLink()) what += ` -> ${readlinkSync(abs)}`;
    out.set(abs, what);
  };
  for (const r of roots) walk(r);
  return out;
}

function changedOutside(before, after, allowed) {
  const free = (p) => allowed.some((a) => p === a || p.startsWith(`${a}/`));
  const parents = new Set(allowed.map((a) => dirname(a)));
  const bad = [];
  for (const [p, v] of after) {
    if (free(p)) continue;
    const old = before.get(p);
    if (old === undefined) bad.push(`created ${p}`);
    else if (old !== v && !(parents.has(p) && old.split(' ')[0] === v.split(' ')[0])) bad.push(`changed ${p}`);
  }
  for (const p of before.keys()) if (!free(p) && !after.has(p)) bad.push(`removed ${p}`);
  return bad;
}

function judgeLib(c, res, codes) {
  if (res.hang) return [`no answer: ${res.hang}`];
  const bad = res.leaked.length > 0 ? [`fd leaked: ${res.leaked.join(', ')}`] : [];
  if (res.ok) return c.okAllowed ? bad : [...bad, 'accepted (no error)'];
  const e = res.error;
  if (e.sealError) {
    if (!codes.includes(e.code)) bad.push(`SealError with unknown code ${e.code}`);
    else if (c.codes && !c.codes.includes(e.code)) bad.push(`${e.code} (expected ${c.codes.join('|')}): ${e.message}`);
  } else if (!((e.name === 'TypeError' || e.name === 'RangeError') && NODE_CODES.includes(e.code))) {
    bad.push(`untyped ${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message.slice(0, 160)}`);
  }
  return bad;
}

function judgeCli(c, r, codes) {
  if (r.timedOut) return ['hung (killed after the timeout)'];
  const bad = [];
  const all = r.stdout + r.stderr;
  if (/^\s+at .+\(?.*:\d+:\d+\)?$/m.test(r.stderr)) bad.push('stack trace on stderr');
  if (/[\x00-\x08\x0b-\x1f\x7f]/.test(all)) bad.push('raw control character in the output');
  if (c.output) bad.push(...c.output(r.stdout));
  if (r.status === 0) return c.okAllowed ? bad : [...bad, 'exited 0 (accepted)'];
  if (r.status === 2) {
    if (!/^treeseal: /.test(r.stderr) || !/usage:/.test(r.stderr)) bad.push(`exit 2 without a usage message: ${r.stderr.slice(0, 160)}`);
    return bad;
  }
  // `verify` reports each corrupt snapshot on stdout (BAD <digest> CODE: ...), each it could not verify (ERR <digest> CODE: ...), and exits 1.
  const m = /^(?:treeseal: |(?:BAD|ERR)\s+[0-9a-f]{64}\s+)(SEAL_[A-Z_]+): /m.exec(`${r.stderr}\n${r.stdout}`);
  if (r.status !== 1 || m === null || !codes.includes(m[1])) {
    bad.push(`exit ${r.status ?? r.signal} without a typed error: ${r.stderr.trim().split('\n')[0]?.slice(0, 200)}`);
  } else if (c.codes && !c.codes.includes(m[1])) bad.push(`${m[1]} (expected ${c.codes.join('|')}): ${r.stderr.trim().slice(0, 160)}`);
  return bad;
}

/** The error a case ended in (undefined when it succeeded): a code, or `usage` for the CLI's exit 2. */
function outcomeOf(res) {
  if (res.lib) return res.lib.hang ? 'hang' : res.lib.ok ? undefined : (res.lib.error.code ?? res.lib.error.name);
  const r = res.cli;
  if (r.status === 0) return undefined;
  if (r.status === 2) return 'usage';
  return /(SEAL_[A-Z_]+): /.exec(`${r.stderr}\n${r.stdout}`)?.[1] ?? `exit ${r.status ?? r.signal}`;
}

/** A capture writes into its store: the store is the directory it names. */
function capturing(c, s) {
  if (c.lib) return /\bcap\(|captureSync/.test(c.lib);
  return c.bash !== undefined || c.cli(s).includes('capture');
}

async function runCase(ctx, w, c, s) {
  if (c.lib) {
    try {
      return { lib: await w.driver.request({ op: 'run', args: { fn: c.lib, args: s } }, 20000) };
    } catch (err) {
      w.driver.kill();
      w.driver = await ready(startDriver(ctx, false, { cwd: w.cwd }));
      return { lib: { hang: err.message } };
    }
  }
  const cmd = ctx.cli.map((a) => `'${a}'`).join(' ');
  const exec = (args) => runCmd(ctx.cli[0], [...ctx.cli.slice(1), ...args], { cwd: w.cwd, timeoutMs: 20000 });
  const first = c.bash ? await runCmd('bash', ['-c', c.bash(s, cmd)], { cwd: w.cwd, timeoutMs: 20000 }) : await exec(c.cli(s));
  if (!c.then || first.status !== 0) return { cli: first };
  const digest = /[0-9a-f]{64}/.exec(first.stdout)?.[0] ?? 'missing';
  return { cli: await exec(c.then(s).map((a) => (a === '{digest}' ? digest : a))) };
}

/** The sandbox every case starts from: src/tree, a store holding its snapshot, an empty clone, outside/. */
async function template(w, base) {
  const t = join(base, 'template');
  mkdirSync(join(t, 'src/tree/sub'), { recursive: true });
  writeFileSync(join(t, 'src/tree/a'), 'alpha\n');
  writeFileSync(join(t, 'src/tree/sub/b'), 'beta\n');
  mkdirSync(join(t, 'outside/dir'), { recursive: true });
  writeFileSync(join(t, 'outside/key'), 'secret\n');
  writeFileSync(join(t, 'outside/dir/x'), 'secret x\n');
  mkdirSync(join(t, 'clone'));
  mkdirSync(join(t, 'stage'));
  const res = await w.driver.request({ op: 'capture', args: { store: join(t, 'store'), source: join(t, 'src'), copy: ['tree'] } }, 60000);
  if (!res.ok) throw new Error(`malformed: template capture failed: ${res.error.message}`);
  return { dir: t, digest: res.result.digest };
}

/**
 * The cases a run takes: every one, or with `half` (the short run) every library case and half of the command's, by
 * their place in CASES and flipped on ext4, so CI's two short runs (XFS as root, ext4 as a user) cover every command
 * case between them. Cases whose setup needs root (mounts) are left out of a run without root.
 */
function casesOf(fs, half) {
  const flip = fs === 'ext4' ? 1 : 0;
  return CASES.map((c, i) => ({ c, i })).filter(({ c, i }) => (c.root !== true || process.getuid?.() === 0) && (!half || c.lib || (i + flip) % 2 === 0));
}

export async function runMalformed(ctx, { fsRoots, log, half = false }) {
  const fs = Object.keys(fsRoots)[0];
  const base = join(fsRoots[fs], 'malformed');
  const w = { cwd: join(base, 'cwd') };
  mkdirSync(w.cwd, { recursive: true });
  w.driver = await ready(startDriver(ctx, false, { cwd: w.cwd }));
  const tpl = await template(w, base);
  const codes = (await w.driver.request({ op: 'run', args: { fn: '({ treeseal }) => treeseal.SEAL_CODES' } })).result;
  const rows = new Map();
  const cases = casesOf(fs, half);
  for (const { c, i } of cases) {
    if (!rows.has(c.group)) rows.set(c.group, row(`malformed ${c.group}`, fs, c.group === 'cli' || c.cli || c.bash ? 'cli+sync' : 'sync'));
    const dir = join(base, `case${i}`);
    spawnSync('cp', ['-a', tpl.dir, dir]);
    const s = { dir, src: join(dir, 'src'), store: join(dir, 'store'), clone: join(dir, 'clone'), outside: join(dir, 'outside'), stageParent: join(dir, 'stage'), digest: tpl.digest, cwd: w.cwd };
    let bad = [];
    let outcome;
    try {
      c.setup?.(s);
      const before = fingerprint([dir, w.cwd]);
      const res = await runCase(ctx, w, c, s);
      c.cleanup?.(s);
      bad = res.lib ? judgeLib(c, res.lib, codes) : judgeCli(c, res.cli, codes);
      outcome = outcomeOf(res);
      // A materialize records the clone's ledger in the store's clones/ (by design, never in the clone), and holds the
      // clone's lock in the store's tmp/ for its run (a file removed with the call: tmp/ is checked empty just below).
      const may = [...(c.may ?? DEFAULT_MAY[c.group] ?? (capturing(c, s) ? ['store'] : [])), 'store/clones', 'store/tmp'].map((p) => join(dir, p));
      bad.push(...changedOutside(before, fingerprint([dir, w.cwd]), may).map((m) => `wrote outside the directory named: ${m.replaceAll(`${base}/`, '')}`));
      const tmp = join(s.store, 'tmp');
      if (c.tmpCheck !== false && existsSync(tmp) && lstatSync(tmp).isDirectory() && readdirSync(tmp).length > 0) bad.push(`store tmp/ not empty: ${readdirSync(tmp).join(', ')}`);
    } catch (err) {
      bad.push(`harness: ${err.message}`);
    }
    count(rows.get(c.group), bad, { label: c.name, refusedCode: outcome });
    dropTree(dir);
    for (const n of readdirSync(w.cwd)) dropTree(join(w.cwd, n));
  }
  await w.driver.close();
  log(`malformed: ${cases.length} of ${CASES.length} cases${half ? ' (every library case, half of the command\'s)' : ''}`);
}
