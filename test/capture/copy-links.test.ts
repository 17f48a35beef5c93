// copy-links.test.ts: symlinks kept in copy roots (links: 'contained'): resolved as the kernel will in the clone's namespace, refused with SEAL_ESCAPE otherwise, stored, materialized, verified and checked in a clone as links.
import { spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, lutimesSync, mkdirSync, readFileSync, readdirSync, readlinkSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, snapshotDigest, type CaptureCallOptions, type SealError, type Snapshot } from '../../dist/index.js';
import { materializeSnapshot, sha256Hex } from '../../dist/internal.js';
import { sys as nativeSys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, listTree, storeLeftovers, tempDir, wrapSys } from '../helpers.js';

checkNoFdLeaks();

/** Keys are paths; a string is a file's bytes, null an empty directory, `{ link }` a symlink. */
type Tree = Record<string, string | null | { link: string }>;

function write(root: string, tree: Tree): void {
  for (const [rel, value] of Object.entries(tree)) {
    const path = join(root, rel);
    mkdirSync(value === null ? path : dirname(path), { recursive: true });
    if (value === null) continue;
    if (typeof value === 'string') writeFileSync(path, value);
    else symlinkSync(value.link, path);
  }
}

/** A header tree as /usr/include holds one: a versioned directory, links to it and through it, a chain, and a sibling root linking in. */
const HEADERS: Tree = {
  'include/libpng16/png.h': '#include "pngconf.h"\nint png_ok(void);\n',
  'include/libpng16/pngconf.h': '#define PNG_CONF 1\n',
  'include/libpng': { link: 'libpng16' },
  'include/png.h': { link: 'libpng/png.h' },
  'include/pngconf.h': { link: 'libpng16/pngconf.h' },
  'include/png-latest.h': { link: 'png-chain' },
  'include/png-chain': { link: 'png.h' },
  'src/main.c': '#include <png.h>\n#include <libpng/png.h>\nint main(void) { return png_ok() * PNG_CONF; }\n',
  'src/include': { link: '../include' },
  'src/sub/up': { link: '../../include/libpng16' },
};

const HEADER_LINKS = [
  'include/libpng -> libpng16',
  'include/png-chain -> png.h',
  'include/png-latest.h -> png-chain',
  'include/png.h -> libpng/png.h',
  'include/pngconf.h -> libpng16/pngconf.h',
  'src/include -> ../include',
  'src/sub/up -> ../../include/libpng16',
];

function world(tree: Tree): { base: string; repo: string; store: SnapshotStore } {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  write(repo, tree);
  return { base, repo, store: SnapshotStore.openSync(join(base, 'store'), { ephemeral: true }) };
}

const linksOf = (snap: Snapshot): string[] => snap.entries.filter((e) => e.kind === 'symlink').map((e) => `${e.path} -> ${e.link_target}`);

describe("links: 'contained' keeps the links that resolve to what the snapshot captures", () => {
  it('keeps links to siblings, to a directory, through a directory link, a chain, and into another copy root', () => {
    const { repo, store } = world(HEADERS);
    const snap = store.captureSync({ source: repo, copy: ['include', 'src'], links: 'contained' });
    expect(linksOf(snap)).toEqual(HEADER_LINKS);
    const png = snap.entries.find((e) => e.path === 'include/png.h')!;
    expect(png).toEqual({ kind: 'symlink', path: 'include/png.h', size: 12, sha256: sha256Hex(Buffer.from('libpng/png.h')), mode: 0, link_target: 'libpng/png.h' });
    // The stored snapshot holds the links themselves.
    expect(lstatSync(join(snap.root, 'copy/include/libpng')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(snap.root, 'copy/src/sub/up'))).toBe('../../include/libpng16');
    const fileBytes = snap.entries.filter((e) => e.kind === 'file').reduce((n, e) => n + e.size, 0);
    const linkBytes = HEADER_LINKS.reduce((n, l) => n + Buffer.byteLength(l.split(' -> ')[1]!), 0);
    expect(snap.totalBytes).toBe(fileBytes + linkBytes);
    // The manifest of this tree, anywhere: a golden vector for copy roots with links.
    expect(snap.manifestDigest).toBe('9834fae839fbbb7386f72c57462ff2c244175cd7df45d70b3c4cf20d7a5faea4');
    expect(storeLeftovers(store.root)).toEqual([`snapshots/${snap.digest}`]);
    store.closeSync();
  });

  it("refuses the same tree by default ('refuse'), as before, leaving nothing", () => {
    const { repo, store } = world(HEADERS);
    for (const links of [undefined, 'refuse'] as const) {
      expectError(() => store.captureSync({ source: repo, copy: ['include', 'src'], ...(links === undefined ? {} : { links }) }), {
        code: 'SEAL_SYMLINK',
        message: 'capture must not traverse a symlink: include/libpng (in copy root include: declare include as a mount (--mount include) or leave it out), and 6 more obstacles',
        path: 'include/libpng',
      });
    }
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
  });

  it('gives a tree without links the digests it always had, whichever mode (the seed golden tree)', () => {
    const { repo, store } = world({ 'assets/index': 'original' });
    const digests = (['refuse', 'contained', undefined] as const).map((links) => {
      const snap = store.captureSync({ source: repo, copy: ['assets/index'], ...(links === undefined ? {} : { links }) });
      expect(snap.manifestDigest).toBe('368e1825c77615a6893010b262debd2ea539d98d0a9f146f8ced67f1bf3c27ec');
      expect(snap.mountBinding).toEqual({
        contentDigest: '4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945',
        manifestDigest: 'd3b4762162da14671a9ab386aaf94b5ccd89eea18eb33b637134a52cdec1557b',
      });
      return snap.digest;
    });
    const expected = snapshotDigest({
      source: repo,
      revision: '',
      declarations: ['assets/index'],
      manifestDigest: '368e1825c77615a6893010b262debd2ea539d98d0a9f146f8ced67f1bf3c27ec',
      mountContentDigest: '4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945',
      mountManifestDigest: 'd3b4762162da14671a9ab386aaf94b5ccd89eea18eb33b637134a52cdec1557b',
    });
    expect(digests).toEqual([expected, expected, expected]);
    store.closeSync();
  });

  it('follows as many links as the kernel does (40), and no more', () => {
    const chain: Tree = { 'c/f': 'x', 'c/l39': { link: 'f' } };
    for (let i = 0; i < 39; i++) chain[`c/l${i}`] = { link: `l${i + 1}` };
    const { repo, store } = world(chain);
    expect(linksOf(store.captureSync({ source: repo, copy: ['c'], links: 'contained' }))).toHaveLength(40);
    symlinkSync('l0', join(repo, 'c/l40'));
    expectError(() => store.captureSync({ source: repo, copy: ['c'], links: 'contained' }), {
      code: 'SEAL_ESCAPE',
      message: 'symlink loops (more than 40 links to follow): c/l40 -> l0',
      path: 'c/l40',
    });
    store.closeSync();
  });
});

describe("links: 'contained' refuses every other link with SEAL_ESCAPE, naming the link and its target, and stores nothing", () => {
  const cases: [string, Tree, string[], string, string][] = [
    ['a dangling link', { 'include/gone.h': { link: 'libpng16/gone.h' } }, [], 'include/gone.h', 'is dangling: include/gone.h -> libpng16/gone.h'],
    ['a link that climbs out of the workspace', { 'include/esc': { link: '../../x' } }, [], 'include/esc', 'escapes the workspace: include/esc -> ../../x'],
    ['a link that climbs out and names its way back in', { 'include/back': { link: '../../repo/include/png.h' } }, [], 'include/back', 'escapes the workspace: include/back -> ../../repo/include/png.h'],
    ['an absolute link', { 'include/abs': { link: '/usr/include/png.h' } }, [], 'include/abs', 'must be a bounded relative link: include/abs -> /usr/include/png.h'],
    ['a loop', { 'include/p': { link: 'q' }, 'include/q': { link: 'p' } }, [], 'include/p', 'loops (more than 40 links to follow): include/p -> q, and 1 more obstacle'],
    ['a link to itself below', { 'include/self': { link: 'self/x' } }, [], 'include/self', 'loops (more than 40 links to follow): include/self -> self/x'],
    ['a link to a path the capture does not take', { 'extra/f.h': 'f', 'include/ext.h': { link: '../extra/f.h' } }, [], 'include/ext.h', 'points at something the snapshot does not capture: include/ext.h -> ../extra/f.h'],
    ['a link to the workspace itself', { 'include/root': { link: '..' } }, [], 'include/root', 'points at something the snapshot does not capture: include/root -> ..'],
    ['a link to the directory above a copy root', { 'vendor/inc/a.h': 'a', 'vendor/inc/up': { link: '..' } }, ['vendor/inc'], 'vendor/inc/up', 'points at something the snapshot does not capture: vendor/inc/up -> ..'],
    ['a link into a sibling of a copy root that is not captured', { 'vendor/inc/a.h': 'a', 'vendor/lib/b.h': 'b', 'vendor/inc/b.h': { link: '../lib/b.h' } }, ['vendor/inc'], 'vendor/inc/b.h', 'points at something the snapshot does not capture: vendor/inc/b.h -> ../lib/b.h'],
    ['a link through a file', { 'include/t': { link: 'png.h/x' } }, [], 'include/t', 'goes through a file: include/t -> png.h/x'],
    ['a link to a file with a trailing slash', { 'include/ts': { link: 'libpng16/png.h/' } }, [], 'include/ts', 'goes through a file: include/ts -> libpng16/png.h/'],
  ];
  it.each(cases)('%s', (_name, extra, moreRoots, path, why) => {
    const { repo, store } = world({ ...HEADERS, ...extra });
    const options: CaptureCallOptions = { source: repo, copy: ['include', 'src', ...moreRoots], links: 'contained', parallelism: 0 };
    expectError(() => store.captureSync(options), { code: 'SEAL_ESCAPE', message: `symlink ${why}`, path });
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
  });

  it('refuses the same way on the worker thread (async), leaving nothing', async () => {
    const { repo, store } = world({ ...HEADERS, 'include/esc': { link: '../../x' } });
    await expectError(async () => store.capture({ source: repo, copy: ['include', 'src'], links: 'contained' }), {
      code: 'SEAL_ESCAPE',
      message: 'symlink escapes the workspace: include/esc -> ../../x',
      path: 'include/esc',
    });
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});

describe('copy-root links into a mount payload, resolved where the sandbox mounts it', () => {
  const TREE: Tree = {
    'node_modules/.pnpm/pkg@1/node_modules/pkg/index.js': 'module.exports = 1;\n',
    'node_modules/pkg': { link: '.pnpm/pkg@1/node_modules/pkg' },
    'node_modules/.bin/pkg': { link: '../pkg/index.js' },
    'src/entry.js': { link: '../node_modules/pkg/index.js' },
    'tools/run': { link: '../node_modules/.bin/pkg' },
  };

  it("keeps links to the payload's entries, through the payload's own links", () => {
    const { repo, store } = world(TREE);
    const snap = store.captureSync({ source: repo, copy: ['src', 'tools'], mounts: [{ source: 'node_modules', target: 'node_modules' }], links: 'contained' });
    expect(linksOf(snap)).toEqual(['src/entry.js -> ../node_modules/pkg/index.js', 'tools/run -> ../node_modules/.bin/pkg']);
    store.closeSync();
  });

  it('refuses one that dangles in the payload, and one into a mount that is not declared', () => {
    const { repo, store } = world({ ...TREE, 'src/nope.js': { link: '../node_modules/nope.js' } });
    const mounts = [{ source: 'node_modules', target: 'node_modules' }];
    expectError(() => store.captureSync({ source: repo, copy: ['src', 'tools'], mounts, links: 'contained' }), {
      code: 'SEAL_ESCAPE',
      message: 'symlink is dangling: src/nope.js -> ../node_modules/nope.js',
    });
    unlinkSync(join(repo, 'src/nope.js'));
    expectError(() => store.captureSync({ source: repo, copy: ['src', 'tools'], links: 'contained' }), {
      code: 'SEAL_ESCAPE',
      message: 'symlink points at something the snapshot does not capture: src/entry.js -> ../node_modules/pkg/index.js, and 1 more obstacle',
    });
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
  });

  it('passes through the directories above a mount target, but never ends on one', () => {
    const { repo, store } = world({ 'deps/pkg/index.js': 'x', 'src/pkg': { link: '../web/node_modules/pkg' } });
    const mounts = [{ source: 'deps', target: 'web/node_modules' }];
    expect(linksOf(store.captureSync({ source: repo, copy: ['src'], mounts, links: 'contained' }))).toEqual(['src/pkg -> ../web/node_modules/pkg']);
    symlinkSync('../web', join(repo, 'src/web'));
    expectError(() => store.captureSync({ source: repo, copy: ['src'], mounts, links: 'contained' }), {
      code: 'SEAL_ESCAPE',
      message: 'symlink points at something the snapshot does not capture: src/web -> ../web',
    });
    store.closeSync();
  });
});

describe('a copy-root link changed by a racing writer mid-capture', () => {
  for (const when of ['first', 'second'] as const) {
    it(`is SEAL_CHANGED when its target is swapped at the ${when} readlinkat (never kept), with nothing left behind`, () => {
      const { repo, base } = world(HEADERS);
      const path = join(repo, 'include/png.h');
      let calls = 0;
      const sys = wrapSys({
        readlinkat: (orig) => (dirfd, name) => {
          if (String(name) === 'png.h' && ++calls === (when === 'first' ? 1 : 2)) {
            unlinkSync(path);
            // An escaping target: it must not slip in between the two reads.
            symlinkSync('../../../../etc/passwd', path);
          }
          return orig(dirfd, name);
        },
      });
      const store = SnapshotStore.openSync(join(base, 'racing'), { sys, ephemeral: true });
      const options: CaptureCallOptions = { source: repo, copy: ['include', 'src'], links: 'contained', parallelism: 0 };
      // Either way the inode differs from the one fstatat saw, or the second read from the first: the new target is never kept.
      expectError(() => store.captureSync(options), { code: 'SEAL_CHANGED', message: 'symlink changed while snapshotting: include/png.h', path: 'include/png.h' });
      expect(storeLeftovers(store.root)).toEqual([]);
      store.closeSync();
    });
  }
});

describe('a snapshot with copy-root links in a clone', () => {
  function captured(): { base: string; store: SnapshotStore; snap: Snapshot; arm: string } {
    const { base, repo, store } = world(HEADERS);
    const snap = store.captureSync({ source: repo, copy: ['include', 'src'], links: 'contained' });
    return { base, store, snap, arm: join(base, 'arm') };
  }

  it('materializes the links as links (never followed), verifies, and checkClone finds them exact', async () => {
    const { store, snap, arm } = captured();
    const report = await snap.materialize(arm, { createClone: true });
    expect(report).toMatchObject({ files: 3, directories: 4, symlinks: 7 });
    for (const link of HEADER_LINKS) {
      const [path, target] = link.split(' -> ') as [string, string];
      expect(lstatSync(join(arm, path)).isSymbolicLink()).toBe(true);
      expect(readlinkSync(join(arm, path))).toBe(target);
    }
    expect(readFileSync(join(arm, 'include/png-latest.h'), 'utf8')).toBe(HEADERS['include/libpng16/png.h']);
    expect(readdirSync(join(arm, 'src/include/libpng')).sort()).toEqual(['png.h', 'pngconf.h']);
    expect(await snap.verify()).toEqual({ entries: 14, bytes: 146 });
    expect(await snap.checkClone(arm)).toMatchObject({ ok: true, added: [], removed: [], changed: [] });
    await store.close();
  });

  it.skipIf(spawnSync('cc', ['--version']).status !== 0)('resolves #include <png.h> through the links in the arm (cc -fsyntax-only)', () => {
    const { store, snap, arm } = captured();
    snap.materializeSync(arm, { createClone: true });
    const r = spawnSync('cc', ['-fsyntax-only', '-I', join(arm, 'include'), join(arm, 'src/main.c')], { encoding: 'utf8' });
    expect([r.status, r.stderr]).toEqual([0, '']);
    store.closeSync();
  });

  it('checkClone reports a link changed, retargeted outside, replaced by a file or removed in an arm; materialize repairs it', () => {
    const { store, snap, arm } = captured();
    snap.materializeSync(arm, { createClone: true });
    unlinkSync(join(arm, 'include/png.h'));
    symlinkSync('libpng16/pngconf.h', join(arm, 'include/png.h'));
    unlinkSync(join(arm, 'include/pngconf.h'));
    symlinkSync('/etc/passwd', join(arm, 'include/pngconf.h'));
    unlinkSync(join(arm, 'src/include'));
    writeFileSync(join(arm, 'src/include'), '../include');
    unlinkSync(join(arm, 'include/png-chain'));
    symlinkSync('png.h', join(arm, 'include/png-chain2'));
    const report = snap.checkCloneSync(arm);
    expect(report).toMatchObject({
      ok: false,
      added: ['include/png-chain2'],
      removed: ['include/png-chain'],
      changed: ['include/png.h', 'include/pngconf.h', 'src/include'],
    });
    // Only the two real files were hashed: no link was followed.
    expect(report.files).toBe(3);
    snap.materializeSync(arm);
    expect(snap.checkCloneSync(arm)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('never follows a link in the tree a root replaces', () => {
    const { base, store, snap, arm } = captured();
    const outside = join(base, 'outside');
    write(outside, { 'keep.txt': 'keep', 'dir/also.txt': 'also' });
    write(arm, { 'include/old.h': 'old', 'include/out': { link: outside }, 'include/outdir': { link: '../../outside/dir' } });
    snap.materializeSync(arm);
    expect(listTree(outside)).toEqual(['dir/', 'dir/also.txt', 'keep.txt']);
    expect(snap.checkCloneSync(arm)).toMatchObject({ ok: true });
    store.closeSync();
  });

  it('verify reports a stored link whose target was changed', () => {
    const { store, snap } = captured();
    const dir = join(snap.root, 'copy/include');
    chmodSync(dir, 0o700);
    unlinkSync(join(dir, 'png.h'));
    symlinkSync('libpng16/pngconf.h', join(dir, 'png.h'));
    chmodSync(dir, 0o500);
    expectError(() => snap.verifySync(), {
      code: 'SEAL_CORRUPT',
      message: `snapshot ${snap.digest} is corrupt: 1 entry differs from its manifest, first: copy/include/png.h`,
    });
    store.closeSync();
  });

  it('materialize never makes a link a crafted document says escapes, even past the load check (SEAL_CORRUPT, clone unchanged)', () => {
    const { base, store, snap, arm } = captured();
    mkdirSync(arm);
    write(arm, { 'include/old.h': 'old' });
    for (const [target, why] of [
      ['../../../etc/passwd', 'escapes the workspace'],
      ['/etc/passwd', 'must be a bounded relative link'],
      ['../../outside', 'points at something the snapshot does not capture'],
      ['../missing', 'is dangling'],
      ['up/up', 'loops (more than 40 links to follow)'],
    ] as const) {
      const crafted = snap.toJSON();
      crafted.entries = crafted.entries.map((e) => (e.path === 'src/sub/up' ? { ...e, link_target: target } : e));
      expectError(() => materializeSnapshot(nativeSys, snap.root, crafted as never, arm), {
        code: 'SEAL_CORRUPT',
        message: `snapshot manifest is corrupt: copy root symlink: symlink ${why}: src/sub/up -> ${target}`,
        path: 'src/sub/up',
        unchanged: base,
      });
    }
    expect(readdirSync(arm)).toEqual(['include']);
    store.closeSync();
  });
});

describe('recapture with the stat cache', () => {
  it('keeps the links when the tree is assembled after a deferred walk (a stat cache is there)', () => {
    const { repo, store } = world(HEADERS);
    const options: CaptureCallOptions = { source: repo, copy: ['include', 'src'], links: 'contained' };
    const first = store.captureSync(options);
    expect(store.captureSync(options)).toMatchObject({ digest: first.digest, captureReport: { built: false, reused: true } });
    writeFileSync(join(repo, 'src/main.c'), 'int main(void) { return 0; }\n');
    const changed = store.captureSync(options);
    expect(changed.digest).not.toBe(first.digest);
    expect(changed.captureReport).toMatchObject({ built: true, reused: false });
    expect(linksOf(changed)).toEqual(HEADER_LINKS);
    expect(readlinkSync(join(changed.root, 'copy/include/png.h'))).toBe('libpng/png.h');
    expect(changed.verifySync().entries).toBe(14);
    store.closeSync();
  });
});

describe('kept links with keepTimes', () => {
  it('record their own mtime, get it back in the clone (set on the link, not its target), and checkClone sees it moved', () => {
    const { base, repo, store } = world(HEADERS);
    const when = (n: number): Date => new Date(1_600_000_000_000 + n * 1000);
    lutimesSync(join(repo, 'include/png.h'), when(1), when(1));
    lutimesSync(join(repo, 'include/libpng'), when(2), when(2));
    const snap = store.captureSync({ source: repo, copy: ['include', 'src'], links: 'contained', keepTimes: true });
    const mtimeOf = (path: string): string | undefined => snap.entries.find((e) => e.path === path)!.mtime_ns;
    expect([mtimeOf('include/png.h'), mtimeOf('include/libpng')]).toEqual(['1600000001000000000', '1600000002000000000']);
    const arm = join(base, 'arm');
    snap.materializeSync(arm, { createClone: true });
    expect(lstatSync(join(arm, 'include/png.h'), { bigint: true }).mtimeNs).toBe(1_600_000_001_000_000_000n);
    expect(lstatSync(join(arm, 'include/libpng'), { bigint: true }).mtimeNs).toBe(1_600_000_002_000_000_000n);
    // The directory the link names keeps its own recorded time.
    expect(lstatSync(join(arm, 'include/libpng16'), { bigint: true }).mtimeNs).toBe(BigInt(mtimeOf('include/libpng16')!));
    expect(snap.checkCloneSync(arm)).toMatchObject({ ok: true });
    lutimesSync(join(arm, 'include/png.h'), when(3), when(3));
    expect(snap.checkCloneSync(arm)).toMatchObject({ ok: false, changed: ['include/png.h'] });
    store.closeSync();
  });
});

describe('the links option', () => {
  it.each([['yes'], [true], ['REFUSE'], [null], [1]])('%j is ERR_INVALID_ARG_VALUE before anything is opened (sync and async)', async (links) => {
    const base = tempDir();
    const store = await SnapshotStore.open(join(base, 'store'), { ephemeral: true });
    // The source does not exist: the option is refused before it would be opened.
    const options = { source: join(base, 'missing'), copy: ['x'], links } as unknown as CaptureCallOptions;
    const message = `The property 'options.links' must be one of: 'refuse', 'contained'. Received ${typeof links === 'string' ? `'${links}'` : String(links)}`;
    expectError(() => store.captureSync(options), { code: 'ERR_INVALID_ARG_VALUE', message });
    await expectError(async () => store.capture(options), { code: 'ERR_INVALID_ARG_VALUE', message });
    expect(storeLeftovers(store.root)).toEqual([]);
    await store.close();
  });
});

describe("a copy root that is itself a link (links: 'contained')", () => {
  const TOP: Tree = { 'AGENTS.md': 'agents', 'docs/README.md': 'readme', 'CLAUDE.md': { link: 'AGENTS.md' }, 'README.md': { link: 'docs/README.md' } };

  it('is kept as a link where links are kept (top-level links of a repo, the default roots or named), refused by default, and held to the containment rule', () => {
    const { repo, store } = world(TOP);
    // With links kept, the default roots take the top-level links as the links they are.
    const snap = store.captureSync({ source: repo, links: 'contained' });
    expect(snap.declarations).toEqual(['AGENTS.md', 'CLAUDE.md', 'README.md', 'docs']);
    expect(linksOf(snap)).toEqual(['CLAUDE.md -> AGENTS.md', 'README.md -> docs/README.md']);
    expect(readlinkSync(join(snap.root, 'copy/CLAUDE.md'))).toBe('AGENTS.md');
    expect(store.captureSync({ source: repo, copy: ['AGENTS.md', 'CLAUDE.md'], links: 'contained' }).entries.map((e) => `${e.kind} ${e.path}`)).toEqual(['file AGENTS.md', 'symlink CLAUDE.md']);
    // By default a root is never a link, and the hint says how to keep it.
    const refused = expectError(() => store.captureSync({ source: repo }), { code: 'SEAL_SYMLINK', message: 'capture must not traverse a symlink: CLAUDE.md, and 1 more obstacle' }) as SealError;
    expect(refused.details![0]!.hint).toBe('a top-level symlink (with no --copy every top-level entry is a copy root): --links contained keeps it, --exclude /CLAUDE.md leaves it out, or name the copy roots with --copy');
    // A root link to what the snapshot does not capture (its target left out of the roots, or outside the source) is SEAL_ESCAPE.
    expectError(() => store.captureSync({ source: repo, copy: ['CLAUDE.md'], links: 'contained' }), { code: 'SEAL_ESCAPE', message: 'symlink points at something the snapshot does not capture: CLAUDE.md -> AGENTS.md' });
    symlinkSync('../outside', join(repo, 'up'));
    expectError(() => store.captureSync({ source: repo, links: 'contained' }), { code: 'SEAL_ESCAPE', path: 'up' });
    // A mount source is never a link.
    expectError(() => store.captureSync({ source: repo, copy: ['docs'], mounts: [{ source: 'CLAUDE.md', target: 'c' }], links: 'contained' }), { code: 'SEAL_SYMLINK', path: 'CLAUDE.md' });
    store.closeSync();
  });

  it('materializes as the link itself, verifies, is materialized again over the link it made, and diff and reset repair it unfollowed whatever the agent put there', async () => {
    const { base, repo, store } = world(TOP);
    const snap = await store.capture({ source: repo, links: 'contained' });
    const arm = join(base, 'arm');
    expect(await snap.materialize(arm, { createClone: true })).toMatchObject({ files: 2, directories: 1, symlinks: 2 });
    expect([readlinkSync(join(arm, 'CLAUDE.md')), readFileSync(join(arm, 'CLAUDE.md'), 'utf8')]).toEqual(['AGENTS.md', 'agents']);
    expect(await snap.verify()).toMatchObject({ entries: 5 });
    expect(await snap.checkClone(arm)).toMatchObject({ ok: true });
    // Again over the links it made (a reset, by its ledger).
    expect(snap.materializeSync(arm)).toMatchObject({ reset: true });
    expect(snap.diffSync(arm)).toMatchObject({ ok: true, method: 'ledger' });
    // The agent: a file in place of one link, the other retargeted at a file of the caller's.
    const secret = join(base, 'secret');
    writeFileSync(secret, 'the caller\'s');
    unlinkSync(join(arm, 'CLAUDE.md'));
    writeFileSync(join(arm, 'CLAUDE.md'), 'replaced');
    unlinkSync(join(arm, 'README.md'));
    symlinkSync(secret, join(arm, 'README.md'));
    expect(snap.diffSync(arm)).toMatchObject({ ok: false, changed: ['CLAUDE.md', 'README.md'] });
    expect(snap.resetSync(arm)).toMatchObject({ method: 'reset', changed: ['CLAUDE.md', 'README.md'] });
    expect([readlinkSync(join(arm, 'CLAUDE.md')), readlinkSync(join(arm, 'README.md'))]).toEqual(['AGENTS.md', 'docs/README.md']);
    expect(readFileSync(secret, 'utf8')).toBe('the caller\'s');
    expect(snap.diffSync(arm)).toMatchObject({ ok: true });
    // A directory the agent made at a link root's place goes whole with a whole materialize.
    unlinkSync(join(arm, 'CLAUDE.md'));
    write(arm, { 'CLAUDE.md/x': 'dir' });
    snap.materializeSync(join(base, 'fresh'), { createClone: true });
    await store.close();
    const again = SnapshotStore.openSync(join(base, 'store2'), { ephemeral: true });
    const other = again.captureSync({ source: repo, links: 'contained', revision: 'r2' });
    expect(other.materializeSync(arm)).toMatchObject({ reset: false, symlinks: 2 });
    expect(listTree(arm)).toEqual(['AGENTS.md', 'CLAUDE.md@', 'README.md@', 'docs/', 'docs/README.md']);
    // The repository turns the link into a file: the next snapshot's file root replaces the link the last one left.
    unlinkSync(join(repo, 'CLAUDE.md'));
    writeFileSync(join(repo, 'CLAUDE.md'), 'a file now');
    const third = again.captureSync({ source: repo, links: 'contained', revision: 'r3' });
    expect(third.materializeSync(arm)).toMatchObject({ reset: false, symlinks: 1 });
    expect([lstatSync(join(arm, 'CLAUDE.md')).isFile(), readFileSync(join(arm, 'CLAUDE.md'), 'utf8'), readFileSync(join(repo, 'AGENTS.md'), 'utf8')]).toEqual([true, 'a file now', 'agents']);
    again.closeSync();
  });
});
