// hostile-arm.mjs: a materialized clone written by an attacker, then diff, reset, a materialize over
// it and a capture of it. Each call must end in a typed error or a success; a reset or materialize
// that succeeds (and the one after a SIGKILL) leaves the copy roots byte-exact; nothing outside the
// clone is written (a canary tree: bytes, modes, mtimes, listings) or read (its token never reaches
// the store or any output); no fd leaks, tmp/ empties, nothing hangs.
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';

import { dropTree } from './env.mjs';
import { Peer, runCmd, sleep } from './proc.mjs';
import { errorViolations, ready, startDriver, tmpLeftovers } from './races.mjs';
import { count, row } from './table.mjs';

export const ATTACKS = [
  'file-symlink',
  'dir-symlink',
  'parent-symlink',
  'root-symlink',
  'fifo',
  'socket',
  'device',
  'hard-link',
  'dir-file-dir',
  'modes',
  'deep-tree',
  'every-byte-name',
  'planted-ledger',
  'planted-marker',
  'far-times',
  'swap-mid-reset',
  'sigkill-reset',
];
const ROOTS = ['r0', 'r1'];
const CALL_MS = 60000;
const DEEP = 10000;

// ---- a seeded generator: every choice of a trial follows from its seed -------------------------

function rng(seed) {
  let s = createHash('sha256').update(seed).digest();
  let i = 0;
  const next = () => {
    if (i + 4 > s.length) {
      s = createHash('sha256').update(s).digest();
      i = 0;
    }
    const v = s.readUInt32LE(i);
    i += 4;
    return v / 2 ** 32;
  };
  return { next, int: (n) => Math.floor(next() * n), pick: (a) => a[Math.floor(next() * a.length)], chance: (p) => next() < p };
}

// ---- the snapshot, the canary outside, and the state checks ------------------------------------

const bytesOf = (tag, size) => Buffer.alloc(size, createHash('sha256').update(tag).digest());

/** The source of the lane's snapshot: two copy roots, nested dirs, an executable, a link inside, an empty dir. */
function buildArmSource(src) {
  for (let d = 0; d < 3; d++) {
    mkdirSync(join(src, `r0/d${d}/e`), { recursive: true });
    for (let i = 0; i < 10; i++) writeFileSync(join(src, `r0/d${d}/f${i}`), bytesOf(`r0/${d}/${i}`, 512 + i * 900));
    writeFileSync(join(src, `r0/d${d}/e/g`), bytesOf(`r0/${d}/g`, 3000));
  }
  writeFileSync(join(src, 'r0/run.sh'), '#!/bin/sh\necho hi\n', { mode: 0o755 });
  symlinkSync('d0/f0', join(src, 'r0/link'));
  mkdirSync(join(src, 'r0/empty'));
  mkdirSync(join(src, 'r1/sub/deeper'), { recursive: true });
  writeFileSync(join(src, 'r1/big'), bytesOf('r1/big', 300 * 1024));
  writeFileSync(join(src, 'r1/sub/deeper/x'), bytesOf('r1/x', 777));
}

/** The canary outside every clone (on the same fs, so hard links reach it): files whose token must never be read, a FIFO, a mirror of r0/d1. */
function makeCanary(dir) {
  const token = `TSCANARY-${randomBytes(12).toString('hex')}-`;
  const bytes = Buffer.from(token.repeat(Math.ceil(65536 / token.length)));
  mkdirSync(join(dir, 'dir'), { recursive: true });
  mkdirSync(join(dir, 'mirror/e'), { recursive: true });
  writeFileSync(join(dir, 'secret'), bytes);
  writeFileSync(join(dir, 'dir/a'), bytes);
  writeFileSync(join(dir, 'dir/b'), bytes);
  for (let i = 0; i < 10; i++) writeFileSync(join(dir, `mirror/f${i}`), bytes);
  writeFileSync(join(dir, 'mirror/e/g'), bytes);
  spawnSync('mkfifo', [join(dir, 'fifo')]);
  return { dir, token, state: canaryState(dir) };
}

/** Every entry of the canary: kind, mode, bytes' hash, mtime, link count not included (a hard link from the clone moves it). */
function canaryState(dir) {
  const out = [];
  const walk = (rel) => {
    const abs = join(dir, rel);
    const st = lstatSync(abs);
    let what = st.isDirectory() ? 'dir' : st.isFile() ? `file:${createHash('sha256').update(readFileSync(abs)).digest('hex')}` : st.isFIFO() ? 'fifo' : 'other';
    what += ` ${(st.mode & 0o7777).toString(8)} ${st.mtimeMs} ${st.uid}`;
    out.push(`${rel}: ${what}`);
    if (st.isDirectory()) for (const n of readdirSync(abs).sort()) walk(rel === '' ? n : `${rel}/${n}`);
  };
  walk('');
  return out.join('\n');
}

function canaryViolations(canary) {
  const now = canaryState(canary.dir);
  if (now === canary.state) return [];
  const a = canary.state.split('\n');
  const b = now.split('\n');
  const diff = [...b.filter((l) => !a.includes(l)).map((l) => `now ${l}`), ...a.filter((l) => !b.includes(l)).map((l) => `was ${l}`)];
  canary.state = now; // report once
  return [`outside the clone changed: ${diff.slice(0, 4).join(' | ')}`];
}

/** Files of a tree (names read as bytes) whose bytes hold the canary's token. */
function tokenHits(dir, canary) {
  const hits = [];
  const needle = Buffer.from(canary.token);
  const walk = (d) => {
    for (const name of readdirSync(d, { encoding: 'buffer' })) {
      const abs = Buffer.concat([d, Buffer.from('/'), name]);
      const st = lstatSync(abs);
      if (st.isDirectory()) walk(abs);
      else if (st.isFile() && readFileSync(abs).includes(needle)) hits.push(abs.toString());
    }
  };
  if (existsSync(dir)) walk(Buffer.from(dir));
  return hits;
}

/** A clone's copy root as path -> 'dir mode' | 'file mode sha' | 'link target' | 'other' | 'vanished' (names read as bytes; a reset may be changing it). */
function rootState(clone, root) {
  const out = new Map();
  const walk = (abs, rel) => {
    let st;
    try {
      st = lstatSync(abs);
    } catch {
      out.set(rel, 'vanished');
      return;
    }
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) {
      out.set(rel, `dir ${mode}`);
      let names;
      try {
        names = readdirSync(abs, { encoding: 'buffer' });
      } catch {
        out.set(rel, 'vanished'); // moved away by a reset being watched
        return;
      }
      for (const n of names) walk(Buffer.concat([abs, Buffer.from('/'), n]), `${rel}/${n.toString('latin1')}`);
    } else if (st.isFile()) {
      try {
        out.set(rel, `file ${mode} ${createHash('sha256').update(readFileSync(abs)).digest('hex')}`);
      } catch {
        out.set(rel, 'vanished'); // a reset (being killed) replacing it
      }
    } else if (st.isSymbolicLink()) {
      try {
        out.set(rel, `link ${readlinkSync(abs)}`);
      } catch {
        out.set(rel, 'vanished'); // a reset (being watched before its kill) replacing the planted link
      }
    } else out.set(rel, 'other');
  };
  walk(Buffer.from(join(clone, root)), root);
  return out;
}

/** A clone's copy roots against the pristine clone materialized at the start (kinds, modes, bytes, link targets). */
function exactViolations(clone, pristine) {
  const bad = [];
  for (const r of ROOTS) {
    const have = rootState(clone, r);
    const want = pristine.get(r);
    const wrong = [...new Set([...have.keys(), ...want.keys()])].filter((k) => have.get(k) !== want.get(k));
    if (wrong.length > 0) bad.push(`copy root ${r} not byte-exact: ${wrong.slice(0, 3).map((k) => `${k} (${have.get(k) ?? 'missing'}, want ${want.get(k) ?? 'nothing'})`).join(', ')}`);
  }
  return bad;
}

/** The pristine clone's roots, checked once against the manifest: every path, kind, sha256 and link target. */
function pristineState(clone, data) {
  const out = new Map(ROOTS.map((r) => [r, rootState(clone, r)]));
  for (const e of data.entries) {
    const got = out.get(e.path.split('/')[0])?.get(e.path) ?? 'missing';
    const ok = e.kind === 'directory' ? got.startsWith('dir ') : e.kind === 'file' ? got.startsWith('file ') && got.endsWith(` ${e.sha256}`) : got === `link ${e.link_target}`;
    if (!ok) throw new Error(`a fresh materialize is not the manifest: ${e.path} is ${got}`);
  }
  const n = [...out.values()].reduce((a, m) => a + m.size, 0);
  if (n !== data.entries.length) throw new Error(`a fresh materialize holds ${n} entries, the manifest ${data.entries.length}`);
  return out;
}

/** Removes a clone whatever it holds (a 10000-deep tree too: rm works from fds). */
function dropClone(path) {
  if (!existsSync(path)) return;
  if (spawnSync('rm', ['-rf', path], { stdio: 'ignore' }).status === 0) return;
  spawnSync('chmod', ['-R', 'u+rwx', path], { stdio: 'ignore' });
  spawnSync('rm', ['-rf', path], { stdio: 'ignore' });
}

// ---- the attacks: each plants something in the clone (the harness is not the driver's process) ---

const nameBytes = (r) => {
  // names with every byte but NUL and '/', split in runs of at most 255, plus a few odd ones
  const all = [];
  for (let b = 1; b < 256; b++) if (b !== 0x2f) all.push(b);
  const names = [Buffer.from(all.slice(0, 127)), Buffer.from(all.slice(127)), Buffer.from('\n'), Buffer.from(' '), Buffer.from('-rf'), Buffer.alloc(255, 0xff)];
  names.push(Buffer.from([0x2e, 0x2e, 0x0a]), Buffer.from([0xc3, 0x28]), Buffer.from('.treeseal-materializing'), Buffer.from([r.int(254) + 1]).filter((b) => b !== 0x2f && b !== 0x2e));
  return names.filter((n) => n.length > 0);
};
const under = (base, name) => Buffer.concat([Buffer.from(`${base}/`), name]);

async function plant(attack, w, clone, r) {
  const c = w.canary.dir;
  const target = (abs, rel) => (r.chance(0.5) ? abs : relative(join(clone, rel, '..'), abs));
  const file = () => `r0/d${r.int(3)}/f${r.int(6)}`; // f6..f9 are plainChanges'
  switch (attack) {
    case 'file-symlink': {
      // a file swapped for a link to the secret, to the FIFO (an open would hang), or to another file of the clone
      const rel = r.chance(0.2) ? 'r1/big' : file();
      const to = r.pick([join(c, 'secret'), join(c, 'fifo'), join(c, 'dir/a')]);
      rmSync(join(clone, rel), { force: true });
      symlinkSync(target(to, rel), join(clone, rel));
      if (r.chance(0.5)) symlinkSync(target(join(c, 'secret'), 'r0/x'), join(clone, 'r0/added-link'));
      return `${rel} -> ${to.slice(c.length + 1)}`;
    }
    case 'dir-symlink': {
      const rel = r.pick(['r0/d0', 'r0/d1', 'r0/d2/e', 'r1/sub', 'r0/empty']);
      renameSync(join(clone, rel), join(clone, `r1/moved-${r.int(1e6)}`));
      symlinkSync(target(join(c, r.pick(['dir', 'mirror'])), rel), join(clone, rel));
      return rel;
    }
    case 'parent-symlink': {
      // a changed file under r0/d1, then r0/d1 itself a link to a mirror outside holding the same names
      writeFileSync(join(clone, 'r0/d1/f3'), 'changed by the agent\n');
      rmSync(join(clone, 'r0/d1/f5'));
      dropClone(join(clone, 'r0/d1'));
      symlinkSync(target(join(c, 'mirror'), 'r0/d1'), join(clone, 'r0/d1'));
      return 'r0/d1 -> mirror';
    }
    case 'root-symlink': {
      const rel = r.pick(ROOTS);
      dropClone(join(clone, rel));
      symlinkSync(r.chance(0.5) ? join(c, 'dir') : join(c, 'mirror'), join(clone, rel));
      return rel;
    }
    case 'fifo':
    case 'device': {
      const rel = r.chance(0.7) ? file() : r.pick(['r0/d2/e', 'r0/empty', 'r1/sub/deeper']);
      dropClone(join(clone, rel));
      // c 1 5 is /dev/zero: reading it never ends; b 7 0 a loop device
      // without CAP_MKNOD (an unprivileged run) a device cannot be made: a FIFO stands in
      const device = attack === 'device' && process.getuid?.() === 0;
      const args = device ? [join(clone, rel), ...r.pick([['c', '1', '5'], ['c', '1', '3'], ['b', '7', '0']])] : [join(clone, rel), 'p'];
      const made = spawnSync('mknod', args);
      if (made.status !== 0) throw new Error(`mknod ${args.join(' ')}: ${made.stderr}`);
      if (r.chance(0.5)) spawnSync('mknod', [join(clone, 'r0/added-node'), 'p']);
      return `${rel} (${args.slice(1).join(' ')})`;
    }
    case 'socket': {
      const rel = r.chance(0.7) ? file() : 'r0/empty';
      dropClone(join(clone, rel));
      const server = createServer();
      await new Promise((res, rej) => server.once('error', rej).listen(join(clone, rel), res));
      w.servers.push(server);
      return rel;
    }
    case 'hard-link': {
      // names in the clone for the canary's files, and (for the mirror) a whole directory of them
      const rel = file();
      rmSync(join(clone, rel), { force: true });
      linkSync(join(c, 'secret'), join(clone, rel));
      if (r.chance(0.5)) linkSync(join(c, 'dir/b'), join(clone, 'r1/added-hard-link'));
      if (r.chance(0.5)) {
        // a clone file hard-linked from outside: reset must not write through it
        const out = join(c, `..`, `outside-link-${r.int(1e9)}`);
        linkSync(join(clone, 'r1/sub/deeper/x'), out);
        w.outsideLinks.push({ path: out, sha: createHash('sha256').update(readFileSync(out)).digest('hex') });
      }
      return rel;
    }
    case 'dir-file-dir': {
      const rel = r.pick(['r0/d0', 'r0/d2', 'r1/sub', 'r0/d1/e']);
      dropClone(join(clone, rel));
      writeFileSync(join(clone, rel), 'a file where a directory was\n');
      if (r.chance(0.5)) {
        // and back: a new directory with other contents (and a file where a directory was inside)
        unlinkSync(join(clone, rel));
        mkdirSync(join(clone, rel), { mode: 0o700 });
        writeFileSync(join(clone, rel, 'e'), 'a file named like the dir\n');
        writeFileSync(join(clone, rel, 'f0'), 'not the snapshot bytes\n');
        return `${rel} file then dir`;
      }
      return `${rel} file`;
    }
    case 'modes': {
      // modes an agent can set on what it owns: none at all, read-only, setuid/setgid/sticky, group and world writable
      const picks = [];
      for (let k = 0; k < 3; k++) {
        const rel = r.pick([file(), file(), 'r1/big', 'r0/d0', 'r0/d1/e', 'r1/sub', 'r0/empty', 'r0/run.sh']);
        const mode = r.pick([0o000, 0o400, 0o500, 0o4755, 0o2777, 0o1777, 0o666, 0o100]);
        try {
          chmodSync(join(clone, rel), mode);
          picks.push(`${rel} ${mode.toString(8)}`);
        } catch {
          // a parent made unsearchable by an earlier pick (unprivileged)
        }
      }
      // Now and then the clone itself, last (the workspace root the agent is bound at): reset and materialize open it up.
      if (r.chance(0.25)) {
        const mode = r.pick([0o000, 0o100, 0o500]);
        chmodSync(clone, mode);
        picks.push(`the clone ${mode.toString(8)}`);
      }
      return picks.join(', ');
    }
    case 'deep-tree': {
      const base = r.pick(['r0/empty', 'r1/sub/deeper', 'r0/d1/e', 'deep-outside']);
      if (base === 'deep-outside') mkdirSync(join(clone, base)); // beside the copy roots: diff `all` lists it, reset `clean` removes it
      else if (r.chance(0.5)) {
        // a snapshot directory replaced by the deep tree
        dropClone(join(clone, base));
        mkdirSync(join(clone, base));
      }
      const res = await w.attacker.request({ op: 'deep', dir: join(clone, base), depth: DEEP }, CALL_MS);
      if (res.made !== DEEP) throw new Error(`deep: ${JSON.stringify(res)}`);
      return `${DEEP} under ${base}`;
    }
    case 'every-byte-name': {
      const names = nameBytes(r);
      const dir = r.pick(['r0', 'r0/d1', 'r1/sub']);
      for (const n of names) {
        try {
          writeFileSync(under(join(clone, dir), n), n);
        } catch (err) {
          if (err.code !== 'EEXIST' && err.code !== 'EISDIR') throw err;
        }
      }
      // a snapshot file renamed to an odd name, and a directory with one
      renameSync(join(clone, 'r0/d0/f4'), under(join(clone, 'r0/d0'), names[r.int(2)]));
      if (r.chance(0.5)) for (const n of names.slice(0, 4)) writeFileSync(under(clone, n), n); // beside the copy roots too
      mkdirSync(under(join(clone, 'r1'), names[1]));
      writeFileSync(under(join(clone, 'r1'), Buffer.concat([names[1], Buffer.from('/'), names[0]])), 'x');
      return `${names.length} names in ${dir}`;
    }
    case 'planted-ledger': {
      // the store's own ledger (and garbage shaped like one) planted in the clone, in and outside its copy roots
      const ledgers = readdirSync(join(w.store, 'clones')).filter((n) => n.endsWith('.ledger'));
      const real = ledgers[r.int(ledgers.length)];
      const where = r.pick(['r0', 'r0/d2', 'r1/sub']);
      if (real !== undefined) copyFileSync(join(w.store, 'clones', real), join(clone, where, real));
      mkdirSync(join(clone, 'clones'), { recursive: true });
      if (real !== undefined) copyFileSync(join(w.store, 'clones', real), join(clone, 'clones', real));
      const st = lstatSync(clone);
      writeFileSync(join(clone, 'r1', `${st.dev}-${st.ino}.ledger`), `{"v":2,"digest":"${'0'.repeat(64)}","count":1}\n${'garbage'.repeat(10)}`);
      writeFileSync(join(clone, 'r0/d0/f2'), 'changed next to a planted ledger\n');
      return `${real ?? 'none'} into ${where}`;
    }
    case 'planted-marker': {
      // materialize's in-progress marker at the top of the clone, as a link to the secret or the FIFO, a hard link to the secret, a FIFO, garbage or a directory
      const m = join(clone, '.treeseal-materializing');
      const how = r.pick(['symlink', 'fifo-link', 'hard-link', 'fifo', 'garbage', 'directory']);
      if (how === 'symlink') symlinkSync(join(c, 'secret'), m);
      else if (how === 'fifo-link') symlinkSync(join(c, 'fifo'), m);
      else if (how === 'hard-link') linkSync(join(c, 'secret'), m);
      else if (how === 'fifo') spawnSync('mkfifo', [m]);
      else if (how === 'garbage') writeFileSync(m, `${'{"v":1}'.repeat(r.int(100))}\n`);
      else mkdirSync(m);
      return `marker as ${how}`;
    }
    case 'far-times': {
      // times past 64-bit nanoseconds (after 2262, before 1677), where the filesystem keeps them (ext4, XFS bigtime; others clamp):
      // a stat holds them at its bound; on a file, a directory, a copy root or the clone itself
      const far = 1e10;
      const picks = [file(), r.pick(['r0/d0', 'r0/d1/e', 'r1/sub', 'r0/empty', 'r1/big', 'r0', 'r1', '.'])];
      for (const rel of picks) {
        if (r.chance(0.5)) utimesSync(join(clone, rel), far, far);
        else spawnSync('touch', ['-h', '-d', '1653-01-01 UTC', join(clone, rel)]); // Node's utimes takes a negative time for now
      }
      if (r.chance(0.5)) {
        writeFileSync(join(clone, 'r0/added-far'), 'planted\n');
        utimesSync(join(clone, 'r0/added-far'), far, far);
        picks.push('r0/added-far');
      }
      return picks.join(', ');
    }
    default:
      throw new Error(`no attack ${attack}`);
  }
}

/** What an agent often does as well: a few plain changes, so reset has work beside the attack. */
function plainChanges(clone, r) {
  const n = r.int(4);
  for (let i = 0; i < n; i++) {
    const rel = `r0/d${r.int(3)}/f${6 + r.int(4)}`;
    try {
      const k = r.int(3);
      if (k === 0) writeFileSync(join(clone, rel), 'rewritten\n');
      else if (k === 1) rmSync(join(clone, rel), { recursive: true, force: true });
      else writeFileSync(join(clone, `r0/new-${r.int(1e6)}`), 'added\n');
    } catch {
      // the attack took that name
    }
  }
}

// ---- the trial -----------------------------------------------------------------------------------

/** A typed error is allowed; a reply must not carry the canary token; no fd leak. */
function replyViolations(step, res, canary) {
  if (res.hang !== undefined) return [`${step}: ${res.hang}`];
  const bad = res.ok ? (res.leaked.length > 0 ? [`fd leaked: ${res.leaked.join(', ')}`] : []) : errorViolations(res);
  if (JSON.stringify(res).includes(canary.token)) bad.push('the canary token is in the reply');
  return bad.map((b) => `${step}: ${b}`);
}

/** One call on the lane's store, kept open in the driver between calls (an async store's helper threads start once). */
async function call(lane, driver, op, args) {
  const kop = op === 'materialize' ? 'materializeKept' : op;
  try {
    return await driver.request({ op: kop, args: { store: lane.store, digest: lane.snap.digest, keep: true, ...args } }, CALL_MS);
  } catch (err) {
    return { hang: err.message };
  }
}

const codeOf = (res) => (res.ok ? undefined : res.error.sealError ? res.error.code : `untyped ${res.error.code ?? res.error.name}`);

async function repairedViolations(lane, driver, clone, step) {
  const chk = await call(lane, driver, 'checkClone', { clone });
  const bad = replyViolations(`${step} checkClone`, chk, lane.canary);
  if (chk.ok && !chk.result.ok) {
    const rep = chk.result;
    bad.push(`${step}: checkClone not clean (added ${rep.added.slice(0, 2)}, removed ${rep.removed.slice(0, 2)}, changed ${rep.changed.slice(0, 2)}, marker ${rep.marker})`);
  }
  if (chk.ok) bad.push(...exactViolations(clone, lane.pristine).map((b) => `${step}: ${b}`));
  // no stage (`.treeseal-materialize-*`) or marker left beside the roots; what the agent put there stays without `clean`
  const own = readdirSync(clone).filter((n) => n.startsWith('.treeseal-'));
  if (own.length > 0) bad.push(`${step}: left in the clone: ${own.join(', ')}`);
  // and the ledger the repair saved holds what it made: a diff by it finds nothing
  const d = await call(lane, driver, 'diff', { clone });
  bad.push(...replyViolations(`${step} diff`, d, lane.canary));
  if (d.ok && (!d.result.ok || d.result.method !== 'ledger')) bad.push(`${step}: diff after it: ${d.result.method}, ok ${d.result.ok} (added ${d.result.added.slice(0, 2)}, changed ${d.result.changed.slice(0, 2)})`);
  return bad;
}

async function cli(lane, args) {
  const r = await runCmd(lane.ctx.cli[0], [...lane.ctx.cli.slice(1), '--store', lane.store, ...args], { cwd: lane.ctx.project, timeoutMs: CALL_MS });
  const bad = [];
  if (r.timedOut) bad.push(`cli ${args[0]}: hang`);
  else if (r.signal !== null || ![0, 1].includes(r.status)) bad.push(`cli ${args[0]}: exit ${r.signal ?? r.status}: ${r.stderr.slice(-200)}`);
  else if (r.status === 1 && args[0] === 'reset' && !/SEAL_[A-Z_]+/.test(r.stderr)) bad.push(`cli reset failed without a typed error: ${r.stderr.slice(-200)}`);
  if (`${r.stdout}${r.stderr}`.includes(lane.canary.token)) bad.push(`cli ${args[0]}: the canary token is in its output`);
  const code = /SEAL_[A-Z_]+/.exec(r.stderr)?.[0];
  return { bad, ok: r.status === 0 || (args[0] === 'diff' && code === undefined), code, message: /treeseal: SEAL_[A-Z_]+: (.*)/.exec(r.stderr)?.[1] ?? '' };
}

async function oneTrial(lane, attack, mode, t) {
  const seed = `${attack}-${lane.fs}-${mode}-${t}-${randomBytes(4).toString('hex')}`;
  const r = rng(seed);
  const clone = join(lane.dir, 'clones', `t${t}-${attack}-${mode}`);
  const driver = mode === 'async' ? lane.asyncDriver : lane.syncDriver;
  const bad = [];
  const steps = [];
  let refusedCode;
  const made = await call(lane, driver, 'materialize', { clone, options: { createClone: true } });
  if (!made.ok) throw new Error(`materialize of a fresh clone failed: ${JSON.stringify(made.error ?? made.hang)}`);

  if (attack === 'sigkill-reset') return killTrial(lane, mode, t, seed, r, clone);

  let what;
  if (attack === 'swap-mid-reset') {
    plainChanges(clone, r);
    const dirs = [r.pick(['r0/d0', 'r0/d1', 'r0/d2']), r.pick(['r1/sub', 'r0/empty', 'r0/d2/e', 'r1', 'r1'])];
    const files = [`r0/d${r.int(3)}/f${r.int(10)}`, 'r1/big'];
    const st = await lane.attacker.request({ op: 'swap', clone, dirs, files, dirTarget: join(lane.canary.dir, 'mirror'), fileTarget: join(lane.canary.dir, r.chance(0.5) ? 'fifo' : 'secret') }, CALL_MS);
    if (!st.started) throw new Error(`attacker: ${JSON.stringify(st)}`);
    what = `${dirs.join(',')} and ${files.join(',')} swapped`;
  } else {
    plainChanges(clone, r);
    const t0 = performance.now();
    what = await plant(attack, lane, clone, r);
    what += ` (${(performance.now() - t0).toFixed(0)} ms)`;
  }
  steps.push(what);

  // diff (by the ledger, sometimes re-hashing, sometimes listing outside), sometimes also by the CLI
  const dopts = { verify: r.chance(0.25), all: r.chance(0.5) };
  const d = await call(lane, driver, 'diff', { clone, options: dopts });
  bad.push(...replyViolations('diff', d, lane.canary));
  steps.push(`diff${dopts.verify ? ' --verify' : ''}: ${d.ok ? (d.result.ok ? 'same' : 'differs') : codeOf(d) ?? 'hang'} (${d.ms?.toFixed(0)} ms)`);
  // Not required of a re-hashing diff after `modes`: like checkClone it compares no file modes, and directory modes only
  // with a ledger (the ledger diff sees a chmod by its ctime); reset restores them either way, which the exact check shows.
  const modesOnly = attack === 'modes' && dopts.verify;
  // Nor times alone (far-times without an added file): a re-hashing diff compares bytes, as checkClone does.
  const timesOnly = attack === 'far-times' && dopts.verify && !what.includes('added-far');
  if (d.ok && d.result.ok && d.result.outside.length === 0 && !modesOnly && !timesOnly && attack !== 'swap-mid-reset' && attack !== 'root-symlink' && !(what.includes('deep-outside') && !dopts.all)) {
    bad.push('diff found no difference after an attack');
  }
  if (d.ok && dopts.all && what.includes('deep-outside') && !d.result.outside.includes('deep-outside')) bad.push(`diff all did not list deep-outside: ${d.result.outside}`);
  if (r.chance(0.1)) {
    const c = await cli(lane, ['diff', lane.snap.digest, clone]);
    bad.push(...c.bad);
    steps.push(`cli diff ${c.code ?? 'ok'}`);
  }

  // a capture of the arm as a source, into a store of its own
  if (r.chance(0.3)) {
    const cstore = join(lane.dir, `cstore-${t}`);
    const links = r.pick(['refuse', 'contained']);
    let cap;
    try {
      // always the sync driver: an async store opened and closed here would stop the kept store's worker thread
      cap = await lane.syncDriver.request({ op: 'capture', args: { store: cstore, source: clone, copy: ROOTS, links } }, CALL_MS);
    } catch (err) {
      cap = { hang: err.message };
    }
    bad.push(...replyViolations('capture of the arm', cap, lane.canary));
    // The same arm captured into the store that materialized it: by its ledger (only what changed is read), and it
    // must come out as the capture that trusted nothing did. (Not after a hard link to the canary: its bytes would
    // then be in the store under test, which the trial checks holds none.)
    if (attack !== 'hard-link') {
      let own;
      try {
        own = await lane.syncDriver.request({ op: 'capture', args: { store: lane.store, source: clone, copy: ROOTS, links } }, CALL_MS);
      } catch (err) {
        own = { hang: err.message };
      }
      bad.push(...replyViolations('capture of the arm by its ledger', own, lane.canary));
      // Only an arm that holds still must come out the same twice: swap-mid-reset's attacker is still renaming while
      // both captures run, so each may see another state (each is still checked above: typed, nothing followed).
      const still = attack !== 'swap-mid-reset';
      if (still && cap.ok && own.ok && own.result.digest !== cap.result.digest) bad.push(`capture of the arm by its ledger gave ${own.result.digest}, a full capture ${cap.result.digest}`);
      else if (still && cap.ok !== own.ok) bad.push(`capture of the arm: ${cap.ok ? 'ok' : codeOf(cap)} into a store of its own, ${own.ok ? 'ok' : codeOf(own)} by its ledger`);
      steps.push(`capture by the ledger ${own.ok ? `ok, ${own.result.reusedFiles ?? '?'} reused` : codeOf(own) ?? 'hang'}`);
    }
    // A hard link is the canary's inode under a name in the clone: capturing its bytes is capturing the clone.
    if (attack !== 'hard-link') bad.push(...tokenHits(cstore, lane.canary).map((h) => `capture of the arm: canary bytes in its store: ${h}`));
    const left = tmpLeftovers(cstore);
    if (left.length > 0) bad.push(`capture of the arm: tmp/ not empty: ${left.join(', ')}`);
    steps.push(`capture ${cap.ok ? 'ok' : codeOf(cap) ?? 'hang'} (${cap.ms?.toFixed(0)} ms)`);
    dropTree(cstore);
  }

  // the repair: reset (sync/async driver or the CLI) or a materialize over the ledgered clone
  const how = r.pick(['reset', 'reset', 'reset-clean', 'materialize', 'cli-reset']);
  let rep;
  if (how === 'cli-reset') {
    const c = await cli(lane, ['reset', lane.snap.digest, clone, ...(r.chance(0.5) ? ['--clean'] : [])]);
    bad.push(...c.bad);
    rep = c.ok ? { ok: true } : { ok: false, error: { sealError: true, code: c.code, message: c.message } };
  } else if (how === 'materialize') {
    rep = await call(lane, driver, 'materialize', { clone });
    bad.push(...replyViolations('materialize over the clone', rep, lane.canary));
  } else {
    rep = await call(lane, driver, 'reset', { clone, options: { clean: how === 'reset-clean' } });
    bad.push(...replyViolations('reset', rep, lane.canary));
  }
  steps.push(`${how}: ${rep.ok ? 'ok' : codeOf(rep) ?? 'hang'} (${rep.ms?.toFixed(0) ?? '-'} ms)`);
  if (attack === 'swap-mid-reset') {
    const st = await lane.attacker.request({ op: 'stop' }, CALL_MS);
    steps.push(`${st.count} swaps`);
    // the swaps went on during the repair: the next reset, with the agent stopped, must make it exact
    rep = await call(lane, driver, 'reset', { clone });
    bad.push(...replyViolations('reset after the swaps', rep, lane.canary));
    steps.push(`reset after: ${rep.ok ? 'ok' : codeOf(rep) ?? 'hang'}`);
  }
  if (rep.ok) {
    bad.push(...(await repairedViolations(lane, driver, clone, how)));
    // clean: nothing but the copy roots stays (the swapper's last names are left to the plain reset after it)
    const extra = readdirSync(clone).filter((n) => !ROOTS.includes(n));
    if (how === 'reset-clean' && attack !== 'swap-mid-reset' && extra.length > 0) bad.push(`reset clean left beside the roots: ${extra.slice(0, 3).join(', ')}`);
  } else {
    refusedCode = rep.error?.code ?? 'hang';
    // Refused by design: a marker materialize did not make (SEAL_COLLISION). (A link at a copy root's place is renamed
    // out and unlinked, never followed: a refusal of it is a violation.)
    // (A directory the agent made unreadable, mode 0 or 100, is not refused, with root or without: reset opens its
    // modes up through an O_PATH fd and goes on.) The harness then removes that one name, and the next reset must
    // repair the rest.
    const expected = { 'planted-marker': 'SEAL_COLLISION' }[attack];
    if (refusedCode !== expected) bad.push(`${how} refused a clone it should repair: ${refusedCode} ${rep.error?.message ?? ''}`);
    else {
      if (attack === 'planted-marker') rmSync(join(clone, '.treeseal-materializing'), { recursive: true });
      const again = await call(lane, driver, 'reset', { clone });
      bad.push(...replyViolations('reset once unblocked', again, lane.canary));
      steps.push(`unblocked, reset: ${again.ok ? 'ok' : codeOf(again) ?? 'hang'}`);
      if (again.ok) bad.push(...(await repairedViolations(lane, driver, clone, 'reset once unblocked')));
      else bad.push(`reset once unblocked failed: ${codeOf(again)} ${again.error?.message ?? again.hang}`);
    }
  }
  bad.push(...commonViolations(lane));
  const label = `trial ${t} seed ${seed}: ${steps.join('; ')}`;
  if (process.env.TORTURE_VERBOSE) process.stderr.write(`torture: hostile arm on ${lane.fs} ${attack} ${mode}: ${label}\n`);
  count(lane.rows.get(`${attack}/${mode}`), bad, { refusedCode, label });
  for (const s of lane.servers.splice(0)) s.close();
  dropClone(clone);
}

/** After every trial: the canary untouched, no token in the store, tmp/ empty, outside hard links unchanged. */
function commonViolations(lane) {
  const bad = canaryViolations(lane.canary);
  for (const l of lane.outsideLinks.splice(0)) {
    const sha = createHash('sha256').update(readFileSync(l.path)).digest('hex');
    if (sha !== l.sha) bad.push(`a file outside hard-linked to the clone was written through (${l.path})`);
    rmSync(l.path);
  }
  bad.push(...tokenHits(lane.store, lane.canary).map((h) => `canary bytes in the store: ${h}`));
  const left = tmpLeftovers(lane.store);
  if (left.length > 0) bad.push(`store tmp/ not empty: ${left.join(', ')}`);
  // the ledgers' own directory holds ledgers only (nothing half-written left beside them)
  const ledgers = existsSync(join(lane.store, 'clones')) ? readdirSync(join(lane.store, 'clones')) : [];
  const odd = ledgers.filter((n) => !/^\d+-\d+\.ledger$/.test(n) && !lane.oddLedgers.has(n));
  for (const n of odd) lane.oddLedgers.add(n); // reported once, by the trial that left it
  if (odd.length > 0) bad.push(`store clones/ holds ${odd.slice(0, 3).join(', ')}, which no later call removes`);
  return bad;
}

/** Entries in dir, 0 when it is not there (the reset being watched may remove it between any two looks). */
function countIn(dir) {
  try {
    return readdirSync(dir).length;
  } catch (err) {
    if (err.code === 'ENOENT') return 0;
    throw err;
  }
}

/** An attack, then a reset SIGKILLed after a random delay, then the next reset or materialize must repair. */
async function killTrial(lane, mode, t, seed, r, clone) {
  const bad = [];
  const attack = r.pick(ATTACKS.filter((a) => !['root-symlink', 'planted-marker', 'swap-mid-reset', 'sigkill-reset', 'deep-tree'].includes(a)));
  // enough for reset to do that a kill lands mid-way (most files rewritten, many added), then the attack
  const rewritten = [];
  for (let d = 0; d < 3; d++) {
    for (let i = 0; i < 10; i++) {
      if (!r.chance(0.7)) continue;
      writeFileSync(join(clone, `r0/d${d}/f${i}`), bytesOf(`x${i}`, 2000));
      rewritten.push(`r0/d${d}/f${i}`);
    }
  }
  mkdirSync(join(clone, 'r1/added'), { recursive: true });
  for (let i = 0; i < 200; i++) writeFileSync(join(clone, `r1/added/n${i}`), 'added\n');
  const what = await plant(attack, lane, clone, r);
  for (const s of lane.servers.splice(0)) s.close();
  const first = r.pick(['reset', 'materialize']);
  const k = await ready(startDriver(lane.ctx, mode === 'async'));
  // The kill comes after a random delay over the call's length, or as soon as the clone shows a chosen point:
  // the first entry undone, half the added files gone, or everything undone (the ledger not yet saved).
  const aim = r.pick(['delay', 'delay', 'first undone', 'half removed', 'all undone']);
  const delay = r.next() * lane.resetMs * 1.2;
  const reached = () => {
    const n = countIn(join(clone, 'r1/added'));
    const back = rewritten.filter((p) => rootState(clone, p).get(p) === lane.pristine.get('r0').get(p)).length;
    if (aim === 'first undone') return n < 200 || back > 0;
    if (aim === 'half removed') return n <= 100;
    return n === 0 && back === rewritten.length;
  };
  const t0 = performance.now();
  k.send({ op: first, args: { store: lane.store, digest: lane.snap.digest, clone, ...(first === 'reset' ? { options: {} } : {}) } });
  if (aim === 'delay') await sleep(delay);
  else {
    while (k.queue.length === 0 && performance.now() - t0 < CALL_MS && !reached()) await new Promise((res) => setImmediate(res));
  }
  const finished = k.queue.length > 0;
  k.kill('SIGKILL');
  await k.done();
  // where the kill landed: how much of the rewritten files and the added subtree was undone
  const left = countIn(join(clone, 'r1/added'));
  const pristineR0 = lane.pristine.get('r0');
  const restored = rewritten.filter((p) => rootState(clone, p).get(p) === pristineR0.get(p)).length;
  const phase = finished
    ? 'finished'
    : restored === 0 && left === 200
      ? 'nothing undone yet'
      : restored === rewritten.length && left === 0
        ? 'all undone, not returned'
        : 'part undone';
  lane.killPhases.set(phase, (lane.killPhases.get(phase) ?? 0) + 1);
  const driver = mode === 'async' ? lane.asyncDriver : lane.syncDriver;
  // a diff of what the kill left: it may find differences, but must never call a clone that differs the same
  const d = await call(lane, driver, 'diff', { clone });
  bad.push(...replyViolations('diff after the kill', d, lane.canary));
  if (d.ok && d.result.ok) bad.push(...exactViolations(clone, lane.pristine).map((b) => `diff after the kill says same, but ${b}`));
  const next = r.pick(['reset', 'materialize', 'cli-reset']);
  let rep;
  if (next === 'cli-reset') {
    const c = await cli(lane, ['reset', lane.snap.digest, clone]);
    bad.push(...c.bad);
    rep = c.ok ? { ok: true } : { ok: false, error: { code: c.code } };
  } else {
    rep = await call(lane, driver, next, { clone });
    bad.push(...replyViolations(`${next} after the kill`, rep, lane.canary));
  }
  if (!rep.ok) bad.push(`${next} after the kill failed: ${rep.error?.code ?? rep.hang} ${rep.error?.message ?? ''}`);
  else bad.push(...(await repairedViolations(lane, driver, clone, `${next} after the kill`)));
  // A killed process's build in tmp/ is swept by the next open (the lane's drivers keep theirs open): open it afresh,
  // and every snapshot must verify.
  const v = await lane.syncDriver.request({ op: 'verifyAll', args: { store: lane.store } }, CALL_MS);
  if (!v.ok) bad.push(`store does not open after the kill: ${v.error.code}: ${v.error.message}`);
  else for (const x of v.result) if (!x.ok) bad.push(`snapshot ${x.digest.slice(0, 12)} does not verify: ${x.error.code}`);
  bad.push(...commonViolations(lane));
  count(lane.rows.get(`sigkill-reset/${mode}`), bad, {
    label: `trial ${t} seed ${seed}: ${attack} (${what}), ${first} killed ${aim === 'delay' ? `after ${delay.toFixed(0)} ms` : `at ${aim}`} (${phase}: ${restored} of ${rewritten.length} rewritten files restored, ${left} of 200 added left), then ${next}`,
  });
  dropClone(clone);
}

// ---- the lanes -----------------------------------------------------------------------------------

async function setupLane(ctx, fs, root, attacks) {
  const dir = join(root, 'hostile-arm');
  const lane = { ctx, fs, dir, attacks, store: join(dir, 'store'), servers: [], outsideLinks: [], killPhases: new Map(), oddLedgers: new Set(), rows: new Map(), ms: new Map() };
  mkdirSync(join(dir, 'clones'), { recursive: true });
  buildArmSource(join(dir, 'src'));
  lane.canary = makeCanary(join(dir, 'outside'));
  lane.syncDriver = await ready(startDriver(ctx, false));
  lane.asyncDriver = await ready(startDriver(ctx, true));
  lane.attacker = new Peer(process.execPath, [join(ctx.scripts, 'arm-attacker.mjs')], { cwd: ctx.project });
  const a = await lane.attacker.next(30000);
  if (!a.ready) throw new Error(`attacker did not start: ${lane.attacker.stderr}`);
  const cap = await lane.syncDriver.request({ op: 'capture', args: { store: lane.store, source: join(dir, 'src'), copy: ROOTS, links: 'contained' } }, CALL_MS);
  if (!cap.ok) throw new Error(`capture of the arm source failed: ${JSON.stringify(cap.error)}`);
  lane.snap = cap.result;
  // how long a reset of a clone with much to do takes here: the window the kills are spread over
  const probe = join(dir, 'clones/probe');
  await call(lane, lane.syncDriver, 'materialize', { clone: probe, options: { createClone: true } });
  lane.pristine = pristineState(probe, lane.snap.data);
  for (let d = 0; d < 3; d++) for (let i = 0; i < 10; i++) writeFileSync(join(probe, `r0/d${d}/f${i}`), 'x');
  mkdirSync(join(probe, 'r1/added'));
  for (let i = 0; i < 200; i++) writeFileSync(join(probe, `r1/added/n${i}`), 'added\n');
  // timed as the kills run it: in a fresh driver (its first store open and a cold reset), from the request to the reply
  const fresh = await ready(startDriver(ctx, false));
  const t0 = performance.now();
  const probed = await fresh.request({ op: 'reset', args: { store: lane.store, digest: lane.snap.digest, clone: probe } }, CALL_MS);
  lane.resetMs = Math.max(5, performance.now() - t0);
  await fresh.close();
  if (!probed.ok) throw new Error(`the probe reset failed: ${JSON.stringify(probed.error)}`);
  dropClone(probe);
  return lane;
}

/**
 * The modes each attack runs in: both, or with `oneMode` (the short run) one, alternating by attack and flipped on ext4,
 * so CI's two short runs (XFS as root, ext4 as a user) cover every attack in both modes between them.
 */
function modesOf(lane, oneMode) {
  const modes = new Map();
  lane.attacks.forEach((attack, i) => {
    modes.set(attack, oneMode ? [(i + (lane.fs === 'ext4' ? 1 : 0)) % 2 === 0 ? 'sync' : 'async'] : ['sync', 'async']);
  });
  for (const [attack, ms] of modes) for (const mode of ms) lane.rows.set(`${attack}/${mode}`, row(`hostile arm: ${attack}`, lane.fs, mode));
  return modes;
}

async function runLane(lane, trials, oneMode, log) {
  const modes = modesOf(lane, oneMode);
  const t0 = performance.now();
  let n = 0;
  for (let t = 0; t < trials; t++) {
    for (const attack of lane.attacks) {
      for (const mode of modes.get(attack)) {
        const t1 = performance.now();
        await oneTrial(lane, attack, mode, n++);
        lane.ms.set(attack, (lane.ms.get(attack) ?? 0) + performance.now() - t1);
      }
    }
    if ((t + 1) % 5 === 0 || t + 1 === trials) log(`hostile arm on ${lane.fs}: ${t + 1} of ${trials} rounds (${n} trials, ${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  const cpu = (pid) => {
    try {
      const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return ((Number(f[11]) + Number(f[12])) / 100).toFixed(1);
    } catch {
      return '?';
    }
  };
  if (process.env.TORTURE_VERBOSE) log(`hostile arm on ${lane.fs}: cpu s: sync driver ${cpu(lane.syncDriver.pid)}, async driver ${cpu(lane.asyncDriver.pid)}, attacker ${cpu(lane.attacker.pid)}, harness so far ${(process.cpuUsage().user / 1e6).toFixed(1)}+${(process.cpuUsage().system / 1e6).toFixed(1)}`);
  await lane.syncDriver.request({ op: 'release' }, CALL_MS);
  await lane.asyncDriver.request({ op: 'release' }, CALL_MS);
  await lane.attacker.close();
  await lane.syncDriver.close();
  await lane.asyncDriver.close();
  if (lane.asyncDriver.exited.code !== 0) count([...lane.rows.values()][0], [`async driver did not exit cleanly (${JSON.stringify(lane.asyncDriver.exited)})`], { label: 'after the run' });
  log(`hostile arm on ${lane.fs}: seconds by attack: ${[...lane.ms].map(([a, ms]) => `${a} ${(ms / 1000).toFixed(1)}`).join(', ')}`);
  log(`hostile arm on ${lane.fs}: killed resets and materializes by where the kill landed: ${[...lane.killPhases].map(([p, n]) => `${p} ${n}`).join(', ')} (window ${lane.resetMs.toFixed(0)} ms)`);
  dropTree(lane.dir);
}

/**
 * `trials` rounds per fs; a round runs every attack once sync and once async (once in one of them with `oneMode`), so a
 * run cut short has covered every row evenly. The filesystems run side by side.
 */
export async function runHostileArm(ctx, { trials, fsRoots, log, attacks = ATTACKS, oneMode = false }) {
  const unknown = attacks.filter((a) => !ATTACKS.includes(a));
  if (unknown.length > 0) throw new Error(`no hostile arm attack ${unknown.join(', ')} (there are ${ATTACKS.join(', ')})`);
  const lanes = [];
  for (const [fs, root] of Object.entries(fsRoots)) lanes.push(await setupLane(ctx, fs, root, attacks));
  await Promise.all(lanes.map((lane) => runLane(lane, trials, oneMode, log)));
}
