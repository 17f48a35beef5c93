// identity.ts: the mutation identity of a file (dev, ino, mode, size, mtime, ctime) and its comparison.
import { S_IFMT } from './constants.js';
import type { Stat } from './native.js';

export interface FileIdentity {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly mode: number;
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
}

export function identityOf(st: Stat): FileIdentity {
  return { dev: st.dev, ino: st.ino, mode: st.mode, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs };
}

/** Everything a writer, chmod, rename or truncate would change. */
export function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return (
    a.dev === b.dev &&
    a.ino === b.ino &&
    a.mode === b.mode &&
    a.size === b.size &&
    a.mtimeNs === b.mtimeNs &&
    a.ctimeNs === b.ctimeNs
  );
}

/**
 * sameIdentity without ctime, for a frozen file in a published snapshot: the stat
 * cache's links share its inode with other snapshots and with builds, so its ctime
 * also moves whenever another capture gives that inode a name or drops one (linkat,
 * unlinkat: the link count), which changes neither a byte nor a mode.
 */
export function sameStoredIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.mode === b.mode && a.size === b.size && a.mtimeNs === b.mtimeNs;
}

/** The same object: device, inode and file type (what an open must not have swapped). */
export function sameObject(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && (a.mode & S_IFMT) === (b.mode & S_IFMT);
}
