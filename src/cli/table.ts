// table.ts: every subcommand, in the order `treeseal help` lists them, and `treeseal help [command]` itself.
import { CAPTURE } from './capture.js';
import { UsageError, type CommandSpec, type Context } from './command.js';
import { FREEZE, THAW } from './freeze.js';
import { commandHelp, mainHelp } from './help.js';
import { DIFF, LS, SHOW } from './inspect.js';
import { MATERIALIZE } from './materialize.js';
import { MOUNTS } from './mounts.js';
import { GC, RM } from './remove.js';
import { CAT, PULL, PUSH } from './remote.js';
import { RESET } from './reset.js';
import { RUN } from './run.js';
import { unknownCommand } from './suggest.js';
import { DU } from './usage.js';
import { VERIFY } from './verify.js';

function help(ctx: Context): void {
  if (ctx.args.length > 1) throw new UsageError('help takes at most one <command>', 'help');
  const name = ctx.args[0];
  if (name === undefined) {
    ctx.io.out(`${mainHelp(COMMANDS)}\n`);
    return;
  }
  const spec = findCommand(name);
  if (spec === undefined) throw new UsageError(unknownCommand(name, COMMANDS), '');
  ctx.io.out(`${commandHelp(spec)}\n`);
}

const HELP: CommandSpec = {
  name: 'help',
  synopsis: 'help [<command>]',
  summary: "show this help, or one command's",
  help: `usage: treeseal help [<command>]

Shows the list of commands, or the help of one.`,
  run: help,
};

export const COMMANDS: readonly CommandSpec[] = [CAPTURE, MATERIALIZE, RESET, MOUNTS, RUN, VERIFY, LS, DU, SHOW, DIFF, RM, GC, PUSH, PULL, CAT, FREEZE, THAW, HELP];

export function findCommand(name: string): CommandSpec | undefined {
  return COMMANDS.find((c) => c.name === name);
}
