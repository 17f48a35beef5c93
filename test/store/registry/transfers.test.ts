// transfers.test.ts: transfers that finish, against the real registry behind the fault-injecting proxy: a lost answer after the
// work is resolved by asking the registry, a body cut mid-way resumes with Range, a failed upload session is started again, 5xx
// bursts are ridden out; every push and pull completes or fails typed, and nothing wrong is ever published.
import { createHash, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type Snapshot } from '../../../dist/index.js';
import { storeLeftovers } from '../../helpers.js';
import { captured } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy, type Fault, type TokenProxy } from './harness.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

/** Blobs over 512 KiB go up in 256 KiB chunks: the 1.5 MiB file in six PATCHes, the config and the pack in one PUT each. */
const SIZES = { monolithicBytes: 512 * 1024, chunkBytes: 256 * 1024 };
const FILE_SIZE = 1536 * 1024;

interface Setup {
  work: string;
  proxy: TokenProxy;
  repo: string;
  remote: string;
  a: SnapshotStore;
  snap: Snapshot;
  /** The large file's blob digest. */
  file: string;
}

async function setup(label: string): Promise<Setup> {
  const { work, store: a, snap } = await captured();
  const proxy = await tokenProxy(registry!.address);
  const repo = repoName(label);
  const file = `sha256:${createHash('sha256').update(readFileSync(join(work, 'source/src/index/graph.bin'))).digest('hex')}`;
  return { work, proxy, repo, remote: `${proxy.address}/${repo}`, a, snap, file };
}

const count = (log: string[], re: RegExp): number => log.filter((l) => re.test(l)).length;
const POST = /^POST \/v2\/.+\/blobs\/uploads\/$/;
const PATCH = /^PATCH /;

/** HEAD of the snapshot's tag, straight at the registry. */
async function tagStatus(s: Setup): Promise<number> {
  const res = await fetch(`http://${registry!.address}/v2/${s.repo}/manifests/ts-${s.snap.digest}`, { method: 'HEAD', headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
  return res.status;
}

/** Pulls through the proxy into a fresh store and proves it is the snapshot pushed. */
async function pullsBack(s: Setup, name: string): Promise<void> {
  const b = await SnapshotStore.open(join(s.work, name));
  await b.pull(s.snap.digest, s.remote);
  expect(b.get(s.snap.digest).toJSON()).toEqual(s.snap.toJSON());
  await b.get(s.snap.digest).verify();
  await b.close();
}

/** The faults off: the pushed snapshot pulls back whole; the pushing store is closed. */
async function pullsBackAndCloses(s: Setup): Promise<void> {
  s.proxy.hooks.onRequest = undefined;
  await pullsBack(s, 'b');
  await s.a.close();
}

describe.skipIf(registry === undefined)('uploads that finish', () => {
  it('a lost answer after a completed PUT (dropped, or a 500 once the work is done) is settled by a HEAD of the blob: no session is started again', async () => {
    for (const fault of ['lose-answer', { replace: 500 }] as Fault[]) {
      for (const which of ['monolithic', 'chunked'] as const) {
        const s = await setup('lost-put');
        let faulted: string | undefined;
        s.proxy.hooks.onRequest = (method, path, url) => {
          const digest = url.searchParams.get('digest');
          if (faulted !== undefined || method !== 'PUT' || !path.includes('/blobs/uploads/') || digest === null) return undefined;
          if ((digest === s.file) !== (which === 'chunked')) return undefined;
          faulted = digest;
          return fault;
        };
        // One blob at a time: what follows the fault is about the faulted blob.
        const pushed = await s.a.push(s.snap.digest, s.remote, { ...SIZES, concurrency: 1 });
        expect(pushed).toMatchObject({ existed: false, uploaded: pushed.blobs });
        const at = s.proxy.log.findIndex((l) => l.includes(' -> '));
        expect(s.proxy.log[at]).toMatch(/^PUT \/v2\/.+\/blobs\/uploads\/\S+ -> /);
        expect(s.proxy.log[at + 1]).toBe(`HEAD /v2/${s.repo}/blobs/${faulted}`);
        expect(count(s.proxy.log, POST)).toBe(pushed.blobs);
        expect(count(s.proxy.log, PATCH)).toBe(6);
        await pullsBackAndCloses(s);
      }
    }
  });

  it('every success another registry answers with is taken: a chunk answered 201 (as ECR does), blob and manifest PUTs 200, an upload status 200; a 202 manifest PUT is refused', async () => {
    const s = await setup('other-2xx');
    const statuses = new Map<string, number>();
    s.proxy.hooks.onRequest = (method, path) => {
      const status = method === 'PATCH' ? 201 : method === 'PUT' ? 200 : method === 'GET' && path.includes('/blobs/uploads/') ? 200 : undefined;
      if (status === undefined) return undefined;
      statuses.set(method, status);
      return { status };
    };
    const pushed = await s.a.push(s.snap.digest, s.remote, { ...SIZES, concurrency: 1 });
    expect([pushed.uploaded, count(s.proxy.log, PATCH), [...statuses.keys()].sort()]).toEqual([pushed.blobs, 6, ['PATCH', 'PUT']]);
    expect(await tagStatus(s)).toBe(200);
    // 202 says a manifest is accepted, not stored: the push fails typed.
    const t = await setup('manifest-202');
    t.proxy.hooks.onRequest = (method, path) => (method === 'PUT' && path.includes('/manifests/') ? { status: 202 } : undefined);
    const err = await fails(t.a.push(t.snap.digest, t.remote, SIZES));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', expect.stringMatching(/HTTP 202/)]);
    await t.a.close();
    await pullsBackAndCloses(s);
  });

  it('a PATCH whose answer is lost: the session is asked how much it holds; Docker Distribution cannot say (its stale state is refused), so a new session is started', async () => {
    const s = await setup('lost-patch');
    let patches = 0;
    s.proxy.hooks.onRequest = (method) => (method === 'PATCH' && ++patches === 3 ? 'lose-answer' : undefined);
    const pushed = await s.a.push(s.snap.digest, s.remote, { ...SIZES, concurrency: 1 });
    expect(pushed.uploaded).toBe(pushed.blobs);
    const at = s.proxy.log.findIndex((l) => l.includes(' -> lose-answer'));
    const session = /^PATCH (\S+)/.exec(s.proxy.log[at]!)![1];
    // The status asked with the location the lost answer leaves (404 BLOB_UPLOAD_INVALID here), a HEAD, then a new session.
    expect(s.proxy.log.slice(at + 1, at + 5)).toEqual([`GET ${session}`, `HEAD /v2/${s.repo}/blobs/${s.file}`, `DELETE ${session}`, `POST /v2/${s.repo}/blobs/uploads/`]);
    expect(count(s.proxy.log, PATCH)).toBe(3 + 6);
    expect(count(s.proxy.log, POST)).toBe(pushed.blobs + 1);
    await pullsBackAndCloses(s);
  });

  it('a 503 burst on PATCHes is ridden out by asking the session and sending the chunk again', async () => {
    const s = await setup('patch-burst');
    let patches = 0;
    s.proxy.hooks.onRequest = (method) => (method === 'PATCH' && [2, 3, 4].includes(++patches) ? 503 : undefined);
    const pushed = await s.a.push(s.snap.digest, s.remote, SIZES);
    expect(pushed.uploaded).toBe(pushed.blobs);
    expect(count(s.proxy.log, /^PATCH .* -> 503$/)).toBe(3);
    expect(count(s.proxy.log, /^PATCH \S+$/)).toBe(6);
    expect(count(s.proxy.log, POST)).toBe(pushed.blobs);
    await pullsBackAndCloses(s);
  });

  it("a 503 on the first PATCH (nothing reached the registry): the empty session's `Range: 0-0` is nothing held, and the chunk goes again from byte 0 (it went on from byte 1, and the PUT failed DIGEST_INVALID for good)", async () => {
    const s = await setup('first-patch-lost');
    let patches = 0;
    s.proxy.hooks.onRequest = (method) => (method === 'PATCH' && ++patches === 1 ? 503 : undefined);
    const pushed = await s.a.push(s.snap.digest, s.remote, SIZES);
    expect(pushed.uploaded).toBe(pushed.blobs);
    expect(count(s.proxy.log, /^PATCH .* -> 503$/)).toBe(1);
    expect(count(s.proxy.log, /^PATCH \S+$/)).toBe(6);
    expect(count(s.proxy.log, POST)).toBe(pushed.blobs);
    await pullsBackAndCloses(s);
  });

  it('a session the registry no longer knows (404 on a PATCH and on its status) is started again with a new POST', async () => {
    const s = await setup('new-session');
    let patches = 0;
    let lostSession: string | undefined;
    s.proxy.hooks.onRequest = (method, path) => {
      if (method === 'PATCH' && ++patches === 3) {
        lostSession = path;
        return 404;
      }
      return method === 'GET' && path === lostSession ? 404 : undefined;
    };
    const pushed = await s.a.push(s.snap.digest, s.remote, SIZES);
    expect(pushed.uploaded).toBe(pushed.blobs);
    expect(count(s.proxy.log, POST)).toBe(pushed.blobs + 1);
    // Two chunks, the refused one, then all six again in the new session.
    expect(count(s.proxy.log, PATCH)).toBe(9);
    await pullsBackAndCloses(s);
  });

  it('a 5xx burst longer than the retries fails typed with the status, and leaves no tag', async () => {
    const s = await setup('burst-fails');
    s.proxy.hooks.onRequest = (method, path) => (method !== 'HEAD' && path.includes('/blobs/uploads/') ? 503 : undefined);
    const err = await fails(s.a.push(s.snap.digest, s.remote, { ...SIZES, retries: 2 }));
    expect(err.code).toBe('SEAL_REMOTE');
    expect(err.message).toMatch(/: HTTP 503 TEST_503 \(injected\)$/);
    expect(await tagStatus(s)).toBe(404);
    await s.a.close();
  });
});

describe.skipIf(registry === undefined)('downloads that finish', () => {
  it('a blob body cut at a random offset resumes with Range from the last byte received, for packs and files, once or three times', async () => {
    const s = await setup('cut');
    const pushed = await s.a.push(s.snap.digest, s.remote);
    for (const cuts of [1, 3]) {
      // Each blob GET is cut `cuts` times, each time at a random byte of what that answer would send.
      const left = new Map<string, number>();
      const expected = new Map<string, number[]>();
      s.proxy.log.length = 0;
      s.proxy.hooks.onRequest = (method, path) => {
        const digest = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(path)?.[1];
        if (method !== 'GET' || digest === undefined) return undefined;
        const n = left.get(digest) ?? cuts;
        if (n === 0) return undefined;
        left.set(digest, n - 1);
        const from = expected.get(digest) ?? [0];
        const size = digest === s.file ? FILE_SIZE : undefined;
        // A cut between the first and the last byte of what is left (the pack's size is not known here: small cuts).
        const at = size === undefined ? randomInt(1, 64) : randomInt(1, size - from[from.length - 1]! - 1);
        expected.set(digest, [...from, from[from.length - 1]! + at]);
        return { cut: at };
      };
      const b = await SnapshotStore.open(join(s.work, `b-${cuts}`));
      const pulled = await b.pull(s.snap.digest, s.remote, { retries: 4 });
      expect(pulled.downloaded).toBe(pushed.blobs);
      for (const [digest, offsets] of expected) {
        const ranges = s.proxy.log.filter((l) => l.startsWith(`GET /v2/${s.repo}/blobs/${digest}`)).map((l) => /range=bytes=(\d+)-/.exec(l)?.[1] ?? '0');
        expect(ranges).toEqual(offsets.map(String));
      }
      expect(b.get(s.snap.digest).toJSON()).toEqual(s.snap.toJSON());
      await b.get(s.snap.digest).verify();
      await b.close();
    }
    await s.a.close();
  });

  it('each byte comes once: bytesDownloaded is the blobs\' sizes after a cut; a registry that ignores Range is read again from byte 0', async () => {
    const s = await setup('ignore-range');
    await s.a.push(s.snap.digest, s.remote);
    const clean = await SnapshotStore.open(join(s.work, 'clean'));
    const whole = (await clean.pull(s.snap.digest, s.remote)).bytesDownloaded;
    await clean.close();
    let gets = 0;
    const cutAt = randomInt(1000, FILE_SIZE - 1000);
    s.proxy.hooks.onRequest = (method, path) => {
      if (method !== 'GET' || !path.endsWith(s.file)) return undefined;
      return ++gets === 1 ? { cut: cutAt } : undefined;
    };
    const b = await SnapshotStore.open(join(s.work, 'b'));
    expect((await b.pull(s.snap.digest, s.remote)).bytesDownloaded).toBe(whole);
    // Resumed where the cut was: every byte on disk is the snapshot's (the pull wrote it write by write, never read it back).
    await b.get(s.snap.digest).verify();
    await b.close();
    gets = 0;
    s.proxy.log.length = 0;
    s.proxy.hooks.onRequest = (method, path) => {
      if (method !== 'GET' || !path.endsWith(s.file)) return undefined;
      return ++gets === 1 ? { cut: cutAt } : 'ignore-range';
    };
    const c = await SnapshotStore.open(join(s.work, 'c'));
    expect((await c.pull(s.snap.digest, s.remote)).bytesDownloaded).toBe(whole + cutAt);
    expect(s.proxy.log.filter((l) => l.includes(s.file))).toEqual([
      `GET /v2/${s.repo}/blobs/${s.file} -> ${JSON.stringify({ cut: cutAt })}`,
      `GET /v2/${s.repo}/blobs/${s.file} range=bytes=${cutAt}- -> ignore-range`,
    ]);
    expect(c.get(s.snap.digest).toJSON()).toEqual(s.snap.toJSON());
    // Restarted from byte 0 over what the cut left: the file holds the whole blob, once.
    await c.get(s.snap.digest).verify();
    await c.close();
    await s.a.close();
  });

  it('a cut that keeps coming fails typed once the retries are spent, and leaves nothing', async () => {
    const s = await setup('cut-fails');
    await s.a.push(s.snap.digest, s.remote);
    s.proxy.hooks.onRequest = (method, path) => (method === 'GET' && path.endsWith(s.file) ? { cut: 1000 } : undefined);
    const b = await SnapshotStore.open(join(s.work, 'b'));
    const err = await fails(b.pull(s.snap.digest, s.remote, { retries: 2 }));
    expect(err.code).toBe('SEAL_REMOTE');
    expect(err.message).toMatch(new RegExp(`^registry ${s.proxy.address} is unreachable or dropped the connection while reading blob ${s.file}: `));
    expect(count(s.proxy.log, new RegExp(`^GET .*${s.file}`))).toBe(3);
    expect(storeLeftovers(b.root)).toEqual([]);
    await b.close();
    await s.a.close();
  });
});

describe.skipIf(registry === undefined)('one blob, one retry budget', () => {
  it('the retries of a blob are shared by its resumes and their requests: a registry that cuts, then stalls each resumed request, gets `retries` more tries in all (it got (retries + 1)² before)', async () => {
    const s = await setup('budget');
    await s.a.push(s.snap.digest, s.remote);
    let gets = 0;
    // Cut mid-body, then two resumed requests stalled (each timed out and retried), then cut again: 7 GETs with the count per resume.
    s.proxy.hooks.onRequest = (method, path) => (method === 'GET' && path.endsWith(s.file) ? (gets++ % 3 === 0 ? { cut: 1000 } : 'stall') : undefined);
    const b = await SnapshotStore.open(join(s.work, 'b'));
    const retries: string[] = [];
    const err = await fails(b.pull(s.snap.digest, s.remote, { retries: 2, timeouts: { headersMs: 300 }, onRetry: (r) => retries.push(`${r.attempt}/${r.retries}`) }));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `registry ${s.proxy.address} timed out while GET /v2/${s.repo}/blobs/${s.file}: no response in 300 ms`]);
    expect(gets).toBe(3);
    expect(retries).toEqual(['1/2', '2/2']);
    expect(storeLeftovers(b.root)).toEqual([]);
    await b.close();
    await s.a.close();
  });
});

describe.skipIf(registry === undefined)('random faults', () => {
  it('every push and pull completes or fails typed; a tag, when there is one, names the whole snapshot; no pull publishes anything wrong', async () => {
    const outcomes: string[] = [];
    // Five trials: each has a few faults, and the rounds of 8 spent half a minute of the suite on retries waited out.
    for (let trial = 0; trial < 5; trial++) {
      const s = await setup('random');
      const fault = (method: string, path: string): Fault | undefined => {
        // About one request in seven faulted (each trial has a few faults; retries wait out their backoff).
        if (Math.random() > 0.15) return undefined;
        const kinds: Fault[] = [503, 500, 'lose-answer', { replace: 500 }];
        if (method === 'GET' && /\/blobs\/sha256:/.test(path)) kinds.push({ cut: randomInt(1, 200) }, 'truncate');
        return kinds[randomInt(kinds.length)];
      };
      s.proxy.hooks.onRequest = fault;
      const pushed = await s.a.push(s.snap.digest, s.remote, SIZES).then(
        () => 'ok',
        (e: unknown) => e,
      );
      if (pushed !== 'ok') {
        expect(pushed).toBeInstanceOf(SealError);
        expect((pushed as SealError).code).toBe('SEAL_REMOTE');
      }
      // Whatever the push said, a tag that exists must name the whole snapshot: a clean pull proves it.
      s.proxy.hooks.onRequest = undefined;
      const tag = await tagStatus(s);
      if (tag === 200) await pullsBack(s, 'clean');
      else expect(pushed).not.toBe('ok');
      if (tag !== 200) {
        outcomes.push(`push failed: ${(pushed as Error).message}`);
        await s.a.close();
        continue;
      }
      s.proxy.hooks.onRequest = fault;
      const b = await SnapshotStore.open(join(s.work, 'b'));
      const pulled = await b.pull(s.snap.digest, s.remote).then(
        () => 'ok',
        (e: unknown) => e,
      );
      if (pulled === 'ok') {
        expect(b.get(s.snap.digest).toJSON()).toEqual(s.snap.toJSON());
        await b.get(s.snap.digest).verify();
      } else {
        expect(pulled).toBeInstanceOf(SealError);
        expect((pulled as SealError).code).toBe('SEAL_REMOTE');
        expect(storeLeftovers(b.root)).toEqual([]);
      }
      outcomes.push(`push ${pushed === 'ok' ? 'ok' : 'failed'}, pull ${pulled === 'ok' ? 'ok' : `failed: ${(pulled as Error).message}`}`);
      await b.close();
      await s.a.close();
    }
    expect(outcomes.filter((o) => o === 'push ok, pull ok').length, outcomes.join('\n')).toBeGreaterThan(0);
  }, 120_000);
});
