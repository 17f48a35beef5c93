// default-copy.test.ts: a capture that names no copy roots takes every top-level entry of the source that holds no mount source, as the command always did.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, mkfifo, storeLeftovers, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

function setup(tree: Record<string, string | null>): { base: string; repo: string; store: SnapshotStore } {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  return { base, repo, store: SnapshotStore.openSync(join(base, 'store'), { ephemeral: true }) };
}

describe('copy omitted', () => {
  it('copies every top-level entry but those holding a mount source, in the order the command gave them', async () => {
    const { repo, store } = setup({ 'src/a': 'a', 'Makefile': 'm', '.git/HEAD': 'h', 'b.txt': 'b', 'web/deps/i.js': 'i', 'web/x': 'x', 'node_modules/p/i.js': 'p', '\u00e9': 'e', '\uff5e': 'fullwidth tilde', '\u{1f600}': 'astral' });
    const mounts = [{ source: './node_modules', target: 'node_modules' }, { source: 'web/deps', target: 'deps' }];
    const snap = store.captureSync({ source: repo, mounts });
    // JavaScript's string order (UTF-16 code units), which the command used: uppercase first.
    // An astral name sorts before U+FF5E by its UTF-16 surrogates (by its UTF-8 bytes it would not).
    const order = ['.git', 'Makefile', 'b.txt', 'src', '\u00e9', '\u{1f600}', '\uff5e'];
    expect(snap.declarations).toEqual(order);
    const explicit = store.captureSync({ source: repo, copy: order, mounts });
    expect(explicit.digest).toBe(snap.digest);
    expect(explicit.captureReport!.reused).toBe(true);
    expect((await store.capture({ source: repo, mounts })).digest).toBe(snap.digest);
    // [] is no copy roots at all: only the mounts.
    const none = store.captureSync({ source: repo, copy: [], mounts });
    expect([none.declarations, none.entries]).toEqual([[], []]);
    store.closeSync();
  });

  it('takes a name of spaces as any other (the Python cache does): a top-level " " and a copy root or mount target " "', () => {
    const { repo, store } = setup({ ' /f': 'space', 'src/a': 'a', 'deps/i.js': 'i' });
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'deps', target: '  ' }] });
    expect(snap.declarations).toEqual([' ', 'src']);
    expect(snap.entries.map((e) => e.path)).toEqual([' ', ' /f', 'src', 'src/a']);
    expect(snap.mounts[0]!.target).toBe('  ');
    expect(store.captureSync({ source: repo, copy: [' ', 'src'], mounts: [{ source: 'deps', target: '  ' }] }).digest).toBe(snap.digest);
    store.closeSync();
  });

  it('refuses a source that is the store or lies inside it (it walked into its own build: SEAL_CHANGED, retried for nothing)', async () => {
    const { base, repo, store } = setup({ 'src/a': 'a' });
    const own = SnapshotStore.openSync(join(base, 'own'));
    own.captureSync({ source: repo });
    const before = storeLeftovers(own.root);
    for (const [source, message] of [
      [own.root, `the source is the store: ${own.root}`],
      [join(own.root, 'snapshots'), `the source lies inside the store: ${join(own.root, 'snapshots')}`],
      [join(own.root, 'tmp'), `the source lies inside the store: ${join(own.root, 'tmp')}`],
    ]) {
      expectError(() => own.captureSync({ source }), { code: 'SEAL_OVERLAP', message });
      await expectError(async () => own.capture({ source, copy: [] }), { code: 'SEAL_OVERLAP', message });
    }
    expect(storeLeftovers(own.root)).toEqual(before);
    own.closeSync();
    store.closeSync();
  });

  it.runIf(process.geteuid!() === 0)('refuses the store or its build met inside the source by identity (a bind mount of the store)', async () => {
    const { base, repo, store } = setup({ 'src/a': 'a', 'b/.keep': '' });
    const own = SnapshotStore.openSync(join(base, 'own'));
    execFileSync('mount', ['--bind', own.root, join(repo, 'b')]);
    try {
      expectError(() => own.captureSync({ source: repo }), { code: 'SEAL_OVERLAP', message: 'the store lies inside what is being captured: b', path: 'b' });
      const err = await own.capture({ source: repo, copy: ['b/tmp'] }).then(() => undefined, (e: unknown) => e as SealError);
      expect([err?.code, err?.retryable, err?.message.replace(/build-[0-9a-f]+/, 'build-X')]).toEqual(['SEAL_OVERLAP', false, 'the store lies inside what is being captured: b/tmp/build-X']);
    } finally {
      execFileSync('umount', [join(repo, 'b')]);
    }
    expect(storeLeftovers(own.root)).toEqual([]);
    own.closeSync();
    store.closeSync();
  });

  it('refuses what a declared root would be refused for, with nothing stored', async () => {
    const { repo, store } = setup({ 'src/a': 'a', '.cache/x': 'x' });
    // The store inside a top-level entry: it would copy itself.
    const inside = SnapshotStore.openSync(join(repo, '.cache', 'store'), { ephemeral: true });
    expectError(() => inside.captureSync({ source: repo }), { code: 'SEAL_OVERLAP', message: 'the store lies inside what is being captured: .cache', unchanged: inside.root });
    await expectError(async () => inside.capture({ source: repo }), { code: 'SEAL_OVERLAP', message: 'the store lies inside what is being captured: .cache', unchanged: inside.root });
    // Left out, it is no copy root, and the store may stay there.
    expect(inside.captureSync({ source: repo, exclude: ['/.cache/'] }).declarations).toEqual(['src']);
    inside.closeSync();
    // One of materialize's own names in the clone.
    writeFileSync(join(repo, '.treeseal-materializing'), '');
    expectError(() => store.captureSync({ source: repo }), { code: 'SEAL_COLLISION', message: "copy root collides with materialize's own names in the clone: .treeseal-materializing", unchanged: store.root });
    // A name that is not UTF-8.
    writeFileSync(Buffer.from(`${repo}/f\xffo`, 'latin1'), '');
    // Refused with the walk's other obstacles (a FIFO inside a root), each with its way out; a sibling its pattern would match too gets none.
    mkfifo(join(repo, 'src/pipe'));
    const err = expectError(() => store.captureSync({ source: repo, exclude: ['/.treeseal-materializing'] }), {
      code: 'SEAL_BAD_PATH',
      message: 'path is not valid UTF-8: f\\xffo, and 1 more obstacle',
      path: 'f\udcffo',
      unchanged: store.root,
    }) as SealError;
    expect(err.details).toEqual([
      { path: 'f\udcffo', code: 'SEAL_BAD_PATH', hint: 'a name that is not valid UTF-8 (a manifest holds UTF-8 paths): rename it, or --exclude \'/f?o\' leaves it out' },
      { path: 'src/pipe', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: --exclude /src/pipe leaves it out' },
    ]);
    writeFileSync(join(repo, 'fzo'), '');
    const shadowed = expectError(() => store.captureSync({ source: repo, exclude: ['/.treeseal-materializing', '/src/pipe'] }), { code: 'SEAL_BAD_PATH', unchanged: store.root }) as SealError;
    expect(shadowed.details![0]!.hint).toBe('a name that is not valid UTF-8 (a manifest holds UTF-8 paths): rename it, or --exclude with a pattern for it leaves it out (? matches each sequence that is not UTF-8)');
    expect(storeLeftovers(store.root)).toEqual([]);
    expect(store.captureSync({ source: repo, exclude: ['/.treeseal-materializing', '/src/pipe', '/f?o', '!/fzo'] }).declarations).toEqual(['.cache', 'fzo', 'src']);
    store.closeSync();
  });
});
