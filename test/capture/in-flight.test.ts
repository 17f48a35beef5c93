// in-flight.test.ts: a write already running when a file is first examined (its timestamps set before the fstat) is caught on filesystems without reflink.
import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import type { Stat, Sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, storeLeftovers, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/**
 * The syscall layer a write in flight looks like: every stat of the file shows what the
 * first one showed (its timestamps were set when the write began), while the rest of the
 * write lands right after the first copy or read of its bytes.
 */
function inFlight(path: string, rest: Buffer): Sys {
  const ino = statSync(path).ino;
  let first: Stat | undefined;
  let landed = false;
  const hide = (st: Stat): Stat => {
    if (st.ino !== BigInt(ino)) return st;
    first ??= st;
    return first;
  };
  const land = (): void => {
    if (landed) return;
    landed = true;
    writeFileSync(path, rest);
  };
  return wrapSys({
    fstatat: (orig) => (dirfd, name, flags) => hide(orig(dirfd, name, flags)),
    fstat: (orig) => (fd) => hide(orig(fd)),
    copy_file_range: (orig) => (...args) => {
      const n = orig(...args);
      land();
      return n;
    },
    pread: (orig) => (fd, buffer, offset, length, position) => {
      const n = orig(fd, buffer, offset, length, position);
      if (n > 0) land();
      return n;
    },
  });
}

describe('a write in flight at the first fstat', () => {
  it('is SEAL_CHANGED once it is over (the source no longer hashes to what was copied), nothing left behind', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': Buffer.alloc(256 * 1024, 0x41) });
    const path = join(root, 'repo/tree/f');
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys: inFlight(path, Buffer.alloc(256 * 1024, 0x42)) });
    expectError(() => store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false }), {
      code: 'SEAL_CHANGED',
      message: 'file changed while snapshotting: tree/f',
      path: 'tree/f',
    });
    expect(storeLeftovers(join(root, 'store'))).toEqual([]);
    store.closeSync();
  });

  it('a file last changed outside the window is captured with no second look', () => {
    const root = tempDir();
    writeTree(root, { 'repo/tree/f': 'settled' });
    const start = Date.now();
    while (Date.now() - start < 400) {
      // let the file age past the in-flight window
    }
    let preads = 0;
    const sys = wrapSys({
      pread: (orig) => (...args) => {
        preads++;
        return orig(...args);
      },
    });
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys });
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['tree'], parallelism: 0, statCache: false });
    expect(snap.entries.map((e) => [e.path, e.size])).toEqual([['tree', 0], ['tree/f', 7]]);
    expect(preads).toBe(1);
    store.closeSync();
  });
});
