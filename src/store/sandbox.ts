// sandbox.ts: sandboxArgs: the bubblewrap and docker arguments that run a command in a clone, its payloads mounted read-only; spawnSandboxed runs it.
import type { ChildProcess, StdioNull, StdioPipe } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { existsSync, fstatSync, lstatSync, readFileSync, readlinkSync } from 'node:fs';

import { checkBoolean, checkListLength, checkOptions, checkString, invalidArgType, invalidArgValue, type KnownKeys } from '../base/arg-errors.js';
import { readOnce } from '../base/op.js';
import { SealError } from '../base/errors.js';
import { openRealDir, own } from '../base/fd.js';
import { childProcess } from '../base/lazy-builtins.js';
import { checkAbsolutePath, checkWorkspace, escapePath, overlaps } from '../base/paths.js';
import { sealed } from '../base/refusal.js';
import { CLOSE_RANGE_CLOEXEC } from '../sys/constants.js';
import { sys } from '../sys/native.js';
import { sameObject } from '../sys/identity.js';
import { checkCloneOwner, checkPathAbove, checkRootCloneAbove } from './trust.js';
import type { MountPoint } from './mount-points.js';
import type { Lease } from './lease.js';
import { lockClone, type CloneLock } from './clone-lock.js';
import { sweepCloneStages } from './clone-stage.js';
import { storeOf } from './clone-ledger.js';
import { Snapshot } from './snapshot.js';
import { NO_BWRAP, findBubblewrap } from './sandbox-bwrap.js';
import { seccompFilter } from './sandbox-seccomp.js';
import { StdioRelay, type StdioSlot } from './sandbox-stdio.js';
import { watchCommandExit, type SandboxedChild } from './sandbox-status.js';

export interface SandboxOptions {
  /** Where the clone is bound inside the sandbox, and the working directory there (default /workspace). */
  workspace?: string | undefined;
  /** Share the host's network (default false: bubblewrap unshares it, docker gets `--network none`). */
  network?: boolean | undefined;
  /**
   * Host directories bound read-only at the same path in the bubblewrap sandbox (default
   * /usr and /etc; /bin, /sbin, /lib, /lib32, /lib64 and /libx32 follow as they are on the
   * host: the same symlink, or a read-only bind of a real directory).
   */
  system?: string[] | undefined;
}

export interface SandboxArgs {
  /** The snapshot's mount points, made inside the clone. */
  mounts: MountPoint[];
  /** Arguments for `bwrap` before `--` and the command. */
  bwrap: string[];
  /** Arguments for `docker run` before the image (the clone bound at the workspace, the payloads read-only). */
  docker: string[];
}

const ROOT_LINKS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

function checkSnapshot(snap: unknown): void {
  if (!(snap instanceof Snapshot)) throw invalidArgType('snap', 'Snapshot', snap);
}

interface Checked {
  workspace: string;
  network: boolean;
  system: string[];
}

/** The options sandboxArgs and checkSandboxArgs take. */
const SANDBOX_KEYS = ['workspace', 'network', 'system'];

function checkSandboxOptions(options: SandboxOptions, known: KnownKeys = { op: 'sandboxArgs', keys: SANDBOX_KEYS }): Checked {
  checkOptions('options', options, known);
  const workspace = checkWorkspace(options.workspace, 'options.workspace');
  const network = checkBoolean('options.network', options.network) ?? false;
  const system = options.system === undefined ? ['/usr', '/etc'] : options.system;
  if (!Array.isArray(system)) throw invalidArgType('options.system', 'Array', system);
  checkListLength('options.system', system);
  system.forEach((p, i) => checkAbsolutePath(p, `options.system[${i}]`, `system directory options.system[${i}]`));
  checkWorkspaceApart(workspace, system);
  return { workspace, network, system: [...system] };
}

/**
 * Refuses (SEAL_BAD_PATH) a workspace the clone bound there would hide something the
 * sandbox needs by, or lie inside: a system directory (/usr, /etc, or those given), a root
 * link (/bin, /lib, ...), /dev or /proc, any of them or above one (`/` included); or /tmp
 * itself (the clone would be the command's /tmp). Below /tmp is fine: bound over the tmpfs.
 */
function checkWorkspaceApart(workspace: string, system: readonly string[]): void {
  const parts = (p: string): string[] => p.split('/').filter((c) => c !== '');
  const ws = parts(workspace);
  for (const p of [...system, ...ROOT_LINKS, '/dev', '/proc']) {
    const bound = parts(p);
    if (overlaps(ws, bound)) {
      throw new SealError('SEAL_BAD_PATH', `workspace ${escapePath(workspace)} would ${ws.length <= bound.length ? 'hide' : 'lie inside'} ${escapePath(p)}, which the sandbox binds: give one of its own, as /workspace`);
    }
  }
  if (workspace === '/tmp') throw new SealError('SEAL_BAD_PATH', `workspace /tmp would hide the sandbox's own /tmp: give one of its own, as /workspace`);
}

/** The host's root links and directories as bubblewrap recreates them: a link as the same link, a directory bound read-only. */
function rootLinks(): string[] {
  const out: string[] = [];
  for (const path of ROOT_LINKS) {
    let st;
    try {
      st = lstatSync(path);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) out.push('--symlink', readlinkSync(path), path);
    else if (st.isDirectory()) out.push('--ro-bind', path, path);
  }
  return out;
}

/** One field of docker's comma-separated --mount value, quoted as CSV when it holds a comma or a quote. */
function csvField(field: string): string {
  return /[",\n]/.test(field) ? `"${field.replace(/"/g, '""')}"` : field;
}

function dockerMount(fields: string[]): string[] {
  return ['--mount', fields.map(csvField).join(',')];
}

/** The bubblewrap arguments: the clone bound by `cloneBind` (its path, or an fd bubblewrap inherits), then the payloads over their mount points. */
function bwrapArgs(cloneBind: string[], mounts: MountPoint[], o: Checked): string[] {
  const payloads = mounts.flatMap((m) => ['--ro-bind', m.source, m.target, ...m.tmpfs.flatMap((t) => ['--tmpfs', t])]);
  return [
    '--unshare-all',
    ...(o.network ? ['--share-net'] : []),
    '--die-with-parent',
    // A new session: the command cannot push input into the caller's terminal (TIOCSTI).
    '--new-session',
    // Run by root, bubblewrap keeps the caller's capabilities: the command could remount the
    // read-only binds (a payload, /usr, /etc) writable. Dropped, they stay read-only.
    '--cap-drop', 'ALL',
    ...o.system.flatMap((p) => ['--ro-bind', p, p]),
    ...rootLinks(),
    '--dev', '/dev',
    '--proc', '/proc',
    // The sandbox's /proc read-only, the sysctls with it: bubblewrap leaves /proc/sys (mode
    // 0555, which its look for what to cover does not call writable) as writable as the
    // caller's uid makes it, and a root caller's command is host uid 0 (capabilities dropped
    // or not, a sysctl checks the uid): it wrote kernel.core_pattern and ran a program of its
    // own on the host as root. (A bind of the host's /proc/sys would bring its submounts,
    // binfmt_misc among them, an automount on systemd hosts that a read-only bind can fail on.)
    '--remount-ro', '/proc',
    '--tmpfs', '/tmp',
    // The clone first, then the payloads over their mount points inside it.
    ...cloneBind,
    ...payloads,
    '--chdir', o.workspace,
  ];
}

function argsFor(clone: string, mounts: MountPoint[], o: Checked): SandboxArgs {
  const bwrap = bwrapArgs(['--bind', clone, o.workspace], mounts, o);
  const docker = [
    ...dockerMount(['type=bind', `src=${clone}`, `dst=${o.workspace}`]),
    ...mounts.flatMap((m) => [...dockerMount(['type=bind', `src=${m.source}`, `dst=${m.target}`, 'readonly']), ...m.tmpfs.flatMap((t) => dockerMount(['type=tmpfs', `dst=${t}`]))]),
    '-w', o.workspace,
    ...(o.network ? [] : ['--network', 'none']),
  ];
  return { mounts, bwrap, docker };
}

/**
 * Makes snap's mount points inside clone (as `mountPoints` does) and returns the arguments
 * that run a command with clone bound read-write at the workspace, each payload read-only
 * at its target with a writable tmpfs where it keeps one (`.vite-temp`), and for
 * bubblewrap: every namespace unshared (the network too unless `network`), the host's
 * /usr and /etc read-only, a private /dev, /proc and /tmp, a new session, no capability
 * (for root too).
 */
export function sandboxArgs(snap: Snapshot, clone: string, given: SandboxOptions = {}): SandboxArgs {
  const options = readOnce(given) as SandboxOptions;
  checkSnapshot(snap);
  checkString('clone', clone);
  const o = checkSandboxOptions(options);
  return argsFor(clone, snap.mountPoints(clone, { workspace: o.workspace }), o);
}

/**
 * Throws what sandboxArgs would throw for these options (a wrong type, a workspace not
 * absolute or one that would hide what the sandbox binds), touching nothing: for checking
 * a harness's configuration, or a command's flags, before a clone is made.
 */
export function checkSandboxArgs(given: SandboxOptions = {}): void {
  checkSandboxOptions(readOnce(given) as SandboxOptions, { op: 'checkSandboxArgs', keys: SANDBOX_KEYS });
}

/**
 * Throws what spawnSandboxed would throw for where `clone` lies (run by root: below no
 * directory that keeps other users out, SEAL_UNTRUSTED), touching nothing: for a harness, or
 * `treeseal run`, that makes the clone before it starts the command.
 */
export function checkSandboxClone(clone: string): void {
  checkString('clone', clone);
  checkRootCloneAbove(clone, escapePath(clone));
}

/** sandboxArgs with the mount points made on the worker thread. */
export async function sandboxArgsAsync(snap: Snapshot, clone: string, given: SandboxOptions = {}): Promise<SandboxArgs> {
  const options = readOnce(given) as SandboxOptions;
  checkSnapshot(snap);
  checkString('clone', clone);
  const o = checkSandboxOptions(options);
  return argsFor(clone, await snap.mountPointsAsync(clone, { workspace: o.workspace }), o);
}

export interface SpawnSandboxedOptions extends SandboxOptions {
  /** The command's stdin, stdout and stderr (default 'inherit'), as `child_process.spawn` takes them. */
  stdio?: 'inherit' | 'pipe' | 'ignore' | [StdioSpec, StdioSpec, StdioSpec] | undefined;
  /** The command's environment (default: this process's, less $TREESEAL_REGISTRY_USER and $TREESEAL_REGISTRY_PASSWORD); bubblewrap passes it through. */
  env?: NodeJS.ProcessEnv | undefined;
}

type StdioSpec = StdioPipe | StdioNull | 'inherit' | number;

export { findBubblewrap };

/** treeseal's own secrets, which a sandboxed command does not get unless its caller gives them in `env`. */
const OWN_SECRETS = ['TREESEAL_REGISTRY_USER', 'TREESEAL_REGISTRY_PASSWORD'];

function withoutOwnSecrets(from: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env = { ...from };
  for (const name of OWN_SECRETS) delete env[name];
  return env;
}

/** The fd the clone directory has in bubblewrap (after stdin, stdout and stderr). */
const CLONE_FD = 3;
/** The fd bubblewrap reads the seccomp filter from (a socket this process writes it into, as spawn makes a stdio pipe). */
const SECCOMP_FD = 4;
/** The fd bubblewrap writes its status documents to (--json-status-fd; never the command's: bubblewrap keeps it from it). */
const STATUS_FD = 5;

/** SEAL_LIMIT for arguments and an environment past what one exec takes (E2BIG, thrown by spawn or emitted); undefined for anything else. */
function tooBigToExec(err: unknown, argv: readonly string[]): SealError | undefined {
  if ((err as NodeJS.ErrnoException)?.code !== 'E2BIG') return undefined;
  return new SealError('SEAL_LIMIT', `the command's arguments and environment are more than one exec takes (E2BIG): ${escapePath(argv[0]!)}`, { cause: err });
}

/** AT_PAGESZ: the auxiliary vector's entry for the kernel's page size. */
const AT_PAGESZ = 6n;

let pageBytes: number | undefined | null = null;

/** The kernel's page size, from this process's auxiliary vector (64-bit pairs); undefined where it cannot be read. */
function pageSize(): number | undefined {
  if (pageBytes !== null) return pageBytes;
  pageBytes = undefined;
  try {
    const auxv = readFileSync('/proc/self/auxv');
    for (let at = 0; at + 16 <= auxv.length; at += 16) {
      if (auxv.readBigUInt64LE(at) === AT_PAGESZ) pageBytes = Number(auxv.readBigUInt64LE(at + 8));
    }
  } catch {
    // no /proc: the kernel's own E2BIG says it
  }
  return pageBytes;
}

/**
 * SEAL_LIMIT naming `what` when s, with its NUL, is longer than one exec string can be
 * (MAX_ARG_STRLEN, 32 pages: E2BIG whatever the stack limit), before anything is made.
 */
function checkExecString(what: string, s: string): void {
  const page = pageSize();
  if (page === undefined) return;
  const bytes = Buffer.byteLength(s) + 1;
  if (bytes > 32 * page) {
    throw new SealError('SEAL_LIMIT', `${what} is ${bytes - 1} bytes: one argument or environment string of an exec holds at most ${32 * page - 1} (pass it in a file or on stdin)`);
  }
}

function checkCommand(command: unknown): string[] {
  if (!Array.isArray(command)) throw invalidArgType('command', 'Array', command);
  checkListLength('command', command);
  if (command.length === 0) throw invalidArgValue('command', command, 'must name a program');
  command.forEach((arg, i) => {
    checkString(`command[${i}]`, arg);
    // As spawn says it, but naming the command's own argument (spawn would name its place in bwrap's arguments).
    if ((arg as string).includes('\0')) throw invalidArgValue(`command[${i}]`, arg, 'must be a string without null bytes');
    checkExecString(`command[${i}]`, arg as string);
  });
  return [...(command as string[])];
}

/** Each `NAME=value` of the environment the command gets, as checkExecString checks the command's arguments. */
function checkEnvironment(env: NodeJS.ProcessEnv): void {
  // Every key spawn passes on: inherited ones too (it reads them with for…in).
  for (const name in env) {
    const value = env[name];
    if (value !== undefined) checkExecString(`environment variable ${escapePath(name)}`, `${name}=${String(value)}`);
  }
}

/**
 * Runs `command` in bubblewrap with clone bound read-write at the workspace, as the
 * arguments of sandboxArgs describe, but bound through the directory it opened (no link
 * followed on the way) rather than its path, which bubblewrap would resolve again when it
 * starts: a clone whose parent another user can write (a sticky /tmp) cannot be swapped
 * for a link to another directory meanwhile. No fd of this process reaches the sandbox:
 * every fd it inherited without close-on-exec is marked close-on-exec first. Resolves
 * with the child once it has started (SEAL_UNAVAILABLE when there is no bwrap on PATH);
 * its `commandExit` tells the command's exit status from bubblewrap failing to run it.
 */
export async function spawnSandboxed(snap: Snapshot, clone: string, command: string[], given: SpawnSandboxedOptions = {}): Promise<SandboxedChild> {
  const options = readOnce(given) as SpawnSandboxedOptions;
  checkSnapshot(snap);
  checkString('clone', clone);
  const argv = checkCommand(readOnce(command));
  const o = checkSandboxOptions(options, { op: 'spawnSandboxed', keys: [...SANDBOX_KEYS, 'stdio', 'env'] });
  const stdio = options.stdio === undefined ? 'inherit' : options.stdio;
  const three = typeof stdio === 'string' ? [stdio, stdio, stdio] : stdio;
  const one = (s: unknown): boolean => s === 'inherit' || s === 'pipe' || s === 'ignore' || (typeof s === 'number' && Number.isInteger(s) && s >= 0);
  if (!Array.isArray(three) || three.length !== 3 || !three.every(one)) {
    throw invalidArgValue('options.stdio', stdio, "must be 'inherit', 'pipe', 'ignore', or an array of three of those or fds");
  }
  // An fd that is not open fails here, named, not as spawn's bare EBADF once the mount points are made.
  three.forEach((s, i) => {
    if (typeof s !== 'number') return;
    try {
      fstatSync(s);
    } catch {
      throw invalidArgValue(`options.stdio[${i}]`, s, 'must be an open file descriptor');
    }
  });
  if (options.env !== undefined && (options.env === null || typeof options.env !== 'object')) throw invalidArgType('options.env', 'object', options.env);
  // By default this process's, less treeseal's own registry credentials (with network, the command could send them anywhere).
  const env = options.env ?? withoutOwnSecrets(process.env);
  checkEnvironment(env);
  // Before anything is made (the mount points, a lease): a run that cannot start leaves the clone as it was.
  const bwrap = findBubblewrap(options.env, clone);
  const dir = own(sys, sealed('spawnSandboxed', () => openRealDir(sys, clone, 'clone')));
  try {
    checkCloneOwner(sys.fstat(dir.fd), escapePath(clone), clone);
    checkRootCloneAbove(clone, escapePath(clone));
    sealed('spawnSandboxed', () => checkPathAbove(sys, clone, dir.fd, 'clone'));
  } catch (err) {
    dir.close();
    throw err;
  }
  // Held until the command ends: an rm of the snapshot meanwhile is SEAL_BUSY, not its payloads emptied under the command;
  // and the clone's lock, so no materialize or reset of it (another run's, a retry's) rewrites it under the command.
  let lease: Lease | undefined;
  let cloneLock: CloneLock | undefined;
  try {
    cloneLock = sealed('spawnSandboxed', () => lockClone(sys, storeOf(snap.root), dir.fd, clone));
    // What a materialize or reset killed while it removed the last task's files left under its stage's name is not the command's to find.
    sealed('spawnSandboxed', () => sweepCloneStages(sys, dir.fd));
    lease = await snap.leaseAsync();
    const mounts = await snap.mountPointsAsync(clone, { workspace: o.workspace });
    // The directory the mount points were made in is the one open: the path still names it.
    const now = own(sys, sealed('spawnSandboxed', () => openRealDir(sys, clone, 'clone')));
    const same = sameObject(sys.fstat(dir.fd), sys.fstat(now.fd));
    now.close();
    if (!same) throw new SealError('SEAL_CHANGED', `clone was replaced while the sandbox was prepared: ${escapePath(clone)}`, { path: clone });
    sys.close_range(CLONE_FD, 0xffffffff, CLOSE_RANGE_CLOEXEC);
    // A regular file as stdout or stderr reaches the command through a pipe (see sandbox-stdio.ts).
    const relay = new StdioRelay(sys, three as StdioSlot[]);
    let child: ChildProcess;
    try {
      const fds = ['--seccomp', String(SECCOMP_FD), '--json-status-fd', String(STATUS_FD)];
      child = childProcess().spawn(bwrap, [...bwrapArgs(['--bind-fd', String(CLONE_FD), o.workspace], mounts, o), ...fds, '--', ...argv], {
        stdio: [...relay.spawn, dir.fd, 'pipe', 'pipe'],
        env,
      });
    } catch (err) {
      relay.abandon();
      throw tooBigToExec(err, argv) ?? err;
    }
    relay.start(child);
    // bubblewrap reads the filter to its end before it runs the command (and exits, the command not run, when it cannot);
    // a bwrap that never starts closes the socket (EPIPE, ignored). A spawn that failed at once (EMFILE) made no stdio:
    // its 'error' is awaited below.
    const filter = (child.stdio as (Writable | null)[] | undefined)?.[SECCOMP_FD];
    filter?.on('error', () => {});
    // Closed once written (the bytes stay readable in the socket): a bwrap child that outlives bwrap (killed as it set up,
    // before it tied its life to bwrap's) holds its end forever, and a stdio stream still open keeps 'close' from coming.
    filter?.end(seccompFilter(), () => filter.destroy());
    await new Promise<void>((started, failed) => {
      child.once('spawn', started);
      child.once('error', (err: NodeJS.ErrnoException) => {
        // Removed since it was found; or still there, but naming an interpreter that is not (a wrapper script).
        if (err.code === 'ENOENT' && existsSync(bwrap)) failed(new SealError('SEAL_UNAVAILABLE', `bubblewrap at ${escapePath(bwrap)} cannot be run: ENOENT (an interpreter its first line names is missing?)`, { cause: err }));
        else if (err.code === 'ENOENT') failed(new SealError('SEAL_UNAVAILABLE', NO_BWRAP, { cause: err }));
        else failed(tooBigToExec(err, argv) ?? err);
      });
    });
    const sandboxed = watchCommandExit(child, (child.stdio as (Readable | null)[])[STATUS_FD], bwrap);
    const held = lease;
    const locked = cloneLock;
    child.once('close', () => {
      // The clone lock never throws on release (a file it cannot remove is left, empty, for the next holder).
      locked.release();
      // The lease's flock ended with its fd; a file that cannot be removed now (its store moved) is gc's to sweep. Said, never thrown into the event loop.
      try {
        held.release();
      } catch (err) {
        process.emitWarning(`the lease on snapshot ${held.digest} ended, but its file was left: ${(err as Error).message}`, { code: 'TREESEAL_LEASE_LEFT' });
      }
    });
    lease = undefined;
    cloneLock = undefined;
    return sandboxed;
  } finally {
    lease?.release();
    cloneLock?.release();
    dir.close();
  }
}
