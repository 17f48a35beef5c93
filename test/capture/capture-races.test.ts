// capture-races.test.ts: deterministic races (a wrapped syscall layer changes the tree at an exact step) and a real concurrent mutator.
import { readFileSync, appendFileSync, chmodSync, mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync, openSync, writeSync, closeSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type CaptureCallOptions } from '../../dist/index.js';
import { O_CREAT, type Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, fsTargets, mkfifo, openFds, reflinkMount, storeLeftovers, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const MiB = 1 << 20;

interface Case {
  name: string;
  code: string;
  message: string;
  sys: (repo: string) => Sys;
}

function nameOf(path: unknown): string {
  return typeof path === 'string' ? path : String(path);
}

/** Runs fn the first time it is called, and never again. */
function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (!done) {
      done = true;
      fn();
    }
  };
}

/** A syscall layer that runs `step` once, right after the first chunk of a file is read. */
function afterFirstRead(step: () => void): Sys {
  const run = once(step);
  return wrapSys({
    pread: (orig) => (fd, buf, off, len, pos) => {
      const n = orig(fd, buf, off, len, pos);
      run();
      return n;
    },
  });
}

/** A syscall layer that runs `step` once, between the fstatat and the openat of the source entry `name`. */
function beforeSourceOpen(name: string, step: () => void): Sys {
  const run = once(step);
  return wrapSys({
    openat: (orig) => (dirfd, path, flags, mode) => {
      if (nameOf(path) === name && !(flags & O_CREAT)) run();
      return orig(dirfd, path, flags, mode);
    },
  });
}

/** A syscall layer that runs `step` once, right after tree/sub (the directory holding `z`) is listed. */
function afterSubListing(step: () => void): Sys {
  const run = once(step);
  return wrapSys({
    readdir: (orig) => (fd) => {
      const out = orig(fd);
      if (out.some((e) => e.name === 'z')) run();
      return out;
    },
  });
}

const cases: Case[] = [
  {
    name: 'append after chunk 1',
    code: 'SEAL_CHANGED',
    message: 'file changed while snapshotting: tree/big',
    sys: (repo) => afterFirstRead(() => appendFileSync(join(repo, 'tree/big'), 'more')),
  },
  {
    name: 'same-size in-place rewrite during the read',
    code: 'SEAL_CHANGED',
    message: 'file changed while snapshotting: tree/big',
    sys: (repo) =>
      afterFirstRead(() => {
        const w = openSync(join(repo, 'tree/big'), 'r+');
        writeSync(w, Buffer.alloc(MiB, 0x41), 0, MiB, 0);
        closeSync(w);
      }),
  },
  {
    name: 'chmod during the read',
    code: 'SEAL_CHANGED',
    message: 'file changed while snapshotting: tree/big',
    sys: (repo) => afterFirstRead(() => chmodSync(join(repo, 'tree/big'), 0o600)),
  },
  {
    name: 'file renamed over between fstatat and openat',
    code: 'SEAL_CHANGED',
    message: 'path changed while opening: tree/small',
    sys: (repo) =>
      beforeSourceOpen('small', () => {
        writeFileSync(join(repo, 'tree/other'), 'replacement');
        renameSync(join(repo, 'tree/other'), join(repo, 'tree/small'));
      }),
  },
  {
    name: 'directory swapped for a symlink between fstatat and openat',
    code: 'SEAL_CHANGED',
    message: 'path changed while opening: tree/sub',
    sys: (repo) =>
      beforeSourceOpen('sub', () => {
        renameSync(join(repo, 'tree/sub'), join(repo, 'moved'));
        symlinkSync('/etc', join(repo, 'tree/sub'));
      }),
  },
  {
    name: 'FIFO swapped in between fstatat and openat (must not block)',
    code: 'SEAL_CHANGED',
    message: 'path changed while opening: tree/small',
    sys: (repo) =>
      beforeSourceOpen('small', () => {
        unlinkSync(join(repo, 'tree/small'));
        mkfifo(join(repo, 'tree/small'));
      }),
  },
  {
    name: 'entry added while the directory is listed',
    code: 'SEAL_CHANGED',
    message: 'directory changed while snapshotting: tree/sub',
    sys: (repo) => afterSubListing(() => writeFileSync(join(repo, 'tree/sub/added'), 'new')),
  },
  {
    name: 'entry removed while the directory is listed',
    code: 'SEAL_CHANGED',
    message: 'path changed while opening: tree/sub/z',
    sys: (repo) => afterSubListing(() => rmSync(join(repo, 'tree/sub/z'))),
  },
];

function runCase(base: string | undefined, c: Case): void {
  const root = tempDir(base);
  const repo = join(root, 'repo');
  mkdirSync(repo);
  writeTree(repo, { 'tree/big': Buffer.alloc(3 * MiB, 7), 'tree/small': 'small', 'tree/sub/a': 'a', 'tree/sub/z': 'z' });
  const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys: c.sys(repo) });
  const fds = openFds().length;
  const options: CaptureCallOptions = { source: repo, copy: ['tree'] };
  let caught: unknown;
  try {
    store.captureSync(options);
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(SealError);
  expect((caught as SealError).code).toBe(c.code);
  expect((caught as SealError).message).toBe(c.message);
  expect((caught as SealError).retryable).toBe(true);
  expect(storeLeftovers(store.root)).toEqual([]);
  expect(openFds().length).toBe(fds);
  store.closeSync();
}

describe('deterministic races on this filesystem (read, hash, write)', () => {
  for (const c of cases) it(c.name, () => runCase(undefined, c));
});

describe('a mount symlink swapped for a file between its fstatat and its readlinkat', () => {
  for (const when of ['first', 'second'] as const) {
    it(`is SEAL_CHANGED at the ${when} readlinkat, with nothing left behind`, () => {
      const work = tempDir();
      const repo = join(work, 'repo');
      writeTree(repo, { 'nm/a': 'a' });
      symlinkSync('a', join(repo, 'nm/l'));
      let calls = 0;
      const sys = wrapSys({
        readlinkat: (orig) => (dirfd, path) => {
          if (nameOf(path) === 'l' && ++calls === (when === 'first' ? 1 : 2)) {
            unlinkSync(join(repo, 'nm/l'));
            writeFileSync(join(repo, 'nm/l'), 'now a file');
          }
          return orig(dirfd, path);
        },
      });
      const store = SnapshotStore.openSync(join(work, 'store'), { sys });
      let err: unknown;
      try {
        store.captureSync({ source: repo, mounts: [{ source: 'nm', target: 'nm' }] });
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(SealError);
      expect([(err as SealError).code, (err as SealError).message]).toEqual(
        when === 'first' ? ['SEAL_CHANGED', 'path changed while opening: nm/l'] : ['SEAL_CHANGED', 'symlink changed while snapshotting: nm/l'],
      );
      expect(storeLeftovers(store.root)).toEqual([]);
      store.closeSync();
    });
  }
});

describe('a declared root missing at capture', () => {
  /** Captures copy roots a, b and c/d of a fresh repo; `sys` may move things at an exact step. */
  function captureRoots(sys?: (repo: string) => Sys): SealError {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'a/x': 'x', 'b/y': 'y', 'c/d/z': 'z' });
    // The tree was last changed long before the capture (as a checkout is).
    for (const dir of ['', 'c']) utimesSync(join(repo, dir), 1e9, 1e9);
    const store = SnapshotStore.openSync(join(work, 'store'), { sys: sys?.(repo) });
    let err: unknown;
    try {
      store.captureSync({ source: repo, copy: ['a', 'b', 'c/d', 'gone'] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SealError);
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
    return err as SealError;
  }

  /** Renames `from` (below the repo) away just before the capture first looks at `name`. */
  const renamedBefore = (name: string, from: string) => (repo: string) => {
    const run = once(() => renameSync(join(repo, from), join(repo, `${from.replace('/', '-')}.moved`)));
    return wrapSys({
      fstatat: (orig) => (dirfd, path, flags) => {
        if (nameOf(path) === name) run();
        return orig(dirfd, path, flags);
      },
    });
  };

  it('is SEAL_UNAVAILABLE and not retryable when it was never there', () => {
    const err = captureRoots();
    expect([err.code, err.path, err.retryable]).toEqual(['SEAL_UNAVAILABLE', 'gone', false]);
    expect(err.message).toBe("path is unavailable: gone: ENOENT: no such file or directory, fstatat 'gone'");
  });

  it('is SEAL_UNAVAILABLE and retryable when it was renamed away during the capture', () => {
    const err = captureRoots(renamedBefore('b', 'b'));
    expect([err.code, err.path, err.retryable]).toEqual(['SEAL_UNAVAILABLE', 'b', true]);
    expect(err.message).toBe("path is unavailable: b: ENOENT: no such file or directory, fstatat 'b'");
  });

  it('is retryable when a directory on its way was renamed away during the capture', () => {
    const err = captureRoots(renamedBefore('c', 'c'));
    expect([err.code, err.path, err.retryable]).toEqual(['SEAL_UNAVAILABLE', 'c', true]);
  });
});

for (const kind of ['xfs', 'btrfs'] as const) {
  const mount = reflinkMount(kind);
  describe.skipIf(mount === undefined)(`deterministic races on ${kind} (clone, then hash the clone)`, () => {
    for (const c of cases.filter((x) => !x.name.includes('during the read'))) it(c.name, () => runCase(mount, c));
    it('a write to the source right after the clone is caught', () => {
      runCase(mount, {
        name: 'write after clone',
        code: 'SEAL_CHANGED',
        message: 'file changed while snapshotting: tree/big',
        sys: (repo) => {
          let clones = 0;
          return wrapSys({
            ficlone: (orig) => (dst, src) => {
              const ok = orig(dst, src);
              if (++clones === 1) appendFileSync(join(repo, 'tree/big'), 'x');
              return ok;
            },
          });
        },
      });
    });
  });
}

describe.each(fsTargets())('a real concurrent mutator on %s', (_name, base) => {
  it('every capture either fails with SEAL_CHANGED or holds bytes that existed at one moment', async () => {
    const root = tempDir(base);
    const repo = join(root, 'repo');
    mkdirSync(join(repo, 'tree'), { recursive: true });
    writeFileSync(join(repo, 'tree/f'), Buffer.alloc(2 * MiB, 'A'));
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const mutator = new Worker(
      `const { workerData } = require('node:worker_threads');
       const fs = require('node:fs');
       const stop = workerData.stop;
       let i = 0;
       while (Atomics.load(stop, 0) === 0) {
         fs.writeFileSync(workerData.path + '.tmp', Buffer.alloc(2 << 20, i++ % 2 ? 'B' : 'A'));
         if (i % 3 === 0) fs.renameSync(workerData.path + '.tmp', workerData.path);
         else fs.writeFileSync(workerData.path, Buffer.alloc(2 << 20, i % 2 ? 'B' : 'A'));
       }`,
      { eval: true, workerData: { stop, path: join(repo, 'tree/f') } },
    );
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true });
    const { createHash } = await import('node:crypto');
    // States the file really passes through: empty (after O_TRUNC), then a growing run of one byte.
    const existed = (bytes: Buffer): boolean => bytes.length <= 2 * MiB && (bytes.every((b) => b === 0x41) || bytes.every((b) => b === 0x42));
    let changed = 0;
    let captured = 0;
    try {
      for (let i = 0; i < 40; i++) {
        try {
          const snap = store.captureSync({ source: repo, copy: ['tree'], revision: String(i) });
          const entry = snap.entries.find((e) => e.path === 'tree/f');
          if (entry !== undefined) {
            const bytes = readFileSync(join(snap.root, 'copy/tree/f'));
            expect(createHash('sha256').update(bytes).digest('hex')).toBe(entry.sha256);
            expect(existed(bytes)).toBe(true);
            captured++;
          }
        } catch (err) {
          expect(err).toBeInstanceOf(SealError);
          expect(['SEAL_CHANGED', 'SEAL_UNAVAILABLE']).toContain((err as SealError).code);
          changed++;
        }
      }
    } finally {
      Atomics.store(stop, 0, 1);
      await mutator.terminate();
    }
    expect(changed + captured).toBe(40);
    expect(storeLeftovers(store.root).filter((n) => n.startsWith('tmp/'))).toEqual([]);
    store.closeSync();
  });
});
