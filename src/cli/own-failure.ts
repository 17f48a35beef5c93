// own-failure.ts: the exit status of the command's own failures where another program's statuses are passed through (run: 125), known before main parses the words.

/** `treeseal run`'s status for a failure of its own (usage included), as env(1), timeout(1) and `docker run` use it. */
export const RUN_OWN_FAILURE = 125;

/** The common options that take a value (help.ts's COMMON_OPTIONS of type string): their value is no command word. */
const VALUED = new Set(['--store', '--retries']);

/**
 * The status of a failure before main has run (the library cannot load; stdout cannot be
 * written): RUN_OWN_FAILURE when the command word is `run`, else 1.
 */
export function earlyFailureStatus(argv: readonly string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return 1;
    if (!a.startsWith('-')) return a === 'run' ? RUN_OWN_FAILURE : 1;
    if (VALUED.has(a)) i++;
  }
  return 1;
}
