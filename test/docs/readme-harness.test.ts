// readme-harness.test.ts: README's Harness example, run as written in a fresh node (its paths moved to a temporary directory, 'treeseal' to the built package): four arms materialized at once, an agent in bubblewrap in each, diff, the result captured, reset.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { tempDir, writeTree } from '../helpers.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** The first ts block after README's `## Harness` heading. */
function example(): string {
  const text = readFileSync(join(REPO, 'README.md'), 'utf8');
  const at = text.indexOf('\n## Harness\n');
  expect(at, 'README has no ## Harness section').toBeGreaterThanOrEqual(0);
  return /```ts\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
}

function bwrapAvailable(): boolean {
  const found = spawnSync('bwrap', ['--version']).status === 0;
  if (!found && process.env.CI === 'true') throw new Error('CI=true but bwrap is not installed (apt-get install -y bubblewrap; .ci/run does)');
  return found;
}

describe("README's Harness example", () => {
  it('runs as written: four arms at once, an agent in each, diff names what it wrote, the result is captured, reset puts each arm back', async () => {
    if (!bwrapAvailable()) return;
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'src/main.js': 'main', 'tests/t.js': 't', 'node_modules/dep/index.js': 'dep' });
    const code = example()
      .replaceAll("'/var/cache/bench'", JSON.stringify(join(work, 'store')))
      .replaceAll("'/abs/repo'", JSON.stringify(repo))
      .replaceAll("'/work/arm-", `'${work}/arm-`)
      .replace("from 'treeseal'", `from ${JSON.stringify(new URL('../../dist/index.js', import.meta.url).href)}`);
    mkdirSync(join(work, 'run'));
    writeFileSync(join(work, 'run/harness.mjs'), code);
    const r = spawnSync(process.execPath, [join(work, 'run/harness.mjs')], { encoding: 'utf8' });
    expect([r.status, r.stderr]).toEqual([0, '']);
    const arms = [1, 2, 3, 4].map((i) => join(work, `arm-${i}`));
    expect(r.stdout.split('\n').filter((l) => l !== '')).toEqual(arms.map((arm) => `${arm} [ 'src/answer.txt' ] []`));
    // Each arm is the snapshot again; the store holds it and the four results.
    const store = await SnapshotStore.open(join(work, 'store'));
    const digests = await store.listAsync();
    expect(digests).toHaveLength(5);
    const base = (await Promise.all(digests.map((d) => store.getAsync(d)))).find((s) => s.source === repo)!;
    for (const arm of arms) {
      expect(readdirSync(join(arm, 'src'))).toEqual(['main.js']);
      expect(await base.checkClone(arm)).toMatchObject({ ok: true });
    }
    const results = await Promise.all(digests.filter((d) => d !== base.digest).map((d) => store.getAsync(d)));
    expect(results.map((s) => s.source).sort()).toEqual(arms);
    for (const [i, s] of results.sort((a, b) => a.source.localeCompare(b.source)).entries()) {
      expect(s.entries.find((e) => e.path === 'src/answer.txt')).toMatchObject({ kind: 'file', size: 2 });
      expect(readFileSync(join(s.root, 'copy/src/answer.txt'), 'utf8')).toBe(`${i}\n`);
    }
    await store.close();
  });
});
