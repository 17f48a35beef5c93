// stage-left.test.ts: `treeseal materialize` as a user whose old tree hides a mount it could not see before the swap: success, and a warning naming where the old tree stays.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { NOBODY, canDropPrivileges, chownTree, runNodeAs, tempDir, writeTree } from '../helpers.js';
import { CLI, CLI_TIMEOUT_MS } from './run-cli.js';

const AS_NOBODY = { uid: NOBODY, gid: NOBODY };

/** umount, quietly where nothing is mounted any more. */
function umountQuietly(dir: string): void {
  try {
    execFileSync('umount', [dir], { stdio: 'ignore' });
  } catch {
    // not mounted
  }
}

describe('a mount hidden in the tree a materialize replaces', () => {
  it.runIf(canDropPrivileges())('under a directory the user may not search: materialize succeeds, leaves the mount alone and says which stage holds the old tree (--json: stageLeft); once unmounted, the next materialize removes it', { timeout: CLI_TIMEOUT_MS }, () => {
    const work = tempDir();
    chmodSync(work, 0o755);
    writeTree(join(work, 'repo'), { 'one/a': 'new1' });
    const victim = join(work, 'victim');
    writeTree(victim, { v: 'precious' });
    // The user's own directory: its store and its clones.
    const home = join(work, 'home');
    mkdirSync(home);
    const store = join(home, 'store');
    const treeseal = (...args: string[]) => runNodeAs(AS_NOBODY, [CLI, '--store', store, ...args]);
    chownTree(join(work, 'repo'), NOBODY, NOBODY);
    chownTree(home, NOBODY, NOBODY);
    const captured = treeseal('capture', join(work, 'repo'), '--copy', 'one', '--json');
    expect([captured.status, captured.stderr]).toEqual([0, '']);
    const { digest } = JSON.parse(captured.stdout) as { digest: string };
    for (const [name, json] of [['text', false], ['json', true]] as const) {
      const clone = join(home, `clone-${name}`);
      writeTree(clone, { 'one/a': 'old1', 'one/hidden/bound/': null });
      chownTree(clone, NOBODY, NOBODY);
      let bound = join(clone, 'one/hidden/bound');
      execFileSync('mount', ['--bind', victim, bound]);
      try {
        // The agent's last word: a directory of its own it made unsearchable, a harness's mount inside.
        chmodSync(join(clone, 'one/hidden'), 0);
        const r = treeseal('materialize', digest, clone, ...(json ? ['--json'] : []));
        expect(r.status).toBe(0);
        const stage = readdirSync(clone).find((n) => n.startsWith('.treeseal-materialize-'));
        expect(stage).toMatch(/^\.treeseal-materialize-[0-9a-f]{24}$/);
        if (json) {
          expect(r.stderr).toBe('');
          expect(JSON.parse(r.stdout)).toMatchObject({ files: 1, reset: false, stageLeft: { path: stage, reason: expect.stringMatching(/^SEAL_BUSY: .*is a mount point/) } });
        } else {
          expect(r.stderr.split('\n')[0]).toBe(
            `treeseal: warning: what the clone held before could not be removed: it stays in ${join(clone, stage!)} until it can be (then the next materialize or reset of the clone, or treeseal gc --clone, removes it): SEAL_BUSY: bound is a mount point: a removal never crosses into another filesystem (unmount it first)`,
          );
          expect(r.stdout).toMatch(/^materialized [0-9a-f]{12} into /);
        }
        expect(readFileSync(join(clone, 'one/a'), 'utf8')).toBe('new1');
        expect(readdirSync(victim)).toEqual(['v']);
        bound = execFileSync('findmnt', ['-rn', '-o', 'TARGET']).toString().split('\n').find((t) => t.startsWith(join(clone, stage!)))!;
        expect(bound).toBeDefined();
        execFileSync('umount', [bound]);
        const again = treeseal('materialize', digest, clone);
        expect([again.status, again.stderr.includes('could not be removed')]).toEqual([0, false]);
        expect(readdirSync(clone).sort()).toEqual(['one']);
        expect(readFileSync(join(victim, 'v'), 'utf8')).toBe('precious');
      } finally {
        umountQuietly(bound);
      }
    }
  });
});
