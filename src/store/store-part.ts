// store-part.ts: what root makes in another user's store is that user's: store parts (clones/, cache/, …), the files it writes there, and the snapshots it publishes.
import { mkdirIfMissing, openChildDir, own } from '../base/fd.js';
import { AT_SYMLINK_NOFOLLOW, isDir } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';

/** A store's owner and group, to give what root makes there. */
export interface StoreOwner {
  uid: number;
  gid: number;
}

/**
 * The owner of the store open at storeFd when this process is root and the store is
 * another user's, private to them (no group or other bits: a shared store's parts stay
 * as its admin made them); else undefined.
 */
export function foreignOwner(sys: Sys, storeFd: number): StoreOwner | undefined {
  if (process.geteuid?.() !== 0) return undefined;
  const st = sys.fstat(storeFd);
  if (st.uid === 0 || (st.mode & 0o077) !== 0) return undefined;
  return { uid: st.uid, gid: st.gid };
}

/**
 * Gives the directory open at fd, which this process just made in the store open at
 * storeFd, to the store's owner and group when this process is root and the store is
 * another user's: a part root made 0700 for itself (root may use a store another user
 * owns) would shut the owner out of its own store (every command EACCES on it).
 */
export function giveToStoreOwner(sys: Sys, storeFd: number, fd: number): void {
  if (process.geteuid?.() !== 0) return;
  const store = sys.fstat(storeFd);
  const part = sys.fstat(fd);
  if (store.uid === 0 || part.uid === store.uid) return;
  // Only the empty directory just made: the owner may rename another directory of the store in under its name between
  // the mkdir and the open (one of root's, a snapshot root captured there), which must not become the owner's.
  if (part.uid !== 0 || (part.mode & 0o7777) !== 0o700 || sys.readdir(fd).length > 0) return;
  sys.fchown(fd, store.uid, store.gid);
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
 * owner could neither read nor remove it). Children go before their directory, so nothing
 * below a directory is the owner's while root still works in it: the build is root's 0700
 * until its own turn comes, last. Only root's entries change hands, and of files only
 * those with one name (what this build wrote): a stored copy an older snapshot shares
 * keeps its owner. Never follows a link (a link's own owner is set).
 */
export function giveTree(sys: Sys, dirFd: number, owner: StoreOwner): void {
  for (const entry of sys.readdir(dirFd)) {
    const st = sys.fstatat(dirFd, entry.name, AT_SYMLINK_NOFOLLOW);
    if (isDir(st.mode)) {
      using child = own(sys, openChildDir(sys, dirFd, entry.name));
      giveTree(sys, child.fd, owner);
    } else if (st.uid === 0 && st.nlink === 1) {
      sys.fchownat(dirFd, entry.name, owner.uid, owner.gid, AT_SYMLINK_NOFOLLOW);
    }
  }
  if (sys.fstat(dirFd).uid === 0) sys.fchown(dirFd, owner.uid, owner.gid);
}
