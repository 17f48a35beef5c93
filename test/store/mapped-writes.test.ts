// mapped-writes.test.ts: a write through a shared mapping moves no time on tmpfs; diff, reset and the arm's capture still see it there, and trust the ledger where it moves the ctime.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Snapshot, SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, reflinkMount, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/** What an agent does: maps the file shared, reads its first page (the fault that maps it), then writes through the mapping. */
function writeThroughMapping(path: string, bytes: string): void {
  execFileSync('python3', [
    '-c',
    'import mmap, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR)\nm = mmap.mmap(fd, 0)\nm[0]\nb = sys.argv[2].encode()\nm[0:len(b)] = b\nm.close()\nos.close(fd)',
    path,
    bytes,
  ]);
}

/** Whether the filesystem holding dir writes pages back (not tmpfs or ramfs, where a mapped write moves no time at all). */
function writesBack(dir: string): boolean {
  const fsType = execFileSync('stat', ['-f', '-c', '%T', dir], { encoding: 'utf8' }).trim();
  return fsType !== 'tmpfs' && fsType !== 'ramfs';
}

function arm(base: string): { work: string; store: SnapshotStore; clone: string; digest: string } {
  const work = tempDir(base);
  writeTree(join(work, 'repo'), { 'src/a.ts': 'export const a = 1;\n', 'src/b.ts': 'export const b = 2;\n' });
  const store = SnapshotStore.openSync(join(work, 'store'));
  const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
  const clone = join(work, 'clone');
  mkdirSync(clone);
  snap.materializeSync(clone);
  return { work, store, clone, digest: snap.digest };
}

/** An overlay whose layers are all on tmpfs (bwrap --tmp-overlay, a live image): its merged directory, unmounted by the caller. */
function overlayOnTmpfs(): string {
  const base = tempDir('/dev/shm');
  for (const d of ['lower', 'upper', 'work', 'merged']) mkdirSync(join(base, d));
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${base}/lower,upperdir=${base}/upper,workdir=${base}/work`, join(base, 'merged')]);
  return join(base, 'merged');
}

describe('a write through a shared mapping', () => {
  const places: [string, () => string, (() => void)?][] = [['tmpfs', () => '/dev/shm']];
  if (process.getuid!() === 0) {
    let merged = '';
    // An overlay's files are its upper layer's: on tmpfs, no time moves either (its statfs says overlay, not tmpfs).
    places.push(['an overlay over tmpfs', () => (merged = overlayOnTmpfs()), () => execFileSync('umount', [merged])]);
  }
  for (const [name, base, after] of places) it(`on ${name} (no time moves): diff names it, reset restores it, the arm's capture reads it (kills trusting the ledger's identity where nothing writes back)`, () => {
    try {
      mappedWriteSeen(base());
    } finally {
      after?.();
    }
  });

  function mappedWriteSeen(base: string): void {
    const { work, store, clone, digest } = arm(base);
    const path = join(clone, 'src/a.ts');
    const before = statSync(path, { bigint: true });
    writeThroughMapping(path, 'BACKDOOR');
    const after = statSync(path, { bigint: true });
    // The premise: tmpfs moved neither time, and the size is the same.
    expect([after.mtimeNs, after.ctimeNs, after.size, after.ino]).toEqual([before.mtimeNs, before.ctimeNs, before.size, before.ino]);
    expect(readFileSync(path, 'utf8')).toBe('BACKDOORonst a = 1;\n');

    const snap = store.get(digest);
    const diff = snap.diffSync(clone);
    expect(diff).toMatchObject({ ok: false, method: 'ledger', added: [], removed: [], changed: ['src/a.ts'], files: 2 });

    // The arm's result as a capture that trusts nothing records it.
    const captured = store.captureSync({ source: clone, copy: ['src'] });
    const full = SnapshotStore.openSync(join(work, 'full'));
    const truth = full.captureSync({ source: clone, copy: ['src'], statCache: false });
    expect(captured.digest).toBe(truth.digest);
    expect(captured.digest).not.toBe(digest);
    expect(captured.captureReport).toMatchObject({ files: 2, reusedFiles: 0 });

    const reset = snap.resetSync(clone);
    expect(reset).toMatchObject({ method: 'reset', changed: ['src/a.ts'], added: [], removed: [] });
    expect(readFileSync(path, 'utf8')).toBe('export const a = 1;\n');
    expect(snap.checkCloneSync(clone).ok).toBe(true);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, changed: [] });
    full.closeSync();
    store.closeSync();
  }

  it('on a filesystem that writes back (here the temp dir): the write fault moves the ctime, and diff finds it without hashing', () => {
    const base = tempDir();
    if (!writesBack(base)) return;
    const { store, clone, digest } = arm(base);
    const path = join(clone, 'src/a.ts');
    const before = statSync(path, { bigint: true });
    writeThroughMapping(path, 'BACKDOOR');
    expect(statSync(path, { bigint: true }).ctimeNs).not.toBe(before.ctimeNs);
    expect(store.get(digest).diffSync(clone)).toMatchObject({ ok: false, method: 'ledger', changed: ['src/a.ts'], files: 0 });
    store.closeSync();
  });
});

/** Blocks this thread until `file` exists (for up to 10 s). */
function waitFor(file: string): void {
  const end = Date.now() + 10_000;
  const word = new Int32Array(new SharedArrayBuffer(4));
  while (!existsSync(file)) {
    if (Date.now() > end) throw new Error(`${file} did not appear`);
    Atomics.wait(word, 0, 0, 2);
  }
}

/**
 * An agent still running in the clone: once `go1` exists it maps `path` shared and writes its
 * first byte back as it is (argv 3 `same`: the write fault stamps the times now, and leaves
 * the page dirty and writable) or as `Y`, says `ready`, and once `go2` exists writes `X`
 * through that page.
 */
const LINGERING_AGENT = `
import mmap, os, sys, time
path, work = sys.argv[1], sys.argv[2]
def wait(name):
    while not os.path.exists(os.path.join(work, name)):
        time.sleep(0.002)
wait('go1')
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0] = m[0] if sys.argv[3] == 'same' else ord('Y')
open(os.path.join(work, 'ready'), 'w').close()
wait('go2')
m[0] = ord('X')
open(os.path.join(work, 'done'), 'w').close()
`;

describe('a process that maps a file while reset writes it', () => {
  // Where the agent maps the restored file and faults its page writable: once the copy wrote its bytes, once FICLONE shared
  // the snapshot's extents (a reflinked file has pages of its own once mapped), and right after reset's writeback (before the
  // identity is recorded: the fault moves the ctime, and the file must then go unrecorded).
  const cases: [string, () => string | undefined, 'never' | 'always', 'pwrite' | 'ficlone' | 'sync_file_range', 'same' | 'other'][] = [
    ['copied, mapped as its bytes went in', () => tempDir(), 'never', 'pwrite', 'same'],
    ['copied, mapped and written as its bytes went in (before its identity is recorded)', () => tempDir(), 'never', 'pwrite', 'other'],
    ['reflinked on XFS, mapped once cloned', () => (reflinkMount('xfs') === undefined ? undefined : tempDir(reflinkMount('xfs'))), 'always', 'ficlone', 'same'],
    ['copied, mapped right after the read-back wrote it back', () => tempDir(), 'never', 'sync_file_range', 'same'],
  ];
  for (const [what, baseOf, reflink, hooked, first] of cases) {
    it(`${what}: its later write through that page is seen by diff, an arm's capture and the next reset (kills recording without writeback, or without looking again)`, () => {
      const base = baseOf();
      if (base === undefined) return;
      if (!writesBack(base)) return;
      const { work, store, clone, digest } = arm(base);
      const path = join(clone, 'src/a.ts');
      writeFileSync(path, 'the agent changed this\n');
      const agent = spawn('python3', ['-c', LINGERING_AGENT, path, work, first], { stdio: 'ignore' });
      try {
        let fired = false;
        const agentMaps = (fd: number): void => {
          if (fired || readlinkSync(`/proc/self/fd/${fd}`) !== path) return;
          fired = true;
          writeFileSync(join(work, 'go1'), '');
          waitFor(join(work, 'ready'));
        };
        const sys = wrapSys({
          pwrite: (orig) => (fd, ...rest) => {
            const n = orig(fd, ...rest);
            if (hooked === 'pwrite') agentMaps(fd);
            return n;
          },
          ficlone: (orig) => (dest, src) => {
            const cloned = orig(dest, src);
            if (hooked === 'ficlone') agentMaps(dest);
            return cloned;
          },
          sync_file_range: (orig) => (fd, ...rest) => {
            orig(fd, ...rest);
            if (hooked === 'sync_file_range') agentMaps(fd);
          },
        });
        const stored = store.get(digest);
        const snap = new Snapshot(stored.root, stored.toJSON(), { sys });
        expect(snap.resetSync(clone, { reflink })).toMatchObject({ method: 'reset', changed: ['src/a.ts'] });
        expect(fired).toBe(true);
        expect(readFileSync(path, 'utf8')).toBe(first === 'same' ? 'export const a = 1;\n' : 'Yxport const a = 1;\n');
        writeFileSync(join(work, 'go2'), '');
        waitFor(join(work, 'done'));
        expect(readFileSync(path, 'utf8')).toBe('Xxport const a = 1;\n');
        expect(stored.diffSync(clone)).toMatchObject({ ok: false, method: 'ledger', changed: ['src/a.ts'] });
        const captured = store.captureSync({ source: clone, copy: ['src'] });
        expect(captured.captureReport).toMatchObject({ files: 2, reusedFiles: 1 });
        expect(captured.digest).not.toBe(digest);
        expect(stored.resetSync(clone)).toMatchObject({ changed: ['src/a.ts'] });
        expect(stored.checkCloneSync(clone).ok).toBe(true);
      } finally {
        agent.kill();
        store.closeSync();
      }
    });
  }

  it('a whole materialize into an arm (emptied or not) or a directory holding anything records its files unverified: diff hashes them until a reset reads them back (written back first); into one it made, or an empty one that was never an arm, it trusts them', () => {
    const base = tempDir();
    if (!writesBack(base)) return;
    const { work, store, digest } = arm(base);
    let written = 0;
    // sync_file_range, or fdatasync where the temp dir is on overlayfs (a container's).
    const sys = wrapSys({ sync_file_range: (orig) => (...args) => (written++, orig(...args)), fdatasync: (orig) => (fd) => (written++, orig(fd)) });
    const stored = store.get(digest);
    const snap = new Snapshot(stored.root, stored.toJSON(), { sys });
    const made = join(work, 'made');
    const empty = join(work, 'empty');
    const used = join(work, 'used');
    mkdirSync(empty);
    mkdirSync(used);
    writeFileSync(join(used, 'notes.txt'), 'left here\n');
    const emptied = join(work, 'clone');
    rmSync(join(emptied, 'src'), { recursive: true });
    const cases: [string, string, boolean, number][] = [
      ['made by the call', made, true, 0],
      ['an empty directory never an arm', empty, false, 0],
      ['an arm emptied (by an agent that may still be waiting in it)', emptied, false, 2],
      ['a directory holding a file', used, false, 2],
    ];
    for (const [what, clone, create, hashed] of cases) {
      snap.materializeSync(clone, { createClone: create, reflink: 'never' });
      expect([what, snap.diffSync(clone)]).toMatchObject([what, { ok: true, method: 'ledger', files: hashed }]);
      // A reset reads the unverified ones back, each written back first, and records them trusted.
      written = 0;
      expect([what, snap.resetSync(clone)]).toMatchObject([what, { changed: [], added: [], removed: [] }]);
      expect([what, written]).toEqual([what, hashed]);
      expect([what, snap.diffSync(clone)]).toMatchObject([what, { ok: true, method: 'ledger', files: 0 }]);
    }
    store.closeSync();
  });
});

describe('a whole materialize into a directory holding anything', () => {
  it('leaves a file copy root unverified too (recorded again once swapped in, it was trusted)', () => {
    const base = tempDir();
    if (!writesBack(base)) return;
    writeTree(join(base, 'repo'), { README: 'read me\n', 'src/a.ts': 'export const a = 1;\n' });
    const store = SnapshotStore.openSync(join(base, 'store'));
    const snap = store.captureSync({ source: join(base, 'repo'), copy: ['README', 'src'] });
    const clone = join(base, 'clone');
    mkdirSync(clone);
    writeFileSync(join(clone, 'notes.txt'), 'left here\n');
    snap.materializeSync(clone);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger', files: 2 });
    snap.resetSync(clone);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger', files: 0 });
    store.closeSync();
  });
});

describe('racy records', () => {
  it("the ledger is written in a later clock tick than every file it records: while its mtime is not past their ctimes it is touched again (kills stampPast)", () => {
    const work = tempDir();
    writeTree(join(work, 'repo'), { 'src/a.ts': 'export const a = 1;\n' });
    // The new ledger file's first two fstats say its write fell in an old tick, as a coarse clock can: 10 s back, not 0
    // (a ledger that took its newest ctime for 0 would then stop at once: this kills newestCtimeNs's loop).
    const ledgerFds = new Set<number>();
    let held = 0;
    let touched = 0;
    const sys = wrapSys({
      openat: (orig) => (dirfd, path, flags, mode) => {
        const fd = orig(dirfd, path, flags, mode);
        if (String(path).startsWith('build-clones-')) ledgerFds.add(fd);
        return fd;
      },
      fstat: (orig) => (fd) => {
        const st = orig(fd);
        return ledgerFds.has(fd) && held++ < 2 ? { ...st, mtimeNs: st.mtimeNs - 10_000_000_000n } : st;
      },
      futimens: (orig) => (fd, ...rest) => {
        if (ledgerFds.has(fd)) touched++;
        return orig(fd, ...rest);
      },
    });
    const store = SnapshotStore.openSync(join(work, 'store'), { sys });
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
    const clone = join(work, 'clone');
    mkdirSync(clone);
    snap.materializeSync(clone);
    expect([held, touched]).toEqual([3, 2]);
    const name = readdirSync(join(store.root, 'clones')).find((n) => n.endsWith('.ledger'))!;
    const recorded = statSync(join(store.root, 'clones', name), { bigint: true }).mtimeNs;
    for (const rel of ['src', 'src/a.ts']) expect(statSync(join(clone, rel), { bigint: true }).ctimeNs).toBeLessThan(recorded);
    store.closeSync();
  });

  it('a record as new as the ledger is hashed, not trusted: diff and reset check its bytes, the arm capture reads it (kills trustsBytes ignoring recordedNs)', () => {
    const { work, store, clone, digest } = arm(tempDir());
    // As if the ledger had been written in the same tick as the files: its mtime moved back before theirs.
    const ledger = join(store.root, 'clones', readdirSync(join(store.root, 'clones')).find((n) => n.endsWith('.ledger'))!);
    utimesSync(ledger, new Date('2001-01-01'), new Date('2001-01-01'));
    const snap = store.get(digest);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true, method: 'ledger', files: 2 });
    expect(snap.resetSync(clone)).toMatchObject({ method: 'reset', changed: [], added: [], removed: [] });
    // reset wrote a new ledger: moved back again.
    utimesSync(ledger, new Date('2001-01-01'), new Date('2001-01-01'));
    const again = SnapshotStore.openSync(join(work, 'store'));
    expect(again.captureSync({ source: clone, copy: ['src'] }).captureReport).toMatchObject({ files: 2, reusedFiles: 0 });
    again.closeSync();
    store.closeSync();
  });
});
