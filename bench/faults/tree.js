// tree.js: what a directory tree holds (kinds, modes, bytes, link targets), compared before and after a faulted run.
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** rel -> 'dir 700' | 'file 400 <sha256>' | 'link <target>' for everything below root. */
export function treeState(root) {
  const out = new Map();
  const walk = (dir, rel) => {
    let names;
    try {
      names = readdirSync(dir).sort();
    } catch {
      out.set(rel, 'unreadable');
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      const r = rel === '' ? name : `${rel}/${name}`;
      const st = lstatSync(path);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) out.set(r, `link ${readlinkSync(path)}`);
      else if (st.isDirectory()) {
        out.set(r, `dir ${mode}`);
        walk(path, r);
      } else if (st.isFile()) {
        let digest = 'unreadable';
        try {
          digest = createHash('sha256').update(readFileSync(path)).digest('hex');
        } catch {
          // a 0000 file: the mode tells
        }
        out.set(r, `file ${mode} ${digest}`);
      } else out.set(r, `special ${mode}`);
    }
  };
  walk(root, '');
  return out;
}

/** The entries of state at rel or below it. */
export function subtree(state, rel) {
  const out = new Map();
  for (const [k, v] of state) if (k === rel || k.startsWith(`${rel}/`)) out.set(k, v);
  return out;
}

/** The entries of state outside every rel in rels. */
export function outside(state, rels) {
  const out = new Map();
  for (const [k, v] of state) if (!rels.some((rel) => k === rel || k.startsWith(`${rel}/`))) out.set(k, v);
  return out;
}

/** The first difference between two states, or undefined. */
export function firstDiff(a, b) {
  for (const [k, v] of a) if (b.get(k) !== v) return `${k}: ${v} -> ${b.get(k) ?? 'missing'}`;
  for (const [k, v] of b) if (!a.has(k)) return `${k}: appeared (${v})`;
  return undefined;
}

/** Removes a tree whatever its modes (frozen snapshots included). */
export function forceRemove(path) {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return;
  }
  if (st.isDirectory()) {
    chmodSync(path, 0o700);
    for (const name of readdirSync(path)) forceRemove(join(path, name));
  }
  rmSync(path, { recursive: true, force: true });
}

/** Writes a tree: values are contents, null for a directory, { link } for a symlink, { mode, data } for a file mode. */
export function writeTree(root, tree) {
  for (const [rel, content] of Object.entries(tree)) {
    const path = join(root, rel);
    if (content === null) {
      mkdirSync(path, { recursive: true });
      continue;
    }
    mkdirSync(dirname(path), { recursive: true });
    if (typeof content === 'object' && !Buffer.isBuffer(content) && 'link' in content) symlinkSync(content.link, path);
    else if (typeof content === 'object' && !Buffer.isBuffer(content)) writeFileSync(path, content.data, { mode: content.mode });
    else writeFileSync(path, content);
  }
}
