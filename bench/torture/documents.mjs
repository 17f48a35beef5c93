// documents.mjs: malformed-input cases that plant a snapshot document capture would refuse, every digest recomputed as an
// attacker who controls the whole manifest.json would, then run each command that loads it; plus arguments that are not UTF-8.
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const sha = (text) => createHash('sha256').update(text).digest('hex');
/** Canonical JSON (sorted keys, no spaces) for the ASCII-only documents made here. */
export const canon = (v) =>
  Array.isArray(v) ? `[${v.map(canon).join(',')}]` : v !== null && typeof v === 'object' ? `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}` : JSON.stringify(v);

const EMPTY = sha('');
const dir = (path) => ({ kind: 'directory', path, size: 0, sha256: '', mode: 0, link_target: '' });
const file = (path, mode = 0) => ({ kind: 'file', path, size: 0, sha256: EMPTY, mode, link_target: '' });
const link = (path, target) => ({ kind: 'symlink', path, size: target.length, sha256: sha(target), mode: 0, link_target: target });

export function valid(source) {
  return {
    source,
    revision: '',
    declarations: ['tree'],
    entries: [dir('tree'), file('tree/a')],
    mounts: [{ source: 'deps', target: 'node_modules', kind: 'directory', entries: [dir('payload'), file('payload/i.js', 0o644)] }],
  };
}

/** The document text and digest, every total and digest recomputed from the (mutated) parts. */
export function encode(d) {
  const mounts = d.mounts.map((m) => ({ ...m, total_bytes: m.entries.reduce((n, e) => n + (e.kind === 'file' || e.kind === 'symlink' ? e.size : 0), 0) }));
  const manifest_digest = sha(canon(d.entries));
  const mount_content_digest = sha(canon(mounts.map((m) => ({ entries: m.entries }))));
  const mount_manifest_digest = sha(canon({ dependencies: mounts.map((m) => ({ content: { entries: m.entries }, source: m.source, target: m.target })), schema_version: 1 }));
  const digest = sha(
    canon({ declarations: d.declarations, dependency_content_digest: mount_content_digest, dependency_manifest_digest: mount_manifest_digest, harness_identity: '', manifest_digest, repo_identity: d.source, resolved_sha: d.revision, schema_version: 3 }),
  );
  const total_bytes = mounts.reduce((n, m) => n + m.total_bytes, 0);
  const doc = { schema_version: 3, digest, manifest_digest, source: d.source, revision: d.revision, declarations: d.declarations, total_bytes, entries: d.entries, mounts, mount_content_digest, mount_manifest_digest };
  return { digest, text: `${canon(doc)}\n` };
}

/** Plants the document as a published snapshot of s.store (its payload directories too); returns its digest. */
function plant(s, mutate) {
  const d = valid(s.src);
  mutate(d, s);
  const { digest, text } = encode(d);
  const root = join(s.store, 'snapshots', digest);
  mkdirSync(join(root, 'copy', 'tree'), { recursive: true });
  writeFileSync(join(root, 'copy', 'tree', 'a'), '');
  d.mounts.forEach((_m, i) => mkdirSync(join(root, 'mounts', String(i).padStart(5, '0'), 'payload'), { recursive: true }));
  writeFileSync(join(root, 'manifest.json'), text);
  s.crafted = digest;
  return digest;
}

export const MUTATIONS = [
  ['target climbing out of the clone', (d) => (d.mounts[0].target = '../../outside/newdir/sub/created-file')],
  ['target over /usr/bin', (d) => (d.mounts[0].target = '../usr/bin')],
  ['absolute target', (d) => (d.mounts[0].target = '/etc')],
  ['empty target', (d) => (d.mounts[0].target = '')],
  ['target "."', (d) => (d.mounts[0].target = '.')],
  ['target on the marker', (d) => (d.mounts[0].target = '.treeseal-materializing')],
  ['target on a copy root', (d) => (d.mounts[0].target = 'tree')],
  ['target inside a copy root', (d) => (d.mounts[0].target = 'tree/x')],
  ['two mounts on one target', (d) => d.mounts.push({ ...d.mounts[0], source: 'other' })],
  ['overlapping copy roots', (d) => d.declarations.push('tree/a')],
  ['copy root with no entry', (d) => d.declarations.push('lib')],
  ['copy root climbing out', (d) => (d.declarations[0] = '../outside')],
  ['escaping payload symlink', (d) => d.mounts[0].entries.push(link('payload/esc', '../../../../../../../../outside'))],
  ['absolute payload symlink', (d) => d.mounts[0].entries.push(link('payload/esc', '/etc'))],
  ['symlink in a copy root', (d) => d.entries.push(link('tree/l', '../../outside'))],
  ['entry path with ..', (d) => d.entries.push(file('tree/../../outside/key'))],
  ['name over 255 bytes', (d) => d.entries.push(file(`tree/${'n'.repeat(300)}`))],
];

const COMMANDS = [
  ['mounts', (s) => ['mounts', s.crafted, s.clone]],
  ['materialize', (s) => ['materialize', s.crafted, s.clone]],
  ['verify', (s) => ['verify', s.crafted]],
];

export const DOCUMENT_CASES = [
  ...MUTATIONS.flatMap(([what, mutate]) =>
    COMMANDS.map(([command, args]) => ({
      group: 'document',
      name: `${command}: planted document, ${what}`,
      setup: (s) => plant(s, mutate),
      cli: (s) => ['--store', s.store, ...args(s)],
      may: ['clone', 'store'],
      codes: ['SEAL_CORRUPT'],
    })),
  ),
  ...['ff', 'fe', 'c0'].map((byte) => ({
    group: 'cli',
    name: `materialize: a clone path with byte \\x${byte}`,
    bash: (s, c) => `exec ${c} --store '${s.store}' materialize '${s.digest}' '${s.clone}/c'$'\\x${byte}'`,
    codes: ['SEAL_BAD_PATH'],
  })),
  ...['', 'relative', '/a/../b', '//ws'].map((workspace) => ({
    group: 'cli',
    name: `mounts: --workspace '${workspace}'`,
    cli: (s) => ['--store', s.store, 'mounts', s.digest, s.clone, '--workspace', workspace],
    codes: ['SEAL_BAD_PATH'],
  })),
];
