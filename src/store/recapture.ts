// recapture.ts: one capture's use of the stat cache: the walk's hook, where reused bytes come from, and the cache written after.
import { DIR_FLAGS, openBeneath, openChildDir, own, type Fd } from '../base/fd.js';
import { CHUNK_BYTES } from '../base/io.js';
import type { ManifestEntry } from '../base/manifest.js';
import { MAX_CACHE_ENTRIES, StatCache, encodeStatCache, isRacy, trustsRecords, writeBack, writebackOf, type Writeback } from '../capture/stat-cache.js';
import { CacheRecords, writeNextCache, type RecordArea } from '../capture/cache-records.js';
import type { EntryTable } from '../base/entry-table.js';
import type { FileHook } from '../capture/walk.js';
import { HOW, fillBytes } from '../files/copy-file.js';
import {
  AT_SYMLINK_NOFOLLOW,
  O_CREAT,
  O_EXCL,
  O_NOFOLLOW,
  O_NONBLOCK,
  O_RDONLY,
  O_RDWR,
  RENAME_NOREPLACE,
  isReg,
} from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import type { StoredSnapshot } from './document.js';
import { COPY_AREA, LOOSE_AREA, mountArea } from './layout.js';
import { ledgerEntries } from './ledger-cache.js';
import { loadStatCache, publishedAmong, saveStatCache, statCacheKey } from './stat-cache-file.js';
import { frozenFileMode } from '../base/frozen.js';
import { cloneFileMode } from '../base/subvolume.js';

/** A reused file's bytes could not be placed from the store: the capture is redone without the cache. */
export class CacheMiss extends Error {
  constructor(what: string) {
    super(`stat cache content unavailable: ${what}`);
    this.name = 'CacheMiss';
  }
}

export interface SessionOpen {
  sys: Sys;
  storeFd: number;
  tmpFd: number;
  snapshotsFd: number;
  buildFd: number;
  source: string;
  sourceFd: number;
  /** The store filesystem's clock before the walk: the build directory's ctime. */
  recordNs: bigint;
  /** Ignore what the cache holds (record only): the retry after a CacheMiss. */
  fresh: boolean;
}

/**
 * The stat cache's side of one capture. With a non-empty cache the walk is deferred:
 * trusted files are not opened, the others are captured into loose files, and the tree
 * is assembled afterwards (or not at all when the manifest names a published snapshot).
 */
export class StatCacheSession implements FileHook {
  readonly deferred: boolean;
  reusedFiles = 0;
  readonly #o: SessionOpen;
  readonly #key: Buffer;
  readonly #loaded: StatCache;
  /** The snapshots the loaded entries point at that are still published. */
  readonly #live: Set<string>;
  /** Files hashed or reused by this capture, packed, each pointing at its entry. */
  readonly #records = new CacheRecords();
  /** The tables those entries are in, by number. */
  readonly #tables: EntryTable[] = [];
  /** Files hashed by this capture. */
  #hashed = 0;
  /** The loaded entry reuse() last answered with. */
  #pending = -1;
  /** Whether each of the loaded cache's snapshots is still published, by its index. */
  readonly #liveIndex: boolean[];
  /** sha256 -> a reused entry (its index) holding those bytes in a published snapshot; made when the first is placed. */
  #stored: Map<string, number> | undefined;
  /** sha256 -> a loose file holding those bytes, and its mode. */
  readonly #loose = new Map<string, [string, number]>();
  readonly #looseModes = new Map<string, number>();
  /** The build's loose/ directory (deferred mode). */
  #looseDir: Fd | undefined;
  #uses = new Map<string, number>();
  /** The stored snapshot directory opened last, by its path below snapshots/. */
  #lastDir: [string, Fd | undefined] = ['', undefined];
  #cloneWorks: boolean | undefined;
  /** false once the store refused a link for a reason of its own (not one inode's link limit). */
  #linkWorks: boolean | undefined;
  #buffer: Buffer | undefined;
  /** Per source device: how its filesystem writes dirty pages back (see WRITEBACK), once an fd on it showed it. */
  readonly #writeback = new Map<bigint, Writeback>();

  constructor(o: SessionOpen) {
    this.#o = o;
    const { sys } = o;
    this.#key = statCacheKey(sys.fstat(o.storeFd), o.source, sys.fstat(o.sourceFd));
    this.#loaded = o.fresh ? StatCache.empty() : loadStatCache(sys, o.storeFd, this.#key);
    // A clone materialized from this store: its ledger's files join the cache, ahead of older records of the same inodes.
    const ledger = o.fresh ? [] : ledgerEntries(sys, o.storeFd, o.snapshotsFd, sys.fstat(o.sourceFd));
    if (ledger.length > 0) {
      const ids = new Set(ledger.map((e) => `${e.dev}:${e.ino}`));
      const kept = this.#loaded.entries().filter((e) => !ids.has(`${e.dev}:${e.ino}`)).slice(0, Math.max(0, MAX_CACHE_ENTRIES - ledger.length));
      this.#loaded = StatCache.decode(encodeStatCache(this.#key, [...kept, ...ledger.slice(0, MAX_CACHE_ENTRIES)]), this.#key)!;
    }
    this.#live = publishedAmong(sys, o.snapshotsFd, this.#loaded.snapshots());
    this.#liveIndex = this.#loaded.snapshots().map((d) => this.#live.has(d));
    this.deferred = this.#live.size > 0;
    if (this.deferred) {
      sys.mkdirat(o.buildFd, LOOSE_AREA, 0o700);
      this.#looseDir = own(sys, openChildDir(sys, o.buildFd, LOOSE_AREA));
    }
  }

  #looseFd(): number {
    return this.#looseDir!.fd;
  }

  reuse(st: Stat, dirFd: number): boolean {
    const i = this.#loaded.trusted(st);
    // On a filesystem that never writes back (tmpfs), a write through a shared mapping moves no time: no file there is
    // trusted, a ledger's neither. Elsewhere a ledger's file needs no writeback (see ledger-cache.ts).
    if (i < 0 || !this.#liveIndex[this.#loaded.snapshotIndex(i)] || !this.#writesBack(st.dev, dirFd)) return false;
    this.reusedFiles++;
    this.#pending = i;
    return true;
  }

  /**
   * Writes back the file's dirty pages before it is read, when its record could be
   * trusted later: a record that is racy (never trusted) or on a filesystem that never
   * writes back needs none. Then a write through a mapping the process had dirtied
   * before, made after this, faults and changes the file's times: after the read, the
   * capture's identity check sees it; later, the next capture does.
   */
  settle(fd: number, st: Stat): void {
    if (isRacy({ mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs, recordNs: this.#o.recordNs })) return;
    const { sys } = this.#o;
    writeBack(sys, fd, this.#writeback.get(st.dev) ?? this.#learn(st.dev, fd));
  }

  /** The writeback rule of device dev, learnt from fd (on dev). */
  #learn(dev: bigint, fd: number): Writeback {
    const rule = writebackOf(this.#o.sys, fd);
    this.#writeback.set(dev, rule);
    return rule;
  }

  /** Whether files on dev may be reused: its filesystem writes back. Unknown, and dirFd not on dev (a file mounted over its name): no. */
  #writesBack(dev: bigint, dirFd: number): boolean {
    let rule = this.#writeback.get(dev);
    if (rule === undefined) {
      if (this.#o.sys.fstat(dirFd).dev !== dev) return false;
      rule = this.#learn(dev, dirFd);
    }
    return trustsRecords(rule);
  }

  reusedAt(table: EntryTable, index: number): void {
    table.setDigestBytes(index, this.#loaded.sha256Bytes(this.#pending));
    this.#records.reused(this.#loaded, this.#pending, this.#tableNumber(table), index);
  }

  captured(st: Stat, sha256: string, loose: string | undefined, table: EntryTable, index: number): void {
    this.#hashed++;
    this.#records.hashed(st, this.#tableNumber(table), index);
    if (loose !== undefined && !this.#loose.has(sha256)) this.#loose.set(sha256, [loose, this.#looseModes.get(loose)!]);
  }

  loose(mode: number): [number, string] {
    const name = String(this.#looseModes.size);
    const fd = this.#o.sys.openat(this.#looseFd(), name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
    this.#looseModes.set(name, mode);
    return [fd, name];
  }

  /** Counts how many file entries use each loose file's hash (a loose file used once is renamed into place, else cloned). */
  prepare(data: Pick<StoredSnapshot, 'entries' | 'mounts'>): void {
    for (const list of [data.entries, ...data.mounts.map((m) => m.entries)]) {
      for (const e of list) if (e.kind === 'file' && this.#loose.has(e.sha256)) this.#uses.set(e.sha256, (this.#uses.get(e.sha256) ?? 0) + 1);
    }
  }

  /**
   * Puts a file's bytes at dirFd/name: its loose file renamed into place; else a new
   * name (linkat) for the frozen copy in the store when it is a regular file of this
   * size and frozen mode (snapshots are read-only, so sharing the inode shares nothing
   * that can change); else a clone (or copy) of a loose file or of that stored copy,
   * whose bytes are those the cache recorded. The result's size is checked.
   */
  readonly place = (dirFd: number, name: string, entry: ManifestEntry, sealed: boolean): void => {
    const { sys } = this.#o;
    // Inside a subvolume copy root (sealed): a clone's mode, and no rename or link (both cross subvolumes: EXDEV), a clone.
    const mode = sealed ? cloneFileMode(entry.mode) : frozenFileMode(entry.mode);
    const loose = this.#loose.get(entry.sha256);
    if (!sealed && loose !== undefined && loose[1] === mode && this.#uses.get(entry.sha256) === 1) {
      sys.renameat2(this.#looseFd(), loose[0], dirFd, name, RENAME_NOREPLACE);
      return;
    }
    if (!sealed && loose === undefined && this.#linkStored(dirFd, name, entry, mode)) return;
    using src = own(sys, loose !== undefined ? this.#openLoose(loose[0]) : this.#openStored(entry.sha256));
    const st = sys.fstat(src.fd);
    if (!isReg(st.mode) || st.size !== entry.size) throw new CacheMiss(entry.path);
    using dest = own(sys, sys.openat(dirFd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode));
    if (entry.size > 0) this.#fill(src.fd, dest.fd, entry);
    if (sys.fstat(dest.fd).size !== entry.size) throw new CacheMiss(entry.path);
  };

  /**
   * Links the stored copy of entry's bytes at dirFd/name; false (nothing left there)
   * when the store cannot link it (a link limit, another filesystem, a policy) or it
   * was frozen with another mode. A stored copy that is not a regular file of the
   * recorded size is a CacheMiss.
   */
  #linkStored(dirFd: number, name: string, entry: ManifestEntry, mode: number): boolean {
    const { sys } = this.#o;
    if (this.#linkWorks === false) return false;
    const [storedDir, leaf] = this.#storedAt(entry.sha256);
    try {
      sys.linkat(storedDir, leaf, dirFd, name, 0);
    } catch (err) {
      if (hasCode(err, 'ENOENT', 'ENOTDIR')) throw new CacheMiss(`${entry.sha256}: ${(err as Error).message}`);
      // EMLINK is this inode's limit, EXDEV this copy's (in a subvolume copy root on btrfs: no link crosses into or out of one); anything else (EPERM, EACCES...) is the store's.
      if (!hasCode(err, 'EMLINK', 'EXDEV')) this.#linkWorks = false;
      return false;
    }
    const st = sys.fstatat(dirFd, name, AT_SYMLINK_NOFOLLOW);
    if (isReg(st.mode) && st.size === entry.size && (st.mode & 0o7777) === mode) return true;
    sys.unlinkat(dirFd, name, 0);
    if (!isReg(st.mode) || st.size !== entry.size) throw new CacheMiss(entry.path);
    return false;
  }

  /** FICLONE where the store can (probed once), else a buffered copy of exactly entry.size bytes (fillBytes). */
  #fill(src: number, dest: number, entry: ManifestEntry): void {
    this.#buffer ??= Buffer.allocUnsafe(CHUNK_BYTES);
    const how = fillBytes(this.#o.sys, this.#buffer, src, dest, entry.size, {
      clone: this.#cloneWorks !== false,
      range: false,
      copy: { changed: (grew) => new CacheMiss(grew ? 'a stored copy grew' : entry.path) },
    });
    this.#cloneWorks ??= how === HOW.CLONED;
  }

  #openLoose(name: string): number {
    return this.#o.sys.openat(this.#looseFd(), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  }

  #openStored(sha256: string): number {
    const [dir, leaf] = this.#storedAt(sha256);
    try {
      return this.#o.sys.openat(dir, leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      throw new CacheMiss(`${sha256}: ${(err as Error).message}`);
    }
  }

  /** The open directory in the store holding a frozen copy of these bytes, and the copy's name in it. */
  #storedAt(sha256: string): [number, string] {
    const { sys, snapshotsFd } = this.#o;
    this.#stored ??= this.#records.reusedBySha256(this.#loaded);
    const i = this.#stored.get(sha256);
    if (i === undefined) throw new CacheMiss(sha256);
    const snapshot = this.#loaded.snapshot(i);
    const location = this.#loaded.location(i);
    const cut = location.lastIndexOf('/');
    const dir = `${snapshot}/${location.slice(0, cut)}`;
    try {
      if (this.#lastDir[0] !== dir) {
        this.#lastDir[1]?.[Symbol.dispose]();
        this.#lastDir = ['', undefined];
        this.#lastDir = [dir, own(sys, openBeneath(sys, snapshotsFd, dir.split('/'), DIR_FLAGS))];
      }
    } catch (err) {
      throw new CacheMiss(`${snapshot}/${location}: ${(err as Error).message}`);
    }
    return [this.#lastDir[1]!.fd, location.slice(cut + 1)];
  }

  #tableNumber(table: EntryTable): number {
    const last = this.#tables.length - 1;
    if (this.#tables[last] === table) return last;
    const known = this.#tables.indexOf(table);
    return known >= 0 ? known : this.#tables.push(table) - 1;
  }

  /**
   * Writes the cache for the snapshot `data` (as this capture built it) published as
   * `digest`: files hashed now and files reused point at it, at their own entries;
   * entries of the old cache not seen this time are kept. Nothing is written when
   * nothing was hashed and nothing was dropped.
   */
  save(digest: string, data: Pick<StoredSnapshot, 'entries' | 'mounts'>): void {
    const loaded = this.#loaded;
    if (this.#hashed === 0 && this.#liveIndex.every(Boolean)) return;
    const areas = this.#tables.map((table): RecordArea | undefined => {
      if (table === data.entries) return { prefix: COPY_AREA, table };
      const i = data.mounts.findIndex((m) => m.entries === table);
      return i < 0 ? undefined : { prefix: mountArea(i), table };
    });
    const next = { key: this.#key, digest, records: this.#records, areas, loaded, recordNs: this.#o.recordNs, live: this.#live };
    saveStatCache(this.#o.sys, this.#o.storeFd, this.#o.tmpFd, this.#key, (sink) => writeNextCache(next, sink));
  }

  close(): void {
    this.#looseDir?.[Symbol.dispose]();
    this.#lastDir[1]?.[Symbol.dispose]();
    this.#lastDir = ['', undefined];
  }
}
