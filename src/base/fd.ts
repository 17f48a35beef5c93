// fd.ts: fd ownership (`using` with Fd), the one parent walk, root opens that traverse no symlink, beneath-root opens, removal without following links.
import { randomBytes } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import { basename } from 'node:path';

import { invalidArgType } from './arg-errors.js';
import { SealError } from './errors.js';
import { escapePath, isWellFormed, nameText } from './paths.js';
import { openUpSubvolume } from './subvolume.js';
import { throwIfRefused } from './refusal.js';
import { sleepSync } from './sleep.js';
import {
  AT_EMPTY_PATH,
  AT_FDCWD,
  AT_REMOVEDIR,
  AT_SYMLINK_NOFOLLOW,
  DT_DIR,
  DT_UNKNOWN,
  LOCK_EX,
  LOCK_NB,
  O_DIRECTORY,
  O_NOFOLLOW,
  O_PATH,
  O_RDONLY,
  RENAME_NOREPLACE,
  RESOLVE_BENEATH,
  RESOLVE_NO_MAGICLINKS,
  RESOLVE_NO_SYMLINKS,
  RESOLVE_NO_XDEV,
  STATX_ATTR_MOUNT_ROOT,
  isDir,
  isLink,
} from '../sys/constants.js';
import { hasCode, systemError } from '../sys/errno.js';
import { Fd } from '../sys/fd.js';
import { sameObject } from '../sys/identity.js';
import type { Stat, Sys } from '../sys/native.js';

export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const PLACE_FLAGS = O_PATH | O_DIRECTORY | O_NOFOLLOW;
const BENEATH = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
const NO_SYMLINKS = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
const OPENAT2_RETRIES = 8;
/** The longest path one call takes, with its NUL (Linux's PATH_MAX). */
const PATH_MAX = 4096;

export { Fd };

/** Owns fd: `using dir = own(sys, sys.openat(...))` closes it when the scope ends, whatever happens. */
export function own(sys: Sys, fd: number): Fd {
  return new Fd(fd, sys);
}

/** Opens one path component below dirfd (index: its place in the walk) and returns the fd, or null to stop the walk there. */
export type WalkStep = (dirfd: number, name: string, index: number) => number | null;

/** Opens a child directory of dirfd without following a symlink (the default walk step). */
export function openChildDir(sys: Sys, dirfd: number, name: string | Buffer): number {
  return sys.openat(dirfd, name, DIR_FLAGS);
}

/**
 * Gives the directory dirfd/name u+rwx, never following a link: the name is opened as a
 * path only (O_PATH, a directory or nothing, and no hard link names a directory) and
 * chmodded through that fd (fchmodat2 with AT_EMPTY_PATH; before kernel 6.6, fchmodat of
 * the fd's own /proc/self/fd link), so a name swapped meanwhile
 * changes nothing elsewhere. Returns false, having changed nothing, where this user may
 * not chmod it (EPERM: another user's).
 */
export function openUpDir(sys: Sys, dirfd: number, name: string | Buffer): boolean {
  using path = own(sys, sys.openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW));
  const mode = (sys.fstat(path.fd).mode & 0o7777) | 0o700;
  try {
    try {
      sys.fchmodat(path.fd, '', mode, AT_EMPTY_PATH);
    } catch (err) {
      // No fchmodat2 (kernels before 6.6): the fd's own link in /proc names that directory, never a path walked again.
      if (!hasCode(err, 'ENOSYS')) throw err;
      sys.fchmodat(AT_FDCWD, `/proc/self/fd/${path.fd}`, mode, 0);
    }
    return true;
  } catch (err) {
    if (hasCode(err, 'EPERM')) return false;
    throw err;
  }
}

/**
 * The error for a directory dirfd/name this user may neither move or empty nor chmod so it
 * could (another user's, locked, or one made immutable): SEAL_IO naming it (as `shown`,
 * also its `path`), its owner and its mode, `cause` the system's error; that error itself
 * when the name is no longer a directory.
 */
export function lockedDirError(sys: Sys, dirfd: number, name: string | Buffer, err: unknown, shown = escapePath(name)): unknown {
  let st;
  try {
    st = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  } catch {
    return err;
  }
  // Swapped for a file or a link meanwhile: the system's error says what there is to say.
  if (!isDir(st.mode)) return err;
  const errno = (err as NodeJS.ErrnoException).code ?? 'EACCES';
  const uid = process.geteuid?.();
  const whose = st.uid === uid ? `this user's (uid ${uid}), with mode ${modeText(st.mode)}, which it may not move or empty, nor chmod so it could (is it immutable?)` : `uid ${st.uid} with mode ${modeText(st.mode)}, which this user (uid ${uid ?? '?'}) may not move or empty, nor chmod so it could; its owner or root must remove it`;
  return new SealError('SEAL_IO', `${errno}: ${shown} is a directory of ${whose}`, { path: shown, cause: err });
}

/** Whether err is lockedDirError's SealError (not the system's error it passes on). */
export function isLockedDir(err: unknown): boolean {
  return err instanceof SealError && err.code === 'SEAL_IO' && hasCode(err.cause, 'EACCES', 'EPERM');
}

function modeText(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/**
 * openChildDir for a directory the caller may repair (a clone's, which an agent may have
 * made unreadable, mode 0 or 0100): where the open is refused with EACCES, the directory
 * is given u+rwx (openUpDir) and opened again. Without the right to chmod it (another
 * user's): lockedDirError, naming it as `shown` (default: its name; a function is asked
 * only then: a path thousands of levels deep is not spelled out at every level).
 */
export function openRepairableDir(sys: Sys, dirfd: number, name: string | Buffer, shown?: string | (() => string)): number {
  return openOpenedUp(sys, dirfd, name, (err) => lockedDirError(sys, dirfd, name, err, typeof shown === 'function' ? shown() : shown));
}

/** openChildDir, giving a directory refused with EACCES u+rwx (openUpDir) and opening it again; one this user may not chmod throws `refused(err)`. */
function openOpenedUp(sys: Sys, dirfd: number, name: string | Buffer, refused: (err: unknown) => unknown, open = openChildDir): number {
  try {
    return open(sys, dirfd, name);
  } catch (err) {
    if (!hasCode(err, 'EACCES')) throw err;
    if (!openUpDir(sys, dirfd, name)) throw refused(err);
    return open(sys, dirfd, name);
  }
}

/**
 * openChildDir that fails EXDEV rather than enter a mount point (openat2's RESOLVE_NO_XDEV).
 * Where openat2 is missing (ENOSYS) or forbidden (EPERM, a sandbox's filter), the directory
 * is opened and then refused when statx says it is the root of a mount (through its fd's own
 * link in /proc, Linux 5.8; without either, it is entered as before).
 */
function openNoXdev(sys: Sys, dirfd: number, name: string | Buffer): number {
  try {
    return sys.openat2(dirfd, name, DIR_FLAGS, 0, RESOLVE_NO_XDEV);
  } catch (err) {
    if (!hasCode(err, 'ENOSYS', 'EPERM')) throw err;
  }
  const fd = openChildDir(sys, dirfd, name);
  let mountRoot = false;
  try {
    mountRoot = (sys.statx(AT_FDCWD, `/proc/self/fd/${fd}`, 0).attributes & STATX_ATTR_MOUNT_ROOT) !== 0;
  } catch {
    // no /proc: not told apart
  }
  if (!mountRoot) return fd;
  sys.close(fd);
  throw systemError(-osConstants.errno.EXDEV, 'openat', nameText(name));
}

/** One entry of a directory: not empty, `.` or `..`, and no `/` (so never a way up or through a link). */
export function isPlainName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/');
}

/** fstatat(no-follow), or null when the name does not exist. */
export function statOrNull(sys: Sys, dirfd: number, name: string | Buffer): Stat | null {
  try {
    return sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return null;
    throw err;
  }
}

/** Whether `name` in parentFd (not followed) is still the object `st` was taken of; false when the name is gone. */
export function stillNamed(sys: Sys, parentFd: number, name: string, st: Stat): boolean {
  try {
    return sameObject(sys.fstatat(parentFd, name, AT_SYMLINK_NOFOLLOW), st);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return false;
    throw err;
  }
}

/**
 * The one parent walk: opens parts[0], parts[1], … each below the one before, starting
 * at rootFd, through `step` (default: a no-follow directory open), closing each parent
 * as soon as its child is open. Returns the last one opened, owned (rootFd borrowed
 * when none was). A step that returns null ends the walk early. Whatever fails, no fd
 * the walk opened stays open.
 */
export function walkDown(sys: Sys, rootFd: number, parts: readonly string[], step?: WalkStep): Fd {
  const open = step ?? ((dirfd: number, name: string) => openChildDir(sys, dirfd, name));
  for (const part of parts) {
    // Each step is one name inside the directory above it: never `..`, `.` or a path.
    if (!isPlainName(part)) {
      throw new SealError('SEAL_BAD_PATH', `not a plain name below its root: ${escapePath(parts.join('/'))}`);
    }
  }
  let current = Fd.borrow(rootFd, sys);
  try {
    for (let i = 0; i < parts.length; i++) {
      const fd = open(current.fd, parts[i]!, i);
      if (fd === null) break;
      const above = current;
      current = new Fd(fd, sys);
      // The one below is held first: a close of the one above that fails leaves nothing open.
      above[Symbol.dispose]();
    }
    return current;
  } catch (err) {
    current[Symbol.dispose]();
    throw err;
  }
}

/**
 * Checks a file's path the API was given: one that names a directory (an empty or `.`/`..`
 * last component, a trailing slash, which the kernel refuses for a file with ENOTDIR) is
 * SEAL_BAD_PATH `not a file path`; the rest as checkRootPath, the path named as `file`.
 */
export function checkFilePath(path: string): string {
  const name = basename(path);
  if (name === '' || name === '.' || name === '..' || path.endsWith('/')) throw new SealError('SEAL_BAD_PATH', `not a file path: ${escapePath(path)}`);
  return checkRootPath(path, 'file');
}

/**
 * Checks a root path the API was given: a string (else Node's TypeError), absolute, canonical (no `.`, `..`
 * or empty components; one trailing slash is dropped), no NUL. Returns it.
 */
export function checkRootPath(path: unknown, label: string): string {
  if (typeof path !== 'string') throw invalidArgType(label, 'string', path);
  if (path === '') throw new SealError('SEAL_BAD_PATH', `${label} must be the path of a directory`);
  if (path.includes('\0') || !isWellFormed(path)) throw new SealError('SEAL_BAD_PATH', `${label} is not a valid path: ${escapePath(path)}`);
  if (!path.startsWith('/')) throw new SealError('SEAL_BAD_PATH', `${label} must be an absolute path: ${escapePath(path)}`);
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (trimmed !== '/' && trimmed.slice(1).split('/').some((p) => p === '' || p === '.' || p === '..')) {
    throw new SealError('SEAL_BAD_PATH', `${label} must be a canonical path (no '.', '..' or empty components): ${escapePath(path)}`);
  }
  return trimmed;
}

function rootParts(path: string): string[] {
  return path === '/' ? [] : path.slice(1).split('/');
}

/** Per-component O_NOFOLLOW walk from `/`, for kernels without openat2 (ENOSYS) or sandboxes that forbid it (EPERM). */
function walkFromRoot(sys: Sys, parts: readonly string[], flags: number): number {
  using root = own(sys, sys.openat(AT_FDCWD, '/', flags));
  if (parts.length === 0) return root.release();
  // The directories on the way are only passed through (O_PATH: search permission, as a path lookup needs), the last one opened.
  using parent = walkDown(sys, root.fd, parts.slice(0, -1), (dirfd, name) => openPathDir(sys, dirfd, name));
  return sys.openat(parent.fd, parts[parts.length - 1]!, flags);
}

/**
 * A directory dirfd/name opened only as a place to look names up in (O_PATH, never
 * through a link): what a path lookup needs of a directory on its way, search
 * permission, and not read permission (a root-owned 0711 directory).
 */
function openPathDir(sys: Sys, dirfd: number, name: string): number {
  return sys.openat(dirfd, name, PLACE_FLAGS);
}

/** mkdirat(0700) where nothing stands yet; an existing entry of any type is left to the open that follows. True when this call made it. */
export function mkdirIfMissing(sys: Sys, dirfd: number, name: string): boolean {
  try {
    sys.mkdirat(dirfd, name, 0o700);
    return true;
  } catch (err) {
    if (!hasCode(err, 'EEXIST')) throw err;
    return false;
  }
}

/** openat2(RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) of an absolute path: the check and the open are one step. */
function openNoSymlinks(sys: Sys, path: string, flags: number): number {
  for (let attempt = 0; ; attempt++) {
    try {
      return sys.openat2(AT_FDCWD, path, flags, 0, NO_SYMLINKS);
    } catch (err) {
      if (hasCode(err, 'ENOSYS', 'EPERM')) return walkFromRoot(sys, rootParts(path), flags);
      if (hasCode(err, 'EAGAIN') && attempt < OPENAT2_RETRIES) continue;
      throw err;
    }
  }
}

/** The first component of an absolute path that is a symlink (its prefix length), or -1; for error messages only. */
function firstLink(sys: Sys, parts: readonly string[]): number {
  for (let i = 1; i <= parts.length; i++) {
    try {
      if (isLink(sys.fstatat(AT_FDCWD, `/${parts.slice(0, i).join('/')}`, AT_SYMLINK_NOFOLLOW).mode)) return i;
    } catch {
      return -1;
    }
  }
  return -1;
}

function rootError(sys: Sys, err: unknown, path: string, label: string): SealError {
  const shown = escapePath(path);
  if (hasCode(err, 'ELOOP', 'ENOTDIR')) {
    const parts = rootParts(path);
    const link = firstLink(sys, parts);
    if (link === parts.length) return new SealError('SEAL_SYMLINK', `${label} must be a real directory, not a symlink: ${shown}`, { path, cause: err });
    if (link > 0 || hasCode(err, 'ELOOP')) return new SealError('SEAL_SYMLINK', `${label} must not traverse symlinks: ${shown}`, { path, cause: err });
    return new SealError('SEAL_BAD_PATH', `${label} must be a real directory: ${shown}`, { path, cause: err });
  }
  throwIfRefused(err, `${label} cannot be opened: ${shown}`, path);
  return new SealError('SEAL_UNAVAILABLE', `${label} is unavailable: ${shown}: ${escapePath((err as Error).message)}`, { path, cause: err });
}

/**
 * Opens a root directory the API was given (source, store, clone, stage parent,
 * freeze root, a file's parent): absolute, canonical, and no component of it may be
 * a symlink (the seed's real_directory). Errors name `label`.
 */
export function openRealDir(sys: Sys, path: string, label: string): number {
  return openReal(sys, path, label, DIR_FLAGS);
}

/**
 * openRealDir for a directory only names are made, opened, renamed or removed in (the
 * *at calls' dirfd): opened O_PATH, so search permission is all it needs, as a shell's
 * `mkdir parent/name` (a directory of mode 0311 or a root-owned 0711 one). Not for
 * listing, fsync, flock or an ioctl (EBADF: removeAt given one as the parent of a read-only
 * btrfs subvolume cannot destroy it whole, and clears its flag instead).
 */
export function openRealPlace(sys: Sys, path: string, label: string): number {
  return openReal(sys, path, label, PLACE_FLAGS);
}

function openReal(sys: Sys, path: string, label: string, flags: number): number {
  const checked = checkRootPath(path, label);
  try {
    return openNoSymlinks(sys, checked, flags);
  } catch (err) {
    throw rootError(sys, err, checked, label);
  }
}

/**
 * openRealDir that first creates missing components (0700), one at a time, never through
 * a link (mkdir -p for a store). Where it fails, the directories it made are removed
 * again, deepest first, each by its name in the directory it was made in (still open).
 */
export function makeRealDir(sys: Sys, path: string, label: string): number {
  const checked = checkRootPath(path, label);
  // A path one call cannot take (PATH_MAX: 4096 bytes with its NUL) could be made a component at a time, but
  // never opened again by it: refused before anything is made.
  const bytes = Buffer.byteLength(checked);
  if (bytes >= PATH_MAX) {
    throw new SealError('SEAL_LIMIT', `${label} path is longer than one system call takes (${bytes} bytes, at most ${PATH_MAX - 1}): ${escapePath(checked)}`, { path: checked });
  }
  const parts = rootParts(checked);
  const made: { parent: Fd; name: string }[] = [];
  let current = own(sys, sys.openat(AT_FDCWD, '/', DIR_FLAGS));
  try {
    for (const [i, part] of parts.entries()) {
      let createdHere = false;
      try {
        sys.mkdirat(current.fd, part, 0o700);
        createdHere = true;
      } catch (err) {
        if (!hasCode(err, 'EEXIST')) throw err;
      }
      // A parent that holds a directory made here stays open until the walk is done; another is closed (a failed close ignored, as the walk's).
      if (createdHere) made.push({ parent: current, name: part });
      // Directories on the way as paths only (search permission is all a lookup needs: a root-owned 0711 directory), the store itself opened.
      const next = own(sys, i < parts.length - 1 ? openPathDir(sys, current.fd, part) : openChildDir(sys, current.fd, part));
      if (!createdHere) current[Symbol.dispose]();
      current = next;
    }
    return current.release();
  } catch (err) {
    if (!made.some((m) => m.parent === current)) current[Symbol.dispose]();
    for (let i = made.length - 1; i >= 0; i--) {
      try {
        sys.unlinkat(made[i]!.parent.fd, made[i]!.name, AT_REMOVEDIR);
      } catch {
        // not empty (someone else's meanwhile) or gone: left as it is
      }
    }
    throw rootError(sys, err, checked, label);
  } finally {
    for (const m of made) m.parent[Symbol.dispose]();
  }
}

function walkBeneath(sys: Sys, rootFd: number, parts: readonly string[], flags: number, mode: number): number {
  using parent = walkDown(sys, rootFd, parts.slice(0, -1));
  return sys.openat(parent.fd, parts[parts.length - 1]!, flags | O_NOFOLLOW, mode);
}

/**
 * Opens `parts` below rootFd without crossing a symlink or leaving the root:
 * openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), or, where
 * the kernel lacks it (ENOSYS), a sandbox forbids it (EPERM) or the path is longer than
 * one call takes (ENAMETOOLONG: past PATH_MAX, 4096 bytes, as a deep tree's is; a name
 * too long for one component fails the walk the same way), a per-component O_NOFOLLOW
 * walk. EAGAIN (a concurrent rename) is retried a bounded number of times.
 */
export function openBeneath(sys: Sys, rootFd: number, parts: readonly string[], flags: number, mode = 0): number {
  if (parts.length === 0) throw new SealError('SEAL_BAD_PATH', 'empty path below root');
  const joined = parts.join('/');
  for (let attempt = 0; ; attempt++) {
    try {
      return sys.openat2(rootFd, joined, flags | O_NOFOLLOW, mode, BENEATH);
    } catch (err) {
      if (hasCode(err, 'ENOSYS', 'EPERM', 'ENAMETOOLONG')) return walkBeneath(sys, rootFd, parts, flags, mode);
      if (hasCode(err, 'EAGAIN') && attempt < OPENAT2_RETRIES) continue;
      throw err;
    }
  }
}

/**
 * Removes `name` below parentFd: a non-directory is unlinked (a symlink is never
 * followed); a directory is made writable through its own fd, emptied and removed.
 * A missing entry, or one removed meanwhile, is fine. `type` is the name's getdents d_type when known (it
 * saves a stat per entry; a stale one is caught by the unlink or the open). The walk keeps
 * its own stack (an fd and a listing a level), not the thread's, and at most
 * REMOVAL_LEVELS deep: a directory met below that is first moved up into the top one
 * (one rename, on the same filesystem) and removed from there, so a tree of any depth (an
 * agent's 50,000 levels, past the fds a process may hold) takes a bounded number of fds.
 * No directory below name is entered across a mount (SEAL_BUSY), nor name itself when
 * `inside` (an entry of a directory being emptied: emptyDir).
 */
export function removeAt(sys: Sys, parentFd: number, name: string | Buffer, type: number = DT_UNKNOWN, inside = false): void {
  const stack: Level[] = [];
  try {
    // `inside`: name is an entry of a directory being emptied, so a mount there is as much not ours as one below it.
    const top = enterRemoval(sys, parentFd, name, type, inside);
    if (top !== undefined) stack.push(top);
    while (stack.length > 0) {
      const level = stack[stack.length - 1]!;
      const entry = level.entries[level.next++];
      if (entry !== undefined) {
        if (stack.length >= REMOVAL_LEVELS && raised(sys, level.dir.fd, entry, raiseTarget(sys, stack))) continue;
        const below = enterRemoval(sys, level.dir.fd, entry.name, entry.type, true);
        if (below !== undefined) stack.push(below);
        continue;
      }
      stack.pop();
      level.dir.close();
      try {
        sys.unlinkat(level.parentFd, level.name, AT_REMOVEDIR);
      } catch (err) {
        // Removed meanwhile (a concurrent sweep, or the build's own cleanup): gone is what was asked.
        if (!hasCode(err, 'ENOENT')) throw err;
      }
    }
  } finally {
    for (const level of stack) level.dir[Symbol.dispose]();
  }
}

/** The most directories removeAt holds open at once, one a level (see raised). */
export const REMOVAL_LEVELS = 128;

/** A level's device (its filesystem, or btrfs subvolume), asked once. */
function devOf(sys: Sys, level: Level): bigint {
  return (level.dev ??= sys.fstat(level.dir.fd).dev);
}

/**
 * Where a deep directory is moved up to: the shallowest level of the removal on the same
 * device as the deepest, so the rename stays within one filesystem and btrfs subvolume (a
 * clone's copy root on btrfs is a subvolume of its own inside the stage: every rename into
 * the top one failed EXDEV, and the removal held a descriptor per level again). A device
 * once left is never met again below (a directory holds its own subvolume's entries, or
 * the roots of nested ones; a removal never crosses a mount).
 */
function raiseTarget(sys: Sys, stack: Level[]): Level {
  const dev = devOf(sys, stack[stack.length - 1]!);
  let at = stack.length - 1;
  while (at > 0 && devOf(sys, stack[at - 1]!) === dev) at--;
  return stack[at]!;
}

/**
 * Moves the directory `entry` of the one open at dirFd up into a directory of the removal
 * far above it (`top`, see raiseTarget), under a new name, as an entry it will remove: true
 * once moved. False for what is not a directory, or one that cannot be moved (a mount
 * point: its removal says so as before; no level above on its subvolume), which the
 * removal enters where it is. One this user may not write (renaming a directory rewrites
 * its `..`) is opened up first, as removal would.
 */
function raised(sys: Sys, dirFd: number, entry: { name: string | Buffer; type: number }, top: Level): boolean {
  if (top.dir.fd === dirFd || (entry.type !== DT_DIR && entry.type !== DT_UNKNOWN)) return false;
  for (let attempt = 0; ; attempt++) {
    const name = `.treeseal-raised-${randomBytes(6).toString('hex')}`;
    try {
      sys.renameat2(dirFd, entry.name, top.dir.fd, name, RENAME_NOREPLACE);
    } catch (err) {
      if (hasCode(err, 'EEXIST') && attempt < 8) continue;
      if (hasCode(err, 'EACCES') && attempt === 0 && openUpQuietly(sys, dirFd, entry.name)) continue;
      return false;
    }
    top.entries.push({ name, type: DT_DIR });
    return true;
  }
}

/** openUpDir, false for what is not a directory (or gone) as for one this user may not chmod. */
function openUpQuietly(sys: Sys, dirFd: number, name: string | Buffer): boolean {
  try {
    return openUpDir(sys, dirFd, name);
  } catch {
    return false;
  }
}

/** A directory removeAt is emptying: open, made writable, listed; `next` is the entry it removes next. */
interface Level {
  parentFd: number;
  name: string | Buffer;
  dir: Fd;
  entries: ReturnType<Sys['readdir']>;
  next: number;
  /** Its device, once raiseTarget has asked. */
  dev?: bigint;
}

/**
 * removeAt's step for one name: a non-directory unlinked (undefined), or a directory opened,
 * made writable and listed, to be emptied and removed (undefined when it is gone, or was
 * deleted whole: a read-only btrfs subvolume).
 */
function enterRemoval(sys: Sys, parentFd: number, name: string | Buffer, type: number, below = false): Level | undefined {
  let dir = type === DT_DIR;
  if (type === DT_UNKNOWN) {
    try {
      dir = isDir(sys.fstatat(parentFd, name, AT_SYMLINK_NOFOLLOW).mode);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) return undefined;
      throw err;
    }
  }
  if (!dir) {
    try {
      sys.unlinkat(parentFd, name, 0);
      return undefined;
    } catch (err) {
      if (hasCode(err, 'ENOENT')) return undefined;
      // A file bound there (a mount point): left, as a directory bound there is.
      if (hasCode(err, 'EBUSY')) throw mountPointError(name, err);
      // A directory after all (d_type was stale): remove it as one.
      if (!hasCode(err, 'EISDIR') || type === DT_UNKNOWN) throw err;
    }
  }
  let fd: number;
  try {
    // One this user may not list (an agent's `chmod 0300` in a clone, whose old tree a materialize swaps out) is opened
    // up first, as openUp would once open; another user's is refused as before (EACCES).
    // Below the top, never into another mount (RESOLVE_NO_XDEV): a directory bound there is not the tree's to empty.
    fd = openOpenedUp(sys, parentFd, name, (err) => err, below ? openNoXdev : openChildDir);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return undefined;
    if (type !== DT_UNKNOWN && hasCode(err, 'ENOTDIR', 'ELOOP')) return enterRemoval(sys, parentFd, name, DT_UNKNOWN, below);
    if (hasCode(err, 'EXDEV')) throw mountPointError(name, err);
    throw err;
  }
  const opened = own(sys, fd);
  try {
    if (openUp(sys, opened.fd, parentFd, name) === 'destroyed') {
      opened.close();
      return undefined;
    }
    return { parentFd, name, dir: opened, entries: sys.readdir(opened.fd), next: 0 };
  } catch (err) {
    opened.close();
    if (hasCode(err, 'ENOENT')) return undefined;
    throw err;
  }
}

/** SEAL_BUSY for a mount point a removal met (name: its last component; the caller's message says where). */
function mountPointError(name: string | Buffer, cause: unknown): SealError {
  return new SealError('SEAL_BUSY', `${escapePath(nameText(name))} is a mount point: a removal never crosses into another filesystem (unmount it first)`, { cause });
}

/** removeAt after a failure: a second failure must not mask the first (what it leaves is swept or retried later). */
export function removeQuietly(sys: Sys, parentFd: number, name: string | Buffer): void {
  try {
    removeAt(sys, parentFd, name);
  } catch {
    // the first error says what went wrong
  }
}

/** Removes everything inside the directory open at fd. */
export function emptyDir(sys: Sys, fd: number): void {
  if (openUp(sys, fd, undefined, '.') === 'destroyed') return;
  for (const entry of sys.readdir(fd)) removeAt(sys, fd, entry.name, entry.type, true);
}

/**
 * Removes the directory open at fd, named `name` in parentFd: emptied through fd, its name
 * removed only while it still names that directory. In a parent others can write, a
 * directory swapped in under the name (theirs, or one they could not empty) is never what
 * is removed; the directory itself, emptied, stays wherever it was moved.
 */
export function removeOwnDir(sys: Sys, parentFd: number, name: string, fd: number): void {
  const own = sys.fstat(fd);
  emptyDir(sys, fd);
  try {
    if (stillNamed(sys, parentFd, name, own)) sys.unlinkat(parentFd, name, AT_REMOVEDIR);
  } catch (err) {
    if (!hasCode(err, 'ENOENT')) throw err;
  }
}

/**
 * Makes the directory parentFd/name, open at fd, writable to be emptied. A read-only btrfs
 * subvolume (its chmod is EROFS) is deleted whole where the kernel allows ('destroyed',
 * nothing left to do), else its flag is cleared (see openUpSubvolume).
 */
function openUp(sys: Sys, fd: number, parentFd: number | undefined, name: string | Buffer): 'destroyed' | undefined {
  try {
    sys.fchmod(fd, 0o700);
  } catch (err) {
    if (hasCode(err, 'EROFS')) {
      const opened = openUpSubvolume(sys, parentFd, name, fd);
      if (opened === undefined) throw err;
      if (opened === 'destroyed') return opened;
      sys.fchmod(fd, 0o700);
    } else if (!hasCode(err, 'EPERM')) throw err;
  }
  return undefined;
}

/** Takes fd's exclusive flock without waiting: false while another open file description holds it. */
export function tryFlock(sys: Sys, fd: number): boolean {
  try {
    sys.flock(fd, LOCK_EX | LOCK_NB);
    return true;
  } catch (err) {
    if (hasCode(err, 'EAGAIN', 'EWOULDBLOCK')) return false;
    throw err;
  }
}

/** The tries tryFlockAwhile makes however long they take: a loaded machine can keep a thread off the CPU past the whole wait. */
const FLOCK_TRIES = 5;

/**
 * tryFlock, tried again each millisecond while another holds the flock, for up to `ms` and
 * at least FLOCK_TRIES times: a store's sweep takes a lock file's flock to learn whether
 * its holder is gone, and lets go within microseconds; a live holder keeps it past the
 * wait. False once both are over.
 */
export function tryFlockAwhile(sys: Sys, fd: number, ms: number): boolean {
  const end = performance.now() + ms;
  for (let tries = 1; ; tries++) {
    if (tryFlock(sys, fd)) return true;
    if (tries >= FLOCK_TRIES && performance.now() >= end) return false;
    sleepSync(1);
  }
}

const LOCKED_DIR_ATTEMPTS = 8;

/** Opens and flocks parentFd/name; -1 when a sweep took or removed it between mkdir and flock. */
function lockNew(sys: Sys, parentFd: number, name: string): number {
  let fd: number;
  try {
    fd = sys.openat(parentFd, name, DIR_FLAGS);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return -1;
    throw err;
  }
  using dir = own(sys, fd);
  if (!tryFlock(sys, dir.fd)) return -1;
  // A sweep that won the lock first removed the name: this fd is of an unlinked directory.
  return stillNamed(sys, parentFd, name, sys.fstat(dir.fd)) ? dir.release() : -1;
}

/**
 * Makes a private directory `<prefix><hex>` (0700) below parentFd and holds its flock,
 * the mark sweeps respect. A sweep can take a directory between its mkdir and its
 * flock; then another name is tried. A failure removes what was made.
 */
export function makeLockedDir(sys: Sys, parentFd: number, prefix: string, hexBytes: number): { name: string; fd: number } {
  for (let attempt = 0; attempt < LOCKED_DIR_ATTEMPTS; attempt++) {
    const name = prefix + randomBytes(hexBytes).toString('hex');
    sys.mkdirat(parentFd, name, 0o700);
    let fd: number;
    try {
      fd = lockNew(sys, parentFd, name);
    } catch (err) {
      removeQuietly(sys, parentFd, name);
      throw err;
    }
    if (fd >= 0) return { name, fd };
    // Its lock was taken first (a sweep, which removes it; or a look that lets go at once, as diff's at a stage):
    // the empty directory this call made goes too, not left for a later sweep.
    try {
      sys.unlinkat(parentFd, name, AT_REMOVEDIR);
    } catch {
      // removed by the sweep, or no longer empty (someone else's now): left
    }
  }
  throw new SealError('SEAL_UNAVAILABLE', `a private directory could not be made: each new one was swept at once (${prefix}*)`);
}
