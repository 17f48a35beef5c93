// constants.ts: kernel flag values (from the addon, so they match the platform) and mode helpers.
import { addon } from './native.js';

function get(name: string): number {
  const value = addon.constants[name];
  if (value === undefined) throw new Error(`treeseal addon lacks constant ${name}`);
  return value;
}

export const O_RDONLY = get('O_RDONLY');
export const O_WRONLY = get('O_WRONLY');
export const O_RDWR = get('O_RDWR');
export const O_CREAT = get('O_CREAT');
export const O_EXCL = get('O_EXCL');
/** An unnamed file in the directory given, freed with its last fd unless linked in (linkat). */
export const O_TMPFILE = get('O_TMPFILE');
export const O_TRUNC = get('O_TRUNC');
export const O_APPEND = get('O_APPEND');
export const O_NOFOLLOW = get('O_NOFOLLOW');
export const O_DIRECTORY = get('O_DIRECTORY');
export const O_PATH = get('O_PATH');
export const CLOSE_RANGE_CLOEXEC = get('CLOSE_RANGE_CLOEXEC');
export const O_NONBLOCK = get('O_NONBLOCK');
export const O_CLOEXEC = get('O_CLOEXEC');
export const O_NOCTTY = get('O_NOCTTY');
export const AT_FDCWD = get('AT_FDCWD');
export const AT_SYMLINK_NOFOLLOW = get('AT_SYMLINK_NOFOLLOW');
export const AT_REMOVEDIR = get('AT_REMOVEDIR');
export const AT_EMPTY_PATH = get('AT_EMPTY_PATH');
export const AT_SYMLINK_FOLLOW = get('AT_SYMLINK_FOLLOW');
export const UTIME_NOW = get('UTIME_NOW');
export const UTIME_OMIT = get('UTIME_OMIT');
export const RESOLVE_NO_XDEV = get('RESOLVE_NO_XDEV');
export const RESOLVE_NO_MAGICLINKS = get('RESOLVE_NO_MAGICLINKS');
export const RESOLVE_NO_SYMLINKS = get('RESOLVE_NO_SYMLINKS');
export const RESOLVE_BENEATH = get('RESOLVE_BENEATH');
export const RESOLVE_IN_ROOT = get('RESOLVE_IN_ROOT');
export const SEEK_SET = get('SEEK_SET');
export const SEEK_CUR = get('SEEK_CUR');
export const SEEK_END = get('SEEK_END');
export const SEEK_DATA = get('SEEK_DATA');
export const SEEK_HOLE = get('SEEK_HOLE');
export const SYNC_FILE_RANGE_WAIT_BEFORE = get('SYNC_FILE_RANGE_WAIT_BEFORE');
export const SYNC_FILE_RANGE_WRITE = get('SYNC_FILE_RANGE_WRITE');
export const SYNC_FILE_RANGE_WAIT_AFTER = get('SYNC_FILE_RANGE_WAIT_AFTER');
export const TMPFS_MAGIC = get('TMPFS_MAGIC');
export const PROC_SUPER_MAGIC = get('PROC_SUPER_MAGIC');
export const SYSFS_MAGIC = get('SYSFS_MAGIC');
export const RAMFS_MAGIC = get('RAMFS_MAGIC');
export const OVERLAYFS_SUPER_MAGIC = get('OVERLAYFS_SUPER_MAGIC');
export const BTRFS_SUPER_MAGIC = get('BTRFS_SUPER_MAGIC');
export const BTRFS_SUBVOL_RDONLY = get('BTRFS_SUBVOL_RDONLY');
export const RENAME_NOREPLACE = get('RENAME_NOREPLACE');
export const RENAME_EXCHANGE = get('RENAME_EXCHANGE');
export const LOCK_SH = get('LOCK_SH');
export const LOCK_EX = get('LOCK_EX');
export const LOCK_NB = get('LOCK_NB');
export const LOCK_UN = get('LOCK_UN');
export const S_IFMT = get('S_IFMT');
export const S_IFREG = get('S_IFREG');
export const S_IFDIR = get('S_IFDIR');
export const S_IFLNK = get('S_IFLNK');
export const S_IFIFO = get('S_IFIFO');
export const S_IFSOCK = get('S_IFSOCK');
export const S_IFCHR = get('S_IFCHR');
export const S_IFBLK = get('S_IFBLK');
export const DT_UNKNOWN = get('DT_UNKNOWN');
export const DT_FIFO = get('DT_FIFO');
export const DT_CHR = get('DT_CHR');
export const DT_DIR = get('DT_DIR');
export const DT_BLK = get('DT_BLK');
export const DT_REG = get('DT_REG');
export const DT_LNK = get('DT_LNK');
export const DT_SOCK = get('DT_SOCK');
export const STATX_ATTR_IMMUTABLE = get('STATX_ATTR_IMMUTABLE');
export const STATX_ATTR_APPEND = get('STATX_ATTR_APPEND');
/** The file is the root of a mount (a mount point as its parent's filesystem sees it; Linux 5.8). */
export const STATX_ATTR_MOUNT_ROOT = get('STATX_ATTR_MOUNT_ROOT');

export const isDir = (mode: number): boolean => (mode & S_IFMT) === S_IFDIR;
export const isReg = (mode: number): boolean => (mode & S_IFMT) === S_IFREG;
export const isLink = (mode: number): boolean => (mode & S_IFMT) === S_IFLNK;
/** FIFOs, sockets and devices: never opened for reading by treeseal. */
export const isSpecial = (mode: number): boolean => !isDir(mode) && !isReg(mode) && !isLink(mode);
