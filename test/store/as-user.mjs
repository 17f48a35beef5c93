// as-user.mjs: one store operation a test runs in a child process (as an unprivileged uid); prints its result, or its error, as JSON.
import { readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';

const [dist, op, store, ...args] = process.argv.slice(2);
const { SnapshotStore, readStable, stageFiles, thawSync, writeFrozenFile } = await import(dist);
const trust = process.env.TREESEAL_TEST_TRUST;
// The stat cache's recording clock moved ahead (the internal entry's test option) instead of a sleep past the racy window.
const ahead = process.env.TREESEAL_TEST_CLOCK_AHEAD_NS;
const { STAT_CLOCK_AHEAD } = ahead === undefined ? {} : await import(dist.replace(/index\.js$/, 'internal.js'));
const open = (options = {}) =>
  SnapshotStore.open(store, { ...options, ...(trust === undefined ? {} : { trust }), ...(ahead === undefined ? {} : { [STAT_CLOCK_AHEAD]: BigInt(ahead) }) });

const ops = {
  /** capture SOURCE COPY[,COPY...] [LINKS]: the snapshot's digest and whether it was reused (LINKS: the links option). */
  async capture(source, copy, links) {
    const s = await open();
    const snap = await s.capture({ source, copy: copy.split(','), ...(links === undefined ? {} : { links }) });
    await s.close();
    return { digest: snap.digest, reused: snap.captureReport.reused, reusedFiles: snap.captureReport.reusedFiles };
  },
  async remove(digest) {
    const s = await open();
    const removed = s.remove(digest);
    await s.close();
    return { removed, left: readdirSync(`${store}/snapshots`), tmp: readdirSync(`${store}/tmp`) };
  },
  /** diff DIGEST CLONE: how the clone was compared, and whether it is the snapshot. */
  async diff(digest, clone) {
    const s = await open();
    const report = await s.get(digest).diff(clone);
    await s.close();
    return { method: report.method, ok: report.ok };
  },
  /** summary DIGEST: the snapshot's summary as store.summary gives it (from this user's record, or proven). */
  async summary(digest) {
    const s = await open();
    const { totalBytes, revision, entries } = s.summary(digest);
    await s.close();
    return { totalBytes, revision, entries };
  },
  async verify(digest) {
    const s = await open();
    const report = await s.get(digest).verify();
    await s.close();
    return { entries: report.entries };
  },
  async materialize(digest, clone) {
    const s = await open();
    const report = await s.get(digest).materialize(clone);
    await s.close();
    return { files: report.files };
  },
  /**
   * lifecycle SOURCE COPY[,COPY...] CLONE: capture, materialize twice (checkClone after each),
   * remove the snapshot, rm -r the clone, then the same in an ephemeral store closed at the end.
   */
  async lifecycle(source, copy, clone) {
    const s = await open();
    const snap = await s.capture({ source, copy: copy.split(',') });
    let sealed = 'writable';
    try {
      writeFileSync(`${store}/snapshots/${snap.digest}/copy/${copy.split(',')[0]}/planted`, 'x');
    } catch (err) {
      sealed = err.code;
    }
    const runs = [];
    for (let i = 0; i < 2; i++) {
      const report = await snap.materialize(clone, { createClone: true });
      const check = await snap.checkClone(clone);
      runs.push({ files: report.files, snapshotted: report.snapshotted, fallbacks: report.fallbacks, reflinked: report.reflinked, ok: check.ok });
    }
    const removed = s.remove(snap.digest);
    const left = readdirSync(`${store}/snapshots`).length + readdirSync(`${store}/tmp`).length;
    await s.close();
    rmSync(clone, { recursive: true });
    const eph = await SnapshotStore.open(`${store}-eph`, { ephemeral: true });
    const again = await (await eph.capture({ source, copy: copy.split(',') })).materialize(clone, { createClone: true });
    await eph.close();
    rmSync(clone, { recursive: true });
    return { sealed, runs, removed: removed === snap.digest, left, ephemeral: again.snapshotted, gone: !exists(`${store}-eph`) && !exists(clone) };
  },
  async gc() {
    const s = await open();
    const swept = s.sweptAtOpen + s.gc();
    await s.close();
    return { swept, tmp: readdirSync(`${store}/tmp`) };
  },
  /** ephemeral SOURCE COPY FILE: captures, rewrites FILE (below SOURCE), captures again (linked), closes. */
  async ephemeral(source, copy, file) {
    const s = await open({ ephemeral: true });
    const first = await s.capture({ source, copy: [copy] });
    writeFileSync(`${source}/${file}`, 'changed');
    const second = await s.capture({ source, copy: [copy] });
    await s.close();
    return { digests: [first.digest, second.digest], reusedFiles: second.captureReport.reusedFiles, gone: !exists(store) };
  },
  /**
   * place DIR SOURCE COPY: what a user does in a directory of theirs they may pass through and
   * write but not list (DIR/f exists): read DIR/f, write frozen files into DIR, stage there, and an
   * ephemeral store and a clone below it, closed again. What each returned, or its error.
   */
  async place(dir, source, copy) {
    const outcome = async (f) => {
      try {
        return await f();
      } catch (err) {
        return { code: err.code, message: err.message };
      }
    };
    const read = await outcome(async () => (await readStable(`${dir}/f`, { maxBytes: 64 })).bytes.toString());
    const frozen = await outcome(() => writeFrozenFile(`${dir}/g`, Buffer.from('g'), { fsync: false }));
    const synced = await outcome(() => writeFrozenFile(`${dir}/h`, Buffer.from('h')));
    // A directory this user may not search either (0200): no hint, as fsync: false fails there too.
    const closed = await outcome(() => writeFrozenFile(`${dir}-closed/h`, Buffer.from('h')));
    const closedNoSync = await outcome(() => writeFrozenFile(`${dir}-closed/h`, Buffer.from('h'), { fsync: false }));
    const staged = await outcome(async () => {
      const stage = await stageFiles(dir, [{ target: 'in/s', bytes: Buffer.from('s') }]);
      const held = readFileSync(`${stage.root}/in/s`, 'utf8');
      stage.close();
      return { held, after: exists(stage.root) };
    });
    const eph = await SnapshotStore.open(`${dir}/eph`, { ephemeral: true });
    const snap = await eph.capture({ source, copy: [copy] });
    const files = await outcome(async () => (await snap.materialize(`${dir}/clone`, { createClone: true })).files);
    const ok = await outcome(async () => (await snap.diff(`${dir}/clone`)).ok);
    const storeClosed = await outcome(async () => (await eph.close()) ?? 'closed');
    return { read, frozen: frozen ?? 'written', synced, unsearchable: [closed.code, closed.message, closedNoSync.code], staged, files, ok, closed: storeClosed, storeLeft: exists(`${dir}/eph`) };
  },
  async thaw(dir) {
    thawSync(dir);
    return {};
  },
};

function exists(path) {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

try {
  console.log(JSON.stringify(await ops[op](...args)));
} catch (err) {
  console.log(JSON.stringify({ error: { code: err.code, message: err.message } }));
}
