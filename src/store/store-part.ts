// store-part.ts: a store part root makes in another user's store is that user's: made lazily (clones/, cache/) or at open, given to the store's owner.
import { mkdirIfMissing, openChildDir, own } from '../base/fd.js';
import type { Sys } from '../sys/native.js';

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
