// helpers.ts: temp trees, FIFOs, fd counting and the reflink loop mounts the tests share.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { constants as osConstants, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

import { SealError } from '../dist/index.js';
import { stopIdleWorker } from '../dist/internal.js';
import { sys as nativeSys, type Sys } from '../dist/sys/index.js';

const made: string[] = [];

/** A fresh temp directory below base (default the OS temp dir), removed after the file's tests. */
export function tempDir(base: string = tmpdir(), prefix = 'treeseal-test-'): string {
  const dir = mkdtempSync(join(base, prefix));
  made.push(dir);
  return dir;
}

function forceRemove(dir: string): void {
  if (!existsSync(dir)) return;
  execFileSync('chmod', ['-R', 'u+rwx', dir]);
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

/** The reflink-capable mounts from scripts/mounts.sh; required when CI=true. */
export function reflinkMount(kind: 'xfs' | 'btrfs'): string | undefined {
  const path = process.env[kind === 'xfs' ? 'TREESEAL_TEST_XFS' : 'TREESEAL_TEST_BTRFS'];
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

/** Entries of a store's tmp/ and snapshots/ (both must be empty after a failed capture). */
export function storeLeftovers(storeRoot: string): string[] {
  return [...readdirSync(join(storeRoot, 'tmp')).map((n) => `tmp/${n}`), ...readdirSync(join(storeRoot, 'snapshots')).map((n) => `snapshots/${n}`)];
}

/** Runs fn, which must throw a SealError, and checks it left no fd open. */
export function expectSealError(fn: () => unknown): SealError {
  const fds = openFds().length;
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SealError);
    expect(openFds().length).toBe(fds);
    return err as SealError;
  }
  throw new Error('call unexpectedly succeeded');
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
