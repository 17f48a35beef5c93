// freeze.ts: freeze (files 0400/0500, dirs 0500) and thaw (0600/0700) through fds, never following a link.
import { randomBytes } from 'node:crypto';

import { openChildDir, openRealDir, openRepairableDir, own, removeQuietly } from '../base/fd.js';
import { CHUNK_BYTES } from '../base/io.js';
import { fillBytes } from '../files/copy-file.js';
import { checkOptions, checkString } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import { escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, BTRFS_SUBVOL_RDONLY, DT_REG, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_WRONLY, isDir, isLink, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import type { ToolOptions } from '../base/offload.js';
import { checkSys, defineOp } from '../base/op.js';
import { frozenFileMode } from '../base/frozen.js';
import { subvolumeFlags, unsealSubvolume } from '../base/subvolume.js';
import { linkUnnamedAt, openUnnamedAt } from '../base/unnamed.js';

export interface ModePolicy {
  /** What a refusal's message calls the work (`freeze`, `thaw`). */
  name: string;
  file(mode: number): number;
  dir: number;
  /** Whether files are visited at all (a capture build already creates them frozen). */
  files: boolean;
  /**
   * A file with other names (st_nlink > 1: a hard link from outside the tree, or shared
   * with another snapshot) is replaced by a private copy with the new mode, owner and group
   * kept, instead of being chmodded: the shared inode keeps its mode and bytes.
   */
  unshare?: boolean;
}

export const FROZEN: ModePolicy = { name: 'freeze', file: frozenFileMode, dir: 0o500, files: true, unshare: true };
export const THAWED: ModePolicy = { name: 'thaw', file: () => 0o600, dir: 0o700, files: true, unshare: true };
export const FROZEN_DIRS: ModePolicy = { ...FROZEN, files: false, unshare: false };

/** chmod of a child that must not be a symlink: fchmodat2(AT_SYMLINK_NOFOLLOW), else open+fchmod. */
function chmodChild(sys: Sys, dirfd: number, name: string | Buffer, mode: number): void {
  try {
    sys.fchmodat(dirfd, name, mode, AT_SYMLINK_NOFOLLOW);
    return;
  } catch (err) {
    if (!hasCode(err, 'ENOSYS', 'EINVAL')) throw err;
  }
  using file = own(sys, sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  if (!isReg(sys.fstat(file.fd).mode)) throw new SealError('SEAL_CHANGED', `path changed while opening: ${escapePath(name)}`);
  sys.fchmod(file.fd, mode);
}

/** fchown's "leave it as it is" for a uid or gid ((uid_t)-1). */
const KEEP_ID = 0xffffffff;

function changed(rel: string): SealError {
  return new SealError('SEAL_CHANGED', `file changed while being copied: ${escapePath(rel)}`, { path: rel });
}

/** The same file, unwritten: what a private copy of it must have been made from. */
function sameContent(a: Stat, b: Stat): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.mode === b.mode && a.size === b.size && a.mtimeNs === b.mtimeNs;
}

/**
 * The name a private copy has between its making and its rename over the file
 * (`.treeseal-freeze-` or `.treeseal-thaw-` and 24 hex digits). A freeze or thaw killed
 * there leaves it; the next freeze or thaw of the tree removes it.
 */
const COPY_NAME = /^\.treeseal-(freeze|thaw)-[0-9a-f]{24}$/;

/**
 * Replaces dirfd/name, a regular file with other names (`seen`: its fstatat), by a
 * private copy (a reflink where the filesystem can) with `mode` and the file's owner and
 * group, renamed over it: the inode the other names share is never chmodded or written.
 * The copy is made unnamed (O_TMPFILE) and named only for the rename, so a freeze killed
 * while copying leaves nothing; where the filesystem makes no unnamed file, or one cannot
 * be linked in (no /proc, not root), it is made under its name (COPY_NAME) from the start.
 */
function unshareChild(sys: Sys, dirfd: number, name: string | Buffer, rel: string, seen: Stat, mode: number, work: string): void {
  using src = own(sys, sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  const before = sys.fstat(src.fd);
  if (!sameContent(before, seen)) throw changed(rel);
  const tmp = `.treeseal-${work}-${randomBytes(12).toString('hex')}`;
  const fill = (fd: number): void => {
    // The one fill every copy uses: a reflink, else copy_file_range, else a buffered copy of the data segments (holes stay holes).
    const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(before.size, CHUNK_BYTES)));
    fillBytes(sys, buffer, src.fd, fd, before.size, { clone: true, range: true, copy: { changed: () => changed(rel) } });
    // The file's owner and group (root thawing another user's tree must not take the file from them), then the mode
    // asked for, past the umask (a chown clears set-id bits).
    keepOwner(sys, fd, before);
    sys.fchmod(fd, mode);
    if (!sameContent(before, sys.fstat(src.fd)) || sys.fstat(fd).size !== before.size) throw changed(rel);
  };
  let named = false;
  try {
    let linked = false;
    const unnamed = inWritableDir(sys, dirfd, () => openUnnamedAt(sys, dirfd, 0o600));
    if (unnamed !== undefined) {
      using dst = unnamed;
      fill(dst.fd);
      named = linked = linkUnnamedAt(sys, dst.fd, dirfd, tmp);
    }
    if (!linked) {
      named = true;
      using dst = own(sys, inWritableDir(sys, dirfd, () => sys.openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600)));
      fill(dst.fd);
    }
    sys.renameat2(dirfd, tmp, dirfd, name, 0);
  } catch (err) {
    if (named) removeQuietly(sys, dirfd, tmp);
    throw err;
  }
}

/**
 * Runs fn, which makes or removes a name in dirfd. A directory a freeze already made 0500
 * (a tree frozen before, or a freeze that failed half way and is run again) is given u+w
 * when fn is refused (EACCES) and fn runs again: the freeze sets its mode again once its
 * entries are done.
 */
function inWritableDir<T>(sys: Sys, dirfd: number, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const mode = sys.fstat(dirfd).mode & 0o7777;
    if (!hasCode(err, 'EACCES') || (mode & 0o200) !== 0) throw err;
    sys.fchmod(dirfd, mode | 0o700);
    return fn();
  }
}

/**
 * Gives the copy the file's owner and group where this process may (root, or the group
 * one of the caller's): root thawing a user's tree leaves the user's files theirs. Where it
 * may not (EPERM), the copy stays the caller's, as any file the caller makes.
 */
function keepOwner(sys: Sys, fd: number, file: Stat): void {
  const made = sys.fstat(fd);
  if (made.uid === file.uid && made.gid === file.gid) return;
  try {
    sys.fchown(fd, made.uid === file.uid ? KEEP_ID : file.uid, made.gid === file.gid ? KEEP_ID : file.gid);
  } catch (err) {
    if (!hasCode(err, 'EPERM')) throw err;
  }
}

/** A thaw's chmod of a directory; a read-only btrfs subvolume (EROFS) has its flag cleared first (its owner or root may). */
function openUp(sys: Sys, fd: number, mode: number, rel: string): void {
  try {
    sys.fchmod(fd, mode);
  } catch (err) {
    if (!hasCode(err, 'EROFS')) throw err;
    const flags = subvolumeFlags(sys, fd);
    if (flags === undefined || (flags & BTRFS_SUBVOL_RDONLY) === 0) throw err;
    unsealSubvolume(sys, fd, flags, rel === '' ? '.' : rel);
    sys.fchmod(fd, mode);
  }
}

/** Directory levels below the root a walk goes at most (each level holds one fd open). */
const MAX_TREE_DEPTH = 4096;

/** A path for a message: a very deep one keeps its first and last components only. */
function shortPath(rel: string): string {
  const parts = rel.split('/');
  return escapePath(parts.length <= 8 ? rel : [...parts.slice(0, 3), '…', ...parts.slice(-2)].join('/'));
}

function tooDeep(rel: string): SealError {
  return new SealError('SEAL_LIMIT', `tree is deeper than ${MAX_TREE_DEPTH} levels: ${shortPath(rel)}`, { path: rel });
}

function specialFile(rel: string): SealError {
  return new SealError('SEAL_SPECIAL_FILE', `tree contains a special file: ${escapePath(rel)}`, { path: rel });
}

/** Runs fn on a listed entry: one removed or replaced since the listing (ENOENT, ENOTDIR) is SEAL_CHANGED, which a caller may retry. */
function vanished<T>(rel: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (hasCode(err, 'ENOENT', 'ENOTDIR')) throw new SealError('SEAL_CHANGED', `path changed while opening: ${escapePath(rel)}`, { path: rel, cause: err });
    throw err;
  }
}

/** What a walk does at each directory (entered: before listing it; left: after its entries) and each entry that is not a directory. */
interface TreeVisit {
  entered?(fd: number, rel: string): void;
  /** A file, link or special file (`st`: its fstatat). */
  other(dirfd: number, name: string | Buffer, rel: string, st: Stat): void;
  left?(fd: number, rel: string): void;
  /** Whether a directory's entries matter for files at all (false: regular files by d_type are skipped unseen). */
  files: boolean;
  /** A directory that cannot be opened or listed (EACCES) is passed over instead of failing the walk. */
  skipUnlisted?: boolean;
  /** Opens the directory dirfd/name (rel: its path in the tree); default openChildDir. */
  openDir?(dirfd: number, name: string | Buffer, rel: string): number;
}

interface Level {
  fd: number;
  owned: { [Symbol.dispose](): void } | undefined;
  rel: string;
  entries: ReturnType<Sys['readdir']>;
  next: number;
}

/**
 * Walks the tree open at fd (the directory itself first), a directory at a time on an
 * explicit stack, never a link: as deep as MAX_TREE_DEPTH on any thread's stack.
 */
function walkTree(sys: Sys, fd: number, visit: TreeVisit): void {
  const stack: Level[] = [];
  const enter = (dirFd: number, owned: Level['owned'], rel: string): void => {
    try {
      if (stack.length > MAX_TREE_DEPTH) throw tooDeep(rel);
      visit.entered?.(dirFd, rel);
      let entries: Level['entries'];
      try {
        entries = sys.readdir(dirFd);
      } catch (err) {
        if (!(visit.skipUnlisted === true && hasCode(err, 'EACCES'))) throw err;
        entries = [];
      }
      stack.push({ fd: dirFd, owned, rel, entries, next: 0 });
    } catch (err) {
      owned?.[Symbol.dispose]();
      throw err;
    }
  };
  try {
    enter(fd, undefined, '');
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.next === top.entries.length) {
        visit.left?.(top.fd, top.rel);
        stack.pop();
        top.owned?.[Symbol.dispose]();
        continue;
      }
      const entry = top.entries[top.next++]!;
      // A regular file needs no look when files are left alone (d_type is authoritative on every fs that sets it).
      if (!visit.files && entry.type === DT_REG) continue;
      const rel = top.rel === '' ? String(entry.name) : `${top.rel}/${String(entry.name)}`;
      const st = vanished(rel, () => sys.fstatat(top.fd, entry.name, AT_SYMLINK_NOFOLLOW));
      if (isDir(st.mode)) {
        let childFd: number;
        try {
          childFd = vanished(rel, () => (visit.openDir === undefined ? openChildDir(sys, top.fd, entry.name) : visit.openDir(top.fd, entry.name, rel)));
        } catch (err) {
          // One this user may not open (0000), where the walk passes such directories over.
          if (visit.skipUnlisted === true && hasCode(err, 'EACCES')) continue;
          throw err;
        }
        const child = own(sys, childFd);
        enter(child.fd, child, rel);
      } else visit.other(top.fd, entry.name, rel, st);
    }
  } finally {
    for (const level of stack) level.owned?.[Symbol.dispose]();
  }
}

/** Runs fn, policy's work on the entry at rel: a refusal (EPERM: another user's file) names it, as `path` too; an entry gone meanwhile is SEAL_CHANGED. */
function at(policy: ModePolicy, rel: string, fn: () => void): void {
  try {
    vanished(rel, fn);
  } catch (err) {
    const path = rel === '' ? '.' : rel;
    throwIfRefused(err, `${policy.name} of ${escapePath(path)}`, path);
    throw err;
  }
}

/** Applies a mode policy to the tree open at fd (the directory itself included). */
export function applyModesAt(sys: Sys, fd: number, policy: ModePolicy): void {
  // A thaw must open up each directory before anything inside can be listed by a non-root owner.
  const opens = (policy.dir & 0o200) !== 0;
  walkTree(sys, fd, {
    files: policy.files,
    // A directory of the tree this user may not open (0000, 0300) is given u+rwx first: its mode is the policy's once
    // the walk is done. One this user may not chmod (another user's) is SEAL_IO naming it, its owner and its mode.
    openDir: (dirfd, name, rel) => openRepairableDir(sys, dirfd, name, escapePath(rel)),
    entered: opens ? (dirFd, rel) => at(policy, rel, () => openUp(sys, dirFd, policy.dir, rel)) : undefined,
    left: opens ? undefined : (dirFd, rel) => at(policy, rel, () => sys.fchmod(dirFd, policy.dir)),
    other: (dirfd, name, rel, st) => {
      if (isLink(st.mode)) return;
      if (!isReg(st.mode)) throw specialFile(rel);
      // Files left alone (a publish's directories-only pass) are never touched, whatever a listing without d_type shows.
      if (!policy.files) return;
      // A private copy a freeze or thaw killed before its rename left (the file it was for still holds its name): removed.
      if (policy.unshare === true && st.nlink === 1 && COPY_NAME.test(String(name))) {
        at(policy, rel, () => inWritableDir(sys, dirfd, () => sys.unlinkat(dirfd, name, 0)));
        return;
      }
      const mode = policy.file(st.mode);
      // Already as asked (a tree frozen before, a linked file already frozen): nothing to chmod, nothing to copy.
      if ((st.mode & 0o7777) === mode) return;
      at(policy, rel, () => {
        if (policy.unshare === true && st.nlink > 1) unshareChild(sys, dirfd, name, rel, st, mode, policy.name);
        else chmodChild(sys, dirfd, name, mode);
      });
    },
  });
}

/**
 * What freeze and thaw would refuse, found before any mode is changed: a special file,
 * a tree too deep. (A directory a thaw must open up before it can be listed is judged as
 * the thaw reaches it.)
 */
function checkTreeAt(sys: Sys, fd: number): void {
  walkTree(sys, fd, {
    files: false,
    skipUnlisted: true,
    other: (_dirfd, _name, rel, st) => {
      if (!isLink(st.mode) && !isReg(st.mode)) throw specialFile(rel);
    },
  });
}

function applyModes(dir: string, policy: ModePolicy, sys: Sys): void {
  using root = own(sys, openRealDir(sys, dir, 'directory'));
  checkTreeAt(sys, root.fd);
  applyModesAt(sys, root.fd, policy);
}

/** freeze or thaw: a tree's modes set to policy. */
const modesOp = (name: string, policy: ModePolicy) =>
  defineOp(name, {
    validate: (dir: string, options: ToolOptions = {}) => {
      checkString('dir', dir);
      return { sys: checkSys('options.sys', checkOptions('options', options, { op: name, keys: ['sys'] }).sys), args: [dir] as [string] };
    },
    core: (sys, [dir]) => applyModes(dir, policy, sys),
  });

const FREEZE = modesOp('freeze', FROZEN);
const THAW = modesOp('thaw', THAWED);

/**
 * Makes a tree read-only: files 0400 (0500 when any x bit was set), directories 0500. A
 * file with other names (a hard link from outside the tree) is replaced by a private copy
 * instead of chmodded, so the other names keep their mode.
 */
export function freezeSync(dir: string, options: ToolOptions = {}): void {
  FREEZE.sync(dir, options);
}

/**
 * Makes a frozen tree writable again: files 0600, directories 0700. A file with other
 * names (a hard link another snapshot shares) is replaced by a private copy (owner and
 * group kept) instead of chmodded, so the other names keep their mode and bytes.
 */
export function thawSync(dir: string, options: ToolOptions = {}): void {
  THAW.sync(dir, options);
}

/** freezeSync on the worker thread (on the calling thread when `sys` is another layer than the addon's). */
export function freeze(dir: string, options: ToolOptions = {}): Promise<void> {
  return FREEZE.async(dir, options);
}

/** thawSync on the worker thread (on the calling thread when `sys` is another layer than the addon's). */
export function thaw(dir: string, options: ToolOptions = {}): Promise<void> {
  return THAW.async(dir, options);
}
