#!/usr/bin/env node
// run.mjs: `npm run torture [-- --short] [-- --only races,kills,malformed]`: attacks the built, packed
// package from separate processes on ext4 and XFS loop mounts and prints a table; exits 1 on any violation.
import { installPackage, loopMount, makeWorkDir, cleanupAll } from './env.mjs';
import { runKills } from './kills.mjs';
import { runMalformed } from './malformed.mjs';
import { runRaces } from './races.mjs';
import { render, totalViolations } from './table.mjs';

const argv = process.argv.slice(2);
const short = argv.includes('--short');
const onlyArg = argv.find((a) => a.startsWith('--only='));
const only = new Set(onlyArg ? onlyArg.slice(7).split(',') : ['races', 'kills', 'malformed']);
const listArg = (name) => argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3).split(',');
const kinds = listArg('kinds');
const fsList = listArg('fs') ?? ['ext4', 'xfs'];
const envTrials = process.env.TORTURE_TRIALS === undefined ? undefined : Number(process.env.TORTURE_TRIALS);
if (envTrials !== undefined && !(Number.isSafeInteger(envTrials) && envTrials > 0)) {
  console.error('TORTURE_TRIALS must be a positive integer');
  process.exit(2);
}
const raceTrials = envTrials ?? (short ? 10 : 100);
const killTrials = envTrials === undefined ? (short ? 10 : 50) : Math.max(1, Math.round(envTrials / 2));

const log = (msg) => process.stderr.write(`torture: ${msg}\n`);
const started = performance.now();
const base = makeWorkDir();
const pkg = installPackage(base, log);
const ctx = { ...pkg, base };
const fsRoots = Object.fromEntries(fsList.map((fs) => [fs, loopMount(base, fs)]));
log(`package from ${pkg.source}; work dir ${base}; ${raceTrials} race trials a kind, ${killTrials} kills a kind`);

try {
  if (only.has('races')) await runRaces(ctx, { trials: raceTrials, fsRoots, log, kinds });
  if (only.has('kills')) await runKills(ctx, { trials: killTrials, fsRoots, log });
  if (only.has('malformed')) await runMalformed(ctx, { fsRoots, log });
} catch (err) {
  log(`aborted: ${err.stack ?? err}`);
  process.exitCode = 3;
}

const seconds = ((performance.now() - started) / 1000).toFixed(0);
console.log(`treeseal torture (${short ? 'short' : 'full'}, package from ${pkg.source}, ${seconds} s)\n`);
console.log(render({ maxDetails: short ? 5 : 20 }));
cleanupAll();
if (totalViolations() > 0) process.exitCode = 1;
