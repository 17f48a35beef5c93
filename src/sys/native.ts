// native.ts: loads the compiled addon and describes the syscall layer it provides.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

import revisionFile from '../../native/revision.json' with { type: 'json' };

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
  /**
   * Nanoseconds since the epoch, held at ±(2^63 - 1) for a time past what 64 bits hold
   * (before 1677-09-21 or after 2262-04-11, which ext4, XFS with bigtime, btrfs and tmpfs
   * store): such a time is set by hand, and the change that set it also set the ctime
   * (the kernel's clock), so identities still tell every change apart.
   */
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
  /** The ID of the mount holding it (the first field of /proc/self/mountinfo), -1 where the kernel gives none (before 5.8). */
  mntId: number;
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
  /** close_range(2): closes fds first..last, or with CLOSE_RANGE_CLOEXEC marks them close-on-exec. */
  close_range(first: number, last: number, flags: number): void;
  /** pipe2(2): a new pipe, [read end, write end], both close-on-exec (O_CLOEXEC is always added to `flags`). */
  pipe2(flags: number): [number, number];
  fstat(fd: number): Stat;
  fstatat(dirfd: number, path: PathArg, flags: number): Stat;
  statx(dirfd: number, path: PathArg, flags: number): StatxResult;
  /** The f_type (magic number) of the filesystem holding fd: TMPFS_MAGIC, RAMFS_MAGIC, ... */
  fstatfs(fd: number): number;
  readdir(fd: number): DirEntry[];
  mkdirat(dirfd: number, path: PathArg, mode: number): void;
  unlinkat(dirfd: number, path: PathArg, flags: number): void;
  renameat2(olddirfd: number, oldpath: PathArg, newdirfd: number, newpath: PathArg, flags: number): void;
  /** A new name for an existing file (flags 0: a symlink at oldpath is linked, not followed). */
  linkat(olddirfd: number, oldpath: PathArg, newdirfd: number, newpath: PathArg, flags: number): void;
  symlinkat(target: PathArg, dirfd: number, path: PathArg): void;
  readlinkat(dirfd: number, path: PathArg): string | Buffer;
  pread(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number;
  pwrite(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number;
  /** The new offset; SEEK_DATA/SEEK_HOLE at or past the end throw ENXIO. */
  lseek(fd: number, offset: number, whence: number): number;
  ftruncate(fd: number, length: number): void;
  fsync(fd: number): void;
  fdatasync(fd: number): void;
  /** Starts and/or waits for the writeback of fd's dirty pages in [offset, offset + nbytes) (nbytes 0: to the end); no metadata, no device flush. */
  sync_file_range(fd: number, offset: number, nbytes: number, flags: number): void;
  syncfs(fd: number): void;
  fchmod(fd: number, mode: number): void;
  fchmodat(dirfd: number, path: PathArg, mode: number, flags: number): void;
  /** Sets fd's owner and group (4294967295 for either: left as it is). */
  fchown(fd: number, uid: number, gid: number): void;
  /** Sets dirfd/path's owner and group (AT_SYMLINK_NOFOLLOW: a link's own, never its target's; 4294967295: left as it is). */
  fchownat(dirfd: number, path: PathArg, uid: number, gid: number, flags: number): void;
  /**
   * Sets fd's access and modification times, each as (seconds, nanoseconds) since the epoch; a
   * nanosecond value of UTIME_OMIT leaves that time as it is, UTIME_NOW sets it to now.
   */
  futimens(fd: number, atimeSec: number, atimeNsec: number, mtimeSec: number, mtimeNsec: number): void;
  /** futimens for dirfd/path; with AT_SYMLINK_NOFOLLOW a symlink's own times are set, never its target's. */
  utimensat(dirfd: number, path: PathArg, atimeSec: number, atimeNsec: number, mtimeSec: number, mtimeNsec: number, flags: number): void;
  flock(fd: number, operation: number): void;
  ficlone(destfd: number, srcfd: number): boolean;
  copy_file_range(fdIn: number, offIn: number, fdOut: number, offOut: number, length: number): number;
  /** BTRFS_IOC_SUBVOL_CREATE: a new empty subvolume `name` in the directory open at dirfd (ENOTTY off btrfs). */
  btrfs_subvol_create(dirfd: number, name: PathArg): void;
  /**
   * BTRFS_IOC_SNAP_CREATE_V2: a snapshot `name` in the directory open at dirfd of the subvolume whose root
   * directory is open at srcfd; flags 0 (writable) or BTRFS_SUBVOL_RDONLY. EPERM unless the caller owns the
   * source (or has CAP_FOWNER), EXDEV across filesystems, EINVAL when srcfd is not a subvolume's root.
   */
  btrfs_snap_create(dirfd: number, name: PathArg, srcfd: number, flags: number): void;
  /** BTRFS_IOC_SUBVOL_GETFLAGS of the subvolume root open at fd (BTRFS_SUBVOL_RDONLY); EINVAL for another directory, ENOTTY off btrfs. */
  btrfs_subvol_getflags(fd: number): number;
  /** BTRFS_IOC_SUBVOL_SETFLAGS: the subvolume's owner (or CAP_FOWNER) may set or clear BTRFS_SUBVOL_RDONLY. */
  btrfs_subvol_setflags(fd: number, flags: number): void;
  /** BTRFS_IOC_SNAP_DESTROY_V2: deletes subvolume `name` below dirfd whatever it holds (CAP_SYS_ADMIN, or the user_subvol_rm_allowed mount option). */
  btrfs_snap_destroy(dirfd: number, name: PathArg): void;
}

/** The addon's own faces: fstat and fstatat fill the stat block (`block` below) instead of returning an object. */
interface Addon extends Omit<Sys, 'fstat' | 'fstatat' | 'readdir'> {
  constants: Constants;
  /** The interface revision (see ADDON_REVISION); undefined in builds older than the check. */
  revision: number | undefined;
  fstat(fd: number, out: Uint8Array): void;
  fstatat(dirfd: number, path: PathArg, flags: number, out: Uint8Array): void;
  /** fstatat of each name (joined by '/') into block i of out; the [index, errno] of each name that failed. */
  fstatat_each(dirfd: number, names: string, flags: number, out: Uint8Array): [number, number][];
  /** The UTF-8 names joined by '/', their DT_* types, and [index, bytes] for each name that is not UTF-8. */
  readdir(fd: number): [string, Uint8Array, [number, Buffer][]];
}

/**
 * The addon interface this code expects, built in from native/revision.json: the one source
 * of the number, which binding.gyp also compiles into the addon (native/constants.cc exports
 * it as `revision`). Bumped there with every change to a function's arguments or results.
 */
export const ADDON_REVISION: number = revisionFile.revision;

/**
 * The error an import meets when the addon cannot be loaded: one line with the way out (an
 * install that skipped or was refused its script leaves it unbuilt), Node's code kept, or
 * MODULE_NOT_FOUND where none was built; the loader's own error (its paths tried) as cause.
 */
function notLoaded(root: string, err: unknown): Error {
  const reason = (err instanceof Error ? err.message : String(err)).split('\n')[0]!.replace(/ Tried:$/, '');
  const code = (err as { code?: unknown } | null)?.code;
  return Object.assign(
    new Error(
      `treeseal's native addon cannot be loaded from ${root}: ${reason} Is it built? \`npm rebuild treeseal\` builds it ` +
        '(where npm asks for install scripts to be approved: `npm install-scripts approve treeseal` first)',
      { cause: err },
    ),
    { code: typeof code === 'string' ? code : 'MODULE_NOT_FOUND' },
  );
}

function load(): Addon {
  if (process.platform !== 'linux') {
    throw new Error(`treeseal supports Linux only; this platform is ${process.platform}`);
  }
  const require = createRequire(import.meta.url);
  const root = fileURLToPath(new URL('../..', import.meta.url));
  let addon: Addon;
  try {
    // Where `npm install` builds it, at once (1.4 ms less a process than `bindings`, which loads itself and tries its list
    // of places); `bindings` finds any other build (Debug, another layout).
    const built = `${root}build/Release/treeseal.node`;
    const bindings = (): Addon => (require('bindings') as (opts: { bindings: string; module_root: string }) => Addon)({ bindings: 'treeseal.node', module_root: root });
    addon = existsSync(built) ? (require(built) as Addon) : bindings();
  } catch (err) {
    throw notLoaded(root, err);
  }
  if (addon.revision !== ADDON_REVISION) {
    throw new Error(
      `treeseal's native addon in ${root} is revision ${String(addon.revision ?? 'unknown')}, this code needs ${ADDON_REVISION}: ` +
        'it was built from other sources; rebuild it (`npm rebuild treeseal`, or `npx node-gyp rebuild` in a checkout)',
    );
  }
  return addon;
}

export const addon: Addon = load();

/**
 * This thread's stat block, filled by the addon's fstat and fstatat in place (FillStat in
 * native/stat.cc): ten 8-byte slots in host byte order, dev and ino (uint64), mtime and
 * ctime (int64 ns), then mode, nlink, uid, gid, size, blocks (doubles). A Stat is read out
 * of it at once, so the block is never shared.
 */
const block = new ArrayBuffer(10 * 8);
const blockBytes = new Uint8Array(block);
const ids = new BigUint64Array(block, 0, 2);
const times = new BigInt64Array(block, 16, 2);
const nums = new Float64Array(block, 32, 6);

/** The addon's readdir, one DirEntry per entry. */
function readdir(fd: number): DirEntry[] {
  const [joined, types, odd] = addon.readdir(fd);
  if (types.length === 0) return [];
  const names: (string | Buffer)[] = joined.split('/');
  for (const [i, raw] of odd) names[i] = raw;
  const out = new Array<DirEntry>(types.length);
  for (let i = 0; i < types.length; i++) out[i] = { name: names[i]!, type: types[i]! };
  return out;
}

function readBlock(): Stat {
  return { dev: ids[0]!, ino: ids[1]!, mode: nums[0]!, nlink: nums[1]!, uid: nums[2]!, gid: nums[3]!, size: nums[4]!, blocks: nums[5]!, mtimeNs: times[0]!, ctimeNs: times[1]! };
}

/** The real syscall layer, without the constants table. */
export const sys: Sys = {
  openat: addon.openat,
  openat2: addon.openat2,
  close: addon.close,
  close_range: addon.close_range,
  pipe2: addon.pipe2,
  fstat: (fd) => {
    addon.fstat(fd, blockBytes);
    return readBlock();
  },
  fstatat: (dirfd, path, flags) => {
    addon.fstatat(dirfd, path, flags, blockBytes);
    return readBlock();
  },
  statx: addon.statx,
  fstatfs: addon.fstatfs,
  readdir,
  mkdirat: addon.mkdirat,
  unlinkat: addon.unlinkat,
  renameat2: addon.renameat2,
  linkat: addon.linkat,
  symlinkat: addon.symlinkat,
  readlinkat: addon.readlinkat,
  pread: addon.pread,
  pwrite: addon.pwrite,
  lseek: addon.lseek,
  ftruncate: addon.ftruncate,
  fsync: addon.fsync,
  fdatasync: addon.fdatasync,
  sync_file_range: addon.sync_file_range,
  syncfs: addon.syncfs,
  fchmod: addon.fchmod,
  fchmodat: addon.fchmodat,
  fchown: addon.fchown,
  fchownat: addon.fchownat,
  futimens: addon.futimens,
  utimensat: addon.utimensat,
  flock: addon.flock,
  ficlone: addon.ficlone,
  copy_file_range: addon.copy_file_range,
  btrfs_subvol_create: addon.btrfs_subvol_create,
  btrfs_snap_create: addon.btrfs_snap_create,
  btrfs_subvol_getflags: addon.btrfs_subvol_getflags,
  btrfs_subvol_setflags: addon.btrfs_subvol_setflags,
  btrfs_snap_destroy: addon.btrfs_snap_destroy,
};
