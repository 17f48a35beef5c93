// trust.ts: the store trust rule (who may have written a store's parts), checked by fstat on the fds that were opened.
import { lstatSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

import { SealError } from '../base/errors.js';
import { DIR_FLAGS, openChildDir, openRealDir, own, walkDown, type Fd } from '../base/fd.js';
import { escapePath } from '../base/paths.js';
import { AT_FDCWD, O_DIRECTORY, O_NOFOLLOW, O_PATH, isDir } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import { sameObject } from '../sys/identity.js';
import type { Stat, Sys } from '../sys/native.js';

/** 'owner': only you (or root) can have written the store; 'group': a shared store, setgid, of a group you are in. */
export type StoreTrust = 'owner' | 'group';
export const STORE_TRUSTS: readonly StoreTrust[] = ['owner', 'group'];

/** A shared store's directories, which its preparation makes (root's, the group's) so that no member owns them. */
const SHARED_PARTS = ['snapshots', 'tmp', 'leases', 'cache', 'clones'];

const S_ISVTX = 0o1000;
const S_ISGID = 0o2000;
const GROUP_WRITE = 0o020;
const OTHER_WRITE = 0o002;

/** Whose writes a store's parts may hold: `owners` (you, root, and for root the store's owner) and, in a shared store, `group`. */
export interface TrustRule {
  uid: number;
  owners: ReadonlySet<number>;
  group: number | undefined;
}

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

function untrusted(message: string, path?: string): SealError {
  return new SealError('SEAL_UNTRUSTED', message, path === undefined ? {} : { path });
}

/**
 * Refuses the process's umask (read from /proc/self/status; not checked where it cannot
 * be read) when it takes bits from the owner: the store's own directories would be
 * unusable (0700 made 0600: EACCES at the next step) and its frozen files unreadable as
 * made (0400 made 0000: a snapshot that fails its own verify).
 */
export function checkUmask(read: () => string = () => readFileSync('/proc/self/status', 'utf8')): void {
  let mask: number | undefined;
  try {
    const m = /^Umask:\s*([0-7]+)$/m.exec(read());
    mask = m === null ? undefined : parseInt(m[1]!, 8);
  } catch {
    return;
  }
  if (mask !== undefined && (mask & 0o700) !== 0) {
    const shown = mask.toString(8).padStart(4, '0');
    throw new SealError('SEAL_UNAVAILABLE', `the umask ${shown} takes the owner's own permissions away: the store's directories and frozen files would be made unusable; run with a umask that leaves the owner's bits (022, 077)`);
  }
}

/**
 * Opens a shared store's directory, which is never made here: a missing one is
 * SEAL_UNAVAILABLE saying how to prepare it (made 0700 it would only be refused as not setgid).
 */
export function openSharedRoot(sys: Sys, root: string): number {
  try {
    return openRealDir(sys, root, 'store directory');
  } catch (err) {
    if (!(err instanceof SealError && err.code === 'SEAL_UNAVAILABLE' && hasCode(err.cause, 'ENOENT'))) throw err;
    // Its parts too: made by the first member's open, they would be that member's, who could then rename what the others publish.
    const parts = ['', ...SHARED_PARTS.map((p) => `/${p}`)].map((p) => escapePath(`${root}${p}`)).join(' ');
    throw new SealError('SEAL_UNAVAILABLE', `shared store does not exist: ${escapePath(root)}; prepare it once, as root: install -d -m 3770 -g GROUP ${parts}`, { cause: err });
  }
}

function inGroup(gid: number): boolean {
  return process.geteuid!() === 0 || process.getegid!() === gid || process.getgroups!().includes(gid);
}

/** Refuses a part of a store (`shown`: its escaped path) that someone the rule does not trust can have written. */
export function checkPart(st: Stat, rule: TrustRule, shown: string): void {
  const mode = st.mode & 0o7777;
  const trustedOwner = rule.owners.has(st.uid) || (rule.group !== undefined && st.gid === rule.group);
  // In a store of your own, another user's part is said first: its modes are not yours to fix (a 0777 directory planted
  // at your store's path once said `chmod go-w`). A shared store's is judged by its group and modes first, as an admin fixes them.
  if (!trustedOwner && rule.group === undefined) throw ownedByAnother(st, rule, shown);
  if (mode & OTHER_WRITE) throw untrusted(`untrusted store: ${shown} is writable by other users (mode ${octal(mode)}); fix: chmod go-w ${shown}`);
  if (mode & GROUP_WRITE) {
    if (rule.group === undefined) {
      throw untrusted(`untrusted store: ${shown} is writable by its group (mode ${octal(mode)}); fix: chmod g-w ${shown}, or open it as a shared store (trust: 'group')`);
    }
    if (st.gid !== rule.group) throw untrusted(`untrusted shared store: ${shown} is writable by gid ${st.gid}, not the store's group ${rule.group}; fix: chgrp ${rule.group} ${shown}`);
    if (isDir(st.mode) && !(mode & S_ISGID)) throw untrusted(`untrusted shared store: ${shown} is group-writable but not setgid (mode ${octal(mode)}); fix: chmod g+s ${shown}`);
    // Without the sticky bit any member could rename or remove what another made in it (swap two snapshots, take a
    // build's name, drop a lease): with it, only an entry's owner (and the directory's, and root) can.
    if (isDir(st.mode) && !(mode & S_ISVTX)) throw untrusted(`untrusted shared store: ${shown} is group-writable but not sticky (mode ${octal(mode)}): another member could rename or remove what is yours in it; fix: chmod +t ${shown}`);
  }
  if (!trustedOwner) throw ownedByAnother(st, rule, shown);
}

/** Whether a directory's mode is a shared store part's: group-writable and sticky (what checkPart asks of one). */
export function isSharedPart(mode: number): boolean {
  return (mode & GROUP_WRITE) !== 0 && (mode & S_ISVTX) !== 0;
}

function ownedByAnother(st: Stat, rule: TrustRule, shown: string): SealError {
  return untrusted(`untrusted store: ${shown} is owned by uid ${st.uid}, not you (uid ${rule.uid}); use a store you own`);
}

/**
 * The rule for a store whose directory fstat gave `st`, checking that directory: you
 * and root are trusted; root also trusts the owner of a store it opens (opened by
 * openStoreRoot, which proved the path is that owner's); a shared store trusts its group.
 */
export function storeRule(st: Stat, trust: StoreTrust, shown: string): TrustRule {
  const uid = process.geteuid!();
  const owners = new Set([uid, 0]);
  if (uid === 0) owners.add(st.uid);
  let group: number | undefined;
  if (trust === 'group') {
    if (!(st.mode & S_ISGID)) throw untrusted(`untrusted shared store: ${shown} is not setgid (mode ${octal(st.mode)}); fix: chmod g+s ${shown}`);
    if (!inGroup(st.gid)) throw untrusted(`untrusted shared store: ${shown} belongs to gid ${st.gid}, not a group of yours`);
    group = st.gid;
  }
  const rule = { uid, owners, group };
  checkPart(st, rule, shown);
  return rule;
}

/**
 * Refuses a published snapshot directory that someone you do not trust made or can write
 * (one fstat; its parent's only when needed): yours or root's, or, for root, the owner of
 * the store's snapshots/ (`parent`). Never another member's of a shared store, whatever
 * its modes: its owner can make its files writable and change them at any time, so its
 * bytes are proven to no one else (a member once published a forged snapshot under the
 * digest another's capture would make, which that capture then reused and materialized).
 */
export function checkSnapshot(sys: Sys, fd: number, parent: () => Stat, shown: string): void {
  const st = sys.fstat(fd);
  const uid = process.geteuid!();
  if (isPrivate(st)) return;
  const mode = st.mode & 0o7777;
  if (mode & (GROUP_WRITE | OTHER_WRITE)) throw untrusted(`untrusted snapshot: ${shown} is writable by ${mode & OTHER_WRITE ? 'other users' : 'its group'} (mode ${octal(mode)})`);
  if (uid === 0 && parent().uid === st.uid) return;
  throw untrusted(`untrusted snapshot: ${shown} is owned by uid ${st.uid}, not you (uid ${uid}): a snapshot is used only by its owner (and root), who alone can have written it`);
}

/** Owned by you or root, and writable by no one else: trusted without asking whose store it is in. */
export function isPrivate(st: Stat): boolean {
  const uid = process.geteuid!();
  return (st.uid === uid || st.uid === 0) && !(st.mode & (GROUP_WRITE | OTHER_WRITE));
}

/**
 * Refuses a clone directory (st: its fstat) that another user owns or can write: its owner
 * could change what a materialize or reset made there, and what a sandboxed command runs
 * on, at any time (a clone another user made in /tmp once ran the victim's command on her
 * files). Yours, writable by no one else (root's is no more use to another user: he cannot write it).
 */
export function checkCloneOwner(st: Stat, shown: string, path?: string): void {
  const uid = process.geteuid!();
  // Root's too, for another user: one nobody else may write, that user may not write either (it failed EACCES in the stage, naming neither).
  if (st.uid !== uid) {
    throw untrusted(`untrusted clone: ${shown} is owned by uid ${st.uid}, not you (uid ${uid}): its owner can change what is in it at any time; use a clone directory you own`, path);
  }
  const mode = st.mode & 0o7777;
  if (mode & OTHER_WRITE) throw untrusted(`untrusted clone: ${shown} is writable by other users (mode ${octal(mode)}); fix: chmod go-w ${shown}`, path);
  if (mode & GROUP_WRITE) throw untrusted(`untrusted clone: ${shown} is writable by its group (mode ${octal(mode)}); fix: chmod g-w ${shown}`, path);
}

/**
 * A clone root runs a sandboxed command in must lie below a directory that keeps other
 * users out (no search bit for its group or others): the command is host uid 0 without
 * capabilities, so what it makes in the clone is root's, and it may chmod the clone it is
 * bound to (its own mode proves nothing: one campaign's command opened it to 0755 and left
 * a setuid copy of a program there, which another user then ran as root). The directories
 * above were checked by checkPathAbove (root's, nobody else's to rename). Nothing for
 * another caller (a setuid file of theirs runs as them).
 */
export function checkRootCloneAbove(clone: string, shown: string): void {
  if (process.geteuid!() !== 0) return;
  // Up to the root (a relative clone from the working directory): dirname stops moving there.
  for (let dir = dirname(resolve(clone)); ; dir = dirname(dir)) {
    let mode: number;
    try {
      mode = lstatSync(dir).mode;
    } catch {
      break;
    }
    if ((mode & 0o011) === 0) return;
    if (dirname(dir) === dir) break;
  }
  throw untrusted(
    `untrusted clone: no directory above ${shown} keeps other users out (each lets its group or others search it), and a command root runs in a sandbox is host uid 0 (without capabilities): it may open the clone up and leave a setuid file there that would run as root for anyone who can reach it; fix: keep the clone below a directory of mode 0700 (chmod 700 ${escapePath(dirname(resolve(clone)))})`,
    clone,
  );
}

/** fd, once its fstat is pushed on stats (a walk step's result); closed when the fstat fails. */
function statted(sys: Sys, fd: number, stats: Stat[]): number {
  try {
    stats.push(sys.fstat(fd));
    return fd;
  } catch (err) {
    sys.close(fd);
    throw err;
  }
}

let unmappedOwner: number | undefined | null = null;

/**
 * The uid a directory shows inside a user namespace when its owner is not mapped there
 * (the host's root, for `/`: the kernel's overflowuid, 65534 by default); undefined outside
 * one. Such a directory is taken as root's: from inside, whose it is cannot be told.
 */
export function unmapped(): number | undefined {
  if (unmappedOwner !== null) return unmappedOwner;
  unmappedOwner = undefined;
  try {
    const map = readFileSync('/proc/self/uid_map', 'utf8').trim().split(/\s+/);
    if (map.join(' ') !== '0 0 4294967295') unmappedOwner = Number(readFileSync('/proc/sys/kernel/overflowuid', 'utf8').trim());
  } catch {
    // No /proc: no namespace known.
  }
  return unmappedOwner;
}

/**
 * Refuses a store (or a clone: `what`) below a directory that lets another user move it
 * away and put a directory of theirs at its path: every directory above it must be yours or
 * root's (in a user namespace, one whose owner is not mapped there counts as root's), and
 * one that others or its group can write sticky (as /tmp is), the next one down then
 * yours or root's. Else every later open of the store by its path, and bubblewrap's binds
 * of its payloads, could find the other user's directory in place of the one checked. The
 * walk looks up each name without following links (O_PATH: search permission is enough);
 * given `fd`, its last directory must be that one; without, the store or clone may not exist
 * yet: the walk stops at the first missing name (what is made below it is yours). The
 * same rule holds for a clone (`what`): another user swapping two of a victim's clones as
 * a command started ran it on the other one's files.
 */
export function checkPathAbove(sys: Sys, path: string, fd?: number, what: 'store' | 'clone' = 'store'): void {
  const uid = process.geteuid!();
  const parts = path.split('/').filter((p) => p !== '');
  using top = own(sys, sys.openat(AT_FDCWD, '/', O_PATH | O_DIRECTORY));
  const stats: Stat[] = [sys.fstat(top.fd)];
  const step = (dirfd: number, name: string): number | null => {
    let below: number;
    try {
      below = sys.openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW);
    } catch (err) {
      // Before an open: not made yet, or what the open itself refuses, with its own error (a link, a file, a name too long).
      if (fd === undefined) return null;
      throw err;
    }
    return statted(sys, below, stats);
  };
  walkDown(sys, top.fd, parts, step)[Symbol.dispose]();
  const shownAt = (i: number): string => escapePath(i === 0 ? '/' : `/${parts.slice(0, i).join('/')}`);
  const shown = shownAt(parts.length);
  // Before an open: a store that exists already is checked once opened (with the rule for root and another user's store).
  if (fd === undefined && stats.length > parts.length) return;
  if (fd !== undefined) {
    const last = stats[parts.length]!;
    const opened = sys.fstat(fd);
    if (!sameObject(last, opened)) throw untrusted(`untrusted ${what}: ${shown} was replaced while it was opened`, path);
  }
  const outside = unmapped();
  const yours = (st: Stat): boolean => st.uid === uid || st.uid === 0 || st.uid === outside;
  // Every directory found that has (or will have) a name of the store's path below it.
  for (let i = 0; i < Math.min(stats.length, parts.length); i++) {
    const st = stats[i]!;
    const at = shownAt(i);
    if (!yours(st)) {
      throw untrusted(`untrusted ${what}: ${shown} is below ${at}, owned by uid ${st.uid}, not you (uid ${uid}) or root, who can rename what is in it and put another directory at the ${what}'s path; fix: keep the ${what} below directories only you or root own (or chown ${at})`, path);
    }
    const mode = st.mode & 0o7777;
    const others = (mode & (OTHER_WRITE | GROUP_WRITE)) !== 0;
    // Sticky: only the next one's owner (checked in its turn, or as the store) may rename it.
    if (others && !(mode & S_ISVTX)) {
      const who = mode & OTHER_WRITE ? 'other users' : `its group (gid ${st.gid})`;
      throw untrusted(`untrusted ${what}: ${shown} is below ${at} (mode ${octal(mode)}), where ${who} can rename ${shownAt(i + 1)} and put another directory at its path; fix: chmod ${mode & OTHER_WRITE ? 'o-w' : 'g-w'} ${at} (or chmod +t: then only an entry's owner may rename it), or keep the ${what} elsewhere`, path);
    }
  }
}

/**
 * Opens the store directory of root (euid 0) whose owner is another user, proving the
 * path is root's down to where that user's part begins: every directory above it is
 * root's and, where others can write it, sticky; the one holding the user's first
 * component writable by no one else; from there on everything is the user's or root's.
 * Otherwise a third user may have made the store (e.g. in /tmp), and it is refused.
 * Returns the store directory's fd, the walk's last.
 */
export function openForeignStore(sys: Sys, path: string, owner: number): Fd {
  const parts = path.slice(1).split('/');
  using top = own(sys, sys.openat(AT_FDCWD, '/', DIR_FLAGS));
  const stats: Stat[] = [sys.fstat(top.fd)];
  // A store path has at least one component: the walk's last directory is its own (never top, borrowed).
  const current = walkDown(sys, top.fd, parts, (dirfd, name) => statted(sys, openChildDir(sys, dirfd, name), stats));
  const shownAt = (i: number): string => escapePath(i === 0 ? '/' : `/${parts.slice(0, i).join('/')}`);
  const first = stats.findIndex((st) => st.uid === owner);
  const last = stats.length - 1;
  try {
    if (stats[last]!.uid !== owner) throw untrusted(`untrusted store: ${shownAt(last)} changed owner while it was opened`);
    for (let i = 0; i < last; i++) {
      const st = stats[i]!;
      const open = st.mode & (GROUP_WRITE | OTHER_WRITE);
      const fine = i < first ? st.uid === 0 && (!open || (i < first - 1 && st.mode & S_ISVTX)) : (st.uid === 0 || st.uid === owner) && !open;
      if (!fine) {
        throw untrusted(
          `untrusted store: ${shownAt(last)} is owned by uid ${owner}, not root, and ${shownAt(i)} (uid ${st.uid}, mode ${octal(st.mode)}) lets another user make or replace it; ` +
            `fix: run as uid ${owner}, or chown -R 0 ${shownAt(last)}`,
        );
      }
    }
  } catch (err) {
    current[Symbol.dispose]();
    throw err;
  }
  return current;
}
