// reset.ts: `treeseal reset`: a materialized clone made exactly its snapshot again, restoring only what differs from its ledger.
import { resolve } from 'node:path';
import { escapePath } from '../index.js';
import { choiceOption, flag, need, plural, type CommandSpec, type Context } from './command.js';
import { bytes, ms } from './format.js';
import { sizeOption } from './usage.js';
import { REFLINK, warnAfterMaterialize } from './materialize.js';
import { differenceLines } from './verify.js';

async function run(ctx: Context): Promise<void> {
  need(ctx, 2, '<digest> <clone>');
  const reflink = choiceOption(ctx, 'reflink', REFLINK, 'auto');
  const fallbackBytes = sizeOption(ctx, 'fallback-bytes');
  const store = await ctx.store();
  const snap = store.get(ctx.args[0]!);
  const clone = resolve(ctx.args[1]!);
  const report = snap.resetSync(clone, { reflink, clean: flag(ctx, 'clean'), ...(fallbackBytes === undefined ? {} : { fallbackBytes }) });
  if (!ctx.io.json) warnAfterMaterialize(ctx.io, report, clone, store.readOnly);
  const how =
    report.method === 'reset'
      ? 'reset'
      : 'materialized whole (the store holds no ledger of this clone, or a materialize was interrupted there)';
  const lines = differenceLines(report);
  // Materialized whole, nothing was compared: what differed is not known (not "0 restored").
  const undone = report.method === 'reset' ? `${report.added.length} removed as added, ${report.removed.length + report.changed.length} restored` : 'what differed is not known';
  const snapshotted = report.snapshotted > 0 ? `, ${plural(report.snapshotted, 'root')} snapshotted` : '';
  lines.push(
    `${how} ${snap.digest.slice(0, 12)} in ${escapePath(clone)}: ${undone}` +
      `${report.outside.length === 0 ? '' : `, ${report.outside.length} outside removed`}; ${plural(report.files, 'file')} made ` +
      `(${report.reflinked} reflinked, ${report.copied} copied, ${bytes(report.bytesCopied)} buffered${snapshotted}) in ${ms(report.elapsedMs)}`,
  );
  ctx.io.emit({ digest: snap.digest, clone, ...report }, lines.join('\n'));
}

export const RESET: CommandSpec = {
  name: 'reset',
  synopsis: 'reset <digest> <clone>',
  summary: 'make a materialized clone exactly its snapshot again, touching only what changed',
  help: `usage: treeseal reset <digest> <clone> [--clean] [--reflink auto|always|never] [--fallback-bytes SIZE]

Makes the copy roots of <clone> exactly the snapshot again: what was added is removed (+),
what was removed (-) or changed (~) since materialize (by the ledger the store keeps of
it, as diff compares) is restored from the snapshot, copy-on-write where it can; directory
modes are fixed; nothing unchanged is touched, and nothing in the clone is followed. A clone
the store holds no ledger of is materialized whole; a ledger of another snapshot is
SEAL_BINDING, nothing changed.
  --clean               also remove what the clone holds outside its copy roots and mount targets (o)
  --reflink MODE        as for materialize
  --fallback-bytes SIZE as for materialize`,
  options: {
    clean: { type: 'boolean' },
    reflink: { type: 'string' },
    'fallback-bytes': { type: 'string' },
  },
  run,
};
