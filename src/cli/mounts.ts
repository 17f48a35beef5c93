// mounts.ts: `treeseal mounts`: a snapshot's mount points made inside a clone, printed as JSON, bwrap or docker arguments.
import { resolve } from 'node:path';

import { SealError, escapePath, type MountPoint, type Snapshot } from '../index.js';
import { choiceOption, need, stringOption, type CommandSpec, type Context } from './command.js';
import { hasControl, terminalSafeJson } from './format.js';

const FORMATS = ['json', 'bwrap', 'docker'] as const;

type Planned = MountPoint;

function plan(snap: Snapshot, clone: string, workspace: string | undefined): Planned[] {
  return snap.mountPoints(clone, workspace === undefined ? {} : { workspace });
}

/**
 * Refuses (SEAL_BAD_PATH) a word holding a control character (C0, DEL, C1): raw, it would
 * reach a terminal (an escape retitles it, a newline forges a line); as `$'\ooo'` it reads
 * back as itself in bash but as other bytes in dash, Debian's sh (another path, one another
 * user may own).
 */
function refuseControls(word: string): void {
  if (hasControl(word)) {
    throw new SealError('SEAL_BAD_PATH', `a path holding a control character cannot be printed as shell words that every sh reads back as itself: use --format json (or --json): ${escapePath(word)}`);
  }
}

/** One word for sh: left bare when it is safe, else single-quoted (a control character refused). */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  refuseControls(word);
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** One field of docker's comma-separated --mount value, quoted as CSV when it holds a comma or a quote. */
function csvField(field: string): string {
  return /[",\n]/.test(field) ? `"${field.replace(/"/g, '""')}"` : field;
}

function bwrapArgs(mounts: Planned[]): string[] {
  return mounts.flatMap((m) => [['--ro-bind', m.source, m.target], ...m.tmpfs.map((t) => ['--tmpfs', t])].flat());
}

function dockerArgs(mounts: Planned[]): string[] {
  return mounts.flatMap((m) => [
    '--mount',
    ['type=bind', `src=${m.source}`, `dst=${m.target}`, 'readonly'].map(csvField).join(','),
    ...m.tmpfs.flatMap((t) => ['--mount', ['type=tmpfs', `dst=${t}`].map(csvField).join(',')]),
  ]);
}

async function run(ctx: Context): Promise<void> {
  need(ctx, 2, '<digest> <clone>');
  const format = choiceOption(ctx, 'format', FORMATS, 'json');
  const snap = (await ctx.store()).get(ctx.args[0]!);
  const workspace = stringOption(ctx, 'workspace');
  // Every word printed holds one of these: refused before a mount point is made.
  if (format !== 'json' && !ctx.io.json) for (const part of [workspace ?? '', snap.root, ...snap.mounts.map((m) => m.target)]) refuseControls(part);
  const mounts = plan(snap, resolve(ctx.args[1]!), workspace);
  if (format === 'json') {
    ctx.io.out(`${terminalSafeJson(JSON.stringify(mounts, null, 2))}\n`);
    return;
  }
  const args = format === 'bwrap' ? bwrapArgs(mounts) : dockerArgs(mounts);
  // As JSON the words are printed escaped, whatever they hold; as shell words only when each reads back as itself.
  ctx.io.emit(args, ctx.io.json ? '' : args.map(shellQuote).join(' '));
}

export const MOUNTS: CommandSpec = {
  name: 'mounts',
  synopsis: 'mounts <digest> <clone>',
  summary: 'make mount points in a clone and print how to mount the payloads',
  help: `usage: treeseal mounts <digest> <clone> [--workspace DIR] [--format json|bwrap|docker]

Makes each mount target of a snapshot inside the directory <clone> (an empty directory, or
an empty file for a file mount) and prints where the frozen payloads mount, read-only, in a
sandbox that binds <clone> at DIR (default /workspace):
  --format json    [{ source, target, readOnly, tmpfs }] (the default)
  --format bwrap   bubblewrap arguments, shell-quoted: --ro-bind SRC DST for each mount, and
                   --tmpfs DST/.vite-temp where the payload holds an empty .vite-temp
  --format docker  docker run arguments, shell-quoted: --mount type=bind,src=SRC,dst=DST,readonly
                   (and type=tmpfs for .vite-temp)
With --json, bwrap and docker arguments print as one JSON list of words instead.`,
  options: {
    workspace: { type: 'string' },
    format: { type: 'string' },
  },
  run,
};
