// store-dir.ts: a store directory on disk: open (create, sweep), load a snapshot, remove one, close (ephemeral removal).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename, dirname } from 'node:path';

import { SealError, isSealError } from '../base/errors.js';
import { isRefusal, throwIfRefused } from '../base/refusal.js';
import { DIR_FLAGS, openChildDir, openRealDir, openRealPlace, own, removeAt, removeOwnDir, stillNamed, tryFlock, type Fd } from '../base/fd.js';
import { readAllAt } from '../base/io.js';
import { escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, DT_DIR, DT_REG, DT_UNKNOWN, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, RENAME_NOREPLACE, isLink } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { FileIdentity } from '../sys/identity.js';
import type { Stat, Sys } from '../sys/native.js';
import { decodeDocument, type StoredSnapshot } from './document.js';
import { decodeDocumentBytes } from './document-parse.js';
import { BUILD_PREFIX, CACHE_DIR, CLONES_DIR, DOCUMENT_NAME, LEASES_DIR, PULL_LOCK_PREFIX, REMOVING_PREFIX, SNAPSHOTS_DIR, TMP_DIR, LOCK_NAME } from './layout.js';
import { statOrNull } from './clone-paths.js';
import { checkUnleased } from './lease.js';
import { holdingLock, openLock, withStoreLock } from './lock.js';
import { isCloneLockName } from './clone-lock.js';
import { DIGEST_RE } from './digests.js';
import { giveToStoreOwner } from './store-part.js';
import { readOnlyStore } from './read-only.js';
import { checkPart, checkSnapshot, checkPathAbove, openForeignStore, storeRule, type StoreTrust, type TrustRule } from './trust.js';

const MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024;

/** Opens the store directory and checks it (see trust.ts): its fd and the rule its parts are checked with. */
function openTrustedRoot(sys: Sys, root: string, trust: StoreTrust): { dir: Fd; rule: TrustRule } {
  let dir = own(sys, openRealDir(sys, root, 'store directory'));
  try {
    let st = sys.fstat(dir.fd);
    const foreign = process.geteuid!() === 0 && st.uid !== 0;
    if (foreign) {
      dir.close();
      dir = openForeignStore(sys, root, st.uid);
      st = sys.fstat(dir.fd);
    }
    const rule = storeRule(st, trust, escapePath(root));
    // The store's own modes first, then what lies above it (openForeignStore proved root's path its own way).
    if (!foreign) checkPathAbove(sys, root, dir.fd);
    return { dir, rule };
  } catch (err) {
    dir[Symbol.dispose]();
    throw err;
  }
}

/**
 * Makes (when `make`, and missing) and checks the store's directory `name`: made 0700,
 * or a shared store's 3770 past the umask (setgid, and sticky: a member renames or removes
 * only its own entries); one of yours from before the sticky bit was asked for gets it. A
 * missing one is fine (nothing was planted); one you may not open (another member's, in a
 * shared store) is checked by its name's fstatat: you cannot use it, but who can write it
 * must still be trusted.
 */
/**
 * What the open of a store part dirFd/name (`shown`: its path, escaped) refused with ELOOP
 * or ENOTDIR says: a link planted under the part's name (SEAL_SYMLINK) or a file
 * (SEAL_CORRUPT), never followed; a name gone meanwhile is said as what the open met.
 */
export function partNotDirectory(sys: Sys, dirFd: number, name: string, shown: string, err: unknown): SealError {
  let link = false;
  try {
    link = isLink(sys.fstatat(dirFd, name, AT_SYMLINK_NOFOLLOW).mode);
  } catch {
    // Gone meanwhile.
  }
  return new SealError(link ? 'SEAL_SYMLINK' : 'SEAL_CORRUPT', `store part must be a real directory, not ${link ? 'a symlink' : 'a file'}: ${shown}`, { cause: err });
}

function trustedPart(sys: Sys, dirFd: number, name: string, rule: TrustRule, shown: string, make: boolean): void {
  const mode = rule.group === undefined ? 0o700 : 0o3770;
  let made = false;
  if (make) {
    try {
      sys.mkdirat(dirFd, name, mode);
      made = true;
    } catch (err) {
      if (!hasCode(err, 'EEXIST')) throw err;
    }
  }
  let fd: number;
  try {
    fd = openChildDir(sys, dirFd, name);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return;
    if (hasCode(err, 'ELOOP', 'ENOTDIR')) throw partNotDirectory(sys, dirFd, name, shown, err);
    if (!hasCode(err, 'EACCES')) throw err;
    const st = statOrNull(sys, dirFd, name);
    // Gone since (or never there: a refused open says nothing of what stands): nothing to check.
    if (st !== null) checkPart(st, rule, shown);
    return;
  }
  using part = own(sys, fd);
  // A shared store's parts stay root's or the group's (no member owns them); a private store's are its owner's.
  if (made && rule.group === undefined) giveToStoreOwner(sys, dirFd, part.fd);
  let st = sys.fstat(part.fd);
  // Only where parts are made (a read-only store is checked as it stands: one not sticky is refused, with the fix).
  const sticky = make && rule.group !== undefined && (st.mode & 0o3022) === 0o2020 && st.uid === process.geteuid!();
  if ((made && (st.mode & 0o7777) !== mode) || sticky) {
    sys.fchmod(part.fd, made ? mode : (st.mode & 0o7777) | 0o1000);
    st = sys.fstat(part.fd);
  }
  checkPart(st, rule, shown);
}

/** What a store directory holds: its own parts, and the lost+found of a filesystem made for it. */
const STORE_NAMES: ReadonlySet<string> = new Set([SNAPSHOTS_DIR, TMP_DIR, LOCK_NAME, LEASES_DIR, CACHE_DIR, CLONES_DIR, 'lost+found']);

/**
 * Refuses a directory that holds anything a store does not (SEAL_COLLISION naming it): a
 * project, a home directory or any other directory named as a store by mistake is never
 * filled with a store's parts, and an ephemeral store's close, which removes the whole
 * directory, never removes what was there before. A store already (its `lock`,
 * `snapshots/`, `tmp/` and `leases/` there) may hold other names, the parts of a later
 * treeseal, left alone (they locked every older build out of the store); not when it is
 * opened `ephemeral` (its close would remove them with the rest).
 */
function checkOnlyStoreParts(sys: Sys, dirFd: number, root: string, ephemeral: boolean): void {
  const entries = sys.readdir(dirFd);
  const others = entries.flatMap((e) => (typeof e.name === 'string' && STORE_NAMES.has(e.name) ? [] : [typeof e.name === 'string' ? e.name : Buffer.from(e.name).toString('latin1')]));
  if (others.length === 0) return;
  const has = (name: string, type: number): boolean => entries.some((e) => e.name === name && (e.type === type || e.type === DT_UNKNOWN));
  if (!ephemeral && has(LOCK_NAME, DT_REG) && [SNAPSHOTS_DIR, TMP_DIR, LEASES_DIR].every((d) => has(d, DT_DIR))) return;
  // The first name in order, so the message is the same on every filesystem.
  const name = others.sort()[0]!;
  throw new SealError(
    'SEAL_COLLISION',
    `not a treeseal store: ${escapePath(root)} holds ${escapePath(name)} (a store holds only snapshots/, tmp/, leases/, cache/, clones/ and lock): name a new or empty directory, or a store`,
    { path: root },
  );
}

/** The store directory a handle opened: what its path must still name when an ephemeral store is removed. */
export interface StoreIdentity {
  dev: bigint;
  ino: bigint;
}

export interface OpenedStore {
  /** Builds and half-removed snapshots swept. */
  swept: number;
  identity: StoreIdentity;
  /** The store is on a filesystem mounted read-only: opened as it stands, nothing made or swept. */
  readOnly: boolean;
}

/**
 * Opens a store directory (the directory itself must exist or be creatable), checks
 * that only users it trusts (see trust.ts) can have written it, its snapshots/,
 * tmp/, leases/, cache/ and lock (else SEAL_UNTRUSTED), makes what is missing, and sweeps
 * builds no live process holds. Returns how many it swept, and which directory it opened.
 * A store on a filesystem mounted read-only is checked as it stands (every part there) and
 * neither made nor swept; an ephemeral one there is refused (its close could not remove it).
 */
export function openStoreAt(sys: Sys, root: string, trust: StoreTrust = 'owner', ephemeral = false): OpenedStore {
  const { rule, dir } = openTrustedRoot(sys, root, trust);
  using _dir = dir;
  const st = sys.fstat(dir.fd);
  const identity = { dev: st.dev, ino: st.ino };
  checkOnlyStoreParts(sys, dir.fd, root, ephemeral);
  // The lock first: a filesystem mounted read-only shows there (EROFS), before anything is made.
  let readOnly = false;
  let lockFd: number;
  try {
    lockFd = openLock(sys, root, { mode: rule.group === undefined ? 0o600 : 0o660, check: (lockSt: Stat, shown: string) => checkPart(lockSt, rule, shown) }, () => (readOnly = true));
  } catch (err) {
    if (readOnly && isSealError(err, 'SEAL_UNAVAILABLE') && hasCode(err.cause, 'ENOENT')) {
      throw new SealError('SEAL_UNAVAILABLE', `not a treeseal store: ${escapePath(root)} holds no ${LOCK_NAME}, and its filesystem is mounted read-only`, { path: root, cause: err.cause });
    }
    throw err;
  }
  using lock = own(sys, lockFd);
  if (readOnly) {
    if (ephemeral) throw readOnlyStore('an ephemeral store (removed at its close)', root);
    for (const name of [SNAPSHOTS_DIR, TMP_DIR, LEASES_DIR, CACHE_DIR, CLONES_DIR]) trustedPart(sys, dir.fd, name, rule, escapePath(`${root}/${name}`), false);
    // The lock is there: what every open makes must be too (a materialize locks and leases in them), else this is no store.
    const missing = [SNAPSHOTS_DIR, TMP_DIR, LEASES_DIR].find((name) => statOrNull(sys, dir.fd, name) === null);
    if (missing !== undefined) {
      throw new SealError('SEAL_UNAVAILABLE', `not a treeseal store: ${escapePath(root)} holds no ${missing}/, and its filesystem is mounted read-only`, { path: root });
    }
    return { swept: 0, identity, readOnly: true };
  }
  for (const name of [SNAPSHOTS_DIR, TMP_DIR, LEASES_DIR]) trustedPart(sys, dir.fd, name, rule, escapePath(`${root}/${name}`), true);
  // cache/ and clones/ are made by the first capture that saves a stat cache, the first materialize that saves
  // a ledger (0700); a shared store makes them here, for the group.
  for (const name of [CACHE_DIR, CLONES_DIR]) trustedPart(sys, dir.fd, name, rule, escapePath(`${root}/${name}`), rule.group !== undefined);
  return { swept: holdingLock(sys, root, lock.fd, true, () => sweepStaleBuilds(sys, root)), identity, readOnly: false };
}

/**
 * Removes a whole (ephemeral) store directory; a store already gone is fine. Only the
 * directory the handle opened (`identity`): one its path names now that is another (the
 * store moved away, another directory made there) is SEAL_CHANGED and nothing is removed.
 * It is emptied through its own fd, and its name removed only while it still names it. No
 * thaw pass: removal opens each directory up through its own fd before emptying it, and a
 * frozen file needs no mode change to be unlinked. A store a failed close already emptied
 * (its rmdir refused) is removed again without its parts.
 */
export function closeStoreAt(sys: Sys, root: string, othersBusy = false, identity?: StoreIdentity): void {
  let fd: number;
  try {
    fd = openRealDir(sys, root, 'store directory');
  } catch (err) {
    if (isSealError(err, 'SEAL_UNAVAILABLE')) return;
    throw err;
  }
  using store = own(sys, fd);
  const st = sys.fstat(store.fd);
  if (identity !== undefined && (st.dev !== identity.dev || st.ino !== identity.ino)) {
    throw new SealError('SEAL_CHANGED', `ephemeral store is no longer the directory at its path (moved or replaced since it was opened); nothing was removed: ${escapePath(root)}`, { path: root });
  }
  using parent = own(sys, openRealPlace(sys, dirname(root), 'store parent'));
  const name = basename(root);
  const names = new Set(sys.readdir(store.fd).map((e) => String(e.name)));
  if (!names.has(TMP_DIR) && !names.has(SNAPSHOTS_DIR)) {
    removeOwnDir(sys, parent.fd, name, store.fd);
    return;
  }
  // Removed under the exclusive lock, and only when nothing else uses it: a snapshot a lease
  // holds (another process, another handle) or a build another call is making keeps the store whole.
  withStoreLock(sys, root, true, () => {
    try {
      checkUnleased(sys, root, undefined);
      checkNoLiveBuild(sys, root, othersBusy);
    } catch (err) {
      if (isSealError(err, 'SEAL_BUSY')) throw new SealError('SEAL_BUSY', `ephemeral store is left in place: ${escapePath(root)}: ${err.message}`);
      throw err;
    }
    removeOwnDir(sys, parent.fd, name, store.fd);
  });
}

/**
 * The pids /proc/locks names as holding a flock on st's inode (empty where it cannot be
 * read): `1: FLOCK  ADVISORY  WRITE <pid> <major>:<minor>:<inode> 0 EOF`, waiters (`->`) left out.
 */
function flockHolders(st: Stat): number[] {
  let text: string;
  try {
    text = readFileSync('/proc/locks', 'utf8');
  } catch {
    return [];
  }
  const major = ((st.dev >> 8n) & 0xfffn) | ((st.dev >> 32n) & ~0xfffn);
  const minor = (st.dev & 0xffn) | ((st.dev >> 12n) & ~0xffn);
  const id = `${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${st.ino}`;
  const holders: number[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[1] === 'FLOCK' && f[5] === id) holders.push(Number(f[4]));
  }
  return holders;
}

/**
 * SEAL_BUSY while a live process holds a build or a pull lock in the store's tmp/ (another
 * capture or pull is under way). One only this process holds is not, when no other call
 * of this process is under way (`othersBusy` false): close() has waited for every call of
 * the store, so it was left by a worker thread that died mid-job (a thread's fds outlive it).
 */
function checkNoLiveBuild(sys: Sys, storeRoot: string, othersBusy: boolean): void {
  using tmp = own(sys, openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory'));
  for (const entry of sys.readdir(tmp.fd)) {
    const name = entry.name;
    if (typeof name !== 'string' || !(name.startsWith(BUILD_PREFIX) || name.startsWith(PULL_LOCK_PREFIX))) continue;
    let fd: number;
    try {
      fd = sys.openat(tmp.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      if (hasCode(err, 'ENOENT', 'ELOOP')) continue;
      throw err;
    }
    using held = own(sys, fd);
    if (tryFlock(sys, held.fd)) continue;
    const holders = flockHolders(sys.fstat(held.fd));
    if (!othersBusy && holders.length > 0 && holders.every((pid) => pid === process.pid)) continue;
    throw new SealError('SEAL_BUSY', `a capture or pull is building into it (${TMP_DIR}/${name})`);
  }
}

/**
 * A manifest.json up to this size is decoded as objects (JSON.parse, native and quick in a
 * fresh process: `treeseal ls` of a 5k-entry snapshot 0.30 s against 0.36 s through the
 * tables, whose byte scanner runs cold there); a larger one into packed tables, which hold
 * its entries in a fraction of the memory. 2 MiB is about 11k entries, a few MB as objects.
 */
const OBJECTS_UP_TO = 2 * 1024 * 1024;

/** Reads and proves the manifest.json of a published snapshot directory. */
export function loadSnapshotAt(sys: Sys, snapshotsFd: number, digest: string): StoredSnapshot {
  return readSnapshotAt(sys, snapshotsFd, digest).data;
}

/** loadSnapshotAt, with the identity manifest.json had, unchanged, while the bytes proven were read. */
export function readSnapshotAt(sys: Sys, snapshotsFd: number, digest: string): { data: StoredSnapshot; identity: FileIdentity } {
  using dir = openSnapshotDir(sys, snapshotsFd, digest);
  let text: Buffer;
  let identity: FileIdentity;
  try {
    // decodeDocumentBytes proves the text against the digest: a torn read is never taken for the snapshot.
    ({ bytes: text, identity } = readAllAt(sys, dir.fd, DOCUMENT_NAME, MAX_DOCUMENT_BYTES, DOCUMENT_NAME, { selfProving: true }));
  } catch (err) {
    // The kernel refusing the read (SEAL_IO, its cause the system error) says nothing about the snapshot.
    if (isSealError(err, 'SEAL_IO')) throw err;
    throwIfRefused(err, `snapshot manifest cannot be read: ${digest}`);
    // Removed while it was read (rm moves it out of snapshots/ first): gone, not corrupt.
    if (!stillPublished(sys, snapshotsFd, digest, dir.fd)) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot (removed while it was read): ${digest}`, { cause: err });
    throw new SealError('SEAL_CORRUPT', `snapshot has no readable manifest: ${digest}`, { cause: err });
  }
  return { data: text.length <= OBJECTS_UP_TO ? decodeDocument(text.toString('utf8'), digest) : decodeDocumentBytes(text, digest), identity };
}

/** Whether snapshots/<digest> still names the directory open at dirFd (false too when that cannot be told). */
function stillPublished(sys: Sys, snapshotsFd: number, digest: string, dirFd: number): boolean {
  try {
    return stillNamed(sys, snapshotsFd, digest, sys.fstat(dirFd));
  } catch {
    return false;
  }
}

/** Opens a published snapshot's directory: one someone you do not trust made or can write is SEAL_UNTRUSTED (see trust.ts). */
export function openSnapshotDir(sys: Sys, snapshotsFd: number, digest: string): Fd {
  let dir: Fd;
  try {
    dir = own(sys, openChildDir(sys, snapshotsFd, digest));
  } catch (err) {
    if (hasCode(err, 'ENOENT')) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digest}`, { cause: err });
    throwIfRefused(err, `snapshot cannot be opened: ${digest}`);
    throw new SealError('SEAL_CORRUPT', `snapshot is not a real directory: ${digest}`, { cause: err });
  }
  try {
    checkSnapshot(sys, dir.fd, () => sys.fstat(snapshotsFd), `snapshots/${digest}`);
  } catch (err) {
    dir[Symbol.dispose]();
    throw err;
  }
  return dir;
}

/**
 * Removes builds in tmp/ that no live process holds (their flock is free), snapshots
 * left half-removed, and the pull locks of pulls that died; call with the store lock
 * held exclusively.
 */
export function sweepStaleBuilds(sys: Sys, storeRoot: string): number {
  using tmp = own(sys, openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory'));
  let swept = sweepLedgerFiles(sys, storeRoot);
  for (const entry of sys.readdir(tmp.fd)) {
    const name = entry.name;
    // A pull's or a clone's lock no call holds (its holder was killed, or the clone is gone): swept; in a shared store
    // another member's is theirs (tmp/ is sticky: removing it failed every open with EPERM).
    if (typeof name === 'string' && (name.startsWith(PULL_LOCK_PREFIX) || isCloneLockName(name))) {
      if (ownedHere(sys, tmp.fd, name) && removeUnheld(sys, tmp.fd, name)) swept++;
      continue;
    }
    if (typeof name !== 'string' || !(name.startsWith(REMOVING_PREFIX) || name.startsWith(BUILD_PREFIX))) continue;
    // In a shared store, another member's leftovers are theirs to sweep (tmp/ is sticky: this user could not remove
    // them, and one planted there unremovable once failed every other member's open).
    if (!ownedHere(sys, tmp.fd, name)) continue;
    // A build's lock is held until it is removed; a half-removed snapshot has none.
    using lock = name.startsWith(BUILD_PREFIX) ? lockStaleBuild(sys, tmp.fd, name) : undefined;
    if (lock === null) continue;
    try {
      removeAt(sys, tmp.fd, name);
    } catch (err) {
      // One the kernel will not remove (an immutable file in it, a read-only filesystem) stays, unpublished and
      // harmless: it must not make the store unusable (it once failed every open). rm said what keeps it.
      if (!isRefusal(err)) throw err;
      continue;
    }
    swept++;
  }
  return swept;
}

/** Whether tmp/name is this user's to sweep: root sweeps every leftover, a user its own (one gone since: nothing to do). */
function ownedHere(sys: Sys, tmpFd: number, name: string): boolean {
  const uid = process.geteuid!();
  if (uid === 0) return true;
  const st = statOrNull(sys, tmpFd, name);
  return st !== null && st.uid === uid;
}

/**
 * Removes the new ledger files in clones/ whose writer died before renaming one into place
 * (no store lock guards clones/: each is flocked by its writer from its creation to its
 * rename, so one that can be locked now has none). Returns how many.
 */
function sweepLedgerFiles(sys: Sys, storeRoot: string): number {
  using store = own(sys, openRealDir(sys, storeRoot, 'store directory'));
  let clones: number;
  try {
    clones = sys.openat(store.fd, CLONES_DIR, DIR_FLAGS);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return 0;
    throw err;
  }
  using dir = own(sys, clones);
  let swept = 0;
  for (const entry of sys.readdir(dir.fd)) {
    const name = entry.name;
    if (typeof name === 'string' && name.startsWith(BUILD_PREFIX) && removeUnheld(sys, dir.fd, name)) swept++;
  }
  return swept;
}

/**
 * Removes the file `name` in the directory open at dirFd when no live process holds its
 * flock: a pull lock (`tmp/pull-<digest>`, see registry/pull-lock.ts) or a new ledger file
 * in clones/. Its flock is taken first, and it is removed while held, only if the name
 * still binds the file locked. True when removed.
 */
function removeUnheld(sys: Sys, dirFd: number, name: string): boolean {
  let fd: number;
  try {
    fd = sys.openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    if (hasCode(err, 'ENOENT', 'ELOOP')) return false;
    throw err;
  }
  using lock = own(sys, fd);
  if (!tryFlock(sys, lock.fd)) return false;
  const st = sys.fstat(lock.fd);
  let now: Stat;
  try {
    now = sys.fstatat(dirFd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return false;
    throw err;
  }
  if (now.dev !== st.dev || now.ino !== st.ino) return false;
  try {
    sys.unlinkat(dirFd, name, 0);
  } catch (err) {
    // Its writer, refused the flock this sweep held, removed its own file meanwhile: nothing left to sweep.
    if (hasCode(err, 'ENOENT')) return false;
    throw err;
  }
  return true;
}

/**
 * Takes the flock of a build no live process holds and returns its fd (the lock);
 * undefined when it cannot be opened as a directory (nothing to lock), null while a
 * live process holds it or once it is gone.
 */
function lockStaleBuild(sys: Sys, tmpFd: number, name: string): Fd | undefined | null {
  let fd: number;
  try {
    fd = sys.openat(tmpFd, name, DIR_FLAGS);
  } catch (err) {
    // Only what is not a directory (no build can live there) goes without its lock: a
    // build the kernel would not open now (EMFILE, EIO) may be another process's live one.
    if (hasCode(err, 'ENOTDIR', 'ELOOP')) return undefined;
    // Removed since it was listed: its owner removes it under its own lock, not the store's.
    if (hasCode(err, 'ENOENT')) return null;
    throw err;
  }
  const build = own(sys, fd);
  try {
    if (tryFlock(sys, build.fd)) return build;
  } catch (err) {
    build[Symbol.dispose]();
    throw err;
  }
  build[Symbol.dispose]();
  return null;
}

/**
 * gc's repair of a published snapshot whose own directory rm opened up (0700) and then died
 * before its rename: the directory is frozen again (0500). Only this user's, and only that
 * mode: anything else is verify's to report. Returns how many.
 */
export function refreezeSnapshots(sys: Sys, storeRoot: string): number {
  using snapshots = own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
  let frozen = 0;
  for (const entry of sys.readdir(snapshots.fd)) {
    if (typeof entry.name !== 'string' || !DIGEST_RE.test(entry.name)) continue;
    try {
      using dir = own(sys, openChildDir(sys, snapshots.fd, entry.name));
      const st = sys.fstat(dir.fd);
      if (st.uid !== process.geteuid!() || (st.mode & 0o7777) !== 0o700) continue;
      sys.fchmod(dir.fd, 0o500);
      frozen++;
    } catch {
      // gone meanwhile, not a directory, or not this user's to open: left as it is
    }
  }
  return frozen;
}

/**
 * Unpublishes a snapshot with one rename into tmp/, then removes it there; call with the
 * store lock held exclusively. Moving a directory to another parent rewrites its `..`,
 * which needs write permission on the directory itself (root needs none): the snapshot's
 * own directory, never shared with another snapshot, is made 0700 first (put back if the
 * rename fails). Removal then unlinks files and opens up only directories: a file another
 * snapshot shares by a hard link keeps its mode and bytes.
 */
export function removeSnapshot(sys: Sys, storeRoot: string, digest: string): void {
  checkUnleased(sys, storeRoot, digest);
  using snapshots = own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
  using tmp = own(sys, openRealDir(sys, `${storeRoot}/${TMP_DIR}`, 'store tmp directory'));
  const name = REMOVING_PREFIX + randomBytes(12).toString('hex');
  using dir = openToMove(sys, snapshots.fd, digest);
  const mode = dir === undefined ? 0o700 : sys.fstat(dir.fd).mode & 0o7777;
  const openUp = dir !== undefined && (mode & 0o700) !== 0o700;
  if (openUp) ownerChmod(sys, dir.fd, mode | 0o700);
  try {
    sys.renameat2(snapshots.fd, digest, tmp.fd, name, RENAME_NOREPLACE);
  } catch (err) {
    if (openUp) ownerChmod(sys, dir!.fd, mode);
    if (hasCode(err, 'ENOENT')) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digest}`, { cause: err });
    throw err;
  }
  try {
    removeAt(sys, tmp.fd, name);
  } catch (err) {
    if (!isRefusal(err)) throw err;
    const left = `${storeRoot}/${TMP_DIR}/${name}`;
    // EROFS: a read-only btrfs subvolume this user may not open up (another user's: a snapshot captured by root, say).
    const why = hasCode(err, 'EROFS')
      ? `a read-only btrfs subvolume of another user: as its owner \`btrfs property set -f PATH ro false\`, or as root \`btrfs subvolume delete PATH\``
      : 'an immutable or append-only file: lsattr -R, then chattr -i or -a as root';
    throw new SealError(
      'SEAL_IO',
      `snapshot ${digest} is removed from the store, but not all its files could be deleted: ${escapePath((err as Error).message)}; ` +
        `what is left is in ${escapePath(left)} (${why}; the next open or gc deletes it once it can)`,
      { path: left, cause: err },
    );
  }
}

/** The snapshot directory about to be moved; undefined when the name is not a directory (the rename and removal handle it). */
function openToMove(sys: Sys, snapshotsFd: number, digest: string): Fd | undefined {
  try {
    return own(sys, openChildDir(sys, snapshotsFd, digest));
  } catch (err) {
    if (hasCode(err, 'ENOENT')) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${digest}`, { cause: err });
    if (hasCode(err, 'ENOTDIR', 'ELOOP')) return undefined;
    throw err;
  }
}

/** fchmod that another owner's directory refuses (EPERM) quietly: the rename then says what went wrong. */
function ownerChmod(sys: Sys, fd: number, mode: number): void {
  try {
    sys.fchmod(fd, mode);
  } catch (err) {
    if (!hasCode(err, 'EPERM')) throw err;
  }
}
