#!/usr/bin/env node
// run.mjs: `npm run torture [-- --short] [-- --only races,kills,malformed,hostile-registry,mmap,hostile-arm]`: attacks the built, packed
// package from separate processes on ext4 and XFS loop mounts and prints a table; exits 1 on any violation.
import { installPackage, loopMount, makeWorkDir, cleanupAll, onCleanup } from './env.mjs';
import { runHostileArm } from './hostile-arm.mjs';
import { runHostileRegistry } from './hostile-registry.mjs';
import { runKills } from './kills.mjs';
import { runMalformed } from './malformed.mjs';
import { runMmap } from './mmap.mjs';
import { runRaces } from './races.mjs';
import { render, totalViolations } from './table.mjs';

const argv = process.argv.slice(2);
const short = argv.includes('--short');
const onlyArg = argv.find((a) => a.startsWith('--only='));
const only = new Set(onlyArg ? onlyArg.slice(7).split(',') : ['races', 'kills', 'malformed', 'hostile-registry', 'mmap', 'hostile-arm']);
const listArg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3).split(',');
const kinds = listArg('kinds');
const fsList = listArg('fs') ?? ['ext4', 'xfs'];
const envTrials = process.env.TORTURE_TRIALS === undefined ? undefined : Number(process.env.TORTURE_TRIALS);
if (envTrials !== undefined && !(Number.isSafeInteger(envTrials) && envTrials > 0)) {
  console.error('TORTURE_TRIALS must be a positive integer');
  process.exit(2);
}
// --short is CI's run (once per filesystem, beside the unprivileged suites and the fault run, in a 10-minute budget).
const raceTrials = envTrials ?? (short ? 4 : 100);
const killTrials = envTrials === undefined ? (short ? 3 : 50) : Math.max(1, Math.round(envTrials / 2));

const log = (msg) => process.stderr.write(`torture: ${msg}\n`);
const started = performance.now();
const base = makeWorkDir();
const pkg = installPackage(base, log);
const ctx = { ...pkg, base };
const fsRoots = Object.fromEntries(fsList.map((fs) => [fs, loopMount(base, fs)]));
log(`package from ${pkg.source}; work dir ${base}; ${raceTrials} race trials a kind, ${killTrials} kills a kind`);

let printed = false;
function report(note = '') {
  printed = true;
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  console.log(`treeseal torture (${short ? 'short' : 'full'}${note}, package from ${pkg.source}, ${seconds} s)\n`);
  console.log(render({ maxDetails: short ? 5 : 20 }));
}
// An interrupted run still prints what it has done (before the work dir is torn down).
onCleanup(() => {
  if (!printed) report(', INTERRUPTED: partial');
});

// The three parts run side by side; races also run the filesystems side by side.
const parts = [];
if (only.has('races')) parts.push(runRaces(ctx, { trials: raceTrials, fsRoots, log, kinds }));
if (only.has('kills')) parts.push(runKills(ctx, { trials: killTrials, fsRoots, log }));
if (only.has('malformed')) parts.push(runMalformed(ctx, { fsRoots, log, half: short }));
if (only.has('mmap')) parts.push(runMmap(ctx, { rounds: short ? 2 : 10, fsRoots, log }));
if (only.has('hostile-registry')) parts.push(runHostileRegistry(ctx, { trials: short ? 22 : 200, fsRoots, log }));
// hostile arm: rounds per fs, each of every attack once sync and once async (32 trials a round on each fs).
if (only.has('hostile-arm')) parts.push(runHostileArm(ctx, { trials: short ? 1 : 9, oneMode: short, fsRoots, log, attacks: listArg('attacks') }));
const outcomes = await Promise.allSettled(parts);
for (const o of outcomes) {
  if (o.status === 'rejected') {
    log(`aborted: ${o.reason?.stack ?? o.reason}`);
    process.exitCode = 3;
  }
}
report();
cleanupAll();
if (totalViolations() > 0) process.exitCode = 1;
