#!/usr/bin/env node
// cli.ts: the `treeseal` command's entry: a closed stdout ends it quietly; the exit status is main's (run's own failures 125, from the first line); an addon that cannot load is said in one line.
import { endQuietlyOnClosedOutput } from './cli/io.js';
import { earlyFailureStatus } from './cli/own-failure.js';
import { version } from './cli/version.js';

const argv = process.argv.slice(2);
endQuietlyOnClosedOutput(undefined, earlyFailureStatus(argv));
let code: number;
if (argv.length === 1 && argv[0] === '--version') {
  // Answered before the library (and its addon) loads: the line main prints for it.
  process.stdout.write(`treeseal ${version()}\n`);
  code = 0;
} else {
  let main: typeof import('./cli/commands.js').main;
  let rawArguments: typeof import('./cli/commands.js').rawArguments;
  try {
    // By its URL: the bundler leaves it a file of its own (see scripts/bundle.mjs), read whole at once.
    ({ main, rawArguments } = (await import(new URL('./cli/commands.js', import.meta.url).href)) as typeof import('./cli/commands.js'));
  } catch (err) {
    // The library loads the native addon: a missing build (a checkout mid-rebuild, an install that skipped its script) ends here,
    // its message saying the way out.
    const first = (err instanceof Error ? err.message : String(err)).split('\n')[0]!;
    process.stderr.write(`treeseal: cannot load the library: ${first}\n`);
    process.exit(earlyFailureStatus(argv));
  }
  code = await main(argv, process.env, undefined, rawArguments(argv.length));
}
// Once stdout and stderr are flushed the command is done: it ends with main's status at once
// instead of waiting on any handle still open.
await Promise.all([process.stdout, process.stderr].map((s) => new Promise((resolve) => s.write('', resolve))));
process.exit(code);
