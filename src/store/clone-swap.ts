// clone-swap.ts: moves built roots from the stage into the clone as one undoable transaction: nothing is deleted until the last swap.
import { SealError, isSealError } from '../base/errors.js';
import { DIR_FLAGS, openBeneath, openRepairableDir, own, type Fd } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { ioError, isRefusal } from '../base/refusal.js';
import { subvolumeFlags, unsealSubvolume } from '../base/subvolume.js';
import { AT_REMOVEDIR, BTRFS_SUBVOL_RDONLY, RENAME_EXCHANGE, RENAME_NOREPLACE, isDir } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { openRootParentDir, statOrNull } from './clone-paths.js';
import type { CloneStage } from './clone-stage.js';

type Base = 'clone' | 'new' | 'old';

/** One done step, by paths below its base directories, so it can be undone after every fd is closed. */
type Step =
  | { kind: 'mkdir'; parent: string[]; name: string }
  | { kind: 'displaced'; parent: string[]; name: string; slot: string }
  | { kind: 'renamed'; parent: string[]; name: string }
  | { kind: 'exchanged'; parent: string[]; name: string };

function swapError(err: unknown, rel: string): unknown {
  if (isSealError(err)) return err;
  if (hasCode(err, 'EXDEV')) {
    // An overlay refuses to rename a directory of its lower layer the same way (an arm baked into an image, redirect_dir off).
    return new SealError('SEAL_UNAVAILABLE', `copy target cannot be moved within the clone (EXDEV): it is on another filesystem than the clone, or a directory of an overlay's lower layer, which overlayfs renames only with redirect_dir on: ${escapePath(rel)}`, { path: rel, cause: err });
  }
  if (isRefusal(err)) return ioError('copy target cannot be replaced', err, rel);
  return new SealError('SEAL_UNAVAILABLE', `copy target is unavailable: ${escapePath(rel)}: ${escapePath((err as Error).message)}`, { path: rel, cause: err });
}

export class CloneSwap {
  readonly #steps: Step[] = [];
  #slots = 0;

  /** The clone directory's owner: whose the directories above a root must be. */
  readonly #owner: number;

  constructor(
    readonly sys: Sys,
    readonly cloneFd: number,
    readonly stage: CloneStage,
  ) {
    this.#owner = sys.fstat(cloneFd).uid;
  }

  /** The directory at parts below a base, owned by the caller. */
  #open(base: Base, parts: readonly string[]): Fd {
    const fd = base === 'clone' ? this.cloneFd : base === 'new' ? this.stage.newFd : this.stage.oldFd;
    return own(this.sys, parts.length === 0 ? this.sys.openat(fd, '.', DIR_FLAGS) : openBeneath(this.sys, fd, parts, DIR_FLAGS));
  }

  /** fstatat (no follow) of clone/<parent>/<name>, or null when it does not exist. */
  #stat(parent: readonly string[], name: string): Stat | null {
    using dir = this.#open('clone', parent);
    return statOrNull(this.sys, dir.fd, name);
  }

  /** rename from one base to another; with RENAME_NOREPLACE unless the filesystem lacks it. */
  #move(from: [Base, string[], string], to: [Base, string[], string], flags = RENAME_NOREPLACE): void {
    using src = this.#open(from[0], from[1]);
    using dst = this.#open(to[0], to[1]);
    try {
      this.sys.renameat2(src.fd, from[2], dst.fd, to[2], flags);
    } catch (err) {
      if (flags !== RENAME_NOREPLACE || !hasCode(err, 'EINVAL', 'ENOSYS')) throw err;
      this.sys.renameat2(src.fd, from[2], dst.fd, to[2], 0);
    }
  }

  /** Moves clone/<parent>/<name> into old/ (kept whole until commit). */
  #displace(parent: string[], name: string): void {
    const slot = String(this.#slots++);
    this.#move(['clone', parent, name], ['old', [], slot]);
    this.#steps.push({ kind: 'displaced', parent, name, slot });
  }

  /**
   * Makes the clone directories above a root: a missing one made (0700); anything else
   * that is not a directory (a file, a link, a FIFO, a device node the agent left there)
   * displaced whole, never followed, and a directory made; a directory put back under the
   * parent rule through its own fd (openRootParentDir: u+rwx, go-w; another user's refused).
   */
  #parents(parts: readonly string[]): void {
    for (let i = 0; i < parts.length; i++) {
      const parent = parts.slice(0, i);
      const name = parts[i]!;
      const st = this.#stat(parent, name);
      if (st !== null && isDir(st.mode)) {
        using above = this.#open('clone', parent);
        using _ = own(this.sys, openRootParentDir(this.sys, above.fd, name, parts.slice(0, i + 1).join('/'), this.#owner).fd);
        continue;
      }
      if (st !== null) this.#displace(parent, name);
      using again = this.#open('clone', parent);
      this.sys.mkdirat(again.fd, name, 0o700);
      this.#steps.push({ kind: 'mkdir', parent, name });
    }
  }

  /** Puts stage new/<parts> at clone/<parts>, swapping out whatever was there (kept in the stage until commit). */
  publish(parts: readonly string[]): void {
    const rel = parts.join('/');
    const parent = parts.slice(0, -1);
    const name = parts[parts.length - 1]!;
    try {
      this.#parents(parent);
      // Whatever stands at the root's own place (the old tree; a link a materialize made for a root that was a link, or
      // the agent's; a FIFO or a device node) is exchanged out whole, never followed or opened. An old tree of this
      // user's that the agent made read-only (0555, 0000) is given u+rwx through its own fd first: moving a directory
      // to another parent rewrites its `..`.
      const existing = this.#stat(parent, name);
      if (existing !== null && isDir(existing.mode) && existing.uid === this.#owner && (existing.mode & 0o700) !== 0o700) this.#openUp(parent, name, rel);
      if (existing !== null) this.#exchange(parent, name);
      else {
        this.#move(['new', parent, name], ['clone', parent, name]);
        this.#steps.push({ kind: 'renamed', parent, name });
      }
    } catch (err) {
      throw swapError(err, rel);
    }
  }

  #openUp(parent: string[], name: string, rel: string): void {
    using above = this.#open('clone', parent);
    using dir = own(this.sys, openRepairableDir(this.sys, above.fd, name, rel));
    this.sys.fchmod(dir.fd, (this.sys.fstat(dir.fd).mode & 0o7777) | 0o700);
  }

  #exchange(parent: string[], name: string): void {
    try {
      try {
        this.#move(['new', parent, name], ['clone', parent, name], RENAME_EXCHANGE);
      } catch (err) {
        // An old root the agent made a read-only btrfs subvolume (its own, in a snapshotted arm): moving it rewrites
        // its `..`, which its flag forbids. Cleared (the clone's owner may), then exchanged; else the EROFS stands.
        if (!hasCode(err, 'EROFS') || !this.#unseal(parent, name)) throw err;
        this.#move(['new', parent, name], ['clone', parent, name], RENAME_EXCHANGE);
      }
      this.#steps.push({ kind: 'exchanged', parent, name });
    } catch (err) {
      if (!hasCode(err, 'EINVAL', 'ENOSYS')) throw err;
      // No RENAME_EXCHANGE here: the old tree moves aside first, then the new one in.
      this.#displace(parent, name);
      this.#move(['new', parent, name], ['clone', parent, name]);
      this.#steps.push({ kind: 'renamed', parent, name });
    }
  }

  /** Clears the read-only flag of clone/<parent>/<name> when it is a read-only subvolume of the clone's owner; false (nothing changed) when it is not. */
  #unseal(parent: string[], name: string): boolean {
    using above = this.#open('clone', parent);
    let fd: number;
    try {
      fd = this.sys.openat(above.fd, name, DIR_FLAGS);
    } catch {
      return false;
    }
    using dir = own(this.sys, fd);
    const flags = subvolumeFlags(this.sys, dir.fd);
    if (flags === undefined || (flags & BTRFS_SUBVOL_RDONLY) === 0 || this.sys.fstat(dir.fd).uid !== this.#owner) return false;
    unsealSubvolume(this.sys, dir.fd, flags, [...parent, name].join('/'));
    return true;
  }

  #undo(step: Step): void {
    const { parent, name } = step;
    if (step.kind === 'exchanged') this.#move(['new', parent, name], ['clone', parent, name], RENAME_EXCHANGE);
    else if (step.kind === 'renamed') this.#move(['clone', parent, name], ['new', parent, name]);
    else if (step.kind === 'displaced') this.#move(['old', [], step.slot], ['clone', parent, name]);
    else {
      using dir = this.#open('clone', parent);
      this.sys.unlinkat(dir.fd, name, AT_REMOVEDIR);
    }
  }

  /** Undoes every step, last first; false when one could not be undone (the clone is then mixed). */
  rollback(): boolean {
    let whole = true;
    for (const step of this.#steps.splice(0).reverse()) {
      try {
        this.#undo(step);
      } catch {
        whole = false;
      }
    }
    return whole;
  }
}
