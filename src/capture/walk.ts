// walk.ts: the guarded copier: walks a source tree through fds and builds a private, hashed copy of it.
import { createHash } from 'node:crypto';

import { mkdirIfMissing, openChildDir, own, walkDown, type Fd } from '../base/fd.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import type { Limits } from '../base/limits.js';
import { throttled, type Progress, type ProgressFn } from '../base/progress.js';
import type { ManifestEntry } from '../base/manifest.js';
import { EntryTable } from '../base/entry-table.js';
import { compareUtf8, escapePath, isWellFormed, utf8Bytes } from '../base/paths.js';
import {
  AT_SYMLINK_NOFOLLOW,
  O_CREAT,
  O_DIRECTORY,
  O_EXCL,
  O_NOFOLLOW,
  O_NONBLOCK,
  O_RDONLY,
  O_RDWR,
  isDir,
  isLink,
  isReg,
} from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import { CHUNK_BYTES, isPseudoFs } from '../base/io.js';
import { HOW, type Filled, type FillMethods, type How } from '../files/copy-file.js';
import { FileJobs } from '../files/pool.js';
import { sameIdentity, sameObject } from '../sys/identity.js';
import { sys as nativeSys, type Stat, type Sys } from '../sys/native.js';
import { fstatatEach } from '../sys/stat-each.js';
import { frozenFileMode } from '../base/frozen.js';
import { cloneFileMode, makeSubvolume } from '../base/subvolume.js';
import { withMtime } from '../base/times.js';
import { checkRelativeLink } from './links.js';
import { keptEntries, type Excludes } from './exclude.js';
import { Obstacles, addBadName, inNestedModules, userPath, type ObstacleKind } from './obstacles.js';

export type CaptureProgress = Progress;

/** Margin for the kernel's coarse timestamp clock, which may lag the wall clock by a tick. */
const CHANGE_MARGIN_MS = 100;

/**
 * Incremental capture (the store's stat cache), consulted for each regular file the
 * walk reaches. The walk itself (fstatat of every entry, directory identity checks,
 * limits) is the same with or without one.
 */
export interface FileHook {
  /**
   * Whether the cache knows the sha256 of a regular file with this fstatat result (it is
   * not opened); false: capture it. dirFd is the directory holding it.
   */
  reuse(st: Stat, dirFd: number): boolean;
  /**
   * A file about to be captured (fd open, st its fstatat result), before its bytes are
   * read: makes its record trustworthy (its dirty pages written back), where it may be trusted.
   */
  settle(fd: number, st: Stat): void;
  /** The file reuse() last said yes to is recorded as entry `index` of `table`: its sha256 goes there. */
  reusedAt(table: EntryTable, index: number): void;
  /**
   * A file was captured (entry `index` of `table`): its identity was proven unchanged
   * around the read that gave sha256 (loose: its file in deferred mode).
   */
  captured(st: Stat, sha256: string, loose: string | undefined, table: EntryTable, index: number): void;
  /** Build nothing in place: no directory or link is made, captured files go to loose(), and the tree is assembled after the walk. */
  readonly deferred: boolean;
  /** In deferred mode: a new file (created O_EXCL, at its frozen mode) for one captured file's bytes; its fd and name. */
  loose(mode: number): [number, string];
}

/** What is known of one source filesystem's pair with the build: undefined until a file has shown it. */
interface Probe {
  clone: boolean | undefined;
  range: boolean | undefined;
}

export interface CaptureContextOptions {
  sys: Sys;
  limits: Limits;
  /** Device of the build directory (copy-method probes are per source and build device). */
  buildDev: bigint;
  isAborted?: (() => boolean) | undefined;
  onProgress?: ProgressFn | undefined;
  /** Helper threads for file jobs (undefined: one per spare core); 0 keeps everything on this thread. */
  parallelism?: number | undefined;
  /** What the walk leaves out (undefined: nothing). */
  exclude?: Excludes | undefined;
  /** The store's directory and the build's: a directory of the source that is one of them is SEAL_OVERLAP. */
  ownDirs?: readonly Stat[] | undefined;
}

/** State shared by every builder of one capture: budget, copy-method probes, buffer, cancellation. */
export class CaptureContext {
  entries = 0;
  totalBytes = 0;
  readonly buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  /** The stat cache's hook, when the capture uses one. */
  hook: FileHook | undefined;
  readonly #jobs: FileJobs;
  /** Per source device (the build's device is fixed): whether FICLONE and copy_file_range work. */
  readonly #probes = new Map<bigint, Probe>();
  readonly #report: (entries: number, bytes: number, force?: boolean) => void;

  readonly sys: Sys;
  readonly limits: Limits;
  readonly buildDev: bigint;
  readonly isAborted: () => boolean;
  readonly parallelism: number | undefined;
  readonly exclude: Excludes | undefined;
  readonly #ownDirs: readonly Stat[];
  /** The symlinks, special files and escaping links the walk stepped past, refused once it is over. */
  readonly obstacles = new Obstacles();
  /**
   * When the capture began, less a margin for the kernel's coarse timestamp clock: a
   * directory changed after it was changing during the capture.
   */
  readonly startedNs = BigInt(Date.now() - CHANGE_MARGIN_MS) * 1_000_000n;

  constructor(o: CaptureContextOptions) {
    this.sys = o.sys;
    this.limits = o.limits;
    this.buildDev = o.buildDev;
    this.isAborted = o.isAborted ?? (() => false);
    this.parallelism = o.parallelism;
    this.exclude = o.exclude;
    this.#ownDirs = o.ownDirs ?? [];
    this.#report = throttled(o.onProgress);
    this.#jobs = new FileJobs(o.sys, this.buffer, o.parallelism, o.sys === nativeSys);
  }

  #probe(dev: bigint): Probe {
    let p = this.#probes.get(dev);
    if (p === undefined) this.#probes.set(dev, (p = { clone: undefined, range: undefined }));
    return p;
  }

  /**
   * Fills and hashes one file (owning, and closing, both fds): on a helper thread
   * when a pool serves this capture, else here. onDone runs on this thread, in no
   * particular order; drain() waits for all of them.
   */
  runFile(src: number, dest: number, before: Stat, rel: string, onDone: (f: Filled) => void): void {
    const probe = this.#probe(before.dev);
    const methods: FillMethods = { clone: probe.clone !== false, range: probe.range !== false };
    // The kernel refusing the copy (no space in the store, an I/O error): SEAL_IO naming the file, here or from a helper.
    const named = (err: unknown): never => {
      throwIfRefused(err, `file cannot be captured: ${escapePath(rel)}`, rel);
      throw err;
    };
    const done = (r: Filled | 'changed' | Error): void => {
      if (r === 'changed') throw changed('file', rel);
      if (r instanceof Error) return named(r);
      if (before.size > 0) learn(probe, methods, r.how);
      onDone(r);
    };
    try {
      this.#jobs.run(src, dest, before, methods, done);
    } catch (err) {
      named(err);
    }
  }

  /** Waits for every file job; throws the first failure. */
  drain(): void {
    this.#jobs.drain();
  }

  /** Lets go of the helper threads after the jobs in flight (their fds closed); idempotent. */
  close(): void {
    this.#jobs.close();
  }

  /** SEAL_OVERLAP when the source's directory `rel` is the store or the build (a bind mount of either inside the source). */
  checkNotOwn(st: Stat, rel: string): void {
    if (this.#ownDirs.some((own) => sameObject(own, st))) {
      throw new SealError('SEAL_OVERLAP', `the store lies inside what is being captured: ${escapePath(rel)}`, { path: rel });
    }
  }

  checkAbort(): void {
    if (this.isAborted()) throw new SealError('SEAL_ABORTED', 'capture was aborted');
  }

  /** Counts the entry at rel, refused when it passes the limit (implicit parents count). */
  addEntry(rel: string): void {
    if (this.entries >= this.limits.maxEntries) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the entry limit (${this.limits.maxEntries} entries): ${escapePath(rel)}`, { path: rel });
    }
    this.entries++;
  }

  /** Refuses the entry at rel whose `extra` bytes (a file's size, sparse or not; a link's target) would pass the total. */
  checkBytes(extra: number, rel: string): void {
    if (this.totalBytes + extra > this.limits.maxTotalBytes) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the total byte limit (${this.limits.maxTotalBytes} bytes): ${escapePath(rel)}`, { path: rel });
    }
  }

  addBytes(n: number): void {
    this.totalBytes += n;
    this.#report(this.entries, this.totalBytes);
  }

  /** The last progress report, with the walk's totals, whenever the one before was. */
  reportDone(): void {
    this.#report(this.entries, this.totalBytes, true);
  }

}

/** Records what one file's copy showed about its pair of filesystems. */
function learn(probe: Probe, tried: FillMethods, how: How): void {
  if (how === HOW.CLONED) probe.clone = true;
  else {
    if (tried.clone) probe.clone = false;
    if (how === HOW.RANGED) probe.range = true;
    else if (tried.range) probe.range = false;
  }
}

function changed(what: 'file' | 'directory' | 'symlink', rel: string): SealError {
  return new SealError('SEAL_CHANGED', `${what} changed while snapshotting: ${escapePath(rel)}`, { path: rel });
}

function changedOpening(rel: string, cause?: unknown): SealError {
  return new SealError('SEAL_CHANGED', `path changed while opening: ${escapePath(rel)}`, { path: rel, cause });
}

/** readlinkat of a name fstatat showed as a symlink: a name swapped or removed since is SEAL_CHANGED. */
function readLinkOf(sys: Sys, dirfd: number, name: string, gone: (err: unknown) => SealError): ReturnType<Sys['readlinkat']> {
  try {
    return sys.readlinkat(dirfd, name);
  } catch (err) {
    if (hasCode(err, 'EINVAL', 'ENOENT')) throw gone(err);
    throw err;
  }
}

/** Whether fd is on procfs or sysfs; fd is closed when the look fails (its error thrown). */
function onPseudoFs(sys: Sys, fd: number): boolean {
  try {
    return isPseudoFs(sys.fstatfs(fd));
  } catch (err) {
    own(sys, fd)[Symbol.dispose]();
    throw err;
  }
}

function special(rel: string): SealError {
  return new SealError('SEAL_SPECIAL_FILE', `capture accepts only regular files and directories: ${escapePath(rel)}`, {
    path: rel,
  });
}

/**
 * A declared root, or a directory on its way, that is missing: SEAL_UNAVAILABLE, and
 * retryable when the directory that should hold it (dirfd) had an entry added, removed
 * or renamed since the capture began (its mtime): the path went away under the capture,
 * rather than being absent from the start.
 */
function declaredMissing(ctx: CaptureContext, dirfd: number, rel: string, err: unknown): SealError {
  let changing = false;
  try {
    const st = ctx.sys.fstat(dirfd);
    changing = st.mtimeNs >= ctx.startedNs;
  } catch {
    // Unknown: not retryable.
  }
  return new SealError('SEAL_UNAVAILABLE', `path is unavailable: ${escapePath(rel)}: ${escapePath((err as Error).message)}`, {
    path: rel,
    cause: err,
    retryable: changing,
  });
}

function unavailable(rel: string, err: unknown): SealError {
  throwIfRefused(err, `path cannot be read: ${escapePath(rel)}`, rel);
  return new SealError('SEAL_UNAVAILABLE', `path is unavailable: ${escapePath(rel)}: ${escapePath((err as Error).message)}`, { path: rel, cause: err });
}

/**
 * A symlink where none may be; inside a copy root the message names the directory that
 * holds it and the way out: that copy root captured as a mount instead, or left out.
 */
function symlinkRefused(rel: string, copyRoot?: string): SealError {
  let hint = '';
  if (copyRoot !== undefined) {
    const dir = rel.slice(0, rel.lastIndexOf('/'));
    const root = escapePath(copyRoot);
    const where = dir === copyRoot ? `in copy root ${root}` : `in ${escapePath(dir)}, inside copy root ${root}`;
    // A package manager's links in a node_modules below the root (a workspace's packages/a/node_modules/b): the root is
    // the project's source, which a mount would make read-only; keeping the links is the way.
    hint = inNestedModules(rel, copyRoot)
      ? ` (${where}: keep the links with --links contained, and --keep-exec for the tools they lead to, or leave it out)`
      : ` (${where}: declare ${root} as a mount (--mount ${root}) or leave it out)`;
  }
  return new SealError('SEAL_SYMLINK', `capture must not traverse a symlink: ${escapePath(rel)}${hint}`, { path: rel });
}

function isUtf8Name(name: string | Buffer): name is string {
  return typeof name === 'string' && isWellFormed(name);
}

/**
 * The fstatat → type check → openat(O_NOFOLLOW|O_NONBLOCK) → fstat-same-object
 * sequence. Returns the open fd and its fstat.
 */
export function openChecked(sys: Sys, dirfd: number, name: string, rel: string, requireDir: boolean, seen?: Stat): [number, Stat] {
  let st: Stat;
  if (seen !== undefined) st = seen;
  else {
    try {
      st = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
    } catch (err) {
      throw unavailable(rel, err);
    }
  }
  if (isLink(st.mode)) throw symlinkRefused(rel);
  if (requireDir && !isDir(st.mode)) {
    throw new SealError('SEAL_BAD_PATH', `parent must be a directory: ${escapePath(rel)}`, { path: rel });
  }
  if (!isDir(st.mode) && !isReg(st.mode)) throw special(rel);
  let fd: number;
  try {
    fd = sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | (isDir(st.mode) ? O_DIRECTORY : 0));
  } catch (err) {
    if (hasCode(err, 'ELOOP', 'ENOTDIR', 'ENOENT', 'ENXIO')) throw changedOpening(rel, err);
    throwIfRefused(err, `path cannot be read: ${escapePath(rel)}`, rel);
    throw new SealError('SEAL_UNAVAILABLE', `path is unreadable: ${escapePath(rel)}: ${escapePath((err as Error).message)}`, {
      path: rel,
      cause: err,
    });
  }
  // try/finally rather than `using`: once per entry (see fillOwned).
  const file = own(sys, fd);
  try {
    const opened = sys.fstat(fd);
    if (!sameObject(opened, st)) throw changedOpening(rel);
    return [file.release(), opened];
  } finally {
    file[Symbol.dispose]();
  }
}

/**
 * Opens the parent directories of a declared root (`parts` without its last
 * component) below sourceFd, each by openChecked: a symlink or a non-directory on the
 * way is refused. Returns the last (sourceFd borrowed when there is none).
 */
export function openDeclaredParents(ctx: CaptureContext, sourceFd: number, parts: readonly string[]): Fd {
  const { sys } = ctx;
  return walkDown(sys, sourceFd, parts.slice(0, -1), (dirfd, name, i) => {
    const rel = parts.slice(0, i + 1).join('/');
    let st: Stat;
    try {
      st = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) throw declaredMissing(ctx, dirfd, rel, err);
      throw unavailable(rel, err);
    }
    return openChecked(sys, dirfd, name, rel, true, st)[0];
  });
}

/** One entry for TreeBuilder.copyChild to capture. */
export interface ChildCopy {
  srcDirFd: number;
  destDirFd: number;
  /** Its name below srcDirFd. */
  name: string;
  /** Its manifest path. */
  rel: string;
  /** Component count of rel. */
  depth: number;
  /** Its name below destDirFd (default: name). */
  destName?: string;
  /** A declared root (copy root or mount source): never a symlink, and missing is SEAL_UNAVAILABLE. */
  declared?: boolean;
  /** Its fstatat (no-follow) taken with its directory's other names (fstatatEach): an Error is what that fstatat met; absent or null: taken here. */
  st?: Stat | null | Error | undefined;
}

export interface BuilderOptions {
  /** Keep bounded relative symlinks (mounts; copy roots with links: 'contained') instead of refusing them (copy roots). */
  allowSymlinks: boolean;
  /** Record permission bits (mounts); copy roots record mode 0 as the seed does. */
  preserveModes: boolean;
  /** Record the permission bits of executable files only (copy roots with keepExecutable). */
  keepExecutable?: boolean;
  /** Record each entry's mtime (copy roots with keepTimes); not the implicit parents of a root. */
  keepTimes?: boolean;
  /**
   * Freeze each walked directory (0500) as soon as its children are in (copy roots,
   * whose trees never change once walked); mounts are frozen after ensureDirs.
   */
  freezeDirs: boolean;
  /** The source path the area's root `payload` stands for (a mount): excludes match, and errors name, paths below it. */
  payloadSource?: string;
  /** The copy roots are every top-level entry of the source (copy omitted): one is left out by an exclude pattern, not by the declaration. */
  defaultRoots?: boolean;
  /**
   * Make each declared directory root a btrfs subvolume (copy roots in a store on btrfs):
   * what it holds keeps a clone's modes (directories 0700, files 0600/0700) and is sealed
   * by the subvolume's read-only flag once the walk is over (see `subvolumes`). A root
   * whose subvolume the kernel will not make is an ordinary frozen directory.
   */
  subvolumes?: boolean;
}

/** Builds one area of a snapshot (the copy roots, or one mount) below destFd. */
export class TreeBuilder {
  /** The area's entries, packed; sorted by finished(). */
  readonly entries = new EntryTable();
  totalBytes = 0;
  /** The declared root being walked (named in a refusal). */
  #root = '';
  /** Whether that root is a subvolume: its tree keeps a clone's modes instead of frozen ones. */
  #sealed = false;
  /** The declared roots made subvolumes (paths), to be sealed once every file job is over. */
  readonly subvolumes: string[] = [];

  constructor(
    readonly ctx: CaptureContext,
    readonly destFd: number,
    readonly options: BuilderOptions,
  ) {}

  /** The sorted entries, once every file job has finished. */
  finished(): EntryTable {
    this.ctx.drain();
    return this.entries.sort();
  }

  /** Records an entry (a directory already there is kept); returns its index in the table. */
  #record(entry: ManifestEntry): number {
    // Three UTF-8 bytes at most per UTF-16 unit: most paths need no count.
    if (entry.path.length * 3 > this.ctx.limits.maxPathBytes && utf8Bytes(entry.path) > this.ctx.limits.maxPathBytes) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the path byte limit (${this.ctx.limits.maxPathBytes} bytes): ${escapePath(entry.path)}`, { path: entry.path });
    }
    const { index, added } = this.entries.add(entry);
    if (!added) {
      if (entry.kind === 'directory' && this.entries.kindOf(index) === 'directory') return index;
      throw new SealError('SEAL_COLLISION', `paths collide at ${escapePath(entry.path)}`, { path: entry.path });
    }
    // A capture past the limit fails as a whole: the entry just added goes with it.
    this.ctx.addEntry(entry.path);
    return index;
  }

  #recordDir(rel: string, st?: Stat): void {
    const entry: ManifestEntry = { kind: 'directory', path: rel, size: 0, sha256: '', mode: 0, link_target: '' };
    this.#record(st !== undefined && this.options.keepTimes === true ? withMtime(entry, st) : entry);
  }

  /**
   * Opens (creating and recording as they go) the directories `parts` below the
   * area root and returns the last (the area root borrowed for no parts); undefined
   * in deferred mode, where nothing is built in place.
   */
  ensureDirs(parts: readonly string[]): Fd | undefined {
    const { sys } = this.ctx;
    const record = (i: number): void => {
      const rel = parts.slice(0, i + 1).join('/');
      const existing = this.entries.find(rel);
      if (existing >= 0 && this.entries.kindOf(existing) !== 'directory') {
        throw new SealError('SEAL_COLLISION', `paths collide at ${escapePath(rel)}`, { path: rel });
      }
      this.#recordDir(rel);
    };
    if (this.ctx.hook?.deferred) {
      parts.forEach((_, i) => record(i));
      return undefined;
    }
    return walkDown(sys, this.destFd, parts, (dirfd, name, i) => {
      record(i);
      mkdirIfMissing(sys, dirfd, name);
      return openChildDir(sys, dirfd, name);
    });
  }

  /**
   * Captures the source entry `name` below srcDirFd into destDirFd under the
   * manifest path `rel` (depth = its component count), named destName there.
   */
  copyChild(c: ChildCopy): void {
    const { srcDirFd, destDirFd, name, rel, depth, declared = false } = c;
    const destName = c.destName ?? name;
    const { sys, limits } = this.ctx;
    this.ctx.checkAbort();
    if (depth > limits.maxDepth) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the depth limit (${limits.maxDepth} levels): ${escapePath(rel)}`, { path: rel });
    }
    let st: Stat;
    if (c.st instanceof Error) throw unavailable(rel, c.st);
    if (c.st !== undefined && c.st !== null) st = c.st;
    else {
      // Missing when its directory's names were looked at: looked at again, to fail (or not) here.
      try {
        st = sys.fstatat(srcDirFd, name, AT_SYMLINK_NOFOLLOW);
      } catch (err) {
        if (hasCode(err, 'ENOENT')) throw declared ? declaredMissing(this.ctx, srcDirFd, rel, err) : changedOpening(rel, err);
        throw unavailable(rel, err);
      }
    }
    if (declared) {
      this.#root = rel;
      this.#sealed = false;
    }
    if (isLink(st.mode)) {
      // A mount source is never a link; a copy root may be one where links are kept (links: 'contained'), held to the same containment rule.
      if (declared && (!this.options.allowSymlinks || this.options.payloadSource !== undefined)) return this.#obstacle(symlinkRefused(rel), 'root-link', undefined, true);
      if (!this.options.allowSymlinks) return this.#obstacle(symlinkRefused(rel, this.#root), 'link');
      this.#copySymlink(srcDirFd, destDirFd, name, destName, rel, st);
      return;
    }
    if (isReg(st.mode) && this.ctx.hook?.reuse(st, srcDirFd) === true) {
      this.ctx.hook.reusedAt(this.entries, this.#addFile(rel, st).index);
      return;
    }
    if (!isDir(st.mode) && !isReg(st.mode)) return this.#obstacle(special(rel), 'special', st.mode, declared);
    const [fd, opened] = openChecked(sys, srcDirFd, name, rel, false, st);
    if (declared && onPseudoFs(sys, fd)) {
      sys.close(fd);
      // Its files read other bytes than their size says, each time: a capture of one could only fail SEAL_CHANGED, retried for nothing.
      const err = new SealError('SEAL_SPECIAL_FILE', `declared root is on a kernel pseudo-filesystem (procfs, sysfs), whose files have no stable contents: ${escapePath(rel)}`, { path: rel });
      return this.#obstacle(err, 'special', undefined, true);
    }
    if (!isDir(opened.mode)) {
      this.#copyFile(fd, destDirFd, destName, rel, opened);
      return;
    }
    using src = own(sys, fd);
    this.ctx.checkNotOwn(opened, rel);
    this.#recordDir(rel, opened);
    if (this.ctx.hook?.deferred) {
      this.copyDirContents(src.fd, -1, rel, opened, depth);
      return;
    }
    if (declared && this.options.subvolumes === true && makeSubvolume(sys, destDirFd, destName)) {
      this.#sealed = true;
      this.subvolumes.push(rel);
    } else sys.mkdirat(destDirFd, destName, 0o700);
    using dest = own(sys, openChildDir(sys, destDirFd, destName));
    if (declared && this.#sealed) sys.fchmod(dest.fd, 0o700);
    this.copyDirContents(src.fd, dest.fd, rel, opened, depth);
    // Files still being filled by helper threads are written through fds already open.
    if (this.options.freezeDirs && !this.#sealed) sys.fchmod(dest.fd, 0o500);
  }

  /** An obstacle (never opened or followed) is recorded and the walk goes on: the capture is refused once it is over. */
  #obstacle(err: SealError, kind: ObstacleKind, mode?: number, atRoot = false): void {
    const { payloadSource, defaultRoots } = this.options;
    const declaredBy = !atRoot ? undefined : payloadSource !== undefined ? 'mount' : defaultRoots === true ? 'default' : 'copy';
    this.ctx.obstacles.add(err, kind, { payloadSource, copyRoot: this.#root, ...(mode === undefined ? {} : { mode }), declaredBy });
  }

  /** Copies every child of the open source directory, then checks it did not change meanwhile. */
  copyDirContents(srcFd: number, destFd: number, rel: string, before: Stat, depth: number): void {
    const { sys } = this.ctx;
    const listed = keptEntries(sys, srcFd, userPath(rel, this.options.payloadSource), sys.readdir(srcFd), this.ctx.exclude);
    // A name that is not UTF-8 is stepped past and refused with the other obstacles, never opened.
    const names: string[] = [];
    const bad: Buffer[] = [];
    for (const e of listed) {
      if (isUtf8Name(e.name)) names.push(e.name);
      else bad.push(Buffer.from(e.name));
    }
    names.sort(compareUtf8);
    // Every name looked at first, in one call; a name the kernel refused fails in its turn.
    const stats = fstatatEach(sys, srcFd, names, AT_SYMLINK_NOFOLLOW);
    // Each bad name in its place in the walk's (byte) order among the others, so the first obstacle found is the first refused.
    bad.sort(Buffer.compare);
    const userDir = userPath(rel, this.options.payloadSource);
    const where = { payloadSource: this.options.payloadSource, copyRoot: this.#root };
    let b = 0;
    names.forEach((n, k) => {
      if (b < bad.length) {
        const bytes = Buffer.from(n);
        while (b < bad.length && Buffer.compare(bad[b]!, bytes) < 0) addBadName(this.ctx.obstacles, bad[b++]!, rel, userDir, names, where);
      }
      this.copyChild({ srcDirFd: srcFd, destDirFd: destFd, name: n, rel: rel === '' ? n : `${rel}/${n}`, depth: depth + 1, st: stats[k] });
    });
    while (b < bad.length) addBadName(this.ctx.obstacles, bad[b++]!, rel, userDir, names, where);
    if (!sameIdentity(before, sys.fstat(srcFd))) throw changed('directory', rel);
  }

  /** Checks the limits for a regular file and records its entry (sha256 empty until the file is filled); returns its index and mode. */
  #addFile(rel: string, st: Stat): { index: number; mode: number } {
    const { limits } = this.ctx;
    const bits = st.mode & 0o7777;
    const capturedMode = this.options.preserveModes || (this.options.keepExecutable === true && (bits & 0o111) !== 0) ? bits : 0;
    let entry: ManifestEntry = { kind: 'file', path: rel, size: st.size, sha256: '', mode: capturedMode, link_target: '' };
    if (this.options.keepTimes === true) entry = withMtime(entry, st);
    if (st.size > limits.maxFileBytes) {
      throw new SealError('SEAL_LIMIT', `file exceeds the per-file limit (${limits.maxFileBytes} bytes): ${escapePath(rel)}`, { path: rel });
    }
    this.ctx.checkBytes(st.size, rel);
    const index = this.#record(entry);
    this.totalBytes += st.size;
    this.ctx.addBytes(st.size);
    return { index, mode: capturedMode };
  }

  /** Copies the open regular file (owning srcFd) into destDirFd/name, frozen at creation, and records it. */
  #copyFile(srcFd: number, destDirFd: number, name: string, rel: string, before: Stat): void {
    const { sys } = this.ctx;
    const hook = this.ctx.hook;
    // Both fds are ours until runFile takes them (try/catch rather than `using`: once per file, see fillOwned).
    const src = own(sys, srcFd);
    let entry: { index: number; mode: number };
    let dest: number;
    let loose: string | undefined;
    try {
      entry = this.#addFile(rel, before);
      hook?.settle(src.fd, before);
      const frozen = this.#sealed ? cloneFileMode(entry.mode) : frozenFileMode(entry.mode);
      if (hook?.deferred) [dest, loose] = hook.loose(frozen);
      else dest = sys.openat(destDirFd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, frozen);
    } catch (err) {
      src[Symbol.dispose]();
      throwIfRefused(err, `file cannot be captured: ${escapePath(rel)}`, rel);
      throw err;
    }
    const table = this.entries;
    this.ctx.runFile(src.release(), dest, before, rel, (filled) => {
      hook?.captured(before, filled.sha256, loose, table, entry.index);
      table.setDigest(entry.index, filled.sha256);
    });
  }

  #copySymlink(srcDirFd: number, destDirFd: number, name: string, destName: string, rel: string, before: Stat): void {
    const { sys, limits } = this.ctx;
    const target = readLinkOf(sys, srcDirFd, name, (err) => changedOpening(rel, err));
    if (typeof target !== 'string' || !isWellFormed(target)) {
      throw new SealError('SEAL_BAD_PATH', `symlink is unreadable or not UTF-8: ${escapePath(rel)}`, { path: rel });
    }
    try {
      checkRelativeLink(rel, target);
    } catch (err) {
      return this.#obstacle(err as SealError, this.options.payloadSource === undefined ? 'link-escape' : 'escape');
    }
    const bytes = utf8Bytes(target);
    if (bytes > limits.maxPathBytes) {
      throw new SealError('SEAL_LIMIT', `symlink target exceeds the path limit (${limits.maxPathBytes} bytes): ${escapePath(rel)}`, { path: rel });
    }
    this.ctx.checkBytes(bytes, rel);
    if (!this.ctx.hook?.deferred) sys.symlinkat(target, destDirFd, destName);
    let after: Stat;
    try {
      after = sys.fstatat(srcDirFd, name, AT_SYMLINK_NOFOLLOW);
    } catch (err) {
      if (hasCode(err, 'ENOENT')) throw changed('symlink', rel);
      throw err;
    }
    if (!sameIdentity(before, after) || readLinkOf(sys, srcDirFd, name, () => changed('symlink', rel)) !== target) {
      throw changed('symlink', rel);
    }
    this.totalBytes += bytes;
    const entry: ManifestEntry = { kind: 'symlink', path: rel, size: bytes, sha256: createHash('sha256').update(target, 'utf8').digest('hex'), mode: 0, link_target: target };
    // A kept link in a copy root records its own mtime too (keepTimes: every entry of a copy root has one).
    this.#record(this.options.keepTimes === true ? withMtime(entry, before) : entry);
    this.ctx.addBytes(bytes);
  }
}
