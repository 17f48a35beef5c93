// hints.test.ts: refusals that say the way out: the directory holding a refused link, the copy root to mount instead, where a mount's link points.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, type CaptureCallOptions } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

/** A repository with these files and links, and an ephemeral store beside it. */
function setup(tree: Record<string, string | null>, links: Record<string, string>): { repo: string; store: SnapshotStore } {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  for (const [path, target] of Object.entries(links)) symlinkSync(target, join(repo, path));
  return { repo, store: SnapshotStore.openSync(join(base, 'store'), { ephemeral: true }) };
}

function refused(tree: Record<string, string | null>, links: Record<string, string>, options: Omit<CaptureCallOptions, 'source'>, code: string, message: string, path: string): void {
  const { repo, store } = setup(tree, links);
  expectError(() => store.captureSync({ source: repo, ...options }), { code, message, path, unchanged: store.root });
  store.closeSync();
}

describe('refusals that say the way out', () => {
  it('a link deep in a copy root names its directory and suggests the copy root as a mount', () => {
    refused(
      { 'node_modules/glob/bin.js': 'x', 'node_modules/.bin': null },
      { 'node_modules/.bin/glob': '../glob/bin.js' },
      { copy: ['node_modules'] },
      'SEAL_SYMLINK',
      'capture must not traverse a symlink: node_modules/.bin/glob (in node_modules/.bin, inside copy root node_modules: declare node_modules as a mount (--mount node_modules) or leave it out)',
      'node_modules/.bin/glob',
    );
  });

  it("a workspace package's link (packages/a/node_modules/b -> ../../b) suggests keeping the links with --keep-exec, not mounting the whole source read-only; kept so, the clone runs the tool it leads to", () => {
    const tree = { 'packages/b/index.js': 'b', 'packages/b/bin.sh': '#!/bin/sh\necho b\n', 'packages/a/node_modules/.bin': null };
    const links = { 'packages/a/node_modules/b': '../../b', 'packages/a/node_modules/.bin/b': '../b/bin.sh' };
    const { repo, store } = setup(tree, links);
    const err = expectError(() => store.captureSync({ source: repo, copy: ['packages'] }), {
      code: 'SEAL_SYMLINK',
      message: /^capture must not traverse a symlink: packages\/a\/node_modules\/(\.bin\/)?b \(in packages\/a\/node_modules(\/\.bin)?, inside copy root packages: keep the links with --links contained, and --keep-exec for the tools they lead to, or leave it out\), and 1 more obstacle$/,
    });
    const details = (err as Error & { details: { path: string; hint: string }[] }).details;
    expect(details.map((d) => d.hint).sort()).toEqual([
      'a symlink in a node_modules inside copy root packages: --links contained keeps it (with --keep-exec, so the tools it leads to stay executable), --exclude /packages/a/node_modules/.bin/b leaves it out',
      'a symlink in a node_modules inside copy root packages: --links contained keeps it (with --keep-exec, so the tools it leads to stay executable), --exclude /packages/a/node_modules/b leaves it out',
    ]);
    chmodSync(join(repo, 'packages/b/bin.sh'), 0o755);
    const snap = store.captureSync({ source: repo, copy: ['packages'], links: 'contained', keepExecutable: true });
    const clone = join(repo, '..', 'clone');
    snap.materializeSync(clone, { createClone: true });
    expect(execFileSync(join(clone, 'packages/a/node_modules/.bin/b'), { encoding: 'utf8' })).toBe('b\n');
    store.closeSync();
  });

  it('names a multi-component copy root, and mounting it instead works', () => {
    const tree = { 'web/deps/lib/a.js': 'a' };
    const links = { 'web/deps/lib/alias.js': 'a.js' };
    refused(
      tree,
      links,
      { copy: ['web/deps'] },
      'SEAL_SYMLINK',
      'capture must not traverse a symlink: web/deps/lib/alias.js (in web/deps/lib, inside copy root web/deps: declare web/deps as a mount (--mount web/deps) or leave it out)',
      'web/deps/lib/alias.js',
    );
    const { repo, store } = setup(tree, links);
    const snap = store.captureSync({ source: repo, mounts: [{ source: 'web/deps', target: 'web/deps' }] });
    expect(snap.mounts[0]!.entries.find((e) => e.kind === 'symlink')).toMatchObject({ path: 'payload/lib/alias.js', link_target: 'a.js' });
    store.closeSync();
  });

  it('a mount link says which link and where it points', () => {
    const mounts = [{ source: 'deps', target: 'deps' }];
    refused({ 'deps/f': 'x' }, { 'deps/abs': '/usr/lib/x' }, { mounts }, 'SEAL_ESCAPE', 'symlink must be a bounded relative link: deps/abs -> /usr/lib/x', 'deps/abs');
    refused({ 'deps/f': 'x' }, { 'deps/up': '../../../x' }, { mounts }, 'SEAL_ESCAPE', 'symlink escapes the sandbox workspace: deps/up -> ../../../x', 'deps/up');
  });
});
