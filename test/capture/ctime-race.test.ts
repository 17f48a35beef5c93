// ctime-race.test.ts: a change only the ctime shows (same size, mtime put back) made while a file is read is still caught:
// the identity a capture compares around a read includes ctime (src/sys/identity.ts: sameIdentity).
import { closeSync, mkdirSync, openSync, statSync, utimesSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, storeLeftovers, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

const MiB = 1 << 20;
/** A whole second (ns timestamps put back through utimes stay exact). */
const WHOLE_SECOND = 1_600_000_000;
/** src/base/in-flight.ts: IN_FLIGHT_WINDOW_NS. */
const IN_FLIGHT_WINDOW_MS = 250;

it('a same-size rewrite with mtime put back during the read is SEAL_CHANGED (kills the ctimeNs comparison of sameIdentity replaced by true)', async () => {
  const root = tempDir();
  const repo = join(root, 'repo');
  mkdirSync(repo);
  const big = join(repo, 'tree/big');
  writeTree(repo, { 'tree/big': Buffer.alloc(3 * MiB, 7) });
  utimesSync(big, WHOLE_SECOND, WHOLE_SECOND);
  const before = statSync(big, { bigint: true });
  // Older than the in-flight window (the ctime cannot be set back), so no second read after it proves the bytes: only the identity can.
  await new Promise((r) => setTimeout(r, 2 * IN_FLIGHT_WINDOW_MS));
  let rewritten = false;
  // Right after the first 1 MiB chunk is read: new bytes in the part not read yet, size and times as they were.
  const sys = wrapSys({
    pread: (orig) => (fd, buf, off, len, pos) => {
      const n = orig(fd, buf, off, len, pos);
      if (!rewritten) {
        rewritten = true;
        const w = openSync(big, 'r+');
        writeSync(w, Buffer.alloc(MiB, 0x41), 0, MiB, 2 * MiB);
        closeSync(w);
        utimesSync(big, WHOLE_SECOND, WHOLE_SECOND);
      }
      return n;
    },
  });
  const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true, sys });
  expectError(() => store.captureSync({ source: repo, copy: ['tree'] }), { code: 'SEAL_CHANGED', message: 'file changed while snapshotting: tree/big', path: 'tree/big' });
  expect(rewritten).toBe(true);
  // Only the ctime tells the two versions apart.
  const after = statSync(big, { bigint: true });
  expect([after.dev, after.ino, after.mode, after.size, after.mtimeNs]).toEqual([before.dev, before.ino, before.mode, before.size, before.mtimeNs]);
  expect(after.ctimeNs).not.toBe(before.ctimeNs);
  expect(storeLeftovers(store.root)).toEqual([]);
  store.closeSync();
});
