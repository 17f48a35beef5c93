// stage.ts: stageFiles, a private directory of read-only files under a root, that can prove it is unchanged.
import { createHash, randomBytes } from 'node:crypto';
import { DIR_FLAGS, checkRootPath, mkdirIfMissing, openChildDir, openRealDir, openRealPlace, own, removeOwnDir, removeQuietly, walkDown, type Fd } from '../base/fd.js';
import { SealError } from '../base/errors.js';
import { hashAt, writeAll } from '../base/io.js';
import { checkInteger, checkListLength, checkOptions, checkString, invalidArgType, invalidArgValue } from '../base/arg-errors.js';
import { checkNoOverlap, checkRelative, escapePath, isWellFormed } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, LOCK_EX, LOCK_NB, O_CREAT, O_EXCL, O_NOFOLLOW, O_WRONLY, isDir, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import { sameObject } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';
import { checkSys, defineOp } from '../base/op.js';
import { sealed, throwIfRefused } from '../base/refusal.js';

/** Default name prefix of a stageFiles directory (materialize's own stage has another). */
export const STAGE_FILES_PREFIX = '.treeseal-stage-';

export interface StageFile {
  /** Relative path inside the stage. */
  target: string;
  bytes: Uint8Array;
}

export interface StageOptions {
  /** Name prefix of the stage directory (default `.treeseal-stage-`). */
  prefix?: string | undefined;
  maxPathBytes?: number | undefined;
  sys?: Sys | undefined;
}

export interface StagedFile {
  target: string;
  /** Absolute path of the staged file. */
  path: string;
  size: number;
  sha256: string;
}

/** A stage made by openStage: its fds and records, plain data that can cross threads. */
export interface StageHandle {
  root: string;
  name: string;
  parentFd: number;
  stageFd: number;
  records: StagedRecord[];
}

interface StagedRecord {
  target: string;
  parts: string[];
  sha256: string;
  size: number;
  dev: bigint;
  ino: bigint;
}

function changed(rel: string): SealError {
  return new SealError('SEAL_CHANGED', `stage changed during verification: ${escapePath(rel)}`, { path: rel });
}

function checkTarget(raw: unknown, i: number, maxPathBytes: number): string[] {
  if (typeof raw === 'string' && raw.split('/').some((p, j, all) => p === '.' || (p === '' && j > 0 && j < all.length - 1))) {
    throw new SealError('SEAL_BAD_PATH', `stage target must not have empty or '.' components: ${escapePath(raw)}`, { path: raw });
  }
  if (typeof raw === 'string' && raw.endsWith('/')) {
    throw new SealError('SEAL_BAD_PATH', `stage target must name a file: ${escapePath(raw)}`, { path: raw });
  }
  return checkRelative(raw, { label: 'stage target', name: `files[${i}].target`, maxPathBytes });
}

interface Planned {
  parts: string[];
  target: string;
  bytes: Uint8Array;
}

/** Checks the stage options and every file before anything is created. */
function planStage(parent: unknown, files: readonly StageFile[], options: StageOptions): { prefix: string; planned: Planned[] } {
  checkString('parent', parent);
  const prefix = checkString('options.prefix', options.prefix === undefined ? STAGE_FILES_PREFIX : options.prefix);
  // Not UTF-8 (a lone surrogate), the name on disk would be another than stage.root says.
  if (prefix.includes('/') || prefix.includes('\0') || prefix === '.' || prefix === '..' || !isWellFormed(prefix)) {
    throw invalidArgValue('options.prefix', prefix, 'must be a plain name');
  }
  if (!Array.isArray(files)) throw invalidArgType('files', 'Array', files);
  checkListLength('files', files);
  const maxPathBytes = options.maxPathBytes === undefined ? 4096 : checkInteger('options.maxPathBytes', options.maxPathBytes, 1);
  const planned = files.map((f: unknown, i): Planned => {
    if (f === null || typeof f !== 'object') throw invalidArgType(`files[${i}]`, 'object', f);
    checkOptions(`files[${i}]`, f, { op: 'a staged file', keys: ['target', 'bytes'] });
    const { target, bytes } = f as StageFile;
    if (!(bytes instanceof Uint8Array)) throw invalidArgType(`files[${i}].bytes`, ['Buffer', 'Uint8Array'], bytes);
    // Shared memory another thread may change while the file is written and hashed: copied first, so the sha256 recorded is the staged file's.
    const fixed = bytes.buffer instanceof SharedArrayBuffer ? new Uint8Array(bytes) : bytes;
    return { parts: checkTarget(target, i, maxPathBytes), target, bytes: fixed };
  });
  checkNoOverlap(
    planned.map((p) => p.parts),
    'stage targets',
  );
  return { prefix, planned };
}

export class Stage {
  /** Absolute path of the stage directory. */
  readonly root: string;
  readonly files: readonly StagedFile[];
  readonly #sys: Sys;
  readonly #records: StagedRecord[];
  readonly #parent: Fd;
  readonly #stage: Fd;
  readonly #name: string;

  /** @internal */
  constructor(sys: Sys, handle: StageHandle) {
    const { root, records } = handle;
    this.#sys = sys;
    this.root = root;
    this.#name = handle.name;
    this.#parent = own(sys, handle.parentFd);
    this.#stage = own(sys, handle.stageFd);
    this.#records = records;
    this.files = Object.freeze(
      records.map((r) => Object.freeze({ target: r.target, path: `${root}/${r.parts.join('/')}`, size: r.size, sha256: r.sha256 })),
    );
  }

  get closed(): boolean {
    return this.#stage.closed;
  }

  /**
   * Proves every staged file still has its bytes, mode 0400 and inode, that nothing
   * else appeared in the stage, and that `root` (the path `files` are named by) still
   * leads to it, no link on the way; SEAL_CHANGED names the first difference.
   */
  verify(): void {
    sealed('stage verify', () => this.#verify());
  }

  #verify(): void {
    if (this.#stage.closed) throw new SealError('SEAL_CLOSED', 'stage is already closed');
    const sys = this.#sys;
    const files = new Map(this.#records.map((r) => [r.parts.join('/'), r]));
    const dirs = new Set<string>();
    for (const r of this.#records) for (let i = 1; i < r.parts.length; i++) dirs.add(r.parts.slice(0, i).join('/'));
    const buffer = Buffer.allocUnsafe(64 * 1024);
    const walk = (fd: number, rel: string): void => {
      for (const entry of sys.readdir(fd)) {
        const name = String(entry.name);
        const path = rel === '' ? name : `${rel}/${name}`;
        const st = sys.fstatat(fd, entry.name, AT_SYMLINK_NOFOLLOW);
        if (dirs.has(path) && typeof entry.name === 'string') {
          if (!isDir(st.mode)) throw changed(path);
          using child = own(sys, openChildDir(sys, fd, name));
          walk(child.fd, path);
          continue;
        }
        const want = typeof entry.name === 'string' ? files.get(path) : undefined;
        if (want === undefined || !isReg(st.mode) || (st.mode & 0o7777) !== 0o400 || st.ino !== want.ino || st.dev !== want.dev) {
          throw changed(path);
        }
        const got = hashAt(sys, buffer, fd, name);
        if (got.size !== want.size || got.sha256 !== want.sha256) throw changed(path);
        files.delete(path);
      }
    };
    walk(this.#stage.fd, '');
    const missing = files.keys().next();
    if (!missing.done) throw changed(missing.value);
    // In a parent others can write, the stage may have been moved and another directory put at its name.
    const gone = (): SealError => new SealError('SEAL_CHANGED', `stage is no longer at its path: ${escapePath(this.root)}`, { path: this.root });
    let fd: number;
    try {
      fd = openRealDir(sys, this.root, 'stage');
    } catch (err) {
      // Gone, or a link or a file on the way: not the stage. Anything else (EMFILE, EACCES) is what it is.
      if (err instanceof SealError && (err.code === 'SEAL_SYMLINK' || err.code === 'SEAL_BAD_PATH' || hasCode(err.cause, 'ENOENT', 'ENOTDIR'))) throw gone();
      throw err;
    }
    using at = own(sys, fd);
    if (!sameObject(sys.fstat(at.fd), sys.fstat(this.#stage.fd))) throw gone();
  }

  /** Removes the stage through fds, never following a link; idempotent, and works after a failed verify. */
  close(): void {
    sealed('stage close', () => this.#close());
  }

  #close(): void {
    if (this.#parent.closed) return;
    const sys = this.#sys;
    // Emptied through the fd it was made with, and its name removed only while it names that
    // directory: in a parent others can write, the name may have been swapped for another
    // directory (theirs, or one they could not empty), which is never what is removed.
    // A removal the kernel refused keeps the fds, so a later close() can finish it.
    if (!this.#stage.closed) {
      removeOwnDir(sys, this.#parent.fd, this.#name, this.#stage.fd);
      this.#stage[Symbol.dispose]();
    }
    this.#parent[Symbol.dispose]();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** Opens (making it 0700 if missing) a stage subdirectory; a symlink or file in its place is SEAL_SYMLINK. */
function stageDir(sys: Sys, at: number, part: string, target: string): number {
  mkdirIfMissing(sys, at, part);
  try {
    return sys.openat(at, part, DIR_FLAGS);
  } catch (err) {
    if (hasCode(err, 'ELOOP', 'ENOTDIR')) {
      throw new SealError('SEAL_SYMLINK', `stage parent must be a real directory: ${escapePath(target)}`, { path: target, cause: err });
    }
    throw err;
  }
}

function stageOne(sys: Sys, stageFd: number, file: Planned): StagedRecord {
  const { parts, target, bytes } = file;
  using dir = walkDown(sys, stageFd, parts.slice(0, -1), (at, part) => stageDir(sys, at, part, target));
  const name = parts[parts.length - 1]!;
  let st;
  {
    using out = createStaged(sys, dir.fd, name, target);
    try {
      writeAll(sys, out.fd, bytes);
      sys.fsync(out.fd);
    } catch (err) {
      // The kernel refusing the write (ENOSPC, EDQUOT, EIO): SEAL_IO naming the target (the stage is removed by the caller).
      throwIfRefused(err, `cannot write stage target: ${escapePath(target)}`, target);
      throw err;
    }
    st = sys.fstat(out.fd);
  }
  sys.fsync(dir.fd);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  return { target, parts, sha256, size: bytes.length, dev: st.dev, ino: st.ino };
}

function createStaged(sys: Sys, dirfd: number, name: string, target: string): Fd {
  try {
    return own(sys, sys.openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o400));
  } catch (err) {
    if (hasCode(err, 'EEXIST')) throw new SealError('SEAL_COLLISION', `stage target already exists: ${escapePath(target)}`, { path: target, cause: err });
    throw err;
  }
}

const STAGE_FILES = defineOp('stageFiles', {
  validate: (parent: string, files: readonly StageFile[], options: StageOptions = {}) => {
    const { prefix, planned } = planStage(parent, files, checkOptions('options', options, { op: 'stageFiles', keys: ['prefix', 'maxPathBytes', 'sys'] }));
    const parentPath = checkRootPath(parent, 'stage parent');
    return { sys: checkSys('options.sys', options.sys), args: [parentPath, prefix, planned] as [string, string, Planned[]] };
  },
  core: (sys, [parentPath, prefix, planned]): StageHandle => openStage(sys, parentPath, prefix, planned),
  // The stage's fds are the process's, whichever thread opened them.
  finish: (handle, call) => new Stage(call.sys, handle),
});

/**
 * Stages files into a new private directory `<prefix><32 hex>` (0700) directly under
 * parent (a real directory). Every target is checked before anything is created.
 */
export function stageFilesSync(parent: string, files: readonly StageFile[], options: StageOptions = {}): Stage {
  return STAGE_FILES.sync(parent, files, options);
}

/** stageFilesSync on the worker thread (on the calling thread when `sys` is another layer than the addon's). */
export function stageFiles(parent: string, files: readonly StageFile[], options: StageOptions = {}): Promise<Stage> {
  return STAGE_FILES.async(parent, files, options);
}

/** A stage's name: the prefix, then 32 lowercase hex digits. */
function isStageName(name: string | Buffer, prefix: string): name is string {
  return typeof name === 'string' && name.length === prefix.length + 32 && name.startsWith(prefix) && /^[0-9a-f]{32}$/.test(name.slice(prefix.length));
}

/**
 * Removes the stages under the parent (open at parentFd) that their process left when it
 * died before close(): a stage holds its directory's flock for as long as it is open, so
 * one whose flock is free is no one's. Only this user's directories with a stage's name
 * are looked at; whatever fails (another's stage, one this user cannot list, a mount point
 * inside) is left as it is, quietly. Returns how many went.
 */
function sweepStages(sys: Sys, parentFd: number, prefix: string): number {
  let swept = 0;
  let entries;
  try {
    // The parent is open as a place only (O_PATH): listed through a reading fd of its own.
    using listing = own(sys, sys.openat(parentFd, '.', DIR_FLAGS));
    entries = sys.readdir(listing.fd);
  } catch {
    // A parent with search permission only (0311) cannot be listed: nothing swept.
    return 0;
  }
  for (const entry of entries) {
    if (!isStageName(entry.name, prefix)) continue;
    try {
      using dir = own(sys, openChildDir(sys, parentFd, entry.name));
      if (sys.fstat(dir.fd).uid !== process.geteuid!()) continue;
      sys.flock(dir.fd, LOCK_EX | LOCK_NB);
      removeOwnDir(sys, parentFd, entry.name, dir.fd);
      swept++;
    } catch {
      // live (its flock held), not ours to remove, or not removable now: left
    }
  }
  return swept;
}

/** Creates the stage directory (its flock held while it is open) and its files, sweeping stages dead processes left; the caller owns the returned fds. */
function openStage(sys: Sys, parentPath: string, prefix: string, planned: Planned[]): StageHandle {
  using parentDir = own(sys, openRealPlace(sys, parentPath, 'stage parent'));
  sweepStages(sys, parentDir.fd, prefix);
  const name = prefix + randomBytes(16).toString('hex');
  sys.mkdirat(parentDir.fd, name, 0o700);
  try {
    using stageDir = own(sys, openChildDir(sys, parentDir.fd, name));
    // Held until the stage's fd closes (close(), or the process's end): a sweep by another call leaves a live stage.
    sys.flock(stageDir.fd, LOCK_EX | LOCK_NB);
    const records = planned.map((p) => stageOne(sys, stageDir.fd, p));
    sys.fsync(stageDir.fd);
    const root = `${parentPath === '/' ? '' : parentPath}/${name}`;
    return { root, name, parentFd: parentDir.release(), stageFd: stageDir.release(), records };
  } catch (err) {
    removeQuietly(sys, parentDir.fd, name);
    throw err;
  }
}
