// hints.test.ts: refusals that say the way out: the directory holding a refused link, the copy root to mount instead, where a mount's link points.
import { mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type CaptureCallOptions } from '../../dist/index.js';
import { checkNoFdLeaks, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

function refusal(tree: Record<string, string | null>, links: Record<string, string>, options: Omit<CaptureCallOptions, 'source'>): SealError {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  for (const [path, target] of Object.entries(links)) symlinkSync(target, join(repo, path));
  const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
  try {
    store.captureSync({ source: repo, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(SealError);
    return err as SealError;
  } finally {
    store.closeSync();
  }
  throw new Error('capture unexpectedly succeeded');
}

describe('refusals that say the way out', () => {
  it('a link deep in a copy root names its directory and suggests the copy root as a mount', () => {
    const err = refusal({ 'node_modules/glob/bin.js': 'x', 'node_modules/.bin': null }, { 'node_modules/.bin/glob': '../glob/bin.js' }, { copy: ['node_modules'] });
    expect([err.code, err.path, err.message]).toEqual([
      'SEAL_SYMLINK',
      'node_modules/.bin/glob',
      'capture must not traverse a symlink: node_modules/.bin/glob (in node_modules/.bin, inside copy root node_modules: declare node_modules as a mount (--mount node_modules) or leave it out)',
    ]);
  });

  it('names a multi-component copy root, and mounting it works', () => {
    const tree = { 'web/deps/lib/a.js': 'a' };
    const links = { 'web/deps/lib/alias.js': 'a.js' };
    const err = refusal(tree, links, { copy: ['web/deps'] });
    expect(err.message).toBe('capture must not traverse a symlink: web/deps/lib/alias.js (in web/deps/lib, inside copy root web/deps: declare web/deps as a mount (--mount web/deps) or leave it out)');
    const base = tempDir();
    writeTree(join(base, 'repo'), tree);
    symlinkSync('a.js', join(base, 'repo', 'web/deps/lib/alias.js'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: join(base, 'repo'), mounts: [{ source: 'web/deps', target: 'web/deps' }] });
    expect(snap.mounts[0]!.entries.find((e) => e.kind === 'symlink')).toMatchObject({ path: 'payload/lib/alias.js', link_target: 'a.js' });
    store.closeSync();
  });

  it('a mount link says which link and where it points', () => {
    const deps = { 'deps/f': 'x' };
    expect(refusal(deps, { 'deps/abs': '/usr/lib/x' }, { mounts: [{ source: 'deps', target: 'deps' }] }).message).toBe(
      'symlink must be a bounded relative link: payload/abs -> /usr/lib/x',
    );
    expect(refusal(deps, { 'deps/up': '../../../x' }, { mounts: [{ source: 'deps', target: 'deps' }] }).message).toBe(
      'symlink escapes the sandbox workspace: payload/up -> ../../../x',
    );
  });
});
