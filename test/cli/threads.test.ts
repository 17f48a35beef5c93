// threads.test.ts: the command runs on its own thread: no worker thread for any command but push, pull and run, and no helper thread for a small tree.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { CLI, CLI_TIMEOUT_MS, setup } from './run-cli.js';

/** Preloaded: counts every thread the process starts (node:worker_threads' Worker, as the bundle imports it) and says which at exit. */
const COUNT_WORKERS = `data:text/javascript,${encodeURIComponent(`
import wt from 'node:worker_threads';
import { syncBuiltinESMExports } from 'node:module';
const started = [];
const Base = wt.Worker;
wt.Worker = class extends Base {
  constructor(url, options) {
    super(url, options);
    started.push(String(url).replace(/^.*\\/dist\\//, ''));
  }
};
syncBuiltinESMExports();
process.on('exit', () => process.stderr.write('threads started: ' + JSON.stringify(started) + '\\n'));
`)}`;

function threadsOf(store: string, ...args: string[]): { status: number; stdout: string; threads: string[] } {
  const r = spawnSync(process.execPath, ['--import', COUNT_WORKERS, CLI, ...args], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: store } });
  const m = /threads started: (.*)\n$/.exec(r.stderr);
  expect(m, r.stderr).not.toBeNull();
  return { status: r.status ?? -1, stdout: r.stdout, threads: JSON.parse(m![1]!) as string[] };
}

describe('the command', { timeout: CLI_TIMEOUT_MS }, () => {
  it('starts no worker thread to capture, materialize, list, verify, diff, reset or remove a small tree', () => {
    const { work, repo, store } = setup();
    const captured = threadsOf(store, 'capture', repo, '--json');
    expect([captured.status, captured.threads]).toEqual([0, []]);
    const digest = (JSON.parse(captured.stdout) as { digest: string }).digest;
    const clone = join(work, 'clone');
    for (const args of [['materialize', digest, clone], ['ls'], ['verify', digest], ['diff', digest, clone], ['reset', digest, clone], ['rm', '--wait', digest]]) {
      expect(threadsOf(store, ...args), args.join(' ')).toMatchObject({ status: 0, threads: [] });
    }
  });
});
