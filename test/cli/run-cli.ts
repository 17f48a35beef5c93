// run-cli.ts: the treeseal bin run as a subprocess, and a small repository to run it on (shared by the CLI tests).
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'vitest';

import { tempDir, writeTree } from '../helpers.js';

/** Each CLI test starts many processes; on a loaded machine each takes seconds. */
export const CLI_TIMEOUT_MS = 240_000;

export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface Result {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs `treeseal args…` with TREESEAL_STORE=store; waits for it. */
export function cli(store: string, ...args: string[]): Result {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: store } });
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** The JSON a successful, quiet run printed. */
export function json(r: Result): any {
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  return JSON.parse(r.stdout);
}

export function setup(): { work: string; repo: string; store: string } {
  const work = tempDir();
  const repo = join(work, 'repo');
  writeTree(repo, { 'src/a.ts': 'alpha', 'src/lib/b.ts': 'beta', 'node_modules/p/index.js': 'p', README: 'readme' });
  return { work, repo, store: join(work, 'store') };
}
