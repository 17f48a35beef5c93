// store-part.ts: what root makes in another user's store is that user's: the store parts it creates (clones/, cache/, …) and the snapshots it publishes (its own caches and ledgers stay its own).
import { mkdirIfMissing, openChildDir, own } from '../base/fd.js';
import { AT_EMPTY_PATH, DT_DIR, DT_UNKNOWN, O_NOFOLLOW, O_PATH, isDir } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { unmapped } from './trust.js';

/** A store's owner and group, to give what root makes there. */
export interface StoreOwner {
  uid: number;
  gid: number;
}

/**
 * The owner of the store open at storeFd when this process is root and the store is
 * another user's, writable by that user alone (a group-shared store's parts stay as its
 * admin made them); else undefined. Not an owner this namespace cannot map (its uid shows
 * as the overflow uid, which no chown takes).
 */
export function foreignOwner(sys: Sys, storeFd: number): StoreOwner | undefined {
  if (process.geteuid?.() !== 0) return undefined;
  const st = sys.fstat(storeFd);
  if (st.uid === 0 || st.uid === unmapped() || (st.mode & 0o022) !== 0) return undefined;
  return { uid: st.uid, gid: st.gid };
}

/**
 * Gives the directory open at fd, which this process just made in the store open at
 * storeFd, to the store's owner and group when this process is root and the store is
 * another user's: a part root made 0700 for itself (root may use a store another user
 * owns) would shut the owner out of its own store (every command EACCES on it).
 */
export function giveToStoreOwner(sys: Sys, storeFd: number, fd: number): void {
  const owner = foreignOwner(sys, storeFd);
  if (owner === undefined) return;
  const part = sys.fstat(fd);
  // Only the empty directory just made: the owner may rename another directory of the store in under its name between
  // the mkdir and the open (one of root's, a snapshot root captured there), which must not become the owner's.
  if (part.uid !== 0 || (part.mode & 0o7777) !== 0o700 || sys.readdir(fd).length > 0) return;
  sys.fchown(fd, owner.uid, owner.gid);
}

/** mkdirIfMissing of a store part (0700) directly in the store open at storeFd, given to the store's owner where root made it. */
export function makeStorePart(sys: Sys, storeFd: number, name: string): void {
  if (!mkdirIfMissing(sys, storeFd, name) || process.geteuid?.() !== 0) return;
  using part = own(sys, openChildDir(sys, storeFd, name));
  giveToStoreOwner(sys, storeFd, part.fd);
}

/**
 * Gives what root made below the directory open at dirFd, and that directory, to owner
 * (a snapshot root built in another user's store: root-owned and frozen 0500/0400, the
 * owner could neither read nor remove it); false, having stopped, where the system
 * refuses (EPERM: root without CAP_CHOWN; EINVAL: an owner this namespace cannot map):
 * what is left stays root's, as it was before. Children go before their directory, so
 * nothing below a directory is the owner's while root still works in it. Every chown goes
 * through a descriptor of the inode looked at (O_PATH, never following a link), never by
 * name, so a name swapped meanwhile changes nothing else; only root's entries change
 * hands, and of files only those with one name (what this build wrote): a stored copy an
 * older snapshot shares keeps its owner.
 */
export function giveTree(sys: Sys, dirFd: number, owner: StoreOwner): boolean {
  try {
    if (sys.fstat(dirFd).uid !== 0) return true;
    giveBelow(sys, dirFd, owner);
    sys.fchown(dirFd, owner.uid, owner.gid);
    return true;
  } catch (err) {
    if (hasCode(err, 'EPERM', 'EINVAL')) return false;
    throw err;
  }
}

function giveBelow(sys: Sys, dirFd: number, owner: StoreOwner): void {
  for (const entry of sys.readdir(dirFd)) {
    if (entry.type === DT_DIR || entry.type === DT_UNKNOWN) {
      let child: number;
      try {
        child = openChildDir(sys, dirFd, entry.name);
      } catch (err) {
        if (!hasCode(err, 'ENOTDIR', 'ELOOP')) throw err;
        giveEntry(sys, dirFd, entry.name, owner);
        continue;
      }
      using dir = own(sys, child);
      if (sys.fstat(dir.fd).uid !== 0) continue;
      giveBelow(sys, dir.fd, owner);
      sys.fchown(dir.fd, owner.uid, owner.gid);
      continue;
    }
    giveEntry(sys, dirFd, entry.name, owner);
  }
}

/** Chowns the non-directory dirFd/name through an O_PATH descriptor of it, when it is root's and has one name. */
function giveEntry(sys: Sys, dirFd: number, name: string | Buffer, owner: StoreOwner): void {
  using entry = own(sys, sys.openat(dirFd, name, O_PATH | O_NOFOLLOW));
  const st = sys.fstat(entry.fd);
  if (st.uid !== 0 || st.nlink !== 1 || isDir(st.mode)) return;
  sys.fchownat(entry.fd, '', owner.uid, owner.gid, AT_EMPTY_PATH);
}
