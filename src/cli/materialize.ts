// materialize.ts: `treeseal materialize`: a snapshot's copy roots into a clone directory.
import { join, resolve } from 'node:path';

import { escapePath, type MaterializeReport } from '../index.js';
import { choiceOption, need, plural, type CommandSpec, type Context } from './command.js';
import type { Io } from './io.js';
import { bytes, ms } from './format.js';
import { sizeOption } from './usage.js';

/** The values of --reflink (materialize and reset). */
export const REFLINK = ['auto', 'always', 'never'] as const;

async function run(ctx: Context): Promise<void> {
  need(ctx, 2, '<digest> <clone>');
  const { io } = ctx;
  const reflink = choiceOption(ctx, 'reflink', REFLINK, 'auto');
  const fallbackBytes = sizeOption(ctx, 'fallback-bytes');
  const store = await ctx.store();
  const snap = store.get(ctx.args[0]!);
  const clone = resolve(ctx.args[1]!);
  // Progress counts entries of every kind made (files, directories, symlinks), so the total does too.
  const line = io.progress('materializing', { entries: snap.entries.length, bytes: snap.entries.reduce((n, e) => n + (e.kind === 'file' ? e.size : 0), 0) });
  const report = snap.materializeSync(clone, {
    reflink,
    createClone: true,
    ...(fallbackBytes === undefined ? {} : { fallbackBytes }),
    onProgress: (p) => line.update(p),
  });
  line.done();
  if (!io.json) warnAfterMaterialize(io, report, clone, store.readOnly);
  // --json carries the reason as copyReason; a person gets it on stderr.
  if (report.copyReason !== undefined && !io.json) {
    io.warn(`treeseal: warning: ${plural(report.copied, 'file')} copied, not reflinked: ${report.copyReason}; --reflink never copies without this warning`);
  }
  io.emit(
    { digest: snap.digest, clone, ...report },
    `${report.reset ? 'reset (the clone held its ledger: only what differed was made again)' : 'materialized'} ${snap.digest.slice(0, 12)} into ${escapePath(clone)}: ${plural(report.files, 'file')}, ${plural(report.directories, 'directory', 'directories')}${report.symlinks === 0 ? '' : `, ${plural(report.symlinks, 'symlink')}`} ` +
      `(${report.snapshotted === 0 ? '' : `${plural(report.snapshotted, 'root')} snapshotted, `}${report.reflinked} reflinked, ${report.copied} copied, ${bytes(report.bytesCopied)} buffered) in ${ms(report.elapsedMs)}` +
      report.fallbacks.map((f) => `\nnot snapshotted: ${escapePath(f.root)}: ${f.reason}`).join('') +
      (snap.mounts.length === 0 ? '' : `\n${plural(snap.mounts.length, 'mount')} to bind read-only: treeseal mounts ${snap.digest.slice(0, 12)} ${escapePath(clone)}`),
  );
}

/**
 * Says on stderr what a materialize or reset that succeeded could not do (--json carries
 * both): where it left the tree it replaced (stageLeft), and a ledger it could not save
 * (but through a store on a read-only filesystem, which keeps none: no news at each call).
 */
export function warnAfterMaterialize(io: Io, report: MaterializeReport, clone: string, readOnlyStore = false): void {
  if (report.stageLeft !== undefined) {
    io.warn(
      `treeseal: warning: what the clone held before could not be removed: it stays in ${escapePath(join(clone, report.stageLeft.path))} until it can be (then the next materialize or reset of the clone, or treeseal gc --clone, removes it): ${report.stageLeft.reason}`,
    );
  }
  if (report.ledgerNotSaved !== undefined && !readOnlyStore) {
    io.warn(`treeseal: warning: the clone's ledger could not be saved in the store (the next diff re-hashes every file, the next reset is whole): ${report.ledgerNotSaved}`);
  }
}

export const MATERIALIZE: CommandSpec = {
  name: 'materialize',
  synopsis: 'materialize <digest> <clone>',
  summary: "replace the snapshot's copy roots inside a clone",
  help: `usage: treeseal materialize <digest> <clone> [--reflink auto|always|never] [--fallback-bytes SIZE]

Replaces each copy root of a snapshot inside the directory <clone>, copy-on-write where the filesystem can.
<clone> is created when only its last component is missing. Mounts are not touched: see \`treeseal mounts\`.
A clone this snapshot was materialized into before is reset instead (see \`treeseal reset\`).
  --reflink MODE        auto (default): clone, else copy within the fallback budget; always: clone or fail; never: copy
  --fallback-bytes SIZE most bytes to copy without cloning (default 512M; a count or a size such as 2G)`,
  options: {
    reflink: { type: 'string' },
    'fallback-bytes': { type: 'string' },
  },
  run,
};
