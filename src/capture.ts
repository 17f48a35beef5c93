// capture.ts: the guarded copier: walks a source tree through fds and builds a private, hashed copy of it.
import { createHash } from 'node:crypto';

import { closeQuietly, openChildDir } from './dirs.js';
import { SealError } from './errors.js';
import type { Limits } from './limits.js';
import { throttled, type Progress, type ProgressFn } from './progress.js';
import { sortEntries, type ManifestEntry } from './manifest.js';
import { compareUtf8, escapePath, isWellFormed, utf8Bytes } from './paths.js';
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
} from './sys/constants.js';
import { hasCode } from './sys/errno.js';
import { identityOf, sameIdentity, sameObject } from './sys/identity.js';
import type { Stat, Sys } from './sys/native.js';

export const CHUNK_BYTES = 1024 * 1024;

export type CaptureProgress = Progress;

/** State shared by every builder of one capture: budget, clone probes, buffer, cancellation. */
export class CaptureContext {
  entries = 0;
  totalBytes = 0;
  readonly buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  /** Per (source dev, build dev): whether FICLONE works; probed once. */
  readonly #cloneable = new Map<string, boolean>();
  readonly #report: (entries: number, bytes: number) => void;

  constructor(
    readonly sys: Sys,
    readonly limits: Limits,
    readonly buildDev: bigint,
    readonly isAborted: () => boolean = () => false,
    onProgress?: ProgressFn,
  ) {
    this.#report = throttled(onProgress);
  }

  checkAbort(): void {
    if (this.isAborted()) throw new SealError('SEAL_ABORTED', 'capture was aborted');
  }

  addEntry(): void {
    if (this.entries >= this.limits.maxEntries) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the entry limit (${this.limits.maxEntries} entries)`);
    }
    this.entries++;
  }

  checkBytes(extra: number): void {
    if (this.totalBytes + extra > this.limits.maxTotalBytes) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the total byte limit (${this.limits.maxTotalBytes} bytes)`);
    }
  }

  addBytes(n: number): void {
    this.totalBytes += n;
    this.#report(this.entries, this.totalBytes);
  }

  /** undefined: not probed yet for this pair. */
  cloneable(srcDev: bigint): boolean | undefined {
    return this.#cloneable.get(`${srcDev}:${this.buildDev}`);
  }

  setCloneable(srcDev: bigint, ok: boolean): void {
    this.#cloneable.set(`${srcDev}:${this.buildDev}`, ok);
  }
}

function changed(what: 'file' | 'directory' | 'symlink', rel: string): SealError {
  return new SealError('SEAL_CHANGED', `${what} changed while snapshotting: ${escapePath(rel)}`, { path: rel });
}

function changedOpening(rel: string, cause?: unknown): SealError {
  return new SealError('SEAL_CHANGED', `path changed while opening: ${escapePath(rel)}`, { path: rel, cause });
}

function special(rel: string): SealError {
  return new SealError('SEAL_SPECIAL_FILE', `capture accepts only regular files and directories: ${escapePath(rel)}`, {
    path: rel,
  });
}

function symlinkRefused(rel: string): SealError {
  return new SealError('SEAL_SYMLINK', `capture must not traverse a symlink: ${escapePath(rel)}`, { path: rel });
}

function nameOf(name: string | Buffer, parentRel: string): string {
  if (typeof name !== 'string' || !isWellFormed(name)) {
    const shown = `${parentRel === '' ? '' : `${escapePath(parentRel)}/`}${escapePath(name)}`;
    throw new SealError('SEAL_BAD_PATH', `path is not valid UTF-8: ${shown}`, { path: shown });
  }
  return name;
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
      throw new SealError('SEAL_UNAVAILABLE', `path is unavailable: ${escapePath(rel)}: ${(err as Error).message}`, {
        path: rel,
        cause: err,
      });
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
    throw new SealError('SEAL_UNAVAILABLE', `path is unreadable: ${escapePath(rel)}: ${(err as Error).message}`, {
      path: rel,
      cause: err,
    });
  }
  try {
    const opened = sys.fstat(fd);
    if (!sameObject(identityOf(opened), identityOf(st))) throw changedOpening(rel);
    return [fd, opened];
  } catch (err) {
    closeQuietly(sys, fd);
    throw err;
  }
}

export interface BuilderOptions {
  /** Keep bounded relative symlinks (mounts) instead of refusing them (copy roots). */
  allowSymlinks: boolean;
  /** Record permission bits (mounts); copy roots record mode 0 as the seed does. */
  preserveModes: boolean;
}

/** Builds one area of a snapshot (the copy roots, or one mount) below destFd. */
export class TreeBuilder {
  readonly entries = new Map<string, ManifestEntry>();
  totalBytes = 0;

  constructor(
    readonly ctx: CaptureContext,
    readonly destFd: number,
    readonly options: BuilderOptions,
  ) {}

  finished(): ManifestEntry[] {
    return sortEntries(this.entries.values());
  }

  #record(entry: ManifestEntry): void {
    if (utf8Bytes(entry.path) > this.ctx.limits.maxPathBytes) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the path byte limit (${this.ctx.limits.maxPathBytes} bytes): ${escapePath(entry.path)}`, { path: entry.path });
    }
    const existing = this.entries.get(entry.path);
    if (existing !== undefined) {
      if (existing.kind === entry.kind && existing.kind === 'directory') return;
      throw new SealError('SEAL_COLLISION', `paths collide at ${escapePath(entry.path)}`, { path: entry.path });
    }
    this.ctx.addEntry();
    this.entries.set(entry.path, entry);
  }

  #recordDir(rel: string): void {
    this.#record({ kind: 'directory', path: rel, size: 0, sha256: '', mode: 0, link_target: '' });
  }

  /**
   * Opens (creating and recording as they go) the directories `parts` below the
   * area root, returning an fd of the last; the caller closes it.
   */
  ensureDirs(parts: readonly string[]): number {
    let fd = -1;
    try {
      for (let i = 0; i < parts.length; i++) {
        const rel = parts.slice(0, i + 1).join('/');
        const existing = this.entries.get(rel);
        if (existing !== undefined && existing.kind !== 'directory') {
          throw new SealError('SEAL_COLLISION', `paths collide at ${escapePath(rel)}`, { path: rel });
        }
        this.#recordDir(rel);
        const parent = fd < 0 ? this.destFd : fd;
        try {
          this.ctx.sys.mkdirat(parent, parts[i]!, 0o700);
        } catch (err) {
          if (!hasCode(err, 'EEXIST')) throw err;
        }
        const next = openChildDir(this.ctx.sys, parent, parts[i]!);
        closeQuietly(this.ctx.sys, fd);
        fd = next;
      }
      return fd < 0 ? this.ctx.sys.openat(this.destFd, '.', O_RDONLY | O_DIRECTORY) : fd;
    } catch (err) {
      closeQuietly(this.ctx.sys, fd);
      throw err;
    }
  }

  /**
   * Captures the source entry `name` below srcDirFd into destDirFd under the
   * manifest path `rel` (depth = its component count), named destName there.
   */
  copyChild(srcDirFd: number, destDirFd: number, name: string, rel: string, depth: number, destName = name, declared = false): void {
    const { sys, limits } = this.ctx;
    this.ctx.checkAbort();
    if (depth > limits.maxDepth) {
      throw new SealError('SEAL_LIMIT', `capture exceeds the depth limit (${limits.maxDepth} levels): ${escapePath(rel)}`, { path: rel });
    }
    let st: Stat;
    try {
      st = sys.fstatat(srcDirFd, name, AT_SYMLINK_NOFOLLOW);
    } catch (err) {
      if (hasCode(err, 'ENOENT') && !declared) throw changedOpening(rel, err);
      throw new SealError('SEAL_UNAVAILABLE', `path is unavailable: ${escapePath(rel)}: ${(err as Error).message}`, { path: rel, cause: err });
    }
    if (isLink(st.mode)) {
      if (declared) throw symlinkRefused(rel);
      if (!this.options.allowSymlinks) throw symlinkRefused(rel);
      this.#copySymlink(srcDirFd, destDirFd, name, destName, rel, st);
      return;
    }
    const [fd, opened] = openChecked(sys, srcDirFd, name, rel, false, st);
    try {
      if (isDir(opened.mode)) {
        this.#recordDir(rel);
        sys.mkdirat(destDirFd, destName, 0o700);
        const dest = openChildDir(sys, destDirFd, destName);
        try {
          this.copyDirContents(fd, dest, rel, opened, depth);
        } finally {
          closeQuietly(sys, dest);
        }
      } else {
        this.#copyFile(fd, destDirFd, destName, rel, opened);
      }
    } finally {
      closeQuietly(sys, fd);
    }
  }

  /** Copies every child of the open source directory, then checks it did not change meanwhile. */
  copyDirContents(srcFd: number, destFd: number, rel: string, before: Stat, depth: number): void {
    const { sys } = this.ctx;
    const listed = sys.readdir(srcFd);
    const names = listed.map((e) => nameOf(e.name, rel)).sort(compareUtf8);
    for (const n of names) this.copyChild(srcFd, destFd, n, rel === '' ? n : `${rel}/${n}`, depth + 1);
    if (!sameIdentity(identityOf(before), identityOf(sys.fstat(srcFd)))) throw changed('directory', rel);
  }

  /** Copies the open regular file into destDirFd/name, frozen at creation, and records it. */
  #copyFile(srcFd: number, destDirFd: number, name: string, rel: string, before: Stat): void {
    const { sys, limits } = this.ctx;
    if (before.size > limits.maxFileBytes) {
      throw new SealError('SEAL_LIMIT', `file exceeds the per-file limit (${limits.maxFileBytes} bytes): ${escapePath(rel)}`, { path: rel });
    }
    this.ctx.checkBytes(before.size);
    const capturedMode = this.options.preserveModes ? before.mode & 0o7777 : 0;
    const frozenMode = capturedMode & 0o111 ? 0o500 : 0o400;
    const dest = sys.openat(destDirFd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, frozenMode);
    let sha256: string;
    try {
      sha256 = this.#fill(srcFd, dest, rel, before);
    } finally {
      closeQuietly(sys, dest);
    }
    this.totalBytes += before.size;
    this.#record({ kind: 'file', path: rel, size: before.size, sha256, mode: capturedMode, link_target: '' });
    this.ctx.addBytes(before.size);
  }

  /**
   * Clones the source into the build where the filesystems allow (else copies it
   * while hashing), then proves the source's identity unchanged since before.
   *
   * A clone is a point-in-time copy: FICLONE takes both inodes' locks, so it waits
   * out a write in progress and no write can interleave with it. The bytes hashed
   * are read from the source's (cached) pages after the clone; as no write began
   * between the fstat before the clone and the fstat after the read (identity
   * unchanged), they are exactly the clone's bytes, and reading cached source pages
   * is far cheaper than reading the fresh clone back from disk.
   */
  #fill(srcFd: number, dest: number, rel: string, before: Stat): string {
    const { sys } = this.ctx;
    const hash = createHash('sha256');
    let cloned = false;
    const probe = this.ctx.cloneable(before.dev);
    if (probe !== false && before.size > 0) {
      cloned = sys.ficlone(dest, srcFd);
      if (probe === undefined) this.ctx.setCloneable(before.dev, cloned);
    }
    const copied = this.#stream(srcFd, cloned ? -1 : dest, hash, before.size, rel);
    if (copied !== before.size || !sameIdentity(identityOf(before), identityOf(sys.fstat(srcFd)))) {
      throw changed('file', rel);
    }
    return hash.digest('hex');
  }

  /** Reads fd to EOF in chunks (stopping as soon as more than `size` bytes show up), hashing and optionally writing. */
  #stream(fd: number, out: number, hash: ReturnType<typeof createHash>, size: number, rel: string): number {
    const { sys, buffer } = this.ctx;
    let copied = 0;
    for (;;) {
      const n = sys.pread(fd, buffer, 0, buffer.length, copied);
      if (n === 0) return copied;
      const chunk = buffer.subarray(0, n);
      hash.update(chunk);
      if (out >= 0) {
        for (let written = 0; written < n; ) {
          written += sys.pwrite(out, buffer, written, n - written, copied + written);
        }
      }
      copied += n;
      if (copied > size) throw changed('file', rel);
      // A short read of a regular file is its end; the identity check after proves it stayed so.
      if (copied === size && n < buffer.length) return copied;
    }
  }

  #copySymlink(srcDirFd: number, destDirFd: number, name: string, destName: string, rel: string, before: Stat): void {
    const { sys, limits } = this.ctx;
    const target = sys.readlinkat(srcDirFd, name);
    if (typeof target !== 'string' || !isWellFormed(target)) {
      throw new SealError('SEAL_BAD_PATH', `symlink is unreadable or not UTF-8: ${escapePath(rel)}`, { path: rel });
    }
    if (target === '' || target.startsWith('/')) {
      throw new SealError('SEAL_ESCAPE', `symlink must be a bounded relative link: ${escapePath(rel)}`, { path: rel });
    }
    const bytes = utf8Bytes(target);
    if (bytes > limits.maxPathBytes) {
      throw new SealError('SEAL_LIMIT', `symlink target exceeds the path limit (${limits.maxPathBytes} bytes): ${escapePath(rel)}`, { path: rel });
    }
    this.ctx.checkBytes(bytes);
    sys.symlinkat(target, destDirFd, destName);
    const after = sys.fstatat(srcDirFd, name, AT_SYMLINK_NOFOLLOW);
    if (!sameIdentity(identityOf(before), identityOf(after)) || sys.readlinkat(srcDirFd, name) !== target) {
      throw changed('symlink', rel);
    }
    this.totalBytes += bytes;
    this.#record({
      kind: 'symlink',
      path: rel,
      size: bytes,
      sha256: createHash('sha256').update(target, 'utf8').digest('hex'),
      mode: 0,
      link_target: target,
    });
    this.ctx.addBytes(bytes);
  }
}
