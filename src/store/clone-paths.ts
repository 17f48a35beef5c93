// clone-paths.ts: the clone-side path checks materialize, reset and mount points share: the clone apart from source and store, opened (and opened up) without a link, no symlink or special file on the way to a mount target.
import { basename, dirname, resolve } from 'node:path';

import { SealError, isSealError } from '../base/errors.js';
import { DIR_FLAGS, openChildDir, openRealDir, openRealPlace, openRepairableDir, openUpDir, own, statOrNull, walkDown } from '../base/fd.js';

// Its users in store/ take it from here, with the rest of what a clone's paths need.
export { statOrNull };
import { escapePath, isBelow } from '../base/paths.js';
import { throwIfRefused } from '../base/refusal.js';
import { AT_FDCWD, AT_REMOVEDIR, AT_SYMLINK_NOFOLLOW, isDir, isLink, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { fstatatBlocks, type StatBlocks } from '../sys/stat-each.js';

/**
 * Makes the directory `clonePath` (0700: the clone is the caller's own, as the check of it requires) when its
 * parent is a real directory reached through no symlink; an existing name is left
 * for the caller's open to judge (a symlink there is never followed). Returns whether
 * it made it (see removeMadeClone).
 */
export function makeCloneDir(sys: Sys, clonePath: string): boolean {
  using parent = own(sys, openRealPlace(sys, dirname(clonePath), 'clone parent'));
  try {
    sys.mkdirat(parent.fd, basename(clonePath), 0o700);
    return true;
  } catch (err) {
    if (!hasCode(err, 'EEXIST')) {
      // EACCES, EROFS, ENOSPC…: the kernel refused (SEAL_IO); anything else leaves the clone unavailable.
      throwIfRefused(err, `clone cannot be created: ${escapePath(clonePath)}`);
      throw new SealError('SEAL_UNAVAILABLE', `clone cannot be created: ${escapePath(clonePath)}: ${escapePath((err as Error).message)}`, { cause: err });
    }
    return false;
  }
}

/**
 * After a failed materialize: removes the clone directory makeCloneDir made, when it is
 * still that directory (the same device and inode, reached through no symlink) and empty,
 * so a failure leaves no clone behind that a later `run` or harness would take for one.
 * Anything else (it holds entries, it was replaced, it cannot be reached) is left as it is.
 */
export function removeMadeClone(sys: Sys, clonePath: string, made: Stat): void {
  try {
    using parent = own(sys, openRealPlace(sys, dirname(clonePath), 'clone parent'));
    const st = sys.fstatat(parent.fd, basename(clonePath), AT_SYMLINK_NOFOLLOW);
    if (isDir(st.mode) && st.dev === made.dev && st.ino === made.ino) sys.unlinkat(parent.fd, basename(clonePath), AT_REMOVEDIR);
  } catch {
    // Not empty, gone, or out of reach: the failure that brought us here is what the caller reports.
  }
}

/**
 * Refuses a clone that lies inside the snapshot's store or holds it: materializing there
 * would rewrite published snapshots or remove the store, and a clone is handed to an
 * agent whole (`run` binds it writable; `reset --clean` removes what is outside its roots).
 */
export function checkCloneOutsideStore(snapshotRoot: string, clone: unknown): void {
  if (typeof clone !== 'string') return;
  const store = resolve(snapshotRoot, '..', '..');
  const dir = resolve(clone);
  if (isBelow(dir, store) || isBelow(store, dir)) {
    throw new SealError('SEAL_OVERLAP', `clone overlaps the snapshot store: ${escapePath(dir)}`);
  }
}

/** "dev:ino" of the directory at an absolute path (no link followed), or undefined when nothing is there. */
function identityAt(sys: Sys, path: string): string | undefined {
  try {
    const st = sys.fstatat(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW);
    return isDir(st.mode) ? `${st.dev}:${st.ino}` : undefined;
  } catch (err) {
    if (hasCode(err, 'ENOENT', 'ENOTDIR', 'EACCES')) return undefined;
    throw err;
  }
}

/** The identities of an absolute path's directory and of every directory above it. */
function identitiesAlong(sys: Sys, path: string): Set<string> {
  const out = new Set<string>();
  for (let p = resolve(path); ; p = dirname(p)) {
    const id = identityAt(sys, p);
    if (id !== undefined) out.add(id);
    if (p === '/') return out;
  }
}

/**
 * Refuses (SEAL_OVERLAP) a clone that is the snapshot's source, lies inside it or holds
 * it, or lies inside the store or holds it: compared by device and inode along both paths, so a
 * bind mount or a second name of the same directory is seen. Checked before anything
 * is made; a source that no longer exists overlaps nothing.
 */
export function checkCloneApart(sys: Sys, clone: string, source: string, snapshotRoot: string): void {
  const store = resolve(snapshotRoot, '..', '..');
  const aboveClone = identitiesAlong(sys, clone);
  const storeId = identityAt(sys, store);
  const cloneId = identityAt(sys, clone);
  if ((storeId !== undefined && aboveClone.has(storeId)) || (cloneId !== undefined && identitiesAlong(sys, store).has(cloneId))) {
    throw new SealError('SEAL_OVERLAP', `clone overlaps the snapshot store: ${escapePath(clone)}`);
  }
  const sourceId = identityAt(sys, source);
  if (sourceId === undefined) return;
  if (aboveClone.has(sourceId)) {
    throw new SealError('SEAL_OVERLAP', `clone is the snapshot's source or lies inside it (the next capture would take the arm in): ${escapePath(clone)} (source ${escapePath(source)})`);
  }
  if (cloneId !== undefined && identitiesAlong(sys, source).has(cloneId)) {
    throw new SealError('SEAL_OVERLAP', `clone holds the snapshot's source: ${escapePath(clone)} (source ${escapePath(source)})`);
  }
}


/** The fstatat(no-follow) of each name below dirfd, all at once, as blocks read without making a Stat (see StatBlocks). */
export function statBlocksOf(sys: Sys, dirfd: number, names: readonly string[]): StatBlocks {
  return fstatatBlocks(sys, dirfd, names, AT_SYMLINK_NOFOLLOW);
}

/**
 * Name k's result of statBlocksOf as statOrNull gives it: a Stat, or null where it does not
 * exist; undefined where it failed otherwise, so that one is looked at alone (statOrNull),
 * meeting its failure in its turn.
 */
export function statOrUndefinedAt(blocks: StatBlocks, k: number): Stat | null | undefined {
  const st = blocks.at(k);
  return st instanceof Error ? undefined : st;
}

/**
 * Rejects symlink and special-file hazards on the way to a mount target, writing nothing:
 * a bind mount there would follow them. (A copy root needs no such check: whatever stands
 * at or above it that is not a directory is renamed out whole, never followed.)
 */
export function preflightMount(sys: Sys, cloneFd: number, parts: readonly string[]): void {
  const rel = parts.join('/');
  // Walks down while the path exists as directories, checking each component.
  using _ = walkDown(sys, cloneFd, parts, (dirfd, name, i) => {
    const st = statOrNull(sys, dirfd, name);
    const last = i === parts.length - 1;
    if (st !== null && isLink(st.mode)) {
      throw new SealError('SEAL_SYMLINK', `mount target ${last ? 'cannot be a symlink' : 'has a symlink parent'}: ${escapePath(rel)}`, { path: rel });
    }
    if (st !== null && !isDir(st.mode) && !isReg(st.mode)) {
      throw new SealError('SEAL_SPECIAL_FILE', `mount target ${last ? '' : 'parent '}has an unsupported type: ${escapePath(rel)}`, { path: rel });
    }
    return st === null || last || isReg(st.mode) ? null : openChildDir(sys, dirfd, name);
  });
}

/**
 * Opens the parent directories of a mount target inside the clone, making missing ones
 * (0700). A symlink on the way is SEAL_SYMLINK; anything else that is not a directory
 * (a regular file included: it is never removed) is SEAL_COLLISION. Returns an fd the
 * caller owns (cloneFd reopened for no parts).
 */
export function openMountParent(sys: Sys, cloneFd: number, parts: readonly string[], target: string): number {
  const symlink = (cause?: unknown): SealError =>
    new SealError('SEAL_SYMLINK', `mount target cannot traverse a symlink: ${escapePath(target)}`, { path: target, cause });
  using parent = walkDown(sys, cloneFd, parts, (dirfd, part) => {
    const st = statOrNull(sys, dirfd, part);
    if (st !== null && isLink(st.mode)) throw symlink();
    if (st !== null && !isDir(st.mode)) throw parentCollision(target);
    if (st === null) sys.mkdirat(dirfd, part, 0o700);
    try {
      return openChildDir(sys, dirfd, part);
    } catch (err) {
      if (hasCode(err, 'ELOOP', 'ENOTDIR')) throw symlink(err);
      throw err;
    }
  });
  return parts.length === 0 ? sys.openat(cloneFd, '.', DIR_FLAGS) : parent.release();
}

/** A mount target that exists with another type than the snapshot's (a file for a directory, or the reverse). */
export function targetCollision(target: string): SealError {
  return new SealError('SEAL_COLLISION', `mount target exists with another type: ${escapePath(target)}`, { path: target });
}

/** A mount target whose parent path holds something that is not a directory. */
export function parentCollision(target: string): SealError {
  return new SealError('SEAL_COLLISION', `mount target parent exists with another type: ${escapePath(target)}`, { path: target });
}

/**
 * Whether a directory above a copy root in a clone keeps the rule a materialize makes it by
 * (0700): the clone owner's, u+rwx, writable by no one else. An agent's `chmod 0`, `0555`
 * or `0777` of it, or one another user made there, breaks it: `diff` and `checkClone` call it
 * changed, and a materialize or reset puts it back (openRootParentDir).
 */
export function keepsParentRule(st: Stat, owner: number): boolean {
  return st.uid === owner && (st.mode & 0o700) === 0o700 && (st.mode & 0o022) === 0;
}

/**
 * Opens the directory dirfd/name above a copy root for a materialize or a reset, put back
 * under the parent rule through its own fd, never by path: u+rwx (one this user may not
 * list is opened up first), and go-w. Another user's is SEAL_UNTRUSTED: what it holds could
 * be swapped by them. Returns the fd (the caller's) and whether its mode was changed.
 */
export function openRootParentDir(sys: Sys, dirfd: number, name: string, path: string, owner: number): { fd: number; changed: boolean } {
  const notOwners = (uid: number): SealError =>
    new SealError('SEAL_UNTRUSTED', `untrusted clone: ${escapePath(path)}, above a copy root, is owned by uid ${uid}, not by the clone's owner (uid ${owner}); fix: remove it`, { path });
  const was = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  // Said before it is opened: another user's this user may not open (0000) is theirs all the same.
  if (isDir(was.mode) && was.uid !== owner) throw notOwners(was.uid);
  const fd = openRepairableDir(sys, dirfd, name, path);
  try {
    const now = sys.fstat(fd);
    if (now.uid !== owner) throw notOwners(now.uid);
    const mode = ((now.mode & 0o7777) | 0o700) & ~0o022;
    if ((now.mode & 0o7777) !== mode) sys.fchmod(fd, mode);
    return { fd, changed: (was.mode & 0o7777) !== mode || !isDir(was.mode) };
  } catch (err) {
    sys.close(fd);
    throw err;
  }
}

/** openRealDir of the clone; `makes`: a missing one is said with the option that makes it (a materialize's createClone). */
export function openCloneDir(sys: Sys, clone: string, makes: boolean): number {
  try {
    return openRealDir(sys, clone, 'clone');
  } catch (err) {
    if (!makes || !isSealError(err, 'SEAL_UNAVAILABLE') || !hasCode(err.cause, 'ENOENT') || statOrNull(sys, AT_FDCWD, dirname(clone)) === null) throw err;
    throw new SealError('SEAL_UNAVAILABLE', `${err.message} (createClone: true makes it)`, { path: clone, cause: err.cause });
  }
}

/**
 * openCloneDir for a materialize or a reset: a clone directory this user owns but may not
 * open (an agent's `chmod 0 /workspace`, the clone bound there) is given u+rwx through an
 * O_PATH fd of it (openUpDir: never by path, never through a link) and opened again, when
 * `knows` says the store materialized it (by the identity the name shows, before it is
 * opened); another user's, or a directory the store never made a clone of (one the user
 * shut on purpose), stays refused (SEAL_IO), as does anything else.
 */
export function openRepairableClone(sys: Sys, clone: string, makes: boolean, knows: (st: Stat) => boolean): number {
  try {
    return openCloneDir(sys, clone, makes);
  } catch (err) {
    if (!isSealError(err, 'SEAL_IO') || !hasCode(err.cause, 'EACCES')) throw err;
    let opened = false;
    try {
      using parent = own(sys, openRealPlace(sys, dirname(clone), 'clone parent'));
      const st = sys.fstatat(parent.fd, basename(clone), AT_SYMLINK_NOFOLLOW);
      opened = isDir(st.mode) && st.uid === process.geteuid?.() && knows(st) && openUpDir(sys, parent.fd, basename(clone));
    } catch {
      // What stands there cannot be looked at either: the first refusal says it.
    }
    if (!opened) throw err;
    return openCloneDir(sys, clone, makes);
  }
}

/**
 * Gives this user's clone directory, open at fd, u+rwx again through that fd where an agent
 * took it away (`chmod 0500 /workspace`: nothing could be made in it), once a materialize
 * or reset has passed its checks and holds the clone. Another user's is left to the trust
 * checks, which refused it before this.
 */
export function openUpCloneDir(sys: Sys, fd: number): void {
  const st = sys.fstat(fd);
  if ((st.mode & 0o700) !== 0o700 && st.uid === process.geteuid?.()) sys.fchmod(fd, (st.mode & 0o7777) | 0o700);
}
