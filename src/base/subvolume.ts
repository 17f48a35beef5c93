// subvolume.ts: btrfs subvolumes as treeseal uses them: a stored copy root sealed by the subvolume's read-only flag, and opening one up to remove or thaw it.
import { SealError } from './errors.js';
import { escapePath } from './paths.js';
import { BTRFS_SUBVOL_RDONLY } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';

/** The mode a file gets in a clone, and in a stored copy root sealed by a read-only subvolume: 0700 with any execute bit, else 0600. */
export function cloneFileMode(mode: number): number {
  return mode & 0o111 ? 0o700 : 0o600;
}

/**
 * The flags (BTRFS_SUBVOL_RDONLY) of the subvolume whose root directory is open at fd, or
 * undefined when it is not one: another directory (EINVAL), another filesystem (ENOTTY),
 * a kernel without the call.
 */
export function subvolumeFlags(sys: Sys, fd: number): number | undefined {
  try {
    return sys.btrfs_subvol_getflags(fd);
  } catch (err) {
    if (hasCode(err, 'EINVAL', 'ENOTTY', 'EOPNOTSUPP', 'ENOSYS', 'EBADF')) return undefined;
    throw err;
  }
}

/** Seals the subvolume open at fd: its read-only flag set (nothing in it can change, for root neither, until the flag is cleared). */
export function sealSubvolume(sys: Sys, fd: number): void {
  sys.btrfs_subvol_setflags(fd, BTRFS_SUBVOL_RDONLY);
}

/**
 * Clears the read-only flag of the subvolume open at fd (`shown`: its name in messages). Its
 * owner (or root) may; anyone else gets SEAL_IO saying who can.
 */
export function unsealSubvolume(sys: Sys, fd: number, flags: number, shown: string): void {
  try {
    sys.btrfs_subvol_setflags(fd, flags & ~BTRFS_SUBVOL_RDONLY);
  } catch (err) {
    if (!hasCode(err, 'EPERM', 'EACCES')) throw err;
    const uid = sys.fstat(fd).uid;
    throw new SealError(
      'SEAL_IO',
      `${escapePath(shown)} is a read-only btrfs subvolume of uid ${uid}, whose read-only flag only its owner or root may clear: ` +
        `as its owner run \`btrfs property set -f ${escapePath(shown)} ro false\` and remove it again, or as root \`btrfs subvolume delete ${escapePath(shown)}\``,
      { cause: err },
    );
  }
}

/**
 * A directory open at fd that refused a change with EROFS: when it is a read-only subvolume,
 * deletes it whole where the kernel allows (BTRFS_IOC_SNAP_DESTROY_V2 on parentFd/name: root,
 * or the user_subvol_rm_allowed mount option) and returns 'destroyed'; else clears its flag (its
 * owner may) and returns 'opened', so it can be emptied and removed by rmdir (a user may rmdir an
 * empty subvolume, kernel 4.18+). undefined: not a read-only subvolume (the EROFS stands).
 */
export function openUpSubvolume(sys: Sys, parentFd: number | undefined, name: string | Buffer, fd: number): 'destroyed' | 'opened' | undefined {
  const flags = subvolumeFlags(sys, fd);
  if (flags === undefined || (flags & BTRFS_SUBVOL_RDONLY) === 0) return undefined;
  if (parentFd !== undefined) {
    try {
      sys.btrfs_snap_destroy(parentFd, name);
      return 'destroyed';
    } catch {
      // not allowed for this user (EPERM): its owner clears the flag and empties it
    }
  }
  unsealSubvolume(sys, fd, flags, typeof name === 'string' ? name : escapePath(name));
  return 'opened';
}

/**
 * Makes dirFd/name a new btrfs subvolume; false (nothing made) where the kernel will not: not
 * btrfs, not allowed, or a kernel without the call. Its root directory's mode is the caller's to set.
 */
export function makeSubvolume(sys: Sys, dirFd: number, name: string): boolean {
  try {
    sys.btrfs_subvol_create(dirFd, name);
    return true;
  } catch (err) {
    if (hasCode(err, 'ENOTTY', 'EOPNOTSUPP', 'ENOSYS', 'EPERM', 'EACCES', 'EINVAL', 'EXDEV')) return false;
    throw err;
  }
}
