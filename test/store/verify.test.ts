// verify.test.ts: verify() re-hashes a snapshot and names drift as SEAL_CORRUPT.
import { chmodSync, mkdirSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, freeze, freezeSync, thaw, thawSync } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, mkfifo, tempDir, writeTree } from '../helpers.js';
import { lstatSync, readdirSync, statSync } from 'node:fs';

checkNoFdLeaks();

function fresh(): { store: SnapshotStore; snapRoot: string; snap: ReturnType<SnapshotStore['captureSync']> } {
  const work = tempDir();
  const repo = join(work, 'repo');
  writeTree(repo, { 'a/x': 'one', 'a/y': 'two', 'deps/f': 'dep' });
  symlinkSync('f', join(repo, 'deps/l'));
  const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
  const snap = store.captureSync({ source: repo, copy: ['a'], mounts: [{ source: 'deps', target: 'deps' }] });
  return { store, snapRoot: snap.root, snap };
}

describe('verify', () => {
  it('passes on an intact snapshot and reports what it checked', async () => {
    const { store, snap } = fresh();
    expect(await snap.verify()).toEqual({ entries: 6, bytes: 9 });
    expect(snap.verifySync()).toEqual({ entries: 6, bytes: 9 });
    store.closeSync();
  });

  it('finds changed bytes, modes, extra and missing entries, and counts them', async () => {
    const { store, snap, snapRoot } = fresh();
    chmodSync(join(snapRoot, 'copy/a/x'), 0o600);
    writeFileSync(join(snapRoot, 'copy/a/x'), 'ONE');
    await expectError(async () => snap.verify(), { code: 'SEAL_CORRUPT', message: `snapshot ${snap.digest} is corrupt: 1 entry differs from its manifest, first: copy/a/x`, path: 'copy/a/x' });
    chmodSync(join(snapRoot, 'copy/a'), 0o700);
    writeFileSync(join(snapRoot, 'copy/a/planted'), '');
    unlinkSync(join(snapRoot, 'copy/a/y'));
    await expectError(async () => snap.verify(), { code: 'SEAL_CORRUPT', message: `snapshot ${snap.digest} is corrupt: 4 entries differ from its manifest, first: copy/a` });
    store.closeSync();
  });

  it('hashes on helper threads (parallelism 2) with the same report and the same first drift as one thread', async () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    const files: Record<string, string> = {};
    for (let i = 0; i < 300; i++) files[`t/d${i % 7}/f${String(i).padStart(3, '0')}`] = `content ${i}`;
    writeTree(repo, files);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: repo, copy: ['t'] });
    const intact = snap.verifySync({ parallelism: 0 });
    expect(snap.verifySync({ parallelism: 2 })).toEqual(intact);
    expect(await snap.verify()).toEqual(intact);
    for (const rel of ['t/d3/f010', 't/d5/f299']) {
      chmodSync(join(snap.root, 'copy', rel), 0o600);
      writeFileSync(join(snap.root, 'copy', rel), 'CONTENT 10'.slice(0, statSync(join(snap.root, 'copy', rel)).size));
      chmodSync(join(snap.root, 'copy', rel), 0o400);
    }
    const messages = [0, 2, 2].map((parallelism) => {
      try {
        snap.verifySync({ parallelism });
      } catch (err) {
        expect((err as SealError).code).toBe('SEAL_CORRUPT');
        return (err as SealError).message;
      }
      return 'passed';
    });
    expect(messages[0]).toMatch(/: 2 entries differ from its manifest, first: copy\/t\/d[35]\/f(010|299)$/);
    expect(messages).toEqual([messages[0], messages[0], messages[0]]);
    expectError(() => snap.verifySync({ parallelism: 65 }), {
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.parallelism" is out of range. It must be >= 0 && <= 64. Received 65',
    });
    store.closeSync();
  });

  it('finds a re-pointed symlink in a mount', async () => {
    const { store, snap, snapRoot } = fresh();
    const payload = join(snapRoot, 'mounts/00000/payload');
    chmodSync(payload, 0o700);
    unlinkSync(join(payload, 'l'));
    symlinkSync('/etc/passwd', join(payload, 'l'));
    chmodSync(payload, 0o500);
    await expectError(async () => snap.verify(), { code: 'SEAL_CORRUPT', message: `snapshot ${snap.digest} is corrupt: 1 entry differs from its manifest, first: mounts/00000/payload/l` });
    store.closeSync();
  });

  it('a tampered manifest.json is refused on load', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'a/x': 'one' });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: repo, copy: ['a'] });
    const doc = join(snap.root, 'manifest.json');
    chmodSync(snap.root, 0o700);
    chmodSync(doc, 0o600);
    writeFileSync(doc, '{"schema_version":3}');
    expect(() => store.get(snap.digest)).toThrow(expect.objectContaining({ code: 'SEAL_CORRUPT' }));
    renameSync(doc, `${doc}.gone`);
    expect(() => store.get(snap.digest)).toThrow(expect.objectContaining({ code: 'SEAL_CORRUPT', message: `snapshot has no readable manifest: ${snap.digest}` }));
  });
});

describe('freeze and thaw', () => {
  it('freeze: files 0400 or 0500, dirs 0500; thaw: 0600 and 0700; links are never followed', async () => {
    const work = tempDir();
    const dir = join(work, 't');
    writeTree(dir, { 'f': 'x', 'x.sh': '#!', 'd/g': 'y' });
    chmodSync(join(dir, 'x.sh'), 0o710);
    const outside = join(work, 'outside');
    writeFileSync(outside, 'o');
    chmodSync(outside, 0o644);
    symlinkSync(outside, join(dir, 'd/link'));
    freezeSync(dir);
    const mode = (p: string): number => statSync(join(dir, p)).mode & 0o7777;
    expect([mode('f'), mode('x.sh'), mode('d/g'), mode('d'), mode('')]).toEqual([0o400, 0o500, 0o400, 0o500, 0o500]);
    expect(statSync(outside).mode & 0o7777).toBe(0o644);
    expect(lstatSync(join(dir, 'd/link')).isSymbolicLink()).toBe(true);
    await thaw(dir);
    expect([mode('f'), mode('x.sh'), mode('d/g'), mode('d'), mode('')]).toEqual([0o600, 0o600, 0o600, 0o700, 0o700]);
    await freeze(dir);
    expect(mode('d')).toBe(0o500);
    thawSync(dir);
    expect(statSync(outside).mode & 0o7777).toBe(0o644);
  });

  it('refuses special files and symlinked roots', () => {
    const work = tempDir();
    const dir = join(work, 't');
    mkdirSync(dir);
    mkfifo(join(dir, 'p'));
    expect(() => freezeSync(dir)).toThrow(expect.objectContaining({ code: 'SEAL_SPECIAL_FILE', message: 'tree contains a special file: p' }));
    symlinkSync(dir, join(work, 'link'));
    expect(() => freezeSync(join(work, 'link'))).toThrow(expect.objectContaining({ code: 'SEAL_SYMLINK' }));
    expect(readdirSync(dir)).toEqual(['p']);
  });
});
