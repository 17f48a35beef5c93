// inspect.ts: `treeseal ls`, `show` and `diff`: what the store holds, one manifest, and two compared.
import { resolve } from 'node:path';

import { SealError, escapePath, type ManifestEntry, type SnapshotData } from '../index.js';
import { excludeLine } from './capture-options.js';
import { flag, need, type CommandSpec, type Context } from './command.js';
import { cloneLines } from './verify.js';
import { bytes } from './format.js';

/** One item of ls's comma-joined list of copy roots: escaped, with its own commas and the list's closing bracket escaped too. */
function listItem(s: string): string {
  return escapePath(s).replace(/[,\]]/g, '\\$&');
}

async function ls(ctx: Context): Promise<void> {
  need(ctx, 0, 'no arguments');
  const store = await ctx.store();
  const long = flag(ctx, 'long') ? new Map(store.usage().map((u) => [u.digest, u])) : undefined;
  const rows: Record<string, unknown>[] = [];
  const lines: string[] = [];
  for (const digest of store.list()) {
    try {
      const s = store.summary(digest);
      const u = long?.get(digest);
      const when = u === undefined ? '' : `${new Date(u.createdMs).toISOString()}  `;
      const disk = u === undefined ? '' : `  ${bytes(u.diskBytes).padStart(10)} on disk`;
      rows.push(u === undefined ? { ...s } : { ...s, created: new Date(u.createdMs).toISOString(), diskBytes: u.diskBytes });
      // A copy root named like a mount's item (mount:lib) has its colon escaped: the two never print alike.
      const decl = [...s.declarations.map((d) => listItem(d).replace(/^mount:/, 'mount\\:')), ...s.mounts.map((m) => `mount:${listItem(m.target)}`)].join(',');
      lines.push(`${digest.slice(0, 12)}  ${when}${String(s.entries).padStart(7)} entries  ${bytes(s.totalBytes).padStart(10)}${disk}  ${escapePath(String(s.source))}  [${decl}]${s.revision ? `  @${escapePath(String(s.revision))}` : ''}`);
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      rows.push({ digest, error: { code: err.code, message: err.message } });
      lines.push(`${digest.slice(0, 12)}  ${err.code}: ${err.message}`);
    }
  }
  ctx.io.emit(rows, lines.length === 0 ? 'no snapshots' : lines.join('\n'));
}

function entryLine(e: ManifestEntry): string {
  const mode = e.mode.toString(8).padStart(4, '0');
  const tail = e.kind === 'symlink' ? ` -> ${escapePath(e.link_target)}` : '';
  return `${e.kind.padEnd(9)} ${mode} ${String(e.size).padStart(10)} ${e.sha256 === '' ? '-'.repeat(64) : e.sha256}  ${escapePath(e.path)}${tail}`;
}

async function show(ctx: Context): Promise<void> {
  need(ctx, 1, 'one <digest>');
  const data = (await ctx.store()).get(ctx.args[0]!).toJSON();
  const lines = [`snapshot ${data.digest}`, `source   ${escapePath(data.source)}`, `revision ${data.revision === '' ? '(none)' : escapePath(data.revision)}`, `manifest ${data.manifestDigest}`, ...excludeLine(data, 'exclude  '), '', ...data.entries.map(entryLine)];
  data.mounts.forEach((m, i) => {
    lines.push('', `mount ${String(i).padStart(5, '0')}: ${escapePath(m.source)} -> ${escapePath(m.target)}`, ...m.entries.map(entryLine));
  });
  ctx.io.emit(data, lines.join('\n'));
}

function keyed(data: SnapshotData): Map<string, ManifestEntry> {
  const out = new Map<string, ManifestEntry>();
  for (const e of data.entries) out.set(e.path, e);
  for (const m of data.mounts) for (const e of m.entries) out.set(`[mount ${m.target}] ${e.path}`, e);
  return out;
}

function differs(x: ManifestEntry, y: ManifestEntry): boolean {
  return x.kind !== y.kind || x.sha256 !== y.sha256 || x.size !== y.size || x.mode !== y.mode || x.link_target !== y.link_target || x.mtime_ns !== y.mtime_ns;
}

/** A digest prefix is hex; anything else, or anything with a slash, names a clone directory. */
function isCloneArgument(arg: string): boolean {
  return arg.includes('/') || !/^[0-9a-f]+$/.test(arg);
}

/** diff <digest> <clone>: the clone compared with the snapshot by its ledger (or re-hashed); exit 1 on any difference. */
async function diffClone(ctx: Context): Promise<number> {
  const clone = resolve(ctx.args[1]!);
  const report = (await ctx.store()).get(ctx.args[0]!).diffSync(clone, { verify: flag(ctx, 'verify'), all: flag(ctx, 'all') });
  const differs = !report.ok || report.outside.length > 0;
  ctx.io.emit({ clone, ...report }, cloneLines(report, clone, `${differs ? 'DIFFERS' : 'same'} (${report.method})`).join('\n'));
  return differs ? 1 : 0;
}

async function diff(ctx: Context): Promise<number> {
  need(ctx, 2, '<a> <b>, or <digest> <clone>');
  if (isCloneArgument(ctx.args[1]!) || flag(ctx, 'verify') || flag(ctx, 'all')) return diffClone(ctx);
  const store = await ctx.store();
  const a = keyed(store.get(ctx.args[0]!).toJSON());
  const b = keyed(store.get(ctx.args[1]!).toJSON());
  const added = [...b.keys()].filter((k) => !a.has(k)).sort();
  const removed = [...a.keys()].filter((k) => !b.has(k)).sort();
  const changed = [...a.keys()].filter((k) => b.has(k) && differs(a.get(k)!, b.get(k)!)).sort();
  const lines = [...added.map((p) => `+ ${escapePath(p)}`), ...removed.map((p) => `- ${escapePath(p)}`), ...changed.map((p) => `~ ${escapePath(p)}`)];
  lines.push(`${added.length} added, ${removed.length} removed, ${changed.length} changed`);
  ctx.io.emit({ added, removed, changed }, lines.join('\n'));
  return added.length + removed.length + changed.length === 0 ? 0 : 1;
}

export const LS: CommandSpec = {
  name: 'ls',
  synopsis: 'ls [--long]',
  summary: 'list snapshots',
  help: `usage: treeseal ls [--long]

Lists the snapshots in the store. --long adds when each was published and the bytes it
takes on disk (as treeseal du counts them).`,
  options: { long: { type: 'boolean' } },
  run: ls,
};

export const SHOW: CommandSpec = {
  name: 'show',
  synopsis: 'show <digest>',
  summary: 'print a manifest',
  help: `usage: treeseal show <digest>

Prints a snapshot's manifest.`,
  run: show,
};

export const DIFF: CommandSpec = {
  name: 'diff',
  synopsis: 'diff <a> <b> | diff <digest> <clone>',
  summary: 'compare two snapshots, or a clone with its snapshot (exit 1 when they differ)',
  help: `usage: treeseal diff <a> <b>
       treeseal diff <digest> <clone> [--verify] [--all]

Lists the paths added (+), removed (-) and changed (~) from snapshot <a> to snapshot <b>.
Exits 0 when the manifests are the same, 1 when they differ (as diff(1) does).

With a clone (an argument with a '/' or that is not a hex digest prefix: write ./NAME for
a directory named like one), compares its copy roots with the snapshot materialized there:
each entry's identity (inode, size, mode, mtime, ctime) against the ledger the store keeps
of what materialize made; files whose identity matches are not opened. A clone the store
holds no ledger of is re-hashed instead; a ledger of another snapshot is SEAL_BINDING.
  --verify    re-hash every file of the copy roots (as verify --clone does) instead
  --all       also list what the clone holds outside its copy roots and mount targets (o)`,
  options: { verify: { type: 'boolean' }, all: { type: 'boolean' } },
  run: diff,
};
