// abort.test.ts: materialize, reset and verify take a signal: SEAL_ABORTED before anything is done, or at an exact step (the syscall layer aborts it), leaving the clone as it was (materialize), part reset and repaired by the next reset, or untouched (verify).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, listTree, tempDir, wrapSys, writeTree } from '../helpers.js';

checkNoFdLeaks();

/** A store holding one snapshot of 40 files in 4 directories, and its work directory. */
function fixture(sys?: Parameters<typeof SnapshotStore.openSync>[1]['sys']): { work: string; store: SnapshotStore; digest: string } {
  const work = tempDir();
  const files: Record<string, string> = {};
  for (let i = 0; i < 40; i++) files[`repo/src/d${i % 4}/f${i}`] = `file ${i}\n`;
  writeTree(work, files);
  const store = SnapshotStore.openSync(join(work, 'store'), sys === undefined ? {} : { sys });
  const digest = store.captureSync({ source: join(work, 'repo'), copy: ['src'] }).digest;
  return { work, store, digest };
}

/** A syscall layer that, once armed, aborts `controller` when the n-th file of the copy roots is made (O_CREAT | O_EXCL, named f…). */
function abortingAt(n: number, controller: AbortController): { sys: ReturnType<typeof wrapSys>; arm: () => void } {
  let made = 0;
  let armed = false;
  const sys = wrapSys({
    openat: (orig) => (dirfd, p, flags, mode) => {
      const fd = orig(dirfd, p, flags, mode);
      if (armed && (flags & 0o300) === 0o300 && /^f\d+$/.test(String(p)) && ++made === n) controller.abort();
      return fd;
    },
  });
  return { sys, arm: () => (armed = true) };
}

describe('a signal', () => {
  it('already aborted: materialize, reset and verify are SEAL_ABORTED before anything is done; not an AbortSignal: TypeError', async () => {
    const { work, store, digest } = fixture();
    const snap = store.get(digest);
    const signal = AbortSignal.abort();
    await expectError(async () => snap.materialize(join(work, 'new'), { createClone: true, signal }), { code: 'SEAL_ABORTED', message: 'materialize was aborted', unchanged: work });
    expect(() => snap.materializeSync(join(work, 'new'), { createClone: true, signal })).toThrow('materialize was aborted');
    await expectError(async () => snap.verify({ signal }), { code: 'SEAL_ABORTED', message: 'verify was aborted' });
    snap.materializeSync(join(work, 'clone'), { createClone: true });
    writeFileSync(join(work, 'clone/src/d1/f1'), 'changed');
    await expectError(async () => snap.reset(join(work, 'clone'), { signal }), { code: 'SEAL_ABORTED', message: 'reset was aborted', unchanged: work });
    expect(readFileSync(join(work, 'clone/src/d1/f1'), 'utf8')).toBe('changed');
    // The signal's reason is the error's cause: a harness tells its own timeout from another cancel.
    const reason = new Error('harness timeout');
    const given = AbortSignal.abort(reason);
    for (const call of [() => snap.materialize(join(work, 'y'), { createClone: true, signal: given }), () => snap.verify({ signal: given })]) {
      const err = await call().catch((e: unknown) => e);
      expect([(err as SealError).code, (err as SealError).cause]).toEqual(['SEAL_ABORTED', reason]);
    }
    expect(signal.reason).toBeInstanceOf(DOMException);
    expect(((await snap.verify({ signal }).catch((e: unknown) => e)) as SealError).cause).toBe(signal.reason);
    for (const call of [() => snap.materializeSync(join(work, 'x'), { signal: 'no' as never }), () => snap.verifySync({ signal: {} as never })]) {
      expectError(call, { code: 'ERR_INVALID_ARG_TYPE', message: /^The "options.signal" property must be an instance of AbortSignal/ });
    }
    await store.close();
  });

  it('aborted at the 10th file of a materialize: SEAL_ABORTED, the clone as it was (its old roots kept), no stage left; the next one completes', () => {
    const controller = new AbortController();
    const aborting = abortingAt(10, controller);
    const { work, store, digest } = fixture(aborting.sys);
    aborting.arm();
    const clone = join(work, 'clone');
    writeTree(clone, { 'src/old': 'the last task left this', 'notes.txt': 'outside the roots' });
    const snap = store.get(digest);
    const err = expectError(() => snap.materializeSync(clone, { signal: controller.signal }), { code: 'SEAL_ABORTED', message: 'materialize was aborted', unchanged: clone });
    expect(controller.signal.aborted).toBe(true);
    expect(err.cause).toBe(controller.signal.reason);
    expect(snap.materializeSync(clone).files).toBe(40);
    expect(listTree(clone)).toEqual(['notes.txt', 'src/', ...[0, 1, 2, 3].flatMap((d) => [`src/d${d}/`, ...Array.from({ length: 10 }, (_, k) => `src/d${d}/f${d + 4 * k}`).sort()])].sort());
    store.closeSync();
  });

  it('aborted at the 2nd file a reset restores: SEAL_ABORTED, part reset; the next reset makes the clone exactly the snapshot', () => {
    const controller = new AbortController();
    const aborting = abortingAt(2, controller);
    const { work, store, digest } = fixture(aborting.sys);
    const clone = join(work, 'clone');
    const snap = store.get(digest);
    snap.materializeSync(clone, { createClone: true });
    for (const i of [1, 2, 3]) writeFileSync(join(clone, `src/d${i % 4}/f${i}`), 'changed');
    aborting.arm();
    // The changed files go first; the 2nd restored is made whole, and the abort is seen before the 3rd.
    expectError(() => snap.resetSync(clone, { signal: controller.signal }), { code: 'SEAL_ABORTED', message: 'reset was aborted' });
    const changed = [1, 2, 3].map((i) => `src/d${i % 4}/f${i}`);
    const missing = changed.filter((p) => !existsSync(join(clone, p)));
    expect(missing.length).toBe(1);
    for (const p of changed) if (!missing.includes(p)) expect(readFileSync(join(clone, p), 'utf8')).not.toBe('changed');
    // By content, only the one not yet restored differs; the ledger was not rewritten, so the two made anew
    // differ from it by identity, and the next reset makes them again (as after a kill).
    expect(snap.diffSync(clone, { verify: true })).toMatchObject({ changed: [], removed: missing, added: [] });
    expect(snap.resetSync(clone)).toMatchObject({ removed: missing, added: [] });
    expect(snap.checkCloneSync(clone)).toMatchObject({ ok: true });
    expect(snap.diffSync(clone)).toMatchObject({ changed: [], removed: [], added: [] });
    store.closeSync();
  });

  it('aborted while a verify walks (at its 3rd directory): SEAL_ABORTED; an async verify aborted once it is asked for: SEAL_ABORTED from the worker thread', async () => {
    const walking = new AbortController();
    let dirs = -1;
    const sys = wrapSys({
      readdir: (orig) => (fd) => {
        if (dirs >= 0 && ++dirs === 3) walking.abort();
        return orig(fd);
      },
    });
    const walked = fixture(sys);
    dirs = 0;
    expectError(() => walked.store.get(walked.digest).verifySync({ signal: walking.signal, parallelism: 0 }), { code: 'SEAL_ABORTED', message: 'verify was aborted' });
    expect(dirs).toBe(3);
    walked.store.closeSync();
    const { store, digest } = fixture();
    const snap = store.get(digest);
    const controller = new AbortController();
    const pending = snap.verify({ signal: controller.signal, parallelism: 0 });
    controller.abort('stop');
    const err = await expectError(async () => pending, { code: 'SEAL_ABORTED', message: 'verify was aborted', fds: false });
    // Thrown on the worker thread, where the signal is not: its reason is joined on the way back.
    expect(err.cause).toBe('stop');
    expect(await snap.verify()).toMatchObject({ entries: 45 });
    await store.close();
  });
});
