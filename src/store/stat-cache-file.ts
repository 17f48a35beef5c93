// stat-cache-file.ts: where a source's stat cache lives in the store (cache/<key>.bin), loading it and replacing it crash-safe.
import { createHash, randomBytes } from 'node:crypto';

import { SealError } from '../base/errors.js';
import { openChildDir, openRealDir, own, removeAt, tryFlock } from '../base/fd.js';
import { makeStorePart } from './store-part.js';
import { sameObject } from '../sys/identity.js';
import { readAllAt, writeAll } from '../base/io.js';
import { STAT_CACHE_VERSION, StatCache } from '../capture/stat-cache.js';
import { DIGEST_BYTES, HEADER, HEADER_BYTES, MAGIC } from '../capture/stat-cache-layout.js';
import { AT_SYMLINK_NOFOLLOW, LOCK_SH, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY, isDir, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { BUILD_PREFIX, CACHE_DIR, LOCK_NAME } from './layout.js';
import { isPrivate } from './trust.js';

const MAX_CACHE_BYTES = 512 * 1024 * 1024;

/** Produces a cache file's bytes, in order, into sink (each chunk consumed before the next). */
export type WriteCache = (sink: (bytes: Uint8Array) => void) => void;

/**
 * The key of one source's cache in one store: sha256 of the store directory's
 * (dev, ino), the source path and the source directory's (dev, ino). Two stores,
 * two sources, or a source directory replaced by another never share entries.
 */
export function statCacheKey(store: Stat, source: string, sourceDir: Stat): Buffer {
  return createHash('sha256').update(`treeseal-stat-cache\0${store.dev}:${store.ino}\0${source}\0${sourceDir.dev}:${sourceDir.ino}`).digest();
}

export function statCacheName(key: Buffer): string {
  return `${key.toString('hex')}.bin`;
}

/** The cache, or an empty one when there is none or it is torn, garbage or another's. */
export function loadStatCache(sys: Sys, storeFd: number, key: Buffer): StatCache {
  let fd: number;
  try {
    fd = openChildDir(sys, storeFd, CACHE_DIR);
  } catch {
    return StatCache.empty();
  }
  using dir = own(sys, fd);
  try {
    // Its trailer is the sha256 of the rest: a torn read decodes to nothing, never to wrong records.
    const name = statCacheName(key);
    // Only a cache no one else can have written (in a shared store, another member's is not trusted: its entries would say what a file holds).
    return StatCache.decode(readAllAt(sys, dir.fd, name, MAX_CACHE_BYTES, name, { selfProving: true, trusted: isPrivate }).bytes, key) ?? StatCache.empty();
  } catch {
    return StatCache.empty();
  }
}

/**
 * The digests among `digests` that name a published snapshot directory no one but you (or
 * root) can have written; for root, also one of the store's owner (the owner of
 * snapshots/), whose snapshots root uses as it uses its own (checkSnapshot), and to whom it
 * gives those it captures there.
 */
export function publishedAmong(sys: Sys, snapshotsFd: number, digests: Iterable<string>): Set<string> {
  const out = new Set<string>();
  let storeOwner: number | undefined;
  const trusted = (st: Stat): boolean => {
    if (isPrivate(st)) return true;
    if (process.geteuid?.() !== 0 || (st.mode & 0o022) !== 0) return false;
    storeOwner ??= sys.fstat(snapshotsFd).uid;
    return st.uid === storeOwner;
  };
  for (const d of digests) {
    try {
      // Its files are linked into new snapshots unread: only a snapshot no one else can have written.
      const st = sys.fstatat(snapshotsFd, d, AT_SYMLINK_NOFOLLOW);
      if (isDir(st.mode) && trusted(st)) out.add(d);
    } catch {
      // removed: its entries are not trusted
    }
  }
  return out;
}

/**
 * Replaces the cache: written to a new file in the store's tmp/ (named like a build,
 * so a sweep removes it if this process dies) and renamed over cache/<key>.bin. A reader
 * sees the old file or the new one, never a mix (see saveStoreFile for a crash).
 */
export function saveStatCache(sys: Sys, storeFd: number, tmpFd: number, key: Buffer, write: WriteCache): void {
  saveStoreFile(sys, storeFd, tmpFd, CACHE_DIR, statCacheName(key), write);
}

/**
 * Replaces `<dir>/<name>` in the store (dir made 0700 when missing): a new file in the
 * directory open at tmpFd (named like a build, so a sweep of tmp/ removes it if this
 * process dies), written and renamed over the name. A reader sees the old file or the new
 * one, never a mix. Not fsynced: both files written so (a stat cache, a clone's ledger)
 * end with the sha256 of their bytes, so one a crash tore or emptied is refused as if
 * there were none (a full capture, a diff by hash); and the snapshots and clones they
 * describe are not fsynced either, so making these durable would buy nothing (two fsyncs
 * cost a capture of 5k files on XFS about 40 ms). `locked`: under the store's shared lock
 * (needed when tmpFd is tmp/, which an open sweeps under the exclusive one; a tmpFd that
 * no one sweeps needs none, nor a lock file).
 */
export function saveStoreFile(sys: Sys, storeFd: number, tmpFd: number, dir: string, name: string, write: WriteCache, locked = true, stamp?: (fd: number) => void): void {
  makeStorePart(sys, storeFd, dir);
  if (!locked) return writeStoreFile(sys, storeFd, tmpFd, dir, name, write, stamp);
  // The store's shared lock: an open elsewhere sweeps tmp/ only under the exclusive one,
  // so the new file cannot be swept between its creation and its rename.
  using lock = own(sys, sys.openat(storeFd, LOCK_NAME, O_RDWR | O_NOFOLLOW | O_NONBLOCK));
  sys.flock(lock.fd, LOCK_SH);
  writeStoreFile(sys, storeFd, tmpFd, dir, name, write, stamp);
}

/** Tries of a write whose new file a sweep took (it was created, then swept before its flock was taken). */
const WRITE_TRIES = 5;

function writeStoreFile(sys: Sys, storeFd: number, tmpFd: number, dirName: string, name: string, write: WriteCache, stamp?: (fd: number) => void): void {
  for (let tries = 1; ; tries++) {
    try {
      return writeOnce(sys, storeFd, tmpFd, dirName, name, write, stamp);
    } catch (err) {
      if (!(err instanceof SweptAway)) throw err;
      if (tries >= WRITE_TRIES) {
        throw new SealError('SEAL_BUSY', `${dirName}/${name} in the store could not be written: a sweep by another process opening the store took its new file ${WRITE_TRIES} times; try again`, {
          retryable: true,
          cause: err.cause ?? err,
        });
      }
    }
  }
}

/** The new file was taken by a sweep before this write held it: written again under another name. */
class SweptAway extends Error {}

/**
 * One write of a new file: flocked from its creation to its rename, so a sweep of a
 * directory no store lock guards (clones/) removes only a file whose writer is gone.
 */
function writeOnce(sys: Sys, storeFd: number, tmpFd: number, dirName: string, name: string, write: WriteCache, stamp?: (fd: number) => void): void {
  using dir = own(sys, openChildDir(sys, storeFd, dirName));
  const tmpName = `${BUILD_PREFIX}${dirName}-${randomBytes(12).toString('hex')}`;
  let renamed = false;
  try {
    using file = own(sys, sys.openat(tmpFd, tmpName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600));
    if (!tryFlock(sys, file.fd)) throw new SweptAway('taken by a sweep');
    let at = 0;
    write((bytes) => {
      writeAll(sys, file.fd, bytes, at);
      at += bytes.length;
    });
    stamp?.(file.fd);
    try {
      sys.renameat2(tmpFd, tmpName, dir.fd, name, 0);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) throw new SweptAway('swept before its lock', { cause: err });
      throw err;
    }
    renamed = true;
  } finally {
    if (!renamed) {
      try {
        removeAt(sys, tmpFd, tmpName);
      } catch {
        // swept later
      }
    }
  }
}

/** The most snapshot digests a cache's header is read for when gc weighs it (a cache names the few its entries are in). */
const MAX_SWEPT_DIGESTS = 4096;

/**
 * Removes the stat caches (cache/<key>.bin) none of whose snapshots the store still holds:
 * every entry of such a cache points at bytes that are gone, so it can never be used again,
 * and a runner that captures a new arm directory each time (a new key each time) would grow
 * cache/ without bound. A cache of another format version, one torn or another member's
 * (this user may not read it) is left as it is. Run under the store's exclusive lock (no
 * capture is writing one). Returns how many it removed.
 */
export function sweepStatCaches(sys: Sys, storeRoot: string, hasSnapshot: (digest: string) => boolean): number {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  let opened: number;
  try {
    opened = openChildDir(sys, store.fd, CACHE_DIR);
  } catch (err) {
    // None yet, or a shared store's that another member made and this one may not list: not this gc's.
    if (hasCode(err, 'ENOENT', 'EACCES')) return 0;
    throw err;
  }
  using dir = own(sys, opened);
  const head = Buffer.alloc(HEADER_BYTES + MAX_SWEPT_DIGESTS * DIGEST_BYTES);
  let swept = 0;
  for (const entry of sys.readdir(dir.fd)) {
    if (typeof entry.name !== 'string' || !/^[0-9a-f]{64}\.bin$/.test(entry.name)) continue;
    let fd: number;
    try {
      // A regular file only: a FIFO or a device under a cache's name is not opened.
      if (!isReg(sys.fstatat(dir.fd, entry.name, AT_SYMLINK_NOFOLLOW).mode)) continue;
      fd = sys.openat(dir.fd, entry.name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      if (hasCode(err, 'ENOENT', 'EACCES', 'ELOOP', 'ENXIO')) continue;
      throw err;
    }
    using file = own(sys, fd);
    const st = sys.fstat(file.fd);
    if (!isReg(st.mode) || !isPrivate(st)) continue;
    const n = sys.pread(file.fd, head, 0, head.length, 0);
    if (n < HEADER_BYTES || !head.subarray(HEADER.MAGIC, HEADER.MAGIC + MAGIC.length).equals(MAGIC) || head.readUInt32LE(HEADER.VERSION) !== STAT_CACHE_VERSION) continue;
    const count = head.readUInt32LE(HEADER.DIGEST_COUNT);
    if (count > MAX_SWEPT_DIGESTS || n < HEADER_BYTES + count * DIGEST_BYTES) continue;
    let live = false;
    for (let k = 0; k < count && !live; k++) live = hasSnapshot(head.toString('hex', HEADER_BYTES + k * DIGEST_BYTES, HEADER_BYTES + (k + 1) * DIGEST_BYTES));
    if (live) continue;
    try {
      if (!sameObject(st, sys.fstatat(dir.fd, entry.name, AT_SYMLINK_NOFOLLOW))) continue;
      sys.unlinkat(dir.fd, entry.name, 0);
      swept++;
    } catch (err) {
      if (!hasCode(err, 'ENOENT', 'EPERM', 'EACCES')) throw err;
    }
  }
  return swept;
}
