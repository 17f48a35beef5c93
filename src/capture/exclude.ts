// exclude.ts: a capture's exclude patterns (gitignore rules, relative to the source): their check, and the walk's decision from a name and its kind, before anything is opened.
import { createRequire } from 'node:module';
import type { Ignore, Options } from 'ignore';

import { checkListLength, invalidArgType, invalidArgValue } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { escapePath, isWellFormed } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, DT_DIR, DT_UNKNOWN, isDir } from '../sys/constants.js';
import type { DirEntry, Sys } from '../sys/native.js';
import type { PlannedMount } from './plan.js';

/** The pattern without the trailing whitespace gitignore drops (a backslash keeps a space). */
function trimmed(pattern: string): string {
  let end = pattern.length;
  while (end > 0 && /\s/.test(pattern[end - 1]!) && pattern[end - 2] !== '\\') end--;
  return pattern.slice(0, end);
}

/** What is wrong with the `[...]` classes and escapes of a pattern's body, or undefined. */
function classProblem(body: string): string | undefined {
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\') {
      if (body[i + 1] === '?') return 'escapes a ?, which the matcher cannot take literally (? matches any one character)';
      i++;
      continue;
    }
    if (c !== '[') continue;
    let j = i + 1;
    while (j < body.length && body[j] !== ']' && body[j] !== '/') j += body[j] === '\\' ? 2 : 1;
    if (j >= body.length || body[j] !== ']') return 'has an unclosed [ (write \\[ for a literal [)';
    const inside = body.slice(i + 1, j);
    if (inside === '') return 'has an empty [] class';
    if (inside[0] === '!' || inside[0] === '^') return 'has a negated class [!...], which is not supported';
    if (/[?*]/.test(inside)) return 'has a ? or * inside [...], which is not supported';
    for (const [, from, to] of inside.matchAll(/([^\\])-([^\]\\])/g)) {
      if (from! > to!) return `has an empty range ${from}-${to}`;
    }
    i = j;
  }
  if (/(^|[^\\])(\\\\)*\\\*\/?$/.test(body)) return 'ends with an escaped *, which is not supported';
  return undefined;
}

/** The most `**` components, and the most other `*`, one pattern may hold (see wildcardProblem). */
export const MAX_GLOBSTARS = 2;
export const MAX_STARS = 2;

/**
 * Too many wildcards for one pattern: the matcher's regular expressions backtrack, so a
 * path's matching time grows as a power of their count (a pulled document's pattern of
 * twelve `**` components took 52 s of CPU against 36 entries, and `*a*a*a*b` a quarter
 * second against one 250-byte name). Held to by a capture's options and a pulled
 * document, not by a snapshot already in the store (an older build captured with more:
 * refused, it would be called damaged and removed by gc). Within the bounds matching is
 * still polynomial in a path's length (milliseconds a path at the default limits), not linear.
 */
export function wildcardProblem(pattern: string): string | undefined {
  const t = trimmed(pattern);
  const inner = (t.startsWith('!') ? t.slice(1) : t).replace(/^\//, '').replace(/\/$/, '');
  const parts = inner.split('/');
  const globstars = parts.filter((p) => p === '**').length;
  const stars = (inner.replace(/\\./g, '').match(/\*/g) ?? []).length - 2 * globstars;
  if (globstars <= MAX_GLOBSTARS && stars <= MAX_STARS) return undefined;
  return `has more wildcards than treeseal matches (${globstars} ** and ${stars} other *; at most ${MAX_GLOBSTARS} and ${MAX_STARS}): matching a path takes time that grows as a power of their count`;
}

/**
 * Why `pattern` cannot be an exclude pattern of a capture of `source` (undefined: it
 * can): one the matcher would drop or read otherwise than git does, a path that climbs
 * (`..`), or the source's own absolute path written out.
 */
export function patternProblem(pattern: string, source: string): string | undefined {
  const t = trimmed(pattern);
  if (t === '') return 'is not a valid pattern: it is empty';
  if (/[\0\r\n]/.test(pattern)) return 'is not a valid pattern: it holds a NUL byte or a line break';
  if (!isWellFormed(pattern)) return 'is not a valid pattern: it is not valid UTF-8';
  if (t.startsWith('#')) return 'is not a valid pattern: it is a comment (write \\# for a name that starts with #)';
  if (/(^|[^\\])(\\\\)*\\$/.test(t)) return 'is not a valid pattern: it ends with a lone backslash';
  const body = t.startsWith('!') ? t.slice(1) : t;
  const inner = body.replace(/^\//, '').replace(/\/$/, '');
  if (inner === '') return 'is not a valid pattern: it names nothing';
  if (source !== '/' && (body === source || body.startsWith(`${source}/`))) {
    return `must be relative to the source, not absolute (write /${body.slice(source.length + 1)} for ${body})`;
  }
  const parts = inner.split('/');
  if (parts.includes('..')) return "must not hold '..' as a path component (patterns are relative to the source)";
  if (parts.includes('.')) return "is not a valid pattern: it holds '.' as a path component";
  if (parts.includes('')) return 'is not a valid pattern: it has an empty path component';
  const why = classProblem(body);
  return why === undefined ? undefined : `is not a valid pattern: it ${why}`;
}

/** The `exclude` option: an array of gitignore patterns (undefined: none). Wrong types and bad patterns are Node's TypeErrors. */
/** The most exclude patterns one capture takes. */
export const MAX_PATTERNS = 10_000;

export function checkExcludes(value: unknown, source: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalidArgType('options.exclude', 'Array', value);
  // Every path the walk meets is matched against every pattern (and a million compiled ones filled V8's heap).
  checkListLength('options.exclude', value, MAX_PATTERNS);
  return value.map((p: unknown, i) => {
    const name = `options.exclude[${i}]`;
    if (typeof p !== 'string') throw invalidArgType(name, 'string', p);
    const why = patternProblem(p, source) ?? wildcardProblem(p);
    if (why !== undefined) throw invalidArgValue(name, p, why);
    return p;
  });
}

/** Paths one matcher answers for before a fresh one takes over: its cache of every path asked stays small. */
const MATCHER_PATHS = 4096;

let ignore: ((options: Options) => Ignore) | undefined;

/** A new matcher (gitignore on Linux: case matters); the `ignore` package is loaded by the first capture with patterns, not with the library. */
function matcher(): Ignore {
  ignore ??= createRequire(import.meta.url)('ignore') as (options: Options) => Ignore;
  return ignore({ ignorecase: false });
}

/** A capture's exclude patterns, matched against paths relative to the source. */
export class Excludes {
  /** The patterns, compiled once; matchers share them. */
  readonly #rules: Ignore;
  #matcher: Ignore;
  #asked = 0;

  private constructor(patterns: readonly string[]) {
    this.#rules = matcher().add(patterns);
    this.#matcher = matcher().add(this.#rules);
  }

  /** The matcher of these patterns; undefined for none (the walk then checks nothing). */
  static of(patterns: readonly string[]): Excludes | undefined {
    return patterns.length === 0 ? undefined : new Excludes(patterns);
  }

  /** Whether the entry at `path` (relative to the source; `dir`: a directory) is left out. */
  excludes(path: string, dir: boolean): boolean {
    if (++this.#asked > MATCHER_PATHS) {
      this.#matcher = matcher().add(this.#rules);
      this.#asked = 1;
    }
    return this.#matcher.ignores(dir ? `${path}/` : path);
  }

  /**
   * The pattern that leaves `path` out (itself or a directory above it) as a directory
   * (`dir` true) or as anything else (false), as git matches an entry of that kind; with
   * `dir` undefined, one that leaves it out whatever its kind (as both). Else undefined.
   */
  patternFor(path: string, dir?: boolean): string | undefined {
    let pattern: string | undefined;
    for (const p of dir === undefined ? [path, `${path}/`] : [dir ? `${path}/` : path]) {
      const r = this.#rules.test(p);
      if (!r.ignored) return undefined;
      pattern ??= r.rule?.pattern;
    }
    return pattern;
  }
}

/** Whether a listed entry is a directory: its d_type, or fstatat (no-follow) where the filesystem does not say. */
function isDirEntry(sys: Sys, dirFd: number, e: DirEntry): boolean {
  if (e.type !== DT_UNKNOWN) return e.type === DT_DIR;
  try {
    return isDir(sys.fstatat(dirFd, e.name, AT_SYMLINK_NOFOLLOW).mode);
  } catch {
    // Gone or unreadable: the walk's own fstatat says so.
    return false;
  }
}

/**
 * The entries of the directory open at dirFd (at `dirPath` below the source) that the
 * excludes keep, decided from each name and kind before anything is opened. A name that
 * is not UTF-8 is matched as matchedName reads it; one the patterns keep, the walk refuses.
 */
export function keptEntries(sys: Sys, dirFd: number, dirPath: string, entries: DirEntry[], excludes: Excludes | undefined): DirEntry[] {
  if (excludes === undefined) return entries;
  return entries.filter((e) => {
    const name = matchedName(e.name);
    return !excludes.excludes(dirPath === '' ? name : `${dirPath}/${name}`, isDirEntry(sys, dirFd, e));
  });
}

/**
 * A name as the patterns see it: a name that is not UTF-8 with each invalid sequence as U+FFFD,
 * so `*.log` leaves out `bad\xff.log` (git matches bytes) rather than the capture refusing it
 * as not UTF-8, which no pattern could then prevent. One the patterns keep is refused as before.
 */
export function matchedName(name: string | Buffer): string {
  return typeof name === 'string' ? name : name.toString('utf8');
}

/** The declared roots (copy roots, then mount sources), each with the option that names it. */
function declaredRoots(declarations: readonly string[], copyParts: readonly string[][], mounts: readonly Pick<PlannedMount, 'source' | 'sourceParts'>[]): { name: string; raw: string | undefined; path: string }[] {
  return [
    ...copyParts.map((parts, i) => ({ name: `options.copy[${i}]`, raw: declarations[i], path: parts.join('/') })),
    ...mounts.map((m, i) => ({ name: `options.mounts[${i}].source`, raw: m.source, path: m.sourceParts.join('/') })),
  ];
}

/** A declared root the patterns leave out: ERR_INVALID_ARG_VALUE naming its option and the pattern. */
function leftOut(root: { name: string; raw: string | undefined }, pattern: string): TypeError {
  return invalidArgValue(root.name, root.raw, `is left out by the exclude pattern ${JSON.stringify(pattern)}`);
}

/**
 * The `exclude` option, checked (checkExcludes), and checked against the declared roots
 * before anything is opened: a copy root or mount source that the patterns leave out
 * whatever its kind (by name, or below a directory they leave out) is
 * ERR_INVALID_ARG_VALUE. One they leave out only as a directory (`build/`) or only as
 * anything else (`/*` then `!/src/`) is kept or refused by the kind it is captured as
 * (checkCapturedRoots), as git keeps a file `build` under `build/`.
 */
export function planExcludes(value: unknown, source: string, declarations: readonly string[], copyParts: readonly string[][], mounts: readonly PlannedMount[]): string[] {
  const patterns = checkExcludes(value, source);
  const excludes = Excludes.of(patterns);
  if (excludes === undefined) return patterns;
  for (const root of declaredRoots(declarations, copyParts, mounts)) {
    const pattern = excludes.patternFor(root.path);
    if (pattern !== undefined) throw leftOut(root, pattern);
  }
  return patterns;
}

/**
 * The declared roots against the patterns once captured, each by the kind it was captured
 * as (`isDir(i)`: the i-th of the copy roots, then of the mount sources, is a directory):
 * ERR_INVALID_ARG_VALUE for the first they leave out as that kind. With the copy roots
 * chosen from the source's top level (`chosen`), which left out what the patterns do, one
 * left out now changed its kind in between: SEAL_CHANGED.
 */
export function checkCapturedRoots(
  excludes: Excludes | undefined,
  plan: { declarations: readonly string[]; copyParts: readonly string[][]; mounts: readonly Pick<PlannedMount, 'source' | 'sourceParts'>[] },
  isDir: (i: number) => boolean,
  chosen: boolean,
): void {
  if (excludes === undefined) return;
  declaredRoots(plan.declarations, plan.copyParts, plan.mounts).forEach((root, i) => {
    const pattern = excludes.patternFor(root.path, isDir(i));
    if (pattern === undefined) return;
    if (chosen && i < plan.copyParts.length) throw new SealError('SEAL_CHANGED', `top-level entry changed while snapshotting (not the kind it was listed as): ${escapePath(root.path)}`, { path: root.path });
    throw leftOut(root, pattern);
  });
}

/** A gitignore pattern for exactly `path` (relative to the source): anchored, its special characters escaped. */
export function patternOf(path: string): string {
  let out = '/';
  for (const ch of path) out += ch === '\\' || ch === '*' || ch === '[' ? `\\${ch}` : ch;
  // A trailing escaped * is read as a wildcard, and \? is not taken literally: ? matches either.
  if (out.endsWith('\\*')) out = `${out.slice(0, -2)}?`;
  return out.replace(/\s+$/, (s) => s.replace(/\s/g, (c) => `\\${c}`));
}
