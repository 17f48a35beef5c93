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
  --store DIR    the snapshot store (default: $TREESEAL_STORE, else $XDG_CACHE_HOME/treeseal, else ~/.cache/treeseal)
  --json         print one JSON document on stdout instead of a summary
  --retries N    run a command that failed with a retryable error (the tree was changing) again, up to N times (default 2)
  -h, --help     show help
  --version      print the version`;

/** `treeseal help` and `treeseal --help`: every command, one line each. */
export function mainHelp(commands: readonly CommandSpec[]): string {
  const width = Math.max(...commands.map((c) => c.synopsis.length)) + 2;
  return `usage: treeseal <command> [options]

Race-checked, content-addressed, read-only snapshots of directory trees, materialized copy-on-write.

Commands:
${commands.map((c) => `  ${c.synopsis.padEnd(width)}${c.summary}`).join('\n')}

Digests may be abbreviated to any unique prefix.
Exit status: 0 ok, 1 a treeseal error (its code and message on stderr), or a difference
(diff) or corruption (verify) found, 2 a usage error.

${COMMON}`;
}

/** The help of one command, with the common options. */
export function commandHelp(spec: CommandSpec): string {
  return `${spec.help}\n\n${COMMON}`;
}
