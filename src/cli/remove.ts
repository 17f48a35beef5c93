// remove.ts: `treeseal rm` and `gc`: snapshots removed, stale builds and leases swept, old snapshots pruned.
import { resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { SealError, type SnapshotStore } from '../index.js';
import { UsageError, countOption, flag, need, plural, stringOption, type CommandSpec, type Context } from './command.js';
import type { Io } from './io.js';
import { bytes } from './format.js';
import { durationOption, sizeOption } from './usage.js';

/** Polls of a leased snapshot with --wait: from the first wait, doubling up to the last. */
const FIRST_POLL_MS = 50;
const LAST_POLL_MS = 1000;

/** Removes digest once no lease holds it: SEAL_BUSY is said once on stderr, then the removal is tried again until it passes. */
async function removeWhenFree(store: SnapshotStore, digest: string, io: Io): Promise<string> {
  for (let wait = FIRST_POLL_MS, said = false; ; wait = Math.min(wait * 2, LAST_POLL_MS)) {
    try {
      return store.remove(digest);
    } catch (err) {
      if (!(err instanceof SealError) || err.code !== 'SEAL_BUSY') throw err;
      if (!said) io.warn(`treeseal: ${err.message}; waiting (--wait)`);
      said = true;
      await sleep(wait);
    }
  }
}

async function rm(ctx: Context): Promise<void> {
  if (ctx.args.length === 0) throw new UsageError('rm takes one or more <digest>', 'rm');
  const wait = flag(ctx, 'wait');
  const store = await ctx.store();
  // Every digest named before any is removed: a typo in the third leaves the first two in place, not half the list gone unsaid.
  const digests = [...new Set(ctx.args.map((d) => store.resolveDigest(d)))];
  const removed: string[] = [];
  try {
    for (const d of digests) removed.push(wait ? await removeWhenFree(store, d, ctx.io) : store.remove(d));
  } catch (err) {
    // One refused (leased, or the kernel would not): those removed before it are said, then the refusal.
    if (removed.length > 0) ctx.io.warn(removed.map((d) => `treeseal: removed ${d} before the failure below`).join('\n'));
    throw err;
  }
  ctx.io.emit({ removed }, removed.map((d) => `removed ${d}`).join('\n'));
}

async function gc(ctx: Context): Promise<void> {
  need(ctx, 0, 'no arguments');
  const olderThanMs = durationOption(ctx, 'older-than');
  const keepLast = countOption(ctx, 'keep-last', 'a count');
  const maxBytes = sizeOption(ctx, 'max-size');
  if (keepLast === 0 && olderThanMs === undefined && maxBytes === undefined) {
    throw new UsageError('--keep-last 0 alone would remove every snapshot: give at least 1, or add --older-than or --max-size', 'gc');
  }
  const store = await ctx.store();
  // Opening the store already swept what no live process holds; count that too.
  const atOpen = store.sweptAtOpen;
  const clone = stringOption(ctx, 'clone');
  const policy = { ...(olderThanMs === undefined ? {} : { olderThanMs }), ...(keepLast === undefined ? {} : { keepLast }), ...(maxBytes === undefined ? {} : { maxBytes }) };
  // Pruned first, then swept: the summary records and ledgers of the snapshots the policy removed go in the same gc
  // (swept first, they stayed until the next).
  const pruned = Object.keys(policy).length === 0 ? undefined : store.prune(policy);
  const swept = atOpen + store.gc(clone === undefined ? {} : { clone: resolve(clone) });
  // What was swept is of several kinds (builds, half-removed snapshots, pull locks, leases, ledgers): one count of them all.
  const line = `swept ${plural(swept, 'stale item')}`;
  if (pruned === undefined) {
    ctx.io.emit({ swept }, line);
    return;
  }
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
  synopsis: 'rm [--wait] <digest>...',
  summary: 'remove snapshots',
  help: `usage: treeseal rm [--wait] <digest>...

Removes snapshots from the store (under the store lock). Every <digest> is resolved first:
one the store does not hold (or an ambiguous prefix) removes nothing. A snapshot a lease
holds (treeseal run, or a library lease) is refused with SEAL_BUSY naming the holder, those
removed before it said on stderr; with --wait, rm says so once and removes it as soon as no
lease holds it.`,
  options: { wait: { type: 'boolean' } },
  run: rm,
};

export const GC: CommandSpec = {
  name: 'gc',
  synopsis: 'gc [--clone DIR] [--older-than AGE] [--keep-last N] [--max-size SIZE]',
  summary: 'sweep stale builds and leases; remove old snapshots by age, count or size',
  help: `usage: treeseal gc [--clone DIR] [--older-than AGE] [--keep-last N] [--max-size SIZE]

Sweeps builds left behind by processes that died, half-removed snapshots, leases whose
process is gone and the ledgers of clones removed or moved (or of snapshots removed), and
reports how many it swept (opening the store sweeps builds too; those are counted). With
--clone, also sweeps the stale materialize stages inside DIR.
Then, given a policy, removes snapshots oldest first: the newest N (--keep-last) are kept,
every one published longer ago than AGE (--older-than 7d; s, m, h, d, w) goes, then the
oldest until the rest take at most SIZE on disk (--max-size 50G; K, M, G, T are powers of
1024); --keep-last N alone (at least 1) removes all but the newest N that load,
damaged ones included (not one a later treeseal made, which it cannot read). A snapshot a
lease holds (treeseal run) is kept and listed.`,
  options: { clone: { type: 'string' }, 'older-than': { type: 'string' }, 'keep-last': { type: 'string' }, 'max-size': { type: 'string' } },
  run: gc,
};
