// cases.mjs: the malformed inputs. Each case names the directory it may write (`may`), an optional
// setup of its sandbox, and either a CLI command or a library call (source text run in the driver).
// Sandbox s: { dir, src, store, clone, outside, digest, stageParent, cwd }. `root: true`: its setup needs root (mounts);
// it is left out of a run without root.
import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import { DOCUMENT_CASES } from './documents.mjs';
import { MARKER_CASES } from './markers.mjs';
import { SHARED_STORE_CASES } from './shared-store.mjs';

const fifo = (p) => execFileSync('mkfifo', [p]);
const SNAP = (s) => join(s.store, 'snapshots', s.digest);
const thaw = (p) => execFileSync('chmod', ['-R', 'u+w', p]);

/** Library-call helpers, spliced into each call's source text. */
const LIB = `const store = () => t.SnapshotStore.openSync(s.store);
const snap = () => store().get(s.digest);
const cap = (o) => { const st = store(); try { return st.captureSync({ source: s.src, copy: ['tree'], ...o }); } finally { st.closeSync(); } };`;
const lib = (body) => `({ treeseal: t, args: s }) => { ${LIB} return (${body}); }`;

const cli = (...args) => ({ cli: (s) => args.map((a) => (typeof a === 'function' ? a(s) : a)) });
const onStore = (...args) => ({ cli: (s) => ['--store', s.store, ...args.map((a) => (typeof a === 'function' ? a(s) : a))] });
const D = (s) => s.digest;

export const CASES = [
  ...DOCUMENT_CASES,
  ...MARKER_CASES,
  ...SHARED_STORE_CASES,
  // ---- CLI: flags, digests, stores, names
  { group: 'cli', name: 'unknown flag', ...onStore('ls', '--bogus') },
  { group: 'cli', name: 'unknown command', ...onStore('explode') },
  { group: 'cli', name: 'capture without a source', ...onStore('capture') },
  { group: 'cli', name: 'materialize without a clone', ...onStore('materialize', D) },
  { group: 'cli', name: 'capture given --reflink', ...onStore('capture', (s) => s.src, '--reflink', 'always'), may: ['store'] },
  { group: 'cli', name: '--reflink sometimes', ...onStore('materialize', D, (s) => s.clone, '--reflink', 'sometimes'), may: ['clone'] },
  { group: 'cli', name: '--reflink given twice', ...onStore('materialize', D, (s) => s.clone, '--reflink', 'always', '--reflink', 'never'), may: ['clone'] },
  { group: 'cli', name: '--fallback-bytes -5', ...onStore('materialize', D, (s) => s.clone, '--fallback-bytes', '-5'), may: ['clone'] },
  { group: 'cli', name: '--fallback-bytes abc', ...onStore('materialize', D, (s) => s.clone, '--fallback-bytes', 'abc'), may: ['clone'] },
  { group: 'cli', name: '--fallback-bytes 1e99', ...onStore('materialize', D, (s) => s.clone, '--fallback-bytes', '1e99'), may: ['clone'] },
  { group: 'cli', name: 'show: digest not hex', ...onStore('show', 'zz!z'), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'show: digest of 65 chars', ...onStore('show', 'a'.repeat(65)), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'show: no such digest', ...onStore('show', '0000'), codes: ['SEAL_UNAVAILABLE'] },
  { group: 'cli', name: 'show: empty digest', ...onStore('show', ''), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'rm: digest ../..', ...onStore('rm', '../..'), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'verify: digest with newline', ...onStore('verify', 'ab\ncd'), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'diff with one digest', ...onStore('diff', D) },
  { group: 'cli', name: 'ls on a missing deep store (read-only: creates nothing)', ...cli('--store', (s) => join(s.dir, 'missing/deep/store'), 'ls'), okAllowed: true },
  { group: 'cli', name: 'verify on a missing store (creates nothing)', ...cli('--store', (s) => join(s.dir, 'nostore'), 'verify'), okAllowed: true },
  { group: 'cli', name: 'store is a regular file', ...cli('--store', (s) => join(s.outside, 'key'), 'ls') },
  { group: 'cli', name: 'store through a symlink', setup: (s) => symlinkSync(s.store, join(s.dir, 'storelink')), ...cli('--store', (s) => join(s.dir, 'storelink'), 'capture', (s) => s.src), codes: ['SEAL_SYMLINK', 'SEAL_BAD_PATH'] },
  { group: 'cli', name: 'empty --store', ...cli('--store', '', 'ls') },
  { group: 'cli', name: 'capture: source is a file', ...onStore('capture', (s) => join(s.src, 'tree/a')), may: ['store'] },
  { group: 'cli', name: 'capture: source missing', ...onStore('capture', (s) => join(s.dir, 'nope')), may: ['store'] },
  { group: 'cli', name: 'capture: source through a symlinked ancestor', setup: (s) => symlinkSync(s.dir, join(s.dir, 'up')), ...onStore('capture', (s) => join(s.dir, 'up/src')), may: ['store'], codes: ['SEAL_SYMLINK', 'SEAL_BAD_PATH'] },
  { group: 'cli', name: 'capture: --copy ../outside', ...onStore('capture', (s) => s.src, '--copy', '../outside'), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'capture: --copy /etc', ...onStore('capture', (s) => s.src, '--copy', '/etc'), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'capture: --copy a/../../x', ...onStore('capture', (s) => s.src, '--copy', 'tree/../../x'), codes: ['SEAL_BAD_PATH'] },
  { group: 'cli', name: 'capture: --mount :', ...onStore('capture', (s) => s.src, '--mount', ':') },
  { group: 'cli', name: 'capture: --copy with a non-UTF-8 byte', bash: (s, c) => `exec ${c} --store '${s.store}' capture '${s.src}' --copy $'tree/\\xff'`, codes: ['SEAL_BAD_PATH', 'SEAL_UNAVAILABLE'] },
  {
    group: 'cli',
    name: 'capture: non-UTF-8 top-level name',
    setup: (s) => writeFileSync(Buffer.concat([Buffer.from(`${s.src}/`), Buffer.from([0x6e, 0xff, 0x6e])]), 'x'),
    ...onStore('capture', (s) => s.src),
    may: ['store'],
    codes: ['SEAL_BAD_PATH'],
  },
  {
    group: 'cli',
    name: 'show: a newline in a file name forges no line',
    setup: (s) => writeFileSync(join(s.src, 'tree', 'evil\nFORGED line'), 'x'),
    ...onStore('capture', (s) => s.src, '--copy', 'tree'),
    then: (s) => ['--store', s.store, 'show', '{digest}'],
    may: ['store'],
    okAllowed: true,
    output: (out) => (/^FORGED/m.test(out) ? ['a raw newline from a file name reached the output'] : []),
  },
  {
    group: 'cli',
    name: 'show: an escape sequence in a file name is not printed raw',
    setup: (s) => writeFileSync(join(s.src, 'tree', 'red\x1b[31mX'), 'x'),
    ...onStore('capture', (s) => s.src, '--copy', 'tree'),
    then: (s) => ['--store', s.store, 'show', '{digest}'],
    may: ['store'],
    okAllowed: true,
    output: (out) => (out.includes('\x1b') ? ['a raw ESC from a file name reached the output'] : []),
  },
  { group: 'cli', name: 'capture: a control character in an error path', setup: (s) => fifo(join(s.src, 'tree', 'p\x07ipe')), ...onStore('capture', (s) => s.src, '--copy', 'tree'), codes: ['SEAL_SPECIAL_FILE'] },
  { group: 'cli', name: 'capture: very long source path', ...onStore('capture', (s) => `${s.dir}/${'x'.repeat(5000)}`), may: ['store'] },
  { group: 'cli', name: 'freeze through a symlink', setup: (s) => symlinkSync(s.outside, join(s.dir, 'olink')), ...cli('freeze', (s) => join(s.dir, 'olink')) },
  { group: 'cli', name: 'thaw through a symlinked ancestor', setup: (s) => symlinkSync(s.dir, join(s.dir, 'up')), ...cli('thaw', (s) => join(s.dir, 'up/outside')) },
  { group: 'cli', name: 'capture: store inside the copy root', ...cli('--store', (s) => join(s.src, 'tree/st'), 'capture', (s) => s.src, '--copy', 'tree'), codes: ['SEAL_OVERLAP'], may: ['src/tree/st'] },

  // ---- library options of wrong types or values
  { group: 'options', name: 'open(42)', lib: lib('t.SnapshotStore.openSync(42)') },
  { group: 'options', name: "open('')", lib: lib("t.SnapshotStore.openSync('')") },
  { group: 'options', name: 'open(relative path)', lib: lib("t.SnapshotStore.openSync('rel/store')") },
  { group: 'options', name: 'open(path with NUL)', lib: lib("t.SnapshotStore.openSync(s.dir + '/st\\0x')") },
  { group: 'options', name: "open(dir, { ephemeral: 'yes' })", lib: lib("t.SnapshotStore.openSync(s.store, { ephemeral: 'yes' })") },
  { group: 'options', name: 'capture(null)', lib: lib('store().captureSync(null)') },
  { group: 'options', name: 'capture({ source: 42 })', lib: lib('store().captureSync({ source: 42 })') },
  { group: 'options', name: 'capture: relative source', lib: lib("store().captureSync({ source: 'src', copy: ['tree'] })") },
  { group: 'options', name: "capture: copy: 'tree' (not a list)", lib: lib("cap({ copy: 'tree' })") },
  { group: 'options', name: 'capture: copy: [42]', lib: lib('cap({ copy: [42] })') },
  { group: 'options', name: "capture: copy: ['../x']", lib: lib("cap({ copy: ['../outside'] })"), codes: ['SEAL_BAD_PATH'] },
  { group: 'options', name: "capture: copy: ['/etc']", lib: lib("cap({ copy: ['/etc'] })"), codes: ['SEAL_BAD_PATH'] },
  { group: 'options', name: 'capture: copy with NUL', lib: lib("cap({ copy: ['tr\\0ee'] })"), codes: ['SEAL_BAD_PATH'] },
  { group: 'options', name: 'capture: overlapping copy roots', lib: lib("cap({ copy: ['tree', 'tree/sub'] })"), codes: ['SEAL_OVERLAP'] },
  { group: 'options', name: 'capture: mount without target', lib: lib("cap({ copy: [], mounts: [{ source: 'tree' }] })") },
  { group: 'options', name: "capture: mounts: 'x'", lib: lib("cap({ mounts: 'x' })") },
  { group: 'options', name: 'capture: revision: 42', lib: lib('cap({ revision: 42 })') },
  { group: 'options', name: 'capture: maxEntries: -1', lib: lib('cap({ limits: { maxEntries: -1 } })') },
  { group: 'options', name: "capture: maxEntries: 'many'", lib: lib("cap({ limits: { maxEntries: 'many' } })") },
  { group: 'options', name: 'capture: maxEntries: 1 (a limit hit)', lib: lib('cap({ limits: { maxEntries: 1 } })'), codes: ['SEAL_LIMIT'] },
  { group: 'options', name: 'capture: maxEntries: 1 after an unlimited capture', lib: lib("((st) => (st.captureSync({ source: s.src, copy: ['tree'] }), st.captureSync({ source: s.src, copy: ['tree'], limits: { maxEntries: 1 } })))(store())"), codes: ['SEAL_LIMIT'] },
  { group: 'options', name: "capture: workspace: 'rel'", lib: lib("cap({ workspace: 'rel' })") },
  { group: 'options', name: 'capture: workspace with NUL', lib: lib("cap({ workspace: '/ws\\0x' })") },
  { group: 'options', name: 'capture: parallelism: 1.5', lib: lib('cap({ parallelism: 1.5 })') },
  { group: 'options', name: 'capture: parallelism: 1000', lib: lib('cap({ parallelism: 1000 })') },
  { group: 'options', name: "capture: expectMounts: 'abc'", lib: lib("cap({ expectMounts: 'abc' })") },
  { group: 'options', name: 'capture: expectMounts of other digests', lib: lib("cap({ expectMounts: { contentDigest: '0'.repeat(64), manifestDigest: '0'.repeat(64) } })"), codes: ['SEAL_BINDING'] },
  { group: 'options', name: 'capture: aborted signal', lib: lib('cap({ signal: AbortSignal.abort() })'), codes: ['SEAL_ABORTED'] },
  { group: 'options', name: 'capture: onProgress: 42', lib: lib('cap({ onProgress: 42 })') },
  { group: 'options', name: "materialize: reflink: 'sometimes'", lib: lib("snap().materializeSync(s.clone, { reflink: 'sometimes' })"), may: ['clone'] },
  { group: 'options', name: 'materialize: fallbackBytes: -1', lib: lib('snap().materializeSync(s.clone, { fallbackBytes: -1 })'), may: ['clone'] },
  { group: 'options', name: "materialize: fallbackBytes: 'x'", lib: lib("snap().materializeSync(s.clone, { fallbackBytes: 'x' })"), may: ['clone'] },
  { group: 'options', name: 'materialize(42)', lib: lib('snap().materializeSync(42)') },
  { group: 'options', name: 'materialize(relative clone)', lib: lib("snap().materializeSync('clone')") },
  { group: 'options', name: 'mountPoints: workspace: 42', lib: lib('snap().mountPoints(s.clone, { workspace: 42 })'), may: ['clone'] },
  { group: 'options', name: "get('xyz!')", lib: lib("store().get('xyz!')"), codes: ['SEAL_BAD_PATH'] },
  { group: 'options', name: 'get(42)', lib: lib('store().get(42)') },
  { group: 'options', name: "remove('../..')", lib: lib("store().remove('../..')"), codes: ['SEAL_BAD_PATH'] },
  { group: 'options', name: 'readStable: maxBytes: -1', lib: lib("t.readStableSync(s.src + '/tree/a', { maxBytes: -1 })") },
  { group: 'options', name: 'readStable(42)', lib: lib('t.readStableSync(42)') },
  { group: 'options', name: 'readStable of a FIFO (no block)', setup: (s) => fifo(join(s.dir, 'p')), lib: lib("t.readStableSync(s.dir + '/p', { maxBytes: 10 })"), codes: ['SEAL_SPECIAL_FILE'] },
  { group: 'options', name: 'readStable of a symlink', setup: (s) => symlinkSync(join(s.outside, 'key'), join(s.dir, 'l')), lib: lib("t.readStableSync(s.dir + '/l', { maxBytes: 1 << 20 })"), codes: ['SEAL_SYMLINK'] },
  { group: 'options', name: "writeFrozenFile(path, 'text')", lib: lib("t.writeFrozenFileSync(s.dir + '/w', 'text')"), may: ['w'] },
  { group: 'options', name: 'writeFrozenFile over a dangling symlink', setup: (s) => symlinkSync(join(s.outside, 'made'), join(s.dir, 'dl')), lib: lib("t.writeFrozenFileSync(s.dir + '/dl', Buffer.from('x'))"), codes: ['SEAL_COLLISION'] },
  { group: 'options', name: 'freeze of a symlink to outside', setup: (s) => symlinkSync(s.outside, join(s.dir, 'fl')), lib: lib("t.freezeSync(s.dir + '/fl')") },

  // ---- staging
  { group: 'staging', name: 'target ../x', lib: lib("t.stageFilesSync(s.stageParent, [{ target: '../x', bytes: Buffer.from('x') }])"), codes: ['SEAL_BAD_PATH'] },
  { group: 'staging', name: 'absolute target', lib: lib("t.stageFilesSync(s.stageParent, [{ target: '/tmp/x', bytes: Buffer.from('x') }])"), codes: ['SEAL_BAD_PATH'] },
  { group: 'staging', name: 'target with NUL', lib: lib("t.stageFilesSync(s.stageParent, [{ target: 'a\\0b', bytes: Buffer.from('x') }])"), codes: ['SEAL_BAD_PATH'] },
  { group: 'staging', name: 'empty target', lib: lib("t.stageFilesSync(s.stageParent, [{ target: '', bytes: Buffer.from('x') }])"), codes: ['SEAL_BAD_PATH'] },
  { group: 'staging', name: 'duplicate targets', lib: lib("t.stageFilesSync(s.stageParent, [{ target: 'a', bytes: Buffer.from('x') }, { target: 'a', bytes: Buffer.from('y') }])"), codes: ['SEAL_COLLISION', 'SEAL_OVERLAP', 'SEAL_BAD_PATH'] },
  { group: 'staging', name: 'target a and a/b', lib: lib("t.stageFilesSync(s.stageParent, [{ target: 'a', bytes: Buffer.from('x') }, { target: 'a/b', bytes: Buffer.from('y') }])"), codes: ['SEAL_COLLISION', 'SEAL_OVERLAP', 'SEAL_BAD_PATH'] },
  { group: 'staging', name: "bytes: 'text'", lib: lib("t.stageFilesSync(s.stageParent, [{ target: 'a', bytes: 'text' }])") },
  { group: 'staging', name: "prefix '../x'", lib: lib("t.stageFilesSync(s.stageParent, [{ target: 'a', bytes: Buffer.from('x') }], { prefix: '../x' })"), codes: ['SEAL_BAD_PATH'] },
  { group: 'staging', name: 'parent through a symlinked ancestor', setup: (s) => symlinkSync(s.outside, join(s.dir, 'sl')), lib: lib("t.stageFilesSync(s.dir + '/sl/dir', [{ target: 'a', bytes: Buffer.from('x') }])"), codes: ['SEAL_SYMLINK', 'SEAL_BAD_PATH'] },
  { group: 'staging', name: 'parent is a symlink', setup: (s) => symlinkSync(join(s.outside, 'dir'), join(s.dir, 'sp')), lib: lib("t.stageFilesSync(s.dir + '/sp', [{ target: 'a', bytes: Buffer.from('x') }])"), codes: ['SEAL_SYMLINK', 'SEAL_BAD_PATH'] },

  // ---- store corruption
  { group: 'store', name: 'manifest.json edited', setup: (s) => editManifest(s), ...onStore('verify', D), codes: ['SEAL_CORRUPT'] },
  { group: 'store', name: 'manifest.json not JSON', setup: (s) => replaceIn(SNAP(s), 'manifest.json', '{not json'), ...onStore('verify', D), codes: ['SEAL_CORRUPT'] },
  { group: 'store', name: 'manifest.json is a FIFO (no block)', setup: (s) => (thaw(SNAP(s)), rmSync(join(SNAP(s), 'manifest.json')), fifo(join(SNAP(s), 'manifest.json'))), ...onStore('verify', D), codes: ['SEAL_CORRUPT'] },
  { group: 'store', name: 'a snapshot file changed', setup: (s) => replaceIn(SNAP(s), 'copy/tree/a', 'A'.repeat(100)), ...onStore('verify', D), codes: ['SEAL_CORRUPT'] },
  { group: 'store', name: 'a snapshot file removed', setup: (s) => (thaw(SNAP(s)), rmSync(join(SNAP(s), 'copy/tree/a'))), ...onStore('verify', D), codes: ['SEAL_CORRUPT'] },
  { group: 'store', name: 'a file planted in a snapshot', setup: (s) => (thaw(SNAP(s)), writeFileSync(join(SNAP(s), 'copy/tree/planted'), 'x')), ...onStore('verify', D), codes: ['SEAL_CORRUPT'] },
  { group: 'store', name: 'a snapshot file replaced by a symlink outside (materialize)', setup: (s) => (thaw(SNAP(s)), rmSync(join(SNAP(s), 'copy/tree/a')), symlinkSync(join(s.outside, 'key'), join(SNAP(s), 'copy/tree/a'))), ...onStore('materialize', D, (s) => s.clone), codes: ['SEAL_CORRUPT'], may: ['clone'] },
  { group: 'store', name: 'lock is a directory (ls)', setup: (s) => (rmSync(join(s.store, 'lock')), mkdirSync(join(s.store, 'lock'))), ...onStore('ls') },
  { group: 'store', name: 'lock is a directory (capture)', setup: (s) => (rmSync(join(s.store, 'lock')), mkdirSync(join(s.store, 'lock'))), ...onStore('capture', (s) => s.src, '--copy', 'tree', '--revision', 'x') },
  { group: 'store', name: 'lock is a directory (gc)', setup: (s) => (rmSync(join(s.store, 'lock')), mkdirSync(join(s.store, 'lock'))), ...onStore('gc') },
  { group: 'store', name: 'lock is a symlink to a file outside', setup: (s) => (rmSync(join(s.store, 'lock')), symlinkSync(join(s.outside, 'key'), join(s.store, 'lock'))), ...onStore('gc') },
  { group: 'store', name: 'lock is a dangling symlink outside', setup: (s) => (rmSync(join(s.store, 'lock')), symlinkSync(join(s.outside, 'newlock'), join(s.store, 'lock'))), ...onStore('capture', (s) => s.src, '--copy', 'tree', '--revision', 'y') },
  { group: 'store', name: 'tmp/ is a symlink outside (capture)', setup: (s) => (rmSync(join(s.store, 'tmp'), { recursive: true }), symlinkSync(join(s.outside, 'dir'), join(s.store, 'tmp'))), ...onStore('capture', (s) => s.src, '--copy', 'tree', '--revision', 'z'), tmpCheck: false },
  { group: 'store', name: 'snapshots/ is a symlink outside (ls)', setup: (s) => (thaw(s.store), rmSync(join(s.store, 'snapshots'), { recursive: true }), symlinkSync(join(s.outside, 'dir'), join(s.store, 'snapshots'))), ...onStore('ls'), tmpCheck: false },
  { group: 'store', name: 'a snapshot dir is a symlink', setup: (s) => moveSnapshotToLink(s), ...onStore('verify', D), codes: ['SEAL_CORRUPT', 'SEAL_SYMLINK'] },

  // ---- hostile clones
  { group: 'clone', name: 'clone path through a symlink', setup: (s) => symlinkSync(s.outside, join(s.dir, 'cl')), lib: lib("snap().materializeSync(s.dir + '/cl/dir')"), codes: ['SEAL_SYMLINK', 'SEAL_BAD_PATH'] },
  { group: 'clone', name: 'clone is a symlink', setup: (s) => symlinkSync(join(s.outside, 'dir'), join(s.dir, 'cl')), lib: lib("snap().materializeSync(s.dir + '/cl')"), codes: ['SEAL_SYMLINK', 'SEAL_BAD_PATH'] },
  // Renamed out whole and unlinked, never followed: the outside directory it names is as it was.
  { group: 'clone', name: 'a root is a symlink to outside (replaced)', setup: (s) => symlinkSync(join(s.outside, 'dir'), join(s.clone, 'tree')), lib: lib('snap().materializeSync(s.clone)'), okAllowed: true, may: ['clone'] },
  // Renamed out whole and unlinked, never opened (an open would block).
  { group: 'clone', name: 'a root is a FIFO (replaced, no block)', setup: (s) => fifo(join(s.clone, 'tree')), lib: lib('snap().materializeSync(s.clone)'), okAllowed: true, may: ['clone'] },
  { group: 'clone', name: 'the clone is a FIFO', setup: (s) => fifo(join(s.dir, 'cf')), lib: lib("snap().materializeSync(s.dir + '/cf')") },
  { group: 'clone', name: 'a FIFO inside an old root (replaced, no block)', setup: (s) => (mkdirSync(join(s.clone, 'tree/x'), { recursive: true }), fifo(join(s.clone, 'tree/x/p'))), lib: lib('snap().materializeSync(s.clone)'), okAllowed: true, may: ['clone'] },
  { group: 'clone', name: 'the clone is inside the snapshot', lib: lib("snap().materializeSync(s.store + '/snapshots/' + s.digest + '/copy')"), codes: ['SEAL_OVERLAP', 'SEAL_BAD_PATH'] },
  { group: 'clone', name: 'the clone is a read-only mount point', root: true, setup: (s) => execFileSync('mount', ['--bind', '-o', 'ro', s.clone, s.clone]), cleanup: (s) => execFileSync('umount', [s.clone]), lib: lib('snap().materializeSync(s.clone)'), may: ['clone'] },
  { group: 'clone', name: 'the clone is a mount point', root: true, setup: (s) => execFileSync('mount', ['-t', 'tmpfs', 'tmpfs', s.clone]), cleanup: (s) => execFileSync('umount', [s.clone]), lib: lib('snap().materializeSync(s.clone)'), okAllowed: true, may: ['clone'] },
];

function replaceIn(dir, rel, text) {
  thaw(dir);
  const p = join(dir, rel);
  chmodSync(p, 0o600);
  writeFileSync(p, text);
  chmodSync(p, 0o400);
}

function editManifest(s) {
  const p = join(SNAP(s), 'manifest.json');
  thaw(SNAP(s));
  chmodSync(p, 0o600);
  const text = execFileSync('cat', [p], { encoding: 'utf8' });
  writeFileSync(p, text.replace(/"total_bytes":(\d+)/, (_, n) => `"total_bytes":${Number(n) + 1}`));
}

function moveSnapshotToLink(s) {
  // Moving a directory to another parent needs write permission on it (root needs none).
  chmodSync(SNAP(s), 0o700);
  execFileSync('mv', [SNAP(s), join(s.outside, 'moved')]);
  symlinkSync(join(s.outside, 'moved'), SNAP(s));
}
