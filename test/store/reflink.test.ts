// reflink.test.ts: FICLONE for real on XFS and btrfs loop mounts (required when CI=true).
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import * as S from '../../dist/sys/index.js';
import { checkNoFdLeaks, reflinkMount, tempDir } from '../helpers.js';

checkNoFdLeaks();

for (const kind of ['xfs', 'btrfs'] as const) {
  const mount = reflinkMount(kind);
  describe.skipIf(mount === undefined)(`ficlone on ${kind}`, () => {
    it('clones: equal bytes, a different inode, writes to the clone not seen in the source', () => {
      const dir = tempDir(mount);
      const payload = Buffer.alloc(3 * 1024 * 1024 + 17, 7);
      payload.write('head');
      writeFileSync(join(dir, 'src'), payload);
      const src = S.sys.openat(S.AT_FDCWD, join(dir, 'src'), S.O_RDONLY);
      const dst = S.sys.openat(S.AT_FDCWD, join(dir, 'dst'), S.O_RDWR | S.O_CREAT | S.O_EXCL, 0o600);
      try {
        expect(S.sys.ficlone(dst, src)).toBe(true);
        expect(Buffer.compare(readFileSync(join(dir, 'dst')), payload)).toBe(0);
        expect(statSync(join(dir, 'dst')).ino).not.toBe(statSync(join(dir, 'src')).ino);
        S.sys.pwrite(dst, Buffer.from('CLONE'), 0, 5, 0);
        expect(readFileSync(join(dir, 'src')).subarray(0, 4).toString()).toBe('head');
        expect(readFileSync(join(dir, 'dst')).subarray(0, 5).toString()).toBe('CLONE');
      } finally {
        S.sys.close(src);
        S.sys.close(dst);
      }
    });

    it('is false across filesystems and throws EBADF on a bad fd', () => {
      const other = tempDir();
      writeFileSync(join(other, 'src'), 'abc');
      const src = S.sys.openat(S.AT_FDCWD, join(other, 'src'), S.O_RDONLY);
      const dst = S.sys.openat(S.AT_FDCWD, join(tempDir(mount), 'dst'), S.O_RDWR | S.O_CREAT | S.O_EXCL, 0o600);
      try {
        expect(S.sys.ficlone(dst, src)).toBe(false);
        expect(() => S.sys.ficlone(dst, 99999)).toThrow(expect.objectContaining({ code: 'EBADF', syscall: 'ficlone' }));
      } finally {
        S.sys.close(src);
        S.sys.close(dst);
      }
    });
  });
}
