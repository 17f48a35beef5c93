// remove.ts: `treeseal rm` and `gc`: snapshots removed, stale builds and leases swept, old snapshots pruned.
import { resolve } from 'node:path';

import { UsageError, countOption, need, plural, stringOption, type CommandSpec, type Context } from './command.js';
import { bytes } from './format.js';
import { durationOption, sizeOption } from './usage.js';

async function rm(ctx: Context): Promise<void> {
  if (ctx.args.length === 0) throw new UsageError('rm takes one or more <digest>', 'rm');
  const store = await ctx.store();
  const removed = ctx.args.map((d) => store.remove(d));
  ctx.io.emit({ removed }, removed.map((d) => `removed ${d}`).join('\n'));
}

async function gc(ctx: Context): Promise<void> {
  need(ctx, 0, 'no arguments');
  const olderThanMs = durationOption(ctx, 'older-than');
  const keepLast = countOption(ctx, 'keep-last', 'a count');
  const maxBytes = sizeOption(ctx, 'max-size');
  const store = await ctx.store();
  // Opening the store already swept what no live process holds; count that too.
  const atOpen = store.sweptAtOpen;
  const clone = stringOption(ctx, 'clone');
  const swept = atOpen + store.gc(clone === undefined ? {} : { clone: resolve(clone) });
  const line = `swept ${plural(swept, 'stale build')}`;
  if (olderThanMs === undefined && keepLast === undefined && maxBytes === undefined) {
    ctx.io.emit({ swept }, line);
    return;
  }
  const policy = { ...(olderThanMs === undefined ? {} : { olderThanMs }), ...(keepLast === undefined ? {} : { keepLast }), ...(maxBytes === undefined ? {} : { maxBytes }) };
  const pruned = store.prune(policy);
  ctx.io.emit(
    { swept, ...pruned },
    [
      line,
      ...pruned.removed.map((d) => `removed ${d}`),
      ...pruned.leased.map((d) => `kept ${d} (leased)`),
      `${plural(pruned.removed.length, 'snapshot')} removed, ${bytes(pruned.diskBytes)} left on disk`,
    ].join('\n'),
  );
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
  synopsis: 'gc [--clone DIR] [--older-than AGE] [--keep-last N] [--max-size SIZE]',
  summary: 'sweep stale builds and leases; remove old snapshots by age, count or size',
  help: `usage: treeseal gc [--clone DIR] [--older-than AGE] [--keep-last N] [--max-size SIZE]

Sweeps builds left behind by processes that died, half-removed snapshots and leases whose
process is gone, and reports how many it swept (opening the store sweeps builds too; those
are counted). With --clone, also sweeps the stale materialize stages inside DIR.
Then, given a policy, removes snapshots oldest first: the newest N (--keep-last) are kept,
every one published longer ago than AGE (--older-than 7d; s, m, h, d, w) goes, then the
oldest until the rest take at most SIZE on disk (--max-size 50G; K, M, G, T are powers of
1024). A snapshot a lease holds (treeseal run) is kept and listed.`,
  options: { clone: { type: 'string' }, 'older-than': { type: 'string' }, 'keep-last': { type: 'string' }, 'max-size': { type: 'string' } },
  run: gc,
};
