// clone-removable.ts: the look before a materialize's swap: whether what a copy root displaces could be removed, at any depth, in a bounded number of fds.
import { SealError } from '../base/errors.js';
import { openChildDir, own } from '../base/fd.js';
import { escapePath, nameText } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, STATX_ATTR_MOUNT_ROOT, isDir } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { PINNED } from './clone-stage.js';

/**
 * Every ANCHOR_EVERY-th level below the root stays open until the walk leaves it; of the
 * others at most OPEN_LEVELS are open at once, the deepest. A level closed to keep to that
 * is opened again, by name from the anchor above it, only when the walk comes back to it
 * with names left to look at. A tree a million levels deep holds about 8,000 fds.
 */
export const ANCHOR_EVERY = 128;
export const OPEN_LEVELS = 128;

/** One level of the walk: its directory's fd (-1: closed), its name as listed and as shown, its names and how far through them. */
interface Level {
  fd: number;
  raw: string | Buffer;
  name: string;
  names: (string | Buffer)[];
  at: number;
}

/**
 * Refuses (SEAL_IO, before anything is written) a tree that could not be removed once
 * swapped out: an immutable or append-only inode anywhere in it, the root included; and
 * (SEAL_BUSY) one holding a mount point, whose removal would empty the filesystem mounted
 * there (a directory a harness bound into the arm) and still leave the tree. What
 * this user may not look into (a directory an agent left mode 0, 0100 or 0400) is passed
 * over, nothing changed: only CAP_LINUX_IMMUTABLE sets those flags, and the removal opens
 * such a directory up as reset does. Depth first without recursion and in a bounded
 * number of fds (an agent's tree 10,000 levels deep overflowed the stack, one 25,000
 * deep ran out of fds): see ANCHOR_EVERY. A directory is read once; a path is spelled out
 * only for an error. What the agent moves while this looks only makes the look wrong:
 * the removal itself follows nothing.
 */
export function checkRemovable(sys: Sys, dirfd: number, name: string | Buffer, rel: string): void {
  if (!removableEntry(sys, dirfd, name, () => rel)) return;
  const stack: Level[] = [];
  /** The lowest level of the run of open levels that ends at the top (those below it: open where anchors). */
  let low = 0;
  const pathOf = (child: string | Buffer): string => [rel, ...stack.slice(1).map((l) => l.name), nameText(child)].join('/');
  const close = (level: Level): void => {
    if (level.fd < 0) return;
    const fd = level.fd;
    level.fd = -1;
    sys.close(fd);
  };
  const enter = (parentFd: number, child: string | Buffer): void => {
    let fd: number;
    try {
      fd = openChildDir(sys, parentFd, child);
    } catch (err) {
      if (hasCode(err, 'EACCES')) return;
      throw err;
    }
    try {
      stack.push({ fd, raw: child, name: nameText(child), names: sys.readdir(fd).map((e) => e.name), at: 0 });
    } catch (err) {
      sys.close(fd);
      throw err;
    }
    if (stack.length - low > OPEN_LEVELS) {
      if (low % ANCHOR_EVERY !== 0) close(stack[low]!);
      low++;
    }
  };
  /** The fd of the top level, opened again from the anchor above it where it was closed. */
  const topFd = (): number => {
    const top = stack.length - 1;
    if (stack[top]!.fd >= 0) return stack[top]!.fd;
    const anchor = top - (top % ANCHOR_EVERY);
    for (let i = anchor + 1; i <= top; i++) stack[i]!.fd = openChildDir(sys, stack[i - 1]!.fd, stack[i]!.raw);
    low = anchor + 1;
    return stack[top]!.fd;
  };
  try {
    enter(dirfd, name);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.at >= top.names.length) {
        stack.pop();
        close(top);
        low = Math.min(low, stack.length);
        continue;
      }
      const child = top.names[top.at++]!;
      const fd = topFd();
      if (removableEntry(sys, fd, child, () => pathOf(child))) enter(fd, child);
    }
  } finally {
    for (const level of stack) if (level.fd >= 0) own(sys, level.fd)[Symbol.dispose]();
  }
}

/**
 * checkRemovable's look at one entry: SEAL_IO where it is immutable or append-only, SEAL_BUSY
 * where it is a mount point; whether it is a directory to look into (false for one this user
 * may not look at).
 */
function removableEntry(sys: Sys, dirfd: number, name: string | Buffer, rel: () => string): boolean {
  let st;
  try {
    st = sys.statx(dirfd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'EACCES')) return false;
    throw err;
  }
  if (st.attributes & PINNED) {
    throw new SealError('SEAL_IO', `copy target cannot be replaced: ${escapePath(rel())} is immutable or append-only`, { path: rel() });
  }
  if (st.attributes & STATX_ATTR_MOUNT_ROOT) {
    throw new SealError('SEAL_BUSY', `copy target cannot be replaced: ${escapePath(rel())} is a mount point (unmount it first: what is mounted there is not the clone's to remove)`, { path: rel() });
  }
  return isDir(st.mode);
}
