// verify.test.ts: verify() re-hashes a snapshot and names drift as SEAL_CORRUPT.
import { chmodSync, renameSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, tempDir, writeTree } from '../helpers.js';

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
      // The helper threads of the verifies above may still be closing their loops' fds.
      fds: false,
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
