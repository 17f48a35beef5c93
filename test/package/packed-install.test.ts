// packed-install.test.ts: the package as another project gets it: packed (prepack compiles dist/), installed from the tarball into a fresh project, used from ESM, from TypeScript (a plain tsconfig, the newest compiler here) and through its bin.
import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

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

/** The working tree as git sees it (tracked and new files, nothing ignored), with the repository's node_modules linked in (a worktree's node_modules may itself be a symlink git lists). */
function copyWorkingTree(dest: string): void {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO, encoding: 'utf8' });
  for (const rel of listed.split('\0')) {
    if (rel === '' || rel === 'node_modules' || !existsSync(join(REPO, rel))) continue;
    mkdirSync(dirname(join(dest, rel)), { recursive: true });
    copyFileSync(join(REPO, rel), join(dest, rel));
    chmodSync(join(dest, rel), statSync(join(REPO, rel)).mode & 0o777);
  }
  symlinkSync(join(REPO, 'node_modules'), join(dest, 'node_modules'));
}

/** `npm pack` in a copy (its prepack builds dist/ there, leaving this checkout's alone); returns the tarball and its file list. */
function pack(work: string): { tarball: string; files: string[] } {
  const copy = join(work, 'checkout');
  copyWorkingTree(copy);
  const out = join(work, 'packed');
  mkdirSync(out);
  const r = run('npm', ['pack', '--json', '--pack-destination', out], copy);
  const [info] = JSON.parse(r.stdout.slice(r.stdout.indexOf('['))) as [{ filename: string; files: { path: string; mode: number }[] }];
  expect(existsSync(join(copy, 'dist/index.js.map'))).toBe(false);
  return { tarball: join(out, info.filename), files: info.files.map((f) => `${f.path}${f.mode & 0o100 ? ' (x)' : ''}`).sort() };
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
    const { tarball, files } = pack(work);
    expect(files.filter((f) => !/^dist\/.*\.(js|d\.ts)( \(x\))?$/.test(f))).toEqual([
      'README.md',
      'binding.gyp',
      ...readFileSync(join(REPO, 'binding.gyp'), 'utf8').match(/native\/[a-z]+\.cc/g)!.concat(['native/args.h', 'native/call.h', 'native/ops.h', 'native/syserr.h', 'native/revision.json']).sort(),
      // README links into docs/: the pages ship with it.
      ...readdirSync(join(REPO, 'docs')).map((f) => `docs/${f}`),
      'package.json',
    ].sort());
    expect(files).toContain('dist/cli.js (x)');
    expect(files).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'dist/sys/index.js', 'dist/sys/index.d.ts', 'dist/worker.js', 'dist/files/pool-worker.js']));
    expect(files.filter((f) => f.includes('internal') || f.startsWith('src/') || f.startsWith('test/'))).toEqual([]);

    const project = join(work, 'consumer');
    mkdirSync(project);
    // Approved the way `npm install-scripts approve` records it, so its install script runs without a warning.
    const allowScripts = { [`file:${tarball}`]: true };
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module', allowScripts }));
    const install = run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], project);
    expect(install.stderr).not.toContain('install-scripts');
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
