// oracle.mjs: the race trials' known versions: how each source tree is made, every byte string a
// file can really have had, and the check of a captured snapshot against them.
import { createHash } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export const KINDS = ['append', 'rewrite', 'truncate', 'rename', 'file-symlink', 'dir-symlink', 'listing', 'chmod', 'fifo'];
export const F_SIZE = 1024 * 1024 + 200 * 1024 + 7; // more than one 1 MiB read chunk
export const APPEND_SIZE = 16 * 1024;
export const MAX_APPENDS = 160;
export const LISTING_STATIC = 200;

/** A version's bytes: its 32-byte tag hash repeated, so the first 32 bytes name the version. */
export function gen(seed, tag, size) {
  return Buffer.alloc(size, tagHash(seed, tag));
}

function tagHash(seed, tag) {
  return createHash('sha256').update(`${seed}:${tag}`).digest();
}

export function listingSize(i) {
  return 1000 + (i % 7) * 1000;
}

/** The secret outside every source: a file and a directory whose bytes must never be captured. */
export function makeSecret(dir, token) {
  mkdirSync(join(dir, 'dir'), { recursive: true });
  const bytes = Buffer.alloc(64 * 1024, token);
  writeFileSync(join(dir, 'key'), bytes);
  writeFileSync(join(dir, 'dir/a'), bytes);
  writeFileSync(join(dir, 'dir/b'), bytes);
  return { dir, key: join(dir, 'key'), token };
}

/** Writes the trial's source tree (tree/ is captured, staging/ holds the mutator's alternates). */
export function buildSource(src, { kind, seed, secret, trial }) {
  const tree = join(src, 'tree');
  mkdirSync(join(tree, 'sub'), { recursive: true });
  mkdirSync(join(tree, 'd'), { recursive: true });
  mkdirSync(join(src, 'staging'), { recursive: true });
  writeFileSync(join(tree, 's1'), gen(seed, 's1', 4096));
  writeFileSync(join(tree, 'sub/s2'), gen(seed, 's2', 20000));
  writeFileSync(join(tree, 'f'), gen(seed, 'v0', F_SIZE));
  writeFileSync(join(tree, 'd/a'), gen(seed, 'a', 8192));
  writeFileSync(join(tree, 'd/b'), gen(seed, 'b', 300 * 1024));
  if (kind === 'listing') {
    for (let i = 0; i < LISTING_STATIC; i++) writeFileSync(join(tree, `d/c${i}`), gen(seed, `c${i}`, 512));
  }
  // Absolute and relative links to the secret, alternately.
  const toKey = trial % 2 === 0 ? secret.key : relative(tree, secret.key);
  const toDir = trial % 2 === 0 ? join(secret.dir, 'dir') : relative(tree, join(secret.dir, 'dir'));
  if (kind === 'file-symlink') symlinkSync(toKey, join(src, 'staging/alt'));
  if (kind === 'dir-symlink') symlinkSync(toDir, join(src, 'staging/alt'));
}

/** The expected bytes of every path that never changes. */
function staticBytes(seed, kind) {
  const out = new Map([
    ['s1', () => gen(seed, 's1', 4096)],
    ['sub/s2', () => gen(seed, 's2', 20000)],
    ['d/a', () => gen(seed, 'a', 8192)],
    ['d/b', () => gen(seed, 'b', 300 * 1024)],
  ]);
  if (kind === 'listing') for (let i = 0; i < LISTING_STATIC; i++) out.set(`d/c${i}`, () => gen(seed, `c${i}`, 512));
  return out;
}

function isAppendVersion(seed, bytes, count) {
  const extra = bytes.length - F_SIZE;
  if (extra < 0 || extra % APPEND_SIZE !== 0 || extra / APPEND_SIZE > count) return false;
  if (!bytes.subarray(0, F_SIZE).equals(gen(seed, 'v0', F_SIZE))) return false;
  for (let k = 0; k < extra / APPEND_SIZE; k++) {
    const at = F_SIZE + k * APPEND_SIZE;
    if (!bytes.subarray(at, at + APPEND_SIZE).equals(gen(seed, `a${k}`, APPEND_SIZE))) return false;
  }
  return true;
}

/** Whether bytes is a version tree/f really had, given how many mutations the mutator made. */
function isVersionOfF(kind, seed, bytes, count) {
  const v0 = () => gen(seed, 'v0', F_SIZE);
  switch (kind) {
    case 'append':
      return isAppendVersion(seed, bytes, count);
    case 'truncate':
      return bytes.length === 0 || bytes.equals(v0()) || bytes.equals(v0().subarray(0, F_SIZE >> 1));
    case 'rewrite':
    case 'rename': {
      if (bytes.length !== F_SIZE) return false;
      const head = bytes.subarray(0, 32);
      const prefix = kind === 'rewrite' ? 'v' : 'r';
      if (head.equals(tagHash(seed, 'v0'))) return bytes.equals(v0());
      for (let i = 1; i <= count; i++) {
        if (head.equals(tagHash(seed, `${prefix}${i}`))) return bytes.equals(gen(seed, `${prefix}${i}`, F_SIZE));
      }
      return false;
    }
    default:
      return bytes.equals(v0());
  }
}

/** Which versions' bytes a torn file holds, page by page: "0-1048576:v12 1048576-1228807:v13". */
export function describeVersions(seed, bytes, count) {
  const names = new Map();
  for (const tag of ['v0', 's1', 's2', 'a', 'b']) names.set(tagHash(seed, tag).toString('hex'), tag);
  for (let i = 1; i <= Math.min(count, 100000); i++) {
    for (const p of ['v', 'r', 'a']) names.set(tagHash(seed, `${p}${p === 'a' ? i - 1 : i}`).toString('hex'), `${p}${p === 'a' ? i - 1 : i}`);
  }
  const segs = [];
  for (let at = 0; at < bytes.length; at += 4096) {
    const head = bytes.subarray(at, Math.min(at + 32, bytes.length)).toString('hex');
    const name = [...names].find(([h]) => h.startsWith(head))?.[1] ?? (bytes[at] === 0 ? 'zeros' : '?');
    const last = segs[segs.length - 1];
    if (last?.name === name) last.end = Math.min(at + 4096, bytes.length);
    else segs.push({ start: at, end: Math.min(at + 4096, bytes.length), name });
  }
  return segs.map((s) => `${s.start}-${s.end}:${s.name}`).join(' ');
}

/**
 * Checks the files of a captured tree (path relative to tree/ -> { kind, bytes | target }) against
 * the versions they really had. Returns violation messages (empty when it is right).
 */
export function checkTree(files, { kind, seed, count }) {
  const bad = [];
  const statics = staticBytes(seed, kind);
  for (const [path, expect] of statics) {
    const got = files.get(path);
    if (got === undefined) bad.push(`missing ${path}`);
    else if (got.kind !== 'file' || !got.bytes.equals(expect())) bad.push(`${path} is not its only version`);
  }
  for (const dir of ['', 'sub', 'd']) {
    if (files.get(dir)?.kind !== 'directory') bad.push(`directory ${dir || '.'} missing or not a directory`);
  }
  const f = files.get('f');
  if (f === undefined) bad.push('missing f');
  else if (f.kind !== 'file') bad.push(`f captured as a ${f.kind}`);
  else if (!isVersionOfF(kind, seed, f.bytes, count)) {
    bad.push(`f (${f.bytes.length} bytes) is not a version it had: ${describeVersions(seed, f.bytes, count)}`);
  }
  for (const [path, got] of files) {
    if (statics.has(path) || path === 'f' || ['', 'sub', 'd'].includes(path)) continue;
    const m = /^d\/n(\d+)$/.exec(path);
    if (kind === 'listing' && m !== null && got.kind === 'file') {
      const i = Number(m[1]);
      if (i >= count || !got.bytes.equals(gen(seed, `n${i}`, listingSize(i)))) bad.push(`${path} is not a version it had`);
      continue;
    }
    bad.push(`unexpected ${got.kind} ${path}`);
  }
  return bad;
}

/** Reads a captured tree from a snapshot on disk, entry by entry as its manifest lists them. */
export function readCaptured(root, data, mount) {
  const entries = mount ? data.mounts[0]?.entries ?? [] : data.entries;
  const top = mount ? 'payload' : 'tree';
  const base = mount ? join(root, 'mounts/00000') : join(root, 'copy');
  const files = new Map();
  for (const e of entries) {
    const rel = e.path === top ? '' : e.path.startsWith(`${top}/`) ? e.path.slice(top.length + 1) : `?${e.path}`;
    const abs = join(base, e.path);
    if (e.kind === 'file') files.set(rel, { kind: 'file', bytes: readFileSync(abs), sha256: e.sha256 });
    else if (e.kind === 'symlink') files.set(rel, { kind: 'symlink', target: readlinkSync(abs) });
    else files.set(rel, { kind: e.kind });
  }
  return files;
}

/** Every place in a tree (file bytes, link targets, names) where the secret's bytes or path appear. */
export function secretHits(dir, secret) {
  const hits = [];
  const needle = secret.token;
  const path = Buffer.from(secret.dir);
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const abs = join(d, name);
      const st = lstatSync(abs);
      if (st.isDirectory()) walk(abs);
      else if (st.isSymbolicLink()) {
        if (readlinkSync(abs).includes(secret.dir)) hits.push(`${abs} -> secret`);
      } else if (st.isFile()) {
        const bytes = readFileSync(abs);
        if (bytes.includes(needle) || bytes.includes(path)) hits.push(abs);
      }
    }
  };
  walk(dir);
  return hits;
}

export function sha256(bytes) {
  return createHash('sha256').update(bytes).digest('hex');
}
