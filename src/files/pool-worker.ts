// pool-worker.ts: a FilePool helper thread: claims queued slots, fills and hashes their files, marks them done.
import { workerData } from 'node:worker_threads';

import { CHUNK_BYTES } from '../base/io.js';
import { H, SLOT, SLOTS, STATE, receiveSlots, runSlot, slotBase, waitCounted, type SharedSlots } from './pool.js';
import { sys } from '../sys/native.js';

const m = receiveSlots(workerData as SharedSlots);
const buffer = Buffer.allocUnsafe(CHUNK_BYTES);

Atomics.add(m.ctrl, H.READY, 1);
Atomics.notify(m.ctrl, H.READY);
try {
  for (;;) {
    const seq = Atomics.load(m.ctrl, H.SEQ);
    let ran = false;
    for (let s = 0; s < SLOTS; s++) {
      if (Atomics.compareExchange(m.ctrl, slotBase(s) + SLOT.STATE, STATE.READY, STATE.RUNNING) === STATE.READY) {
        runSlot(sys, buffer, m, s);
        ran = true;
      }
    }
    if (Atomics.load(m.ctrl, H.STOP) !== 0) break;
    if (!ran) waitCounted(m.ctrl, H.SEQ, seq, H.SEQ_WAITERS, 1000);
  }
} finally {
  Atomics.add(m.ctrl, H.EXITED, 1);
  Atomics.notify(m.ctrl, H.EXITED);
}
