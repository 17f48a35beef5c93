// clone-stage.ts: materialize's private stage inside the clone (flock-held, swept when stale), and why a clone entry cannot be removed.
import { SealError } from '../base/errors.js';
import { reasonOf } from '../base/refusal.js';
import { makeLockedDir, openChildDir, openRealDir, openRepairableDir, own, removeOwnDir, type Fd } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { AT_FDCWD, AT_SYMLINK_NOFOLLOW, LOCK_EX, LOCK_NB, STATX_ATTR_APPEND, STATX_ATTR_IMMUTABLE, isDir } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { CLONE_STAGE_PREFIX } from './layout.js';
import type { StageLeft } from './materialize-run.js';

// clone-check reads the marker through here.
export { hasMarker } from './clone-marker.js';

/**
 * A stage: `new/` holds the trees being built, `old/` what they displace until the last
 * swap. Its flock is held on its own fd until close(), which removes it (unless `keep`).
 */
export class CloneStage implements Disposable {
  /** Set when a failed swap could not be undone: the stage is left for the next sweep, not removed now. */
  keep = false;
  #new: Fd | undefined;
  #old: Fd | undefined;

  constructor(
    readonly sys: Sys,
    readonly cloneFd: number,
    readonly name: string,
    readonly lock: Fd,
  ) {}

  get fd(): number {
    return this.lock.fd;
  }

  get newFd(): number {
    return this.#new!.fd;
  }

  get oldFd(): number {
    return this.#old!.fd;
  }

  /** Makes and opens `new/` and `old/`. */
  makeAreas(): void {
    for (const area of ['new', 'old'] as const) {
      this.sys.mkdirat(this.fd, area, 0o700);
      const dir = own(this.sys, openChildDir(this.sys, this.fd, area));
      if (area === 'new') this.#new = dir;
      else this.#old = dir;
    }
  }

  /** Removes the stage (whatever it still holds, unless `keep`) and releases its lock; a failed removal leaves it for the next sweep and is thrown. */
  close(): void {
    // Closed quietly: a failed close must not keep the stage from being removed.
    this.#new?.[Symbol.dispose]();
    this.#old?.[Symbol.dispose]();
    using _lock = this.lock;
    // Through the fd that holds its lock (the clone is the agent's).
    if (!this.keep && !this.lock.closed) removeOwnDir(this.sys, this.cloneFd, this.name, this.lock.fd);
  }

  /**
   * close() after a successful swap: undefined once the stage is gone, else what is left
   * (its name in the clone and the error, `CODE: message`), unlocked for the next sweep.
   */
  closeOrLeave(): StageLeft | undefined {
    try {
      this.close();
      return undefined;
    } catch (err) {
      return { path: this.name, reason: reasonOf(err) };
    }
  }

  /** close(), quietly: what is left stays inside the clone, unlocked, for the next sweep. */
  [Symbol.dispose](): void {
    try {
      this.close();
    } catch {
      // swept by the next materialize
    }
  }
}

/** Makes and locks a new stage directly inside the clone (so on the clone's filesystem); the caller closes it. */
export function openCloneStage(sys: Sys, cloneFd: number): CloneStage {
  const { name, fd } = makeLockedDir(sys, cloneFd, CLONE_STAGE_PREFIX, 12);
  const stage = new CloneStage(sys, cloneFd, name, own(sys, fd));
  try {
    stage.makeAreas();
    return stage;
  } catch (err) {
    // the first error says why; an unlocked stage left behind is swept later
    stage[Symbol.dispose]();
    throw err;
  }
}

/**
 * Removes stages left in the clone by materializes that died (their flock is free), and
 * with `planted` anything not a directory under a stage's name (gc; a reset lists those
 * as outside the roots and removes them with `clean`); returns how many.
 */
export function sweepCloneStages(sys: Sys, cloneFd: number, planted = false): number {
  let swept = 0;
  let entries: ReturnType<Sys['readdir']>;
  try {
    entries = sys.readdir(cloneFd);
  } catch (err) {
    // The clone removed since it was opened (a harness dropping the arm while gc runs): no stage is left in it.
    if (hasCode(err, 'ENOENT')) return 0;
    throw err;
  }
  for (const entry of entries) {
    if (typeof entry.name !== 'string' || !entry.name.startsWith(CLONE_STAGE_PREFIX)) continue;
    let fd: number;
    try {
      // One the agent made unreadable (`chmod 0` of a stage-named directory) is opened up first, as removal opens up.
      fd = openRepairableDir(sys, cloneFd, entry.name);
    } catch (err) {
      // Not a directory (a file, a link, a FIFO put under a stage's name, never one of ours): unlinked, not followed.
      if (planted && hasCode(err, 'ENOTDIR', 'ELOOP')) swept += unlinkPlanted(sys, cloneFd, entry.name);
      continue;
    }
    using stage = own(sys, fd);
    try {
      sys.flock(stage.fd, LOCK_EX | LOCK_NB);
      // Through the fd that holds its lock (the clone is the agent's).
      removeOwnDir(sys, cloneFd, entry.name, stage.fd);
      swept++;
    } catch {
      // held by a live materialize, or not removable now: left for a later sweep
    }
  }
  return swept;
}

/** Unlinks a non-directory at a stage's name (1), or leaves it when it is gone or a directory now (0). */
function unlinkPlanted(sys: Sys, cloneFd: number, name: string): number {
  try {
    if (isDir(sys.fstatat(cloneFd, name, AT_SYMLINK_NOFOLLOW).mode)) return 0;
    sys.unlinkat(cloneFd, name, 0);
    return 1;
  } catch {
    return 0;
  }
}

/** sweepCloneStages for a clone given by path (gc's: what was planted under a stage's name too). */
export function sweepCloneAt(sys: Sys, clone: string): number {
  using dir = own(sys, openRealDir(sys, clone, 'clone'));
  return sweepCloneStages(sys, dir.fd, true);
}

/** The inode flags that keep a name from being removed or replaced. */
export const PINNED = STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND;

/**
 * What a removal of dirfd/name refused with EPERM says: SEAL_IO naming its clone path
 * (`rel`; `shown`: where it is now, escaped) as immutable or append-only where statx says so (what stopped a reset, which
 * changes the clone in place: what it did before stands, and the next reset goes on
 * from there), else the system's error as it was.
 */
export function pinnedError(sys: Sys, dirfd: number, name: string | Buffer, rel: string, err: unknown, shown = escapePath(rel)): unknown {
  if (!hasCode(err, 'EPERM')) return err;
  const pinned = (at: () => number): boolean => {
    try {
      return (at() & PINNED) !== 0;
    } catch {
      return false;
    }
  };
  const fix = '(chattr -i or -a as root, then reset again)';
  if (pinned(() => sys.statx(dirfd, name, AT_SYMLINK_NOFOLLOW).attributes)) {
    return new SealError('SEAL_IO', `clone entry cannot be removed: ${shown} is immutable or append-only ${fix}`, { path: rel, cause: err });
  }
  // Its directory pinned instead (no name in it may go): that directory, reached by its fd's own link in /proc, never a path.
  if (pinned(() => sys.statx(AT_FDCWD, `/proc/self/fd/${dirfd}`, 0).attributes)) {
    return new SealError('SEAL_IO', `clone entry cannot be removed: ${shown} is in an immutable or append-only directory ${fix}`, { path: rel, cause: err });
  }
  return err;
}
