// roundtrip.test.ts: push and pull against a real registry: exact round trip, what goes over the wire, deltas, skopeo, the CLI.
import { execFile, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, closeSync, existsSync, ftruncateSync, lstatSync, mkdirSync, openSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { chooseLayout, cutPieces } from '../../../dist/internal.js';
import { expectError, rootPassOnly, storeLeftovers, tempDir, unprivilegedPass } from '../../helpers.js';
import { CAPTURE, describeTree, noise, writeSource } from './fixtures.js';
import { checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy } from './harness.js';

const registry = await testRegistry('plain');
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));

checkNoFileFdLeaks();

async function setup(label: string, smallFiles = 40) {
  const work = tempDir();
  const source = join(work, 'source');
  writeSource(source, smallFiles);
  const proxy = await tokenProxy(registry!.address);
  const remote = `${proxy.address}/${repoName(label)}`;
  const a = await SnapshotStore.open(join(work, 'a'));
  const b = await SnapshotStore.open(join(work, 'b'));
  return { work, source, proxy, remote, a, b };
}

const blobPuts = (log: string[]): string[] => log.filter((l) => /^(PUT|PATCH) \/v2\/.+\/blobs\/uploads\//.test(l));
const blobGets = (log: string[]): string[] => log.filter((l) => /^GET \/v2\/.+\/blobs\/sha256:/.test(l));

// The protocol's own tests are the same for any user (rootPassOnly); the unprivileged pass keeps the pulls that build store files.

describe.skipIf(registry === undefined)('push and pull through a registry', () => {
  it('round-trips a snapshot exactly: copy roots, mounts, empty dirs and files, executables, symlinks, a large file', async () => {
    const { source, proxy, remote, a, b } = await setup('roundtrip');
    const snap = await a.capture({ source, ...CAPTURE });
    const pushed = await a.push(snap.digest.slice(0, 10), remote);
    // config + 1 pack (all small contents fit one bucket) + the 1.5 MiB file once, though two paths hold it
    expect(pushed).toMatchObject({ digest: snap.digest, existed: false, blobs: 5, uploaded: 5, mounted: 0, skipped: 0, tag: `ts-${snap.digest}` });
    const progress: number[] = [];
    const pulled = await b.pull(snap.digest, remote, { onProgress: (p) => progress.push(p.bytes) });
    expect(pulled).toMatchObject({ digest: snap.digest, existed: false, blobs: 5, downloaded: 5, reused: 0 });
    expect(progress.length).toBeGreaterThan(0);
    const copy = b.get(snap.digest);
    expect(copy.toJSON()).toEqual(snap.toJSON());
    expect(describeTree(copy.root)).toEqual(describeTree(snap.root));
    expect(describeTree(copy.root)).toContain('f 500 mounts/00000/payload/pkg/bin/run ' + Buffer.from('#!/bin/sh\necho run\n').toString('base64'));
    expect(describeTree(copy.root)).toContain('l mounts/00000/payload/pkg/run-link -> bin/run');
    expect(describeTree(copy.root)).toContain('d 500 copy/src/emptydir');
    expect(await copy.verify()).toEqual(await snap.verify());
    expect(storeLeftovers(b.root)).toEqual([`snapshots/${snap.digest}`]);
    // the large file went up in one PUT (under the 32 MiB monolithic threshold) and came down once
    expect(blobGets(proxy.log)).toHaveLength(5);
    expect(await b.pull(snap.digest, remote)).toMatchObject({ existed: true, downloaded: 0 });
    await a.close();
    await b.close();
  });

  rootPassOnly('carries the exclude patterns with the document: the pulled snapshot has them, and its digest', async () => {
    const { source, remote, a, b } = await setup('exclude', 3);
    const snap = await a.capture({ source, ...CAPTURE, exclude: ['/src/index/', '*.txt', '!a.txt', '/deps/pkg/bin/', 'run-link'] });
    expect(snap.entries.map((e) => e.path).filter((p) => !p.startsWith('src/many/'))).toEqual(['src', 'src/a.txt', 'src/emptydir', 'src/lib', 'src/lib/deep', 'src/lib/deep/b.ts', 'src/many']);
    await a.push(snap.digest, remote);
    expect(await b.pull(snap.digest, remote)).toMatchObject({ digest: snap.digest, existed: false });
    const copy = b.get(snap.digest);
    expect(copy.exclude).toEqual(['/src/index/', '*.txt', '!a.txt', '/deps/pkg/bin/', 'run-link']);
    expect(copy.toJSON()).toEqual(snap.toJSON());
    expect(describeTree(copy.root)).toEqual(describeTree(snap.root));
    await a.close();
    await b.close();
  });

  rootPassOnly('a snapshot that keeps times pulls to the same digest, and the pulled copy materializes every recorded mtime', async () => {
    const { work, source, remote, a, b } = await setup('times', 5);
    const snap = await a.capture({ source, ...CAPTURE, keepTimes: true });
    await a.push(snap.digest, remote);
    expect(await b.pull(snap.digest, remote)).toMatchObject({ digest: snap.digest, existed: false });
    const copy = b.get(snap.digest);
    expect(copy.toJSON()).toEqual(snap.toJSON());
    expect(copy.entries.every((e) => e.mtime_ns !== undefined)).toBe(true);
    const clone = join(work, 'clone');
    await copy.materialize(clone, { createClone: true });
    expect(copy.entries.map((e) => [e.path, String(lstatSync(join(clone, e.path), { bigint: true }).mtimeNs)])).toEqual(copy.entries.map((e) => [e.path, e.mtime_ns]));
    expect(copy.entries.map((e) => e.mtime_ns)).toEqual(copy.entries.map((e) => String(lstatSync(join(source, e.path), { bigint: true }).mtimeNs)));
    await a.close();
    await b.close();
  });

  it("round-trips copy roots that are links themselves (links: 'contained'): pulled, verified and materialized as the links", async () => {
    const { source, remote, a, b } = await setup('link-roots');
    writeFileSync(join(source, 'AGENTS.md'), 'agents');
    symlinkSync('AGENTS.md', join(source, 'CLAUDE.md'));
    const snap = await a.capture({ source, copy: ['AGENTS.md', 'CLAUDE.md', 'src'], links: 'contained' });
    await a.push(snap.digest, remote);
    await b.pull(snap.digest, remote);
    const copy = b.get(snap.digest);
    expect(describeTree(copy.root)).toEqual(describeTree(snap.root));
    expect(describeTree(copy.root)).toContain('l copy/CLAUDE.md -> AGENTS.md');
    expect(await copy.verify()).toEqual(await snap.verify());
    const arm = join(b.root, '..', 'arm');
    await copy.materialize(arm, { createClone: true });
    expect([readlinkSync(join(arm, 'CLAUDE.md')), readFileSync(join(arm, 'CLAUDE.md'), 'utf8')]).toEqual(['AGENTS.md', 'agents']);
    await a.close();
    await b.close();
  });

  it('a sparse file pulled stays sparse (its zero pages left unwritten), with exactly its bytes, and materializes within a small buffered budget (it came down whole, and past the budget was SEAL_NO_REFLINK)', async () => {
    const { work, remote, proxy, a, b } = await setup('sparse', 0);
    const source = join(work, 'sparse-source');
    mkdirSync(join(source, 'data'), { recursive: true });
    const MiB = 1 << 20;
    const fd = openSync(join(source, 'data/disk.img'), 'w');
    // data at 0 (a page, then zeros inside the same 4 MiB write), 20 bytes straddling two pages at 33 MiB - 10, a byte
    // ending a page at 64 MiB, then a hole to the end (left by the last write: the size is set after)
    writeSync(fd, Buffer.alloc(4096, 1), 0, 4096, 0);
    writeSync(fd, Buffer.alloc(20, 2), 0, 20, 33 * MiB - 10);
    writeSync(fd, Buffer.from('z'), 0, 1, 64 * MiB - 1);
    ftruncateSync(fd, 96 * MiB);
    closeSync(fd);
    const snap = await a.capture({ source, copy: ['data'] });
    await a.push(snap.digest, remote);
    await b.pull(snap.digest, remote);
    const pulled = join(b.get(snap.digest).root, 'copy/data/disk.img');
    const st = statSync(pulled);
    expect(st.size).toBe(96 * MiB);
    // 4 pages of data (at most a filesystem's block each, and its metadata), not 96 MiB
    expect(st.blocks * 512).toBeLessThan(MiB);
    const want = readFileSync(join(source, 'data/disk.img'));
    expect(createHash('sha256').update(readFileSync(pulled)).digest('hex')).toBe(createHash('sha256').update(want).digest('hex'));
    expect(await b.get(snap.digest).verify()).toEqual({ entries: 2, bytes: 96 * MiB });
    const arm = join(work, 'arm');
    expect(await b.get(snap.digest).materialize(arm, { createClone: true, fallbackBytes: MiB })).toMatchObject({ files: 1 });
    expect(statSync(join(arm, 'data/disk.img')).blocks * 512).toBeLessThan(MiB);
    // A registry that sends other bytes, drops the connection, then ignores the Range of the retry: the file starts over
    // empty, so none of the first answer's bytes stays in the pages of zeros the second leaves unwritten.
    const blob = `sha256:${createHash('sha256').update(want).digest('hex')}`;
    let gets = 0;
    proxy.hooks.onRequest = (method, path) => (method === 'GET' && path.endsWith(blob) ? (++gets === 1 ? { cut: 40 * MiB, garble: true } : 'ignore-range') : undefined);
    const c = await SnapshotStore.open(join(work, 'c'));
    await c.pull(snap.digest, remote);
    expect(gets).toBe(2);
    expect(createHash('sha256').update(readFileSync(join(c.get(snap.digest).root, 'copy/data/disk.img'))).digest('hex')).toBe(blob.slice(7));
    expect(await c.get(snap.digest).verify()).toEqual({ entries: 2, bytes: 96 * MiB });
    await a.close();
    await b.close();
    await c.close();
  });

  it('re-push uploads nothing; a one-file change uploads the root, one piece and at most two packs; a pull next to a sibling downloads only the metadata and the difference', async () => {
    const { source, proxy, remote, a, b } = await setup('delta', 600);
    const first = await a.capture({ source, ...CAPTURE });
    const cold = await a.push(first.digest, remote);
    expect(cold.uploaded).toBe(cold.blobs);
    expect(cold.blobs).toBeGreaterThan(3);
    proxy.log.length = 0;
    const again = await a.push(first.digest, remote);
    expect(again).toMatchObject({ existed: true, uploaded: 0, bytesUploaded: 0 });
    expect(proxy.log.every((l) => l.startsWith('GET '))).toBe(true);
    await b.pull(first.digest, remote);

    chmodSync(join(source, 'src/many/f123.ts'), 0o644);
    writeFileSync(join(source, 'src/many/f123.ts'), noise(999));
    const second = await a.capture({ source, ...CAPTURE, revision: 's'.repeat(40) });
    proxy.log.length = 0;
    const delta = await a.push(second.digest, remote);
    const { pieces } = cutPieces(readFileSync(join(second.root, 'manifest.json')));
    const before = new Set(cutPieces(readFileSync(join(first.root, 'manifest.json'))).pieces.map((p: { digest: string }) => p.digest));
    const piecesUp = pieces.filter((p: { digest: string }) => !before.has(p.digest)).length;
    expect(piecesUp).toBe(1);
    const packsUp = blobPuts(proxy.log).filter((l) => l.startsWith('PUT')).length - 1 - piecesUp;
    expect(packsUp).toBeGreaterThanOrEqual(1);
    expect(packsUp).toBeLessThanOrEqual(2);
    expect(delta.uploaded).toBe(1 + piecesUp + packsUp);
    expect(delta.skipped).toBe(delta.blobs - delta.uploaded);
    // What went up is those blobs and the image manifest: at most the two largest packs, the changed piece and the root.
    const packSizes = chooseLayout(second.toJSON() as never).packs.map((p: { size: number }) => p.size).sort((x: number, y: number) => y - x);
    const piece = pieces.find((p: { digest: string }) => !before.has(p.digest))!;
    const root = cutPieces(readFileSync(join(second.root, 'manifest.json'))).root.length;
    expect(delta.bytesUploaded).toBeLessThan(packSizes[0] + packSizes[1] + (piece.end - piece.start) + root + 64 * 1024);
    expect(delta.bytesUploaded).toBeLessThan(cold.bytesUploaded / 4);

    proxy.log.length = 0;
    const pulled = await b.pull(second.digest, remote);
    // the root, every piece of the entry lists, and the one pack holding the new content; every other content came from the sibling
    expect(blobGets(proxy.log)).toHaveLength(2 + pieces.length);
    expect(pulled.downloaded).toBe(2 + pieces.length);
    expect(pulled.reused).toBeGreaterThan(600);
    expect(describeTree(b.get(second.digest).root)).toEqual(describeTree(second.root));
    // reuseLocal false: every blob asked for, none taken from the sibling (the registry learns nothing of what b holds).
    b.remove(second.digest);
    proxy.log.length = 0;
    const whole = await b.pull(second.digest, remote, { reuseLocal: false });
    expect([whole.reused, whole.reusedBytes, whole.downloaded]).toEqual([0, 0, whole.blobs]);
    expect(blobGets(proxy.log)).toHaveLength(whole.blobs);
    expect(describeTree(b.get(second.digest).root)).toEqual(describeTree(second.root));
    await expectError(async () => b.pull(second.digest, remote, { reuseLocal: 'no' as never }), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.reuseLocal" property must be of type boolean. Received type string (\'no\')' });
    await a.close();
    await b.close();
  });

  rootPassOnly('the same tree captured at another path shares every blob but its root document: that push uploads one small blob', async () => {
    const { work, source, proxy, remote, a, b } = await setup('paths');
    const elsewhere = join(work, 'checkouts/job-2/source');
    mkdirSync(join(work, 'checkouts/job-2'), { recursive: true });
    execFileSync('cp', ['-a', source, elsewhere]);
    const first = await a.capture({ source, ...CAPTURE });
    const second = await a.capture({ source: elsewhere, ...CAPTURE });
    expect(second.digest).not.toBe(first.digest);
    await a.push(first.digest, remote);
    proxy.log.length = 0;
    const r = await a.push(second.digest, remote);
    expect(r).toMatchObject({ existed: false, blobs: 5, uploaded: 1, skipped: 4 });
    const root = cutPieces(readFileSync(join(second.root, 'manifest.json'))).root;
    expect(blobPuts(proxy.log)).toHaveLength(1);
    // What it asked about first and found missing: the root document alone.
    expect(proxy.log.find((l) => l.startsWith('HEAD '))).toMatch(new RegExp(`/blobs/sha256:${createHash('sha256').update(root).digest('hex')}$`));
    expect(r.bytesUploaded).toBeGreaterThanOrEqual(root.length);
    expect(r.bytesUploaded).toBeLessThan(root.length + 4096);
    // Pulled at its own path: its own digest, the same tree.
    const pulled = await b.pull(second.digest, remote);
    expect(pulled).toMatchObject({ digest: second.digest, remoteDigest: second.digest, existed: false });
    expect(describeTree(b.get(second.digest).root)).toEqual(describeTree(second.root));

    // The first snapshot, published for a third runner's path: the digest a capture there gives, proven as pushed first.
    const third = join(work, 'checkouts/job-3/source');
    mkdirSync(join(work, 'checkouts/job-3'));
    execFileSync('cp', ['-a', source, third]);
    const local = await a.capture({ source: third, ...CAPTURE });
    const c = await SnapshotStore.open(join(work, 'c'));
    const moved = await c.pull(first.digest, remote, { source: `${third}/` });
    expect(moved).toMatchObject({ digest: local.digest, remoteDigest: first.digest, existed: false });
    const snap = c.get(local.digest);
    expect([snap.source, c.list()]).toEqual([third, [local.digest]]);
    expect(snap.toJSON()).toEqual(local.toJSON());
    expect(await snap.verify()).toEqual(await local.verify());
    expect(describeTree(snap.root)).toEqual(describeTree(local.root));
    // Again: the store holds it under the local digest (published once, nothing left behind), and says so: only the metadata was fetched, no file or pack.
    const again = await c.pull(first.digest, remote, { source: third });
    expect(again).toMatchObject({ digest: local.digest, remoteDigest: first.digest, existed: true, blobs: 0, reused: 0 });
    expect([again.downloaded < moved.downloaded, again.bytesDownloaded < moved.bytesDownloaded]).toEqual([true, true]);
    expect(storeLeftovers(c.root)).toEqual([`snapshots/${local.digest}`]);
    // Its own source path changes nothing.
    expect(await c.pull(second.digest, remote, { source: elsewhere })).toMatchObject({ digest: second.digest, remoteDigest: second.digest });
    const bad = [
      [await fails(c.pull(first.digest, remote, { source: 'checkouts/job-3' })), 'SEAL_BAD_PATH', 'source must be an absolute path: checkouts/job-3'],
      [await fails(c.pull(first.digest, remote, { source: '/ci/../job' })), 'SEAL_BAD_PATH', 'source must be a canonical absolute path: /ci/../job'],
    ] as const;
    for (const [err, code, message] of bad) expect([err.code, err.message]).toEqual([code, message]);
    const typeErr = await c.pull(first.digest, remote, { source: 42 as never }).catch((e: unknown) => e as NodeJS.ErrnoException);
    expect([typeErr instanceof TypeError, (typeErr as NodeJS.ErrnoException).code]).toEqual([true, 'ERR_INVALID_ARG_TYPE']);
    await a.close();
    await b.close();
    await c.close();
  });

  rootPassOnly('mounts blobs from another repository of the same registry instead of uploading them', async () => {
    const { source, proxy, remote, a } = await setup('mount');
    const snap = await a.capture({ source, ...CAPTURE });
    await a.push(snap.digest, remote);
    const other = `${proxy.address}/${repoName('mount-target')}`;
    proxy.log.length = 0;
    const r = await a.push(snap.digest, other, { mountFrom: [remote.slice(remote.indexOf('/') + 1)] });
    expect(r).toMatchObject({ uploaded: 0, mounted: 5, skipped: 0 });
    expect(proxy.log.filter((l) => l.startsWith('POST')).every((l) => l.includes('/blobs/uploads/'))).toBe(true);
    await a.close();
  });

  it.skipIf(!existsSync('/usr/bin/skopeo') || unprivilegedPass)('skopeo inspect --raw reads what push wrote', async () => {
    const { source, remote, a } = await setup('skopeo');
    const snap = await a.capture({ source, ...CAPTURE });
    await a.push(snap.digest, remote);
    const direct = `${registry!.address}${remote.slice(remote.indexOf('/'))}`;
    const raw = execFileSync('skopeo', ['inspect', '--raw', '--tls-verify=false', `docker://${direct}:ts-${snap.digest}`], { encoding: 'utf8' });
    const manifest = JSON.parse(raw);
    expect(manifest.artifactType).toBe('application/vnd.treeseal.snapshot.v1');
    expect(manifest.config.mediaType).toBe('application/vnd.treeseal.snapshot.root.v2+json');
    expect(manifest.annotations['vnd.treeseal.snapshot']).toBe(snap.digest);
    expect(manifest.layers.map((l: { mediaType: string }) => l.mediaType)).toEqual([
      'application/vnd.treeseal.entries.v1',
      'application/vnd.treeseal.entries.v1',
      'application/vnd.treeseal.pack.v2',
      'application/vnd.treeseal.file.v1',
    ]);
    const config = execFileSync('skopeo', ['inspect', '--raw', '--config', '--tls-verify=false', `docker://${direct}:ts-${snap.digest}`]);
    expect(config.toString('utf8')).toBe(cutPieces(readFileSync(join(snap.root, 'manifest.json'))).root);
    await a.close();
  });

  rootPassOnly('treeseal push and pull on the command line, with --json', async () => {
    const { work, source, remote, a } = await setup('cli');
    const snap = await a.capture({ source, ...CAPTURE });
    await a.close();
    // Asynchronous: the token proxy answering the command runs in this process.
    const run = (store: string, ...args: string[]) =>
      new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
        execFile(process.execPath, [CLI, '--store', store, ...args], { encoding: 'utf8' }, (err, stdout, stderr) => {
          resolve({ status: err === null ? 0 : Number((err as { code?: number }).code), stdout, stderr });
        });
      });
    const pushed = await run(join(work, 'a'), 'push', snap.digest.slice(0, 12), remote, '--json', '--concurrency', '2');
    expect(pushed.stderr).toBe('');
    expect(JSON.parse(pushed.stdout)).toMatchObject({ digest: snap.digest, uploaded: 5, existed: false });
    const human = await run(join(work, 'c'), 'pull', snap.digest, remote);
    expect(human.status).toBe(0);
    expect(human.stdout).toMatch(new RegExp(`^pulled ${snap.digest.slice(0, 12)} from ${remote}: 5 of 5 blobs downloaded \\(.+\\), 0 contents \\(0 B\\) taken from local snapshots, all verified in `));
    // --source: published for another path (relative to the working directory), the line says both digests.
    const moved = await run(join(work, 'e'), 'pull', snap.digest, remote, '--source', 'relative/checkout');
    expect(moved.stderr).toBe('');
    const m = new RegExp(`^pulled ([0-9a-f]{12}) from ${remote} \\(${snap.digest.slice(0, 12)} there, published for ${process.cwd()}/relative/checkout\\): 5 of 5 blobs downloaded`).exec(moved.stdout);
    expect(m?.[1]).not.toBe(snap.digest.slice(0, 12));
    const missing = await run(join(work, 'd'), 'pull', 'f'.repeat(64), remote);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toBe(`treeseal: SEAL_REMOTE: snapshot ${'f'.repeat(64)} is not in ${remote} (no tag ts-${'f'.repeat(64)}): HTTP 404 MANIFEST_UNKNOWN (manifest unknown)\n`);
    const usage = await run(join(work, 'd'), 'pull', snap.digest, remote, '--mount-from', 'x');
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/^treeseal: pull does not take --mount-from\n/);
  });
});
