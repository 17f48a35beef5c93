// keep-executable.test.ts: keepExecutable records executable bits in copy roots (frozen 0500, materialized 0700); off, the seed's manifest.
import { chmodSync, linkSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

function setup(): { base: string; repo: string; store: SnapshotStore } {
  const base = tempDir();
  const repo = join(base, 'repo');
  writeTree(repo, { 'bin/run.sh': '#!/bin/sh\necho hi\n', 'bin/data.txt': 'plain', 'hooks/pre-commit': '#!/bin/sh\n' });
  chmodSync(join(repo, 'bin/run.sh'), 0o755);
  chmodSync(join(repo, 'hooks/pre-commit'), 0o750);
  return { base, repo, store: SnapshotStore.openSync(join(base, 'store'), { ephemeral: true }) };
}

const perm = (path: string): number => statSync(path).mode & 0o7777;

describe('keepExecutable', () => {
  it('is off by default: copy roots record mode 0 and every clone file is 0600', async () => {
    const { base, repo, store } = setup();
    const snap = await store.capture({ source: repo, copy: ['bin', 'hooks'] });
    expect(snap.entries.map((e) => [e.path, e.mode])).toEqual([
      ['bin', 0],
      ['bin/data.txt', 0],
      ['bin/run.sh', 0],
      ['hooks', 0],
      ['hooks/pre-commit', 0],
    ]);
    expect(perm(join(snap.root, 'copy/bin/run.sh'))).toBe(0o400);
    const clone = join(base, 'clone');
    mkdirSync(clone);
    await snap.materialize(clone);
    expect([perm(join(clone, 'bin/run.sh')), perm(join(clone, 'bin/data.txt')), perm(join(clone, 'hooks/pre-commit'))]).toEqual([0o600, 0o600, 0o600]);
    await store.close();
  });

  it('records executables as mounts do, freezes them 0500 and materializes them 0700; other files stay mode 0', async () => {
    const { base, repo, store } = setup();
    const plain = await store.capture({ source: repo, copy: ['bin', 'hooks'] });
    const snap = await store.capture({ source: repo, copy: ['bin', 'hooks'], keepExecutable: true });
    expect(snap.entries.map((e) => [e.path, e.mode])).toEqual([
      ['bin', 0],
      ['bin/data.txt', 0],
      ['bin/run.sh', 0o755],
      ['hooks', 0],
      ['hooks/pre-commit', 0o750],
    ]);
    expect(snap.digest).not.toBe(plain.digest);
    expect(snap.manifestDigest).not.toBe(plain.manifestDigest);
    expect([perm(join(snap.root, 'copy/bin/run.sh')), perm(join(snap.root, 'copy/bin/data.txt'))]).toEqual([0o500, 0o400]);
    expect(await snap.verify()).toMatchObject({ entries: 5 });
    const clone = join(base, 'clone');
    mkdirSync(clone);
    await snap.materialize(clone);
    expect([perm(join(clone, 'bin/run.sh')), perm(join(clone, 'bin/data.txt')), perm(join(clone, 'hooks/pre-commit'))]).toEqual([0o700, 0o600, 0o700]);
    expect(perm(join(clone, 'bin'))).toBe(0o700);
    await store.close();
  });

  it('changes nothing for a tree without executables, and rejects a non-boolean', async () => {
    const { base, store } = setup();
    const repo = join(base, 'plain');
    writeTree(repo, { 'a/x': 'x' });
    const off = await store.capture({ source: repo, copy: ['a'] });
    const on = await store.capture({ source: repo, copy: ['a'], keepExecutable: true });
    expect(on.digest).toBe(off.digest);
    expectError(() => store.captureSync({ source: repo, copy: ['a'], keepExecutable: 'yes' as unknown as boolean }), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: /^The "options\.keepExecutable" property must be of type boolean\./,
    });
    await store.close();
  });

  it('a clone gets its own files: hardlinks in the source become separate files', async () => {
    const { base, repo, store } = setup();
    linkSync(join(repo, 'bin/data.txt'), join(repo, 'bin/same.txt'));
    const snap = await store.capture({ source: repo, copy: ['bin'] });
    const clone = join(base, 'clone');
    mkdirSync(clone);
    await snap.materialize(clone);
    const [a, b] = [statSync(join(clone, 'bin/data.txt')), statSync(join(clone, 'bin/same.txt'))];
    expect(a.ino).not.toBe(b.ino);
    expect([a.nlink, b.nlink]).toEqual([1, 1]);
    expect([a.uid, a.gid]).toEqual([process.getuid!(), process.getgid!()]);
    await store.close();
  });
});
