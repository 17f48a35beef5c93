// remove.ts: `treeseal rm` and `gc`: snapshots removed, stale builds swept.
import { UsageError, need, plural, type CommandSpec, type Context } from './command.js';

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
  const swept = atOpen + store.gc();
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
  synopsis: 'gc',
  summary: 'sweep stale builds',
  help: `usage: treeseal gc

Sweeps builds left behind by processes that died, and half-removed snapshots, and
reports how many it swept (opening the store sweeps them too; those are counted).`,
  run: gc,
};
