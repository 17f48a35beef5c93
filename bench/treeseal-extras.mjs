// treeseal-extras.mjs: the benchmark's one-off measures, each in a fresh process: peak RSS of a capture, verify threads, ephemeral close.
// usage: node treeseal-extras.mjs rss|verify|close JSON  (JSON: { dist, source, store })
import { execFileSync } from 'node:child_process';

const [mode, json] = process.argv.slice(2);
const args = JSON.parse(json);
const { SnapshotStore } = await import(`${args.dist}/index.js`);
const capture = { source: args.source, copy: ['tree'], revision: 'extras' };
const ms = (t) => performance.now() - t;

if (mode === 'rss') {
  // Peak resident memory of the whole process (every thread) over an async capture, read
  // as it returns (before the entries are listed as objects, which a harness need not do).
  const store = await SnapshotStore.open(args.store, { ephemeral: true });
  const snap = await store.capture({ ...capture, limits: { maxEntries: 2_000_000 } });
  const maxRssMB = process.resourceUsage().maxRSS / 1024;
  const entries = snap.entries.length + snap.mounts.reduce((n, m) => n + m.entries.length, 0);
  await store.close();
  console.log(JSON.stringify({ maxRssMB, entries }));
} else if (mode === 'verify') {
  // verify with the helper pool against one thread, alternating, three of each.
  const store = await SnapshotStore.open(args.store, { ephemeral: true });
  const snap = await store.capture(capture);
  const single = [];
  const pooled = [];
  for (let i = 0; i < 3; i++) {
    let t = performance.now();
    await snap.verify({ parallelism: 0 });
    single.push(ms(t));
    t = performance.now();
    await snap.verify();
    pooled.push(ms(t));
  }
  await store.close();
  console.log(JSON.stringify({ single, pooled }));
} else if (mode === 'close') {
  // What removing an ephemeral store costs against the capture that filled it.
  const store = await SnapshotStore.open(args.store, { ephemeral: true });
  execFileSync('sync');
  let t = performance.now();
  await store.capture(capture);
  const captureMs = ms(t);
  execFileSync('sync');
  t = performance.now();
  await store.close();
  console.log(JSON.stringify({ capture: captureMs, close: ms(t) }));
} else {
  throw new Error(`unknown mode ${mode}`);
}
