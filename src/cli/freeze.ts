// freeze.ts: `treeseal freeze` and `thaw`: a tree made read-only, or writable again.
import { resolve } from 'node:path';

import { escapePath, freezeSync, thawSync } from '../index.js';
import { need, type CommandSpec, type Context } from './command.js';

async function run(ctx: Context): Promise<void> {
  const thawing = ctx.command === 'thaw';
  need(ctx, 1, 'one <dir>');
  const dir = resolve(ctx.args[0]!);
  if (thawing) thawSync(dir);
  else freezeSync(dir);
  ctx.io.emit({ [thawing ? 'thawed' : 'frozen']: dir }, `${thawing ? 'thawed' : 'froze'} ${escapePath(dir)}`);
}

export const FREEZE: CommandSpec = {
  name: 'freeze',
  synopsis: 'freeze <dir>',
  summary: 'make a tree read-only',
  help: `usage: treeseal freeze <dir>

Makes a tree read-only: files 0400 (0500 when executable), directories 0500. Never follows a symlink.`,
  run,
};

export const THAW: CommandSpec = {
  name: 'thaw',
  synopsis: 'thaw <dir>',
  summary: 'make a frozen tree writable again',
  help: `usage: treeseal thaw <dir>

Makes a frozen tree writable again: files 0600, directories 0700. Never follows a symlink.`,
  run,
};
