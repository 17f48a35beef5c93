// cat.test.ts: catRemote and treeseal cat against a real registry: only the manifest, the config and the file's own bytes go over the wire (a Range of its pack or its blob), exact bytes, tampered bytes refused before any is handed out, bad input typed.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

import { catRemote, type Snapshot } from '../../../dist/index.js';
import { ENTRIES_TYPE, chooseLayout } from '../../../dist/internal.js';
import { captured } from './fixtures.js';
import { blobPath, checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy, type TokenProxy } from './harness.js';

const registry = await testRegistry('plain');
const CLI = fileURLToPath(new URL('../../../dist/cli.js', import.meta.url));
const OCI = 'application/vnd.oci.image.manifest.v1+json';

checkNoFileFdLeaks();

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

interface Layer {
  mediaType: string;
  digest: string;
  size: number;
}

interface Pushed {
  work: string;
  source: string;
  snap: Snapshot;
  proxy: TokenProxy;
  repo: string;
  remote: string;
  manifestDigest: string;
  config: Layer;
  /** The pieces of its entry lists (the leading layers). */
  pieces: Layer[];
  /** The layers after them: packs, then file blobs. */
  layers: Layer[];
}

async function pushed(label: string): Promise<Pushed> {
  const { work, store, snap } = await captured();
  const proxy = await tokenProxy(registry!.address);
  const repo = repoName(label);
  const remote = `${proxy.address}/${repo}`;
  const { manifestDigest } = await store.push(snap.digest, remote);
  await store.close();
  const res = await fetch(`http://${registry!.address}/v2/${repo}/manifests/${manifestDigest}`, { headers: { accept: OCI } });
  const manifest = (await res.json()) as { config: Layer; layers: Layer[] };
  proxy.log.length = 0;
  proxy.bodies.length = 0;
  const pieces = manifest.layers.filter((l) => l.mediaType === ENTRIES_TYPE);
  expect(pieces).toEqual(manifest.layers.slice(0, pieces.length));
  return { work, source: join(work, 'source'), snap, proxy, repo, remote, manifestDigest, config: manifest.config, pieces, layers: manifest.layers.slice(pieces.length) };
}

/** Where push put a file's bytes, worked out from the layout (not from the code under test): its blob and offset. */
function placeOf(p: Pushed, path: string): { blob: string; offset: number; size: number; sha256: string } {
  const entry = p.snap.entries.find((e) => e.path === path)!;
  const layout = chooseLayout(p.snap.toJSON() as never);
  const file = layout.files.find((f: { sha256: string }) => f.sha256 === entry.sha256);
  if (file !== undefined) return { blob: `sha256:${entry.sha256}`, offset: 0, size: entry.size, sha256: entry.sha256 };
  const index = layout.packs.findIndex((pk: { contents: { sha256: string }[] }) => pk.contents.some((c) => c.sha256 === entry.sha256));
  let offset = 0;
  for (const c of layout.packs[index].contents as { sha256: string; size: number }[]) {
    if (c.sha256 === entry.sha256) break;
    offset += c.size;
  }
  return { blob: p.layers[index]!.digest, offset, size: entry.size, sha256: entry.sha256 };
}

/** A writable that keeps what it is given. */
function collector(): { stream: Writable; bytes: () => Buffer } {
  const chunks: Buffer[] = [];
  const stream = new Writable({ write: (chunk: Buffer, _encoding, done) => (chunks.push(chunk), done()) });
  return { stream, bytes: () => Buffer.concat(chunks) };
}

/** os.tmpdir() pointed at a private directory for a test (the temp file of a large cat goes there). */
function privateTmp(): string {
  const dir = mkdtempSync(join(tmpdir(), 'treeseal-cat-test-'));
  process.env.TMPDIR = dir;
  return dir;
}
const savedTmp = process.env.TMPDIR;
afterEach(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
});

const blobLines = (p: Pushed): string[] => p.proxy.log.filter((l) => l.includes('/blobs/'));
/** The snapshot's metadata: its root document and every piece of its entry lists (fetched at once, so in any order), and their bytes. */
const metadataLines = (p: Pushed): string[] => [p.config, ...p.pieces].map((l) => `GET /v2/${p.repo}/blobs/${l.digest}`).sort();
const metadataBytes = (p: Pushed): number => [p.config, ...p.pieces].reduce((n, l) => n + l.size, 0);
/** The blob requests of one cat: the metadata (sorted), then the one read of the file's bytes. */
const catLines = (p: Pushed): string[] => {
  const lines = blobLines(p);
  return [...lines.slice(0, -1).sort(), ...lines.slice(-1)];
};
const blobBytes = (p: Pushed): number => p.proxy.bodies.filter((b) => b.request.includes('/blobs/')).reduce((n, b) => n + b.bytes, 0);

/** Flips one byte of a blob in the registry's storage. */
function tamper(digest: string, at: number): void {
  const path = blobPath(registry!.storage!, digest);
  const bytes = readFileSync(path);
  bytes[at] = bytes[at]! ^ 0xff;
  writeFileSync(path, bytes);
}

function cli(...args: string[]): Promise<{ status: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { encoding: 'buffer', env: { ...process.env, TREESEAL_STORE: join(tmpdir(), `treeseal-no-store-${process.pid}`) } }, (err, stdout, stderr) => {
      resolve({ status: err === null ? 0 : Number((err as { code?: number }).code), stdout, stderr: stderr.toString('utf8') });
    });
  });
}

describe.skipIf(registry === undefined)('cat: one file of a snapshot in a registry', () => {
  it("fetches the manifest, the config and the file's own bytes alone: a Range of its pack, or of its blob; exact bytes", async () => {
    const p = await pushed('cat');
    const { snap, repo } = p;
    const small = placeOf(p, 'src/many/f002.ts');
    const bytes = await catRemote(p.remote, snap.digest, 'src/many/f002.ts');
    expect(bytes.equals(readFileSync(join(p.source, 'src/many/f002.ts')))).toBe(true);
    expect(p.pieces).toHaveLength(2);
    expect(catLines(p)).toEqual([...metadataLines(p), `GET /v2/${repo}/blobs/${small.blob} range=bytes=${small.offset}-${small.offset + small.size - 1}`]);
    expect(blobBytes(p)).toBe(metadataBytes(p) + small.size);

    p.proxy.log.length = 0;
    p.proxy.bodies.length = 0;
    const large = placeOf(p, 'src/index/graph.bin');
    expect(large.blob).toBe(`sha256:${large.sha256}`);
    expect((await catRemote(p.remote, snap.digest, 'src/index/graph.bin')).equals(readFileSync(join(p.source, 'src/index/graph.bin')))).toBe(true);
    expect(catLines(p)).toEqual([...metadataLines(p), `GET /v2/${repo}/blobs/${large.blob} range=bytes=0-${large.size - 1}`]);
    expect(blobBytes(p)).toBe(metadataBytes(p) + large.size);

    // A mount's file by its target; an empty file (no bytes to fetch); `.` and empty components dropped; by tag and by manifest digest.
    p.proxy.log.length = 0;
    expect((await catRemote(p.remote, snap.digest, 'node_modules/pkg/index.js')).toString()).toBe('module.exports = 1;\n');
    expect((await catRemote(p.remote, snap.digest, 'src/empty.txt')).length).toBe(0);
    expect(blobLines(p).filter((l) => l.includes('range='))).toHaveLength(1);
    expect((await catRemote(p.remote, snap.digest, './src//a.txt')).toString()).toBe('alpha\n');
    expect((await catRemote(p.remote, { tag: 'r'.repeat(40) }, 'src/lib/deep/b.ts')).toString()).toBe('export const b = 2;\n');
    expect((await catRemote(p.remote, { manifest: p.manifestDigest }, 'src/dup1.txt')).toString()).toBe('same bytes\n');
  });

  it('writes to a stream or an fd once the bytes are proven, through a temp file above maxBytes, and reports what it fetched', async () => {
    const p = await pushed('cat-output');
    const { snap } = p;
    const small = placeOf(p, 'src/many/f001.ts');
    const out = collector();
    const report = await catRemote(p.remote, snap.digest, 'src/many/f001.ts', { output: out.stream });
    expect(out.bytes().equals(readFileSync(join(p.source, 'src/many/f001.ts')))).toBe(true);
    expect(report).toEqual({
      digest: snap.digest,
      proof: 'snapshot',
      remote: p.remote,
      manifestDigest: p.manifestDigest,
      path: 'src/many/f001.ts',
      size: small.size,
      sha256: small.sha256,
      mode: 0,
      blob: small.blob,
      offset: small.offset,
      bytesDownloaded: metadataBytes(p) + small.size,
      elapsedMs: report.elapsedMs,
    });
    // An executable of a mount: its mode as recorded.
    expect(await catRemote(p.remote, snap.digest, 'node_modules/pkg/bin/run', { output: collector().stream })).toMatchObject({ mode: 0o755, size: 19 });

    const tmp = privateTmp();
    const file = join(p.work, 'out.bin');
    const fd = openSync(file, 'w');
    try {
      expect(await catRemote(p.remote, snap.digest, 'src/index/graph.bin', { output: fd, maxBytes: 1000 })).toMatchObject({ size: 1536 * 1024 });
    } finally {
      closeSync(fd);
    }
    expect(readFileSync(file).equals(readFileSync(join(p.source, 'src/index/graph.bin')))).toBe(true);
    expect(readdirSync(tmp)).toEqual([]);
  });

  it('bytes that do not match the sha256 the snapshot records: SEAL_CORRUPT, nothing returned or written, no temp file left; the rest of the pack is not read', async () => {
    const p = await pushed('cat-tampered');
    const { snap } = p;
    const small = placeOf(p, 'src/many/f003.ts');
    tamper(small.blob, small.offset + 5);
    const expected = (path: string, sha: string): [string, string] => ['SEAL_CORRUPT', `registry ${p.proxy.address} sent other bytes for ${path} than snapshot ${snap.digest} records (sha256 ${sha})`];
    let err = await fails(catRemote(p.remote, snap.digest, 'src/many/f003.ts'));
    expect([err.code, err.message]).toEqual(expected('src/many/f003.ts', small.sha256));
    const out = collector();
    err = await fails(catRemote(p.remote, snap.digest, 'src/many/f003.ts', { output: out.stream }));
    expect([err.code, err.message]).toEqual(expected('src/many/f003.ts', small.sha256));
    expect(out.bytes().length).toBe(0);
    // Another file of the same pack: its own range is intact.
    expect((await catRemote(p.remote, snap.digest, 'src/a.txt')).toString()).toBe('alpha\n');

    const large = placeOf(p, 'src/index/graph.bin');
    tamper(large.blob, large.size - 1);
    const tmp = privateTmp();
    err = await fails(catRemote(p.remote, snap.digest, 'src/index/graph.bin', { output: out.stream, maxBytes: 1000 }));
    expect([err.code, err.message]).toEqual(expected('src/index/graph.bin', large.sha256));
    expect(out.bytes().length).toBe(0);
    expect(readdirSync(tmp)).toEqual([]);

    // A moved tag: ts-<other digest> names this snapshot's manifest; its config proves it is not that snapshot.
    const other = 'b'.repeat(64);
    const manifest = await (await fetch(`http://${registry!.address}/v2/${p.repo}/manifests/${p.manifestDigest}`, { headers: { accept: OCI } })).arrayBuffer();
    const put = await fetch(`http://${registry!.address}/v2/${p.repo}/manifests/ts-${other}`, { method: 'PUT', headers: { 'content-type': OCI }, body: Buffer.from(manifest) });
    expect(put.status).toBe(201);
    err = await fails(catRemote(p.remote, other, 'src/a.txt'));
    expect([err.code, err.message]).toEqual(['SEAL_CORRUPT', `${p.remote}:ts-${other} holds snapshot ${snap.digest}, not ${other} (the tag was moved or the registry lies)`]);

    const direct = `${registry!.address}/${p.repo}`;
    const r = await cli('cat', direct, snap.digest, 'src/many/f003.ts');
    expect([r.status, r.stdout.length, r.stderr]).toEqual([1, 0, `treeseal: SEAL_CORRUPT: registry ${registry!.address} sent other bytes for src/many/f003.ts than snapshot ${snap.digest} records (sha256 ${small.sha256})\n`]);
  });

  it('bad input is typed: a path that is absolute, has .., names a directory or a symlink or nothing; a digest not there; a bad tag or option; a file over maxBytes', async () => {
    const p = await pushed('cat-bad');
    const { snap, remote } = p;
    const d = snap.digest;
    const before: [unknown, string, string][] = [
      ['/abs/a.txt', 'SEAL_BAD_PATH', 'file path must be relative: /abs/a.txt'],
      ['src/../a.txt', 'SEAL_BAD_PATH', "file path must not contain '..': src/../a.txt"],
      ['', 'SEAL_BAD_PATH', 'file path must be a non-empty relative path'],
      [7, 'ERR_INVALID_ARG_TYPE', 'The "path" argument must be of type string. Received type number (7)'],
    ];
    for (const [path, code, message] of before) await expect(catRemote(remote, d, path as string)).rejects.toMatchObject({ code, message });
    await expect(catRemote(remote, { tag: 'bad tag' }, 'src/a.txt')).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    await expect(catRemote(remote, 'abc', 'src/a.txt')).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_VALUE' });
    await expect(catRemote(remote, d, 'src/a.txt', { output: 'stdout' as never })).rejects.toMatchObject({ code: 'ERR_INVALID_ARG_TYPE' });
    await expect(catRemote(remote, d, 'src/a.txt', { maxBytes: -1 })).rejects.toMatchObject({ code: 'ERR_OUT_OF_RANGE' });
    // Refused before anything was sent.
    expect(p.proxy.log).toEqual([]);

    const found: [string, string, string][] = [
      ['src/lib', 'SEAL_BAD_PATH', `not a file in snapshot ${d}: src/lib is a directory`],
      ['node_modules/pkg/run-link', 'SEAL_SYMLINK', `not a file in snapshot ${d}: node_modules/pkg/run-link is a symlink (to bin/run)`],
      ['src/nope.txt', 'SEAL_UNAVAILABLE', `no such file in snapshot ${d}: src/nope.txt`],
      ['src/index/graph.bin/x', 'SEAL_UNAVAILABLE', `no such file in snapshot ${d}: src/index/graph.bin/x`],
    ];
    for (const [path, code, message] of found) {
      const err = await fails(catRemote(remote, d, path));
      expect([path, err.code, err.message, err.path]).toEqual([path, code, message, path]);
    }
    let err = await fails(catRemote(remote, d, 'src/index/graph.bin', { maxBytes: 1000 }));
    expect([err.code, err.message]).toEqual(['SEAL_LIMIT', 'file is larger than maxBytes (1000 bytes): src/index/graph.bin has 1572864 bytes']);
    // None of these read a byte of a file: the manifest and the config only.
    expect(p.proxy.log.filter((l) => l.includes('range='))).toEqual([]);
    err = await fails(catRemote(remote, 'f'.repeat(64), 'src/a.txt'));
    expect([err.code, err.message]).toEqual(['SEAL_REMOTE', `snapshot ${'f'.repeat(64)} is not in ${remote} (no tag ts-${'f'.repeat(64)}): HTTP 404 MANIFEST_UNKNOWN (manifest unknown)`]);
  });

  it('treeseal cat writes the exact bytes to stdout with no store; --tag and --json; a missing <digest> is a usage error', async () => {
    const p = await pushed('cat-cli');
    const direct = `${registry!.address}/${p.repo}`;
    const bin = await cli('cat', direct, p.snap.digest, 'src/many/f004.ts');
    expect([bin.status, bin.stderr]).toEqual([0, '']);
    expect(bin.stdout.equals(readFileSync(join(p.source, 'src/many/f004.ts')))).toBe(true);
    expect(sha256(bin.stdout)).toBe(placeOf(p, 'src/many/f004.ts').sha256);
    const json = await cli('cat', '--tag', 'r'.repeat(40), direct, 'src/a.txt', '--json');
    expect(JSON.parse(json.stdout.toString('utf8'))).toMatchObject({ digest: p.snap.digest, path: 'src/a.txt', size: 6, manifestDigest: p.manifestDigest });
    const usage = await cli('cat', direct, 'src/a.txt');
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/^treeseal: cat takes <remote> <digest> <path> \(or --tag NAME or --manifest DIGEST instead of <digest>\)\n/);
    expect(existsSync(join(tmpdir(), `treeseal-no-store-${process.pid}`))).toBe(false);
  });
});
