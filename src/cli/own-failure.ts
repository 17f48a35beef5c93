// own-failure.ts: the exit status of the command's own failures where another program's statuses are passed through (run: 125), known before main parses the words.

/** `treeseal run`'s status for a failure of its own (usage included), as env(1), timeout(1) and `docker run` use it. */
export const RUN_OWN_FAILURE = 125;

/**
 * Every option of any command that takes a value (main's allOptions of type string; a test
 * holds the two equal): its value is no command word, as main's commandWord skips it.
 */
export const VALUED_OPTIONS: readonly string[] = [
  'ca-file', 'clone', 'concurrency', 'copy', 'exclude', 'exclude-from', 'fallback-bytes', 'format', 'keep-last', 'links', 'manifest',
  'max-bytes', 'max-depth', 'max-entries', 'max-file-bytes', 'max-path-bytes', 'max-size', 'mount', 'mount-from', 'older-than',
  'reflink', 'retries', 'revision', 'source', 'store', 'tag', 'timeout', 'workspace',
];
const VALUED = new Set(VALUED_OPTIONS.map((name) => `--${name}`));

/**
 * The status of a failure before main has run (the library cannot load; stdout cannot be
 * written): RUN_OWN_FAILURE when the command word is `run`, else 1.
 */
export function earlyFailureStatus(argv: readonly string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return 1;
    if (!a.startsWith('-')) return a === 'run' ? RUN_OWN_FAILURE : 1;
    if (!a.includes('=') && VALUED.has(a)) i++;
  }
  return 1;
}
