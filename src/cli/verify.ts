// verify.ts: `treeseal verify`: re-hashes snapshots against their manifests and reports every corrupt one.
import { resolve } from 'node:path';

import { SealError, escapePath, type CloneReport, type SnapshotStore } from '../index.js';
import { need, stringOption, type CommandSpec, type Context } from './command.js';
import { bytes } from './format.js';

function targets(store: SnapshotStore, args: string[]): string[] {
  return args.length === 0 ? store.list() : args.map((d) => store.resolveDigest(d));
}

/** Paths one a line: `+` added, `-` removed, `~` changed, `o` outside the copy roots. */
export function differenceLines(lists: { added: string[]; removed: string[]; changed: string[]; outside?: string[] }): string[] {
  return [
    ...lists.added.map((p) => `+ ${escapePath(p)}`),
    ...lists.removed.map((p) => `- ${escapePath(p)}`),
    ...lists.changed.map((p) => `~ ${escapePath(p)}`),
    ...(lists.outside ?? []).map((p) => `o ${escapePath(p)}`),
  ];
}

/** A clone's differences one a line, the marker, and the summary line. */
export function cloneLines(report: CloneReport & { outside?: string[] }, clone: string, summary: string): string[] {
  const outside = report.outside ?? [];
  return [
    ...differenceLines(report),
    ...report.unreadable.map((p) => `? ${escapePath(p)}  (this user may not list it: what lies below is not known)`),
    ...(report.marker ? ['! a materialize was interrupted (or is running): .treeseal-materializing is in the clone'] : []),
    `${summary}  ${escapePath(clone)}: ${report.added.length} added, ${report.removed.length} removed, ${report.changed.length} changed${report.unreadable.length === 0 ? '' : `, ${report.unreadable.length} unreadable`}${outside.length === 0 ? '' : `, ${outside.length} outside the copy roots`}`,
  ];
}

/** verify <digest> --clone DIR: the clone's copy roots re-hashed against the manifest; exit 1 on any difference or the marker. */
async function verifyClone(ctx: Context, clone: string): Promise<number> {
  need(ctx, 1, 'one <digest> with --clone');
  const report = (await ctx.store()).get(ctx.args[0]!).checkCloneSync(clone);
  ctx.io.emit({ clone, ...report }, cloneLines(report, clone, report.ok ? 'ok' : 'DIFFERS').join('\n'));
  return report.ok ? 0 : 1;
}

async function run(ctx: Context): Promise<number> {
  const clone = stringOption(ctx, 'clone');
  if (clone !== undefined) return verifyClone(ctx, resolve(clone));
  const { io } = ctx;
  const store = await ctx.store();
  const digests = targets(store, ctx.args);
  const results: Record<string, unknown>[] = [];
  const lines: string[] = [];
  for (const digest of digests) {
    try {
      const snap = store.get(digest);
      // Progress counts entries of every kind checked, so the total does too.
      const all = [...snap.entries, ...snap.mounts.flatMap((m) => m.entries)];
      const line = io.progress(`verifying ${digest.slice(0, 12)}`, { entries: all.length, bytes: all.reduce((n, e) => n + (e.kind === 'file' ? e.size : 0), 0) });
      const report = snap.verifySync({ onProgress: (p) => line.update(p) });
      line.done();
      results.push({ digest, ok: true, ...report });
      lines.push(`ok   ${digest}  ${report.entries} entries, ${bytes(report.bytes)}`);
    } catch (err) {
      if (!(err instanceof SealError)) throw err;
      // Corrupt is what the bytes say (SEAL_CORRUPT); a snapshot that could not be read (EMFILE, EIO, EACCES) may be
      // whole: a harness that removes corrupt snapshots must not remove those.
      const corrupt = err.code === 'SEAL_CORRUPT';
      results.push({ digest, ok: false, corrupt, error: { code: err.code, message: err.message } });
      lines.push(`${corrupt ? 'BAD' : 'ERR'}  ${digest}  ${err.code}: ${err.message}`);
    }
  }
  const bad = results.filter((r) => r.ok === false).length;
  const corrupt = results.filter((r) => r.corrupt === true).length;
  lines.push(`${digests.length - bad} ok, ${corrupt} corrupt${bad > corrupt ? `, ${bad - corrupt} not verified (see ${bad - corrupt === 1 ? 'its line' : 'their lines'})` : ''}`);
  io.emit({ ok: bad === 0, snapshots: results }, lines.join('\n'));
  return bad === 0 ? 0 : 1;
}

export const VERIFY: CommandSpec = {
  name: 'verify',
  synopsis: 'verify [<digest>...] | verify <digest> --clone DIR',
  summary: 're-hash snapshots (or a clone) against their manifests',
  help: `usage: treeseal verify [<digest>...]
       treeseal verify <digest> --clone DIR

Re-hashes snapshots against their manifests; with no digest, every snapshot in the store.
Exits 1 when any snapshot is corrupt, after reporting them all.
With --clone, re-hashes DIR's copy roots against the snapshot's manifest instead, names
every added (+), removed (-) and changed (~) path, and says whether an interrupted
materialize left its marker; exits 1 on any difference.`,
  options: { clone: { type: 'string' } },
  run,
};
