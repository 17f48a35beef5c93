#!/usr/bin/env node
// cli.ts: the `treeseal` command: parses arguments and hands each subcommand to the library.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { COMMANDS, UsageError, run, type Command, type Values } from './cli/commands.js';
import { HELP, MAIN } from './cli/usage.js';
import { SealError } from './index.js';

const OPTIONS = {
  store: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  copy: { type: 'string', multiple: true },
  mount: { type: 'string', multiple: true },
  revision: { type: 'string' },
  reflink: { type: 'string' },
  'fallback-bytes': { type: 'string' },
  'no-stat-cache': { type: 'boolean' },
  concurrency: { type: 'string' },
  insecure: { type: 'boolean' },
  'mount-from': { type: 'string', multiple: true },
} as const;

const ALLOWED: Record<Command, string[]> = {
  capture: ['copy', 'mount', 'revision', 'no-stat-cache'],
  materialize: ['reflink', 'fallback-bytes'],
  verify: [],
  ls: [],
  show: [],
  diff: [],
  rm: [],
  gc: [],
  push: ['concurrency', 'insecure', 'mount-from'],
  pull: ['concurrency', 'insecure'],
  freeze: [],
  thaw: [],
};

function defaultStore(env: NodeJS.ProcessEnv): string {
  if (env.TREESEAL_STORE) return env.TREESEAL_STORE;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'treeseal');
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let command: Command | undefined;
  try {
    const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    const [first, ...args] = positionals;
    if (first === undefined) {
      process.stdout.write(`${MAIN}\n`);
      return values.help ? 0 : 2;
    }
    if (!(COMMANDS as readonly string[]).includes(first)) throw new UsageError(`unknown command: ${first}`);
    command = first as Command;
    if (values.help) {
      process.stdout.write(`${HELP[command]}\n`);
      return 0;
    }
    for (const key of ['copy', 'mount', 'revision', 'reflink', 'fallback-bytes', 'no-stat-cache', 'concurrency', 'insecure', 'mount-from'] as const) {
      if (values[key] !== undefined && !ALLOWED[command].includes(key)) throw new UsageError(`${command} does not take --${key}`, command);
    }
    const v: Values = {
      store: values.store ?? defaultStore(env),
      copy: values.copy ?? [],
      mount: values.mount ?? [],
      revision: values.revision,
      reflink: values.reflink,
      fallbackBytes: values['fallback-bytes'],
      statCache: values['no-stat-cache'] !== true,
      concurrency: values.concurrency,
      insecure: values.insecure === true,
      mountFrom: values['mount-from'] ?? [],
    };
    return await run(command, args, v, { out: (t) => process.stdout.write(t), err: process.stderr, json: values.json === true });
  } catch (err) {
    if (err instanceof UsageError || (err instanceof TypeError && String((err as { code?: string }).code).startsWith('ERR_PARSE_ARGS'))) {
      const which = err instanceof UsageError ? (err.command ?? command) : command;
      process.stderr.write(`treeseal: ${err.message}\n${which === undefined ? MAIN : HELP[which]}\n`);
      return 2;
    }
    if (err instanceof SealError) {
      process.stderr.write(`treeseal: ${err.code}: ${err.message}\n`);
      return 1;
    }
    process.stderr.write(`treeseal: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

const code = await main(process.argv.slice(2));
// Registry commands leave idle keep-alive connections that would hold the process for
// seconds: once stdout and stderr are flushed, nothing is left to wait for.
await Promise.all([process.stdout, process.stderr].map((s) => new Promise((resolve) => s.write('', resolve))));
process.exit(code);
