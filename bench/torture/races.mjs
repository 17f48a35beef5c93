// races.mjs: the nine race kinds. A mutator process rewrites the source with whole known versions
// while a driver process captures it; each result must be a typed error that left nothing behind, or
// a snapshot whose every file is a version it really had and that holds nothing from outside.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { dropTree } from './env.mjs';
import { KINDS, buildSource, checkTree, makeSecret, readCaptured, secretHits, sha256 } from './oracle.mjs';
import { Peer } from './proc.mjs';
import { count, flag, row } from './table.mjs';

const CAPTURE_TIMEOUT_MS = 60000;

export function startDriver(ctx, async, { cwd = ctx.project } = {}) {
  return new Peer(process.execPath, [join(ctx.scripts, 'driver.mjs'), ...(async ? ['--async'] : [])], { cwd });
}

/** Waits for a driver's ready line. */
export async function ready(peer) {
  const msg = await peer.next(30000);
  if (!msg.ready) throw new Error(`driver did not start: ${JSON.stringify(msg)} ${peer.stderr}`);
  return peer;
}

export function tmpLeftovers(store) {
  const tmp = join(store, 'tmp');
  return existsSync(tmp) ? readdirSync(tmp) : [];
}

/** The checks every failed call must pass: a SealError with a known code, no fd leaked. */
export function errorViolations(res) {
  const bad = [];
  const e = res.error;
  if (!e.sealError) bad.push(`untyped error ${e.name} ${e.code ?? ''}: ${e.message}`);
  else if (!e.knownCode) bad.push(`SealError with unknown code ${e.code}`);
  if (res.leaked.length > 0) bad.push(`fd leaked: ${res.leaked.join(', ')}`);
  return bad;
}

function checkSnapshot(res, trial, secret) {
  const bad = [];
  const { root, data } = res.result;
  if (res.leaked.length > 0) bad.push(`fd leaked: ${res.leaked.join(', ')}`);
  let files;
  try {
    files = readCaptured(root, data, trial.mount);
  } catch (err) {
    return [...bad, `snapshot unreadable: ${err.message}`];
  }
  for (const [path, f] of files) {
    if (f.kind === 'file' && sha256(f.bytes) !== f.sha256) bad.push(`${path}: bytes do not match the manifest hash`);
  }
  bad.push(...checkTree(files, trial));
  bad.push(...secretHits(trial.store, secret).map((h) => `secret bytes captured: ${h}`));
  return bad;
}

async function oneTrial(ctx, lane, block, t) {
  const seed = `${block.kind}-${block.fs}-${block.mode}-${t}-${randomBytes(4).toString('hex')}`;
  const dir = join(block.dir, `t${t}`);
  const trial = {
    kind: block.kind,
    seed,
    store: join(dir, 'store'),
    src: join(dir, 'src'),
    mount: t % 3 === 2,
    paceUs: [0, 40, 250, 1500, 30000, 150000][Math.floor(Math.random() * 6)],
    parallelism: t % 4 === 1 ? 2 : 0,
  };
  buildSource(trial.src, { kind: block.kind, seed, secret: lane.secret, trial: t });
  const driverKey = block.mode === 'async' ? 'asyncDriver' : 'driver';
  const driver = lane[driverKey];
  const started = await lane.mutator.request({ op: 'start', kind: trial.kind, src: trial.src, seed, paceUs: trial.paceUs }, 30000);
  if (!started.started) throw new Error(`mutator: ${JSON.stringify(started)}`);
  const decl = trial.mount ? { mounts: [{ source: 'tree', target: 'tree' }] } : { copy: ['tree'] };
  let res;
  try {
    res = await driver.request({ op: 'capture', args: { store: trial.store, source: trial.src, parallelism: trial.parallelism, ...decl } }, CAPTURE_TIMEOUT_MS);
  } catch (err) {
    res = { hang: err.message };
  }
  const stopped = await lane.mutator.request({ op: 'stop' }, 30000);
  if (!stopped.stopped) throw new Error(`mutator: ${JSON.stringify(stopped)}`);
  trial.count = stopped.count;
  const label = `trial ${t} (${trial.mount ? 'mount' : 'copy'}, pace ${trial.paceUs} us, parallelism ${trial.parallelism}, ${trial.count} versions)`;
  let bad;
  let refusedCode;
  if (res.hang !== undefined) {
    bad = [`capture: ${res.hang}`];
    driver.kill();
    lane[driverKey] = await ready(startDriver(ctx, block.mode === 'async'));
  } else if (!res.ok) {
    refusedCode = res.error.sealError ? res.error.code : `untyped ${res.error.code ?? res.error.name}`;
    bad = errorViolations(res);
  } else {
    bad = checkSnapshot(res, trial, lane.secret);
  }
  const left = tmpLeftovers(trial.store);
  if (left.length > 0) bad.push(`store tmp/ not empty: ${left.join(', ')}`);
  count(block.row, bad, { refusedCode, label });
  dropTree(dir);
}

/**
 * Runs `trials` trials of every kind on every fs, sync and async. The filesystems run side by
 * side, each with one mutator process and one sync driver; trial t of every kind and mode runs
 * before trial t + 1, so a run cut short has covered every row evenly. Each round (trial t of
 * every kind) has an async driver of its own, which must then exit by itself: a capture, failed
 * or not, that left a thread, handle or timer behind keeps it alive.
 */
export async function runRaces(ctx, { trials, fsRoots, log, kinds = KINDS }) {
  const lanes = Object.entries(fsRoots).map(([fs, root]) => ({
    fs,
    dir: join(root, 'races'),
    blocks: kinds.flatMap((kind) => ['sync', 'async'].map((mode) => ({ kind, mode, dir: join(root, 'races', `${kind}-${mode}`) }))),
  }));
  for (const kind of kinds) {
    for (const lane of lanes) for (const b of lane.blocks.filter((x) => x.kind === kind)) b.row = row(kind, lane.fs, b.mode);
  }
  await Promise.all(lanes.map((lane) => runLane(ctx, lane, trials, log)));
}

async function runLane(ctx, lane, trials, log) {
  mkdirSync(lane.dir, { recursive: true });
  lane.secret = makeSecret(`${lane.dir}-secret`, randomBytes(32));
  const secretBefore = sha256(readFileSync(lane.secret.key));
  lane.mutator = new Peer(process.execPath, [join(ctx.scripts, 'mutator.mjs')], { cwd: ctx.project });
  lane.driver = await ready(startDriver(ctx, false));
  const t0 = performance.now();
  for (let t = 0; t < trials; t++) {
    lane.asyncDriver = await ready(startDriver(ctx, true));
    for (const block of lane.blocks) {
      mkdirSync(block.dir, { recursive: true });
      await oneTrial(ctx, lane, block, t);
    }
    const asyncDriver = lane.asyncDriver;
    await asyncDriver.close();
    if (asyncDriver.exited.signal !== null || asyncDriver.exited.code !== 0) {
      const first = lane.blocks.find((b) => b.mode === 'async');
      flag(first.row, [`async driver did not exit cleanly (${JSON.stringify(asyncDriver.exited)}): ${asyncDriver.stderr.slice(-300)}`], `round ${t}`);
    }
    if ((t + 1) % 10 === 0 || t + 1 === trials) log(`races on ${lane.fs}: ${t + 1} of ${trials} trials of each kind and mode (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  await lane.mutator.close();
  await lane.driver.close();
  if (sha256(readFileSync(lane.secret.key)) !== secretBefore) flag(lane.blocks[0].row, ['the secret outside the source was modified'], 'after the run');
  dropTree(lane.dir);
  dropTree(lane.secret.dir);
}
