// help.ts: the common options and the help texts.
import type { CommandSpec, OptionSpec } from './command.js';

/** Options every command takes. */
export const COMMON_OPTIONS: Record<string, OptionSpec> = {
  store: { type: 'string' },
  json: { type: 'boolean' },
  retries: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
};

export const COMMON = `Common options:
  --store DIR    the snapshot store (default: $TREESEAL_STORE, else $XDG_CACHE_HOME/treeseal,
                 else ~/.cache/treeseal)
  --json         print one JSON document on stdout instead of a summary
  --retries N    run a command that failed with a retryable error (the tree was changing)
                 again, up to N times (default 2)
  -h, --help     show help
  --version      print the version`;

/** Where the command summaries start, and the width lines are wrapped to. */
const SUMMARY_COLUMN = 34;
const LINE_WIDTH = 100;

/** A command's synopsis and summary: on one line when the synopsis leaves room, the summary wrapped at LINE_WIDTH below it otherwise. */
function commandLines(c: CommandSpec): string {
  const indent = ' '.repeat(SUMMARY_COLUMN);
  const lines: string[] = [];
  let line = `  ${c.synopsis}`;
  if (line.length + 2 > SUMMARY_COLUMN) {
    lines.push(line);
    line = indent;
  } else line = line.padEnd(SUMMARY_COLUMN);
  let first = true;
  for (const word of c.summary.split(' ')) {
    if (!first && line.length + 1 + word.length > LINE_WIDTH) {
      lines.push(line);
      line = `${indent}${word}`;
    } else line = first ? `${line}${word}` : `${line} ${word}`;
    first = false;
  }
  lines.push(line);
  return lines.join('\n');
}

/** `treeseal help` and `treeseal --help`: every command, its synopsis and what it does. */
export function mainHelp(commands: readonly CommandSpec[]): string {
  return `usage: treeseal <command> [options]

Race-checked, content-addressed, read-only snapshots of directory trees, materialized copy-on-write.

Commands:
${commands.map(commandLines).join('\n')}

Digests may be abbreviated to any unique prefix.
Exit status: 0 ok, 1 a treeseal error (its code and message on stderr), or a difference
(diff, verify --clone) or corruption (verify) found, 2 a usage error.

${COMMON}`;
}

/** The help of one command, with the common options. */
export function commandHelp(spec: CommandSpec): string {
  return `${spec.help}\n\n${COMMON}`;
}
