// clone-trash.ts: how reset removes what a clone should not hold: moved into a locked stage inside the clone, then emptied there, a level at a time.
import { isLockedDir, lockedDirError, openRepairableDir, openUpDir, own, removeAt } from '../base/fd.js';
import { AT_REMOVEDIR, AT_SYMLINK_NOFOLLOW, DT_DIR, DT_REG, DT_UNKNOWN, RENAME_NOREPLACE, isDir } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { SealError } from '../base/errors.js';
import { escapePath, nameText } from '../base/paths.js';
import { openCloneStage, pinnedError, type CloneStage } from './clone-stage.js';

/** SEAL_BUSY for a mount point met where reset removes (movedTo: where it is now, when what held it was moved into the stage). */
function mountError(path: string, cause: unknown, movedTo?: string): SealError {
  const where = movedTo === undefined ? 'unmount it' : `what held it was moved into the reset's stage: unmount it at ${movedTo} in the clone`;
  return new SealError('SEAL_BUSY', `clone entry cannot be removed: ${escapePath(path)} is a mount point (${where}, then reset again)`, { path, cause });
}

/**
 * Removes entries from a clone without following a link, in a bounded stack and a bounded
 * number of fds however deep the tree (an agent can make one 10k directories deep): each
 * directory met is first moved (one rename on the clone's filesystem) into the old/ area
 * of a locked stage inside the clone, then emptied there, so no walk goes below one level.
 * The stage is made on the first directory and removed at dispose; one left by a process
 * that died is swept by the next reset or materialize.
 */
export class Trash implements Disposable {
  #stage: CloneStage | undefined;
  #slots = 0;
  /** The clone path each slot's directory had (as reports give it, unescaped), for messages. */
  readonly #paths = new Map<string, string>();

  constructor(
    readonly sys: Sys,
    readonly cloneFd: number,
  ) {}

  /** Removes dirFd/name (d_type `type`, or DT_UNKNOWN), whose clone path is `path` (as reports give it, unescaped: for messages). */
  remove(dirFd: number, name: string | Buffer, type: number, path: string): void {
    const { sys } = this;
    if (type !== DT_DIR && type !== DT_UNKNOWN) return this.#unlink(dirFd, name, type, path);
    // Not known (DT_UNKNOWN): what is not a directory is unlinked as it is.
    if (type === DT_UNKNOWN && !isDir(sys.fstatat(dirFd, name, AT_SYMLINK_NOFOLLOW).mode)) return this.#unlink(dirFd, name, DT_REG, path);
    this.#stage ??= openCloneStage(sys, this.cloneFd);
    const trash = this.#stage.oldFd;
    const first = this.#moveAside(dirFd, name, path);
    const pending = first === undefined ? [] : [first];
    for (let slot = pending.pop(); slot !== undefined; slot = pending.pop()) {
      const at = this.#paths.get(slot)!;
      this.#paths.delete(slot);
      let fd: number;
      try {
        fd = openRepairableDir(sys, trash, slot, () => `${escapePath(at)} (moved to ${this.#stage!.name}/old/${slot} in the clone)`);
      } catch (err) {
        // Not a directory after all (d_type was stale): unlinked as what it is.
        if (hasCode(err, 'ENOTDIR', 'ELOOP')) {
          removeAt(sys, trash, slot, DT_REG);
          continue;
        }
        // Moved (it was writable) but not listable, and another user's: removed if empty.
        if (isLockedDir(err) && this.#removeEmpty(trash, slot)) continue;
        throw err;
      }
      {
        using dir = own(sys, fd);
        try {
          sys.fchmod(dir.fd, 0o700);
        } catch (err) {
          if (!hasCode(err, 'EPERM')) throw err;
        }
        for (const item of sys.readdir(dir.fd)) {
          if (item.type !== DT_DIR) {
            const below = `${at}/${nameText(item.name)}`;
            const movedTo = `${this.#stage.name}/old/${slot}/${escapePath(item.name)}`;
            this.#unlink(dir.fd, item.name, item.type, below, () => `${escapePath(below)} (moved to ${movedTo} in the clone)`, movedTo);
            continue;
          }
          const below = `${at}/${nameText(item.name)}`;
          const next = this.#moveAside(dir.fd, item.name, below, `${this.#stage.name}/old/${slot}/${escapePath(item.name)}`);
          if (next !== undefined) pending.push(next);
        }
      }
      sys.unlinkat(trash, slot, AT_REMOVEDIR);
    }
  }

  /**
   * Renames the directory dirFd/name into the trash under a new slot name; returns the
   * slot. Moving a directory to another parent rewrites its `..`, which needs write
   * permission on it: one the agent made read-only (EACCES without root) is opened up
   * first (openUpDir). Another user's, which this user may not chmod, is removed where it
   * is when it is empty (undefined: nothing left to empty), else lockedDirError.
   */
  #moveAside(dirFd: number, name: string | Buffer, path: string, movedTo?: string): string | undefined {
    const slot = String(this.#slots++);
    try {
      this.sys.renameat2(dirFd, name, this.#stage!.oldFd, slot, RENAME_NOREPLACE);
    } catch (err) {
      // A mount point (a directory a harness bound into the arm): never moved, nor anything on it removed.
      if (hasCode(err, 'EBUSY')) throw mountError(path, err, movedTo);
      if (!hasCode(err, 'EACCES')) throw pinnedError(this.sys, dirFd, name, path, err);
      if (!openUpDir(this.sys, dirFd, name)) {
        if (this.#removeEmpty(dirFd, name)) return undefined;
        throw lockedDirError(this.sys, dirFd, name, err, escapePath(path));
      }
      this.sys.renameat2(dirFd, name, this.#stage!.oldFd, slot, RENAME_NOREPLACE);
    }
    this.#paths.set(slot, path);
    return slot;
  }

  /**
   * removeAt of what is not a directory: one the kernel will not remove (immutable, append-only) named by its clone path
   * (`shown`: where it is now, asked only for an error: a path thousands of levels deep is not spelled out for every file).
   */
  #unlink(dirFd: number, name: string | Buffer, type: number, path: string, shown?: () => string, movedTo?: string): void {
    try {
      removeAt(this.sys, dirFd, name, type);
    } catch (err) {
      // A file a harness bound there (unlink is EBUSY on a mount point; removeAt says SEAL_BUSY).
      if (hasCode(err, 'EBUSY') || (err instanceof SealError && err.code === 'SEAL_BUSY')) throw mountError(path, err, movedTo);
      throw pinnedError(this.sys, dirFd, name, path, err, shown?.());
    }
  }

  /** Removes the directory dirFd/name where it is if it is empty (true), else leaves it (false). */
  #removeEmpty(dirFd: number, name: string | Buffer): boolean {
    try {
      this.sys.unlinkat(dirFd, name, AT_REMOVEDIR);
      return true;
    } catch (err) {
      if (!hasCode(err, 'ENOTEMPTY', 'EEXIST')) throw err;
      return false;
    }
  }

  [Symbol.dispose](): void {
    this.#stage?.[Symbol.dispose]();
  }
}
