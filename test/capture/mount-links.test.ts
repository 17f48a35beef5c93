// mount-links.test.ts: links kept in a mount payload are resolved as the kernel will, through the payload's own links.
import { mkdirSync, symlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type MountDeclaration } from '../../dist/index.js';
import { checkNoFdLeaks, storeLeftovers, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

type Tree = Record<string, string | null | { link: string }>;

/** Captures `m` as a mount at `target`; links are `{ link }` values. Returns the snapshot's symlink paths, or the SealError. */
function captureMount(tree: Tree, target: string, workspace?: string): string[] | SealError {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(join(repo, 'm'), { recursive: true });
  for (const [rel, value] of Object.entries(tree)) {
    const path = join(repo, 'm', rel);
    if (value !== null && typeof value === 'object') {
      mkdirSync(dirname(path), { recursive: true });
      symlinkSync(value.link, path);
    } else writeTree(join(repo, 'm'), { [rel]: value });
  }
  const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
  const mount: MountDeclaration = { source: 'm', target, ensureDirs: [] };
  try {
    const snap = store.captureSync({ source: repo, mounts: [mount], ...(workspace === undefined ? {} : { workspace }) });
    return snap.mounts[0]!.entries.filter((e) => e.kind === 'symlink').map((e) => e.path);
  } catch (err) {
    expect(err).toBeInstanceOf(SealError);
    expect(storeLeftovers(store.root)).toEqual([]);
    return err as SealError;
  } finally {
    store.closeSync();
  }
}

function refused(result: string[] | SealError): [string, string] {
  if (!(result instanceof SealError)) throw new Error(`capture unexpectedly succeeded: ${result.join(', ')}`);
  return [result.code, result.message];
}

const ESCAPES = 'SEAL_ESCAPE';

describe('mount payload links resolved as the kernel resolves them', () => {
  it("refuses the issue's chain: e1 goes through l2 (-> ../..) and climbs above the workspace", () => {
    const result = captureMount({ 'sub/l2': { link: '../..' }, e1: { link: 'sub/l2/../../../..' } }, 'a/b/node_modules');
    expect(refused(result)).toEqual([ESCAPES, 'symlink escapes the sandbox workspace: m/e1 -> sub/l2/../../../..']);
  });

  it('keeps l2 alone: it stays inside the workspace', () => {
    expect(captureMount({ 'sub/l2': { link: '../..' }, 'sub/f': 'x' }, 'a/b/node_modules')).toEqual(['payload/sub/l2']);
  });

  it('refuses a link to a link whose own target climbs out, naming the first link', () => {
    const tree: Tree = { 'd/l': { link: '../..' }, x: { link: 'd/l/..' }, a: { link: 'x' } };
    expect(refused(captureMount(tree, 'deps'))).toEqual([ESCAPES, 'symlink escapes the sandbox workspace: m/a -> x, and 1 more obstacle']);
    expect(refused(captureMount({ 'd/l': { link: '../..' }, x: { link: 'd/l/..' } }, 'deps'))).toEqual([
      ESCAPES,
      'symlink escapes the sandbox workspace: m/x -> d/l/..',
    ]);
  });

  it('refuses a path that climbs above the workspace even when it names the workspace again', () => {
    expect(refused(captureMount({ 'f': 'x', l: { link: '../../workspace/deps/f' } }, 'deps'))).toEqual([
      ESCAPES,
      'symlink escapes the sandbox workspace: m/l -> ../../workspace/deps/f',
    ]);
  });

  it('refuses loops (as ELOOP) and chains longer than the kernel follows', () => {
    expect(refused(captureMount({ p: { link: 'q' }, q: { link: 'p' } }, 'deps'))).toEqual([ESCAPES, 'symlink is dangling or escapes its snapshot: m/p -> q, and 1 more obstacle']);
    expect(refused(captureMount({ 'd/self': { link: '../d/self/x' } }, 'deps'))).toEqual([ESCAPES, 'symlink is dangling or escapes its snapshot: m/d/self -> ../d/self/x']);
    // 40 links in a row resolve (the kernel's MAXSYMLINKS); a 41st in front of them does not.
    const chain: Tree = { l39: { link: 'f' }, f: 'x' };
    for (let i = 0; i < 39; i++) chain[`l${i}`] = { link: `l${i + 1}` };
    expect(captureMount(chain, 'deps')).toHaveLength(40);
    chain.l40 = { link: 'l0' };
    expect(refused(captureMount(chain, 'deps'))).toEqual([ESCAPES, 'symlink is dangling or escapes its snapshot: m/l40 -> l0']);
  });

  it('refuses a link through a file and a missing component inside the payload', () => {
    expect(refused(captureMount({ f: 'x', t: { link: 'f/x' } }, 'deps'))).toEqual([ESCAPES, 'symlink is dangling or escapes its snapshot: m/t -> f/x']);
    expect(refused(captureMount({ f: 'x', t: { link: 'f/' } }, 'deps'))).toEqual([ESCAPES, 'symlink is dangling or escapes its snapshot: m/t -> f/']);
    expect(refused(captureMount({ 'd/f': 'x', t: { link: 'lnk/f' }, lnk: { link: 'd/f' } }, 'deps'))).toEqual([
      ESCAPES,
      'symlink is dangling or escapes its snapshot: m/t -> lnk/f',
    ]);
    expect(refused(captureMount({ back: { link: '../deps/missing' } }, 'deps'))).toEqual([ESCAPES, 'symlink is dangling or escapes its snapshot: m/back -> ../deps/missing']);
  });

  it('refuses a link that names a place in its payload but gets there through a link of the payload that points out (as the Python cache does)', () => {
    // o alone is kept (it leaves the payload for the workspace); p reads as payload/L/o/s but resolves to src/s of the clone.
    expect(captureMount({ 'L/o': { link: '../../src' } }, 'deps')).toEqual(['payload/L/o']);
    expect(refused(captureMount({ 'L/o': { link: '../../src' }, 'L/p': { link: 'o/s' } }, 'deps'))).toEqual([
      ESCAPES,
      'symlink is dangling or escapes its snapshot: m/L/p -> o/s',
    ]);
    expect(refused(captureMount({ 'L/o': { link: '../../zzz' }, 'L/p': { link: 'o/x' } }, 'deps'))).toEqual([
      ESCAPES,
      'symlink is dangling or escapes its snapshot: m/L/p -> o/x',
    ]);
    // Through a link that climbs out and comes back in by the target's name: still a way out of the payload.
    expect(refused(captureMount({ f: 'x', 'L/o': { link: '../../deps' }, 'L/p': { link: 'o/f' } }, 'deps'))).toEqual([
      ESCAPES,
      'symlink is dangling or escapes its snapshot: m/L/p -> o/f',
    ]);
  });

  it('accepts what the kernel resolves inside: pnpm-style chains, a way back into the payload, the rest of the workspace', () => {
    const tree: Tree = {
      '.pnpm/pkg@1/node_modules/pkg/index.js': 'x',
      '.pnpm/pkg@1/node_modules/dep': { link: '../../dep@2/node_modules/dep' },
      '.pnpm/dep@2/node_modules/dep/main.js': 'y',
      pkg: { link: '.pnpm/pkg@1/node_modules/pkg' },
      via: { link: 'pkg/../dep/main.js' },
      back: { link: '../node_modules/pkg/index.js' },
      ws: { link: '../src/app' },
      up: { link: '../../app/packages/x' },
    };
    expect(captureMount(tree, 'app/node_modules')).toEqual([
      'payload/.pnpm/pkg@1/node_modules/dep',
      'payload/back',
      'payload/pkg',
      'payload/up',
      'payload/via',
      'payload/ws',
    ].sort());
  });

  it('resolves from the mount target inside a non-default workspace', () => {
    expect(captureMount({ l: { link: '../..' } }, 'deps', '/srv/ws')).toEqual(expect.objectContaining({ code: ESCAPES }));
    expect(captureMount({ l: { link: '../..' } }, 'a/deps', '/srv/ws')).toEqual(['payload/l']);
  });
});
