// remove.ts: `treeseal rm` and `gc`: snapshots removed, stale builds swept.
import { resolve } from 'node:path';

import { UsageError, need, plural, stringOption, type CommandSpec, type Context } from './command.js';

async function rm(ctx: Context): Promise<void> {
  if (ctx.args.length === 0) throw new UsageError('rm takes one or more <digest>', 'rm');
  const store = await ctx.store();
  const removed = ctx.args.map((d) => store.remove(d));
  ctx.io.emit({ removed }, removed.map((d) => `removed ${d}`).join('\n'));
}

async function gc(ctx: Context): Promise<void> {
  need(ctx, 0, 'no arguments');
  const store = await ctx.store();
  // Opening the store already swept what no live process holds; count that too.
  const atOpen = store.sweptAtOpen;
  const clone = stringOption(ctx, 'clone');
  const swept = atOpen + store.gc(clone === undefined ? {} : { clone: resolve(clone) });
  ctx.io.emit({ swept }, `swept ${plural(swept, 'stale build')}`);
}

export const RM: CommandSpec = {
  name: 'rm',
  synopsis: 'rm <digest>...',
  summary: 'remove snapshots',
  help: `usage: treeseal rm <digest>...

Removes snapshots from the store (under the store lock).`,
  run: rm,
};

export const GC: CommandSpec = {
  name: 'gc',
  synopsis: 'gc [--clone DIR]',
  summary: 'sweep stale builds (and a clone\'s stale materialize stages)',
  help: `usage: treeseal gc [--clone DIR]

Sweeps builds left behind by processes that died, and half-removed snapshots, and
reports how many it swept (opening the store sweeps them too; those are counted).
With --clone, also sweeps the stale materialize stages inside DIR.`,
  options: { clone: { type: 'string' } },
  run: gc,
};
