// native.ts: loads the compiled addon and describes the syscall layer it provides.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** fstat/fstatat result; nanosecond times, dev and ino are bigints. */
export interface Stat {
  dev: bigint;
  ino: bigint;
  mode: number;
  nlink: number;
  uid: number;
  gid: number;
  size: number;
  blocks: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

/** statx result: the inode attributes fstatat does not report (STATX_ATTR_IMMUTABLE, STATX_ATTR_APPEND). */
export interface StatxResult {
  mode: number;
  uid: number;
  attributes: number;
  /** The attributes this filesystem reports at all. */
  attributesMask: number;
}

/** One getdents64 record: a name that is not valid UTF-8 comes back as a Buffer. */
export interface DirEntry {
  name: string | Buffer;
  type: number;
}

export type PathArg = string | Buffer;

export interface Constants {
  readonly [name: string]: number;
}

/**
 * The syscall layer. Capture, materialize, freeze and the single-file tools take
 * one of these as a parameter (default: the addon) so tests can wrap any call.
 * Every function throws a Node-shaped system error on failure.
 */
export interface Sys {
  openat(dirfd: number, path: PathArg, flags: number, mode?: number): number;
  openat2(dirfd: number, path: PathArg, flags: number, mode: number, resolve: number): number;
  close(fd: number): void;
  fstat(fd: number): Stat;
  fstatat(dirfd: number, path: PathArg, flags: number): Stat;
  statx(dirfd: number, path: PathArg, flags: number): StatxResult;
  readdir(fd: number): DirEntry[];
  mkdirat(dirfd: number, path: PathArg, mode: number): void;
  unlinkat(dirfd: number, path: PathArg, flags: number): void;
  renameat2(olddirfd: number, oldpath: PathArg, newdirfd: number, newpath: PathArg, flags: number): void;
  symlinkat(target: PathArg, dirfd: number, path: PathArg): void;
  readlinkat(dirfd: number, path: PathArg): string | Buffer;
  pread(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number;
  pwrite(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number;
  /** The new offset; SEEK_DATA/SEEK_HOLE at or past the end throw ENXIO. */
  lseek(fd: number, offset: number, whence: number): number;
  ftruncate(fd: number, length: number): void;
  fsync(fd: number): void;
  syncfs(fd: number): void;
  fchmod(fd: number, mode: number): void;
  fchmodat(dirfd: number, path: PathArg, mode: number, flags: number): void;
  flock(fd: number, operation: number): void;
  ficlone(destfd: number, srcfd: number): boolean;
  copy_file_range(fdIn: number, offIn: number, fdOut: number, offOut: number, length: number): number;
}

interface Addon extends Sys {
  constants: Constants;
}

function load(): Addon {
  if (process.platform !== 'linux') {
    throw new Error(`treeseal supports Linux only; this platform is ${process.platform}`);
  }
  const require = createRequire(import.meta.url);
  const bindings = require('bindings') as (opts: { bindings: string; module_root: string }) => Addon;
  return bindings({ bindings: 'treeseal.node', module_root: fileURLToPath(new URL('../..', import.meta.url)) });
}

export const addon: Addon = load();

/** The real syscall layer, without the constants table. */
export const sys: Sys = {
  openat: addon.openat,
  openat2: addon.openat2,
  close: addon.close,
  fstat: addon.fstat,
  fstatat: addon.fstatat,
  statx: addon.statx,
  readdir: addon.readdir,
  mkdirat: addon.mkdirat,
  unlinkat: addon.unlinkat,
  renameat2: addon.renameat2,
  symlinkat: addon.symlinkat,
  readlinkat: addon.readlinkat,
  pread: addon.pread,
  pwrite: addon.pwrite,
  lseek: addon.lseek,
  ftruncate: addon.ftruncate,
  fsync: addon.fsync,
  syncfs: addon.syncfs,
  fchmod: addon.fchmod,
  fchmodat: addon.fchmodat,
  flock: addon.flock,
  ficlone: addon.ficlone,
  copy_file_range: addon.copy_file_range,
};
