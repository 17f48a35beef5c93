// fs-types.ts: filesystems by their statfs f_type, named in messages (which pair of filesystems could not reflink).
import type { Sys } from '../sys/native.js';

/** statfs(2) f_type magic numbers (linux/magic.h) and the names users know them by. */
const NAMES: ReadonlyMap<number, string> = new Map([
  [0xef53, 'ext4'],
  [0x58465342, 'xfs'],
  [0x9123683e, 'btrfs'],
  [0xca451a4e, 'bcachefs'],
  [0x2fc12fc1, 'zfs'],
  [0xf2f52010, 'f2fs'],
  [0x01021994, 'tmpfs'],
  [0x858458f6, 'ramfs'],
  [0x794c7630, 'overlayfs'],
  [0x6969, 'nfs'],
  [0xff534d42, 'cifs'],
  [0xfe534d42, 'smb2'],
  [0x01021997, '9p'],
  [0x65735546, 'fuse'],
  [0x00c36400, 'ceph'],
  [0x73717368, 'squashfs'],
  [0xe0f5e1e2, 'erofs'],
  [0x4d44, 'vfat'],
  [0x2011bab0, 'exfat'],
  [0x5346544e, 'ntfs'],
  [0x52654973, 'reiserfs'],
  [0x3153464a, 'jfs'],
  [0x958458f6, 'hugetlbfs'],
]);

/** A filesystem's name by its f_type (`0x…` for one not listed). */
export function fsName(type: number): string {
  return NAMES.get(type) ?? `0x${type.toString(16)}`;
}

/** The filesystem holding fd, by name; `unknown` when fstatfs fails. */
export function fsOf(sys: Sys, fd: number): string {
  try {
    return fsName(sys.fstatfs(fd));
  } catch {
    return 'unknown';
  }
}
