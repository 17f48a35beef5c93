// args.test.ts: the addon's argument checks: every integer is range-checked before it is converted (no NaN, infinity or
// 2^63 reaches a cast, no fd or flag is truncated), refused with Node's own errors; the stat block is written byte-wise.
import { execFileSync } from 'node:child_process';
import { closeSync, fchmodSync, openSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import * as S from '../../dist/sys/index.js';
import { checkNoFdLeaks, tempDir } from '../helpers.js';

const { sys } = S;
checkNoFdLeaks();

const FD_RANGE = '>= 0 && <= 2147483647';
const SAFE = '>= -9007199254740991 && <= 9007199254740991';

function caught(fn: () => unknown): (Error & { code?: string }) | undefined {
  try {
    fn();
  } catch (err) {
    return err as Error & { code?: string };
  }
  return undefined;
}

/** A RangeError with ERR_OUT_OF_RANGE and exactly Node's message. */
function expectRange(fn: () => unknown, message: string): void {
  const err = caught(fn);
  expect(err).toBeInstanceOf(RangeError);
  expect([err?.code, err?.message]).toEqual(['ERR_OUT_OF_RANGE', message]);
}

/** A TypeError with ERR_INVALID_ARG_TYPE and exactly Node's message. */
function expectType(fn: () => unknown, message: string): void {
  const err = caught(fn);
  expect(err).toBeInstanceOf(TypeError);
  expect([err?.code, err?.message]).toEqual(['ERR_INVALID_ARG_TYPE', message]);
}

const outOfRange = (name: string, must: string, received: string): string => `The value of "${name}" is out of range. It must be ${must}. Received ${received}`;

/** A directory and a file in it, both open, for the calls below; closed after fn. */
function withFiles(fn: (dir: string, dirFd: number, fileFd: number) => void): void {
  const dir = tempDir();
  writeFileSync(join(dir, 'f'), 'content');
  const dirFd = sys.openat(S.AT_FDCWD, dir, S.O_RDONLY | S.O_DIRECTORY);
  const fileFd = sys.openat(dirFd, 'f', S.O_RDWR);
  try {
    fn(dir, dirFd, fileFd);
  } finally {
    sys.close(fileFd);
    sys.close(dirFd);
  }
}

describe('file descriptors are 32-bit ints, never truncated', () => {
  it('fstat(2**32 + 3) is out of range, worded as node:fs words it, rather than a stat of fd 3', () => {
    expectRange(() => sys.fstat(2 ** 32 + 3), outOfRange('fd', FD_RANGE, '4294967299'));
    expectRange(() => sys.fstat(-(2 ** 63)), outOfRange('fd', FD_RANGE, '-9223372036854776000'));
    expectRange(() => sys.fstat(2 ** 31), outOfRange('fd', FD_RANGE, '2147483648'));
    expectRange(() => sys.fstat(-1), outOfRange('fd', FD_RANGE, '-1'));
    expectRange(() => sys.fstat(S.AT_FDCWD), outOfRange('fd', FD_RANGE, '-100'));
    for (const v of [NaN, Infinity, -Infinity, 3.5]) expectRange(() => sys.fstat(v), outOfRange('fd', 'an integer', String(v)));
    expectType(() => sys.fstat('3' as never), `The "fd" argument must be of type number. Received type string ('3')`);
    expectType(() => sys.fstat(3n as never), 'The "fd" argument must be of type number. Received type bigint (3n)');
    expectType(() => sys.fstat(null as never), 'The "fd" argument must be of type number. Received null');
    expectType(() => sys.fstat(undefined as never), 'The "fd" argument must be of type number. Received undefined');
    expectType(() => sys.fstat({} as never), 'The "fd" argument must be of type number. Received an instance of Object');
    expectType(() => sys.fstat(Symbol('s') as never), 'The "fd" argument must be of type number. Received type symbol (Symbol(s))');
    expectType(() => sys.fstat("it's" as never), `The "fd" argument must be of type number. Received type string ("it's")`);
    expectType(() => sys.fstat('x'.repeat(40) as never), `The "fd" argument must be of type number. Received type string ('${'x'.repeat(25)}...')`);
  });

  it('Fd takes the same descriptors as the addon, refused in the same words', () => {
    expectRange(() => new S.Fd(2 ** 32 + 3), outOfRange('fd', FD_RANGE, '4294967299'));
    expectRange(() => S.Fd.borrow(-1), outOfRange('fd', FD_RANGE, '-1'));
    expectRange(() => new S.Fd(1.5), outOfRange('fd', 'an integer', '1.5'));
    expect(S.Fd.borrow(2 ** 31 - 1).fd).toBe(2 ** 31 - 1);
  });

  it('every fd argument of every call is checked; a dirfd also takes AT_FDCWD', () => {
    withFiles((dir, d, f) => {
      const buf = Buffer.alloc(8);
      // [call, the fd argument's name, the call with fd in that argument, a dirfd]
      const calls: [string, string, (fd: number) => unknown, boolean][] = [
        ['openat', 'dirfd', (fd) => sys.openat(fd, 'f', S.O_RDONLY), true],
        ['openat2', 'dirfd', (fd) => sys.openat2(fd, 'f', S.O_RDONLY, 0, 0), true],
        ['close', 'fd', (fd) => sys.close(fd), false],
        ['fstat', 'fd', (fd) => sys.fstat(fd), false],
        ['fstatat', 'dirfd', (fd) => sys.fstatat(fd, 'f', 0), true],
        ['statx', 'dirfd', (fd) => sys.statx(fd, 'f', 0), true],
        ['fstatfs', 'fd', (fd) => sys.fstatfs(fd), false],
        ['readdir', 'fd', (fd) => sys.readdir(fd), false],
        ['mkdirat', 'dirfd', (fd) => sys.mkdirat(fd, 'new', 0o700), true],
        ['unlinkat', 'dirfd', (fd) => sys.unlinkat(fd, 'missing', 0), true],
        ['renameat2 old', 'olddirfd', (fd) => sys.renameat2(fd, 'missing', d, 'g', 0), true],
        ['renameat2 new', 'newdirfd', (fd) => sys.renameat2(d, 'missing', fd, 'g', 0), true],
        ['linkat old', 'olddirfd', (fd) => sys.linkat(fd, 'missing', d, 'g', 0), true],
        ['linkat new', 'newdirfd', (fd) => sys.linkat(d, 'missing', fd, 'g', 0), true],
        ['symlinkat', 'dirfd', (fd) => sys.symlinkat('t', fd, 'f'), true],
        ['readlinkat', 'dirfd', (fd) => sys.readlinkat(fd, 'f'), true],
        ['pread', 'fd', (fd) => sys.pread(fd, buf, 0, 8, 0), false],
        ['pwrite', 'fd', (fd) => sys.pwrite(fd, buf, 0, 0, 0), false],
        ['lseek', 'fd', (fd) => sys.lseek(fd, 0, S.SEEK_CUR), false],
        ['ftruncate', 'fd', (fd) => sys.ftruncate(fd, 7), false],
        ['fsync', 'fd', (fd) => sys.fsync(fd), false],
        ['fdatasync', 'fd', (fd) => sys.fdatasync(fd), false],
        ['sync_file_range', 'fd', (fd) => sys.sync_file_range(fd, 0, 0, S.SYNC_FILE_RANGE_WRITE), false],
        ['syncfs', 'fd', (fd) => sys.syncfs(fd), false],
        ['fchmod', 'fd', (fd) => sys.fchmod(fd, 0o600), false],
        ['fchmodat', 'dirfd', (fd) => sys.fchmodat(fd, 'f', 0o600, 0), true],
        ['fchown', 'fd', (fd) => sys.fchown(fd, 0xffffffff, 0xffffffff), false],
        ['fchownat', 'dirfd', (fd) => sys.fchownat(fd, 'f', 0xffffffff, 0xffffffff, S.AT_SYMLINK_NOFOLLOW), true],
        ['futimens', 'fd', (fd) => sys.futimens(fd, 0, S.UTIME_OMIT, 0, S.UTIME_OMIT), false],
        ['utimensat', 'dirfd', (fd) => sys.utimensat(fd, 'f', 0, S.UTIME_OMIT, 0, S.UTIME_OMIT, 0), true],
        ['flock', 'fd', (fd) => sys.flock(fd, S.LOCK_UN), false],
        ['ficlone dest', 'destfd', (fd) => sys.ficlone(fd, f), false],
        ['ficlone src', 'srcfd', (fd) => sys.ficlone(f, fd), false],
        ['copy_file_range in', 'fdIn', (fd) => sys.copy_file_range(fd, 0, f, 0, 0), false],
        ['copy_file_range out', 'fdOut', (fd) => sys.copy_file_range(f, 0, fd, 0, 0), false],
        // The btrfs ioctls act on a directory fd itself: no AT_FDCWD.
        ['btrfs_subvol_create', 'dirfd', (fd) => sys.btrfs_subvol_create(fd, 'sv'), false],
        ['btrfs_snap_create dir', 'dirfd', (fd) => sys.btrfs_snap_create(fd, 'sv', d, 0), false],
        ['btrfs_snap_create src', 'srcfd', (fd) => sys.btrfs_snap_create(d, 'sv', fd, 0), false],
        ['btrfs_subvol_getflags', 'fd', (fd) => sys.btrfs_subvol_getflags(fd), false],
        ['btrfs_subvol_setflags', 'fd', (fd) => sys.btrfs_subvol_setflags(fd, 0), false],
        ['btrfs_snap_destroy', 'dirfd', (fd) => sys.btrfs_snap_destroy(fd, 'sv'), false],
      ];
      const keys = new Set(calls.map(([key]) => key.split(' ')[0]));
      // close_range takes the kernel's unsigned int bounds (last up to ~0U), not an fd: checked as such; pipe2 takes no fd.
      expect([...keys, 'close_range', 'pipe2'].sort()).toEqual(Object.keys(sys).sort());
      expect(caught(() => sys.pipe2(1.5))?.message).toBe(outOfRange('flags', 'an integer', '1.5'));
      const [r, w] = sys.pipe2(0);
      expect([r, w].every((fd) => Number.isInteger(fd) && fd > 2)).toBe(true);
      sys.close(r);
      sys.close(w);
      expect(caught(() => sys.close_range(-1, 3, 0))?.message).toBe(outOfRange('first', '>= 0 && <= 4294967295', '-1'));
      expect(caught(() => sys.close_range(3, 2 ** 32, 0))?.message).toBe(outOfRange('last', '>= 0 && <= 4294967295', '4294967296'));
      expect(caught(() => sys.close_range(3.5, 4, 0))?.message).toBe(outOfRange('first', 'an integer', '3.5'));
      for (const [key, name, call, dirfd] of calls) {
        const range = dirfd ? `${FD_RANGE} or AT_FDCWD (${S.AT_FDCWD})` : FD_RANGE;
        // 2**32 + fd would be fd after a truncation to int: the very descriptor the call would otherwise use.
        const real = dirfd ? d : f;
        for (const v of [2 ** 32 + real, -(2 ** 32) + real, 2 ** 31, -1, -(2 ** 63), 2 ** 64]) {
          expect([key, caught(() => call(v))?.message]).toEqual([key, outOfRange(name, range, String(v))]);
        }
        for (const v of [NaN, Infinity, 0.5]) expect([key, caught(() => call(v))?.message]).toEqual([key, outOfRange(name, 'an integer', String(v))]);
        expect([key, caught(() => call('3' as never))?.message]).toEqual([key, `The "${name}" argument must be of type number. Received type string ('3')`]);
        if (!dirfd) expect([key, caught(() => call(S.AT_FDCWD))?.message]).toEqual([key, outOfRange(name, range, String(S.AT_FDCWD))]);
      }
      // AT_FDCWD is a directory fd's other value: the path is then taken from the working directory.
      expect(sys.fstatat(S.AT_FDCWD, join(dir, 'f'), 0).size).toBe(7);
      expect(S.isReg(sys.statx(S.AT_FDCWD, join(dir, 'f'), 0).mode)).toBe(true);
      sys.close(sys.openat(S.AT_FDCWD, join(dir, 'f'), S.O_RDONLY));
    });
  });
});

describe('integers are range-checked as doubles before any conversion', () => {
  it('NaN, infinities and fractions are not integers; 2**63 and beyond are out of range, never cast', () => {
    withFiles((_dir, d, f) => {
      for (const v of [NaN, Infinity, -Infinity, 0.5, -1.5]) {
        expectRange(() => sys.lseek(f, v, S.SEEK_SET), outOfRange('offset', 'an integer', String(v)));
        expectRange(() => sys.ftruncate(f, v), outOfRange('length', 'an integer', String(v)));
        expectRange(() => sys.openat(d, 'f', v), outOfRange('flags', 'an integer', String(v)));
      }
      // Numbers past the safe integers (Node's validateInteger bounds), shown as Node shows them.
      expectRange(() => sys.lseek(f, 2 ** 63, S.SEEK_SET), outOfRange('offset', SAFE, '9_223_372_036_854_776_000'));
      expectRange(() => sys.ftruncate(f, -(2 ** 63)), outOfRange('length', SAFE, '-9_223_372_036_854_776_000'));
      // Node groups the digits of what String() gives, exponent and all: 1e+_300.
      expectRange(() => sys.ftruncate(f, 1e300), outOfRange('length', SAFE, '1e+_300'));
      expectRange(() => sys.sync_file_range(f, 2 ** 53, 0, S.SYNC_FILE_RANGE_WRITE), outOfRange('offset', SAFE, '9_007_199_254_740_992'));
      expectRange(() => sys.pread(f, Buffer.alloc(4), 0, 4, 2 ** 64), outOfRange('position', '>= -1 && <= 9007199254740991', '18_446_744_073_709_552_000'));
      expectRange(() => sys.pread(f, Buffer.alloc(4), 0, 4, -2), outOfRange('position', '>= -1 && <= 9007199254740991', '-2'));
      expectRange(() => sys.copy_file_range(f, 0, f, 0, -1), outOfRange('length', '>= 0 && <= 9007199254740991', '-1'));
      expectRange(() => sys.copy_file_range(f, -2, f, 0, 1), outOfRange('offIn', '>= -1 && <= 9007199254740991', '-2'));
      expectRange(() => sys.openat2(d, 'f', S.O_RDONLY, 0, -1), outOfRange('resolve', '>= 0 && <= 9007199254740991', '-1'));
      // Within range, the kernel judges: a negative length or offset is its EINVAL.
      expect(caught(() => sys.ftruncate(f, -1))?.code).toBe('EINVAL');
      expect(sys.lseek(f, 3, S.SEEK_SET)).toBe(3);
      // A bigint is read the same way, within the same range.
      expect(sys.lseek(f, 5n as never, S.SEEK_SET)).toBe(5);
      expectRange(() => sys.lseek(f, (2n ** 63n) as never, S.SEEK_SET), outOfRange('offset', SAFE, '9_223_372_036_854_775_808n'));
      expectType(() => sys.lseek(f, '1' as never, S.SEEK_SET), `The "offset" argument must be one of type number or bigint. Received type string ('1')`);
      expect(statSync(join(_dir, 'f')).size).toBe(7);
    });
  });

  it('flags and modes are the C types they become (int, unsigned, mode_t): no high bits are dropped', () => {
    withFiles((dir, d, f) => {
      const mode = statSync(join(dir, 'f')).mode;
      const INT = '>= -2147483648 && <= 2147483647';
      const UINT = '>= 0 && <= 4294967295';
      // Truncated to 32 bits, each of these would be a valid call that does something.
      expectRange(() => sys.fchmod(f, 2 ** 32 + 0o644), outOfRange('mode', UINT, '4_294_967_716'));
      expectRange(() => sys.fchmod(f, -1), outOfRange('mode', UINT, '-1'));
      expectRange(() => sys.mkdirat(d, 'new', 2 ** 32 + 0o700), outOfRange('mode', UINT, '4_294_967_744'));
      expectRange(() => sys.openat(d, 'f', 2 ** 32 + S.O_RDONLY), outOfRange('flags', INT, '4294967296'));
      expectRange(() => sys.openat(d, 'n', S.O_CREAT | S.O_WRONLY, 2 ** 32 + 0o600), outOfRange('mode', UINT, '4_294_967_680'));
      expectRange(() => sys.unlinkat(d, 'f', 2 ** 31), outOfRange('flags', INT, '2147483648'));
      expectRange(() => sys.renameat2(d, 'f', d, 'g', 2 ** 32 + S.RENAME_NOREPLACE), outOfRange('flags', UINT, '4_294_967_297'));
      expectRange(() => sys.fchmodat(d, 'f', 0o600, 2 ** 32 + 1), outOfRange('flags', INT, '4_294_967_297'));
      expectRange(() => sys.flock(f, 2 ** 32 + S.LOCK_UN), outOfRange('operation', INT, '4_294_967_304'));
      // uid 0 after a truncation: a chown to root.
      expectRange(() => sys.fchown(f, 2 ** 32, 0xffffffff), outOfRange('uid', UINT, '4294967296'));
      expectRange(() => sys.fchown(f, 0xffffffff, -1), outOfRange('gid', UINT, '-1'));
      expectRange(() => sys.utimensat(d, 'f', 0, S.UTIME_OMIT, 0, 0, 2 ** 32 + S.AT_SYMLINK_NOFOLLOW), outOfRange('flags', INT, '4_294_967_552'));
      expectRange(() => sys.lseek(f, 0, 2 ** 32 + S.SEEK_SET), outOfRange('whence', INT, '4294967296'));
      expect(statSync(join(dir, 'f')).mode).toBe(mode);
      expect(caught(() => statSync(join(dir, 'new')))?.code).toBe('ENOENT');
      // The same refusal, word for word, as node:fs gives for the same mode.
      const fd = openSync(join(dir, 'f'), 'r');
      try {
        const node = caught(() => fchmodSync(fd, 2 ** 32 + 0o644));
        expect(caught(() => sys.fchmod(fd, 2 ** 32 + 0o644))?.message).toBe(node?.message);
      } finally {
        closeSync(fd);
      }
    });
  });

  it('a buffer slice must fit the buffer, in node:fs words', () => {
    withFiles((_dir, _d, f) => {
      const buf = Buffer.alloc(4);
      expectRange(() => sys.pread(f, buf, 2, 4, 0), outOfRange('length', '<= 2', '4'));
      expectRange(() => sys.pwrite(f, buf, 5, 0, 0), outOfRange('offset', '>= 0 && <= 4', '5'));
      expectRange(() => sys.pread(f, buf, -1, 1, 0), outOfRange('offset', '>= 0 && <= 9007199254740991', '-1'));
      expectType(() => sys.pread(f, 'abc' as never, 0, 1, 0), `The "buffer" argument must be an instance of Buffer or Uint8Array. Received type string ('abc')`);
      expectType(() => sys.openat(S.AT_FDCWD, 5 as never, 0), 'The "path" argument must be of type string or an instance of Buffer. Received type number (5)');
      expect(sys.pread(f, buf, 1, 3, 0)).toBe(3);
      expect(buf.toString('latin1')).toBe('\0con');
    });
  });
});

describe('times are (seconds, nanoseconds) pairs, each range-checked before it becomes a time_t or a long', () => {
  it('seconds are safe integers, nanoseconds 0 to UTIME_NOW (2^30 - 1); the file keeps its times when one is refused', () => {
    withFiles((dir, d, f) => {
      const NSEC = '>= 0 && <= 1073741823';
      expect([S.UTIME_OMIT, S.UTIME_NOW]).toEqual([2 ** 30 - 2, 2 ** 30 - 1]);
      const mtime = statSync(join(dir, 'f'), { bigint: true }).mtimeNs;
      // Truncated to 32 bits or cast from a double out of range, each of these would set some time.
      expectRange(() => sys.futimens(f, 0, S.UTIME_OMIT, 2 ** 63, 0), outOfRange('mtimeSec', SAFE, '9_223_372_036_854_776_000'));
      expectRange(() => sys.futimens(f, -(2 ** 53), 0, 0, 0), outOfRange('atimeSec', SAFE, '-9_007_199_254_740_992'));
      expectRange(() => sys.futimens(f, 0, 2 ** 32 + 1, 0, 0), outOfRange('atimeNsec', NSEC, '4_294_967_297'));
      expectRange(() => sys.futimens(f, 0, S.UTIME_OMIT, 0, -1), outOfRange('mtimeNsec', NSEC, '-1'));
      expectRange(() => sys.futimens(f, 0, S.UTIME_OMIT, 0, 2 ** 30), outOfRange('mtimeNsec', NSEC, '1073741824'));
      expectRange(() => sys.futimens(f, 0, S.UTIME_OMIT, 1.5, 0), outOfRange('mtimeSec', 'an integer', '1.5'));
      expectRange(() => sys.utimensat(d, 'f', 0, S.UTIME_OMIT, NaN, 0, 0), outOfRange('mtimeSec', 'an integer', 'NaN'));
      expectRange(() => sys.utimensat(d, 'f', 0, S.UTIME_OMIT, 0, Infinity, 0), outOfRange('mtimeNsec', 'an integer', 'Infinity'));
      expectRange(() => sys.utimensat(d, 'f', 0, S.UTIME_OMIT, (2n ** 63n) as never, 0, 0), outOfRange('mtimeSec', SAFE, '9_223_372_036_854_775_808n'));
      expectType(() => sys.futimens(f, 0, S.UTIME_OMIT, '1' as never, 0), `The "mtimeSec" argument must be one of type number or bigint. Received type string ('1')`);
      expectType(() => sys.utimensat(d, 5 as never, 0, S.UTIME_OMIT, 0, 0, 0), 'The "path" argument must be of type string or an instance of Buffer. Received type number (5)');
      expect(statSync(join(dir, 'f'), { bigint: true }).mtimeNs).toBe(mtime);
      // At the bounds, and as bigints, the values are the times set.
      sys.futimens(f, 0, S.UTIME_OMIT, 1_700_000_000n as never, 999_999_999);
      expect(statSync(join(dir, 'f'), { bigint: true }).mtimeNs).toBe(1_700_000_000_999_999_999n);
    });
  });
});

describe('the stat block', () => {
  const require = createRequire(import.meta.url);
  const addon = require('../../build/Release/treeseal.node') as { fstat(fd: number, out: Uint8Array): void };

  it('is written byte-wise: a block at any alignment is filled with the same ten slots', () => {
    withFiles((dir, _d, f) => {
      const st = sys.fstat(f);
      for (const shift of [1, 3, 4, 8]) {
        const bytes = new Uint8Array(new ArrayBuffer(80 + shift), shift, 80);
        addon.fstat(f, bytes);
        const view = new DataView(bytes.buffer, shift, 80);
        const le = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
        const slots = [view.getBigUint64(0, le), view.getBigUint64(8, le), view.getBigInt64(16, le), view.getBigInt64(24, le), ...[32, 40, 48, 56, 64, 72].map((o) => view.getFloat64(o, le))];
        expect(slots).toEqual([st.dev, st.ino, st.mtimeNs, st.ctimeNs, st.mode, st.nlink, st.uid, st.gid, st.size, st.blocks]);
      }
      const ref = statSync(join(dir, 'f'), { bigint: true });
      expect([st.dev, st.ino, st.mtimeNs, st.ctimeNs, st.size]).toEqual([ref.dev, ref.ino, ref.mtimeNs, ref.ctimeNs, 7]);
      expectRange(() => addon.fstat(f, new Uint8Array(79)), outOfRange('out.byteLength', '>= 80', '79'));
    });
  });

  it('fstatat_each fills one block per name, each at its offset, and returns the names that failed; its names and its block are checked', () => {
    const each = addon as unknown as { fstatat_each(dirfd: number, names: string, flags: number, out: Uint8Array): [number, number][] };
    withFiles((dir, d) => {
      writeFileSync(join(dir, 'g'), 'longer content');
      const out = new Uint8Array(240);
      expect(each.fstatat_each(d, 'f/nope/g', S.AT_SYMLINK_NOFOLLOW, out)).toEqual([[1, 2]]);
      const view = new DataView(out.buffer);
      const le = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
      expect([view.getBigUint64(8, le), view.getFloat64(64, le), view.getFloat64(160 + 64, le)]).toEqual([statSync(join(dir, 'f'), { bigint: true }).ino, 7, 14]);
      expect(out.subarray(80, 160).every((b) => b === 0)).toBe(true);
      expectRange(() => each.fstatat_each(d, 'f/g', 0, new Uint8Array(159)), outOfRange('out.byteLength', '>= 160', '159'));
      for (const [names, message] of [
        ['f//g', "The argument 'names' must not hold an empty name"],
        ['f\u0000g', "The argument 'names' must be a string or Uint8Array without null bytes"],
      ] as const) {
        const err = caught(() => each.fstatat_each(d, names, 0, out));
        expect(err).toBeInstanceOf(TypeError);
        expect([err?.code, err?.message]).toEqual(['ERR_INVALID_ARG_VALUE', message]);
      }
      expect(each.fstatat_each(d, '', 0, new Uint8Array(0))).toEqual([]);
    });
  });

  it('a time past int64 nanoseconds (after 2262, before 1677) is held at ±(2^63 - 1) by fstat, fstatat and fstatat_each; the ctime stays the kernel\'s', () => {
    const dir = tempDir('/dev/shm');
    const path = join(dir, 'far');
    writeFileSync(path, 'x');
    utimesSync(path, 1e10, 1e10); // the year 2286: 10^19 ns
    expect(statSync(path, { bigint: true }).mtimeNs).toBe(10n ** 19n);
    const bound = 2n ** 63n - 1n;
    const d = sys.openat(S.AT_FDCWD, dir, S.O_RDONLY | S.O_DIRECTORY);
    try {
      const st = sys.fstatat(d, 'far', S.AT_SYMLINK_NOFOLLOW);
      expect(st.mtimeNs).toBe(bound);
      expect(st.ctimeNs).toBe(statSync(path, { bigint: true }).ctimeNs);
      const each = S.fstatatEach(sys, d, ['far', 'far'], S.AT_SYMLINK_NOFOLLOW);
      expect(each.map((e) => (e as S.Stat).mtimeNs)).toEqual([bound, bound]);
      const fd = sys.openat(d, 'far', S.O_RDONLY);
      try {
        expect(sys.fstat(fd).mtimeNs).toBe(bound);
        // Node's utimes takes a negative time for now: touch sets these.
        execFileSync('touch', ['-d', '1653-01-01 UTC', path]);
        expect(sys.fstat(fd).mtimeNs).toBe(-bound);
        execFileSync('touch', ['-d', '1678-01-01 UTC', path]); // fits
        expect(sys.fstat(fd).mtimeNs).toBe(-9214560000n * 10n ** 9n);
        utimesSync(path, 1e9, 1e9);
        expect(sys.fstat(fd).mtimeNs).toBe(10n ** 18n);
      } finally {
        sys.close(fd);
      }
    } finally {
      sys.close(d);
    }
  });
});
