// layer.js: the fault layer: records every syscall by call site, and fails one chosen call with a chosen errno.
import { readFileSync } from 'node:fs';
import { getSystemErrorMap } from 'node:util';
import { constants as osConstants } from 'node:os';

import { sys as nativeSys, O_CREAT, LOCK_NB } from '../../dist/sys/index.js';

/**
 * The errno codes each syscall can really return on a local filesystem. EINTR never
 * reaches JavaScript: every wrapper that can see it retries it in native/ (RetryEintr,
 * native/ops.h), and close treats it as done (the fd is gone either way on Linux).
 */
const CREATE = ['ENOSPC', 'EIO', 'EMFILE', 'EACCES'];
const OPEN = ['EIO', 'EMFILE', 'EACCES'];
const ERRNOS = {
  openat: (args) => ((args[2] & O_CREAT) !== 0 ? CREATE : OPEN),
  openat2: (args) => ((args[2] & O_CREAT) !== 0 ? CREATE : OPEN),
  close: () => ['EIO'],
  fstat: () => ['EIO'],
  fstatat: () => ['EIO', 'EACCES'],
  readdir: () => ['EIO'],
  mkdirat: () => ['ENOSPC', 'EIO', 'EACCES'],
  unlinkat: () => ['EIO', 'EACCES'],
  renameat2: () => ['ENOSPC', 'EIO', 'EACCES'],
  linkat: () => ['EMLINK', 'ENOSPC', 'EIO', 'EPERM'],
  symlinkat: () => ['ENOSPC', 'EIO', 'EACCES'],
  readlinkat: () => ['EIO'],
  pread: () => ['EIO'],
  pwrite: () => ['ENOSPC', 'EIO'],
  fsync: () => ['EIO', 'ENOSPC'],
  syncfs: () => ['EIO'],
  fchmod: () => ['EIO', 'EPERM'],
  fchmodat: () => ['EIO', 'EPERM'],
  fchown: () => ['EIO', 'EPERM'],
  fchownat: () => ['EIO', 'EPERM'],
  futimens: () => ['EIO', 'EPERM'],
  utimensat: () => ['EIO', 'EPERM'],
  flock: (args) => ((args[1] & LOCK_NB) !== 0 ? ['ENOLCK'] : ['ENOLCK', 'EIO']),
  ficlone: () => ['EIO', 'ENOSPC'],
  copy_file_range: () => ['EIO', 'ENOSPC'],
  statx: () => ['EIO', 'EACCES'],
  ftruncate: () => ['EIO', 'ENOSPC'],
  fdatasync: () => ['EIO', 'ENOSPC'],
  sync_file_range: () => ['EIO', 'ENOSPC'],
  fstatfs: () => ['EIO'],
  futimens: () => ['EIO', 'EPERM'],
  utimensat: () => ['EIO', 'EPERM'],
  btrfs_subvol_create: () => ['ENOSPC', 'EDQUOT', 'EIO'],
  btrfs_snap_create: () => ['ENOSPC', 'EDQUOT', 'EPERM', 'EIO'],
  btrfs_subvol_getflags: () => ['EIO'],
  btrfs_subvol_setflags: () => ['EIO', 'EPERM'],
  btrfs_snap_destroy: () => ['EIO', 'EPERM'],
};
/** A call this table does not know yet can still fail with an I/O error. */
const errnosOf = (name, args) => (ERRNOS[name] ?? (() => ['EIO']))(args);

/** A Node-shaped system error, exactly as the addon throws it. */
export function systemError(code, syscall, path) {
  const errno = -osConstants.errno[code];
  const text = getSystemErrorMap().get(errno)?.[1] ?? 'unknown error';
  const shown = text.charAt(0).toLowerCase() + text.slice(1);
  const err = new Error(`${code}: ${shown}, ${syscall}${typeof path === 'string' ? ` '${path}'` : ''}`);
  Object.assign(err, { errno, code, syscall });
  if (typeof path === 'string') err.path = path;
  return err;
}

const DIST_FRAME = /\bat (?:(\S+) \()?(?:file:\/\/)?(\S*\/dist\/(\S+?)):(\d+):\d+\)?$/;

/** Per bundled file: the line of each `// tsc-out/MODULE` comment esbuild puts before a module's code. */
const modulesOf = new Map();

/**
 * A line of the bundled dist/ as the module it belongs to and the line from that
 * module's start (`base/fd.js:12`), so sites read as treeseal's modules, not chunks.
 */
function moduleLine(file, rel, line) {
  let marks = modulesOf.get(file);
  if (marks === undefined) {
    marks = [];
    readFileSync(file, 'utf8').split('\n').forEach((text, i) => {
      const m = /^\/\/ tsc-out\/(\S+)$/.exec(text);
      if (m !== null) marks.push([i + 1, m[1]]);
    });
    modulesOf.set(file, marks);
  }
  let at = [0, rel];
  for (const mark of marks) if (mark[0] <= line) at = mark;
  return `${at[1]}:${line - at[0]}`;
}

/**
 * The call site of a syscall: its name, the two innermost frames of treeseal's code that
 * led to it, and the innermost frame above the shared helpers (base/, sys/), so one
 * helper used by many callers counts once per caller.
 */
function callSite(name) {
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = 40;
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = saved;
  const frames = [];
  for (const line of stack.split('\n')) {
    const m = DIST_FRAME.exec(line.trim());
    if (m === null) continue;
    const where = moduleLine(m[2], m[3], Number(m[4]));
    const frame = `${m[1] ?? '<anon>'} ${where}`;
    if (frames.length < 2) frames.push(frame);
    else if (!/^(base|sys)\//.test(where)) {
      frames.push(frame);
      break;
    }
    if (frames.length === 2 && !/^(base|sys)\//.test(where)) break;
  }
  return `${name} @ ${frames.join(' < ')}`;
}

/** The path argument of a call, for the error message, as the addon would report it. */
function pathArg(name, args) {
  if (['openat', 'openat2', 'fstatat', 'mkdirat', 'unlinkat', 'readlinkat', 'fchmodat', 'fchownat', 'utimensat', 'renameat2', 'linkat'].includes(name)) {
    return typeof args[1] === 'string' ? args[1] : undefined;
  }
  if (name === 'symlinkat') return typeof args[2] === 'string' ? args[2] : undefined;
  return undefined;
}

/**
 * A syscall layer over the real one. While armed it names every call by call site and
 * counts it; with a target { site, nth, code } the nth call at that site throws a
 * system error instead (a close closes first: Linux releases the fd even when close fails).
 */
export class FaultLayer {
  armed = false;
  /** site -> { syscall, count, errnos } of the calls made while armed. */
  sites = new Map();
  target = undefined;
  fired = undefined;

  constructor(target) {
    this.target = target;
    const sys = {};
    for (const name of Object.keys(nativeSys)) sys[name] = (...args) => this.#call(name, args);
    this.sys = sys;
  }

  #call(name, args) {
    const real = nativeSys[name];
    if (!this.armed) return real(...args);
    const site = callSite(name);
    let entry = this.sites.get(site);
    if (entry === undefined) this.sites.set(site, (entry = { syscall: name, count: 0, errnos: errnosOf(name, args) }));
    entry.count++;
    const t = this.target;
    if (t !== undefined && this.fired === undefined && t.site === site && t.nth === entry.count) {
      const err = systemError(t.code, name === 'readdir' ? 'getdents64' : name, pathArg(name, args));
      this.fired = err;
      if (name === 'close') real(...args);
      throw err;
    }
    return real(...args);
  }
}
