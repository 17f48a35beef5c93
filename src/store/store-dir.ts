// store-dir.ts: a store directory on disk: open (create, sweep), load a snapshot, remove one, close (ephemeral removal).
import { randomBytes } from 'node:crypto';
import { basename, dirname } from 'node:path';

import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import { DIR_FLAGS, closeQuietly, openChildDir, openRealDir, removeAt } from '../base/fd.js';
import { readAllAt } from '../base/io.js';
import { THAWED, applyModesAt } from '../tools/freeze.js';
import { LOCK_EX, LOCK_NB, RENAME_NOREPLACE } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { decodeDocument, type SnapshotData } from './document.js';
import { BUILD_PREFIX, DOCUMENT_NAME, REMOVING_PREFIX, SNAPSHOTS_DIR, TMP_DIR } from './layout.js';
import { withStoreLock } from './lock.js';

const MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024;

/**
 * Opens a store directory (the directory itself must exist or be creatable), makes its
 * snapshots/ and tmp/, and sweeps builds no live process holds. Returns how many it swept.
 */
export function openStoreAt(sys: Sys, root: string): number {
  const fd = openRealDir(sys, root, 'store directory');
  try {
    for (const name of [SNAPSHOTS_DIR, TMP_DIR]) {
      try {
        sys.mkdirat(fd, name, 0o700);
      } catch (err) {
        if (!hasCode(err, 'EEXIST')) throw err;
      }
    }
  } finally {
    closeQuietly(sys, fd);
  }
  return withStoreLock(sys, root, true, () => sweepStaleBuilds(sys, root));
}

/** Thaws and removes a whole (ephemeral) store directory; a store already gone is fine. */
export function closeStoreAt(sys: Sys, root: string): void {
  let fd: number;
  try {
    fd = openRealDir(sys, root, 'store directory');
  } catch (err) {
    if (err instanceof SealError && err.code === 'SEAL_UNAVAILABLE') return;
    throw err;
  }
  try {
    applyModesAt(sys, fd, THAWED);
  } finally {
    closeQuietly(sys, fd);
  }
  const parent = openRealDir(sys, dirname(root), 'store parent');
  try {
    removeAt(sys, parent, basename(root));
  } finally {
    closeQuietly(sys, parent);
  }
}

/** Reads and proves the manifest.json of a published snapshot directory. */
export function loadSnapshotAt(sys: Sys, snapshotsFd: number, digest: string): SnapshotData {
  let dir: number;
  try {
    dir = openChildDir(sys, snapshotsFd, digest);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digest}`, { cause: err });
    throwIfRefused(err, `snapshot cannot be opened: ${digest}`);
    throw new SealError('SEAL_CORRUPT', `snapshot is not a real directory: ${digest}`, { cause: err });
  }
  try {
    let text: Buffer;
    try {
      text = readAllAt(sys, dir, DOCUMENT_NAME, MAX_DOCUMENT_BYTES, DOCUMENT_NAME).bytes;
    } catch (err) {
      // The kernel refusing the read (SEAL_IO, its cause the system error) says nothing about the snapshot.
      if (err instanceof SealError && err.code === 'SEAL_IO') throw err;
      throwIfRefused(err, `snapshot manifest cannot be read: ${digest}`);
      throw new SealError('SEAL_CORRUPT', `snapshot has no readable manifest: ${digest}`, { cause: err });
    }
    return decodeDocument(text.toString('utf8'), digest);
  } finally {
    closeQuietly(sys, dir);
  }
}

/**
 * Removes builds in tmp/ that no live process holds (their flock is free) and
 * snapshots left half-removed; call with the store lock held exclusively.
 */
export function sweepStaleBuilds(sys: Sys, storeRoot: string): number {
  const tmpFd = openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory');
  let swept = 0;
  try {
    for (const entry of sys.readdir(tmpFd)) {
      if (typeof entry.name === 'string' && entry.name.startsWith(REMOVING_PREFIX)) {
        removeAt(sys, tmpFd, entry.name);
        swept++;
        continue;
      }
      if (typeof entry.name !== 'string' || !entry.name.startsWith(BUILD_PREFIX)) continue;
      let fd: number;
      try {
        fd = sys.openat(tmpFd, entry.name, DIR_FLAGS);
      } catch {
        removeAt(sys, tmpFd, entry.name);
        swept++;
        continue;
      }
      try {
        sys.flock(fd, LOCK_EX | LOCK_NB);
      } catch (err) {
        closeQuietly(sys, fd);
        if (hasCode(err, 'EAGAIN', 'EWOULDBLOCK')) continue;
        throw err;
      }
      try {
        removeAt(sys, tmpFd, entry.name);
        swept++;
      } finally {
        closeQuietly(sys, fd);
      }
    }
  } finally {
    closeQuietly(sys, tmpFd);
  }
  return swept;
}

/** Unpublishes a snapshot with one rename into tmp/, then removes it there; call with the store lock held exclusively. */
export function removeSnapshot(sys: Sys, storeRoot: string, digest: string): void {
  const snapshotsFd = openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory');
  let tmpFd = -1;
  try {
    tmpFd = openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory');
    const name = REMOVING_PREFIX + randomBytes(12).toString('hex');
    try {
      sys.renameat2(snapshotsFd, digest, tmpFd, name, RENAME_NOREPLACE);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digest}`, { cause: err });
      throw err;
    }
    removeAt(sys, tmpFd, name);
  } finally {
    closeQuietly(sys, snapshotsFd, tmpFd);
  }
}
