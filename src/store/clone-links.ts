// clone-links.ts: materialize's copy-root symlinks: each checked against the containment rule (capture's, links.ts) right before it is made in the stage, never followed.
import { SealError } from '../base/errors.js';
import { keepMtimeAt } from '../base/times.js';
import type { ManifestEntry } from '../base/manifest.js';
import { CopyLinkRule, type LinkLayout } from '../capture/links.js';
import type { Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';

/** Components of a declared root or mount target as a clone places it (`.` and empty components dropped, as capture drops them). */
export const partsOf = (declared: string): string[] => declared.split('/').filter((p) => p !== '' && p !== '.');

/** The snapshot as the containment rule sees it: copy roots at their paths, each payload at its mount target. */
export function linkLayoutOf(data: Pick<StoredSnapshot, 'entries' | 'declarations' | 'mounts'>): LinkLayout {
  return {
    entries: data.entries,
    roots: data.declarations.map(partsOf),
    mounts: data.mounts.map((m) => ({ targetParts: partsOf(m.target), entries: m.entries })),
  };
}

/**
 * Makes a snapshot's copy-root links in a materialize's stage. Every document was
 * checked when it was loaded; each link is checked again here, so no link whose
 * target leaves what the snapshot captures is ever made, whatever document the
 * caller holds (SEAL_CORRUPT). symlinkat makes the link itself, and a recorded mtime
 * is set on the link itself: nothing is followed.
 */
export class CloneLinks {
  #rule: CopyLinkRule | undefined;

  constructor(
    readonly sys: Sys,
    readonly data: Pick<StoredSnapshot, 'entries' | 'declarations' | 'mounts'>,
  ) {}

  /** Checks the link `entry` against the containment rule (SEAL_CORRUPT): before it is made, or before a snapshot of a root holding it is. */
  check(entry: ManifestEntry): void {
    this.#rule ??= new CopyLinkRule(linkLayoutOf(this.data));
    try {
      this.#rule.check(entry);
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      throw new SealError('SEAL_CORRUPT', `snapshot manifest is corrupt: copy root symlink: ${err.message}`, { path: entry.path, cause: err });
    }
  }

  /** Makes the link `entry` as dirFd/name. */
  make(dirFd: number, name: string, entry: ManifestEntry): void {
    this.check(entry);
    this.sys.symlinkat(entry.link_target, dirFd, name);
    // Its recorded mtime (keepTimes) on the link itself: utimensat with AT_SYMLINK_NOFOLLOW.
    keepMtimeAt(this.sys, dirFd, name, entry);
  }
}
