// clone-paths.ts: the clone-side path checks materialize and mount points share: no symlink, no special file on the way.
import { SealError } from '../base/errors.js';
import { DIR_FLAGS, closeQuietly, openBeneath, openChildDir } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { AT_REMOVEDIR, AT_SYMLINK_NOFOLLOW, isDir, isLink, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';

/** fstatat(no-follow), or null when the name does not exist. */
export function statOrNull(sys: Sys, dirfd: number, name: string): Stat | null {
  try {
    return sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return null;
    throw err;
  }
}

/** Rejects symlink and special-file hazards on the way to a root, writing nothing. */
export function preflightRoot(sys: Sys, cloneFd: number, parts: readonly string[], label = 'copy'): void {
  const rel = parts.join('/');
  let current = -1;
  try {
    for (let i = 0; i < parts.length; i++) {
      const st = statOrNull(sys, current < 0 ? cloneFd : current, parts[i]!);
      if (st === null) return;
      const last = i === parts.length - 1;
      if (isLink(st.mode)) {
        throw new SealError('SEAL_SYMLINK', `${label} target ${last ? 'cannot be a symlink' : 'has a symlink parent'}: ${escapePath(rel)}`, { path: rel });
      }
      if (!isDir(st.mode) && !isReg(st.mode)) {
        throw new SealError('SEAL_SPECIAL_FILE', `${label} target ${last ? '' : 'parent '}has an unsupported type: ${escapePath(rel)}`, { path: rel });
      }
      if (last || isReg(st.mode)) return;
      const next = openChildDir(sys, current < 0 ? cloneFd : current, parts[i]!);
      closeQuietly(sys, current);
      current = next;
    }
  } finally {
    closeQuietly(sys, current);
  }
}

/**
 * Opens the parent directories of a root inside the clone, creating missing ones
 * (0700, each recorded in `created`) and replacing a regular file that stands where a
 * directory must be.
 */
export function openPublishParent(sys: Sys, cloneFd: number, parts: readonly string[], label = 'copy', created: string[][] = []): number {
  const rel = parts.join('/');
  let current = -1;
  try {
    for (const [i, part] of parts.entries()) {
      const dirfd = current < 0 ? cloneFd : current;
      let st = statOrNull(sys, dirfd, part);
      if (st !== null && isLink(st.mode)) {
        throw new SealError('SEAL_SYMLINK', `${label} target cannot traverse a symlink: ${escapePath(rel)}`, { path: rel });
      }
      if (st !== null && !isDir(st.mode)) {
        if (!isReg(st.mode)) {
          throw new SealError('SEAL_SPECIAL_FILE', `${label} target parent has an unsupported type: ${escapePath(rel)}`, { path: rel });
        }
        sys.unlinkat(dirfd, part, 0);
        st = null;
      }
      if (st === null) {
        sys.mkdirat(dirfd, part, 0o700);
        created.push(parts.slice(0, i + 1));
      }
      let next: number;
      try {
        next = openChildDir(sys, dirfd, part);
      } catch (err) {
        if (hasCode(err, 'ELOOP', 'ENOTDIR')) {
          throw new SealError('SEAL_SYMLINK', `${label} target cannot traverse a symlink: ${escapePath(rel)}`, { path: rel, cause: err });
        }
        throw err;
      }
      closeQuietly(sys, current);
      current = next;
    }
    return current < 0 ? sys.openat(cloneFd, '.', DIR_FLAGS) : current;
  } catch (err) {
    closeQuietly(sys, current);
    throw err;
  }
}

/** Removes, deepest first, the directories openPublishParent created, where they are still empty (after a failed publish). */
export function removeCreatedDirs(sys: Sys, cloneFd: number, created: readonly string[][]): void {
  for (const parts of [...created].reverse()) {
    let parent = -1;
    try {
      parent = parts.length === 1 ? -1 : openBeneath(sys, cloneFd, parts.slice(0, -1), DIR_FLAGS);
      sys.unlinkat(parent < 0 ? cloneFd : parent, parts[parts.length - 1]!, AT_REMOVEDIR);
    } catch {
      // not empty (the root got in) or refused: it stays, empty or whole
    } finally {
      closeQuietly(sys, parent);
    }
  }
}

/** Moves stage/<parts> to clone/<parts>, replacing whatever was there exactly. */
