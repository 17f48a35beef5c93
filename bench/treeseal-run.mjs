// treeseal-run.mjs: one fresh-process run of treeseal for the benchmark: async open, capture and materialize as a harness calls them, then the sync twins.
// usage: node treeseal-run.mjs JSON  (JSON: { dist, source, storeA, storeB, storeC, clones: [3 paths], flip: bool, pairs: bool })
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';

const args = JSON.parse(process.argv[2]);
const { SnapshotStore } = await import(`${args.dist}/index.js`);
const capture = { source: args.source, copy: ['tree'], revision: 'bench' };
const materialize = { fallbackBytes: 8 * 2 ** 30 };
const out = {};

/** Flushes dirty pages so no step pays for the writeback of the one before (not timed). */
const quiet = () => execFileSync('sync');

/** Further sync/async materialize pairs per process, beside the first of each (see the overhead row). */
const MATERIALIZE_PAIRS = 3;

/** fn's wall time in ms, the machine's dirty pages flushed first. */
async function timedMs(fn) {
  quiet();
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function timed(name, fn) {
  quiet();
  const t = performance.now();
  const r = await fn();
  out[name] = performance.now() - t;
  return r;
}

const storeA = await timed('open', () => SnapshotStore.open(args.storeA));
const delay = monitorEventLoopDelay({ resolution: 1 });
delay.enable();
const snap = await timed('capture', () => storeA.capture(capture));
delay.disable();
out.loopP99 = delay.percentile(99) / 1e6;
out.loopMax = delay.max / 1e6;
mkdirSync(args.clones[0]);
const report = await timed('materialize', () => snap.materialize(args.clones[0], materialize));
out.reflinked = report.reflinked;
out.snapshotted = report.snapshotted ?? 0;
out.files = report.files;
out.manifest = snap.manifestDigest;

// The overhead pairs: the same call sync and async (order flipped every other rep); async minus sync is the cost of the thread hop.
const storeB = SnapshotStore.openSync(args.storeB);
const storeC = await SnapshotStore.open(args.storeC);
let b;
let c;
const pairs = [
  async () => {
    b = await timed('captureSync', () => storeB.captureSync(capture));
    mkdirSync(args.clones[1]);
    await timed('materializeSync', () => b.materializeSync(args.clones[1], materialize));
  },
  async () => {
    c = await timed('captureAsync', () => storeC.capture(capture));
    mkdirSync(args.clones[2]);
    await timed('materializeAsync', () => c.materialize(args.clones[2], materialize));
  },
];
if (args.flip) pairs.reverse();
if (args.pairs !== false) {
  for (const pair of pairs) await pair();
  // Then MATERIALIZE_PAIRS more of each into fresh clones, sync and async alternating (which first flips each time):
  // one pair's difference swings by ±90 ms with the machine, the median of several does not.
  out.materializeDiffs = [];
  for (let k = 0; k < MATERIALIZE_PAIRS; k++) {
    const t = {};
    const runs = [
      async () => {
        mkdirSync(`${args.clones[1]}-${k}`);
        t.sync = (await timedMs(() => b.materializeSync(`${args.clones[1]}-${k}`, materialize)));
      },
      async () => {
        mkdirSync(`${args.clones[2]}-${k}`);
        t.async = (await timedMs(() => c.materialize(`${args.clones[2]}-${k}`, materialize)));
      },
    ];
    if ((k % 2 === 1) !== args.flip) runs.reverse();
    for (const r of runs) await r();
    out.materializeDiffs.push(t.async - t.sync);
  }
}
storeB.closeSync();
await storeC.close();
await storeA.close();
out.maxRssMB = process.resourceUsage().maxRSS / 1024;
console.log(JSON.stringify(out));
