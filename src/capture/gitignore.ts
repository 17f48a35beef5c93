// gitignore.ts: gitignore patterns matched as git's wildmatch matches them, without backtracking: the runs between wildcards placed at their first fit, a literal run found by string search.

/** One character test of a compiled component: a literal, any one character (`?`), or a class (`[a-z_]`). */
type Atom = { kind: 'char'; char: string } | { kind: 'any' } | { kind: 'class'; chars: string; ranges: [string, string][] } | { kind: 'star' };

/** A pattern's component: `**` (any number of whole components), the rest of the path whatever it is (see segmentsOf), or a glob over one component. */
type Segment = { kind: 'globstar' } | { kind: 'rest' } | Glob;

/**
 * A glob over one component: all of it when it is literal, and its runs between stars (see
 * globMatches): the first is empty where it starts with a star, the last where it ends with one.
 */
interface Glob {
  kind: 'glob';
  literal: string | undefined;
  chunks: Chunk[];
}

/** A run of atoms between stars, and its text when every atom is a literal character. */
interface Chunk {
  atoms: Atom[];
  text: string | undefined;
}

/** What one component of a pattern can be by itself. */
type OneComponent = Exclude<Segment, { kind: 'rest' }>;

/** A compiled pattern: as written (for messages), negated (`!`), for directories only (trailing `/`), matched against the whole path or only the last component. */
export interface Rule {
  pattern: string;
  negative: boolean;
  dirOnly: boolean;
  /** The components to match against the whole path (it held a `/` before its end); undefined: `base` matches the last component at any depth. */
  anchored: Anchored | undefined;
  base: OneComponent | undefined;
}

/**
 * The pattern without the trailing spaces gitignore drops, as git's trim_trailing_spaces
 * drops them: spaces only (a tab stays), and not one a backslash escapes (`a\ `), while an
 * escaped backslash before them escapes nothing (`a\\ ` is `a\\`).
 */
export function trimmed(pattern: string): string {
  let lastSpace = -1;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === ' ') {
      if (lastSpace < 0) lastSpace = i;
      continue;
    }
    if (c === '\\') i++;
    lastSpace = -1;
  }
  return lastSpace < 0 ? pattern : pattern.slice(0, lastSpace);
}

/** The atoms of one component's glob (a run of stars inside a component, as in `a**b`, is one star: git's rule). */
function atomsOf(text: string): Atom[] {
  const atoms: Atom[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) {
      atoms.push({ kind: 'char', char: text[++i]! });
    } else if (c === '*') {
      // Consecutive stars inside a component match as one.
      if (atoms[atoms.length - 1]?.kind !== 'star') atoms.push({ kind: 'star' });
    } else if (c === '?') {
      atoms.push({ kind: 'any' });
    } else if (c === '[') {
      const end = classEnd(text, i);
      if (end < 0) {
        atoms.push({ kind: 'char', char: c });
        continue;
      }
      atoms.push(classOf(text.slice(i + 1, end)));
      i = end;
    } else {
      atoms.push({ kind: 'char', char: c });
    }
  }
  return atoms;
}

/** Where the class opened at `open` closes (the index of its `]`), or -1 when it does not (then `[` is literal). */
function classEnd(text: string, open: number): number {
  for (let j = open + 1; j < text.length; j++) {
    if (text[j] === '\\') j++;
    else if (text[j] === ']' && j > open + 1) return j;
  }
  return -1;
}

/** A class's characters and ranges (escapes taken literally; patternProblem refuses negated ones and wildcards inside). */
function classOf(inside: string): Atom {
  const chars: string[] = [];
  const ranges: [string, string][] = [];
  // Each character, and whether it was escaped (an escaped `-` is itself).
  const items: { c: string; escaped: boolean }[] = [];
  for (let j = 0; j < inside.length; j++) {
    const escaped = inside[j] === '\\' && j + 1 < inside.length;
    items.push({ c: escaped ? inside[++j]! : inside[j]!, escaped });
  }
  // A `-` between two characters is a range; first or last it is itself.
  for (let k = 0; k < items.length; k++) {
    const dash = items[k + 1];
    if (k + 2 < items.length && dash!.c === '-' && !dash!.escaped) {
      ranges.push([items[k]!.c, items[k + 2]!.c]);
      k += 2;
    } else {
      chars.push(items[k]!.c);
    }
  }
  return { kind: 'class', chars: chars.join(''), ranges };
}

/** The atoms' text when every one is a literal character, else undefined. */
function textOf(atoms: Atom[]): string | undefined {
  return atoms.every((a) => a.kind === 'char') ? atoms.map((a) => (a as { char: string }).char).join('') : undefined;
}

function segmentOf(text: string): OneComponent {
  if (text === '**') return { kind: 'globstar' };
  const atoms = atomsOf(text);
  const chunks: Chunk[] = [{ atoms: [], text: undefined }];
  for (const atom of atoms) {
    if (atom.kind === 'star') chunks.push({ atoms: [], text: undefined });
    else chunks[chunks.length - 1]!.atoms.push(atom);
  }
  for (const chunk of chunks) chunk.text = textOf(chunk.atoms);
  return { kind: 'glob', literal: textOf(atoms), chunks };
}

/** Compiles one pattern (already checked by patternProblem: not empty, no comment, no `..`). */
export function compile(pattern: string): Rule {
  let body = trimmed(pattern);
  let negative = false;
  if (body.startsWith('!')) {
    negative = true;
    body = body.slice(1);
  } else if (body.startsWith('\\!') || body.startsWith('\\#')) {
    body = body.slice(1);
  }
  let dirOnly = false;
  if (body.endsWith('/')) {
    dirOnly = true;
    body = body.slice(0, -1);
  }
  // A `/` at the start or in the middle anchors the pattern to the root; without one it matches a name at any depth.
  const anchored = body.includes('/');
  if (body.startsWith('/')) body = body.slice(1);
  if (!anchored) return { pattern, negative, dirOnly, anchored: undefined, base: segmentOf(body) };
  return { pattern, negative, dirOnly, anchored: anchoredOf(segmentsOf(body)), base: undefined };
}

/**
 * An anchored pattern's components. git compares the literal start of a pattern, up to its
 * first wildcard, as it is and matches the rest by itself, so a run of `*` that is the
 * first wildcard and ends the pattern, right after that start (`/dist**`, `src/a**`),
 * matches the rest of the path whatever it holds: the last component begins with the
 * start, and any components may follow (a negation so written brings back directories
 * below too). Before a `/` such a run (refused at capture: readingProblem) is read
 * as one `*`, as the `ignore` package read it.
 */
function segmentsOf(body: string): Segment[] {
  const parts = body.split('/');
  const last = parts[parts.length - 1]!;
  const first = firstWildcard(body);
  const stars = /\*{2,}$/.exec(last);
  if (stars !== null && first === body.length - stars[0].length && stars.index > 0) {
    return [...parts.slice(0, -1).map(segmentOf), segmentOf(`${last.slice(0, stars.index)}*`), { kind: 'rest' }];
  }
  return parts.map(segmentOf);
}

/** Where git's literal start of a pattern ends: its first `*`, `?`, `[` or backslash (git's simple_length); -1 for none. */
export function firstWildcard(text: string): number {
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '*' || text[i] === '?' || text[i] === '[' || text[i] === '\\') return i;
  }
  return -1;
}

function atomMatches(atom: Atom, c: string): boolean {
  switch (atom.kind) {
    case 'char':
      return atom.char === c;
    case 'any':
      return c !== '/';
    case 'class':
      if (c === '/') return false;
      if (atom.chars.includes(c)) return true;
      return atom.ranges.some(([from, to]) => from <= c && c <= to);
    default:
      return false;
  }
}

/** Whether the chunk's atoms match `name` from `at` on (there is room for them). */
function chunkAt(chunk: Chunk, name: string, at: number): boolean {
  if (chunk.text !== undefined) return name.startsWith(chunk.text, at);
  for (let i = 0; i < chunk.atoms.length; i++) if (!atomMatches(chunk.atoms[i]!, name[at + i]!)) return false;
  return true;
}

/** The first place at or after `from` where the chunk matches and ends by `end`; -1 for none. */
function findChunk(chunk: Chunk, name: string, from: number, end: number): number {
  const last = end - chunk.atoms.length;
  if (chunk.text !== undefined) {
    const at = name.indexOf(chunk.text, from);
    return at >= 0 && at <= last ? at : -1;
  }
  for (let at = from; at <= last; at++) if (chunkAt(chunk, name, at)) return at;
  return -1;
}

/**
 * Whether the glob matches all of `name` (one component): the run before the first star
 * at its start, the run after the last at its end (an empty one matches anywhere), and each
 * run between at the first place it fits after the one before (a star takes whatever lies
 * between, so the first fit is as good as any later one). A literal run is found by the
 * string search (no pattern of `*aaa…ab` makes it try every place a character at a time);
 * one with `?` or a class tries each place. segmentsMatch places an anchored pattern's
 * runs of components the same way.
 */
function globMatches(segment: Glob, name: string): boolean {
  if (segment.literal !== undefined) return segment.literal === name;
  const { chunks } = segment;
  const head = chunks[0]!;
  if (chunks.length === 1) return name.length === head.atoms.length && chunkAt(head, name, 0);
  const tail = chunks[chunks.length - 1]!;
  let from = head.atoms.length;
  const end = name.length - tail.atoms.length;
  if (from > end || !chunkAt(head, name, 0) || !chunkAt(tail, name, end)) return false;
  for (let i = 1; i < chunks.length - 1; i++) {
    const chunk = chunks[i]!;
    if (chunk.atoms.length === 0) continue;
    const at = findChunk(chunk, name, from, end);
    if (at < 0) return false;
    from = at + chunk.atoms.length;
  }
  return true;
}

/**
 * An anchored pattern's components laid out for matching: the runs of one-component globs
 * between its `**` components, and how it ends (`end`: at the path's end; `plus`: a
 * trailing `**`, one component or more below; `rest`: any number, see segmentsOf).
 */
export interface Anchored {
  /** The first run is at the path's start (empty where the pattern starts with `**`). */
  runs: Glob[][];
  ends: 'end' | 'plus' | 'rest';
  /** Each run's components joined by `/` between `/`s, where every one is literal (found by string search). */
  texts: (string | undefined)[];
}

/** Lays out an anchored pattern's segments (see Anchored). */
function anchoredOf(segments: Segment[]): Anchored {
  let ends: Anchored['ends'] = 'end';
  let body = segments;
  const last = segments[segments.length - 1]!;
  if (last.kind === 'rest') {
    ends = 'rest';
    body = segments.slice(0, -1);
  } else if (last.kind === 'globstar') {
    ends = 'plus';
    body = segments.slice(0, -1);
  }
  const runs: Glob[][] = [[]];
  for (const seg of body) {
    if (seg.kind === 'glob') runs[runs.length - 1]!.push(seg);
    else runs.push([]);
  }
  const texts = runs.map((run) => (run.length > 0 && run.every((g) => g.literal !== undefined) ? `/${run.map((g) => g.literal).join('/')}/` : undefined));
  return { runs, ends, texts };
}

/** Whether the run's globs match the parts from `at` on (there is room for them). */
function runAt(run: Glob[], parts: string[], at: number): boolean {
  for (let i = 0; i < run.length; i++) if (!globMatches(run[i]!, parts[at + i]!)) return false;
  return true;
}

/** The first component at or after `from` where run i matches and ends by `end`; -1 for none. */
function findRun(anchored: Anchored, i: number, target: Target, from: number, end: number): number {
  const run = anchored.runs[i]!;
  const last = end - run.length;
  const text = anchored.texts[i];
  if (text === undefined) {
    for (let at = from; at <= last; at++) if (runAt(run, target.parts, at)) return at;
    return -1;
  }
  const at = target.componentAt(target.joined.indexOf(text, target.offset(from)));
  return at >= 0 && at <= last ? at : -1;
}

/**
 * Whether the anchored pattern matches all of the target's components, as globMatches
 * matches one: the run before the first `**` at the start, the run after the last at the
 * end (where the pattern ends there), each other run at the first place it fits after the
 * one before (a `**` takes whatever lies between, so the first fit is as good as any
 * later one); a literal run is found by string search over the joined path. The runs
 * hold components of different kinds than globMatches's characters, and the ends differ
 * (`plus`, `rest`), so the two stay apart.
 */
function segmentsMatch(anchored: Anchored, target: Target): boolean {
  const parts = target.parts;
  const { runs, ends } = anchored;
  let end = parts.length;
  let lastRun = runs.length - 1;
  const head = runs[0]!;
  if (head.length > end || !runAt(head, parts, 0)) return false;
  let from = head.length;
  if (runs.length === 1) {
    // No `**` but a trailing one: the head is all of it, then what the end allows.
    const left = end - from;
    return ends === 'end' ? left === 0 : ends === 'plus' ? left >= 1 : true;
  }
  if (ends === 'end') {
    const tail = runs[lastRun--]!;
    if (tail.length > end - from || !runAt(tail, parts, end - tail.length)) return false;
    end -= tail.length;
  }
  for (let i = 1; i <= lastRun; i++) {
    if (runs[i]!.length === 0) continue;
    const at = findRun(anchored, i, target, from, end);
    if (at < 0) return false;
    from = at + runs[i]!.length;
  }
  return ends === 'plus' ? end - from >= 1 : true;
}

/** A path as the rules look at it: its last component, and its components once an anchored rule asks for them. */
class Target {
  readonly name: string;
  #parts: string[] | undefined;
  #joined: string | undefined;
  #starts: number[] | undefined;

  constructor(readonly path: string) {
    this.name = path.slice(path.lastIndexOf('/') + 1);
  }

  get parts(): string[] {
    return (this.#parts ??= this.path.split('/'));
  }

  /** The path between `/`s: a literal run is searched for in it as `/a/b/`. */
  get joined(): string {
    return (this.#joined ??= `/${this.path}/`);
  }

  /** Where each component's leading `/` is in `joined`, and the final `/` last. */
  get #startsOf(): number[] {
    if (this.#starts === undefined) {
      const starts: number[] = [];
      let at = 0;
      for (const part of this.parts) {
        starts.push(at);
        at += part.length + 1;
      }
      starts.push(at);
      this.#starts = starts;
    }
    return this.#starts;
  }

  /** Where component i's leading `/` is in `joined` (i may be the count of components: the final `/`). */
  offset(i: number): number {
    return this.#startsOf[i]!;
  }

  /** The component whose leading `/` is at `at` in `joined`; -1 for none (or `at` -1). */
  componentAt(at: number): number {
    if (at < 0) return -1;
    const starts = this.#startsOf;
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid]! < at) lo = mid + 1;
      else hi = mid;
    }
    return starts[lo] === at ? lo : -1;
  }
}

/** Whether the rule matches the target (relative, `/`-separated, no trailing `/`) as a directory (`dir`) or as anything else. */
function ruleMatches(rule: Rule, target: Target, dir: boolean): boolean {
  if (rule.dirOnly && !dir) return false;
  if (rule.base !== undefined) return rule.base.kind === 'globstar' || globMatches(rule.base, target.name);
  return segmentsMatch(rule.anchored!, target);
}

/** What the rules say of one entry by itself (its parents aside): ignored or not, and the last rule that decided. */
export interface Verdict {
  ignored: boolean;
  rule: Rule | undefined;
}

/**
 * The rules' verdict on `path` itself, as git decides it: the last rule that matches
 * wins, a negation bringing back what an earlier rule left out.
 */
export function verdictOf(rules: readonly Rule[], path: string, dir: boolean): Verdict {
  let ignored = false;
  let rule: Rule | undefined;
  const target = new Target(path);
  for (const r of rules) {
    // Only a rule that would change the verdict is tried.
    if (r.negative !== ignored) continue;
    if (ruleMatches(r, target, dir)) {
      ignored = !r.negative;
      rule = r;
    }
  }
  return { ignored, rule };
}
