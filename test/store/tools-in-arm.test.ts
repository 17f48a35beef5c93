// tools-in-arm.test.ts: real trees used from an arm as their tools use them: a git checkout whose index matches its
// worktree (keepTimes, keepExecutable), and a Python tree whose __pycache__ stays valid (keepTimes).
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { chmodSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import * as S from '../../dist/sys/index.js';
import { checkNoFdLeaks, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

const has = (tool: string): boolean => spawnSync(tool, ['--version'], { stdio: 'ignore' }).status === 0;

/** Runs a command; its stdout, or the test fails with what it printed. */
function run(cmd: string, args: string[], options: SpawnSyncOptions): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', ...options });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${String(r.status)}: ${String(r.stderr)}`);
  return String(r.stdout);
}

/** Sets the mtime of path (its own, never a link's target) to the nanosecond. */
function setMtime(path: string, ns: bigint): void {
  S.sys.utimensat(S.AT_FDCWD, path, 0, S.UTIME_OMIT, Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n), S.AT_SYMLINK_NOFOLLOW);
}

/** In CI a missing tool fails these suites instead of skipping them. */
const IN_CI = process.env.CI === 'true';

const mtime = (path: string): bigint => lstatSync(path, { bigint: true }).mtimeNs;

/** An hour ago, with a nanosecond part: older than any index or cache written now, so nothing is racy. */
const HOUR_AGO = BigInt(Date.now() - 3_600_000) * 1_000_000n + 123_456_789n;

describe.skipIf(!has('git') && !IN_CI)('a git repository in an arm', () => {
  const env = { ...process.env, HOME: tempDir(), GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.com', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.com' };
  const git = (cwd: string, ...args: string[]): string => run('git', args, { cwd, env });

  it('captured with keepTimes and keepExecutable (.git a copy root too) is clean: git status --porcelain prints nothing, and its index\'s stat data matches the worktree', async () => {
    const base = tempDir();
    const repo = join(base, 'repo');
    writeTree(repo, {
      'README.md': '# demo\n',
      'src/main.py': 'print("main")\n',
      'scripts/run.sh': '#!/bin/sh\necho run\n',
      'nested/deep/data.txt': 'data\n',
    });
    chmodSync(join(repo, 'scripts/run.sh'), 0o755);
    for (const rel of ['README.md', 'src/main.py', 'scripts/run.sh', 'nested/deep/data.txt']) setMtime(join(repo, rel), HOUR_AGO);
    git(repo, 'init', '-q');
    git(repo, 'add', '-A');
    git(repo, 'commit', '-q', '-m', 'init');
    expect(git(repo, 'status', '--porcelain')).toBe('');
    const store = await SnapshotStore.open(join(base, 'store'));
    const copy = readdirSync(repo).sort();
    expect(copy).toEqual(['.git', 'README.md', 'nested', 'scripts', 'src']);
    const snap = await store.capture({ source: repo, copy, keepTimes: true, keepExecutable: true });
    const plain = await store.capture({ source: repo, copy, keepExecutable: true });
    const arm = join(base, 'arm');
    const control = join(base, 'control');
    await snap.materialize(arm, { createClone: true });
    await plain.materialize(control, { createClone: true });
    // git's stat check on mtime alone (whole seconds), size and mode, without refreshing the index: only the arm with times passes it.
    const statCheck = ['-c', 'core.trustctime=false', '-c', 'core.checkStat=minimal', 'diff-files', '--name-only'];
    expect(git(arm, ...statCheck)).toBe('');
    expect(git(control, ...statCheck).split('\n').filter((l) => l !== '')).toEqual(['README.md', 'nested/deep/data.txt', 'scripts/run.sh', 'src/main.py']);
    expect(git(arm, 'status', '--porcelain')).toBe('');
    expect(git(arm, 'log', '--format=%s')).toBe('init\n');
    expect(lstatSync(join(arm, 'scripts/run.sh')).mode & 0o777).toBe(0o700);
    expect(mtime(join(arm, 'src/main.py'))).toBe(HOUR_AGO);
    await store.close();
  });
});

describe.skipIf(!has('python3') && !IN_CI)('a Python tree in an arm', () => {
  const env = { ...process.env };
  delete env.PYTHONDONTWRITEBYTECODE;
  delete env.PYTHONPYCACHEPREFIX;
  const python = (cwd: string, code: string): string => run('python3', ['-c', code], { cwd, env });

  it('captured with keepTimes, its __pycache__/*.pyc stay valid: importing from the arm rewrites none; without times it rewrites them', async () => {
    const base = tempDir();
    const repo = join(base, 'repo');
    writeTree(repo, { 'lib/mod.py': 'import helper\nVALUE = helper.TWICE * 21\n', 'lib/helper.py': 'TWICE = 2\n' });
    for (const rel of ['lib/mod.py', 'lib/helper.py']) setMtime(join(repo, rel), HOUR_AGO);
    expect(python(join(repo, 'lib'), 'import mod; print(mod.VALUE)')).toBe('42\n');
    const tag = python(repo, 'import sys; print(sys.implementation.cache_tag)').trim();
    const pycs = [`lib/__pycache__/helper.${tag}.pyc`, `lib/__pycache__/mod.${tag}.pyc`];
    expect(readdirSync(join(repo, 'lib/__pycache__')).sort()).toEqual(pycs.map((p) => p.slice('lib/__pycache__/'.length)));
    // Older than any write now: a rewrite would show.
    for (const rel of pycs) setMtime(join(repo, rel), HOUR_AGO + 1n);
    const store = await SnapshotStore.open(join(base, 'store'));
    const snap = await store.capture({ source: repo, copy: ['lib'], keepTimes: true });
    const plain = await store.capture({ source: repo, copy: ['lib'] });
    const arm = join(base, 'arm');
    const control = join(base, 'control');
    await snap.materialize(arm, { createClone: true });
    await plain.materialize(control, { createClone: true });
    const before = pycs.map((rel) => [rel, mtime(join(arm, rel)), readFileSync(join(arm, rel)), lstatSync(join(arm, rel)).ino]);
    expect(before.map(([rel, t]) => [rel, t])).toEqual(pycs.map((rel) => [rel, HOUR_AGO + 1n]));
    expect(python(join(arm, 'lib'), 'import mod; print(mod.VALUE)')).toBe('42\n');
    expect(pycs.map((rel) => [rel, mtime(join(arm, rel)), readFileSync(join(arm, rel)), lstatSync(join(arm, rel)).ino])).toEqual(before);
    expect(await snap.checkClone(arm)).toMatchObject({ ok: true });
    // Without times the sources' mtimes are not those each .pyc records: Python compiles them again and writes new files.
    const old = pycs.map((rel) => [lstatSync(join(control, rel)).ino, readFileSync(join(control, rel))] as const);
    expect(python(join(control, 'lib'), 'import mod; print(mod.VALUE)')).toBe('42\n');
    pycs.forEach((rel, i) => {
      const [ino, bytes] = old[i]!;
      expect([rel, lstatSync(join(control, rel)).ino === ino, readFileSync(join(control, rel)).equals(bytes)]).toEqual([rel, false, false]);
    });
    await store.close();
  });
});
