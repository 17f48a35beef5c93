// writeback.ts: how a file's dirty pages are put under writeback before its bytes or its record may be trusted (a write through a shared mapping then stamps its times).
import { readFileSync } from 'node:fs';

import { own } from './fd.js';
import { AT_FDCWD, O_DIRECTORY, O_PATH, OVERLAYFS_SUPER_MAGIC, RAMFS_MAGIC, SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, TMPFS_MAGIC } from '../sys/constants.js';
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
 * sync_file_range on an overlay fd does not reach and fsync does), for an overlay whose
 * upper layer is seen here on a filesystem that writes back.
 * FSYNC_UNTRUSTED: fdatasync, but its files are never reused: an overlay whose upper layer
 * cannot be found (read-only, or a path of another mount namespace: a container's root) or
 * is not on a disk (over tmpfs: `bwrap --tmp-overlay`, a live image), where a write through
 * a mapping may move no time. The fdatasync still write-protects what writes back (a read
 * is protected as well as it can be).
 */
export const WRITEBACK = { NEVER: 0, RANGE: 1, FSYNC: 2, FSYNC_UNTRUSTED: 3 } as const;
export type Writeback = (typeof WRITEBACK)[keyof typeof WRITEBACK];

/** Puts fd's dirty pages under writeback as `rule` says (write-protecting every mapping of them): nothing for NEVER. */
export function writeBack(sys: Sys, fd: number, rule: Writeback): void {
  if (rule === WRITEBACK.RANGE) sys.sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
  else if (rule === WRITEBACK.FSYNC || rule === WRITEBACK.FSYNC_UNTRUSTED) sys.fdatasync(fd);
}

/** Whether a record of a file under `rule` may be trusted later (reused, or its bytes taken as a ledger's): RANGE and FSYNC. */
export function trustsRecords(rule: Writeback): boolean {
  return rule === WRITEBACK.RANGE || rule === WRITEBACK.FSYNC;
}

/** The writeback rule for the filesystem holding fd, by its statfs f_type (an overlay's by its upper layer's). */
export function writebackOf(sys: Sys, fd: number): Writeback {
  const fsType = sys.fstatfs(fd);
  if (fsType === TMPFS_MAGIC || fsType === RAMFS_MAGIC) return WRITEBACK.NEVER;
  if (fsType === OVERLAYFS_SUPER_MAGIC) return overlayWriteback(sys, fd);
  return WRITEBACK.RANGE;
}

/**
 * An overlay's rule: FSYNC when its upper layer (the mount's `upperdir`, found by the
 * mount ID statx gives fd in /proc/self/mountinfo) is on a filesystem that writes back;
 * FSYNC_UNTRUSTED when it is on tmpfs, ramfs or another overlay, or cannot be found or opened.
 */
function overlayWriteback(sys: Sys, fd: number): Writeback {
  try {
    const id = sys.statx(AT_FDCWD, `/proc/self/fd/${fd}`, 0).mntId;
    const upper = id < 0 ? undefined : upperDirOf(readFileSync('/proc/self/mountinfo', 'latin1'), id);
    if (upper === undefined || !upper.startsWith('/')) return WRITEBACK.FSYNC_UNTRUSTED;
    using dir = own(sys, sys.openat(AT_FDCWD, Buffer.from(upper, 'latin1'), O_PATH | O_DIRECTORY, 0));
    const upperType = sys.fstatfs(dir.fd);
    return upperType === TMPFS_MAGIC || upperType === RAMFS_MAGIC || upperType === OVERLAYFS_SUPER_MAGIC ? WRITEBACK.FSYNC_UNTRUSTED : WRITEBACK.FSYNC;
  } catch {
    return WRITEBACK.FSYNC_UNTRUSTED;
  }
}

/**
 * The `upperdir` of overlay mount `id` in a mountinfo text (latin1: its bytes as they are),
 * unescaped (the kernel writes a space, tab, newline, backslash, comma or `=` in an option
 * as `\ooo`); undefined when that mount is not an overlay or has none.
 */
export function upperDirOf(mountinfo: string, id: number): string | undefined {
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    if (fields[0] !== String(id)) continue;
    // ID, parent, dev, root, mount point, options, optional fields..., '-', type, source, super options.
    const dash = fields.indexOf('-', 6);
    if (dash < 0 || fields[dash + 1] !== 'overlay') return undefined;
    const option = (fields[dash + 3] ?? '').split(',').find((o) => o.startsWith('upperdir='));
    return option?.slice('upperdir='.length).replace(/\\([0-7]{3})/g, (_m, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  }
  return undefined;
}
