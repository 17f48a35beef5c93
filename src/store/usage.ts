// usage.ts: what each published snapshot costs (created, logical and on-disk bytes) and pruning by age, count and size, oldest first, leased ones kept.
import { SealError, type SealCode } from '../base/errors.js';
import { openChildDir, openRealDir, own, statOrNull, type Fd } from '../base/fd.js';
import { hasCode } from '../sys/errno.js';
import { AT_SYMLINK_NOFOLLOW, isDir } from '../sys/constants.js';
import type { Stat, Sys } from '../sys/native.js';
import { SNAPSHOTS_DIR } from './layout.js';
import { listDigests } from './digests.js';
import { withStoreLock } from './lock.js';
import { removeSnapshot } from './store-dir.js';
import { SummaryRecords } from './summary-record.js';

export interface SnapshotUsage {
  digest: string;
  /** When it was published (its directory's last change before it was frozen), ms since the epoch. */
  createdMs: number;
  /** File and symlink-target bytes, as the manifest counts them. */
  logicalBytes: number;
  /**
   * Bytes its files, directories and links take on disk (st_blocks × 512), an inode
   * counted once in the whole store: a file another snapshot shares by a hard link counts
   * for the first in digest order. Extents shared by reflinks count in each.
   */
  diskBytes: number;
  /**
   * Set when its manifest cannot be loaded (a snapshot tampered with or damaged: SEAL_CORRUPT;
   * its directory writable by others: SEAL_UNTRUSTED; …), as `ls` reports it: its logicalBytes are then 0; when it was published and what it
   * takes on disk are measured from its directory as for any other. A prune removes it by
   * age or size like any other, and never keeps it as one of the newest `keepLast`.
   */
  error?: { code: SealCode; message: string };
}

export interface PrunePolicy {
  /** Remove snapshots published longer ago than this many milliseconds. */
  olderThanMs?: number | undefined;
  /**
   * Keep the newest N that load whatever else says (0: none kept for this reason); given
   * alone (at least 1 then), every other one goes, damaged ones included (not a later treeseal's).
   */
  keepLast?: number | undefined;
  /** Then remove the oldest until the store's snapshots take at most this many bytes on disk. */
  maxBytes?: number | undefined;
}

export interface PruneReport {
  removed: string[];
  /** Snapshots the policy would remove that a live lease holds: kept. */
  leased: string[];
  /** On-disk bytes of what is left. */
  diskBytes: number;
}

/**
 * Sums st_blocks below dirfd (the directory itself included), each inode once across `seen`.
 * The walk keeps its own stack (an fd and a listing a level), not the thread's: a snapshot
 * any thread could capture is measured on any thread.
 */
export function diskBytesAt(sys: Sys, dirfd: number, seen: Set<string>, track?: (st: Stat) => void, vanishing = false): number {
  // Where names come and go as they are counted (tmp/, cache/, clones/ of a store in use), one gone since its listing
  // (ENOENT; a directory replaced by a file or a link, ENOTDIR or ELOOP) holds nothing now.
  const unlessGone = <T>(fn: () => T): T | undefined => {
    try {
      return fn();
    } catch (err) {
      if (vanishing && hasCode(err, 'ENOENT', 'ENOTDIR', 'ELOOP')) return undefined;
      throw err;
    }
  };
  let total = 0;
  const count = (st: Stat): void => {
    track?.(st);
    const key = `${st.dev}:${st.ino}`;
    if (seen.has(key)) return;
    seen.add(key);
    total += st.blocks * 512;
  };
  count(sys.fstat(dirfd));
  const stack: { fd: number; owned: Fd | undefined; entries: ReturnType<Sys['readdir']>; next: number }[] = [{ fd: dirfd, owned: undefined, entries: sys.readdir(dirfd), next: 0 }];
  try {
    while (stack.length > 0) {
      const level = stack[stack.length - 1]!;
      const entry = level.entries[level.next++];
      if (entry === undefined) {
        stack.pop()!.owned?.close();
        continue;
      }
      const st = unlessGone(() => sys.fstatat(level.fd, entry.name, AT_SYMLINK_NOFOLLOW));
      if (st === undefined) continue;
      count(st);
      if (!isDir(st.mode)) continue;
      const childFd = unlessGone(() => openChildDir(sys, level.fd, entry.name));
      if (childFd === undefined) continue;
      const child = own(sys, childFd);
      // On the stack before it is listed: a listing that fails still closes it.
      const below = { fd: child.fd, owned: child, entries: [] as ReturnType<Sys['readdir']>, next: 0 };
      stack.push(below);
      below.entries = unlessGone(() => sys.readdir(child.fd)) ?? [];
    }
  } finally {
    for (const level of stack) level.owned?.[Symbol.dispose]();
  }
  return total;
}

/** Every published snapshot's usage, oldest first (then by digest), under the store's shared lock; `track`: told of every name each one holds (an inode as often as it is linked). */
export function storeUsage(sys: Sys, storeRoot: string, track?: (digest: string, st: Stat) => void): SnapshotUsage[] {
  return withStoreLock(sys, storeRoot, false, () => {
    using snapshots = own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
    using records = new SummaryRecords(sys, storeRoot);
    const seen = new Set<string>();
    const out: SnapshotUsage[] = [];
    for (const digest of listDigests(sys, storeRoot)) {
      let logical: { logicalBytes: number; error?: SnapshotUsage['error'] };
      try {
        logical = { logicalBytes: records.summaryAt(snapshots.fd, digest).totalBytes };
      } catch (err) {
        // Removed since the listing: it takes nothing now.
        const unavailable = err instanceof SealError && err.code === 'SEAL_UNAVAILABLE';
        if (unavailable && statOrNull(sys, snapshots.fd, digest) === null) continue;
        // One damaged snapshot, or one another user could have written (SEAL_UNTRUSTED: its directory loosened), is
        // reported on its own row; the store's other rows (and a prune) go on. A snapshot this user may not read
        // (another member's, in a shared store) is a row too, which prune leaves alone, as one a later treeseal made
        // (SEAL_UNAVAILABLE, still there: a manifest of a newer schema). The kernel refusing anything else ends the call.
        const unreadable = err instanceof SealError && err.code === 'SEAL_IO' && hasCode(err.cause, 'EACCES', 'EPERM');
        if (!(err instanceof SealError) || (err.code !== 'SEAL_CORRUPT' && err.code !== 'SEAL_UNTRUSTED' && !unreadable && !unavailable)) throw err;
        logical = { logicalBytes: 0, error: { code: err.code, message: err.message } };
      }
      let dirFd: number;
      try {
        dirFd = openChildDir(sys, snapshots.fd, digest);
      } catch (err) {
        if (logical.error === undefined) throw err;
        // Not a real directory (a file or a link under a digest's name): what the name itself takes.
        const st = sys.fstatat(snapshots.fd, digest, AT_SYMLINK_NOFOLLOW);
        out.push({ digest, createdMs: Number(st.mtimeNs / 1_000_000n), ...logical, diskBytes: st.blocks * 512 });
        continue;
      }
      using dir = own(sys, dirFd);
      const createdMs = Number(sys.fstat(dir.fd).mtimeNs / 1_000_000n);
      out.push({ digest, createdMs, ...logical, diskBytes: diskBytesAt(sys, dir.fd, seen, track === undefined ? undefined : (st) => track(digest, st)) });
    }
    return out.sort((a, b) => a.createdMs - b.createdMs || (a.digest < b.digest ? -1 : 1));
  });
}

/**
 * Removes snapshots by `policy`, oldest first: the newest `keepLast` are kept; then every
 * one older than `olderThanMs`; then the oldest until the rest take at most `maxBytes`;
 * `keepLast` alone removes every one but the newest N. A snapshot a live lease holds is
 * kept and reported.
 */
export function pruneStore(sys: Sys, storeRoot: string, policy: PrunePolicy, nowMs: number): PruneReport {
  const links = new LinkLedger();
  const usage = storeUsage(sys, storeRoot, (digest, st) => links.hold(digest, st));
  for (const u of usage) if (u.createdMs > nowMs) u.createdMs = publishedNow(sys, storeRoot, u.digest, nowMs);
  usage.sort((a, b) => a.createdMs - b.createdMs || (a.digest < b.digest ? -1 : 1));
  // The newest N that load: a damaged snapshot is never one of those kept.
  const whole = usage.filter((u) => u.error === undefined);
  const keep = new Set(policy.keepLast === undefined ? [] : whole.slice(Math.max(0, whole.length - policy.keepLast)).map((u) => u.digest));
  let left = usage.reduce((n, u) => n + u.diskBytes, 0);
  const report: PruneReport = { removed: [], leased: [], diskBytes: left };
  // A count alone (gc --keep-last 5) keeps those and removes the rest, as a count does in restic or borg.
  const byCountAlone = policy.keepLast !== undefined && policy.olderThanMs === undefined && policy.maxBytes === undefined;
  for (const u of usage) {
    // Kept; one this user may not read (not theirs to remove: it would only fail the prune); and a later treeseal's
    // (SEAL_UNAVAILABLE: a manifest of a newer schema), which is not damaged, only not this build's to read.
    if (keep.has(u.digest) || u.error?.code === 'SEAL_IO' || u.error?.code === 'SEAL_UNAVAILABLE') continue;
    const old = policy.olderThanMs !== undefined && nowMs - u.createdMs > policy.olderThanMs;
    const over = policy.maxBytes !== undefined && left > policy.maxBytes;
    if (!old && !over && !byCountAlone) continue;
    try {
      withStoreLock(sys, storeRoot, true, () => removeSnapshot(sys, storeRoot, u.digest));
    } catch (err) {
      if (err instanceof SealError && err.code === 'SEAL_BUSY') {
        report.leased.push(u.digest);
        continue;
      }
      // Removed by another call since the listing: gone, though not by this one.
      if (err instanceof SealError && err.code === 'SEAL_UNAVAILABLE') {
        left -= links.release(u);
        continue;
      }
      throw err;
    }
    report.removed.push(u.digest);
    left -= links.release(u);
  }
  report.diskBytes = left;
  return report;
}

/**
 * What removing each snapshot frees, as prune removes them: a file another snapshot still
 * links (a hard link a recapture made) frees nothing until the last snapshot linking it
 * goes, whichever one usage counted it in (the first in digest order: a prune by size that
 * removed that one first counted the file freed and stopped over the size asked for).
 * Only inodes linked more than once are followed; one also linked from outside the
 * snapshots (nlink past what the snapshots hold) is never counted freed.
 */
class LinkLedger {
  /** Per snapshot: the bytes of what only it links (nlink 1: a directory, a link, most files). */
  readonly #own = new Map<string, number>();
  /** Per snapshot: the shared inodes it links, by index into #shared, once per name. */
  readonly #holds = new Map<string, number[]>();
  readonly #index = new Map<string, number>();
  readonly #shared: { bytes: number; nlink: number; names: number; left: number }[] = [];

  hold(digest: string, st: Stat): void {
    const bytes = st.blocks * 512;
    if (st.nlink <= 1 || isDir(st.mode)) {
      this.#own.set(digest, (this.#own.get(digest) ?? 0) + bytes);
      return;
    }
    const key = `${st.dev}:${st.ino}`;
    let i = this.#index.get(key);
    if (i === undefined) {
      i = this.#shared.length;
      this.#index.set(key, i);
      this.#shared.push({ bytes, nlink: st.nlink, names: 0, left: 0 });
    }
    this.#shared[i]!.names++;
    this.#shared[i]!.left++;
    let held = this.#holds.get(digest);
    if (held === undefined) this.#holds.set(digest, (held = []));
    held.push(i);
  }

  /** The bytes removing u frees (its diskBytes where its names were not followed: a damaged snapshot's). */
  release(u: SnapshotUsage): number {
    if (!this.#own.has(u.digest) && !this.#holds.has(u.digest)) return u.diskBytes;
    let freed = this.#own.get(u.digest) ?? 0;
    for (const i of this.#holds.get(u.digest) ?? []) {
      const inode = this.#shared[i]!;
      inode.left--;
      if (inode.left === 0 && inode.names >= inode.nlink) freed += inode.bytes;
    }
    this.#own.delete(u.digest);
    this.#holds.delete(u.digest);
    return freed;
  }
}

/**
 * A snapshot published in the future (by a clock that was ahead, or its directory's time
 * set by hand) would never be old enough for a prune by age, and would stay the newest:
 * its directory's time is set to now (this prune's), from which it ages like any other.
 * Where it cannot be set (another member's), now is taken for this prune alone.
 */
function publishedNow(sys: Sys, storeRoot: string, digest: string, nowMs: number): number {
  const sec = Math.floor(nowMs / 1000);
  const nsec = (nowMs % 1000) * 1_000_000;
  try {
    using snapshots = own(sys, openRealDir(sys, `${storeRoot}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
    sys.utimensat(snapshots.fd, digest, sec, nsec, sec, nsec, AT_SYMLINK_NOFOLLOW);
  } catch {
    // not this user's to set: aged from now in this prune only
  }
  return nowMs;
}
