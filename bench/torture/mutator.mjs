// mutator.mjs: the race trials' attacker, a separate process. On {op:'start'} it changes the source
// tree again and again, each step one syscall that leaves a whole known version; on {op:'stop'} it
// finishes the step in hand and answers how many versions it made.
import { chmodSync, closeSync, ftruncateSync, openSync, renameSync, unlinkSync, writeFileSync, writeSync, constants } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { execFileSync } from 'node:child_process';
import { sys, AT_FDCWD, RENAME_EXCHANGE } from 'treeseal/sys';

import { APPEND_SIZE, F_SIZE, MAX_APPENDS, gen, listingSize } from './oracle.mjs';

const pause = new Int32Array(new SharedArrayBuffer(4));
const exchange = (a, b) => sys.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);

/** One kind's steps: setup() once, step(i) for the i-th version (1-based), teardown(). */
function attack(kind, { src, seed }) {
  const f = join(src, 'tree/f');
  const staging = join(src, 'staging');
  let fd = -1;
  const v0 = kind === 'truncate' ? gen(seed, 'v0', F_SIZE) : undefined;
  const kinds = {
    append: {
      setup: () => (fd = openSync(f, constants.O_WRONLY | constants.O_APPEND)),
      step: (i) => i <= MAX_APPENDS && writeSync(fd, gen(seed, `a${i - 1}`, APPEND_SIZE)) >= 0,
    },
    rewrite: {
      setup: () => (fd = openSync(f, constants.O_WRONLY)),
      step: (i) => writeSync(fd, gen(seed, `v${i}`, F_SIZE), 0, F_SIZE, 0) >= 0,
    },
    truncate: {
      setup: () => (fd = openSync(f, constants.O_WRONLY)),
      step: (i) => {
        const phase = i % 3;
        if (phase === 1) ftruncateSync(fd, F_SIZE >> 1);
        else if (phase === 2) ftruncateSync(fd, 0);
        else writeSync(fd, v0, 0, F_SIZE, 0);
        return true;
      },
    },
    rename: {
      step: (i) => {
        const tmp = join(staging, `r${i}`);
        writeFileSync(tmp, gen(seed, `r${i}`, F_SIZE));
        renameSync(tmp, f);
        return true;
      },
    },
    'file-symlink': { step: () => (exchange(f, join(staging, 'alt')), true) },
    'dir-symlink': { step: () => (exchange(join(src, 'tree/d'), join(staging, 'alt')), true) },
    fifo: {
      setup: () => execFileSync('mkfifo', [join(staging, 'fifo')]),
      step: () => (exchange(f, join(staging, 'fifo')), true),
    },
    chmod: {
      step: (i) => {
        chmodSync(f, [0o644, 0o755, 0o000, 0o600][i % 4]);
        chmodSync(join(src, 'tree/d'), [0o755, 0o700, 0o500, 0o000][i % 4]);
        return true;
      },
    },
    listing: {
      step: (i) => {
        const n = i - 1;
        const tmp = join(staging, `n${n}`);
        writeFileSync(tmp, gen(seed, `n${n}`, listingSize(n)));
        renameSync(tmp, join(src, `tree/d/n${n}`));
        if (n >= 8) unlinkSync(join(src, `tree/d/n${n - 8}`));
        return true;
      },
    },
  };
  const k = kinds[kind];
  return {
    setup: k.setup ?? (() => {}),
    step: k.step,
    teardown: () => {
      if (fd >= 0) closeSync(fd);
      fd = -1;
    },
  };
}

let running = null;

async function loop(job, a, paceUs) {
  let count = 0;
  const slow = paceUs >= 10000;
  while (!job.stop) {
    // Fast paces: a burst of steps, paceUs apart. Slow paces: one step after each pause (so a
    // capture can finish between two). Then the event loop, for 'stop'.
    if (slow) Atomics.wait(pause, 0, 0, paceUs / 1000);
    for (let b = 0; b < (slow ? 1 : 4) && !job.stop; b++) {
      if (a.step(count + 1) !== false) count++;
      else {
        Atomics.wait(pause, 0, 0, 1);
        break;
      }
      if (!slow && paceUs > 0) Atomics.wait(pause, 0, 0, paceUs / 1000);
    }
    await new Promise((r) => setImmediate(r));
  }
  return count;
}

const out = (msg) => process.stdout.write(`${JSON.stringify(msg)}\n`);

createInterface({ input: process.stdin }).on('line', async (line) => {
  const msg = JSON.parse(line);
  if (msg.op === 'start') {
    try {
      const a = attack(msg.kind, msg);
      a.setup();
      const job = { stop: false };
      running = { job, done: loop(job, a, msg.paceUs).finally(() => a.teardown()) };
      out({ started: true });
    } catch (err) {
      out({ error: String(err?.stack ?? err) });
    }
  } else if (msg.op === 'stop') {
    if (running === null) return out({ error: 'not running' });
    running.job.stop = true;
    try {
      const count = await running.done;
      out({ stopped: true, count });
    } catch (err) {
      out({ error: String(err?.stack ?? err) });
    }
    running = null;
  }
});
