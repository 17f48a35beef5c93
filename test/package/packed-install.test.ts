// packed-install.test.ts: the package as another project gets it: packed (prepack compiles dist/), installed from the tarball into a fresh project, used from ESM, from TypeScript (a plain tsconfig, the newest compiler here) and through its bin.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { givenConsumer, packAndInstall } from '../../scripts/consumer.mjs';
import { tempDir, writeTree } from '../helpers.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const TSC = join(REPO, 'node_modules/typescript/bin/tsc');
const TS_VERSION = (JSON.parse(readFileSync(join(REPO, 'node_modules/typescript/package.json'), 'utf8')) as { version: string }).version;
const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;

function run(cmd: string, args: string[], cwd: string): SpawnSyncReturns<string> {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false', npm_config_update_notifier: 'false' } });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${String(r.status)}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

const CONSUMER_TS = `import { SnapshotStore, SealError, type MaterializeReport, type Snapshot } from 'treeseal';
import { sys, O_RDONLY, type Stat } from 'treeseal/sys';

export async function arm(source: string, store: string, clone: string): Promise<[string, boolean, MaterializeReport]> {
  const s = await SnapshotStore.open(store);
  try {
    const snap: Snapshot = await s.capture({ source, copy: ['src'], keepExecutable: true });
    const report = await snap.materialize(clone, { reflink: 'auto', createClone: true });
    return [snap.digest, snap.captureReport?.reused === true, report];
  } catch (err) {
    if (err instanceof SealError && err.retryable) return arm(source, store, clone);
    throw err;
  } finally {
    await s.close();
  }
}

export const statOf = (fd: number): Stat => sys.fstat(fd);
export const flags: number = O_RDONLY;
`;

/** Only `treeseal/sys`, whose declarations name Buffer too: that entry must stand alone as well. */
const SYS_TS = `import { sys, type PathArg } from 'treeseal/sys';

export const target = (dirfd: number, path: PathArg): string | Buffer => sys.readlinkat(dirfd, path);
`;

/**
 * A harness's wrapper passes its own optional settings through, undefined where unset: with
 * `exactOptionalPropertyTypes` on, every option must say `| undefined` (the calls take it).
 */
const EXACT_TS = `import { SnapshotStore, readStable, writeFrozenFile, type Snapshot } from 'treeseal';

export async function arm(store: SnapshotStore, snap: Snapshot, clone: string, signal?: AbortSignal, reflink?: 'auto' | 'always' | 'never', clean?: boolean): Promise<void> {
  await store.capture({ source: clone, revision: undefined, exclude: undefined, statCache: undefined, signal, onProgress: undefined, limits: { maxEntries: undefined }, mounts: [{ source: 'a', target: 'b', ensureDirs: undefined }] });
  await store.prune({ olderThanMs: undefined, keepLast: 1, maxBytes: undefined });
  await snap.materialize(clone, { signal, reflink, createClone: undefined, fallbackBytes: undefined, onProgress: undefined });
  await snap.reset(clone, { signal, reflink, clean });
  await snap.diff(clone, { verify: undefined, all: clean });
  await snap.verify({ signal, parallelism: undefined });
  await store.gc({ clone: undefined });
  await store.push(snap.digest, 'registry.example/x', { signal, concurrency: undefined, tag: undefined, insecure: undefined, timeouts: { headersMs: undefined, idleMs: 1000 } });
  readStable('/x', { maxBytes: 1, sys: undefined });
  writeFrozenFile('/x', Buffer.from('y'), { executable: clean, fsync: undefined });
  await SnapshotStore.open('/s', { ephemeral: clean, concurrency: undefined });
}
`;

const WRONG_TS = `import { SnapshotStore } from 'treeseal';
export const wrong = (s: SnapshotStore) => s.capture({ source: 42 });
`;

/**
 * A consumer's tsconfig as a project starts one: `module: nodenext`, `strict`, nothing else. No
 * `types` and no `typeRoots`: TypeScript 6 and later include no @types package by itself, so this
 * compiles only when treeseal's declarations reference Node's types themselves and the install
 * brought @types/node. `skipLibCheck` stays off, so the shipped .d.ts are checked too.
 */
const PLAIN = { module: 'nodenext', strict: true, noEmit: true };

function typeCheck(dir: string, file: string, source: string, compilerOptions: object = PLAIN): SpawnSyncReturns<string> {
  writeFileSync(join(dir, file), source);
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: [file] }));
  return spawnSync(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: dir, encoding: 'utf8' });
}

describe('the packed package', () => {
  it('packs what a consumer needs, installs into a fresh project (building the addon), and works from ESM, TypeScript and its bin', () => {
    const work = tempDir();
    // .ci/run packs and installs once (TREESEAL_CONSUMER) for this test and the torture suite; alone, the test does it.
    const { tarball, files, project, installStderr, mapsInCopy } = givenConsumer() ?? packAndInstall(join(work, 'pack'));
    // prepack built dist/ without source maps, in the copy it packed.
    expect(mapsInCopy).toBe(false);
    expect(tarball).toMatch(/treeseal-[0-9.]+\.tgz$/);
    expect(files.filter((f: string) => !/^dist\/.*\.(js|d\.ts)( \(x\))?$/.test(f))).toEqual([
      'README.md',
      'binding.gyp',
      ...readFileSync(join(REPO, 'binding.gyp'), 'utf8').match(/native\/[a-z]+\.cc/g)!.concat(['native/args.h', 'native/call.h', 'native/ops.h', 'native/syserr.h', 'native/revision.json']).sort(),
      // README links into docs/: the pages ship with it.
      ...readdirSync(join(REPO, 'docs')).map((f) => `docs/${f}`),
      'package.json',
    ].sort());
    expect(files).toContain('dist/cli.js (x)');
    expect(files).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'dist/sys/index.js', 'dist/sys/index.d.ts', 'dist/worker.js', 'dist/files/pool-worker.js']));
    expect(files.filter((f: string) => f.includes('internal') || f.startsWith('src/') || f.startsWith('test/'))).toEqual([]);

    // Installed with its install script approved the way `npm install-scripts approve` records it: no warning.
    expect(installStderr).not.toContain('install-scripts');
    const installed = join(project, 'node_modules/treeseal');
    expect(existsSync(join(installed, 'build/Release/treeseal.node'))).toBe(true);
    const pkg = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(pkg.dependencies)).toEqual(['treeseal']);
    for (const dev of ['typescript', 'vitest', 'dependency-cruiser', 'node-gyp']) expect(existsSync(join(project, 'node_modules', dev, 'package.json'))).toBe(false);

    const esm = run(process.execPath, ['--input-type=module', '-e', `
      import { SnapshotStore, SEAL_CODES, manifestDigest } from 'treeseal';
      import { sys, O_RDONLY } from 'treeseal/sys';
      console.log(typeof SnapshotStore.open, SEAL_CODES.includes('SEAL_CHANGED'), manifestDigest([]).length, typeof sys.openat, typeof O_RDONLY);
    `], project);
    expect(esm.stdout).toBe('function true 64 function number\n');

    // The newest compiler this checkout has; one older than 6 would include @types/node unasked and prove nothing.
    expect(Number(TS_VERSION.split('.')[0])).toBeGreaterThanOrEqual(6);
    for (const [file, source] of [['consumer.ts', CONSUMER_TS], ['sys-only.ts', SYS_TS]] as const) {
      const ok = typeCheck(project, file, source);
      expect([file, ok.status, ok.stdout, ok.stderr]).toEqual([file, 0, '', '']);
    }
    // A consumer that names Node's types itself gets the same single copy.
    const named = typeCheck(project, 'consumer.ts', CONSUMER_TS, { ...PLAIN, types: ['node'] });
    expect([named.status, named.stdout, named.stderr]).toEqual([0, '', '']);
    // The shipped declarations name Node's types (Buffer, NodeJS.*): the install brought them, once, beside treeseal.
    expect(existsSync(join(project, 'node_modules/@types/node/package.json'))).toBe(true);
    expect(existsSync(join(installed, 'node_modules/@types/node'))).toBe(false);
    const exact = typeCheck(project, 'exact.ts', EXACT_TS, { ...PLAIN, exactOptionalPropertyTypes: true });
    expect([exact.status, exact.stdout, exact.stderr]).toEqual([0, '', '']);
    const wrong = typeCheck(project, 'wrong.ts', WRONG_TS);
    expect(wrong.status).not.toBe(0);
    expect(wrong.stdout).toMatch(/wrong\.ts\(2,\d+\): error TS2322: Type 'number' is not assignable to type 'string'/);

    expect(run('npx', ['--no-install', 'treeseal', '--version'], project).stdout).toBe(`treeseal ${VERSION}\n`);
    writeTree(join(work, 'repo'), { 'src/a.txt': 'alpha', 'src/deep/b.txt': 'beta' });
    const store = join(work, 'store');
    const captured = JSON.parse(run('npx', ['--no-install', 'treeseal', 'capture', join(work, 'repo'), '--store', store, '--json'], project).stdout) as { digest: string; reused: boolean };
    expect(captured.reused).toBe(false);
    const clone = join(work, 'clone');
    const m = run('npx', ['--no-install', 'treeseal', 'materialize', captured.digest.slice(0, 12), clone, '--store', store], project);
    expect(m.stdout).toMatch(/^materialized [0-9a-f]{12} into .*: 2 files, 2 directories /);
    expect(readFileSync(join(clone, 'src/deep/b.txt'), 'utf8')).toBe('beta');
  }, 900_000);
});
