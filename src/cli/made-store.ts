// made-store.ts: a store a command made (capture, pull) and then failed in goes again while it holds nothing.
import { lstatSync } from 'node:fs';
import { dirname } from 'node:path';

import { AT_FDCWD, AT_REMOVEDIR, AT_SYMLINK_NOFOLLOW, LOCK_EX, LOCK_NB, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isDir, isReg, sys } from '../sys/index.js';

/** The highest directory on the way to path (path included) that does not exist yet, or undefined when path exists. */
export function firstMissing(path: string): string | undefined {
  let missing: string | undefined;
  try {
    for (let at = path; lstatSync(at, { throwIfNoEntry: false }) === undefined && dirname(at) !== at; at = dirname(at)) missing = at;
  } catch {
    return undefined;
  }
  return missing;
}

/** A store this command made: its path, the highest directory made for it, and the store directory's identity once opened. */
export interface MadeStore {
  storeDir: string;
  top: string;
  dev: bigint;
  ino: bigint;
}

/** What made the store: its identity, taken once the library opened it (no link on the way, no one else's to change). */
export function madeStore(storeDir: string, top: string): MadeStore | undefined {
  try {
    const st = lstatSync(storeDir, { bigint: true });
    return st.isDirectory() ? { storeDir, top, dev: st.dev, ino: st.ino } : undefined;
  } catch {
    return undefined;
  }
}

/** The store's own names, each left empty by a store that holds nothing. */
const STORE_PARTS = new Set(['lock', 'snapshots', 'tmp', 'leases', 'cache', 'clones']);

const DIR = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

/**
 * Removes the store this command made (still that directory, by device and inode), and the
 * directories above it it made (up to `top`), while it holds nothing but its own empty
 * parts and no one holds its lock; anything else found (a snapshot, a build, a download
 * to resume, a name it does not make, another command at work in it) leaves it all in
 * place. Every directory is opened without following a link, from the one above `top` down,
 * and every name removed through its parent's fd. Called once the store is closed.
 */
export function dropEmptyStore(made: MadeStore): void {
  const fds: number[] = [];
  try {
    // From the directory that was there before down to the store: none of them reached through a link.
    const parts = made.storeDir.slice(dirname(made.top).length).split('/').filter((p) => p !== '');
    fds.push(sys.openat(AT_FDCWD, dirname(made.top), O_RDONLY | O_DIRECTORY));
    for (const name of parts) fds.push(sys.openat(fds[fds.length - 1]!, name, DIR));
    const store = fds[fds.length - 1]!;
    const st = sys.fstat(store);
    if (st.dev !== made.dev || st.ino !== made.ino) return;
    // Held while it goes: a command that opened the same new store meanwhile holds it, or waits on it.
    const lock = sys.openat(store, 'lock', O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    fds.push(lock);
    const lockSt = sys.fstat(lock);
    if (!isReg(lockSt.mode) || lockSt.size !== 0) return;
    sys.flock(lock, LOCK_EX | LOCK_NB);
    const names = sys.readdir(store).map((e) => e.name);
    for (const name of names) {
      if (typeof name !== 'string' || !STORE_PARTS.has(name)) return;
      if (name === 'lock') continue;
      const part = sys.fstatat(store, name, AT_SYMLINK_NOFOLLOW);
      if (!isDir(part.mode)) return;
      const fd = sys.openat(store, name, DIR);
      fds.push(fd);
      if (sys.readdir(fd).length > 0) return;
    }
    for (const name of names) sys.unlinkat(store, name as string, name === 'lock' ? 0 : AT_REMOVEDIR);
    // The store, then each directory made for it, each by its parent's fd.
    for (let i = parts.length - 1; i >= 0; i--) sys.unlinkat(fds[i]!, parts[i]!, AT_REMOVEDIR);
  } catch {
    // Something else is there now, someone holds it, or it went: left as it is.
  } finally {
    for (const fd of fds) sys.close(fd);
  }
}
