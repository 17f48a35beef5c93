// documents.ts: snapshot documents as an attacker who controls the whole manifest.json writes them (every digest recomputed), and the cases capture would refuse.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { computeDigests, documentText, sha256Hex } from '../../dist/internal.js';

export type Entry = { kind: 'directory' | 'file' | 'symlink'; path: string; size: number; sha256: string; mode: number; link_target: string; mtime_ns?: string };
export type Mount = { source: string; target: string; kind: 'directory' | 'file'; totalBytes: number; entries: Entry[] };
export interface Doc {
  source: string;
  revision: string;
  declarations: string[];
  exclude?: string[];
  entries: Entry[];
  mounts: Mount[];
  totalBytes: number;
}

const EMPTY = sha256Hex(Buffer.alloc(0));
const dir = (path: string): Entry => ({ kind: 'directory', path, size: 0, sha256: '', mode: 0, link_target: '' });
const file = (path: string, mode = 0): Entry => ({ kind: 'file', path, size: 0, sha256: EMPTY, mode, link_target: '' });
const link = (path: string, target: string): Entry => ({ kind: 'symlink', path, size: Buffer.byteLength(target), sha256: sha256Hex(Buffer.from(target)), mode: 0, link_target: target });
const linkBytes = (entries: Entry[]): number => entries.reduce((n, e) => n + (e.kind === 'symlink' || e.kind === 'file' ? e.size : 0), 0);

/** A well-formed document with contained copy-root links (as `links: 'contained'` captures them): one to a sibling, one into the mount. */
export function validWithLinks(): Doc {
  const d = valid();
  d.entries.push(link('src/l', 'a'), link('src/m', '../node_modules/i.js'));
  return d;
}

/** A well-formed document: one copy root `src`, one directory mount at `node_modules`. */
export function valid(): Doc {
  return {
    source: '/tmp/repo',
    revision: 'r'.repeat(40),
    declarations: ['src'],
    entries: [dir('src'), file('src/a')],
    mounts: [{ source: 'deps', target: 'node_modules', kind: 'directory', totalBytes: 0, entries: [dir('payload'), file('payload/i.js', 0o644)] }],
    totalBytes: 0,
  };
}

/** The template with its copy roots' times kept (keepTimes): every entry in them records one. */
export function timed(): Doc {
  const d = valid();
  d.entries = d.entries.map((e, i) => ({ ...e, mtime_ns: String(1_600_000_000_000_000_000n + BigInt(i)) }));
  return d;
}

/** The template's copy-root file recording `mtime`, its directory a good one (a document that keeps times). */
const fileTime = (mtime: string) => (d: Doc): void => {
  d.entries = [{ ...dir('src'), mtime_ns: '1' }, { ...file('src/a'), mtime_ns: mtime }];
};

/** Recomputes every total and digest, as an attacker who controls the whole document would. */
export function text(d: Doc): { digest: string; text: string } {
  for (const m of d.mounts) m.totalBytes = linkBytes(m.entries);
  d.totalBytes = d.mounts.reduce((n, m) => n + m.totalBytes, linkBytes(d.entries));
  const full = { ...d, ...computeDigests(d) };
  return { digest: full.digest, text: documentText(full) };
}

/** Plants the document as a published snapshot in the store (as a user who can write there could). */
export function plant(storeRoot: string, d: Doc): string {
  const { digest, text: t } = text(d);
  const root = join(storeRoot, 'snapshots', digest);
  mkdirSync(join(root, 'copy'), { recursive: true });
  d.mounts.forEach((_m, i) => mkdirSync(join(root, 'mounts', String(i).padStart(5, '0'), 'payload'), { recursive: true }));
  writeFileSync(join(root, 'manifest.json'), t);
  return digest;
}

export const CASES: [string, (d: Doc) => void, string][] = [
  ['a mount target that climbs out of the clone', (d) => (d.mounts[0]!.target = '../../../../../../outside/newdir/sub/created-file'), "mount target: mount target must not contain '..': ../../../../../../outside/newdir/sub/created-file"],
  ['a mount target over /usr/bin', (d) => (d.mounts[0]!.target = '../usr/bin'), "mount target: mount target must not contain '..': ../usr/bin"],
  ['an absolute mount target', (d) => (d.mounts[0]!.target = '/etc'), 'mount target: mount target must be relative: /etc'],
  ['an empty mount target', (d) => (d.mounts[0]!.target = ''), 'mount target: mount target must be a non-empty relative path'],
  ['a mount target of "."', (d) => (d.mounts[0]!.target = '.'), 'mount target: mount target must name something below its root: .'],
  ["a mount target on materialize's marker", (d) => (d.mounts[0]!.target = '.treeseal-materializing'), "declarations: mount target collides with materialize's own names in the clone: .treeseal-materializing"],
  ['a mount target on a copy root', (d) => (d.mounts[0]!.target = 'src'), 'declarations: mount target overlaps a copy root: src and src'],
  ['a mount target inside a copy root', (d) => (d.mounts[0]!.target = 'src/x'), 'declarations: mount target overlaps a copy root: src/x and src'],
  ['two mounts on one target', (d) => d.mounts.push({ ...d.mounts[0]!, source: 'other' }), 'declarations: mount targets overlap: node_modules and node_modules'],
  ['overlapping copy roots', (d) => d.declarations.push('src/a'), 'declarations: copy roots overlap: src and src/a'],
  ['a copy root with no entry', (d) => d.declarations.push('lib'), 'a copy root has no entry: lib'],
  ['an entry outside every copy root', (d) => d.entries.push(file('zzz')), 'entry outside every copy root: zzz'],
  ['a payload symlink that escapes the workspace', (d) => d.mounts[0]!.entries.push(link('payload/l', '../../../../../../../../outside')), 'mount symlink: symlink escapes the sandbox workspace: payload/l -> ../../../../../../../../outside'],
  ['a payload symlink that dangles', (d) => d.mounts[0]!.entries.push(link('payload/l', 'nothing')), 'mount symlink: symlink is dangling or escapes its snapshot: payload/l -> nothing'],
  ['an absolute payload symlink', (d) => d.mounts[0]!.entries.push(link('payload/l', '/etc/passwd')), 'bad symlink: payload/l'],
  [
    'a payload symlink that names its payload but goes through a payload link pointing out',
    (d) => d.mounts[0]!.entries.push(link('payload/o', '../src'), link('payload/p', 'o/a')),
    'mount symlink: symlink is dangling or escapes its snapshot: payload/p -> o/a',
  ],
  ['a copy-root symlink that escapes the workspace', (d) => d.entries.push(link('src/l', '../../outside')), 'copy root symlink: symlink escapes the workspace: src/l -> ../../outside'],
  ['a copy-root symlink that dangles', (d) => d.entries.push(link('src/l', 'nothing')), 'copy root symlink: symlink is dangling: src/l -> nothing'],
  ['a copy-root symlink to what the snapshot does not capture', (d) => d.entries.push(link('src/l', '../etc/passwd')), 'copy root symlink: symlink points at something the snapshot does not capture: src/l -> ../etc/passwd'],
  ['a copy-root symlink to the workspace itself', (d) => d.entries.push(link('src/l', '..')), 'copy root symlink: symlink points at something the snapshot does not capture: src/l -> ..'],
  ['a copy-root symlink that loops', (d) => d.entries.push(link('src/l', 'l')), 'copy root symlink: symlink loops (more than 40 links to follow): src/l -> l'],
  ['a copy-root symlink through a file', (d) => d.entries.push(link('src/l', 'a/x')), 'copy root symlink: symlink goes through a file: src/l -> a/x'],
  ['a copy-root symlink into the mount that dangles there', (d) => d.entries.push(link('src/l', '../node_modules/nothing')), 'copy root symlink: symlink is dangling: src/l -> ../node_modules/nothing'],
  ['an absolute copy-root symlink', (d) => d.entries.push(link('src/l', '/etc/passwd')), 'bad symlink: src/l'],
  ['a symlink whose recorded hash is not its target', (d) => d.mounts[0]!.entries.push({ ...link('payload/l', 'i.js'), sha256: EMPTY }), 'bad symlink entry: payload/l'],
  ['a mount entry outside its payload', (d) => d.mounts[0]!.entries.push(file('zzz')), 'mount entry outside its payload: zzz'],
  ['a mount whose kind is not its payload', (d) => (d.mounts[0]!.kind = 'file'), 'mount kind differs from its payload: node_modules'],
  ['a copy-root file with a non-executable mode', (d) => (d.entries[1] = file('src/a', 0o644)), 'bad file mode in a copy root: src/a'],
  ['a name longer than NAME_MAX', (d) => d.entries.push(file(`src/${'n'.repeat(300)}`)), `a path component is longer than 255 bytes: src/${'n'.repeat(300)}`],
  ['a relative source', (d) => (d.source = 'repo'), 'source is not a canonical absolute path: repo'],
  ['an exclude list that is empty', (d) => (d.exclude = []), 'exclude is an empty list'],
  ['an exclude list longer than a capture takes', (d) => (d.exclude = Array.from({ length: 10_001 }, (_, i) => `p${i}`)), 'exclude holds 10001 patterns, more than a capture takes (10000)'],
  ['an exclude list that is not a list of patterns', (d) => (d.exclude = [1] as never), 'exclude is not a list of patterns'],
  ['an exclude pattern that cannot be parsed', (d) => (d.exclude = ['[abc']), 'exclude pattern is not a valid pattern: it has an unclosed [ (write \\[ for a literal [): [abc'],
  ['an exclude pattern that climbs', (d) => (d.exclude = ['../x']), "exclude pattern must not hold '..' as a path component (patterns are relative to the source): ../x"],
  ['an exclude pattern that spells out the source', (d) => (d.exclude = ['/tmp/repo/src/a']), 'exclude pattern must be relative to the source, not absolute (write /src/a for /tmp/repo/src/a): /tmp/repo/src/a'],
  ['an exclude pattern that leaves a copy root out', (d) => (d.exclude = ['/src']), 'a declared root is excluded: src'],
  ['a directory-only exclude pattern that leaves a directory copy root out (the root matched as the kind its entry is)', (d) => (d.exclude = ['src/']), 'a declared root is excluded: src'],
  ['an exclude pattern that leaves a mount source out', (d) => (d.exclude = ['deps/']), 'a declared root is excluded: deps'],
  ['a copy-root entry its exclude patterns leave out', (d) => (d.exclude = ['a']), 'an excluded path is in the snapshot: src/a'],
  ['a mount entry its exclude patterns leave out (matched at its source path)', (d) => (d.exclude = ['/deps/*.js']), 'an excluded path is in the snapshot: payload/i.js'],
  ['a directory with a hash', (d) => (d.entries[0] = { ...dir('src'), sha256: EMPTY }), 'bad directory entry: src'],
  ['an empty file whose hash is not that of no bytes (nothing reads an empty file to prove it)', (d) => (d.entries[1] = { ...file('src/a'), sha256: 'a'.repeat(64) }), 'empty file whose sha256 is not that of no bytes: src/a'],
  ['an mtime with a leading zero', fileTime('01'), 'bad mtime_ns: src/a'],
  ['an mtime of -0', fileTime('-0'), 'bad mtime_ns: src/a'],
  ['an mtime with a plus sign', fileTime('+1'), 'bad mtime_ns: src/a'],
  ['an mtime in seconds with a fraction', fileTime('1600000000.5'), 'bad mtime_ns: src/a'],
  ['an mtime in exponent form', fileTime('1e18'), 'bad mtime_ns: src/a'],
  ['an empty mtime', fileTime(''), 'bad mtime_ns: src/a'],
  ['an mtime past int64 (2^63 ns)', fileTime('9223372036854775808'), 'bad mtime_ns: src/a'],
  ['an mtime of INT64_MIN, which no stat reports', fileTime('-9223372036854775808'), 'bad mtime_ns: src/a'],
  ['an mtime of twenty digits', fileTime('10000000000000000000'), 'bad mtime_ns: src/a'],
  ['times kept for a directory but not for the file in it', (d) => (d.entries[0] = { ...dir('src'), mtime_ns: '1' }), 'times kept for some entries of the copy roots but not this one: src/a'],
  ['times kept for a file but not for its directory', (d) => (d.entries[1] = { ...file('src/a'), mtime_ns: '1' }), 'times kept for this entry but not for others of the copy roots: src/a'],
  ["a time on a copy root's implicit parent", (d) => ((d.declarations = ['src/a']), (d.entries = [{ ...dir('src'), mtime_ns: '1' }, { ...file('src/a'), mtime_ns: '2' }])), 'mtime_ns on an entry that keeps no time: src'],
  ['a time in a mount', (d) => (d.mounts[0]!.entries[1] = { ...file('payload/i.js', 0o644), mtime_ns: '1' }), 'mtime_ns on an entry that keeps no time: payload/i.js'],
];
