// gitignore.test.ts: treeseal's own gitignore matcher against git itself and against the `ignore` package it replaced, on random patterns and trees; and its time on paths built to make a backtracking matcher take minutes.
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { Excludes, readingProblem, patternProblem } from '../../dist/internal.js';
import { tempDir } from '../helpers.js';

type Ignore = { add(p: string[]): Ignore; ignores(p: string): boolean };
const ignore = createRequire(import.meta.url)('ignore') as (o: { ignorecase: boolean }) => Ignore;

/** A small random generator with a seed, so a failure names its case. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ['a', 'b', 'ab', 'ba', 'aa', 'a.b', '.a', 'b-a'];
/** Pattern components: names, wildcards of every kind, classes and escapes, in the forms treeseal takes. */
const PIECES = ['a', 'b', 'ab', '*', '?', '**', 'a*', '*a', '*b*', 'a?', '[ab]', '[a-b]a', '.a', '*.b', 'a**', '\\*a', 'b-a', '[.]a', 'b[\\-]a', '[a-b\\-]*', '[-b]?'];

/** A random pattern a capture takes (patternProblem and readingProblem refuse the rest). */
function patternOf(rnd: () => number): string {
  for (;;) {
    const p = anyPatternOf(rnd);
    if (patternProblem(p, '/src') === undefined && readingProblem(p) === undefined) return p;
  }
}

function anyPatternOf(rnd: () => number): string {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(rnd() * list.length)]!;
  const parts = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(PIECES));
  let p = parts.join('/');
  if (rnd() < 0.25) p = `/${p}`;
  if (rnd() < 0.25) p = `${p}/`;
  if (rnd() < 0.2) p = `!${p}`;
  return p;
}

/** Every path of a random tree: directories (ending in `/`) and files. */
function treeOf(rnd: () => number): string[] {
  const out: string[] = [];
  const fill = (prefix: string, depth: number): void => {
    for (const name of NAMES) {
      if (rnd() < 0.45) continue;
      const path = `${prefix}${name}`;
      if (depth < 4 && rnd() < 0.5) {
        out.push(`${path}/`);
        fill(`${path}/`, depth + 1);
      } else {
        out.push(path);
      }
    }
  };
  fill('', 1);
  return out;
}

/** What a walk keeps, as capture walks: top down, nothing below a directory left out. */
function leftOut(excludes: Excludes, paths: string[]): Set<string> {
  const out = new Set<string>();
  for (const p of paths) {
    const dir = p.endsWith('/');
    const path = dir ? p.slice(0, -1) : p;
    const parent = path.includes('/') ? `${path.slice(0, path.lastIndexOf('/'))}/` : undefined;
    if ((parent !== undefined && out.has(parent)) || excludes.excludes(path, dir)) out.add(p);
  }
  return out;
}

/** A git repository holding `paths` (each directory with a file in it: git lists files only). */
function repoOf(paths: string[]): { repo: string; files: string[] } {
  const repo = join(tempDir(), 'repo');
  mkdirSync(repo);
  execFileSync('git', ['init', '-q', repo]);
  const files: string[] = [];
  for (const p of paths) {
    if (!p.endsWith('/')) {
      writeFileSync(join(repo, p), 'x');
      files.push(p);
      continue;
    }
    mkdirSync(join(repo, p), { recursive: true });
    writeFileSync(join(repo, p, 'zz'), 'x');
    files.push(`${p}zz`);
  }
  return { repo, files };
}

/** The files git leaves out under a .gitignore of `patterns`, sorted. */
function gitLeavesOut(repo: string, patterns: string[]): string[] {
  writeFileSync(join(repo, '.gitignore'), `${patterns.join('\n')}\n`);
  return execFileSync('git', ['-C', repo, 'ls-files', '--others', '--ignored', '--exclude-standard', '-z'], { encoding: 'utf8' })
    .split('\0')
    .filter((p) => p !== '' && p !== '.gitignore')
    .sort();
}

/** The files of `paths` (with each directory's file) the walk leaves out. */
function filesLeftOut(excludes: Excludes, paths: string[]): string[] {
  const withFiles = paths.flatMap((p) => (p.endsWith('/') ? [p, `${p}zz`] : [p]));
  return [...leftOut(excludes, withFiles)].filter((p) => !p.endsWith('/')).sort();
}

describe('the gitignore matcher', () => {
  it('leaves out what the `ignore` package it replaced left out, on 3,000 random pattern lists over random trees, but where git itself says otherwise (then as git does)', () => {
    const differ: string[] = [];
    for (let seed = 1; seed <= 3_000; seed++) {
      const rnd = random(seed);
      const patterns = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => patternOf(rnd));
      const paths = treeOf(rnd);
      const ours = [...leftOut(Excludes.of(patterns)!, paths)];
      const theirs = ignore({ ignorecase: false }).add(patterns);
      if (JSON.stringify(ours) === JSON.stringify(paths.filter((p) => theirs.ignores(p)))) continue;
      // The two differ: git decides, by the files below (each directory holds one).
      const { repo } = repoOf(paths);
      const git = gitLeavesOut(repo, patterns);
      expect({ seed, patterns, left: filesLeftOut(Excludes.of(patterns)!, paths) }).toEqual({ seed, patterns, left: git });
      differ.push(JSON.stringify(patterns));
    }
    // Where the package strays from git: a trailing `/**/` matching the directory itself.
    expect(differ.length).toBeGreaterThan(0);
    expect(differ.length).toBeLessThan(300);
  });

  it('leaves out the files git leaves out (git ls-files --ignored), on 400 random .gitignore files over two trees', () => {
    const rnd = random(7);
    // Two of the larger random trees.
    const trees = [11, 12, 13, 14, 15, 16].map((seed) => treeOf(random(seed))).filter((t) => t.length > 30).slice(0, 2);
    expect(trees.length).toBe(2);
    for (const paths of trees) {
      const { repo } = repoOf(paths);
      for (let n = 0; n < 200; n++) {
        const patterns = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => patternOf(rnd));
        const g = gitLeavesOut(repo, patterns);
        expect({ patterns, left: filesLeftOut(Excludes.of(patterns)!, paths) }).toEqual({ patterns, left: g });
      }
    }
  });

  it('reads trailing spaces, escapes before them, tabs, an escape before a trailing ** and a run of components that may not reach into the last as git does (git ls-files --ignored)', () => {
    const paths = ['a\\', 'a\\ ', 'b ', 'b', 'c\t', 'c', 'src/', 'src/#b/', 'src/#b/x', 'src/#bc', 'd*b/', 'd*b/e/', 'd*b/e/f', 'q?', 'qq', 'r*', 'rr', 'g/', 'g/a', 'h/', 'h/a/', 'h/a/a'];
    const { repo } = repoOf(paths);
    for (const patterns of [['a\\\\ '], ['b\\ '], ['b  '], ['c\t'], ['x', '!/src/\\#b**'], ['/d\\*b**'], ['/d\\*b/**'], ['q\\?'], ['r\\*'], ['/r\\*'], ['**/a/**/a'], ['g/**/a'], ['h/**/a/a']]) {
      expect({ patterns, left: filesLeftOut(Excludes.of(patterns)!, paths) }).toEqual({ patterns, left: gitLeavesOut(repo, patterns) });
    }
  });

  it('matches a path built to make a backtracking matcher take seconds in a few milliseconds (`**/*a*/**/*b*` against 200 components of 15 a: 4.5 s with the `ignore` package)', { timeout: 20_000 }, () => {
    const deep = Array(200).fill('a'.repeat(15)).join('/');
    const patterns = ['**/*a*/**/*b*', '**/a*a*/**/b', '**/build*/**/*.o', '**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/a/**/b'];
    const excludes = Excludes.of(patterns)!;
    // A thousand such paths, each as the walk asks of it: well inside the timeout; one took 4.5 s before.
    for (let i = 0; i < 1_000; i++) expect(excludes.excludes(`${deep}/x${i}`, false)).toBe(false);
    expect(excludes.excludes(`${deep}/ab`, false)).toBe(true);
    expect(excludes.excludes(`${Array(300).fill('a').join('/')}/b`, false)).toBe(true);
  });
});
