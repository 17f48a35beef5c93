// readme-example.test.ts: README's quick-start commands and docs/cli.md's walkthrough, run line by line (in a temporary directory instead of /tmp/treeseal-demo), print what the text shows; the digests shown are the ones the text's own paths give.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync } from 'node:fs';
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

/** The first console block after `heading` in a document of the repository, as commands and what each prints. */
function documentSteps(file: string, heading: string): Step[] {
  const text = readFileSync(join(REPO, file), 'utf8');
  const at = text.indexOf(`\n${heading}\n`);
  expect(at, `${file} has no heading ${heading}`).toBeGreaterThanOrEqual(0);
  const block = /```console\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
  const steps: Step[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith('$ ')) steps.push({ command: line.slice(2), output: [] });
    // A `treeseal: warning:` line is what stderr shows (on a filesystem without reflink): the steps check it apart.
    else if (line !== '' && !line.startsWith('treeseal: warning: ')) steps[steps.length - 1]!.output.push(line);
  }
  return steps;
}

/** Times vary, and whether the clone is reflinked depends on the filesystem. */
function normalize(line: string): string {
  return line.replace(/\(\d+ reflinked, \d+ copied, [^)]* buffered\) in [\d.]+ m?s$/, '(…) in …');
}

/**
 * Runs the steps with bash in cwd (each `alias` and `export` line kept for the steps after
 * it) and checks that each prints what the document shows, with the document's paths moved
 * to a temporary directory and its digest (or a prefix of it) to the one that path gives.
 * The document's digest must be the one its own path gives.
 */
function runSteps(steps: Step[], cwd: string, declarations: string[], exclude: string[] = []): void {
  const demo = tempDir();
  const shown = /digest {4}([0-9a-f]{64})/.exec(steps.map((s) => s.output.join('\n')).join('\n'))![1]!;
  let digest = shown;
  const here = (text: string): string =>
    text.replaceAll(DEMO, demo).replace(/[0-9a-f]{8,64}/g, (hex) => (shown.startsWith(hex) ? digest.slice(0, hex.length) : hex));
  const state: string[] = ['shopt -s expand_aliases'];
  for (const step of steps) {
    const command = here(step.command);
    if (/^(alias|export) /.test(command)) {
      state.push(command);
      continue;
    }
    const r = spawnSync('bash', ['-c', [...state, command].join('\n')], { cwd, encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: '' } });
    // A materialize on a filesystem without reflink (this one's) warns that it copied; the documents show stdout.
    const warned = /^treeseal: warning: \d+ files? copied, not reflinked: the filesystems cannot share extents \(store on \w+, clone on \w+\); --reflink never copies without this warning\n$/;
    expect([command, r.status, command.includes(' materialize ') && warned.test(r.stderr) ? '' : r.stderr]).toEqual([command, 0, '']);
    const printed = r.stdout.split('\n').filter((l) => l !== '');
    const found = /digest {4}([0-9a-f]{64})/.exec(r.stdout);
    if (found !== null) digest = found[1]!;
    expect(printed.map(normalize)).toEqual(step.output.map(here).map(normalize));
  }
  const manifest = /manifest {2}([0-9a-f]{64})/.exec(steps.flatMap((s) => s.output).join('\n'))![1]!;
  const mounts = mountDigests([]);
  const digestAt = (source: string): string =>
    snapshotDigest({ source, revision: 'v1', declarations, exclude, manifestDigest: manifest, mountContentDigest: mounts.contentDigest, mountManifestDigest: mounts.manifestDigest });
  expect(digestAt(`${DEMO}/src`)).toBe(shown);
  expect(digestAt(`${demo}/src`)).toBe(digest);
  expect(digest).not.toBe(shown);
}

describe("README's quick start and docs/cli.md's walkthrough", () => {
  it("README's command-line quick start, in a project whose node_modules/.bin holds the treeseal bin", () => {
    const steps = documentSteps('README.md', '## Command-line quick start');
    expect(steps.map((s) => s.command.split(' ')[0])).toEqual(['export', 'mkdir', 'echo', 'echo', 'ln', 'export', 'treeseal', 'treeseal', 'treeseal']);
    const project = tempDir();
    mkdirSync(join(project, 'node_modules/.bin'), { recursive: true });
    symlinkSync(join(REPO, 'dist/cli.js'), join(project, 'node_modules/.bin/treeseal'));
    runSteps(steps, project, ['app'], ['logs/']);
  }, 600_000);

  it("docs/cli.md's walkthrough, from the checkout's root", () => {
    const steps = documentSteps('docs/cli.md', '## A walkthrough');
    expect(steps.map((s) => s.command.split(' ')[0])).toEqual(['python3', 'alias', 'export', 'treeseal', 'treeseal', 'treeseal', 'treeseal']);
    runSteps(steps, REPO, ['tree']);
  }, 600_000);
});
