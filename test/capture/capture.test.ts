// capture.test.ts: the guarded capture: contents, manifests, modes, declarations, limits, mounts and the store.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, manifestDigest, type CaptureCallOptions } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, mkfifo, storeLeftovers, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

const sha = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

function setup(tree: Record<string, string | Buffer | null>): { repo: string; store: SnapshotStore } {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  return { repo, store: SnapshotStore.openSync(join(base, 'store'), { ephemeral: true }) };
}

describe('capture of copy roots', () => {
  it('copies files and directories, hashes them and records the seed manifest', () => {
    const { repo, store } = setup({ 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta', 'index/graph.bin': Buffer.alloc(3 << 20, 9), other: 'no' });
    chmodSync(join(repo, 'src/a.ts'), 0o755);
    const snap = store.captureSync({ source: repo, copy: ['src', 'index/graph.bin'], revision: 'r1' });
    expect(snap.entries.map((e) => [e.kind, e.path])).toEqual([
      ['directory', 'index'],
      ['file', 'index/graph.bin'],
      ['directory', 'src'],
      ['file', 'src/a.ts'],
      ['directory', 'src/lib'],
      ['file', 'src/lib/b.ts'],
    ]);
    const a = snap.entries.find((e) => e.path === 'src/a.ts')!;
    expect(a).toEqual({ kind: 'file', path: 'src/a.ts', size: 5, sha256: sha('alpha'), mode: 0, link_target: '' });
    expect(snap.totalBytes).toBe(5 + 4 + (3 << 20));
    expect(snap.manifestDigest).toBe(manifestDigest(snap.entries as never));
    expect(snap.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(snap.root).toBe(join(store.root, 'snapshots', snap.digest));
    expect(readFileSync(join(snap.root, 'copy/src/lib/b.ts'), 'utf8')).toBe('beta');
    expect(existsSync(join(snap.root, 'copy/other'))).toBe(false);
    // Frozen: copy-root files 0400 (modes are not kept), directories 0500.
    expect(statSync(join(snap.root, 'copy/src/a.ts')).mode & 0o7777).toBe(0o400);
    expect(statSync(join(snap.root, 'copy/src')).mode & 0o7777).toBe(0o500);
    expect(statSync(join(snap.root, 'copy/index')).mode & 0o7777).toBe(0o500);
    expect(statSync(snap.root).mode & 0o7777).toBe(0o500);
    expect(statSync(join(snap.root, 'manifest.json')).mode & 0o7777).toBe(0o400);
    expect(storeLeftovers(store.root)).toEqual([`snapshots/${snap.digest}`]);
    store.closeSync();
  });

  it('captures the seed golden tree with the seed manifest digest', () => {
    const { repo, store } = setup({ 'assets/index': 'original' });
    const snap = store.captureSync({ source: repo, copy: ['assets/index'] });
    expect(snap.manifestDigest).toBe('368e1825c77615a6893010b262debd2ea539d98d0a9f146f8ced67f1bf3c27ec');
    store.closeSync();
  });

  it('the same definition over the same tree reuses its digest; a new revision is a new snapshot', async () => {
    const { repo, store } = setup({ 'a/f': '1' });
    const one = store.captureSync({ source: repo, copy: ['a'], revision: 'x' });
    expect(store.captureSync({ source: repo, copy: ['a'], revision: 'x' }).digest).toBe(one.digest);
    expect((await store.capture({ source: repo, copy: ['a'], revision: 'x' })).digest).toBe(one.digest);
    writeFileSync(join(repo, 'a/f'), 'changed later');
    const two = store.captureSync({ source: repo, copy: ['a'], revision: 'y' });
    expect(two.digest).not.toBe(one.digest);
    expect(two.entries.find((e) => e.path === 'a/f')!.sha256).toBe(sha('changed later'));
    expect(storeLeftovers(store.root).sort()).toEqual([`snapshots/${one.digest}`, `snapshots/${two.digest}`].sort());
    store.closeSync();
  });

  it('reuses a digest already published by another store object, never overwriting it', () => {
    const { repo, store } = setup({ 'a/f': 'same' });
    const other = SnapshotStore.openSync(store.root);
    const first = other.captureSync({ source: repo, copy: ['a'] });
    const inode = statSync(join(first.root, 'copy/a/f')).ino;
    const second = store.captureSync({ source: repo, copy: ['a'] });
    expect(second.digest).toBe(first.digest);
    expect(statSync(join(second.root, 'copy/a/f')).ino).toBe(inode);
    expect(storeLeftovers(store.root)).toEqual([`snapshots/${first.digest}`]);
    other.closeSync();
    store.closeSync();
  });

  it('keeps empty files and empty directories', () => {
    const { repo, store } = setup({ 'd/empty': '', 'd/sub': null });
    const snap = store.captureSync({ source: repo, copy: ['d'] });
    expect(snap.entries.map((e) => [e.path, e.size, e.sha256])).toEqual([
      ['d', 0, ''],
      ['d/empty', 0, sha('')],
      ['d/sub', 0, ''],
    ]);
    store.closeSync();
  });

  it('sorts by UTF-8 bytes and escapes non-ASCII names in the manifest', () => {
    const { repo, store } = setup({ 'd/é': '1', 'd/z': '2', 'd/A': '3', 'd/😀': '4', 'd/\uffff': '5' });
    const snap = store.captureSync({ source: repo, copy: ['d'] });
    expect(snap.entries.map((e) => e.path)).toEqual(['d', 'd/A', 'd/z', 'd/é', 'd/\uffff', 'd/😀']);
    const text = readFileSync(join(snap.root, 'manifest.json'), 'latin1');
    expect(text).toContain('d/\\u00e9');
    expect(/^[\x20-\x7e\n]*$/.test(text)).toBe(true);
    store.closeSync();
  });
});

describe('refusals', () => {
  it('refuses a symlink inside a copy root, as the root, and as a parent', () => {
    const { repo, store } = setup({ 'src/a': 'x', 'real/f': 'y' });
    symlinkSync('/etc/passwd', join(repo, 'src/evil'));
    expectError(() => store.captureSync({ source: repo, copy: ['src'] }), { code: 'SEAL_SYMLINK', message: 'capture must not traverse a symlink: src/evil (in copy root src: declare src as a mount (--mount src) or leave it out)', path: 'src/evil', unchanged: store.root });
    symlinkSync('real', join(repo, 'alias'));
    expectError(() => store.captureSync({ source: repo, copy: ['alias'] }), { code: 'SEAL_SYMLINK', message: 'capture must not traverse a symlink: alias', unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, copy: ['alias/f'] }), { code: 'SEAL_SYMLINK', message: 'capture must not traverse a symlink: alias', unchanged: store.root });
    store.closeSync();
  });

  it('refuses FIFOs, sockets and devices without blocking', async () => {
    const { repo, store } = setup({ 'd/ok': 'x', 's/ok': 'x', 'c/ok': 'x' });
    mkfifo(join(repo, 'd/pipe'));
    expectError(() => store.captureSync({ source: repo, copy: ['d'] }), { code: 'SEAL_SPECIAL_FILE', message: 'capture accepts only regular files and directories: d/pipe', path: 'd/pipe', unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, copy: ['d/pipe'] }), { code: 'SEAL_SPECIAL_FILE', unchanged: store.root });
    // A listening unix socket in the source tree.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(join(repo, 's/sock'), resolve));
    try {
      expect(lstatSync(join(repo, 's/sock')).isSocket()).toBe(true);
      expectError(() => store.captureSync({ source: repo, copy: ['s'] }), { code: 'SEAL_SPECIAL_FILE', message: 'capture accepts only regular files and directories: s/sock', path: 's/sock', unchanged: store.root });
      await expectError(async () => store.capture({ source: repo, copy: ['s/sock'] }), { code: 'SEAL_SPECIAL_FILE', unchanged: store.root });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    // A character device (1,3: the null device), made as root; CI runs as root.
    if (process.getuid?.() === 0 || process.env.CI === 'true') {
      execFileSync('mknod', [join(repo, 'c/null'), 'c', '1', '3']);
      expect(lstatSync(join(repo, 'c/null')).isCharacterDevice()).toBe(true);
      expectError(() => store.captureSync({ source: repo, copy: ['c'] }), { code: 'SEAL_SPECIAL_FILE', message: 'capture accepts only regular files and directories: c/null', path: 'c/null', unchanged: store.root });
      expectError(() => store.captureSync({ source: repo, copy: [], mounts: [{ source: 'c/null', target: 'dev' }] }), { code: 'SEAL_SPECIAL_FILE', message: 'capture accepts only regular files and directories: c/null', path: 'c/null', unchanged: store.root });
    }
    const { repo: repo2, store: store2 } = setup({});
    expectError(() => store2.captureSync({ source: repo2, copy: ['..'] }), { code: 'SEAL_BAD_PATH', unchanged: store2.root });
    symlinkSync('/dev/null', join(repo2, 'null'));
    expectError(() => store2.captureSync({ source: repo2, copy: ['null'] }), { code: 'SEAL_SYMLINK', unchanged: store2.root });
    store.closeSync();
    store2.closeSync();
  });

  it('checks declarations before touching a file', () => {
    const { repo, store } = setup({ 'a/b': 'x' });
    const cases: [unknown, string, string][] = [
      [[''], 'SEAL_BAD_PATH', 'copy root must be a non-empty relative path'],
      [['/abs'], 'SEAL_BAD_PATH', 'copy root must be relative: /abs'],
      [['a/../b'], 'SEAL_BAD_PATH', "copy root must not contain '..': a/../b"],
      [['a\0b'], 'SEAL_BAD_PATH', 'copy root contains a NUL byte: a\\x00b'],
      [['\ud800'], 'SEAL_BAD_PATH', 'copy root is not valid UTF-8: \\ud800'],
      [['a', 'a'], 'SEAL_OVERLAP', 'copy roots overlap: a and a'],
      [['a', 'a/b'], 'SEAL_OVERLAP', 'copy roots overlap: a and a/b'],
      [['x'.repeat(5000)], 'SEAL_LIMIT', `copy root exceeds the path byte limit (4096 bytes): ${'x'.repeat(5000)}`],
      ['a', 'ERR_INVALID_ARG_TYPE', 'The "options.copy" property must be an instance of Array. Received type string (\'a\')'],
      [[5], 'ERR_INVALID_ARG_TYPE', 'The "options.copy[0]" property must be of type string. Received type number (5)'],
    ];
    for (const [copy, code, message] of cases) {
      expectError(() => store.captureSync({ source: repo, copy: copy as string[] }), { code, message, unchanged: store.root });
    }
    expectError(() => store.captureSync({
      source: repo,
      mounts: [
        { source: 'a', target: 'node_modules' },
        { source: 'a/b', target: 'node_modules/x' },
      ],
    }), { code: 'SEAL_OVERLAP', message: 'mount targets overlap: node_modules and node_modules/x', unchanged: store.root });
    store.closeSync();
  });

  it('requires the source to be a real directory', () => {
    const { repo, store } = setup({ 'a/f': 'x', file: 'y' });
    const link = join(repo, '..', 'link');
    symlinkSync(repo, link);
    expectError(() => store.captureSync({ source: link, copy: ['a'] }), { code: 'SEAL_SYMLINK', message: `source must be a real directory, not a symlink: ${link}`, unchanged: store.root });
    expectError(() => store.captureSync({ source: join(repo, 'file'), copy: ['a'] }), { code: 'SEAL_BAD_PATH', unchanged: store.root });
    expectError(() => store.captureSync({ source: join(repo, 'missing'), copy: ['a'] }), { code: 'SEAL_UNAVAILABLE', unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, copy: ['missing'] }), { code: 'SEAL_UNAVAILABLE', message: /^path is unavailable: missing: ENOENT/, unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, copy: ['file/x'] }), { code: 'SEAL_BAD_PATH', message: 'parent must be a directory: file', unchanged: store.root });
    store.closeSync();
  });

  it('refuses names that are not valid UTF-8', () => {
    const { repo, store } = setup({ 'd/ok': 'x' });
    writeFileSync(Buffer.concat([Buffer.from(join(repo, 'd') + '/'), Buffer.from([0xff, 0x0a])]), 'bad');
    expectError(() => store.captureSync({ source: repo, copy: ['d'] }), { code: 'SEAL_BAD_PATH', message: 'path is not valid UTF-8: d/\\xff\\x0a', unchanged: store.root });
    // Stepped past, never opened, and refused with every other obstacle, each with its way out (a pattern matching its bad bytes with ?).
    writeFileSync(Buffer.concat([Buffer.from(join(repo, 'd') + '/tr'), Buffer.from([0xe2, 0x82]), Buffer.from('.txt')]), 'cut');
    mkfifo(join(repo, 'd/pipe'));
    // In the walk's (byte) order: ok, pipe, tr\xe2\x82.txt, \xff\n; the first found is the error.
    const err = expectError(() => store.captureSync({ source: repo, copy: ['d'] }), { code: 'SEAL_SPECIAL_FILE', message: 'capture accepts only regular files and directories: d/pipe, and 2 more obstacles', unchanged: store.root }) as SealError;
    expect(err.details).toEqual([
      { path: 'd/pipe', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: --exclude /d/pipe leaves it out' },
      { path: 'd/tr\udce2\udc82.txt', code: 'SEAL_BAD_PATH', hint: "a name that is not valid UTF-8 (a manifest holds UTF-8 paths): rename it, or --exclude '/d/tr?.txt' leaves it out" },
      { path: 'd/\udcff\n', code: 'SEAL_BAD_PATH', hint: 'a name that is not valid UTF-8 (a manifest holds UTF-8 paths): rename it, or --exclude with a pattern for it leaves it out (? matches each sequence that is not UTF-8)' },
    ]);
    rmSync(Buffer.concat([Buffer.from(join(repo, 'd') + '/'), Buffer.from([0xff, 0x0a])]));
    expect(store.captureSync({ source: repo, copy: ['d'], exclude: ['/d/tr?.txt', 'pipe'] }).entries.map((e) => e.path)).toEqual(['d', 'd/ok']);
    store.closeSync();
  });
});

describe('limits', () => {
  it('entries (implicit parents count), total bytes, file bytes, path bytes and depth', () => {
    const { repo, store } = setup({ 'a/b/c/f1': '12345', 'a/b/c/f2': '67890' });
    const cases: [Record<string, number>, string[], string][] = [
      [{ maxEntries: 4 }, ['a/b/c'], 'capture exceeds the entry limit (4 entries): a/b/c/f2'],
      [{ maxTotalBytes: 9 }, ['a'], 'capture exceeds the total byte limit (9 bytes): a/b/c/f2'],
      [{ maxFileBytes: 4 }, ['a'], 'file exceeds the per-file limit (4 bytes): a/b/c/f1'],
      [{ maxPathBytes: 7 }, ['a'], 'capture exceeds the path byte limit (7 bytes): a/b/c/f1'],
      [{ maxDepth: 3 }, ['a'], 'capture exceeds the depth limit (3 levels): a/b/c/f1'],
    ];
    for (const [limits, copy, message] of cases) {
      expectError(() => store.captureSync({ source: repo, copy, limits }), { code: 'SEAL_LIMIT', message, unchanged: store.root });
    }
    // Exactly at each limit passes.
    const snap = store.captureSync({ source: repo, copy: ['a'], limits: { maxEntries: 5, maxTotalBytes: 10, maxFileBytes: 5, maxDepth: 4, maxPathBytes: 8 } });
    expect(snap.entries).toHaveLength(5);
    expectError(() => store.captureSync({ source: repo, copy: ['a'], limits: { maxEntries: -1 } }), {
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.limits.maxEntries" is out of range. It must be >= 0 && <= 9007199254740991. Received -1',
    });
    store.closeSync();
  });

  it('a very deep tree is SEAL_LIMIT, not a stack overflow or EMFILE', () => {
    const { repo, store } = setup({});
    const deep = join(repo, ...Array.from({ length: 300 }, () => 'd'));
    mkdirSync(deep, { recursive: true });
    expectError(() => store.captureSync({ source: repo, copy: ['d'] }), { code: 'SEAL_LIMIT', message: /^capture exceeds the depth limit \(256 levels\): d(\/d){256}$/, unchanged: store.root });
    store.closeSync();
  });
});

describe('mounts', () => {
  it('keeps modes and bounded relative symlinks, adds .vite-temp for node_modules, and binds', () => {
    const { repo, store } = setup({
      'node_modules/pkg/index.js': 'module.exports = 1',
      'node_modules/.bin/.keep': '',
      'node_modules/pkg/bin.js': '#!/bin/sh',
    });
    chmodSync(join(repo, 'node_modules/pkg/bin.js'), 0o755);
    symlinkSync('../pkg/bin.js', join(repo, 'node_modules/.bin/tool'));
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'node_modules', target: 'node_modules' }] });
    const mount = snap.mounts[0]!;
    expect(mount.kind).toBe('directory');
    const byPath = new Map(mount.entries.map((e) => [e.path, e]));
    expect(byPath.get('payload/pkg/bin.js')!.mode).toBe(0o755);
    expect(byPath.get('payload/pkg/index.js')!.mode).toBe(0o644);
    expect(byPath.get('payload/.vite-temp')).toEqual({ kind: 'directory', path: 'payload/.vite-temp', size: 0, sha256: '', mode: 0, link_target: '' });
    expect(byPath.get('payload/.bin/tool')).toEqual({
      kind: 'symlink',
      path: 'payload/.bin/tool',
      size: 13,
      sha256: sha('../pkg/bin.js'),
      mode: 0,
      link_target: '../pkg/bin.js',
    });
    const payload = join(snap.root, 'mounts/00000/payload');
    expect(lstatSync(join(payload, '.bin/tool')).isSymbolicLink()).toBe(true);
    expect(statSync(join(payload, 'pkg/bin.js')).mode & 0o7777).toBe(0o500);
    expect(statSync(join(payload, 'pkg/index.js')).mode & 0o7777).toBe(0o400);
    expect(statSync(join(payload, '.vite-temp')).mode & 0o7777).toBe(0o500);
    // The binding pins the mount content; drift fails closed.
    const again = store.captureSync({ source: repo, mounts: [{ source: 'node_modules', target: 'node_modules' }], revision: 'r', expectMounts: snap.mountBinding });
    expect(again.mountBinding).toEqual(snap.mountBinding);
    writeFileSync(join(repo, 'node_modules/pkg/index.js'), 'module.exports = 2');
    expectError(() => store.captureSync({
      source: repo,
      mounts: [{ source: 'node_modules', target: 'node_modules' }],
      revision: 'r2',
      expectMounts: snap.mountBinding,
    }), { code: 'SEAL_BINDING', message: 'mount content changed after binding', unchanged: store.root });
    // A reused definition is checked against the binding too.
    expect(() =>
      store.captureSync({ source: repo, mounts: [{ source: 'node_modules', target: 'node_modules' }], expectMounts: { contentDigest: 'x', manifestDigest: 'y' } }),
    ).toThrow('mount content changed after binding');
    store.closeSync();
  });

  it('refuses absolute, escaping and dangling links', () => {
    const cases: [string, string, string][] = [
      ['/etc/passwd', 'SEAL_ESCAPE', 'symlink must be a bounded relative link: deps/l -> /etc/passwd'],
      ['../../../../etc', 'SEAL_ESCAPE', 'symlink escapes the sandbox workspace: deps/l -> ../../../../etc'],
      ['missing', 'SEAL_ESCAPE', 'symlink is dangling or escapes its snapshot: deps/l -> missing'],
      ['loop', 'SEAL_ESCAPE', 'symlink is dangling or escapes its snapshot: deps/loop -> loop'],
    ];
    for (const [target, code, message] of cases) {
      const { repo, store } = setup({ 'deps/f': 'x' });
      symlinkSync(target, join(repo, 'deps', target === 'loop' ? 'loop' : 'l'));
      expectError(() => store.captureSync({ source: repo, mounts: [{ source: 'deps', target: 'deps' }] }), { code, message, unchanged: store.root });
      store.closeSync();
    }
  });

  it('allows a link to elsewhere in the workspace and a link to a directory inside the payload', () => {
    const { repo, store } = setup({ 'deps/sub/f': 'x' });
    symlinkSync('../src', join(repo, 'deps/ws'));
    symlinkSync('sub', join(repo, 'deps/alias'));
    symlinkSync('alias/f', join(repo, 'deps/via'));
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'deps', target: 'deps' }] });
    expect(snap.mounts[0]!.entries.filter((e) => e.kind === 'symlink').map((e) => e.path)).toEqual(['payload/alias', 'payload/via', 'payload/ws']);
    store.closeSync();
  });

  it('captures a single-file mount and refuses a symlinked mount source', () => {
    const { repo, store } = setup({ 'cfg/app.json': '{}' });
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'cfg/app.json', target: 'app.json' }] });
    expect(snap.mounts[0]!.kind).toBe('file');
    expect(snap.mounts[0]!.entries.map((e) => e.path)).toEqual(['payload']);
    symlinkSync('cfg', join(repo, 'alias'));
    expectError(() => store.captureSync({ source: repo, mounts: [{ source: 'alias', target: 'x' }] }), { code: 'SEAL_SYMLINK', message: 'capture must not traverse a symlink: alias', unchanged: store.root });
    store.closeSync();
  });
});

describe('store lifetime', () => {
  it('ephemeral close thaws and removes everything; close is idempotent; capture after close is SEAL_CLOSED', async () => {
    const { repo, store } = setup({ 'a/f': 'x' });
    store.captureSync({ source: repo, copy: ['a'] });
    await store.close();
    await store.close();
    expect(existsSync(store.root)).toBe(false);
    expect(() => store.captureSync({ source: repo, copy: ['a'] })).toThrow(expect.objectContaining({ code: 'SEAL_CLOSED', message: 'snapshot store is already closed' }));
    await expect(store.capture({ source: repo, copy: ['a'] })).rejects.toMatchObject({ code: 'SEAL_CLOSED' });
  });

  it('a persistent store keeps snapshots, lists them and reloads them by digest prefix', () => {
    const { repo } = setup({ 'a/f': 'x' });
    const dir = join(tempDir(), 'store');
    const store = SnapshotStore.openSync(dir);
    const snap = store.captureSync({ source: repo, copy: ['a'], revision: 'v' });
    store.closeSync();
    const reopened = SnapshotStore.openSync(dir);
    expect(reopened.list()).toEqual([snap.digest]);
    const loaded = reopened.get(snap.digest.slice(0, 8));
    expect(loaded.digest).toBe(snap.digest);
    expect(loaded.entries).toEqual(snap.entries);
    expect(loaded.revision).toBe('v');
    expect(() => reopened.get('ffff')).toThrow(expect.objectContaining({ code: 'SEAL_UNAVAILABLE' }));
    expectError(() => reopened.get('xyz'), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The argument 'digest' must be a snapshot digest or a prefix of one (1 to 64 lower-case hex digits). Received 'xyz'",
    });
    // Snapshots until two share a first digit (at most 17): that prefix names both.
    const byFirst = new Map<string, string>([[snap.digest[0]!, snap.digest]]);
    let shared: string | undefined;
    for (let i = 0; shared === undefined; i++) {
      const d = reopened.captureSync({ source: repo, copy: ['a'], revision: `r${i}` }).digest;
      if (byFirst.has(d[0]!)) shared = d[0]!;
      else byFirst.set(d[0]!, d);
    }
    expectError(() => reopened.get(shared!), { code: 'SEAL_AMBIGUOUS', message: `digest prefix is ambiguous: ${shared} (2 snapshots)` });
    expectError(() => reopened.remove(shared!), { code: 'SEAL_AMBIGUOUS', unchanged: dir });
    reopened.closeSync();
  });

  it('sweeps stale builds on open but never a live one', () => {
    const dir = join(tempDir(), 'store');
    SnapshotStore.openSync(dir);
    mkdirSync(join(dir, 'tmp/build-stale/copy/x'), { recursive: true });
    chmodSync(join(dir, 'tmp/build-stale/copy'), 0o500);
    SnapshotStore.openSync(dir);
    expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
  });

  it('refuses a store inside what is being captured', () => {
    const { repo } = setup({ 'a/f': 'x' });
    const store = SnapshotStore.openSync(join(repo, 'a/store'), { ephemeral: true });
    expect(() => store.captureSync({ source: repo, copy: ['a'] })).toThrow(
      expect.objectContaining({ code: 'SEAL_OVERLAP', message: 'the store lies inside what is being captured: a' }),
    );
    store.closeSync();
  });
});

describe('async capture', () => {
  it('reports progress and can be aborted, leaving nothing behind', async () => {
    const { repo, store } = setup({ 'big/a': Buffer.alloc(8 << 20, 1), 'big/b': Buffer.alloc(8 << 20, 2) });
    const seen: number[] = [];
    const snap = await store.capture({ source: repo, copy: ['big'], onProgress: (p) => seen.push(p.bytes) });
    expect(snap.totalBytes).toBe(16 << 20);
    // The last report holds the totals, as materialize's and verify's do (it once stopped at the last throttled one).
    expect(seen.at(-1)).toBe(16 << 20);
    const checked: { entries: number; bytes: number }[] = [];
    await snap.verify({ onProgress: (p) => checked.push(p) });
    expect(checked.at(-1)).toEqual({ entries: 3, bytes: 16 << 20 });
    // Entries mean the same in every call: materialize counts the directories it makes too, not only its files.
    const made: { entries: number; bytes: number }[] = [];
    const m = await snap.materialize(join(repo, '..', 'arm'), { createClone: true, onProgress: (p) => made.push(p) });
    expect([m.files, m.directories, made.at(-1)]).toEqual([2, 1, { entries: 3, bytes: 16 << 20 }]);
    // A reset that restores a directory counts it too, to the last report (that one once fell back to the files alone).
    rmSync(join(repo, '..', 'arm', 'big'), { recursive: true });
    const restored: { entries: number; bytes: number }[] = [];
    const r = await snap.reset(join(repo, '..', 'arm'), { onProgress: (p) => restored.push(p) });
    expect([r.removed, restored.at(-1)]).toEqual([['big', 'big/a', 'big/b'], { entries: 3, bytes: 16 << 20 }]);
    const controller = new AbortController();
    controller.abort();
    await expect(store.capture({ source: repo, copy: ['big'], revision: 'x', signal: controller.signal })).rejects.toMatchObject({
      code: 'SEAL_ABORTED',
      message: 'capture was aborted',
    });
    // Many entries after the first progress report: the abort lands long before the walk ends.
    writeTree(repo, Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`big/many/f${i}`, String(i)])));
    const late = new AbortController();
    const pending = store.capture({ source: repo, copy: ['big'], revision: 'y', signal: late.signal, onProgress: () => late.abort() });
    await expect(pending).rejects.toMatchObject({ code: 'SEAL_ABORTED' });
    expect(storeLeftovers(store.root)).toEqual([`snapshots/${snap.digest}`]);
    const sync = new AbortController();
    let calls = 0;
    expect(() =>
      store.captureSync({ source: repo, copy: ['big'], revision: 'z', signal: sync.signal, onProgress: () => (++calls === 1 ? sync.abort() : undefined) }),
    ).toThrow(expect.objectContaining({ code: 'SEAL_ABORTED' }));
    expect(storeLeftovers(store.root)).toEqual([`snapshots/${snap.digest}`]);
    await store.close();
  });

  it('a signal that is not an AbortSignal is ERR_INVALID_ARG_TYPE, sync and async alike, an object that looks like an aborted one too; nothing made', async () => {
    const { repo, store } = setup({ 'src/a': 'a' });
    for (const signal of [{}, { aborted: true }, 5, 'x', null]) {
      const message = `The "options.signal" property must be an instance of AbortSignal. Received ${signal === null ? 'null' : typeof signal === 'object' ? 'an instance of Object' : typeof signal === 'number' ? 'type number (5)' : "type string ('x')"}`;
      expectError(() => store.captureSync({ source: repo, copy: ['src'], signal: signal as never }), { code: 'ERR_INVALID_ARG_TYPE', message, unchanged: store.root });
      await expect(store.capture({ source: repo, copy: ['src'], signal: signal as never })).rejects.toMatchObject({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message });
    }
    const snap = await store.capture({ source: repo, copy: ['src'] });
    const clone = join(repo, '..', 'clone');
    await expect(snap.materialize(clone, { createClone: 'yes' as never })).rejects.toMatchObject({
      code: 'ERR_INVALID_ARG_TYPE',
      message: `The "options.createClone" property must be of type boolean. Received type string ('yes')`,
    });
    await expect(store.pull('d'.repeat(64), '127.0.0.1:1/x', { signal: {} as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.signal" property must be an instance of AbortSignal. Received an instance of Object' });
    await store.close();
  });
});

describe('more declaration errors', () => {
  it('unknown limits, ensureDirs on a file mount, explicit ensureDirs, bad workspace', () => {
    const { repo, store } = setup({ 'cfg/app.json': '{}', 'deps/f': 'x' });
    expectError(() => store.captureSync({ source: repo, copy: ['cfg'], limits: { maxFiles: 1 } as never }), { code: 'ERR_INVALID_ARG_VALUE', message: "The property 'options.limits.maxFiles' is not a known limit (maxEntries, maxTotalBytes, maxPathBytes, maxFileBytes, maxDepth). Received 1", unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, mounts: [{ source: 'cfg/app.json', target: 'app.json', ensureDirs: ['x'] }] }), { code: 'SEAL_BAD_PATH', message: 'ensureDirs needs a directory mount: cfg/app.json', unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, copy: ['cfg'], workspace: 'relative' }), { code: 'SEAL_BAD_PATH', message: 'workspace must be an absolute path: relative', unchanged: store.root });
    expectError(() => store.captureSync({ source: repo, mounts: [{ source: 'deps', target: '../out' }] }), { code: 'SEAL_BAD_PATH', message: "mount target must not contain '..': ../out", unchanged: store.root });
    // A misspelt key is refused (the Python cache refuses any key but its own), not a snapshot without the directories asked for.
    expectError(() => store.captureSync({ source: repo, mounts: [{ source: 'deps', target: 'deps', ensuredirs: ['cache'] } as never] }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.mounts[0].ensuredirs' is not a key of a mount declaration (source, target, ensureDirs). Received [ 'cache' ]",
      unchanged: store.root,
    });
    expectError(() => store.captureSync({ source: repo, mounts: [{ source: 'deps', target: 'deps', extra: undefined } as never] }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.mounts[0].extra' is not a key of a mount declaration (source, target, ensureDirs). Received undefined",
      unchanged: store.root,
    });
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'deps', target: 'deps', ensureDirs: ['cache/tmp'] }] });
    expect(snap.mounts[0]!.entries.map((e) => e.path)).toEqual(['payload', 'payload/cache', 'payload/cache/tmp', 'payload/f']);
    store.closeSync();
  });
});

describe('every capture walks the source', () => {
  it('a second capture of the same definition sees a changed file and gets a new digest', async () => {
    const { repo, store } = setup({ 'a/f': 'one hundred bytes' });
    const one = store.captureSync({ source: repo, copy: ['a'] });
    writeFileSync(join(repo, 'a/f'), 'seven b');
    const two = store.captureSync({ source: repo, copy: ['a'] });
    expect(two.digest).not.toBe(one.digest);
    expect(two.entries.find((e) => e.path === 'a/f')).toMatchObject({ size: 7, sha256: sha('seven b') });
    writeFileSync(join(repo, 'a/f'), 'async now');
    const three = await store.capture({ source: repo, copy: ['a'] });
    expect(three.entries.find((e) => e.path === 'a/f')).toMatchObject({ size: 9, sha256: sha('async now') });
    const again = store.captureSync({ source: repo, copy: ['a'] });
    expect(again.digest).toBe(three.digest);
    store.closeSync();
  });

  it('a second capture applies its own limits', async () => {
    const { repo, store } = setup({ 'a/f': 'x', 'a/g': 'y' });
    store.captureSync({ source: repo, copy: ['a'] });
    expectError(() => store.captureSync({ source: repo, copy: ['a'], limits: { maxEntries: 1 } }), {
      code: 'SEAL_LIMIT',
      message: 'capture exceeds the entry limit (1 entries): a/f',
      unchanged: store.root,
    });
    await expect(store.capture({ source: repo, copy: ['a'], limits: { maxFileBytes: 0 } })).rejects.toMatchObject({ code: 'SEAL_LIMIT' });
    expectError(() => store.captureSync({ source: repo, copy: ['a'], expectMounts: { contentDigest: 'x', manifestDigest: 'y' } }), {
      code: 'SEAL_BINDING',
      unchanged: store.root,
    });
    store.closeSync();
  });
});
