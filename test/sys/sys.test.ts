// sys.test.ts: every native primitive: one success and at least one real failure each, and no fd leaks.
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, mkdirSync, readFileSync, lstatSync, readlinkSync, statSync, symlinkSync, utimesSync, writeFileSync, existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';

import * as S from '../../dist/sys/index.js';
import { checkNoFdLeaks, mkfifo, tempDir } from '../helpers.js';

const { sys } = S;
checkNoFdLeaks();

function openDir(path: string): number {
  return sys.openat(S.AT_FDCWD, path, S.O_RDONLY | S.O_DIRECTORY | S.O_NOFOLLOW);
}

function withDir<T>(path: string, fn: (fd: number) => T): T {
  const fd = openDir(path);
  try {
    return fn(fd);
  } finally {
    sys.close(fd);
  }
}

function expectSysError(fn: () => unknown, code: string, syscall: string, path?: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(Error);
  const err = caught as S.SystemError;
  expect(err.code).toBe(code);
  expect(err.syscall).toBe(syscall);
  expect(err.errno).toBeLessThan(0);
  if (path !== undefined) {
    expect(err.path).toBe(path);
    expect(err.message).toMatch(new RegExp(`^${code}: [a-z].*, ${syscall} '${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}'`));
  }
}

describe('errors', () => {
  it('are Node-shaped system errors', () => {
    const dir = tempDir();
    symlinkSync('nowhere', join(dir, 'link'));
    withDir(dir, (fd) => {
      let err: S.SystemError | undefined;
      try {
        sys.openat(fd, 'link', S.O_RDONLY | S.O_NOFOLLOW);
      } catch (e) {
        err = e as S.SystemError;
      }
      // libuv's wording, exactly as node:fs reports the same failure.
      expect(err?.message).toBe("ELOOP: too many symbolic links encountered, openat 'link'");
      expect(err?.errno).toBe(-40);
      expect(S.isSystemError(err)).toBe(true);
      expect(S.hasCode(err, 'ELOOP')).toBe(true);
    });
  });

  it('refuses NUL bytes and wrong argument types with Node codes', () => {
    expect(() => sys.openat(S.AT_FDCWD, 'a\0b', 0)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE' }));
    expect(() => sys.openat(S.AT_FDCWD, 5 as never, 0)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    expect(() => sys.pread(0, Buffer.alloc(4), 2, 4, 0)).toThrow(expect.objectContaining({ code: 'ERR_OUT_OF_RANGE' }));
    expect(() => sys.pread(0, Buffer.alloc(4), 2, 4, 0)).toThrow(RangeError);
    expect(() => sys.openat(S.AT_FDCWD, 5 as never, 0)).toThrow(TypeError);
  });

  it('read like node:fs: the same code, message and errno for the same failure', async () => {
    const { openSync } = await import('node:fs');
    const dir = tempDir();
    symlinkSync('nowhere', join(dir, 'link'));
    let mine: S.SystemError | undefined;
    let node: S.SystemError | undefined;
    try {
      sys.openat(S.AT_FDCWD, join(dir, 'missing'), S.O_RDONLY);
    } catch (e) {
      mine = e as S.SystemError;
    }
    try {
      openSync(join(dir, 'missing'), 'r');
    } catch (e) {
      node = e as S.SystemError;
    }
    expect([mine?.code, mine?.errno, mine?.message.replace(', openat ', ', open ')]).toEqual([node?.code, node?.errno, node?.message]);
  });

  it('every key of sys that can fail throws with err.syscall equal to the key', () => {
    const dir = tempDir();
    const bad = 999_999;
    const buf = Buffer.alloc(4);
    const calls: { [K in keyof S.Sys]: () => unknown } = {
      openat: () => sys.openat(S.AT_FDCWD, join(dir, 'missing'), S.O_RDONLY),
      openat2: () => sys.openat2(bad, 'x', S.O_RDONLY, 0, 0),
      close: () => sys.close(bad),
      // first > last: EINVAL
      close_range: () => sys.close_range(5, 3, 0),
      // a flag pipe2 does not take: EINVAL
      pipe2: () => sys.pipe2(0x40000000),
      fstat: () => sys.fstat(bad),
      fstatat: () => sys.fstatat(bad, 'x', 0),
      statx: () => sys.statx(bad, 'x', 0),
      fstatfs: () => sys.fstatfs(bad),
      readdir: () => sys.readdir(bad),
      mkdirat: () => sys.mkdirat(bad, 'x', 0o700),
      unlinkat: () => sys.unlinkat(bad, 'x', 0),
      renameat2: () => sys.renameat2(bad, 'x', bad, 'y', 0),
      linkat: () => sys.linkat(bad, 'x', bad, 'y', 0),
      symlinkat: () => sys.symlinkat('t', bad, 'x'),
      readlinkat: () => sys.readlinkat(bad, 'x'),
      pread: () => sys.pread(bad, buf, 0, 4, -1),
      pwrite: () => sys.pwrite(bad, buf, 0, 4, 0),
      lseek: () => sys.lseek(bad, 0, S.SEEK_SET),
      ftruncate: () => sys.ftruncate(bad, 0),
      fsync: () => sys.fsync(bad),
      fdatasync: () => sys.fdatasync(bad),
      sync_file_range: () => sys.sync_file_range(bad, 0, 0, S.SYNC_FILE_RANGE_WRITE),
      syncfs: () => sys.syncfs(bad),
      fchmod: () => sys.fchmod(bad, 0o600),
      fchmodat: () => sys.fchmodat(bad, 'x', 0o600, 0),
      fchown: () => sys.fchown(bad, 0xffffffff, 0xffffffff),
      fchownat: () => sys.fchownat(bad, 'x', 0xffffffff, 0xffffffff, 0),
      futimens: () => sys.futimens(bad, 0, S.UTIME_OMIT, 0, 0),
      utimensat: () => sys.utimensat(bad, 'x', 0, S.UTIME_OMIT, 0, 0, 0),
      flock: () => sys.flock(bad, S.LOCK_SH),
      ficlone: () => sys.ficlone(bad, bad),
      copy_file_range: () => sys.copy_file_range(bad, -1, bad, -1, 4),
      btrfs_subvol_create: () => sys.btrfs_subvol_create(bad, 'x'),
      btrfs_snap_create: () => sys.btrfs_snap_create(bad, 'x', bad, 0),
      btrfs_subvol_getflags: () => sys.btrfs_subvol_getflags(bad),
      btrfs_subvol_setflags: () => sys.btrfs_subvol_setflags(bad, 0),
      btrfs_snap_destroy: () => sys.btrfs_snap_destroy(bad, 'x'),
    };
    expect(Object.keys(calls).sort()).toEqual(Object.keys(sys).sort());
    for (const [key, call] of Object.entries(calls)) {
      let err: S.SystemError | undefined;
      try {
        call();
      } catch (e) {
        err = e as S.SystemError;
      }
      expect([key, S.isSystemError(err), err?.syscall]).toEqual([key, true, key]);
      expect(err?.message).toMatch(new RegExp(`^E[A-Z]+: [a-z].*, ${key}( |$)`));
    }
  });
});

describe('openat / openat2 / close', () => {
  it('opens with O_CLOEXEC always', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'x');
    withDir(dir, (d) => {
      const fd = sys.openat(d, 'f', S.O_RDONLY);
      const flags = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8');
      const octal = /flags:\s+(\d+)/.exec(flags)![1]!;
      expect(parseInt(octal, 8) & S.O_CLOEXEC).toBe(S.O_CLOEXEC);
      sys.close(fd);
    });
  });

  it('O_NOFOLLOW on a symlink gives ELOOP; O_EXCL on an existing name gives EEXIST', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'x');
    symlinkSync('f', join(dir, 'l'));
    withDir(dir, (d) => {
      expectSysError(() => sys.openat(d, 'l', S.O_RDONLY | S.O_NOFOLLOW), 'ELOOP', 'openat', 'l');
      expectSysError(() => sys.openat(d, 'f', S.O_WRONLY | S.O_CREAT | S.O_EXCL, 0o600), 'EEXIST', 'openat', 'f');
      expectSysError(() => sys.openat(d, 'missing', S.O_RDONLY), 'ENOENT', 'openat', 'missing');
    });
  });

  it('opening a FIFO with O_NONBLOCK returns at once and fstat shows a FIFO', () => {
    const dir = tempDir();
    mkfifo(join(dir, 'p'));
    withDir(dir, (d) => {
      const fd = sys.openat(d, 'p', S.O_RDONLY | S.O_NONBLOCK | S.O_NOFOLLOW);
      expect(sys.fstat(fd).mode & S.S_IFMT).toBe(S.S_IFIFO);
      sys.close(fd);
    });
  });

  it('openat2 RESOLVE_BENEATH refuses ../x, RESOLVE_NO_SYMLINKS refuses a link, IN_ROOT clamps', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'in/sub'), { recursive: true });
    writeFileSync(join(dir, 'x'), 'outside');
    writeFileSync(join(dir, 'in/sub/f'), 'inside');
    symlinkSync('sub', join(dir, 'in/link'));
    withDir(join(dir, 'in'), (d) => {
      expectSysError(() => sys.openat2(d, '../x', S.O_RDONLY, 0, S.RESOLVE_BENEATH), 'EXDEV', 'openat2', '../x');
      expectSysError(() => sys.openat2(d, 'link/f', S.O_RDONLY, 0, S.RESOLVE_NO_SYMLINKS), 'ELOOP', 'openat2', 'link/f');
      expectSysError(() => sys.openat2(d, '/proc/self/exe', S.O_RDONLY, 0, S.RESOLVE_NO_MAGICLINKS | S.RESOLVE_BENEATH), 'EXDEV', 'openat2');
      const fd = sys.openat2(d, 'sub/f', S.O_RDONLY, 0, S.RESOLVE_BENEATH | S.RESOLVE_NO_SYMLINKS);
      const buf = Buffer.alloc(16);
      expect(buf.subarray(0, sys.pread(fd, buf, 0, 16, 0)).toString()).toBe('inside');
      sys.close(fd);
      // ../x inside the root clamps to the root: in/x does not exist.
      expectSysError(() => sys.openat2(d, '../x', S.O_RDONLY, 0, S.RESOLVE_IN_ROOT), 'ENOENT', 'openat2');
    });
  });

  it('close of a closed fd is EBADF; Fd closes once', () => {
    const fd = openDir(tempDir());
    sys.close(fd);
    expectSysError(() => sys.close(fd), 'EBADF', 'close');
    const owned = new S.Fd(openDir(tempDir()));
    owned.close();
    owned.close();
    expect(owned.closed).toBe(true);
    expect(() => owned.fd).toThrow('file descriptor is closed');
    {
      using scoped = new S.Fd(openDir(tempDir()));
      expect(scoped.fd).toBeGreaterThan(2);
    }
  });
});

describe('fstat / fstatat', () => {
  it('match node:fs with bigint times', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'hello');
    symlinkSync('f', join(dir, 'l'));
    const ref = statSync(join(dir, 'f'), { bigint: true });
    withDir(dir, (d) => {
      const st = sys.fstatat(d, 'f', S.AT_SYMLINK_NOFOLLOW);
      expect(st.ino).toBe(ref.ino);
      expect(st.dev).toBe(ref.dev);
      expect(st.size).toBe(5);
      expect(st.mtimeNs).toBe(ref.mtimeNs);
      expect(st.ctimeNs).toBe(ref.ctimeNs);
      expect(st.nlink).toBe(1);
      expect(st.uid).toBe(Number(ref.uid));
      expect(S.isLink(sys.fstatat(d, 'l', S.AT_SYMLINK_NOFOLLOW).mode)).toBe(true);
      expect(S.isReg(sys.fstatat(d, 'l', 0).mode)).toBe(true);
      expectSysError(() => sys.fstatat(d, 'nope', 0), 'ENOENT', 'fstatat', 'nope');
      const fd = sys.openat(d, 'f', S.O_RDONLY);
      expect(S.sameIdentity(S.identityOf(sys.fstat(fd)), S.identityOf(st))).toBe(true);
      sys.close(fd);
      expectSysError(() => sys.fstat(fd), 'EBADF', 'fstat');
    });
  });

  it('each call returns its own Stat (the addon fills one block per thread; a result is never overwritten later)', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a'), 'a');
    writeFileSync(join(dir, 'b'), 'bb');
    chmodSync(join(dir, 'b'), 0o600);
    const refA = statSync(join(dir, 'a'), { bigint: true });
    const refB = statSync(join(dir, 'b'), { bigint: true });
    withDir(dir, (d) => {
      const a = sys.fstatat(d, 'a', S.AT_SYMLINK_NOFOLLOW);
      const b = sys.fstatat(d, 'b', S.AT_SYMLINK_NOFOLLOW);
      expect([a.ino, a.size, a.mode, a.blocks]).toEqual([refA.ino, 1, Number(refA.mode), Number(refA.blocks)]);
      expect([b.ino, b.size, b.mode, b.gid]).toEqual([refB.ino, 2, Number(refB.mode), Number(refB.gid)]);
      expect(() => sys.fstatat(d, 'nope', 0)).toThrow();
      // A failed call leaves earlier results as they were.
      expect(a.ino).toBe(refA.ino);
      expect(Object.keys(a)).toEqual(['dev', 'ino', 'mode', 'nlink', 'uid', 'gid', 'size', 'blocks', 'mtimeNs', 'ctimeNs']);
    });
  });
});

describe('readdir / mkdirat / unlinkat', () => {
  it('lists names with types and returns a non-UTF-8 name intact', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), '');
    mkdirSync(join(dir, 'd'));
    const raw = Buffer.from([0x66, 0xff, 0xfe, 0x2e, 0x74]);
    writeFileSync(Buffer.concat([Buffer.from(dir + '/'), raw]), 'bad');
    withDir(dir, (d) => {
      const entries = sys.readdir(d);
      const byName = new Map(entries.map((e) => [typeof e.name === 'string' ? e.name : e.name.toString('hex'), e.type]));
      expect(byName.get('f')).toBe(S.DT_REG);
      expect(byName.get('d')).toBe(S.DT_DIR);
      expect(byName.get(raw.toString('hex'))).toBe(S.DT_REG);
      const bad = entries.find((e) => Buffer.isBuffer(e.name))!;
      expect(Buffer.compare(bad.name as Buffer, raw)).toBe(0);
      // The Buffer name opens the same file.
      const fd = sys.openat(d, bad.name, S.O_RDONLY);
      sys.close(fd);
      // A second listing of the same fd starts over.
      expect(sys.readdir(d)).toHaveLength(3);
    });
    expectSysError(() => sys.readdir(999999), 'EBADF', 'readdir');
  });

  it('an empty directory lists nothing; names that are not UTF-8 keep their places among the others', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'empty'));
    mkdirSync(join(dir, 'odd'));
    const raws = [Buffer.from([0x80]), Buffer.from([0x61, 0xc0, 0x41])];
    for (const raw of raws) writeFileSync(Buffer.concat([Buffer.from(`${dir}/odd/`), raw]), '');
    for (const name of ['x', 'y', 'zz']) writeFileSync(join(dir, 'odd', name), '');
    withDir(join(dir, 'empty'), (d) => expect(sys.readdir(d)).toEqual([]));
    withDir(join(dir, 'odd'), (d) => {
      const entries = sys.readdir(d);
      expect(entries.map((e) => e.type)).toEqual(Array(5).fill(S.DT_REG));
      const names = entries.map((e) => (typeof e.name === 'string' ? e.name : `hex:${e.name.toString('hex')}`)).sort();
      expect(names).toEqual(['hex:61c041', 'hex:80', 'x', 'y', 'zz']);
      // Every name, string or Buffer, opens its own file.
      for (const e of entries) sys.close(sys.openat(d, e.name, S.O_RDONLY));
    });
  });

  it('mkdirat creates with the mode; EEXIST on an existing name; unlinkat removes files and dirs', () => {
    const dir = tempDir();
    withDir(dir, (d) => {
      sys.mkdirat(d, 'new', 0o700);
      expect(statSync(join(dir, 'new')).mode & 0o777).toBe(0o700);
      expectSysError(() => sys.mkdirat(d, 'new', 0o700), 'EEXIST', 'mkdirat', 'new');
      writeFileSync(join(dir, 'new/f'), '');
      expectSysError(() => sys.unlinkat(d, 'new', S.AT_REMOVEDIR), 'ENOTEMPTY', 'unlinkat', 'new');
      expectSysError(() => sys.unlinkat(d, 'new', 0), 'EISDIR', 'unlinkat', 'new');
      sys.unlinkat(d, 'new/f', 0);
      sys.unlinkat(d, 'new', S.AT_REMOVEDIR);
      expect(existsSync(join(dir, 'new'))).toBe(false);
    });
  });
});

describe('renameat2', () => {
  it('NOREPLACE gives EEXIST; EXCHANGE swaps two trees', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'a'));
    writeFileSync(join(dir, 'a/one'), '1');
    mkdirSync(join(dir, 'b'));
    writeFileSync(join(dir, 'b/two'), '2');
    withDir(dir, (d) => {
      let err: S.SystemError | undefined;
      try {
        sys.renameat2(d, 'a', d, 'b', S.RENAME_NOREPLACE);
      } catch (e) {
        err = e as S.SystemError;
      }
      expect(err?.code).toBe('EEXIST');
      expect(err?.dest).toBe('b');
      expect(err?.message).toBe("EEXIST: file already exists, renameat2 'a' -> 'b'");
      sys.renameat2(d, 'a', d, 'b', S.RENAME_EXCHANGE);
      expect(readdirSync(join(dir, 'a'))).toEqual(['two']);
      expect(readdirSync(join(dir, 'b'))).toEqual(['one']);
      sys.renameat2(d, 'a', d, 'c', S.RENAME_NOREPLACE);
      expect(readdirSync(dir).sort()).toEqual(['b', 'c']);
      expectSysError(() => sys.renameat2(d, 'a', d, 'c', S.RENAME_EXCHANGE), 'ENOENT', 'renameat2', 'a');
    });
  });
});

describe('linkat', () => {
  it('gives a file a second name (one inode); a symlink is linked, not followed; errors name both paths', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'bytes');
    symlinkSync('f', join(dir, 'l'));
    withDir(dir, (d) => {
      sys.linkat(d, 'f', d, 'g', 0);
      expect(statSync(join(dir, 'g')).ino).toBe(statSync(join(dir, 'f')).ino);
      expect(statSync(join(dir, 'f')).nlink).toBe(2);
      sys.linkat(d, 'l', d, 'm', 0);
      expect(lstatSync(join(dir, 'm')).isSymbolicLink()).toBe(true);
      let err: S.SystemError | undefined;
      try {
        sys.linkat(d, 'f', d, 'g', 0);
      } catch (e) {
        err = e as S.SystemError;
      }
      expect([err?.code, err?.syscall, err?.path, err?.dest]).toEqual(['EEXIST', 'linkat', 'f', 'g']);
      expect(err?.message).toBe("EEXIST: file already exists, linkat 'f' -> 'g'");
      expectSysError(() => sys.linkat(d, 'missing', d, 'h', 0), 'ENOENT', 'linkat', 'missing');
    });
  });
});

describe('symlinkat / readlinkat', () => {
  it('round-trips targets, including non-UTF-8 ones as Buffers', () => {
    const dir = tempDir();
    withDir(dir, (d) => {
      sys.symlinkat('../target', d, 'l');
      expect(readlinkSync(join(dir, 'l'))).toBe('../target');
      expect(sys.readlinkat(d, 'l')).toBe('../target');
      const raw = Buffer.from([0x61, 0xff]);
      sys.symlinkat(raw, d, 'bad');
      expect(Buffer.compare(sys.readlinkat(d, 'bad') as Buffer, raw)).toBe(0);
      expectSysError(() => sys.symlinkat('x', d, 'l'), 'EEXIST', 'symlinkat', 'x');
      writeFileSync(join(dir, 'f'), '');
      expectSysError(() => sys.readlinkat(d, 'f'), 'EINVAL', 'readlinkat', 'f');
    });
  });
});

describe('pread / pwrite / fsync / syncfs / fchmod / fchmodat / flock', () => {
  it('read and write at offsets into Buffers', () => {
    const dir = tempDir();
    withDir(dir, (d) => {
      const fd = sys.openat(d, 'f', S.O_RDWR | S.O_CREAT | S.O_EXCL, 0o600);
      expect(sys.pwrite(fd, Buffer.from('xxhello'), 2, 5, 3)).toBe(5);
      const buf = Buffer.alloc(10, 0x2e);
      expect(sys.pread(fd, buf, 1, 9, 0)).toBe(8);
      expect(buf.toString('latin1')).toBe('.\0\0\0hello.');
      expect(sys.pread(fd, buf, 0, 4, 100)).toBe(0);
      sys.fsync(fd);
      sys.syncfs(fd);
      sys.fchmod(fd, 0o444);
      expect(statSync(join(dir, 'f')).mode & 0o777).toBe(0o444);
      sys.close(fd);
      const ro = sys.openat(d, 'f', S.O_RDONLY);
      expectSysError(() => sys.pwrite(ro, Buffer.from('x'), 0, 1, 0), 'EBADF', 'pwrite');
      sys.close(ro);
      expectSysError(() => sys.fsync(ro), 'EBADF', 'fsync');
      expectSysError(() => sys.syncfs(ro), 'EBADF', 'syncfs');
      expectSysError(() => sys.fchmod(ro, 0o600), 'EBADF', 'fchmod');
    });
  });

  it('fchmodat never follows a symlink', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), '');
    symlinkSync('f', join(dir, 'l'));
    withDir(dir, (d) => {
      sys.fchmodat(d, 'f', 0o640, S.AT_SYMLINK_NOFOLLOW);
      expect(statSync(join(dir, 'f')).mode & 0o777).toBe(0o640);
      expectSysError(() => sys.fchmodat(d, 'l', 0o777, S.AT_SYMLINK_NOFOLLOW), 'ENOTSUP', 'fchmodat', 'l');
      expect(statSync(join(dir, 'f')).mode & 0o777).toBe(0o640);
    });
  });

  it('futimens sets times to the nanosecond: UTIME_OMIT leaves one as it is, UTIME_NOW stamps the clock, before 1970 too', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), '');
    withDir(dir, (d) => {
      const fd = sys.openat(d, 'f', S.O_RDONLY);
      try {
        const atime = lstatSync(join(dir, 'f'), { bigint: true }).atimeNs;
        sys.futimens(fd, 0, S.UTIME_OMIT, 1_700_000_000, 123_456_789);
        expect(sys.fstat(fd).mtimeNs).toBe(1_700_000_000_123_456_789n);
        expect(lstatSync(join(dir, 'f'), { bigint: true }).atimeNs).toBe(atime);
        sys.futimens(fd, 5, 6, -2, 999_999_999);
        expect(sys.fstat(fd).mtimeNs).toBe(-1_000_000_001n);
        expect(lstatSync(join(dir, 'f'), { bigint: true }).atimeNs).toBe(5_000_000_006n);
        const before = BigInt(Date.now() - 1000) * 1_000_000n;
        sys.futimens(fd, 0, S.UTIME_OMIT, 0, S.UTIME_NOW);
        expect(sys.fstat(fd).mtimeNs).toBeGreaterThan(before);
        expect(lstatSync(join(dir, 'f'), { bigint: true }).atimeNs).toBe(5_000_000_006n);
        // In range for the C type, but not a nanosecond count: the kernel's EINVAL.
        expectSysError(() => sys.futimens(fd, 0, S.UTIME_OMIT, 0, 1_000_000_000), 'EINVAL', 'futimens');
      } finally {
        sys.close(fd);
      }
      const ro = sys.openat(d, 'f', S.O_RDONLY);
      sys.close(ro);
      expectSysError(() => sys.futimens(ro, 0, S.UTIME_OMIT, 0, 0), 'EBADF', 'futimens');
    });
  });

  it('utimensat with AT_SYMLINK_NOFOLLOW sets a symlink\'s own time and never its target\'s; without it the target is set', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), '');
    symlinkSync('f', join(dir, 'l'));
    symlinkSync('nowhere', join(dir, 'dangling'));
    const target = lstatSync(join(dir, 'f'), { bigint: true }).mtimeNs;
    withDir(dir, (d) => {
      sys.utimensat(d, 'l', 0, S.UTIME_OMIT, 1_000, 1, S.AT_SYMLINK_NOFOLLOW);
      expect(lstatSync(join(dir, 'l'), { bigint: true }).mtimeNs).toBe(1_000_000_000_001n);
      expect(lstatSync(join(dir, 'f'), { bigint: true }).mtimeNs).toBe(target);
      sys.utimensat(d, 'dangling', 0, S.UTIME_OMIT, 2_000, 2, S.AT_SYMLINK_NOFOLLOW);
      expect(lstatSync(join(dir, 'dangling'), { bigint: true }).mtimeNs).toBe(2_000_000_000_002n);
      expect(existsSync(join(dir, 'nowhere'))).toBe(false);
      sys.utimensat(d, 'l', 0, S.UTIME_OMIT, 3_000, 3, 0);
      expect(lstatSync(join(dir, 'f'), { bigint: true }).mtimeNs).toBe(3_000_000_000_003n);
      expect(lstatSync(join(dir, 'l'), { bigint: true }).mtimeNs).toBe(1_000_000_000_001n);
      expectSysError(() => sys.utimensat(d, 'dangling', 0, S.UTIME_OMIT, 0, 0, 0), 'ENOENT', 'utimensat', 'dangling');
      expectSysError(() => sys.utimensat(d, 'missing', 0, S.UTIME_OMIT, 0, 0, S.AT_SYMLINK_NOFOLLOW), 'ENOENT', 'utimensat', 'missing');
    });
  });

  it('flock: a second exclusive lock on another open file description is EWOULDBLOCK', () => {
    const dir = tempDir();
    const a = openDir(dir);
    const b = openDir(dir);
    sys.flock(a, S.LOCK_EX | S.LOCK_NB);
    expectSysError(() => sys.flock(b, S.LOCK_EX | S.LOCK_NB), 'EAGAIN', 'flock');
    sys.flock(a, S.LOCK_UN);
    sys.flock(b, S.LOCK_EX | S.LOCK_NB);
    sys.close(a);
    sys.close(b);
  });
});

describe('ficlone / copy_file_range on this filesystem', () => {
  it('copy_file_range copies bytes; ficlone is false where the filesystem cannot clone', () => {
    const dir = tempDir('/dev/shm');
    writeFileSync(join(dir, 'src'), 'abcdef');
    withDir(dir, (d) => {
      const src = sys.openat(d, 'src', S.O_RDONLY);
      const dst = sys.openat(d, 'dst', S.O_RDWR | S.O_CREAT | S.O_EXCL, 0o600);
      expect(sys.ficlone(dst, src)).toBe(false);
      expect(sys.copy_file_range(src, 1, dst, 0, 10)).toBe(5);
      expect(readFileSync(join(dir, 'dst'), 'utf8')).toBe('bcdef');
      expectSysError(() => sys.copy_file_range(dst, 0, dst, 1, 4), 'EINVAL', 'copy_file_range');
      sys.close(dst);
      expectSysError(() => sys.ficlone(dst, src), 'EBADF', 'ficlone');
      sys.close(src);
    });
  });

  it('ficlone across filesystems is false', () => {
    const a = tempDir('/dev/shm');
    const b = tempDir();
    writeFileSync(join(a, 'src'), 'abc');
    const src = sys.openat(S.AT_FDCWD, join(a, 'src'), S.O_RDONLY);
    const dst = sys.openat(S.AT_FDCWD, join(b, 'dst'), S.O_RDWR | S.O_CREAT | S.O_EXCL, 0o600);
    expect(sys.ficlone(dst, src)).toBe(false);
    sys.close(src);
    sys.close(dst);
  });
});

describe('lseek / ftruncate', () => {
  it('lseek finds data and holes (SEEK_DATA/SEEK_HOLE) and moves the offset; ENXIO past the data', () => {
    const dir = tempDir();
    withDir(dir, (d) => {
      const fd = sys.openat(d, 'sparse', S.O_RDWR | S.O_CREAT | S.O_EXCL, 0o600);
      try {
        sys.ftruncate(fd, 8 << 20);
        expect(sys.fstat(fd).size).toBe(8 << 20);
        sys.pwrite(fd, Buffer.from('data'), 0, 4, 4 << 20);
        const start = sys.lseek(fd, 0, S.SEEK_DATA);
        expect(start).toBeLessThanOrEqual(4 << 20);
        expect(sys.lseek(fd, start, S.SEEK_HOLE)).toBeGreaterThan(4 << 20);
        expect(sys.lseek(fd, 10, S.SEEK_SET)).toBe(10);
        expect(sys.lseek(fd, 0, S.SEEK_END)).toBe(8 << 20);
        expectSysError(() => sys.lseek(fd, 9 << 20, S.SEEK_DATA), 'ENXIO', 'lseek');
        expectSysError(() => sys.ftruncate(fd, -1), 'EINVAL', 'ftruncate');
      } finally {
        sys.close(fd);
      }
      expectSysError(() => sys.lseek(fd, 0, S.SEEK_SET), 'EBADF', 'lseek');
      const ro = sys.openat(d, 'sparse', S.O_RDONLY);
      expectSysError(() => sys.ftruncate(ro, 0), 'EINVAL', 'ftruncate');
      sys.close(ro);
    });
  });
});

describe('fstatatEach', () => {
  const json = (st: S.Stat | null): string => JSON.stringify(st, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));

  it('gives each name what fstatat gives it, null for a missing one, in order, past the blocks it starts with (200 names)', () => {
    const dir = tempDir();
    const names = Array.from({ length: 200 }, (_, i) => `f${i}`);
    names.forEach((n, i) => writeFileSync(join(dir, n), 'x'.repeat(i)));
    mkdirSync(join(dir, 'sub'));
    symlinkSync('f1', join(dir, 'link'));
    withDir(dir, (d) => {
      const asked = [...names, 'nope', 'sub', 'link', 'f7'];
      const got = S.fstatatEach(sys, d, asked, S.AT_SYMLINK_NOFOLLOW);
      expect(got.length).toBe(asked.length);
      asked.forEach((n, i) => expect([n, json(got[i]!)]).toEqual([n, n === 'nope' ? 'null' : json(sys.fstatat(d, n, S.AT_SYMLINK_NOFOLLOW))]));
      expect(got.slice(0, 3).map((st) => st!.size)).toEqual([0, 1, 2]);
      expect(Object.keys(got[0]!)).toEqual(Object.keys(sys.fstatat(d, 'f0', 0)));
      // Each result is its own: the next call does not overwrite them.
      S.fstatatEach(sys, d, ['f9'], 0);
      expect(got[7]!.size).toBe(7);
      expect(S.isReg(S.fstatatEach(sys, d, ['link'], 0)[0]!.mode)).toBe(true);
      expect(S.fstatatEach(sys, d, [], 0)).toEqual([]);
    });
  });

  it('gives a name the kernel refused the error fstatat would throw, the others their Stat; refuses a name with a slash or none', () => {
    const dir = tempDir('/dev/shm');
    writeFileSync(join(dir, 'a'), 'a');
    const long = 'n'.repeat(256); // one byte past NAME_MAX: ENAMETOOLONG
    withDir(dir, (d) => {
      const got = S.fstatatEach(sys, d, ['a', 'nope', long, 'a'], 0);
      expect(got.map((st) => (st === null ? null : st instanceof Error ? 'error' : st.size))).toEqual([1, null, 'error', 1]);
      expectSysError(() => {
        throw got[2];
      }, 'ENAMETOOLONG', 'fstatat', long);
      expectSysError(() => sys.fstatat(d, long, 0), 'ENAMETOOLONG', 'fstatat', long);
      for (const bad of ['a/b', '', '/a']) {
        let err: (Error & { code?: string }) | undefined;
        try {
          S.fstatatEach(sys, d, ['a', bad], 0);
        } catch (e) {
          err = e as Error & { code?: string };
        }
        expect(err).toBeInstanceOf(TypeError);
        expect([err?.code, err?.message]).toEqual(['ERR_INVALID_ARG_VALUE', `The argument 'names' must hold names without '/', each not empty. Received ${JSON.stringify(bad)}`]);
      }
    });
    const closed = openDir(dir);
    sys.close(closed);
    const shut = S.fstatatEach(sys, closed, ['a', 'b'], 0);
    expect(shut.length).toBe(2);
    for (const [k, name] of ['a', 'b'].entries()) {
      expectSysError(() => {
        throw shut[k];
      }, 'EBADF', 'fstatat', name);
    }
  });

  it('asks an injected layer once per name, in order; what it throws for a name is that name\'s result', () => {
    const dir = tempDir();
    for (const n of ['a', 'b', 'c']) writeFileSync(join(dir, n), n);
    const asked: string[] = [];
    const layer: S.Sys = { ...sys, fstatat: (dirfd, path, flags) => (asked.push(String(path)), sys.fstatat(dirfd, path, flags)) };
    withDir(dir, (d) => {
      expect(S.fstatatEach(layer, d, ['c', 'nope', 'a'], 0).map((st) => st?.size ?? null)).toEqual([1, null, 1]);
      expect(asked).toEqual(['c', 'nope', 'a']);
      const refused = Object.assign(new Error('EACCES'), { code: 'EACCES' });
      const failing: S.Sys = { ...sys, fstatat: (dirfd, path, flags) => (path === 'b' ? (() => { throw refused; })() : sys.fstatat(dirfd, path, flags)) };
      const got = S.fstatatEach(failing, d, ['a', 'b', 'c'], 0);
      expect(got[1]).toBe(refused);
      expect([got[0], got[2]].map((st) => (st as S.Stat).size)).toEqual([1, 1]);
    });
  });
});

describe('fstatfs / fdatasync / sync_file_range', () => {
  it('fstatfs gives the filesystem type (f_type, as stat -f shows it); EBADF on a closed fd', () => {
    expect([S.TMPFS_MAGIC, S.RAMFS_MAGIC, S.OVERLAYFS_SUPER_MAGIC]).toEqual([0x01021994, 0x858458f6, 0x794c7630]);
    for (const dir of [tempDir('/dev/shm'), tempDir()]) {
      const type = parseInt(execFileSync('stat', ['-f', '-c', '%t', dir], { encoding: 'utf8' }), 16);
      expect(withDir(dir, (fd) => sys.fstatfs(fd))).toBe(type);
    }
    expect(withDir(tempDir('/dev/shm'), (fd) => sys.fstatfs(fd))).toBe(S.TMPFS_MAGIC);
    const fd = openDir(tempDir());
    sys.close(fd);
    expectSysError(() => sys.fstatfs(fd), 'EBADF', 'fstatfs');
  });

  it('fdatasync and sync_file_range write back what was written; bad flags or offsets are EINVAL, a closed fd EBADF', () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, 'x'.repeat(8192));
    const all = S.SYNC_FILE_RANGE_WAIT_BEFORE | S.SYNC_FILE_RANGE_WRITE | S.SYNC_FILE_RANGE_WAIT_AFTER;
    expect([S.SYNC_FILE_RANGE_WAIT_BEFORE, S.SYNC_FILE_RANGE_WRITE, S.SYNC_FILE_RANGE_WAIT_AFTER]).toEqual([1, 2, 4]);
    const fd = sys.openat(S.AT_FDCWD, path, S.O_RDWR);
    try {
      sys.pwrite(fd, Buffer.from('dirty'), 0, 5, 100);
      expect(sys.sync_file_range(fd, 0, 0, all)).toBeUndefined();
      sys.pwrite(fd, Buffer.from('again'), 0, 5, 4200);
      expect(sys.sync_file_range(fd, 4096, 4096, S.SYNC_FILE_RANGE_WRITE)).toBeUndefined();
      expect(sys.fdatasync(fd)).toBeUndefined();
      const text = readFileSync(path, 'utf8');
      expect([text.slice(100, 105), text.slice(4200, 4205)]).toEqual(['dirty', 'again']);
      expectSysError(() => sys.sync_file_range(fd, -1, 0, all), 'EINVAL', 'sync_file_range');
      expectSysError(() => sys.sync_file_range(fd, 0, 0, 1 << 8), 'EINVAL', 'sync_file_range');
    } finally {
      sys.close(fd);
    }
    expectSysError(() => sys.fdatasync(fd), 'EBADF', 'fdatasync');
    expectSysError(() => sys.sync_file_range(fd, 0, 0, all), 'EBADF', 'sync_file_range');
  });
});

describe('worker threads', () => {
  it('the addon loads and works inside a worker thread', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'from worker');
    const url = new URL('../../dist/sys/index.js', import.meta.url).href;
    const code = `
      const { parentPort, workerData } = require('node:worker_threads');
      import(workerData.url).then((S) => {
        const fd = S.sys.openat(S.AT_FDCWD, workerData.path, S.O_RDONLY);
        const buf = Buffer.alloc(64);
        const n = S.sys.pread(fd, buf, 0, 64, 0);
        S.sys.close(fd);
        let code = '';
        try { S.sys.openat(S.AT_FDCWD, workerData.path + '.missing', S.O_RDONLY); } catch (e) { code = e.code; }
        parentPort.postMessage(buf.subarray(0, n).toString() + '|' + code);
      });`;
    const worker = new Worker(code, { eval: true, workerData: { url, path: join(dir, 'f') } });
    const msg = await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(msg).toBe('from worker|ENOENT');
  });
});

describe('platform', () => {
  it('loading names the platform when it is not Linux', () => {
    const out = execFileSync(
      process.execPath,
      ['-e', `Object.defineProperty(process, 'platform', { value: 'darwin' }); import(${JSON.stringify(new URL('../../dist/sys/index.js', import.meta.url).href)}).catch((e) => console.log(e.message));`],
      { encoding: 'utf8' },
    );
    expect(out.trim()).toBe('treeseal supports Linux only; this platform is darwin');
  });

  it('the interface revision has one source, native/revision.json: binding.gyp compiles it into the addon, the bundle builds it into the code', async () => {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const { revision } = JSON.parse(readFileSync(join(root, 'native/revision.json'), 'utf8')) as { revision: number };
    expect(Number.isInteger(revision) && revision > 0).toBe(true);
    const { ADDON_REVISION } = await import('../../dist/internal.js');
    const require = createRequire(import.meta.url);
    const built = require('../../build/Release/treeseal.node') as { revision: number };
    expect([ADDON_REVISION, built.revision]).toEqual([revision, revision]);
    // binding.gyp defines TREESEAL_ADDON_REVISION by a command that reads the file (gyp runs it
    // in the package root, where npm install builds the addon); run the same command here.
    const gyp = readFileSync(join(root, 'binding.gyp'), 'utf8');
    const command = /"TREESEAL_ADDON_REVISION=<!\((.*?)\)",?\n/.exec(gyp)?.[1]?.replace(/\\"/g, '"');
    expect(command).toContain('native/revision.json');
    expect(execFileSync('sh', ['-c', command!], { cwd: root, encoding: 'utf8' }).trim()).toBe(String(revision));
    // No second copy of the number: the addon exports the define, the code imports the file.
    expect(readFileSync(join(root, 'native/constants.cc'), 'utf8')).toMatch(/exports\.Set\("revision", Napi::Number::New\(env, TREESEAL_ADDON_REVISION\)\)/);
    expect(readFileSync(join(root, 'src/sys/native.ts'), 'utf8')).toMatch(/ADDON_REVISION: number = revisionFile\.revision;/);
    // The file ships: the package's files list carries native/ (and binding.gyp) for the install-time build.
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] };
    expect(pkg.files).toEqual(expect.arrayContaining(['native', 'binding.gyp']));
  });

  it('an addon built from other sources is refused by name, with the way out', () => {
    // A copy of the package whose code expects another revision than its addon has.
    const pkg = tempDir();
    cpSync(fileURLToPath(new URL('../../dist', import.meta.url)), join(pkg, 'dist'), { recursive: true });
    cpSync(fileURLToPath(new URL('../../build/Release/treeseal.node', import.meta.url)), join(pkg, 'build/Release/treeseal.node'));
    cpSync(fileURLToPath(new URL('../../package.json', import.meta.url)), join(pkg, 'package.json'));
    symlinkSync(fileURLToPath(new URL('../../node_modules', import.meta.url)), join(pkg, 'node_modules'));
    const defines = /\bADDON_REVISION = ([^;\n]+);/;
    const chunks = readdirSync(join(pkg, 'dist/chunks')).filter((f) => f.endsWith('.js') && defines.test(readFileSync(join(pkg, 'dist/chunks', f), 'utf8')));
    expect(chunks).toHaveLength(1);
    const chunk = join(pkg, 'dist/chunks', chunks[0]!);
    writeFileSync(chunk, readFileSync(chunk, 'utf8').replace(defines, (_, value: string) => `ADDON_REVISION = (${value}) + 1;`));
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', `import(${JSON.stringify(pathToFileURL(join(pkg, 'dist/index.js')).href)}).then(() => console.log('loaded'), (e) => console.log(e.message));`], { encoding: 'utf8' });
    const built = (createRequire(import.meta.url)('../../build/Release/treeseal.node') as { revision: number }).revision;
    expect(out.trim()).toBe(
      `treeseal's native addon in ${pkg}/ is revision ${built}, this code needs ${built + 1}: it was built from other sources; rebuild it (\`npm rebuild treeseal\`, or \`npx node-gyp rebuild\` in a checkout)`,
    );
  });
});
