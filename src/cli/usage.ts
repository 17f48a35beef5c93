// usage.ts: `treeseal du` and the age and size arguments of gc: what each snapshot costs, durations and byte sizes as a user writes them.
import type { PartUsage } from '../index.js';
import { UsageError, stringOption, type CommandSpec, type Context } from './command.js';
import { bytes } from './format.js';

const DURATION_UNITS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };
const SIZE_UNITS: Record<string, number> = { '': 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 };

/** `--name 7d`: a duration in ms (s, m, h, d, w; a number alone is seconds), or undefined when absent. */
export function durationOption(ctx: Context, name: string): number | undefined {
  const raw = stringOption(ctx, name);
  if (raw === undefined) return undefined;
  // The unit is required: a bare `7` read as seconds would prune nearly everything of someone who meant days.
  const m = /^(\d+(?:\.\d+)?)([smhdw])$/.exec(raw);
  if (m === null) throw new UsageError(`--${name} takes a duration with its unit, such as 90s, 30m, 12h, 7d or 2w, not ${JSON.stringify(raw)}`, ctx.command);
  return Math.round(Number(m[1]) * DURATION_UNITS[m[2]!]!);
}

/** `--name 50G`: a byte count (K, M, G, T are powers of 1024, with an optional `iB` or `B`), or undefined when absent. */
export function sizeOption(ctx: Context, name: string): number | undefined {
  const raw = stringOption(ctx, name);
  if (raw === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)(?:([kmgt])(?:i?b)?|b)?$/i.exec(raw);
  // A fraction needs a unit to scale it: `1.5` bytes is a slip, not 1.
  const n = m === null || (m[2] === undefined && m[1]!.includes('.')) ? NaN : Math.floor(Number(m[1]) * SIZE_UNITS[(m[2] ?? '').toLowerCase()]!);
  if (!Number.isSafeInteger(n)) throw new UsageError(`--${name} takes a size such as 500M, 50G or 1TiB, not ${JSON.stringify(raw)}`, ctx.command);
  return n;
}

async function du(ctx: Context): Promise<void> {
  if (ctx.args.length !== 0) throw new UsageError('du takes no arguments', 'du');
  const store = await ctx.store();
  const usage = store.usage();
  const parts = store.partsUsage();
  const total = usage.reduce((n, u) => n + u.diskBytes, 0);
  const lines = usage.map((u) => `${u.digest.slice(0, 12)}  ${new Date(u.createdMs).toISOString()}  ${u.error === undefined ? bytes(u.logicalBytes).padStart(10) : `${u.error.code}: ${u.error.message}`}  ${bytes(u.diskBytes).padStart(10)} on disk`);
  lines.push(`${usage.length} snapshot${usage.length === 1 ? '' : 's'}, ${bytes(total)} on disk`);
  const part = (p: PartUsage, what: string): string => `${what} ${p.unreadable ? 'not readable' : `${bytes(p.diskBytes)} (${p.entries})`}`;
  const besides = parts.statCaches.diskBytes + parts.cloneLedgers.diskBytes + parts.builds.diskBytes;
  lines.push(`besides the snapshots: ${part(parts.statCaches, 'caches')}, ${part(parts.cloneLedgers, 'clone ledgers')}, ${part(parts.builds, 'unfinished builds and downloads')}`);
  lines.push(`store: ${bytes(total + besides)} on disk`);
  ctx.io.emit({ snapshots: usage.map((u) => ({ ...u, created: new Date(u.createdMs).toISOString() })), diskBytes: total, parts, storeDiskBytes: total + besides }, lines.join('\n'));
}

export const DU: CommandSpec = {
  name: 'du',
  synopsis: 'du',
  summary: 'show what each snapshot takes: created, bytes, bytes on disk',
  help: `usage: treeseal du

Lists every snapshot, oldest first: its digest, when it was published, its bytes (files and
link targets, as its manifest counts them) and the bytes it takes on disk (st_blocks; a file
snapshots share by a hard link counts once, for the first in digest order; extents shared
by reflinks count in each), then the total on disk; then what the store holds besides:
its caches (cache/: a stat cache per source captured with it, a summary per snapshot listed), clone ledgers
(clones/, one per clone materialized) and unfinished builds and downloads (tmp/), and their
sum with the snapshots' (a file a build shares with a snapshot by a hard link counts in
both). gc drops the caches and ledgers no snapshot or clone needs any more.`,
  run: du,
};
