// clone-outside.ts: the entries of a clone outside its copy roots and mount targets (diff's `all`, reset's `clean`), found without following a link.
import { CLONE_MARKER, CLONE_STAGE_PREFIX } from '../base/clone-names.js';
import { DIR_FLAGS, openChildDir, own, tryFlock } from '../base/fd.js';
import { nameText } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, DT_DIR, DT_REG, DT_UNKNOWN, S_IFDIR, S_IFREG, isDir, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { partsOf } from './clone-links.js';
import type { StoredSnapshot } from './document.js';

/** Visits one outside entry: the name in the directory open at dirFd, its path in the clone (escaped when not UTF-8), its d_type. */
export type OutsideVisit = (dirFd: number, name: string | Buffer, path: string, type: number) => void;

/**
 * Whether a top-level entry of the clone is materialize's own: its marker, or the stage (a
 * directory) of a materialize running now, which holds its flock. Anything else under a
 * stage's name (a file, a link, a FIFO an agent put there) is the agent's, and a stage whose
 * lock is free is what a killed materialize left (its half-built roots, hundreds of MB
 * hidden under a dot-name): outside, reported by diff's `all` and removed by reset's `clean`
 * (and by the next materialize or reset, and gc given the clone).
 */
function isOwn(sys: Sys, cloneFd: number, name: string, type: number): boolean {
  if (name === CLONE_MARKER) return true;
  if (!name.startsWith(CLONE_STAGE_PREFIX)) return false;
  if (type !== DT_UNKNOWN && type !== DT_DIR) return false;
  let fd: number;
  try {
    fd = sys.openat(cloneFd, name, DIR_FLAGS);
  } catch (err) {
    // Gone meanwhile (a sweep): nothing to report. Not a directory, or one this user may not open (a stage is 0700
    // and its maker's; an agent's `chmod 0` of a stage-named directory hid it): the agent's.
    if (hasCode(err, 'ENOENT')) return true;
    if (hasCode(err, 'ENOTDIR', 'ELOOP', 'EACCES')) return false;
    throw err;
  }
  using stage = own(sys, fd);
  const st = sys.fstat(stage.fd);
  // A stage is the clone owner's, mode 0700, and held (its lock taken here for this look only, let go with the fd).
  return st.uid === sys.fstat(cloneFd).uid && (st.mode & 0o7777) === 0o700 && !tryFlock(sys, stage.fd);
}

/**
 * Calls visit for the top of each subtree of the clone open at cloneFd that is neither a
 * copy root, nor a mount target, nor on the way to one, nor one of materialize's own
 * names: what is outside the copy roots but inside the clone. Only the directories on
 * the way to a root or a target are entered, each opened without following a link (one
 * that is a link or a file is outside too, but above a copy root, whose own check reports it; so is anything at a mount target
 * that its mount point cannot be: a link, a FIFO, a file for a directory), by `openDir` (reset passes
 * one that repairs an unreadable directory of its own; one that returns null passes the
 * directory over).
 */
export function forEachOutside(
  sys: Sys,
  cloneFd: number,
  data: Pick<StoredSnapshot, 'declarations' | 'mounts'>,
  visit: OutsideVisit,
  openDir: (sys: Sys, dirfd: number, name: string, shown: string) => number | null = openChildDir,
): void {
  const places = new Set<string>();
  /** Each mount target, and the kind its mount point must be. */
  const targets = new Map<string, 'file' | 'directory'>();
  const onTheWay = new Set<string>();
  const toRoots = new Set<string>();
  for (const m of data.mounts) targets.set(partsOf(m.target).join('/'), m.kind);
  for (const [parts, root] of [...data.declarations.map((d) => [partsOf(d), true] as const), ...data.mounts.map((m) => [partsOf(m.target), false] as const)]) {
    places.add(parts.join('/'));
    for (let i = 1; i < parts.length; i++) {
      onTheWay.add(parts.slice(0, i).join('/'));
      if (root) toRoots.add(parts.slice(0, i).join('/'));
    }
  }
  // What stands at a mount target and is not what its mount point must be (a link, a FIFO, a file where a directory is
  // bound, a directory where a file is): never a mount point (mount points refuse it); an agent's, outside.
  const wrongAt = (fd: number, name: string, type: number, kind: 'file' | 'directory'): boolean => {
    let mode: number;
    if (type !== DT_UNKNOWN) mode = type === DT_DIR ? S_IFDIR : type === DT_REG ? S_IFREG : 0;
    else {
      try {
        mode = sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW).mode;
      } catch {
        return false;
      }
    }
    return kind === 'directory' ? !isDir(mode) : !isReg(mode);
  };
  const walk = (fd: number, rel: string): void => {
    for (const item of sys.readdir(fd)) {
      const shown = nameText(item.name);
      const path = rel === '' ? shown : `${rel}/${shown}`;
      const target = typeof item.name === 'string' ? targets.get(path) : undefined;
      if (target !== undefined && wrongAt(fd, item.name as string, item.type, target)) {
        visit(fd, item.name, path, item.type);
        continue;
      }
      if (typeof item.name === 'string' && ((rel === '' && isOwn(sys, fd, item.name, item.type)) || places.has(path))) continue;
      if (typeof item.name !== 'string' || !onTheWay.has(path)) {
        visit(fd, item.name, path, item.type);
        continue;
      }
      let child: number | null;
      try {
        child = openDir(sys, fd, item.name, path);
      } catch (err) {
        if (hasCode(err, 'ENOENT')) continue;
        // A link or a file where a directory on the way must be (an agent's `vendor -> /home/…` above a mount target):
        // not the snapshot's, so outside too.
        if (hasCode(err, 'ENOTDIR', 'ELOOP')) {
          // Above a copy root, the root's own check reports it (changed; a reset makes a directory there): not twice.
          if (!toRoots.has(path)) visit(fd, item.name, path, item.type);
          continue;
        }
        throw err;
      }
      if (child === null) continue;
      using dir = own(sys, child);
      walk(dir.fd, path);
    }
  };
  walk(cloneFd, '');
}
