// recapture.test.ts: the stat cache never misses a change: rewrites, renames, racy ticks, appends, chmod, recreated files, bad cache files, concurrency.
import { execFile } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  copyFileSync,
  linkSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  truncateSync,
  unlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type CaptureCallOptions, type Snapshot } from '../../dist/index.js';
import { isDir, sys as nativeSys, type Stat, type Sys } from '../../dist/sys/index.js';
import { STAT_CLOCK_AHEAD } from '../../dist/internal.js';
import { SETTLED, checkNoFdLeaks, fsTargets, listTree, storeLeftovers, systemError, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/**
 * The stores of this suite record their stat cache entries past the racy window (the
 * internal STAT_CLOCK_AHEAD option: as if the capture ran 3 s later), so a test that
 * needs time to pass does not sleep. `inTick` captures on the store's own clock: the
 * records it makes of files written just before are racy, as a capture right after a write makes them.
 */
const inTick = { clock: 'store' } as const;

const TREE = {
  'tree/a.txt': 'alpha',
  'tree/b.txt': 'bravo',
  'tree/sub/c.txt': 'charlie',
  'tree/sub/d.bin': Buffer.alloc(70_000, 3),
  'tree/sub/deeper/e.txt': 'echo',
  'tree/same1': 'twin',
  'tree/same2': 'twin',
  'modules/pkg/index.js': 'module.exports = 1;\n',
  'modules/pkg/bin.sh': '#!/bin/sh\n',
};
const FILES = 9;
const WHOLE_SECOND = 1_700_000_000;
const DEFINITION = { copy: ['tree'], mounts: [{ source: 'modules', target: 'node_modules' }] };

function makeRepo(base?: string): { repo: string; store: string } {
  const root = tempDir(base);
  const repo = join(root, 'repo');
  writeTree(repo, TREE);
  chmodSync(join(repo, 'modules/pkg/bin.sh'), 0o755);
  // Whole-second mtimes, so a test can put one back exactly.
  for (const rel of Object.keys(TREE)) utimesSync(join(repo, rel), WHOLE_SECOND, WHOLE_SECOND);
  return { repo, store: join(root, 'store') };
}

/** One capture through a new store object (so nothing is remembered in-process), verified; its records made past the racy window unless `when` is inTick. */
function capture(store: string, repo: string, extra: Partial<CaptureCallOptions> = {}, sys?: Sys, when?: typeof inTick): Snapshot {
  const s = SnapshotStore.openSync(store, { ...(when === inTick ? {} : SETTLED), ...(sys === undefined ? {} : { sys }) });
  try {
    const snap = s.captureSync({ source: repo, ...DEFINITION, ...extra });
    expect(snap.verifySync().entries).toBeGreaterThan(0);
    return snap;
  } finally {
    s.closeSync();
  }
}

/** The digest a full capture (no stat cache, a fresh store) gives now. */
function fullDigest(repo: string, extra: Partial<CaptureCallOptions> = {}): string {
  return capture(tempDir(), repo, { ...extra, statCache: false }).digest;
}

function stored(snap: Snapshot, rel: string): Buffer {
  return readFileSync(join(snap.root, 'copy', rel));
}

/** The stat caches in a store's cache/ (which also holds the snapshots' summary records). */
function statCaches(store: string): string[] {
  return readdirSync(join(store, 'cache')).filter((n) => n.endsWith('.bin'));
}

function cacheFile(store: string): string {
  const names = statCaches(store);
  expect(names).toHaveLength(1);
  return join(store, 'cache', names[0]!);
}

/** The snapshot digests a cache file lists (its header's count at byte 48, the digests from byte 64). */
function cacheDigests(store: string): string[] {
  const bytes = readFileSync(cacheFile(store));
  return Array.from({ length: bytes.readUInt32LE(48) }, (_, i) => bytes.toString('hex', 64 + 32 * i, 96 + 32 * i));
}

/** A rewrite that keeps the size, with atime and mtime put back as they were (the ctime still moves). */
function rewriteKeepingTimes(path: string, content: string | Buffer): void {
  const before = statSync(path, { bigint: true });
  expect(Buffer.byteLength(content)).toBe(Number(before.size));
  writeFileSync(path, content);
  utimesSync(path, WHOLE_SECOND, WHOLE_SECOND);
  const after = statSync(path, { bigint: true });
  expect([after.mtimeNs, after.size, after.ino]).toEqual([before.mtimeNs, before.size, before.ino]);
  expect(after.ctimeNs).not.toBe(before.ctimeNs);
}

/** A syscall layer that runs step once, right after tree/sub (the directory holding `deeper`) is listed. */
function afterSubListing(step: () => void): Sys {
  let done = false;
  return wrapSys({
    readdir: (orig) => (fd) => {
      const out = orig(fd);
      if (!done && out.some((e) => e.name === 'deeper')) {
        done = true;
        step();
      }
      return out;
    },
  });
}

const repos: Record<string, { repo: string; store: string }> = {};
const NAMES = ['unchanged', 'rewrite', 'rename', 'append', 'chmod', 'recreate', 'truncated', 'garbage', 'foreign', 'removed', 'missing', 'tampered', 'race', 'shared', 'concurrent', 'linked', 'untyped', 'back', 'modes', 'nolink', 'emlink', 'unsaved'];

beforeAll(async () => {
  for (const n of NAMES) repos[n] = makeRepo();
  // The first capture of each records every file; its files are all older than the granularity.
  for (const n of NAMES) expect(capture(repos[n]!.store, repos[n]!.repo).captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: false });
}, 60_000);

describe('stat cache: an unchanged tree', () => {
  it('reuses every hash and the stored snapshot: no source file opened, no build', () => {
    const { repo, store } = repos.unchanged!;
    const fileNames = new Set(Object.keys(TREE).map((p) => p.split('/').pop()!));
    const dirNames = new Set(['tree', 'sub', 'deeper', 'payload', 'pkg', '.vite-temp']);
    const touched: string[] = [];
    const sys = wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        if (fileNames.has(String(path))) touched.push(String(path));
        return orig(dirfd, path, flags, mode);
      },
      mkdirat: (orig) => (dirfd, path, mode) => {
        if (dirNames.has(String(path))) touched.push(`mkdir ${String(path)}`);
        orig(dirfd, path, mode);
      },
    });
    const s = SnapshotStore.openSync(store, { sys });
    const snap = s.captureSync({ source: repo, ...DEFINITION });
    s.closeSync();
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: FILES, built: false, reused: true });
    // No file of the tree is opened, no directory of it made: the build stays empty and is removed.
    expect(touched).toEqual([]);
    expect(snap.verifySync().entries).toBe(15);
    expect(snap.digest).toBe(fullDigest(repo));
    expect(storeLeftovers(store).filter((p) => p.startsWith('tmp/'))).toEqual([]);
  });

  it('statCache: false reads every file and neither reads nor writes the cache', () => {
    const { repo, store } = repos.unchanged!;
    const before = readFileSync(cacheFile(store));
    const snap = capture(store, repo, { statCache: false });
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: true });
    expect(readFileSync(cacheFile(store)).equals(before)).toBe(true);
    expect(() => capture(store, repo, { statCache: 'no' as unknown as boolean })).toThrow(
      expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }),
    );
  });
});

describe('stat cache: every change is seen', () => {
  it('a same-size rewrite with mtime restored by utimensat (the ctime differs)', () => {
    const { repo, store } = repos.rewrite!;
    rewriteKeepingTimes(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: FILES - 1, built: true, reused: false });
    expect(stored(snap, 'tree/a.txt').toString()).toBe('ALPHA');
    expect(stored(snap, 'tree/sub/d.bin').equals(Buffer.alloc(70_000, 3))).toBe(true);
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('a file replaced by rename (the inode differs), size and mtime kept', () => {
    const { repo, store } = repos.rename!;
    const path = join(repo, 'tree/sub/c.txt');
    const old = statSync(path);
    writeFileSync(join(repo, 'tree/sub/c.new'), 'CHARLIE');
    utimesSync(join(repo, 'tree/sub/c.new'), old.atime, old.mtime);
    renameSync(join(repo, 'tree/sub/c.new'), path);
    expect(statSync(path).ino).not.toBe(old.ino);
    const snap = capture(store, repo);
    expect(snap.captureReport?.reusedFiles).toBe(FILES - 1);
    expect(stored(snap, 'tree/sub/c.txt').toString()).toBe('CHARLIE');
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('an append', () => {
    const { repo, store } = repos.append!;
    appendFileSync(join(repo, 'tree/sub/d.bin'), 'tail');
    const snap = capture(store, repo);
    expect(snap.captureReport?.reusedFiles).toBe(FILES - 1);
    expect(stored(snap, 'tree/sub/d.bin').subarray(-4).toString()).toBe('tail');
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('a chmod: rehashed; a mount records the new mode, a copy root (mode 0) keeps its digest', () => {
    const { repo, store } = repos.chmod!;
    const first = capture(store, repo);
    chmodSync(join(repo, 'modules/pkg/index.js'), 0o755);
    chmodSync(join(repo, 'tree/b.txt'), 0o600);
    const snap = capture(store, repo);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: FILES - 2, built: true, reused: false });
    expect(snap.mounts[0]!.entries.find((e) => e.path === 'payload/pkg/index.js')!.mode).toBe(0o755);
    expect(snap.manifestDigest).toBe(first.manifestDigest);
    expect(statSync(join(snap.root, 'mounts/00000/payload/pkg/index.js')).mode & 0o777).toBe(0o500);
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('a cached file deleted and another created with the same name and size', () => {
    const { repo, store } = repos.recreate!;
    const path = join(repo, 'tree/b.txt');
    unlinkSync(path);
    writeFileSync(path, 'BRAVO');
    const snap = capture(store, repo);
    expect(snap.captureReport?.reusedFiles).toBe(FILES - 1);
    expect(stored(snap, 'tree/b.txt').toString()).toBe('BRAVO');
    expect(snap.digest).toBe(fullDigest(repo));
  });
});

/**
 * A filesystem whose timestamps all read as one tick: every file's mtime and ctime
 * are FILE_TICK, and the store's clock (a directory's ctime) reads dirTick. A same-size
 * rewrite in that tick leaves the identity exactly as it was.
 */
function coarseClock(dirTick: bigint): Sys {
  const FILE_TICK = 1_700_000_000_000_000_000n;
  const stamp = (st: Stat): Stat => (isDir(st.mode) ? { ...st, ctimeNs: dirTick, mtimeNs: dirTick } : { ...st, mtimeNs: FILE_TICK, ctimeNs: FILE_TICK });
  return wrapSys({ fstat: (orig) => (fd) => stamp(orig(fd)), fstatat: (orig) => (dirfd, path, flags) => stamp(orig(dirfd, path, flags)) });
}

describe('stat cache: the racy rule', () => {
  it('a same-size rewrite in the same timestamp tick as the cache entry is rehashed', () => {
    const { repo } = makeRepo();
    const store = join(tempDir(), 'store');
    const sameTick = coarseClock(1_700_000_000_000_000_000n);
    capture(store, repo, {}, sameTick, inTick);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo, {}, sameTick, inTick);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: false });
    expect(stored(snap, 'tree/a.txt').toString()).toBe('ALPHA');
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('(why: the same rewrite is trusted when the entry was recorded more than 2 s after those timestamps)', () => {
    const { repo } = makeRepo();
    const store = join(tempDir(), 'store');
    const later = coarseClock(1_700_000_000_000_000_000n + 2_000_000_001n);
    capture(store, repo, {}, later, inTick);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo, {}, later, inTick);
    expect(snap.captureReport?.reusedFiles).toBe(FILES);
    expect(stored(snap, 'tree/a.txt').toString()).toBe('alpha');
  });
});

describe('stat cache: a bad or stale cache is never trusted', () => {
  it('a truncated cache file is ignored, and replaced by a good one', () => {
    const { repo, store } = repos.truncated!;
    const file = cacheFile(store);
    truncateSync(file, Math.floor(statSync(file).size / 2));
    expect(capture(store, repo).captureReport?.reusedFiles).toBe(0);
    expect(capture(store, repo).captureReport).toEqual({ files: FILES, reusedFiles: FILES, built: false, reused: true });
  });

  it('a cache that cannot be saved (a directory at its name) fails no capture, and its report says why; nothing is left in tmp/ (it was dropped without a word)', () => {
    const { repo, store } = repos.unsaved!;
    const file = cacheFile(store);
    rmSync(file);
    mkdirSync(join(file, 'in-the-way'), { recursive: true });
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo);
    expect(snap.captureReport?.statCacheNotSaved).toMatch(new RegExp(`^EISDIR: illegal operation on a directory, renameat2 'build-cache-[0-9a-f]{24}' -> '${basename(file)}'$`));
    expect(snap.captureReport).toMatchObject({ files: FILES, reusedFiles: 0, built: true, reused: false });
    expect(readdirSync(join(store, 'tmp'))).toEqual([]);
    // Out of the way, the next capture saves it again, and says nothing.
    rmSync(file, { recursive: true });
    expect(capture(store, repo).captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: true });
    expect(capture(store, repo).captureReport).toEqual({ files: FILES, reusedFiles: FILES, built: false, reused: true });
  });

  it('a garbage cache file is ignored', () => {
    const { repo, store } = repos.garbage!;
    const file = cacheFile(store);
    writeFileSync(file, Buffer.alloc(statSync(file).size, 0x5a));
    const snap = capture(store, repo);
    expect(snap.captureReport?.reusedFiles).toBe(0);
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('a cache file from another store is ignored', () => {
    const { repo, store } = repos.foreign!;
    const other = join(tempDir(), 'other-store');
    capture(other, repo);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    capture(other, repo);
    copyFileSync(cacheFile(other), cacheFile(store));
    const snap = capture(store, repo);
    expect(snap.captureReport?.reusedFiles).toBe(0);
    expect(stored(snap, 'tree/a.txt').toString()).toBe('ALPHA');
  });

  it('entries whose snapshot was removed are not trusted', () => {
    const { repo, store } = repos.removed!;
    const s = SnapshotStore.openSync(store);
    for (const d of s.list()) s.remove(d);
    s.closeSync();
    const snap = capture(store, repo);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: false });
  });

  it('a stored copy that went missing after the walk: the capture starts over and reads every file', () => {
    const { repo, store } = repos.missing!;
    writeFileSync(join(repo, 'tree/b.txt'), 'BRAVO');
    let removed = false;
    const sys = afterSubListing(() => {
      removed = true;
      const s = SnapshotStore.openSync(store);
      for (const d of s.list()) s.remove(d);
      s.closeSync();
    });
    const snap = capture(store, repo, {}, sys);
    expect(removed).toBe(true);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: false });
    expect(stored(snap, 'tree/b.txt').toString()).toBe('BRAVO');
    expect(snap.digest).toBe(fullDigest(repo));
    expect(storeLeftovers(store).filter((p) => p.startsWith('tmp/'))).toEqual([]);
  });
});

describe('stat cache: the stored copies', () => {
  it('a stored copy that was cut short is caught, and the capture starts over and reads every file', () => {
    const { repo, store } = repos.tampered!;
    const s = SnapshotStore.openSync(store);
    const [digest] = s.list();
    s.closeSync();
    const copy = join(store, 'snapshots', digest!, 'copy/tree/sub/c.txt');
    chmodSync(copy, 0o600);
    truncateSync(copy, 3);
    chmodSync(copy, 0o400);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: 0, built: true, reused: false });
    expect(stored(snap, 'tree/sub/c.txt').toString()).toBe('charlie');
    expect(snap.digest).toBe(fullDigest(repo));
  });
});

/** The inode of a file in a snapshot's tree (below its root). */
const inode = (snap: Snapshot, rel: string): bigint => statSync(join(snap.root, rel), { bigint: true }).ino;

/** The store's only snapshot, before a recapture adds another. */
function onlySnapshot(store: string): Snapshot {
  const s = SnapshotStore.openSync(store);
  try {
    const [digest] = s.list();
    return s.get(digest!);
  } finally {
    s.closeSync();
  }
}

/** A syscall layer whose linkat fails with `code` for the names `when` picks; counts the calls. */
function refusingLinks(code: string, when: (newpath: string) => boolean): { sys: Sys; calls: () => number } {
  let calls = 0;
  const sys = wrapSys({
    linkat: (orig) => (olddirfd, oldpath, newdirfd, newpath, flags) => {
      calls++;
      if (when(String(newpath))) throw systemError(code, 'linkat');
      orig(olddirfd, oldpath, newdirfd, newpath, flags);
    },
  });
  return { sys, calls: () => calls };
}

describe('stat cache: unchanged files in a new build', () => {
  it('are new names of the stored frozen copy (one inode, mode 0400); the old snapshot can go', () => {
    const { repo, store } = repos.linked!;
    const old = onlySnapshot(store);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: FILES - 1, built: true, reused: false });
    for (const rel of ['copy/tree/b.txt', 'copy/tree/sub/d.bin', 'mounts/00000/payload/pkg/bin.sh']) {
      expect(inode(snap, rel)).toBe(inode(old, rel));
    }
    expect(statSync(join(snap.root, 'copy/tree/b.txt')).mode & 0o7777).toBe(0o400);
    expect(statSync(join(snap.root, 'mounts/00000/payload/pkg/bin.sh')).mode & 0o7777).toBe(0o500);
    expect(inode(snap, 'copy/tree/a.txt')).not.toBe(inode(old, 'copy/tree/a.txt'));
    expect(stored(snap, 'tree/a.txt').toString()).toBe('ALPHA');
    const s = SnapshotStore.openSync(store);
    s.remove(old.digest);
    expect(s.get(snap.digest).verifySync().entries).toBeGreaterThan(FILES);
    const clone = tempDir();
    s.get(snap.digest).materializeSync(clone);
    s.closeSync();
    expect(readFileSync(join(clone, 'tree/sub/c.txt'), 'utf8')).toBe('charlie');
    expect(readFileSync(join(clone, 'tree/sub/d.bin')).equals(Buffer.alloc(70_000, 3))).toBe(true);
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it('stay new names on a filesystem whose listings carry no type (DT_UNKNOWN): publishing freezes directories only, it never copies a linked file', () => {
    const { repo, store } = repos.untyped!;
    const old = onlySnapshot(store);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const untyped = wrapSys({ readdir: (orig) => (fd) => orig(fd).map((e) => ({ ...e, type: 0 })) });
    const snap = capture(store, repo, {}, untyped);
    expect(snap.captureReport).toMatchObject({ reusedFiles: FILES - 1, built: true });
    for (const rel of ['copy/tree/b.txt', 'copy/tree/sub/d.bin', 'mounts/00000/payload/pkg/bin.sh']) expect([rel, inode(snap, rel)]).toEqual([rel, inode(old, rel)]);
  });

  it('going back to an earlier tree reuses its snapshot; the cache lists each snapshot once and, once settled, is not rewritten', async () => {
    const { repo, store } = repos.back!;
    const first = onlySnapshot(store).digest;
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const upper = capture(store, repo, {}, undefined, inTick);
    expect(upper.captureReport).toMatchObject({ built: true, reused: false });
    writeFileSync(join(repo, 'tree/a.txt'), 'alpha');
    const back = capture(store, repo, {}, undefined, inTick);
    expect([back.digest, back.captureReport]).toEqual([first, { files: FILES, reusedFiles: FILES - 1, built: false, reused: true }]);
    expect(cacheDigests(store).sort()).toEqual([first, upper.digest].sort());
    // a.txt, recorded in its write's tick, is hashed once more; after that nothing is.
    expect(capture(store, repo).captureReport).toEqual({ files: FILES, reusedFiles: FILES - 1, built: false, reused: true });
    const before = statSync(cacheFile(store), { bigint: true });
    const bytes = readFileSync(cacheFile(store));
    expect(capture(store, repo).captureReport).toEqual({ files: FILES, reusedFiles: FILES, built: false, reused: true });
    expect(statSync(cacheFile(store), { bigint: true }).ino).toBe(before.ino);
    expect(readFileSync(cacheFile(store)).equals(bytes)).toBe(true);
    expect(cacheDigests(store).sort()).toEqual([first, upper.digest].sort());
  }, 20_000);

  it('a stored copy frozen with another mode is cloned, not linked', () => {
    const { repo, store } = repos.modes!;
    const old = onlySnapshot(store);
    // As a copy root, bin.sh records mode 0 (frozen 0400); its stored copy is the mount's, frozen 0500.
    const snap = capture(store, repo, { copy: ['tree', 'modules'], mounts: [] });
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: FILES, built: true, reused: false });
    expect(statSync(join(snap.root, 'copy/modules/pkg/bin.sh')).mode & 0o7777).toBe(0o400);
    expect(inode(snap, 'copy/modules/pkg/bin.sh')).not.toBe(inode(old, 'mounts/00000/payload/pkg/bin.sh'));
    expect(inode(snap, 'copy/modules/pkg/index.js')).toBe(inode(old, 'mounts/00000/payload/pkg/index.js'));
    expect(readFileSync(join(snap.root, 'copy/modules/pkg/bin.sh'), 'utf8')).toBe('#!/bin/sh\n');
    expect(snap.digest).toBe(fullDigest(repo, { copy: ['tree', 'modules'], mounts: [] }));
    expect(storeLeftovers(store).filter((p) => p.startsWith('tmp/'))).toEqual([]);
  });

  it('a store that refuses links (EPERM) gets clones, and is asked once', () => {
    const { repo, store } = repos.nolink!;
    const old = onlySnapshot(store);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const { sys, calls } = refusingLinks('EPERM', () => true);
    const snap = capture(store, repo, {}, sys);
    expect(calls()).toBe(1);
    expect(snap.captureReport).toEqual({ files: FILES, reusedFiles: FILES - 1, built: true, reused: false });
    expect(inode(snap, 'copy/tree/b.txt')).not.toBe(inode(old, 'copy/tree/b.txt'));
    expect(listTree(join(snap.root, 'copy'))).toEqual(listTree(join(old.root, 'copy')));
    expect(snap.digest).toBe(fullDigest(repo));
  });

  it("a stored copy at its link limit (EMLINK) is cloned; the other files are still linked", () => {
    const { repo, store } = repos.emlink!;
    const old = onlySnapshot(store);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const { sys, calls } = refusingLinks('EMLINK', (name) => name === 'c.txt');
    const snap = capture(store, repo, {}, sys);
    expect(calls()).toBe(FILES - 1);
    expect(inode(snap, 'copy/tree/sub/c.txt')).not.toBe(inode(old, 'copy/tree/sub/c.txt'));
    expect(inode(snap, 'copy/tree/b.txt')).toBe(inode(old, 'copy/tree/b.txt'));
    expect(stored(snap, 'tree/sub/c.txt').toString()).toBe('charlie');
    expect(snap.digest).toBe(fullDigest(repo));
  });
});


/**
 * What a concurrent recapture does to a stored file's inode: linkat into its build, unlinkat
 * when that build is dropped (its digest was published first); until the ctime has moved.
 * Returns how many times.
 */
function linkAndDrop(stored: string, store: string): number {
  const before = statSync(stored, { bigint: true }).ctimeNs;
  const other = join(dirname(store), 'another-build-b.txt');
  let moves = 0;
  do {
    linkSync(stored, other);
    unlinkSync(other);
    moves++;
  } while (statSync(stored, { bigint: true }).ctimeNs === before);
  return moves;
}

describe('stat cache: races through the syscall layer', () => {
  it('a file appended while a deferred capture reads it: SEAL_CHANGED, nothing left behind, the cache untouched', () => {
    const { repo, store } = repos.race!;
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const before = readFileSync(cacheFile(store));
    let done = false;
    const sys = wrapSys({
      pread: (orig) => (fd, buf, off, len, pos) => {
        const n = orig(fd, buf, off, len, pos);
        if (!done && Buffer.from(buf.subarray(off, off + n)).toString().startsWith('ALPHA')) {
          done = true;
          appendFileSync(join(repo, 'tree/a.txt'), '!');
        }
        return n;
      },
    });
    let caught: unknown;
    try {
      capture(store, repo, {}, sys);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SealError);
    expect((caught as SealError).message).toBe('file changed while snapshotting: tree/a.txt');
    expect(storeLeftovers(store).filter((p) => p.startsWith('tmp/'))).toEqual([]);
    expect(readFileSync(cacheFile(store)).equals(before)).toBe(true);
  });

  it("verify while another capture's build gives one of the snapshot's linked files a name and drops it: no drift (the shared inode's ctime moves, not its bytes or mode)", () => {
    const { repo, store } = repos.shared!;
    const old = onlySnapshot(store);
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const snap = capture(store, repo);
    const stored = join(snap.root, 'copy/tree/b.txt');
    expect(inode(snap, 'copy/tree/b.txt')).toBe(inode(old, 'copy/tree/b.txt'));
    const ino = statSync(stored, { bigint: true }).ino;
    let moves = 0;
    const sys = wrapSys({
      pread: (orig) => (fd, buf, off, len, pos) => {
        const n = orig(fd, buf, off, len, pos);
        if (moves === 0 && nativeSys.fstat(fd).ino === ino) moves += linkAndDrop(stored, store);
        return n;
      },
    });
    const s = SnapshotStore.openSync(store, { sys });
    try {
      expect(s.get(snap.digest).verifySync().entries).toBeGreaterThan(0);
    } finally {
      s.closeSync();
    }
    expect(moves).toBeGreaterThan(0);
  });

  it("materialize while another capture's build gives one of the snapshot's linked files a name and drops it: the clone is made", () => {
    const { repo, store } = repos.shared!;
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA!');
    const snap = capture(store, repo);
    const stored = join(snap.root, 'copy/tree/b.txt');
    const ino = statSync(stored, { bigint: true }).ino;
    let looks = 0;
    let moves = 0;
    const sys = wrapSys({
      fstat: (orig) => (fd) => {
        const st = orig(fd);
        // The second look at the stored copy is the one after its bytes were copied.
        if (st.ino !== ino || ++looks !== 2) return st;
        moves += linkAndDrop(stored, store);
        return orig(fd);
      },
    });
    const s = SnapshotStore.openSync(store, { sys });
    const clone = tempDir();
    try {
      expect(s.get(snap.digest).materializeSync(clone).files).toBe(FILES - 2);
    } finally {
      s.closeSync();
    }
    expect(moves).toBeGreaterThan(0);
    expect(readFileSync(join(clone, 'tree/b.txt'), 'utf8')).toBe('bravo');
  });

  it('an entry added to a directory during a deferred walk: SEAL_CHANGED', () => {
    const { repo, store } = repos.race!;
    const sys = afterSubListing(() => writeFileSync(join(repo, 'tree/sub/added'), 'new'));
    expect(() => capture(store, repo, {}, sys)).toThrow('directory changed while snapshotting: tree/sub');
    expect(storeLeftovers(store).filter((p) => p.startsWith('tmp/'))).toEqual([]);
    unlinkSync(join(repo, 'tree/sub/added'));
  });
});

describe('stat cache: two processes capturing the same source at once', () => {
  it('both succeed, with the digest of a full capture, and leave a cache the next capture trusts', async () => {
    const { repo, store } = repos.concurrent!;
    writeFileSync(join(repo, 'tree/a.txt'), 'ALPHA');
    const script = `
      import { SnapshotStore } from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)};
      const out = [];
      for (let i = 0; i < 4; i++) {
        const s = await SnapshotStore.open(process.argv[1]);
        const snap = await s.capture({ source: process.argv[2], ...JSON.parse(process.argv[3]) });
        await snap.verify();
        out.push(snap.digest);
        await s.close();
      }
      console.log(JSON.stringify(out));`;
    const run = promisify(execFile);
    const outs = await Promise.all([0, 1].map(() => run(process.execPath, ['--input-type=module', '-e', script, store, repo, JSON.stringify(DEFINITION)])));
    const digests = new Set(outs.flatMap((o) => JSON.parse(o.stdout) as string[]));
    expect([...digests]).toEqual([fullDigest(repo)]);
    expect(storeLeftovers(store).filter((p) => p.startsWith('tmp/'))).toEqual([]);
    const last = capture(store, repo);
    expect(last.captureReport?.reusedFiles).toBeGreaterThanOrEqual(FILES - 1);
  }, 60_000);
});

describe.each(fsTargets())('stat cache on %s: incremental snapshots', (_name, base) => {
  it('verify passes on every snapshot built incrementally, and each digest equals a full capture', async () => {
    const { repo, store } = makeRepo(base);
    capture(store, repo);
    const steps: (() => void)[] = [
      () => writeFileSync(join(repo, 'tree/a.txt'), 'changed a'),
      () => {
        writeFileSync(join(repo, 'tree/new.txt'), 'new file');
        unlinkSync(join(repo, 'tree/same2'));
      },
      () => renameSync(join(repo, 'tree/sub/deeper'), join(repo, 'tree/sub/moved')),
      () => writeFileSync(join(repo, 'modules/pkg/extra.js'), 'twin'),
      () => appendFileSync(join(repo, 'tree/sub/d.bin'), Buffer.alloc(5000, 9)),
    ];
    for (const step of steps) {
      step();
      const snap = capture(store, repo);
      expect(snap.captureReport!.reusedFiles).toBeGreaterThan(0);
      expect(snap.captureReport!.built).toBe(true);
      expect(snap.digest).toBe(fullDigest(repo));
    }
  }, 60_000);
});

describe('the stat cache clock option (tests only)', () => {
  it('STAT_CLOCK_AHEAD that is not a bigint is a TypeError before the store is made', () => {
    const dir = join(tempDir(), 'store');
    expect(() => SnapshotStore.openSync(dir, { [STAT_CLOCK_AHEAD]: 3000 } as object)).toThrow(
      expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE', message: expect.stringMatching(/^The "options\[STAT_CLOCK_AHEAD\]" property must be of type bigint\. Received type number \(3000\)$/) }),
    );
    expect(readdirSync(dirname(dir))).toEqual([]);
  });
});

describe('gc and stat caches', () => {
  it('removes a cache none of whose snapshots the store holds, keeps one with a live snapshot and what is not a cache of this format (a runner capturing a new arm directory each round grew cache/ without bound)', () => {
    const { repo, store } = makeRepo();
    const root = dirname(store);
    const s = SnapshotStore.openSync(store, SETTLED);
    // Three arm directories, each captured once (a new key each) and then removed with its snapshot, as a harness does.
    const gone: string[] = [];
    for (const name of ['arm1', 'arm2', 'arm3']) {
      const arm = join(root, name);
      writeTree(arm, { 'tree/x': name });
      gone.push(s.captureSync({ source: arm, copy: ['tree'] }).digest);
      rmSync(arm, { recursive: true });
    }
    const kept = s.captureSync({ source: repo, ...DEFINITION });
    const caches = join(store, 'cache');
    // Besides the stat caches, cache/ holds a summary record of each snapshot, which gc drops with the snapshot.
    const listed = (): string[] => readdirSync(caches).filter((n) => !n.endsWith('.summary'));
    const records = (): string[] => readdirSync(caches).filter((n) => n.endsWith('.summary')).map((n) => n.slice(0, 64)).sort();
    expect(records()).toEqual([...gone, kept.digest].sort());
    expect(listed()).toHaveLength(4);
    const keptCache = listed().find((n) => readFileSync(join(caches, n)).toString('hex', 64, 96) === kept.digest)!;
    // Another format's file, a stray name, and a cache torn short of its digests: never touched.
    writeFileSync(join(caches, `${'e'.repeat(64)}.bin`), Buffer.concat([Buffer.from('TSSTATC\0', 'latin1'), Buffer.alloc(56)]));
    writeFileSync(join(caches, 'notes'), 'mine');
    for (const d of gone.slice(0, 2)) s.remove(d);
    expect(s.gc()).toBe(2);
    expect(listed().length).toBe(4);
    expect(listed()).toContain(keptCache);
    s.remove(gone[2]!);
    expect(s.gc()).toBe(1);
    expect(listed().sort()).toEqual([`${'e'.repeat(64)}.bin`, keptCache, 'notes'].sort());
    expect(records()).toEqual([kept.digest]);
    // The kept cache still serves: an unchanged recapture reads nothing.
    expect(s.captureSync({ source: repo, ...DEFINITION }).captureReport).toMatchObject({ files: FILES, reusedFiles: FILES });
    expect(s.gc()).toBe(0);
    s.closeSync();
  });
});
