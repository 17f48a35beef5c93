// readme-example.test.ts: README's command-line example, run line by line (in a temporary directory instead of /tmp/treeseal-demo), prints what README shows; README's digest is the one its own path gives.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { mountDigests, snapshotDigest } from '../../dist/index.js';
import { tempDir } from '../helpers.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const DEMO = '/tmp/treeseal-demo';

interface Step {
  command: string;
  output: string[];
}

/** The first console block of README's command-line section, as commands and what each prints. */
function readmeSteps(): Step[] {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## The main job, from the command line'));
  const block = /```console\n([\s\S]*?)```/.exec(section)![1]!;
  const steps: Step[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), output: [] });
    else if (line !== '') steps[steps.length - 1]!.output.push(line);
  }
  return steps;
}

/** Times vary, and whether the clone is reflinked depends on the filesystem. */
function normalize(line: string): string {
  return line.replace(/\(\d+ reflinked, \d+ copied, [^)]* buffered\) in [\d.]+ m?s$/, '(…) in …');
}

describe("README's command-line example", () => {
  it('prints what README shows, with README digests for README paths', () => {
    const steps = readmeSteps();
    expect(steps.map((s) => s.command.split(' ')[0])).toEqual(['python3', 'alias', 'export', 'treeseal', 'treeseal', 'treeseal', 'treeseal']);
    const demo = tempDir();
    const readmeDigest = /digest {4}([0-9a-f]{64})/.exec(steps.map((s) => s.output.join('\n')).join('\n'))![1]!;
    let digest = readmeDigest;
    // README's paths moved to the temporary directory, and README's digest (or a prefix) to the one that path gives.
    const here = (text: string): string =>
      text.replaceAll(DEMO, demo).replace(/[0-9a-f]{8,64}/g, (hex) => (readmeDigest.startsWith(hex) ? digest.slice(0, hex.length) : hex));
    const state: string[] = ['shopt -s expand_aliases'];
    for (const step of steps) {
      const command = here(step.command);
      if (/^(alias|export) /.test(command)) {
        state.push(command);
        continue;
      }
      const r = spawnSync('bash', ['-c', [...state, command].join('\n')], { cwd: REPO, encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: '' } });
      expect([command, r.status, r.stderr]).toEqual([command, 0, '']);
      const printed = r.stdout.split('\n').filter((l) => l !== '');
      const found = /digest {4}([0-9a-f]{64})/.exec(r.stdout);
      if (found !== null) digest = found[1]!;
      expect(printed.map(normalize)).toEqual(step.output.map(here).map(normalize));
    }
    const manifest = /manifest {2}([0-9a-f]{64})/.exec(steps.flatMap((s) => s.output).join('\n'))![1]!;
    const mounts = mountDigests([]);
    const digestAt = (source: string): string =>
      snapshotDigest({ source, revision: 'v1', declarations: ['tree'], manifestDigest: manifest, mountContentDigest: mounts.contentDigest, mountManifestDigest: mounts.manifestDigest });
    expect(digestAt(`${DEMO}/src`)).toBe(readmeDigest);
    expect(digestAt(`${demo}/src`)).toBe(digest);
    expect(digest).not.toBe(readmeDigest);
  }, 600_000);
});
