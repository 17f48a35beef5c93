// writeback.ts: how a file's dirty pages are put under writeback before its bytes or its record may be trusted (a write through a shared mapping then stamps its times).
import { OVERLAYFS_SUPER_MAGIC, RAMFS_MAGIC, SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, TMPFS_MAGIC } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';

/**
 * How a source filesystem's dirty pages are written back before a record of one of its
 * files may be trusted. A write through a shared mapping whose page is already dirty and
 * writable changes neither mtime nor ctime; a page put under writeback is write-protected,
 * so the next such write faults and stamps the file's times.
 * NEVER: the filesystem never writes back (tmpfs, ramfs): its files are never reused.
 * RANGE: sync_file_range(WAIT_BEFORE | WRITE): every dirty page put under writeback (no
 * wait for the disk, no metadata, no device flush).
 * FSYNC: fdatasync (overlayfs: its files' pages are the underlying filesystem's, which
 * sync_file_range on an overlay fd does not reach and fsync does).
 */
export const WRITEBACK = { NEVER: 0, RANGE: 1, FSYNC: 2 } as const;
export type Writeback = (typeof WRITEBACK)[keyof typeof WRITEBACK];

/** Puts fd's dirty pages under writeback as `rule` says (write-protecting every mapping of them): nothing for NEVER. */
export function writeBack(sys: Sys, fd: number, rule: Writeback): void {
  if (rule === WRITEBACK.RANGE) sys.sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
  else if (rule === WRITEBACK.FSYNC) sys.fdatasync(fd);
}

/** The writeback rule for a filesystem by its statfs f_type. */
export function writebackOf(fsType: number): Writeback {
  if (fsType === TMPFS_MAGIC || fsType === RAMFS_MAGIC) return WRITEBACK.NEVER;
  if (fsType === OVERLAYFS_SUPER_MAGIC) return WRITEBACK.FSYNC;
  return WRITEBACK.RANGE;
}
