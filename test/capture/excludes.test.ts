// excludes.test.ts: gitignore patterns that leave parts of the source out of a capture: what they match, that what they leave out is never opened, the digests with and without them, and the patterns refused.
import { chmodSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { SnapshotStore, snapshotDigest, type CaptureCallOptions, type Snapshot } from '../../dist/index.js';
import { DT_REG } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, mkfifo, storeLeftovers, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/** A tree of every shape: files, directories, nesting, names that look like patterns, a FIFO, links. */
const TREE: Record<string, string | null> = {
  'app/main.js': 'main',
  'app/a.txt': 'a',
  'app/[abc].txt': 'brackets',
  'app/!x': 'bang',
  'app/x.log': 'log',
  'app/keep.log': 'keep',
  'app/build': 'a file named build',
  'app/dist/d.js': 'nested dist',
  'app/lib/__pycache__/m.pyc': 'pyc',
  'app/lib/deep/__pycache__/n.pyc': 'pyc',
  'app/lib/deep/ok.py': 'ok',
  'app/empty': null,
  'build/out.o': 'obj',
  'dist/bundle.js': 'bundle',
  'deps/p/index.js': 'p',
  'deps/p/debug.log': 'dbg',
  'deps/.cache/blob': 'cache',
  README: 'readme',
};

function setup(tree: Record<string, string | null> = TREE): { repo: string; store: SnapshotStore } {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  return { repo, store: SnapshotStore.openSync(join(base, 'store'), { ephemeral: true }) };
}

const paths = (snap: Snapshot): string[] => [...snap.entries.map((e) => e.path), ...snap.mounts.flatMap((m) => m.entries.map((e) => `[${m.target}] ${e.path}`))];

/** The entries captured with these patterns, every top-level entry but deps copied and deps mounted. */
function kept(exclude: string[], tree: Record<string, string | null> = TREE): string[] {
  const { repo, store } = setup(tree);
  const snap = store.captureSync({ source: repo, exclude, mounts: [{ source: 'deps', target: 'deps', ensureDirs: [] }] });
  const out = paths(snap);
  store.closeSync();
  return out;
}

let everything: string[] | undefined;
/** Every entry, captured without patterns once. */
const all = (): string[] => (everything ??= kept([]));
const without = (...gone: string[]): string[] => all().filter((p) => !gone.includes(p));

describe('what exclude patterns leave out', () => {
  it('without patterns everything is captured (the baseline the cases below remove from)', () => {
    expect(all()).toEqual([
      'README',
      'app',
      'app/!x',
      'app/[abc].txt',
      'app/a.txt',
      'app/build',
      'app/dist',
      'app/dist/d.js',
      'app/empty',
      'app/keep.log',
      'app/lib',
      'app/lib/__pycache__',
      'app/lib/__pycache__/m.pyc',
      'app/lib/deep',
      'app/lib/deep/__pycache__',
      'app/lib/deep/__pycache__/n.pyc',
      'app/lib/deep/ok.py',
      'app/main.js',
      'app/x.log',
      'build',
      'build/out.o',
      'dist',
      'dist/bundle.js',
      '[deps] payload',
      '[deps] payload/.cache',
      '[deps] payload/.cache/blob',
      '[deps] payload/p',
      '[deps] payload/p/debug.log',
      '[deps] payload/p/index.js',
    ]);
  });

  it('an unanchored name matches at every depth, an anchored one only below the source', () => {
    expect(kept(['dist'])).toEqual(without('app/dist', 'app/dist/d.js', 'dist', 'dist/bundle.js'));
    expect(kept(['/dist'])).toEqual(without('dist', 'dist/bundle.js'));
    expect(kept(['app/dist'])).toEqual(without('app/dist', 'app/dist/d.js'));
  });

  it('a directory-only pattern leaves a file of that name in', () => {
    expect(kept(['build/'])).toEqual(without('build', 'build/out.o'));
    expect(kept(['build'])).toEqual(without('build', 'build/out.o', 'app/build'));
  });

  it('**/ and a glob match at any depth; a negation brings a name back', () => {
    expect(kept(['**/__pycache__/'])).toEqual(without('app/lib/__pycache__', 'app/lib/__pycache__/m.pyc', 'app/lib/deep/__pycache__', 'app/lib/deep/__pycache__/n.pyc'));
    expect(kept(['*.log'])).toEqual(without('app/x.log', 'app/keep.log', '[deps] payload/p/debug.log'));
    expect(kept(['*.log', '!keep.log'])).toEqual(without('app/x.log', '[deps] payload/p/debug.log'));
    // A later pattern wins: the negation first is overruled.
    expect(kept(['!keep.log', '*.log'])).toEqual(without('app/x.log', 'app/keep.log', '[deps] payload/p/debug.log'));
  });

  it('any number of ** and * (they once had to be at most two each: the matcher backtracked), a trailing /** below a directory and not the directory itself, a /**/ of no directory at all', () => {
    expect(kept(['app/**/deep/**/__pycache__/*.pyc'])).toEqual(without('app/lib/deep/__pycache__/n.pyc'));
    expect(kept(['**/*a*/**/*e*/**/*_*/*.p*'])).toEqual(without('app/lib/deep/__pycache__/n.pyc'));
    expect(kept(['app/lib/**'])).toEqual(without('app/lib/__pycache__', 'app/lib/__pycache__/m.pyc', 'app/lib/deep', 'app/lib/deep/__pycache__', 'app/lib/deep/__pycache__/n.pyc', 'app/lib/deep/ok.py'));
    expect(kept(['app/**/lib/'])).toEqual(without('app/lib', 'app/lib/__pycache__', 'app/lib/__pycache__/m.pyc', 'app/lib/deep', 'app/lib/deep/__pycache__', 'app/lib/deep/__pycache__/n.pyc', 'app/lib/deep/ok.py'));
  });

  it('names that look like patterns: a class matches its characters, an escaped one only itself', () => {
    expect(kept(['[abc].txt'])).toEqual(without('app/a.txt'));
    expect(kept(['\\[abc\\].txt'])).toEqual(without('app/[abc].txt'));
    expect(kept(['\\!x'])).toEqual(without('app/!x'));
    expect(kept(['app/*.txt'])).toEqual(without('app/a.txt', 'app/[abc].txt'));
  });

  it('case matters, as in git on Linux', () => {
    expect(kept(['readme', 'APP/', 'Main.js'])).toEqual(all());
    expect(kept(['README', 'main.js'])).toEqual(without('README', 'app/main.js'));
  });

  it('patterns are relative to the source, inside mounts too (a mount keeps its empty directories)', () => {
    expect(kept(['/deps/.cache/'])).toEqual(without('[deps] payload/.cache', '[deps] payload/.cache/blob'));
    expect(kept(['/deps/p/*', '!/deps/p/index.js'])).toEqual(without('[deps] payload/p/debug.log'));
    expect(kept(['/app/lib/**', '/app/empty/'])).toEqual(all().filter((p) => !p.startsWith('app/lib/') && p !== 'app/empty'));
  });

  it('without copy, a top-level entry the patterns leave out is no copy root', () => {
    const { repo, store } = setup();
    const snap = store.captureSync({ source: repo, exclude: ['/build/', '/dist', 'README'], mounts: [{ source: 'deps', target: 'deps' }] });
    expect(snap.declarations).toEqual(['app']);
    expect(snap.exclude).toEqual(['/build/', '/dist', 'README']);
    store.closeSync();
  });
});

describe('a declared or top-level root is matched by the kind it is, as git matches it', () => {
  /** A repo with a build script file, a .github directory, a dot file, src/ and package.json (the shapes real .gitignore files meet). */
  const ROOTS: Record<string, string | null> = {
    build: '#!/bin/sh\nmake\n',
    'lib/a.c': 'int a;\n',
    '.github/ci.yml': 'on: push\n',
    '.env': 'X=1\n',
    'src/m.py': 'x\n',
    'package.json': '{}\n',
    'tmp/junk': 'j\n',
  };
  const roots = (exclude: string[]): string[] => {
    const { repo, store } = setup(ROOTS);
    const snap = store.captureSync({ source: repo, exclude });
    const out = snap.declarations;
    store.closeSync();
    return out;
  };

  it('without copy: a directory-only pattern keeps a file of that name, a directory-only negation and the whitelist idiom bring directories back', async () => {
    // Each was SEAL_CORRUPT "a declared root is excluded": the capture's own check matched the root as a file and as a directory.
    expect(roots(['build/'])).toEqual(['.env', '.github', 'build', 'lib', 'package.json', 'src', 'tmp']);
    expect(roots(['.*', '!/.github/'])).toEqual(['.github', 'build', 'lib', 'package.json', 'src', 'tmp']);
    expect(roots(['/*', '!/src/', '!/package.json'])).toEqual(['package.json', 'src']);
    expect(roots(['*', '!*/', '!*.py'])).toEqual(['.github', 'lib', 'src', 'tmp']);
    // Through the worker thread, and read back from the store (its document check takes each root's kind from its entry).
    const { repo, store } = setup(ROOTS);
    const snap = await store.capture({ source: repo, exclude: ['/*', '!/src/', '!/package.json'] });
    expect(snap.entries.map((e) => e.path)).toEqual(['package.json', 'src', 'src/m.py']);
    expect(store.get(snap.digest).declarations).toEqual(['package.json', 'src']);
    expect(await snap.verify()).toEqual({ entries: 3, bytes: 5 });
    await store.close();
  });

  it('without copy: a top-level entry listed as a file but captured as a directory the patterns leave out (it changed in between) is SEAL_CHANGED naming it, nothing published', async () => {
    const { repo, store } = setup({ 'build/out.o': 'obj', 'src/m.py': 'x\n' });
    // The listing says build is a file (as a swap between the listing and the walk would have it): build/ keeps it as a root.
    const listedAsFile = wrapSys({ readdir: (orig) => (fd) => orig(fd).map((e) => (e.name === 'build' ? { ...e, type: DT_REG } : e)) });
    const options = { source: repo, exclude: ['build/'] };
    const message = 'top-level entry changed while snapshotting (not the kind it was listed as): build';
    const sysStore = SnapshotStore.openSync(store.root, { sys: listedAsFile });
    expectError(() => sysStore.captureSync(options), { code: 'SEAL_CHANGED', message, path: 'build', unchanged: store.root });
    expect(storeLeftovers(store.root)).toEqual([]);
    sysStore.closeSync();
    // Listed as it is: no root.
    expect((await store.capture(options)).declarations).toEqual(['src']);
    await store.close();
  });

  it('declared: a root left out only as the other kind is captured; one left out as its own kind is ERR_INVALID_ARG_VALUE once its kind is known, nothing left', async () => {
    const { repo, store } = setup(ROOTS);
    let snap = store.captureSync({ source: repo, copy: ['build', 'src'], exclude: ['build/', '/*', '!/src/', '!/build'] });
    expect(snap.entries.map((e) => [e.path, e.kind])).toEqual([['build', 'file'], ['src', 'directory'], ['src/m.py', 'file']]);
    snap = await store.capture({ source: repo, copy: ['lib'], mounts: [{ source: 'src', target: 'deps' }], exclude: ['/*', '!/lib/', '!/src/'] });
    expect([snap.declarations, snap.mounts.map((m) => m.kind)]).toEqual([['lib'], ['directory']]);
    const before = storeLeftovers(store.root);
    const message = (name: string, pattern: string, raw: string): string => `The property '${name}' is left out by the exclude pattern ${JSON.stringify(pattern)}. Received '${raw}'`;
    const cases: [CaptureCallOptions, string][] = [
      [{ source: repo, copy: ['src'], exclude: ['src/'] }, message('options.copy[0]', 'src/', 'src')],
      [{ source: repo, copy: ['lib', 'package.json'], exclude: ['/*', '!/lib/', '!*/'] }, message('options.copy[1]', '/*', 'package.json')],
      [{ source: repo, copy: ['lib'], mounts: [{ source: 'src', target: 'deps' }], exclude: ['/src/'] }, message('options.mounts[0].source', '/src/', 'src')],
    ];
    for (const [options, msg] of cases) {
      expect(expectError(() => store.captureSync(options), { code: 'ERR_INVALID_ARG_VALUE', message: msg, unchanged: store.root })).toBeInstanceOf(TypeError);
      expect(await expectError(async () => store.capture(options), { code: 'ERR_INVALID_ARG_VALUE', message: msg, unchanged: store.root })).toBeInstanceOf(TypeError);
      expect(storeLeftovers(store.root)).toEqual(before);
    }
    expect(store.list().length).toBe(2);
    await store.close();
  });
});

describe('what is left out is never opened', () => {
  it('a FIFO, a symlink in a copy root and an escaping mount link left out are never refused, opened or statted', async () => {
    const base = tempDir();
    const repo = join(base, 'repo');
    writeTree(repo, { 'src/a': 'a', 'out/deep/f': 'f', 'src/junk.log': 'j', 'deps/i.js': 'i' });
    mkfifo(join(repo, 'src/pipe'));
    symlinkSync('a', join(repo, 'src/alias'));
    symlinkSync('/etc/passwd', join(repo, 'deps/abs'));
    const named: string[] = [];
    const unknownType = new Set<string>();
    const note = (path: unknown): void => void named.push(String(path).split('/').pop()!);
    const sys = wrapSys({
      openat: (orig) => (dirfd, path, ...rest) => (note(path), orig(dirfd, path, ...rest)),
      openat2: (orig) => (dirfd, path, ...rest) => (note(path), orig(dirfd, path, ...rest)),
      fstatat: (orig) => (dirfd, path, flags) => (note(path), orig(dirfd, path, flags)),
      readdir: (orig) => (fd) => {
        const list = orig(fd);
        for (const e of list) if (e.type === 0) unknownType.add(String(e.name));
        return list;
      },
    });
    const store = SnapshotStore.openSync(join(base, 'store'), { sys, ephemeral: true });
    const options: CaptureCallOptions = { source: repo, exclude: ['pipe', 'alias', '/out/', '*.log', '/deps/abs'], mounts: [{ source: 'deps', target: 'deps', ensureDirs: [] }] };
    const snap = store.captureSync(options);
    expect(paths(snap)).toEqual(['src', 'src/a', '[deps] payload', '[deps] payload/i.js']);
    expect(named).toEqual(expect.arrayContaining(['src', 'a', 'deps', 'i.js']));
    const left = ['pipe', 'alias', 'out', 'deep', 'f', 'junk.log', 'abs'];
    // Decided from the name and the listing's d_type: not even an fstatat (unless the filesystem gave no type).
    expect(named.filter((n) => left.includes(n) && !unknownType.has(n))).toEqual([]);
    // The async twin (on this thread, for an injected layer) gives the same snapshot.
    expect((await store.capture(options)).digest).toBe(snap.digest);
    store.closeSync();
  });
});

describe('a clone of a snapshot with exclude patterns', () => {
  it('checkClone does not count what the patterns leave out, and counts everything else', async () => {
    const { repo, store } = setup();
    const snap = store.captureSync({ source: repo, copy: ['app'], exclude: ['*.log', '!keep.log', '__pycache__/', 'dist/'] });
    const clone = join(tempDir(), 'arm');
    await snap.materialize(clone, { createClone: true });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true, added: [], removed: [], changed: [] });
    // What a build in the arm writes where the patterns point (a file, a directory, below one) is no difference.
    writeTree(clone, { 'app/new.log': 'log', 'app/dist/out.js': 'out', 'app/lib/deep/__pycache__/ok.pyc': 'pyc' });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true, added: [] });
    // A directory *.log names is left out too; a file dist/ cannot name, a negated pattern's file and other names are differences.
    writeTree(clone, { 'app/x.log/inner': 'a directory named x.log', 'app/lib/dist': 'a file', 'app/keep.log.d': 'no', 'app/lib/__pycache__.txt': 'no' });
    rmSync(join(clone, 'app/keep.log'));
    writeTree(clone, { 'app/keep.log': 'changed' });
    const report = await snap.checkClone(clone);
    expect([report.ok, report.added, report.changed, report.removed]).toEqual([false, ['app/keep.log.d', 'app/lib/__pycache__.txt', 'app/lib/dist'], ['app/keep.log'], []]);
    store.closeSync();
  });
});

describe('digests', () => {
  // A tree at a fixed path (the snapshot digest folds in the source path), captured before
  // exclude patterns existed: these digests must never change for a capture without them.
  const golden = '/tmp/treeseal-golden-excludes';
  afterAll(() => rmSync(golden, { recursive: true, force: true }));

  function goldenTree(): string {
    rmSync(golden, { recursive: true, force: true });
    const src = join(golden, 'src');
    const files = { 'app/main.js': 'main', 'app/lib/a.js': 'a', 'app/[abc].txt': 'brackets', 'app/!x': 'bang', README: 'readme', 'z.log': 'log', 'deps/p/index.js': 'p', 'deps/p/bin.js': 'bin', 'build/out.o': 'obj' };
    writeTree(src, files);
    for (const f of Object.keys(files)) chmodSync(join(src, f), 0o644);
    chmodSync(join(src, 'app/main.js'), 0o755);
    mkdirSync(join(src, 'deps/.bin'));
    symlinkSync('../p/bin.js', join(src, 'deps/.bin/p'));
    return src;
  }

  it('a capture without patterns (or with none) keeps the digests it had before they existed', async () => {
    const src = goldenTree();
    const store = await SnapshotStore.open(join(golden, 'store'), { ephemeral: true });
    const a = await store.capture({ source: src, copy: ['app', 'README'], mounts: [{ source: 'deps', target: 'node_modules' }], revision: 'v1' });
    expect([a.digest, a.manifestDigest]).toEqual(['88a74a6378e959f87583671388913ffe6cd7341c043944d3e94e8886e439b262', '9d2bf3619ba212b4310862b491bc1cec2020fcb6c6ceb1fa2c3cb9f3aede7999']);
    const b = store.captureSync({ source: src, copy: ['app', 'README', 'build', 'z.log'], mounts: [{ source: 'deps', target: 'deps' }], keepExecutable: true, exclude: [] });
    expect([b.digest, b.manifestDigest]).toEqual(['989517042855f3053b4af5d067374b1d219f5a924253d84f9301f2efbd30cb6d', '7140b70941f27fdea59948ec8c092f41a3cbd3011e6d425d5b8f64c7840f2f46']);
    // copy omitted: the roots `treeseal capture src --mount deps` took before the library did.
    const c = store.captureSync({ source: src, mounts: [{ source: 'deps', target: 'deps' }] });
    expect([c.digest, c.declarations]).toEqual(['30d2c443c74f5795c7c1c90e16bb4037233e31e90fb938ec9409ddfdea8af46a', ['README', 'app', 'build', 'z.log']]);
    for (const snap of [a, b, c]) {
      expect(snap.exclude).toEqual([]);
      expect(snap.toJSON()).not.toHaveProperty('exclude');
      expect(JSON.parse(readFileSync(join(snap.root, 'manifest.json'), 'utf8'))).not.toHaveProperty('exclude');
    }
    await store.close();
  });

  it('snapshotDigest folds patterns in only when there are some (the golden vector of the design)', () => {
    const input = {
      source: '/tmp/repo',
      revision: 'a'.repeat(40),
      declarations: ['one', 'two'],
      manifestDigest: '9ae5789c2ed0b9aac154a385a78feda0255b76213fd2be5f2022e06e48b5e31e',
      mountContentDigest: '4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945',
      mountManifestDigest: 'd3b4762162da14671a9ab386aaf94b5ccd89eea18eb33b637134a52cdec1557b',
    };
    const golden = '3b082f959c1a4825be35c726240aa6c18e1dabce006582b65d3cc82b403ccd9b';
    expect([snapshotDigest(input), snapshotDigest({ ...input, exclude: [] }), snapshotDigest({ ...input, exclude: undefined })]).toEqual([golden, golden, golden]);
    expect(snapshotDigest({ ...input, exclude: ['build/'] })).not.toBe(golden);
  });

  it('patterns are part of the definition: in the digest (even when they match nothing), in manifest.json, and back from the store', () => {
    const { repo, store } = setup();
    const base: CaptureCallOptions = { source: repo, copy: ['app'], revision: 'r' };
    const none = store.captureSync(base);
    const unmatched = store.captureSync({ ...base, exclude: ['*.nothing'] });
    expect(unmatched.manifestDigest).toBe(none.manifestDigest);
    expect(unmatched.digest).not.toBe(none.digest);
    const logs = store.captureSync({ ...base, exclude: ['*.log', '!keep.log'] });
    const swapped = store.captureSync({ ...base, exclude: ['!keep.log', '*.log'] });
    expect(new Set([none.digest, unmatched.digest, logs.digest, swapped.digest]).size).toBe(4);
    expect(logs.digest).toBe(
      snapshotDigest({ source: repo, revision: 'r', declarations: ['app'], exclude: ['*.log', '!keep.log'], manifestDigest: logs.manifestDigest, mountContentDigest: logs.mountBinding.contentDigest, mountManifestDigest: logs.mountBinding.manifestDigest }),
    );
    expect(JSON.parse(readFileSync(join(logs.root, 'manifest.json'), 'utf8')).exclude).toEqual(['*.log', '!keep.log']);
    expect(store.get(logs.digest).exclude).toEqual(['*.log', '!keep.log']);
    expect(store.get(logs.digest).toJSON().exclude).toEqual(['*.log', '!keep.log']);
    // The same definition again reuses the snapshot.
    expect(store.captureSync({ ...base, exclude: ['*.log', '!keep.log'] }).captureReport!.reused).toBe(true);
    store.closeSync();
  });
});

describe('a name that is not UTF-8', () => {
  it('a pattern that matches it leaves it out (it was refused as not UTF-8 whatever the patterns said); one the patterns keep is still SEAL_BAD_PATH; diff of a clone holding one ignores it as capture does', async () => {
    const { repo, store } = setup({ 'r/good': 'ok' });
    const bad = Buffer.concat([Buffer.from(join(repo, 'r/bad')), Buffer.from([0xff]), Buffer.from('.log')]);
    writeFileSync(bad, 'x');
    expectError(() => store.captureSync({ source: repo, revision: 'none' }), { code: 'SEAL_BAD_PATH', message: 'path is not valid UTF-8: r/bad\\xff.log' });
    for (const pattern of ['*.log', 'bad*', 'r/bad?.log']) {
      const snap = store.captureSync({ source: repo, exclude: [pattern] });
      expect(paths(snap)).toEqual(['r', 'r/good']);
    }
    expectError(() => store.captureSync({ source: repo, exclude: ['*.txt'] }), { code: 'SEAL_BAD_PATH' });
    const snap = store.captureSync({ source: repo, exclude: ['*.log'] });
    const clone = join(tempDir(), 'clone');
    await snap.materialize(clone, { createClone: true });
    writeFileSync(Buffer.concat([Buffer.from(join(clone, 'r/new')), Buffer.from([0xfe]), Buffer.from('.log')]), 'y');
    expect(await snap.diff(clone, { verify: true })).toMatchObject({ ok: true, added: [] });
    store.closeSync();
  });
});

describe('patterns refused before anything is opened', () => {
  const source = '/nonexistent-source-root';
  const cases: [string, unknown, string, string][] = [
    ['not an array', 'build/', 'ERR_INVALID_ARG_TYPE', `The "options.exclude" property must be an instance of Array. Received type string ('build/')`],
    ['a pattern that is not a string', ['a', 1], 'ERR_INVALID_ARG_TYPE', 'The "options.exclude[1]" property must be of type string. Received type number (1)'],
    ['an empty pattern', [''], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it is empty. Received ''"],
    ['a comment', ['#x'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it is a comment (write \\# for a name that starts with #). Received '#x'"],
    ['an unclosed class', ['a', '[abc'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[1]' is not a valid pattern: it has an unclosed [ (write \\[ for a literal [). Received '[abc'"],
    ['a negated class', ['[!a].txt'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it has a negated class [!...], which is not supported. Received '[!a].txt'"],
    ['an empty range', ['[z-a]'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it has an empty range z-a. Received '[z-a]'"],
    ['a lone backslash at the end', ['a\\'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it ends with a lone backslash. Received 'a\\\\'"],
    ['a line break', ['a\nb'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it holds a NUL byte or a line break. Received 'a\\nb'"],
    ['an empty component', ['a//b'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it has an empty path component. Received 'a//b'"],
    // git matches such a ** across directories and within one name, the matcher as one *.
    ['a ** right after the start and before a /', ['src/lib**/x'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' has a ** right after its first letters and before a / (lib**/), which git matches across directories and within one name: write lib*/**/ (any depth) or lib*/ (one name). Received 'src/lib**/x'"],
    ['an escaped /', ['a\\/b'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' has an escaped / (\\/), which git matches as a / and treeseal does not: write the / as it is. Received 'a\\\\/b'"],
    ['a [:name:] class', ['[[:alpha:]]x'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' has a character class [:name:], which treeseal does not read as git does: list the characters ([a-zA-Z] for [:alpha:]). Received '[[:alpha:]]x'"],
    ['more ? and [...] in all than treeseal matches', ['q[ab]?', `q${'?'.repeat(1030)}`], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude' holds 1032 ? and [...] wildcards in all, more than treeseal matches (1024): each is tried at every place of a name. Received '[2 patterns]'"],
    ['a negated one, anchored', ['!/foo**/bar/'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' has a ** right after its first letters and before a / (foo**/), which git matches across directories and within one name: write foo*/**/ (any depth) or foo*/ (one name). Received '!/foo**/bar/'"],
    ['nothing but a negation', ['!'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' is not a valid pattern: it names nothing. Received '!'"],
    ['a .. component', ['src/../x'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' must not hold '..' as a path component (patterns are relative to the source). Received 'src/../x'"],
    ['a negated .. component', ['!../x/'], 'ERR_INVALID_ARG_VALUE', "The property 'options.exclude[0]' must not hold '..' as a path component (patterns are relative to the source). Received '!../x/'"],
    ['the absolute path of a source entry', [`${source}/build/`], 'ERR_INVALID_ARG_VALUE', `The property 'options.exclude[0]' must be relative to the source, not absolute (write /build/ for ${source}/build/). Received '${source}/build/'`],
    ['a copy root it leaves out whatever its kind', ['*.txt', 'src'], 'ERR_INVALID_ARG_VALUE', `The property 'options.copy[0]' is left out by the exclude pattern "src". Received 'src'`],
    ['a copy root below a directory-only pattern', ['lib/'], 'ERR_INVALID_ARG_VALUE', `The property 'options.copy[1]' is left out by the exclude pattern "lib/". Received 'lib/x'`],
    ['a copy root below a directory it leaves out', ['/lib'], 'ERR_INVALID_ARG_VALUE', `The property 'options.copy[1]' is left out by the exclude pattern "/lib". Received 'lib/x'`],
    ['a mount source it leaves out', ['deps'], 'ERR_INVALID_ARG_VALUE', `The property 'options.mounts[0].source' is left out by the exclude pattern "deps". Received 'deps'`],
  ];

  it.each(cases)('%s', async (_name, exclude, code, message) => {
    let opened = 0;
    const count = <T extends (...args: never[]) => unknown>(orig: T): T => ((...args: Parameters<T>) => (opened++, orig(...args))) as T;
    const sys = wrapSys({ openat: count, openat2: count, fstatat: count, readdir: count });
    const store = SnapshotStore.openSync(join(tempDir(), 'store'), { sys });
    opened = 0;
    const options = { source, copy: ['src', 'lib/x'], mounts: [{ source: 'deps', target: 'deps' }], exclude } as CaptureCallOptions;
    expectError(() => store.captureSync(options), { code, message, unchanged: store.root });
    await expectError(async () => store.capture(options), { code, message, unchanged: store.root });
    expect(opened).toBe(0);
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
  });

  it('crossing to the worker thread, the same errors', async () => {
    const store = await SnapshotStore.open(join(tempDir(), 'store'));
    await expectError(async () => store.capture({ source, exclude: ['[abc'] }), { code: 'ERR_INVALID_ARG_VALUE', message: /unclosed \[/ });
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});
