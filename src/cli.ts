#!/usr/bin/env node
// cli.ts: the `treeseal` command's entry: a closed stdout ends it quietly; the exit status is main's.
import { endQuietlyOnClosedOutput } from './cli/io.js';
import { main } from './cli/main.js';

endQuietlyOnClosedOutput();
const code = await main(process.argv.slice(2));
// Registry commands leave idle keep-alive connections that would hold the process for
// seconds: once stdout and stderr are flushed, nothing is left to wait for.
await Promise.all([process.stdout, process.stderr].map((s) => new Promise((resolve) => s.write('', resolve))));
process.exit(code);
