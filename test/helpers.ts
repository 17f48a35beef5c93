// helpers.ts: temp trees, FIFOs, fd counting, the reflink loop mounts and the one failure expectation the tests share.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { constants as osConstants, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';

import { STAT_CLOCK_AHEAD, stopIdleWorker } from '../dist/internal.js';
import { sys as nativeSys, type Stat, type Sys } from '../dist/sys/index.js';

const made: string[] = [];

/** A fresh temp directory below base (default the OS temp dir), removed after the file's tests. */
export function tempDir(base: string = tmpdir(), prefix = 'treeseal-test-'): string {
  const dir = mkdtempSync(join(base, prefix));
  made.push(dir);
  return dir;
}

function forceRemove(dir: string): void {
  if (!existsSync(dir)) return;
  if (spawnSync('chmod', ['-R', 'u+rwx', dir], { stdio: 'ignore' }).status !== 0) {
    // Read-only btrfs subvolumes (a store a test left behind): their flag cleared first (their owner may).
    const roots = execFileSync('find', [dir, '-type', 'd', '-inum', '256'], { encoding: 'utf8' }).split('\n').filter((p) => p !== '');
    for (const root of roots) spawnSync('btrfs', ['property', 'set', '-f', '-ts', root, 'ro', 'false'], { stdio: 'ignore' });
    execFileSync('chmod', ['-R', 'u+rwx', dir]);
  }
  rmSync(dir, { recursive: true, force: true });
}

afterAll(() => {
  for (const dir of made.splice(0)) forceRemove(dir);
});

/** Writes a tree: keys are relative paths, values file contents (string) or null for a directory. */
export function writeTree(root: string, tree: Record<string, string | Buffer | null>): void {
  for (const [rel, content] of Object.entries(tree)) {
    const path = join(root, rel);
    if (content === null) mkdirSync(path, { recursive: true });
    else {
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, content);
    }
  }
}

export function mkfifo(path: string): void {
  execFileSync('mkfifo', [path]);
}

export function openFds(): string[] {
  return readdirSync('/proc/self/fd');
}

/** Asserts that the file's tests leave no fd open (counted around the whole file). */
export function checkNoFdLeaks(): void {
  let before = 0;
  beforeAll(async () => {
    await stopIdleWorker();
    before = openFds().length;
  });
  afterAll(async () => {
    // The shared worker thread's own event loop fds are not leaks: stop it first.
    await stopIdleWorker();
    expect(openFds().length).toBe(before);
  });
}

/** The reflink-capable mounts from scripts/with-mounts.sh (and its ext4 one, which cannot reflink); required when CI=true. */
export function reflinkMount(kind: 'xfs' | 'btrfs' | 'ext4'): string | undefined {
  const path = process.env[`TREESEAL_TEST_${kind.toUpperCase()}`];
  if (path !== undefined && path !== '' && existsSync(path)) return path;
  if (process.env.CI === 'true') {
    throw new Error(`CI=true but TREESEAL_TEST_${kind.toUpperCase()} is not a mounted ${kind} path; run via .ci/run or npm run test:mounts`);
  }
  return undefined;
}

/** This filesystem (undefined base) and each reflink mount present: the places a test runs on. */
export function fsTargets(): [string, string | undefined][] {
  return [
    ['this filesystem', undefined],
    ...(['xfs', 'btrfs'] as const).flatMap((k): [string, string | undefined][] => {
      const m = reflinkMount(k);
      return m === undefined ? [] : [[k, m]];
    }),
  ];
}

type Wrappers = { [K in keyof Sys]?: (orig: Sys[K]) => Sys[K] };

/** The real syscall layer with some calls wrapped, to change the filesystem at an exact step. */
export function wrapSys(wrappers: Wrappers): Sys {
  const out: Record<string, unknown> = { ...nativeSys };
  for (const [name, wrap] of Object.entries(wrappers)) {
    out[name] = (wrap as (orig: unknown) => unknown)(nativeSys[name as keyof Sys]);
  }
  return out as unknown as Sys;
}

/**
 * The syscall layer (with `extra` wrappers) counting the descriptors its openat and openat2
 * opened and its close has not closed yet: `most()` is the largest number open at once
 * since the last `reset()`.
 */
export function fdCountingSys(extra: Wrappers = {}): { sys: Sys; most: () => number; reset: () => void } {
  const open = new Set<number>();
  let most = 0;
  const counted = (fd: number): number => {
    open.add(fd);
    most = Math.max(most, open.size);
    return fd;
  };
  const sys = wrapSys({
    ...extra,
    openat: (orig) => (...args: Parameters<Sys['openat']>) => counted(orig(...args)),
    openat2: (orig) => (...args: Parameters<Sys['openat2']>) => counted(orig(...args)),
    close: (orig) => (fd: number) => {
      open.delete(fd);
      orig(fd);
    },
  });
  return { sys, most: () => most, reset: () => void (most = 0) };
}

/** Entries of a store's tmp/ and snapshots/ (both must be empty after a failed capture). */
export function storeLeftovers(storeRoot: string): string[] {
  return [...readdirSync(join(storeRoot, 'tmp')).map((n) => `tmp/${n}`), ...readdirSync(join(storeRoot, 'snapshots')).map((n) => `snapshots/${n}`)];
}

export interface Expected {
  /** The error's `code`: a SEAL_* code, a Node argument code (ERR_*) or an errno name. */
  code: string;
  message?: string | RegExp;
  /** The error's `path` (checked when the key is given, undefined included). */
  path?: string | undefined;
  /** A directory whose whole tree must be the same after the failure: nothing left behind. */
  unchanged?: string;
  /** false where another thread of the test opens fds meanwhile (the test then counts them itself). */
  fds?: boolean;
}

/** Every path below dir with its type, sorted: what "nothing left behind" compares. */
export function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const e of readdirSync(join(dir, rel), { withFileTypes: true })) {
      const path = rel === '' ? e.name : `${rel}/${e.name}`;
      out.push(`${path}${e.isDirectory() ? '/' : e.isSymbolicLink() ? '@' : ''}`);
      if (e.isDirectory()) walk(path);
    }
  };
  walk('');
  return out.sort();
}

/** The class a code comes with: SealError for SEAL_*, Node's TypeError/RangeError for ERR_*, Error for errno names. */
function nameFor(code: string): string {
  if (code.startsWith('SEAL_')) return 'SealError';
  if (code === 'ERR_OUT_OF_RANGE') return 'RangeError';
  if (code.startsWith('ERR_')) return 'TypeError';
  return 'Error';
}

function check(err: unknown, expected: Expected, fds: number, tree: string[] | undefined): Error {
  const e = err as Error & { code?: unknown; path?: unknown };
  expect({ name: e?.name, code: e?.code }).toEqual({ name: nameFor(expected.code), code: expected.code });
  if (expected.message !== undefined) {
    if (typeof expected.message === 'string') expect(e.message).toBe(expected.message);
    else expect(e.message).toMatch(expected.message);
  }
  if ('path' in expected) expect(e.path).toBe(expected.path);
  if (expected.fds !== false) expect(openFds().length).toBe(fds);
  if (tree !== undefined) expect(listTree(expected.unchanged!)).toEqual(tree);
  return e;
}

/**
 * The one failure expectation: runs fn (sync, or async: then await the result), which
 * must fail with `expected.code` (and message and path when given), leave no fd open
 * and, given `unchanged`, leave that directory's tree exactly as it was.
 */
export function expectError(fn: () => Promise<unknown>, expected: Expected): Promise<Error>;
export function expectError(fn: () => unknown, expected: Expected): Error;
export function expectError(fn: () => unknown, expected: Expected): Error | Promise<Error> {
  const tree = expected.unchanged === undefined ? undefined : listTree(expected.unchanged);
  if (fn.constructor.name === 'AsyncFunction') return expectRejection(fn as () => Promise<unknown>, expected, tree);
  const fds = openFds().length;
  let result: unknown;
  try {
    result = fn();
  } catch (err) {
    return check(err, expected, fds, tree);
  }
  if (result instanceof Promise) throw new Error('pass an async function to expectError for an async call');
  throw new Error(`call unexpectedly succeeded (expected ${expected.code})`);
}

async function expectRejection(fn: () => Promise<unknown>, expected: Expected, tree: string[] | undefined): Promise<Error> {
  // The shared worker's own event-loop fds are not leaks: count without it.
  await stopIdleWorker();
  const fds = openFds().length;
  try {
    await fn();
  } catch (err) {
    await stopIdleWorker();
    // Threads that ended with the call (capture's helpers) release their fds a moment later.
    for (let i = 0; i < 100 && expected.fds !== false && openFds().length > fds; i++) await new Promise((r) => setTimeout(r, 20));
    return check(err, expected, fds, tree);
  }
  throw new Error(`call unexpectedly succeeded (expected ${expected.code})`);
}

/** A Node-shaped system error as the addon throws it (errno < 0, code, syscall). */
export function systemError(code: string, syscall: string): Error & { code: string; errno: number; syscall: string } {
  const errno = -(osConstants.errno as Record<string, number>)[code]!;
  return Object.assign(new Error(`${code}: injected, ${syscall}`), { code, errno, syscall });
}

/**
 * The real syscall layer with one call failing: the first call of `name` whose
 * arguments match `when` throws a system error with `code` (a close closes first, as
 * Linux releases the fd even when close fails). `injected` holds the error thrown.
 */
export function failOnce<K extends keyof Sys>(name: K, code: string, when: (...args: Parameters<Sys[K]>) => boolean = () => true): { sys: Sys; injected: () => Error | undefined } {
  let thrown: Error | undefined;
  const sys = wrapSys({
    [name]: (orig: Sys[K]) =>
      (...args: Parameters<Sys[K]>) => {
        if (thrown === undefined && when(...args)) {
          thrown = systemError(code, name);
          if (name === 'close') (orig as (...a: unknown[]) => unknown)(...args);
          throw thrown;
        }
        return (orig as (...a: unknown[]) => unknown)(...args);
      },
  } as Wrappers);
  return { sys, injected: () => thrown };
}

/**
 * The syscall layer a write in flight looks like: every stat of the file shows what the
 * first one showed (its timestamps were set when the write began), while the rest of the
 * write lands right after the first copy or read of its bytes.
 */
export function inFlight(path: string, rest: Buffer): Sys {
  const ino = statSync(path).ino;
  let first: Stat | undefined;
  let landed = false;
  const hide = (st: Stat): Stat => {
    if (st.ino !== BigInt(ino)) return st;
    first ??= st;
    return first;
  };
  const land = (): void => {
    if (landed) return;
    landed = true;
    writeFileSync(path, rest);
  };
  return wrapSys({
    fstatat: (orig) => (dirfd, name, flags) => hide(orig(dirfd, name, flags)),
    fstat: (orig) => (fd) => hide(orig(fd)),
    copy_file_range: (orig) => (...args) => {
      const n = orig(...args);
      land();
      return n;
    },
    pread: (orig) => (fd, buffer, offset, length, position) => {
      const n = orig(fd, buffer, offset, length, position);
      if (n > 0) land();
      return n;
    },
  });
}

/** A syscall layer that counts its pread calls. */
export function countingPreads(): { sys: Sys; preads: () => number } {
  let n = 0;
  const sys = wrapSys({
    pread: (orig) => (...args) => {
      n++;
      return orig(...args);
    },
  });
  return { sys, preads: () => n };
}

/** The uids the tests run unprivileged children as: nobody, and a second user for "another user" (no passwd entry needed). */
export const NOBODY = 65534;
export const SOMEONE = 65533;
export const isRoot = process.geteuid?.() === 0;
const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
/** The built library, as a child script imports it. */
export const DIST_INDEX = new URL('../dist/index.js', import.meta.url).href;

/** How far ahead the stat cache's recording clock runs in tests: past the racy rule's 2 s, so what it records now is trusted at once. */
export const CLOCK_AHEAD_NS = 3_000_000_000n;
/** Store options (the internal STAT_CLOCK_AHEAD) that stand in for sleeping 2.1 s before a capture whose records the next one must trust. */
export const SETTLED = { [STAT_CLOCK_AHEAD]: CLOCK_AHEAD_NS } as const;

/** This is the unprivileged pass (scripts/as-unprivileged.sh sets TREESEAL_TEST_UNPRIVILEGED=1). */
export const unprivilegedPass = process.env.TREESEAL_TEST_UNPRIVILEGED === '1';

/**
 * A test whose code path is the same for any user (the protocol, argument checks, a deep
 * walk's bounds, helper threads): the root pass runs it, the unprivileged pass skips it.
 */
export const rootPassOnly = it.skipIf(unprivilegedPass);

let dropChecked: boolean | undefined;

/**
 * Whether a test that needs root (loop mounts, other uids, chown) runs: true as root.
 * Not root, it skips; but under CI=true that is an error unless this is the deliberate
 * unprivileged pass (scripts/as-unprivileged.sh sets TREESEAL_TEST_UNPRIVILEGED=1).
 */
export function rootOrSkip(what: string): boolean {
  if (isRoot) return true;
  if (process.env.CI === 'true' && process.env.TREESEAL_TEST_UNPRIVILEGED !== '1') {
    throw new Error(`CI=true but not root: ${what} needs root (only scripts/as-unprivileged.sh runs the tests unprivileged)`);
  }
  return false;
}

/**
 * Whether children can run as another uid: this process is root, setpriv exists and
 * that uid can read the checkout. Not root: see rootOrSkip (the unprivileged CI pass
 * runs as a user already). Root without setpriv or with a checkout nobody can read:
 * false, but under CI=true an error (the root pass must run these tests).
 */
export function canDropPrivileges(): boolean {
  if (!rootOrSkip('running children as another uid')) return false;
  if (dropChecked !== undefined) return dropChecked;
  const probe = spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, '-e', `import(${JSON.stringify(DIST_INDEX)})`], { encoding: 'utf8' });
  dropChecked = probe.status === 0;
  if (!dropChecked && process.env.CI === 'true') {
    throw new Error(`CI=true but a child cannot run as uid ${NOBODY} with setpriv and import ${DIST_INDEX} (${probe.error?.message ?? probe.stderr.trim()}); install util-linux and make the checkout ${REPO_ROOT} readable`);
  }
  return dropChecked;
}

export interface RunAs {
  uid: number;
  gid: number;
  /** Supplementary groups (none by default). */
  groups?: number[];
}

export interface ChildResult {
  status: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node <args>` as `as` (setpriv --reuid --regid, with only `groups`), or as this
 * process when `as` is undefined (a test already running unprivileged). Sync: the child
 * does the filesystem work, the test checks what it printed and what it left.
 */
export function runNodeAs(as: RunAs | undefined, args: string[], env: NodeJS.ProcessEnv = {}): ChildResult {
  const node = [process.execPath, ...args];
  const [cmd, ...rest] =
    as === undefined
      ? node
      : ['setpriv', `--reuid=${as.uid}`, `--regid=${as.gid}`, as.groups === undefined || as.groups.length === 0 ? '--clear-groups' : `--groups=${as.groups.join(',')}`, ...node];
  const r = spawnSync(cmd!, rest, { encoding: 'utf8', env: { ...process.env, ...env } });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** Runs an ES module script (`node --input-type=module -e`) as `as`; its argv follow it. */
export function runScriptAs(as: RunAs | undefined, script: string, args: string[] = []): ChildResult {
  return runNodeAs(as, ['--input-type=module', '-e', script, '--', ...args]);
}

/** The JSON the child printed last on stdout, once it exited 0 (its stderr shown otherwise). */
export function childJson(r: ChildResult): any {
  expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

/** chown -R (no link followed). */
export function chownTree(path: string, uid: number, gid: number): void {
  execFileSync('chown', ['-R', '-h', `${uid}:${gid}`, path]);
}
