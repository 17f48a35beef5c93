// suggest.ts: what a usage error adds for a word the command line got wrong: the nearest option or command (a typo), and where an option meant for a sandboxed command goes.
import type { CommandSpec } from './command.js';

/** Levenshtein distance of a and b (both short: options and command names). */
function distance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/** The candidate nearest to word, when it is near enough to be a typo of it (at most 2 edits, and fewer than half its letters). */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = distance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return bestDistance <= Math.min(2, Math.floor(word.length / 2)) ? best : undefined;
}

/** Commands other tools call what treeseal calls otherwise. */
const ALIASES: ReadonlyMap<string, string> = new Map([
  ['prune', 'snapshots are removed by a policy with gc --keep-last N, --older-than AGE or --max-size SIZE'],
  ['remove', 'did you mean rm?'],
  ['list', 'did you mean ls?'],
  ['restore', 'did you mean reset (an arm back to its snapshot) or materialize?'],
]);

/** The message for an unknown command: its nearest command, or what it is called here. */
export function unknownCommand(word: string, commands: readonly CommandSpec[]): string {
  const near = nearest(word, commands.map((c) => c.name));
  const hint = ALIASES.get(word) ?? (near === undefined ? undefined : `did you mean ${near}?`);
  return `unknown command: ${word}${hint === undefined ? '' : ` (${hint})`}`;
}

/**
 * The message for an option the parser did not know (Node's own names it as `'--copyy'`,
 * then explains `--` with a quote it never closes): the option and, for a typo, the
 * nearest one the command takes; for `run`, where the command it runs goes.
 */
export function unknownOption(message: string, spec: CommandSpec | undefined, options: readonly string[]): string {
  const option = /^Unknown option '([^']*)'/.exec(message)?.[1];
  if (option === undefined) return message;
  const near = option.startsWith('--') ? nearest(option.slice(2), options) : undefined;
  if (near !== undefined) return `unknown option ${option} (did you mean --${near}?)`;
  if (spec?.name === 'run') return `unknown option ${option}: the command run in the sandbox goes after --, as in: treeseal run <digest> <clone> -- <command> ${option} ...`;
  return `unknown option ${option}`;
}
