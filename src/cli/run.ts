// run.ts: `treeseal run`: a snapshot materialized into a clone (once, or again with --reset) and a command run in it inside bubblewrap.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';

import { SealError, checkSandboxArgs, checkSandboxClone, findBubblewrap, spawnSandboxed, type Snapshot } from '../index.js';
import { UsageError, flag, stringOption, type CommandSpec, type Context } from './command.js';
import { warnAfterMaterialize } from './materialize.js';
import { RUN_OWN_FAILURE } from './own-failure.js';
import { cloneLines } from './verify.js';

async function run(ctx: Context): Promise<number> {
  if (ctx.args.length < 3) throw new UsageError('run takes <digest> <clone> -- <command> [<arg>...]', 'run');
  const [digest, cloneArg, ...command] = ctx.args as [string, string, ...string[]];
  const clone = resolve(cloneArg);
  const workspace = stringOption(ctx, 'workspace');
  // Before the clone is made: a run that cannot start leaves nothing behind.
  findBubblewrap(process.env, clone);
  checkSandboxArgs({ network: flag(ctx, 'network'), ...(workspace === undefined ? {} : { workspace }) });
  checkSandboxClone(clone);
  const snap = (await ctx.store()).get(digest);
  // Held until the command ends: an rm of the snapshot meanwhile is SEAL_BUSY, not a payload emptied under the command.
  const lease = snap.lease();
  try {
    return await runLeased(ctx, snap, clone, command, workspace);
  } finally {
    try {
      lease.release();
    } catch (err) {
      // Its flock ended with its fd: the file left is gc's to sweep. The status stays the command's.
      ctx.io.warn(`treeseal: run: the lease on snapshot ${snap.digest} ended, but its file was left: ${err instanceof SealError ? `${err.code}: ${err.message}` : String(err)}`);
    }
  }
}

async function runLeased(ctx: Context, snap: Snapshot, clone: string, command: string[], workspace: string | undefined): Promise<number> {
  if (flag(ctx, 'reset') || !existsSync(clone)) warnAfterMaterialize(ctx.io, snap.materializeSync(clone, { createClone: true }), clone, (await ctx.store()).readOnly);
  // Bound by the directory opened, not by its path (which bwrap would resolve again), and no fd of this process inherited.
  const child = await spawnSandboxed(snap, clone, command, { network: flag(ctx, 'network'), ...(workspace === undefined ? {} : { workspace }) });
  // An interrupt or a termination of this process goes to bubblewrap (which ends the sandbox with it), and the run
  // ends as the command did: its lease and the clone's lock are let go (killed outright, they were left for gc).
  const forward = (signal: NodeJS.Signals): void => {
    child.kill(signal);
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const signal of signals) process.on(signal, forward);
  let status: number;
  try {
    // The command's status as bubblewrap reports it; bubblewrap failing before the command ran is SEAL_UNAVAILABLE, not a status the command never had.
    status = await child.commandExit;
  } finally {
    for (const signal of signals) process.off(signal, forward);
  }
  if (!flag(ctx, 'keep-going')) return status;
  // What the command changed: the clone against its ledger, printed after the command's own output. A diff that
  // fails (the command made the clone unreadable to this user) is said, and the status is still the command's.
  let report: ReturnType<typeof snap.diffSync>;
  try {
    report = snap.diffSync(clone);
  } catch (err) {
    if (!(err instanceof SealError)) throw err;
    ctx.io.warn(`treeseal: run: what the command changed is unknown: ${err.code}: ${err.message}`);
    ctx.io.emit({ clone, status, error: { code: err.code, message: err.message } }, '');
    return status;
  }
  const differs = !report.ok || report.outside.length > 0;
  ctx.io.emit({ clone, status, ...report }, cloneLines(report, clone, `${differs ? 'DIFFERS' : 'same'} (${report.method})`).join('\n'));
  return status;
}

export const RUN: CommandSpec = {
  name: 'run',
  synopsis: 'run <digest> <clone> -- <command> [<arg>...]',
  summary: 'run a command in a clone inside bubblewrap, the payloads read-only',
  help: `usage: treeseal run <digest> <clone> [--reset] [--keep-going] [--network] [--workspace DIR] -- <command> [<arg>...]

Materializes the snapshot into <clone> when <clone> does not exist yet (with --reset: again,
whatever it holds, so the copy roots are exactly the snapshot's), makes the mount points,
and runs <command> in bubblewrap: <clone> bound read-write at DIR (default /workspace) and
the working directory there, each payload read-only at its target (with a writable tmpfs
on .vite-temp), the host's /usr and /etc read-only, a private /dev, /proc and /tmp, every
namespace unshared and no network unless --network, in a new session; the clone is bound
as the directory opened (its path is not resolved again), and no fd of this process
reaches the command. The exit status is the command's (128 + the signal that killed it),
or 125 when treeseal run itself failed (as env, timeout and docker run say it): a usage
error, a SealError (the snapshot, the store, the clone), or bubblewrap that could not run
the command at all (no user namespace for this user, a kernel without seccomp filters, the
command not found inside: SEAL_UNAVAILABLE after bubblewrap's own message). The snapshot
is leased while the command runs: \`treeseal rm\` of it meanwhile is SEAL_BUSY; so is a
materialize, reset or second run of <clone> through the same store (retried twice, then
said), which would rewrite it under the command. With --keep-going, once the command
ends (whatever its status), prints what it changed in the copy roots, as treeseal diff
<digest> <clone> does (with --json, one JSON object that also holds the command's status);
the exit status is still the command's. A diff that fails (the command made the clone
unreadable to this user, or it holds another snapshot's ledger) is said on stderr (with
--json: { clone, status, error: { code, message } }), and the exit status is still the
command's. Library: sandboxArgs(snap, clone, options).`,
  options: {
    reset: { type: 'boolean' },
    'keep-going': { type: 'boolean' },
    network: { type: 'boolean' },
    workspace: { type: 'string' },
  },
  // Every other status is the command's: a harness tells a sandbox that never ran from tests that failed.
  ownFailureStatus: RUN_OWN_FAILURE,
  run,
};
