// lease.ts: leases on published snapshots: a flocked file per lease in leases/, which rm refuses to pass (SEAL_BUSY) and gc sweeps once its holder is gone.
import { randomBytes } from 'node:crypto';

import { SealError } from '../base/errors.js';
import { sealed } from '../base/refusal.js';
import { openChildDir, openRealDir, own, tryFlock, type Fd } from '../base/fd.js';
import { writeAll } from '../base/io.js';
import { AT_REMOVEDIR, AT_SYMLINK_NOFOLLOW, LOCK_EX, LOCK_NB, LOCK_SH, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_RDWR, isDir, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { DOCUMENT_NAME, LEASES_DIR, SNAPSHOTS_DIR } from './layout.js';
import { withStoreLock } from './lock.js';
import { listDigests } from './digests.js';

/** A lease file's name: the snapshot's digest, a dash, 16 hex digits. */
const LEASE_RE = /^([0-9a-f]{64})-[0-9a-f]{16}$/;

/**
 * What a held lease is: its file's name in leases/ and the fd that holds its flock; or,
 * taken through a store on a read-only filesystem (name ''), the fd of the snapshot's
 * manifest.json, holding a shared flock on it (see takeLease).
 */
export interface LeaseHandle {
  name: string;
  fd: number;
}

function openLeases(sys: Sys, storeRoot: string): Fd | undefined {
  try {
    return own(sys, openRealDir(sys, `${storeRoot}/${LEASES_DIR}`, 'store leases directory'));
  } catch (err) {
    if (err instanceof SealError && err.code === 'SEAL_UNAVAILABLE' && hasCode(err.cause, 'ENOENT')) return undefined;
    throw err;
  }
}

/**
 * Leases the published snapshot `digest`, under the store's shared lock (so no rm is
 * half done): a new file in leases/ naming this process, flocked until released. Through a
 * store on a filesystem mounted read-only (a read-only bind mount of a store written
 * through its own path), where no file can be made (EROFS), a shared flock on the
 * snapshot's manifest.json, which an rm through the writable path meets too (see
 * checkUnleased): on the same host and filesystem only, as every flock.
 */
export function takeLease(sys: Sys, storeRoot: string, digest: string): LeaseHandle {
  return withStoreLock(sys, storeRoot, false, () => {
    using snapshots = own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
    let st;
    try {
      st = sys.fstatat(snapshots.fd, digest, AT_SYMLINK_NOFOLLOW);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digest}`, { cause: err });
      throw err;
    }
    if (!isDir(st.mode)) throw new SealError('SEAL_CORRUPT', `snapshot is not a directory: ${digest}`);
    using leases = openLeases(sys, storeRoot);
    if (leases === undefined) throw new SealError('SEAL_UNAVAILABLE', `store has no leases directory (open it with this version first): ${storeRoot}`);
    const name = `${digest}-${randomBytes(8).toString('hex')}`;
    let made: number;
    try {
      made = sys.openat(leases.fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600);
    } catch (err) {
      if (!hasCode(err, 'EROFS')) throw err;
      return { name: '', fd: leaseManifest(sys, snapshots.fd, digest) };
    }
    const file = own(sys, made);
    try {
      sys.flock(file.fd, LOCK_EX | LOCK_NB);
      // Readable past the umask: in a shared store another member's rm must open it to test its flock.
      sys.fchmod(file.fd, 0o644);
      writeAll(sys, file.fd, Buffer.from(`pid ${process.pid}\n`));
      return { name, fd: file.release() };
    } catch (err) {
      file.close();
      try {
        sys.unlinkat(leases.fd, name, 0);
      } catch {
        // left for gc: unlocked, it is stale
      }
      throw err;
    }
  });
}

/**
 * The snapshot's manifest.json, opened for reading (never through a link): what a lease
 * through a read-only store holds a shared flock on. Nothing else flocks it (a build's
 * flock on its directory stays on the directory after the publish).
 */
function openManifest(sys: Sys, snapshotsFd: number, digest: string): Fd {
  using dir = own(sys, openChildDir(sys, snapshotsFd, digest));
  const file = own(sys, sys.openat(dir.fd, DOCUMENT_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  try {
    if (!isReg(sys.fstat(file.fd).mode)) throw new SealError('SEAL_CORRUPT', `snapshot's ${DOCUMENT_NAME} is not a regular file: ${digest}`);
  } catch (err) {
    file.close();
    throw err;
  }
  return file;
}

/** A lease through a read-only store: the snapshot's manifest open and held by a shared flock. */
function leaseManifest(sys: Sys, snapshotsFd: number, digest: string): number {
  const file = openManifest(sys, snapshotsFd, digest);
  try {
    sys.flock(file.fd, LOCK_SH | LOCK_NB);
  } catch (err) {
    file.close();
    // Only an rm's look takes it exclusively, under the store's exclusive lock, which this lease's shared one keeps out.
    if (hasCode(err, 'EAGAIN', 'EWOULDBLOCK')) throw new SealError('SEAL_BUSY', `snapshot ${digest}: another process holds its ${DOCUMENT_NAME} flocked exclusively; it cannot be leased now`, { retryable: true });
    throw err;
  }
  return file.release();
}

/**
 * Whether the snapshot is held by a lease taken through a read-only mount of the store (a
 * shared flock on its manifest; see takeLease). Only its owner or root can reach it (the
 * snapshot's directory is 0500), so no other member of a shared store can pin it this way.
 */
function manifestLeased(sys: Sys, snapshotsFd: number, digest: string): boolean {
  let file: Fd;
  try {
    file = openManifest(sys, snapshotsFd, digest);
  } catch {
    // Not there, not a file, not this user's to open: the removal says what it meets.
    return false;
  }
  using held = file;
  return !tryFlock(sys, held.fd);
}

/** Ends a lease: its file removed, then its fd (and so its flock) closed. */
export function releaseLease(sys: Sys, storeRoot: string, lease: LeaseHandle): void {
  using file = own(sys, lease.fd);
  if (lease.name === '') return;
  using leases = openLeases(sys, storeRoot);
  if (leases === undefined) return;
  try {
    sys.unlinkat(leases.fd, lease.name, 0);
  } catch (err) {
    if (!hasCode(err, 'ENOENT')) throw err;
  }
  file.close();
}

/** The holder a lease file names (`pid N`), or undefined; read without following a link or blocking. */
function holderOf(sys: Sys, fd: number): string | undefined {
  const buf = Buffer.alloc(64);
  const n = sys.pread(fd, buf, 0, buf.length, 0);
  const m = /^pid (\d+)\n/.exec(buf.subarray(0, n).toString('latin1'));
  return m === null ? undefined : `pid ${m[1]}`;
}

/** Removes what stands under a lease's name but is no lease file (a link, FIFO, socket, or an empty directory); 1 when it went. */
function removeNotLease(sys: Sys, leasesFd: number, name: string): number {
  try {
    sys.unlinkat(leasesFd, name, isDir(sys.fstatat(leasesFd, name, AT_SYMLINK_NOFOLLOW).mode) ? AT_REMOVEDIR : 0);
    return 1;
  } catch {
    // gone meanwhile, or a directory with something in it: not a lease either way
    return 0;
  }
}

/**
 * Whether a lease file whose owner is `uid` can pin snapshot `digest`: one of its owner's
 * or root's. In a shared store a member uses only her own snapshots (another's bytes are
 * proven to no one else), so another member's file in leases/ holds nothing of hers (one
 * planted such files, flocked or unreadable, and pinned another member's snapshot for good).
 */
function pins(sys: Sys, snapshotsFd: number | undefined, uid: number, digest: string, owners: Map<string, number | undefined>): boolean {
  if (uid === 0 || snapshotsFd === undefined) return true;
  if (!owners.has(digest)) {
    let owner: number | undefined;
    try {
      owner = sys.fstatat(snapshotsFd, digest, AT_SYMLINK_NOFOLLOW).uid;
    } catch {
      owner = undefined;
    }
    owners.set(digest, owner);
  }
  const owner = owners.get(digest);
  return owner === undefined || owner === uid;
}

/** The store's snapshots/ (undefined when it cannot be opened: every lease then counts). */
function openSnapshots(sys: Sys, storeRoot: string): Fd | undefined {
  try {
    return own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
  } catch {
    return undefined;
  }
}

/**
 * Goes through the lease files (of `digest`, or all): a held one is returned (its name and
 * holder); a stale one (its holder is gone, so its flock is free) is removed, where this
 * user may (another member's, in a sticky leases/, is left: it holds nothing). A lease file
 * of a user other than its snapshot's owner (or root) holds nothing either (see pins). The
 * caller holds the store's exclusive lock, so no lease is taken meanwhile.
 */
function scan(sys: Sys, storeRoot: string, digest: string | undefined, stopAtHeld: boolean): { held: { name: string; holder: string | undefined }[]; swept: number } {
  const held: { name: string; holder: string | undefined }[] = [];
  let swept = 0;
  using leases = openLeases(sys, storeRoot);
  if (leases === undefined) return { held, swept };
  using snapshots = openSnapshots(sys, storeRoot);
  const owners = new Map<string, number | undefined>();
  for (const entry of sys.readdir(leases.fd)) {
    const name = entry.name;
    if (typeof name !== 'string') continue;
    const m = LEASE_RE.exec(name);
    if (m === null || (digest !== undefined && m[1] !== digest)) continue;
    let fd: number;
    try {
      fd = sys.openat(leases.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) continue;
      // A link or a socket under a lease's name holds nothing: removed, never followed (it once failed every rm and gc with ELOOP).
      if (hasCode(err, 'ELOOP', 'ENXIO')) {
        swept += removeNotLease(sys, leases.fd, name);
        continue;
      }
      // One this user cannot open (another member's, 0000): its flock cannot be tested, so it counts as held, if it can pin.
      if (hasCode(err, 'EACCES', 'EPERM')) {
        let uid = 0;
        try {
          uid = sys.fstatat(leases.fd, name, AT_SYMLINK_NOFOLLOW).uid;
        } catch (e) {
          // Gone meanwhile: nothing holds. Its owner not known: it counts (uid 0 pins).
          if (hasCode(e, 'ENOENT')) continue;
        }
        if (!pins(sys, snapshots?.fd, uid, m[1]!, owners)) continue;
        held.push({ name, holder: undefined });
        if (stopAtHeld) break;
        continue;
      }
      throw err;
    }
    using file = own(sys, fd);
    const st = sys.fstat(file.fd);
    // A FIFO or a directory under a lease's name: not a lease (a FIFO was skipped and never swept).
    if (!isReg(st.mode)) {
      swept += removeNotLease(sys, leases.fd, name);
      continue;
    }
    if (!tryFlock(sys, file.fd)) {
      if (!pins(sys, snapshots?.fd, st.uid, m[1]!, owners)) continue;
      held.push({ name, holder: holderOf(sys, file.fd) });
      if (stopAtHeld) break;
      continue;
    }
    try {
      sys.unlinkat(leases.fd, name, 0);
      swept++;
    } catch (err) {
      // Another member's stale file in the sticky leases/: left (its flock was free: it holds nothing); gone meanwhile: fine.
      if (!hasCode(err, 'EPERM', 'EACCES', 'ENOENT')) throw err;
    }
  }
  return { held, swept };
}

/**
 * Refuses (SEAL_BUSY, naming the snapshot and the holder) to go on while `digest` (or,
 * undefined, any snapshot of the store) is leased; removes stale leases on the way.
 * Under the exclusive lock.
 */
export function checkUnleased(sys: Sys, storeRoot: string, digest: string | undefined): void {
  const { held } = scan(sys, storeRoot, digest, true);
  using snapshots = held.length === 0 ? openSnapshots(sys, storeRoot) : undefined;
  if (snapshots !== undefined) {
    // A lease through a read-only mount of the store: the snapshot's, or (an ephemeral store's close) any snapshot's.
    const pinned = (digest === undefined ? listDigests(sys, storeRoot) : [digest]).find((d) => manifestLeased(sys, snapshots.fd, d));
    if (pinned !== undefined) {
      throw new SealError('SEAL_BUSY', `snapshot ${pinned} is leased through a read-only mount of the store (its manifest is flocked); nothing is removed while a lease holds it`);
    }
  }
  const first = held[0];
  if (first !== undefined) {
    throw new SealError(
      'SEAL_BUSY',
      `snapshot ${LEASE_RE.exec(first.name)![1]} is leased${first.holder === undefined ? '' : ` by ${first.holder}`} (${LEASES_DIR}/${first.name}); nothing is removed while a lease holds it`,
    );
  }
}

/** Removes every stale lease file (its holder gone); returns how many. Under the exclusive lock. */
export function sweepLeases(sys: Sys, storeRoot: string): number {
  return scan(sys, storeRoot, undefined, false).swept;
}

/** A held lease on a published snapshot: until it is released (or its process ends), rm of the snapshot is SEAL_BUSY. */
export class Lease {
  readonly digest: string;
  readonly #sys: Sys;
  readonly #storeRoot: string;
  readonly #handle: LeaseHandle;
  #released = false;

  /** @internal Leases come from `snap.lease()`. */
  constructor(sys: Sys, storeRoot: string, digest: string, handle: LeaseHandle) {
    this.#sys = sys;
    this.#storeRoot = storeRoot;
    this.digest = digest;
    this.#handle = handle;
  }

  get released(): boolean {
    return this.#released;
  }

  /** Ends the lease; idempotent. Its flock ends with its fd even when removing its file fails (gc sweeps the file then). */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    sealed('lease release', () => releaseLease(this.#sys, this.#storeRoot, this.#handle));
  }

  [Symbol.dispose](): void {
    this.release();
  }
}
