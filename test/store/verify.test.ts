// verify.test.ts: verify() re-hashes a snapshot and names drift as SEAL_CORRUPT.
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, Snapshot, SnapshotStore } from '../../dist/index.js';
import { FilePool, HashBatch, decodeDocumentBytes, verifyAt } from '../../dist/internal.js';
import { O_DIRECTORY, O_RDONLY } from '../../dist/sys/index.js';
import { sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, failOnce, mkfifo, rootPassOnly, tempDir, wrapSys, writeTree } from '../helpers.js';

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
  it('counts directories and links in its progress as it checks them, not only at the end (a tree of directories showed 1 of 2,402 until it was done)', () => {
    const work = tempDir();
    const tree: Record<string, string> = { 'src/only.txt': 'x' };
    writeTree(join(work, 'repo'), tree);
    for (let i = 0; i < 400; i++) mkdirSync(join(work, 'repo/src', `d${i}/e/f`), { recursive: true });
    for (let i = 0; i < 200; i++) symlinkSync('only.txt', join(work, 'repo/src', `l${i}`));
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], links: 'contained' });
    // Each directory listed a little slowly, so the progress (about every 100 ms) comes while the walk goes on.
    const slow = wrapSys({ readdir: (orig) => (fd) => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
      return orig(fd);
    } });
    const seen: number[] = [];
    const total = snap.entries.length;
    expect(total).toBe(1 + 1 + 1200 + 200);
    const slowStore = SnapshotStore.openSync(join(work, 'store'), { sys: slow });
    slowStore.get(snap.digest).verifySync({ onProgress: (p) => seen.push(p.entries) });
    slowStore.closeSync();
    expect(seen.at(-1)).toBe(total);
    const during = seen.slice(0, -1);
    expect(during.length).toBeGreaterThan(2);
    expect(during.some((n) => n > 100 && n < total)).toBe(true);
    expect(during.every((n, i) => n <= total && (i === 0 || n >= during[i - 1]!))).toBe(true);
    store.closeSync();
  });

  it('passes on an intact snapshot and reports what it checked', async () => {
    const { store, snap } = fresh();
    expect(await snap.verify()).toEqual({ entries: 6, bytes: 9 });
    expect(snap.verifySync()).toEqual({ entries: 6, bytes: 9 });
    store.closeSync();
  });

  it("a snapshot whose own directory was left writable (an rm killed between opening it up and its rename) fails verify, and gc freezes it again (verify passed it, and it took new names)", () => {
    const { store, snap, snapRoot } = fresh();
    chmodSync(snapRoot, 0o700);
    expectError(() => snap.verifySync(), {
      code: 'SEAL_CORRUPT',
      message: `snapshot ${snap.digest} is not frozen: its directory is mode 0700, not 0500 (an rm killed before its rename leaves 0700: treeseal gc freezes it again)`,
    });
    expect(store.gc()).toBe(1);
    expect(statSync(snapRoot).mode & 0o7777).toBe(0o500);
    expect(snap.verifySync()).toEqual({ entries: 6, bytes: 9 });
    expect(store.gc()).toBe(0);
    // Another mode than the one rm leaves is verify's to report, not gc's to change.
    chmodSync(snapRoot, 0o755);
    expect(store.gc()).toBe(0);
    expectError(() => snap.verifySync(), { code: 'SEAL_CORRUPT', message: /is not frozen: its directory is mode 0755, not 0500/ });
    chmodSync(snapRoot, 0o500);
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

  it("without bytes (a pull's build, whose bytes were proven as written) checks every kind, mode, size, link and name, and reads no file", () => {
    const { store, snap, snapRoot } = fresh();
    const data = decodeDocumentBytes(readFileSync(join(snapRoot, 'manifest.json')));
    const walk = (): unknown => {
      const fd = sys.openat(-100, snapRoot, O_RDONLY | O_DIRECTORY, 0);
      try {
        return verifyAt(sys, fd, data, {}, undefined, false);
      } catch (err) {
        return err;
      } finally {
        sys.close(fd);
      }
    };
    const corrupt = (n: number, first: string) => expect(walk()).toMatchObject({ code: 'SEAL_CORRUPT', message: `snapshot ${snap.digest} is corrupt: ${n} ${n === 1 ? 'entry differs' : 'entries differ'} from its manifest, first: ${first}` });
    /** Runs fn with `rel` (a frozen file or directory of the snapshot) writable, then freezes it to `mode`. */
    const opened = (rel: string, mode: number, fn: () => void = () => {}): void => {
      chmodSync(join(snapRoot, rel), 0o700);
      fn();
      chmodSync(join(snapRoot, rel), mode);
    };
    const x = join(snapRoot, 'copy/a/x');
    expect(walk()).toEqual({ entries: 6, bytes: 0 });
    // Same size, same mode, other bytes: not read, so not seen (verify() sees it).
    opened('copy/a/x', 0o400, () => writeFileSync(x, 'ONE'));
    expect(walk()).toEqual({ entries: 6, bytes: 0 });
    chmodSync(x, 0o600);
    corrupt(1, 'copy/a/x');
    opened('copy/a/x', 0o400, () => writeFileSync(x, 'ONE!'));
    corrupt(1, 'copy/a/x');
    opened('copy/a/x', 0o400, () => writeFileSync(x, 'one'));
    expect(walk()).toEqual({ entries: 6, bytes: 0 });
    // A file where a directory was, and a directory where a file was.
    const aside = join(tempDir(), 'y');
    opened('copy/a', 0o500, () => {
      renameSync(join(snapRoot, 'copy/a/y'), aside);
      mkdirSync(join(snapRoot, 'copy/a/y'), { mode: 0o500 });
    });
    corrupt(1, 'copy/a/y');
    opened('copy/a', 0o500, () => {
      rmSync(join(snapRoot, 'copy/a/y'), { recursive: true });
      renameSync(aside, join(snapRoot, 'copy/a/y'));
    });
    expect(walk()).toEqual({ entries: 6, bytes: 0 });
    chmodSync(join(snapRoot, 'copy/a'), 0o700);
    corrupt(1, 'copy/a');
    opened('copy/a', 0o500, () => writeFileSync(join(snapRoot, 'copy/a/planted'), ''));
    corrupt(1, 'copy/a/planted');
    opened('copy/a', 0o500, () => {
      unlinkSync(join(snapRoot, 'copy/a/planted'));
      unlinkSync(join(snapRoot, 'copy/a/y'));
    });
    corrupt(1, 'copy/a/y');
    opened('copy/a', 0o500, () => writeFileSync(join(snapRoot, 'copy/a/y'), 'two', { mode: 0o400 }));
    expect(walk()).toEqual({ entries: 6, bytes: 0 });
    const deps = join(snapRoot, 'mounts/00000/payload');
    opened('mounts/00000/payload', 0o500, () => {
      unlinkSync(join(deps, 'l'));
      symlinkSync('elsewhere', join(deps, 'l'));
    });
    corrupt(1, 'mounts/00000/payload/l');
    store.closeSync();
  });

  rootPassOnly('hashes on helper threads (parallelism 2) with the same report and the same first drift as one thread', async () => {
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

  rootPassOnly('hashes big files ahead of the walk and the rest in batches: the same report and the same drift, first and count, at every parallelism', async () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    const files: Record<string, string | Buffer> = { 't/top.bin': Buffer.alloc(3 << 20, 7), 't/d2/deep/mid.bin': Buffer.alloc(1 << 20, 9) };
    for (let i = 0; i < 200; i++) files[`t/d${i % 5}/f${String(i).padStart(3, '0')}`] = Buffer.alloc(i * 700, i % 251);
    writeTree(repo, files);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: repo, copy: ['t'] });
    const bytes = Object.values(files).reduce((n, b) => n + b.length, 0);
    for (const parallelism of [0, 1, 2, undefined]) expect(snap.verifySync({ parallelism })).toEqual({ entries: 209, bytes });
    expect(await snap.verify()).toEqual({ entries: 209, bytes });
    // Same size, other bytes: only the digest tells, for the big file hashed ahead and a small one in a batch.
    for (const [rel, fill] of [['t/d2/deep/mid.bin', Buffer.alloc(1 << 20, 8)], ['t/d3/f013', Buffer.alloc(13 * 700, 1)]] as const) {
      const path = join(snap.root, 'copy', rel);
      chmodSync(path, 0o600);
      writeFileSync(path, fill);
      chmodSync(path, 0o400);
    }
    // (fds: the helper threads of a verify's own pool may still be closing their loops' fds.)
    const messages = [0, 1, 2, undefined].map((parallelism) => expectError(() => snap.verifySync({ parallelism }), { code: 'SEAL_CORRUPT', fds: false }).message);
    expect(messages[0]).toMatch(/: 2 entries differ from its manifest, first: copy\/t\/d(2\/deep\/mid\.bin|3\/f013)$/);
    expect(messages).toEqual(messages.map(() => messages[0]));
    const f013 = join(snap.root, 'copy/t/d3/f013');
    chmodSync(f013, 0o600);
    writeFileSync(f013, files['t/d3/f013']!);
    chmodSync(f013, 0o400);
    // A big file's directory made a symlink to an intact copy: not followed, so the walk names the symlink and all below it.
    const d2 = join(snap.root, 'copy/t/d2');
    chmodSync(join(snap.root, 'copy/t'), 0o700);
    cpSync(d2, join(work, 'd2-copy'), { recursive: true });
    chmodSync(d2, 0o700);
    chmodSync(join(d2, 'deep'), 0o700);
    rmSync(d2, { recursive: true, force: true });
    symlinkSync(join(work, 'd2-copy'), d2);
    chmodSync(join(snap.root, 'copy/t'), 0o500);
    for (const parallelism of [0, 2]) {
      expectError(() => snap.verifySync({ parallelism }), { code: 'SEAL_CORRUPT', message: `snapshot ${snap.digest} is corrupt: 43 entries differ from its manifest, first: copy/t/d2`, fds: false });
    }
    store.closeSync();
  });

  it('a big file replaced by a symlink or a FIFO is drift, never followed or waited on', async () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'a/big': Buffer.alloc(2 << 20, 1), 'a/fifo-big': Buffer.alloc(2 << 20, 2), 'a/small': 'x' });
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const snap = store.captureSync({ source: repo, copy: ['a'] });
    const a = join(snap.root, 'copy/a');
    chmodSync(a, 0o700);
    cpSync(join(a, 'big'), join(work, 'big-copy'));
    unlinkSync(join(a, 'big'));
    symlinkSync(join(work, 'big-copy'), join(a, 'big'));
    unlinkSync(join(a, 'fifo-big'));
    mkfifo(join(a, 'fifo-big'));
    chmodSync(join(a, 'fifo-big'), 0o400);
    chmodSync(a, 0o500);
    for (const parallelism of [0, 2]) {
      expectError(() => snap.verifySync({ parallelism }), { code: 'SEAL_CORRUPT', message: /: 2 entries differ from its manifest, first: copy\/a\/(big|fifo-big)$/, fds: false });
    }
    store.closeSync();
  });

  it('a file that cannot be opened fails the verify with the system error, every directory closed', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    const files: Record<string, string> = {};
    for (let i = 0; i < 40; i++) files[`t/d${i % 3}/f${i}`] = `x${i}`;
    writeTree(repo, files);
    const store = SnapshotStore.openSync(join(work, 'store'), { ephemeral: true });
    const data = store.captureSync({ source: repo, copy: ['t'] });
    const fault = failOnce('openat', 'EIO', (_fd, name) => name === 'f17');
    const snap = new Snapshot(data.root, data.toJSON(), { sys: fault.sys });
    const err = expectError(() => snap.verifySync(), { code: 'SEAL_IO' });
    expect((err as SealError).cause).toBe(fault.injected());
    store.closeSync();
  });

  it('a batch on a helper thread: the files that differ by index, nothing but a regular file opened, a failed lookup named as the addon names it', () => {
    const dir = tempDir();
    writeTree(dir, { ok: 'same', other: 'changed', big: Buffer.alloc(3 << 20, 5) });
    chmodSync(join(dir, 'ok'), 0o400);
    chmodSync(join(dir, 'other'), 0o400);
    chmodSync(join(dir, 'big'), 0o500);
    mkfifo(join(dir, 'pipe'));
    chmodSync(join(dir, 'pipe'), 0o400);
    symlinkSync('ok', join(dir, 'link'));
    const sha = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');
    const dirfd = sys.openat(-100, dir, O_RDONLY | O_DIRECTORY, 0);
    const pool = new FilePool(sys, Buffer.allocUnsafe(1 << 20), 1);
    try {
      const results: unknown[] = [];
      const batch = new HashBatch(dirfd);
      batch.add('ok', 4, 0o400, sha('same'), 0);
      batch.add('other', 7, 0o400, sha('CHANGED'), 1);
      batch.add('pipe', 0, 0o400, sha(''), 2);
      batch.add('ok', 5, 0o400, sha('same'), 3);
      batch.add('ok', 4, 0o500, sha('same'), 4);
      batch.add('link', 4, 0o400, sha('same'), 5);
      pool.submitBatch(batch, (r) => results.push(r));
      const big = new HashBatch(dirfd);
      big.add('big', 3 << 20, 0o500, sha(Buffer.alloc(3 << 20, 5)), 0);
      pool.submitBatch(big, (r) => results.push(r));
      pool.drain();
      expect(results).toHaveLength(2);
      expect(results).toContainEqual([1, 2, 3, 4, 5]);
      expect(results).toContainEqual([]);
      const failing = new HashBatch(dirfd);
      failing.add('ok', 4, 0o400, sha('same'), 0);
      failing.add('gone', 2, 0o400, sha('ok'), 1);
      let got: unknown;
      pool.submitBatch(failing, (r) => (got = r));
      pool.drain();
      expect(got).toMatchObject({ code: 'ENOENT', syscall: 'fstatat', path: 'gone', message: "ENOENT: no such file or directory, fstatat 'gone'" });
      expect((got as { errno: number }).errno).toBeLessThan(0);
    } finally {
      pool.close();
      sys.close(dirfd);
    }
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

  it('anything else in the snapshot directory, or in its mounts/, is corruption named by verify (it passed)', async () => {
    for (const stray of ['junk.txt', 'extra-dir', 'mounts/00009']) {
      const { store, snap, snapRoot } = fresh();
      chmodSync(snapRoot, 0o700);
      chmodSync(join(snapRoot, 'mounts'), 0o700);
      if (stray === 'junk.txt') writeFileSync(join(snapRoot, stray), 'x');
      else mkdirSync(join(snapRoot, stray));
      await expectError(async () => snap.verify(), { code: 'SEAL_CORRUPT', message: `snapshot ${snap.digest} is corrupt: it holds what its manifest does not: ${stray}`, path: stray });
      store.closeSync();
    }
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
