// mmap.mjs: writes through shared mappings that stay dirty across a capture (a write after the first one sets no time on a page
// still mapped writable). Each round dirties files through MAP_SHARED mappings, captures with the stat cache, writes some of
// them again through the same mappings, and recaptures: the recapture must equal a capture that reads every byte.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { dropTree } from './env.mjs';
import { sleep, track } from './proc.mjs';
import { ready, startDriver } from './races.mjs';
import { count, row } from './table.mjs';

const FILES = 16;
const SIZE = 64 * 1024;
/** More than the stat cache's racy window: the first writes are old enough to be trusted by the capture after them. */
const SETTLE_MS = 2200;

/** A python3 process holding every file MAP_SHARED; `w I BYTE` writes BYTE at offset 0 of file I and answers `ok`. */
const WRITER = `
import mmap, sys
maps = []
for p in sys.argv[1:]:
    f = open(p, 'r+b')
    maps.append(mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
print('ready', flush=True)
for line in sys.stdin:
    _, i, b = line.split()
    maps[int(i)][0:1] = bytes([int(b)])
    print('ok', flush=True)
`;

function startWriter(paths) {
  const child = track(spawn('python3', ['-c', WRITER, ...paths], { stdio: ['pipe', 'pipe', 'inherit'] }));
  let buffered = '';
  const waiting = [];
  child.stdout.on('data', (d) => {
    buffered += d;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  const next = () => new Promise((resolve) => waiting.push(resolve));
  return {
    ready: next(),
    async write(i, byte) {
      const answer = next();
      child.stdin.write(`w ${i} ${byte}\n`);
      await answer;
    },
    stop: () => child.kill('SIGKILL'),
  };
}

const CAPTURE = `async ({ treeseal: t, args: a }) => {
  const store = await t.SnapshotStore.open(a.store);
  try { return (await store.capture({ source: a.source, copy: ['files'], statCache: a.statCache })).digest; } finally { await store.close(); }
}`;

async function round(driver, fsDir, i, r) {
  const dir = join(fsDir, `mmap${i}`);
  const source = join(dir, 'src');
  mkdirSync(join(source, 'files'), { recursive: true });
  const paths = Array.from({ length: FILES }, (_, k) => join(source, 'files', `f${k}`));
  for (const p of paths) writeFileSync(p, Buffer.alloc(SIZE, 1));
  const writer = startWriter(paths);
  await writer.ready;
  const capture = async (statCache) => {
    const res = await driver.request({ op: 'run', args: { fn: CAPTURE, args: { store: join(dir, 'store'), source, statCache } } }, 120000);
    if (!res.ok) throw new Error(`capture failed: ${res.error.code} ${res.error.message}`);
    return res.result;
  };
  try {
    // Dirty every page through its mapping, let the racy window pass, capture (the cache records every file).
    for (let k = 0; k < FILES; k++) await writer.write(k, 2);
    await sleep(SETTLE_MS);
    await capture(true);
    // Write some files again through the same (possibly still dirty) mappings: no time may change for them.
    const changed = paths.map((_p, k) => k).filter((k) => (k * 7 + i) % 3 === 0);
    for (const k of changed) await writer.write(k, 3);
    await sleep(SETTLE_MS);
    const cached = await capture(true);
    const full = await capture(false);
    count(r, cached === full ? [] : [`recapture ${cached.slice(0, 12)} differs from a full capture ${full.slice(0, 12)} after ${changed.length} writes through dirty mappings`], { label: `round ${i}` });
  } finally {
    writer.stop();
    dropTree(dir);
  }
}

export async function runMmap(ctx, { rounds, fsRoots, log }) {
  const targets = { ...fsRoots, tmpfs: '/dev/shm' };
  await Promise.all(
    Object.entries(targets).map(async ([fs, root]) => {
      const base = join(root, `mmap-${process.pid}`);
      mkdirSync(base, { recursive: true });
      const driver = await ready(startDriver(ctx, true, { cwd: base }));
      const r = row('mmap writes across a capture', fs, 'async');
      try {
        for (let i = 0; i < rounds; i++) {
          try {
            await round(driver, base, i, r);
          } catch (err) {
            count(r, [`harness: ${err.message}`], { label: `round ${i}` });
          }
        }
      } finally {
        await driver.close();
        dropTree(base);
      }
    }),
  );
  log(`mmap: ${rounds} rounds on ${Object.keys(targets).join(', ')}`);
}
