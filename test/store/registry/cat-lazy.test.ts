// cat-lazy.test.ts: cat by tag or manifest digest against a real registry: the root document, the one piece that records the file, the pack's index and the file's range go over the wire, nothing else; what the manifest's author could have got wrong falls back or is refused.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, catRemote, type Snapshot } from '../../../dist/index.js';
import { ENTRIES_TYPE, INDEXED_PACK_TYPE, PACK_TYPE, chooseLayout, findInIndex, footerCount, indexBytes, packIndex } from '../../../dist/internal.js';
import { CAPTURE, writeSource } from './fixtures.js';
import { blobPath, checkNoFileFdLeaks, fails, repoName, testRegistry, tokenProxy, type TokenProxy } from './harness.js';
import { tempDir, writeTree } from '../../helpers.js';

const registry = await testRegistry('plain');
const OCI = 'application/vnd.oci.image.manifest.v1+json';
const TAG = 'r'.repeat(40);

checkNoFileFdLeaks();

interface Layer {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}
interface Manifest {
  config: Layer;
  layers: Layer[];
  annotations: Record<string, string>;
}

interface Pushed {
  source: string;
  snap: Snapshot;
  proxy: TokenProxy;
  repo: string;
  remote: string;
  manifestDigest: string;
  manifest: Manifest;
  /** What registry storage holds for a blob. */
  blob: (digest: string) => Buffer;
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A pushed capture of writeSource's tree plus `extra` small files under src/bulk (enough of them make several pieces). */
async function pushed(label: string, extra = 0): Promise<Pushed> {
  const work = tempDir();
  const source = join(work, 'source');
  writeSource(source, 5);
  const bulk: Record<string, string> = {};
  for (let i = 0; i < extra; i++) bulk[`src/bulk/dir${String(i % 40).padStart(2, '0')}/a-rather-long-file-name-${String(i).padStart(5, '0')}.ts`] = `export const v${i} = ${i};\n`;
  writeTree(source, bulk);
  const store = await SnapshotStore.open(join(work, 'a'));
  const snap = await store.capture({ source, ...CAPTURE });
  const proxy = await tokenProxy(registry!.address);
  const repo = repoName(label);
  const remote = `${proxy.address}/${repo}`;
  const { manifestDigest } = await store.push(snap.digest, remote);
  await store.close();
  const manifest = (await (await fetch(`http://${registry!.address}/v2/${repo}/manifests/${manifestDigest}`, { headers: { accept: OCI } })).json()) as Manifest;
  proxy.log.length = 0;
  proxy.bodies.length = 0;
  return { source, snap, proxy, repo, remote, manifestDigest, manifest, blob: (d) => readFileSync(blobPath(registry!.storage!, d)) };
}

const blobLines = (p: Pushed): string[] => p.proxy.log.filter((l) => l.includes('/blobs/'));
const blobBytes = (p: Pushed): number => p.proxy.bodies.filter((b) => b.request.includes('/blobs/')).reduce((n, b) => n + b.bytes, 0);
const pieces = (p: Pushed): Layer[] => p.manifest.layers.filter((l) => l.mediaType === ENTRIES_TYPE);

/** The piece that records `name` (found by its bytes, not by the code under test). */
function pieceOf(p: Pushed, name: string): Layer {
  const key = `,"path":${JSON.stringify(name)},"sha256":"`;
  const found = pieces(p).filter((l) => p.blob(l.digest).includes(key));
  expect(found).toHaveLength(1);
  return found[0]!;
}

/** A packed file's pack layer and offset, worked out from the layout. */
function packOf(p: Pushed, path: string, list = p.snap.entries): { layer: Layer; offset: number; size: number; sha256: string } {
  const entry = list.find((e) => e.path === path)!;
  const layout = chooseLayout(p.snap.toJSON() as never);
  const index = layout.packs.findIndex((pk: { contents: { sha256: string }[] }) => pk.contents.some((c) => c.sha256 === entry.sha256));
  let offset = 0;
  for (const c of layout.packs[index].contents as { sha256: string; size: number }[]) {
    if (c.sha256 === entry.sha256) break;
    offset += c.size;
  }
  const layer = p.manifest.layers.filter((l) => l.mediaType === INDEXED_PACK_TYPE)[index]!;
  return { layer, offset, size: entry.size, sha256: entry.sha256 };
}

/** Uploads bytes as a blob of the test repository (POST, then a monolithic PUT); returns its digest. */
async function upload(repo: string, bytes: Buffer): Promise<string> {
  const digest = `sha256:${sha(bytes)}`;
  const start = await fetch(`http://${registry!.address}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  const location = new URL(start.headers.get('location')!, `http://${registry!.address}`);
  location.searchParams.set('digest', digest);
  expect((await fetch(location, { method: 'PUT', body: bytes, headers: { 'content-type': 'application/octet-stream' } })).status).toBe(201);
  return digest;
}

async function putManifest(repo: string, ref: string, m: Manifest): Promise<string> {
  const body = Buffer.from(JSON.stringify(m));
  expect((await fetch(`http://${registry!.address}/v2/${repo}/manifests/${ref}`, { method: 'PUT', headers: { 'content-type': OCI }, body })).status).toBe(201);
  return `sha256:${sha(body)}`;
}

describe.skipIf(registry === undefined)('cat by tag or manifest digest reads one piece', () => {
  it('fetches the root document, the piece that records the file, its pack index and its range; exact bytes; proof "manifest"', async () => {
    const p = await pushed('lazy', 3000);
    const { repo } = p;
    expect(pieces(p).length).toBeGreaterThanOrEqual(4);
    // Every piece's layer names its first entry's path.
    for (const l of pieces(p)) expect(p.blob(l.digest).toString('latin1')).toContain(`,"path":${JSON.stringify(l.annotations!['vnd.treeseal.first-path'])},"sha256":"`);
    const entries = p.snap.entries.filter((e) => e.kind === 'file' && e.path.startsWith('src/bulk/'));
    const picks = [entries[0]!, entries[Math.floor(entries.length / 2)]!, entries[entries.length - 1]!];
    for (const [i, e] of picks.entries()) {
      p.proxy.log.length = 0;
      p.proxy.bodies.length = 0;
      const path = e.path;
      const piece = pieceOf(p, e.path);
      const { layer, offset, size } = packOf(p, e.path);
      const tail = Math.min(layer.size, 8192);
      const blob = p.blob(layer.digest);
      const index = indexBytes(footerCount(blob.subarray(blob.length - 16), blob.length, () => new Error('bad')));
      // An index longer than the first read of the pack's end is read in a second request.
      const more = index > tail ? [`GET /v2/${repo}/blobs/${layer.digest} range=bytes=${layer.size - index}-${layer.size - tail - 1}`] : [];
      const ref = i === 1 ? { tag: TAG } : { manifest: p.manifestDigest };
      const out: Buffer[] = [];
      const report = await catRemote(p.remote, ref, path, { output: new Writable({ write: (c: Buffer, _e, done) => (out.push(c), done()) }) });
      expect(Buffer.concat(out).equals(readFileSync(join(p.source, path)))).toBe(true);
      expect(blobLines(p)).toEqual([
        `GET /v2/${repo}/blobs/${p.manifest.config.digest}`,
        `GET /v2/${repo}/blobs/${piece.digest}`,
        `GET /v2/${repo}/blobs/${layer.digest} range=bytes=${layer.size - tail}-${layer.size - 1}`,
        ...more,
        `GET /v2/${repo}/blobs/${layer.digest} range=bytes=${offset}-${offset + size - 1}`,
      ]);
      expect(report).toEqual({
        digest: p.snap.digest,
        proof: 'manifest',
        remote: p.remote,
        manifestDigest: p.manifestDigest,
        path,
        size,
        sha256: e.sha256,
        mode: 0,
        blob: layer.digest,
        offset,
        bytesDownloaded: p.manifest.config.size + piece.size + Math.max(tail, index) + size,
        elapsedMs: report.elapsedMs,
      });
      expect(blobBytes(p)).toBe(report.bytesDownloaded);
    }
    // By snapshot digest: every piece, proven against the snapshot digest.
    p.proxy.log.length = 0;
    const e = picks[1]!;
    expect((await catRemote(p.remote, p.snap.digest, e.path)).equals(readFileSync(join(p.source, e.path)))).toBe(true);
    expect(blobLines(p)).toHaveLength(1 + pieces(p).length + 1);
  });

  it("a mount's file, a file with a blob of its own and an empty file; a directory, a symlink and a path not there say so as by digest", async () => {
    const p = await pushed('lazy-kinds');
    const { repo } = p;
    const ref = { manifest: p.manifestDigest };
    p.proxy.log.length = 0;
    expect((await catRemote(p.remote, ref, 'node_modules/pkg/index.js')).toString()).toBe('module.exports = 1;\n');
    expect(blobLines(p).filter((l) => !l.includes('range=')).map((l) => l.slice(l.lastIndexOf('/') + 1))).toEqual([p.manifest.config.digest, pieceOf(p, 'payload/pkg/index.js').digest]);
    p.proxy.log.length = 0;
    const graph = p.snap.entries.find((e) => e.path === 'src/index/graph.bin')!;
    expect((await catRemote(p.remote, ref, 'src/index/graph.bin')).equals(readFileSync(join(p.source, 'src/index/graph.bin')))).toBe(true);
    expect(blobLines(p)).toEqual([
      `GET /v2/${repo}/blobs/${p.manifest.config.digest}`,
      `GET /v2/${repo}/blobs/${pieceOf(p, 'src/index/graph.bin').digest}`,
      `GET /v2/${repo}/blobs/sha256:${graph.sha256} range=bytes=0-${graph.size - 1}`,
    ]);
    p.proxy.log.length = 0;
    expect((await catRemote(p.remote, ref, 'src/empty.txt')).length).toBe(0);
    expect(blobLines(p)).toHaveLength(2);

    const d = p.snap.digest;
    const found: [string, string, string, number][] = [
      ['src/lib', 'SEAL_BAD_PATH', `not a file in snapshot ${d}: src/lib is a directory`, 2],
      ['node_modules/pkg/run-link', 'SEAL_SYMLINK', `not a file in snapshot ${d}: node_modules/pkg/run-link is a symlink (to bin/run)`, 2],
      // Not in the piece it would be in: the whole lists are read (the blobs already read not again), proven, and say it is not there.
      ['src/nope.txt', 'SEAL_UNAVAILABLE', `no such file in snapshot ${d}: src/nope.txt`, 1 + pieces(p).length],
      ['0-before-everything', 'SEAL_UNAVAILABLE', `no such file in snapshot ${d}: 0-before-everything`, 1 + pieces(p).length],
    ];
    for (const [path, code, message, blobs] of found) {
      p.proxy.log.length = 0;
      const err = await fails(catRemote(p.remote, { tag: TAG }, path));
      expect([path, err.code, err.message, err.path, blobLines(p).length]).toEqual([path, code, message, path, blobs]);
    }
  });

  it('falls back to the whole lists where the artifact has no index or no first paths, or a first path lies; the bytes are the same', async () => {
    const p = await pushed('lazy-fallback');
    const { repo } = p;
    const path = 'src/many/f002.ts';
    const want = readFileSync(join(p.source, path));
    const { layer } = packOf(p, 'src/many/f002.ts');
    const catBy = async (m: Manifest): Promise<{ proof: string; blobs: number }> => {
      const digest = await putManifest(repo, 'crafted', m);
      p.proxy.log.length = 0;
      const out: Buffer[] = [];
      const stream = new Writable({ write: (c: Buffer, _e, done) => (out.push(c), done()) });
      const r = await catRemote(p.remote, { manifest: digest }, path, { output: stream });
      expect(Buffer.concat(out).equals(want)).toBe(true);
      return { proof: r.proof, blobs: blobLines(p).length };
    };
    // The first pack format: the same contents without their index.
    const unindexed = structuredClone(p.manifest);
    const packLayer = unindexed.layers.find((l) => l.digest === layer.digest)!;
    const bytes = p.blob(layer.digest);
    const count = footerCount(bytes.subarray(bytes.length - 16), bytes.length, () => new Error('bad'));
    const v1 = bytes.subarray(0, bytes.length - indexBytes(count));
    Object.assign(packLayer, { mediaType: PACK_TYPE, digest: await upload(repo, v1), size: v1.length });
    expect(await catBy(unindexed)).toEqual({ proof: 'snapshot', blobs: 1 + pieces(p).length + 1 });
    // And a pull of it still builds the same snapshot.
    const fresh = await SnapshotStore.open(join(tempDir(), 'b'));
    const pulled = await fresh.pull({ manifest: await putManifest(repo, 'v1', unindexed) }, p.remote);
    expect(pulled.digest).toBe(p.snap.digest);
    await fresh.close();

    const bare = structuredClone(p.manifest);
    for (const l of bare.layers) delete l.annotations?.['vnd.treeseal.first-path'];
    expect(await catBy(bare)).toEqual({ proof: 'snapshot', blobs: 1 + pieces(p).length + 1 });
    // A first path that points past the file: the piece chosen does not hold it, so the whole lists decide.
    const lying = structuredClone(p.manifest);
    lying.layers.find((l) => l.mediaType === ENTRIES_TYPE)!.annotations!['vnd.treeseal.first-path'] = 'zzz';
    expect(await catBy(lying)).toEqual({ proof: 'snapshot', blobs: 1 + pieces(p).length + 1 });
    expect(await catBy(p.manifest)).toEqual({ proof: 'manifest', blobs: 4 });
  });

  it("a pack whose index lies, or a piece whose entry is malformed, is SEAL_CORRUPT and hands out nothing; a pull refuses the pack", async () => {
    const p = await pushed('lazy-lies');
    const { repo } = p;
    const { layer } = packOf(p, 'src/many/f001.ts');
    const bytes = Buffer.from(p.blob(layer.digest));
    // Swap the sizes of the first record and the first one of another size (the contents are random, so two equal
    // sizes may come first): the files are then looked for at other offsets.
    const count = footerCount(bytes.subarray(bytes.length - 16), bytes.length, () => new Error('bad'));
    expect(count).toBeGreaterThanOrEqual(2);
    const at = bytes.length - indexBytes(count);
    const first = bytes.readBigUInt64BE(at + 32);
    let other = 1;
    while (other < count && bytes.readBigUInt64BE(at + other * 40 + 32) === first) other++;
    expect(other).toBeLessThan(count);
    bytes.writeBigUInt64BE(bytes.readBigUInt64BE(at + other * 40 + 32), at + 32);
    bytes.writeBigUInt64BE(first, at + other * 40 + 32);
    const crafted = structuredClone(p.manifest);
    Object.assign(crafted.layers.find((l) => l.digest === layer.digest)!, { digest: await upload(repo, bytes) });
    const digest = await putManifest(repo, 'lies', crafted);
    const outcomes = new Set<string>();
    for (const e of p.snap.entries.filter((x) => x.kind === 'file' && x.path.startsWith('src/many/'))) {
      const r = await catRemote(p.remote, { manifest: digest }, e.path).then(
        (b) => (b.equals(readFileSync(join(p.source, e.path))) ? 'same bytes' : 'OTHER BYTES'),
        (err: { code: string; message: string }) => `${err.code}: ${err.message.replace(/src\/many\/f\d+\.ts|sha256 [0-9a-f]{64}|\d+ bytes/g, 'X')}`,
      );
      outcomes.add(r);
    }
    expect(outcomes).not.toContain('OTHER BYTES');
    expect([...outcomes].some((o) => o.startsWith('SEAL_CORRUPT: '))).toBe(true);
    const fresh = await SnapshotStore.open(join(tempDir(), 'b'));
    const err = await fails(fresh.pull({ manifest: digest }, p.remote));
    expect([err.code, err.message]).toEqual(['SEAL_CORRUPT', `pack ${layer.annotations!['vnd.treeseal.bucket']} ends with another index than its contents make`]);
    await fresh.close();

    // A piece whose entry for src/a.txt has a negative size: a new piece, root document and manifest.
    const piece = pieceOf(p, 'src/a.txt');
    const text = p.blob(piece.digest).toString('latin1');
    const bad = Buffer.from(text.replace(/("path":"src\/a\.txt","sha256":"[0-9a-f]{64}","size":)6/, '$1-6'), 'latin1');
    expect(bad.equals(p.blob(piece.digest))).toBe(false);
    const badDigest = await upload(repo, bad);
    const root = Buffer.from(p.blob(p.manifest.config.digest).toString('latin1').replace(piece.digest, badDigest), 'latin1');
    const malformed = structuredClone(p.manifest);
    malformed.config = { ...malformed.config, digest: await upload(repo, root), size: root.length };
    Object.assign(malformed.layers.find((l) => l.digest === piece.digest)!, { digest: badDigest, size: bad.length });
    const m = await putManifest(repo, 'malformed', malformed);
    const e2 = await fails(catRemote(p.remote, { manifest: m }, 'src/a.txt'));
    expect([e2.code, e2.message, e2.path]).toEqual(['SEAL_CORRUPT', `${p.remote}@${m} does not hold a valid snapshot manifest: the entry of src/a.txt is malformed`, 'src/a.txt']);
  });
});

describe.skipIf(registry === undefined)('cat by tag or manifest digest bounds what a crafted manifest makes it read', () => {
  it('entry lists claimed over 1 GiB are SEAL_CORRUPT before a blob is fetched; fifty mounts on one target read one piece once', async () => {
    const p = await pushed('lazy-bounds');
    const { repo } = p;
    const huge = structuredClone(p.manifest);
    huge.layers.find((l) => l.mediaType === ENTRIES_TYPE)!.size = 2 ** 31;
    const m = await putManifest(repo, 'huge', huge);
    p.proxy.log.length = 0;
    const err = await fails(catRemote(p.remote, { manifest: m }, 'src/a.txt'));
    const total = 2 ** 31 + pieces(p).slice(1).reduce((n, l) => n + l.size, 0);
    expect([err.code, err.message, blobLines(p)]).toEqual(['SEAL_CORRUPT', `${p.remote}@${m} has entry lists of ${total} bytes`, []]);

    // The same mount fifty times over in the root document (the pieces stay the manifest's).
    const root = p.blob(p.manifest.config.digest).toString('latin1');
    const from = root.indexOf('"mounts":[') + '"mounts":['.length;
    const to = root.indexOf('],"revision":', from);
    const crowded = Buffer.from(root.slice(0, from) + Array(50).fill(root.slice(from, to)).join(',') + root.slice(to), 'latin1');
    const many = structuredClone(p.manifest);
    many.config = { ...many.config, digest: await upload(repo, crowded), size: crowded.length };
    const digest = await putManifest(repo, 'many', many);
    p.proxy.log.length = 0;
    expect((await catRemote(p.remote, { manifest: digest }, 'node_modules/pkg/index.js')).toString()).toBe('module.exports = 1;\n');
    const mountPiece = pieceOf(p, 'payload/pkg/index.js').digest;
    expect(blobLines(p).filter((l) => !l.includes('range='))).toEqual([`GET /v2/${repo}/blobs/${many.config.digest}`, `GET /v2/${repo}/blobs/${mountPiece}`]);
  });
});

describe.skipIf(registry === undefined)('cat by tag or manifest digest refuses what a crafted manifest gets wrong, typed', () => {
  /** A manifest like p's with its root document, or one piece, edited as text (each re-uploaded), and the manifest itself edited; its digest. */
  async function crafted(p: Pushed, edit: { root?: (t: string) => string; piece?: [string, (t: string) => string]; manifest?: (m: Manifest) => void }): Promise<string> {
    const m = structuredClone(p.manifest);
    let rootText = p.blob(p.manifest.config.digest).toString('latin1');
    if (edit.piece !== undefined) {
      const [path, change] = edit.piece;
      const old = pieceOf(p, path);
      const bytes = Buffer.from(change(p.blob(old.digest).toString('latin1')), 'latin1');
      expect(bytes.equals(p.blob(old.digest))).toBe(false);
      const digest = await upload(p.repo, bytes);
      rootText = rootText.replace(old.digest, digest);
      Object.assign(m.layers.find((l) => l.digest === old.digest)!, { digest, size: bytes.length });
    }
    if (edit.root !== undefined) rootText = edit.root(rootText);
    if (rootText !== p.blob(p.manifest.config.digest).toString('latin1')) {
      const root = Buffer.from(rootText, 'latin1');
      m.config = { ...m.config, digest: await upload(p.repo, root), size: root.length };
    }
    edit.manifest?.(m);
    return putManifest(p.repo, 'crafted', m);
  }

  it('a root document whose mounts or JSON do not match its lists, or that names other pieces than the manifest; an entry without what locating reads; a pack too small or whose index lacks the file', async () => {
    const p = await pushed('lazy-crafted');
    const refused = async (digest: string, path: string): Promise<string> => {
      const err = await fails(catRemote(p.remote, { manifest: digest }, path));
      expect(err.code).toBe('SEAL_CORRUPT');
      return err.message.replace(`${p.remote}@${digest} `, '');
    };
    const rootBad = 'does not hold a valid snapshot root document: ';
    expect(await refused(await crafted(p, { root: (t) => t.replace('"target":"node_modules"', '"target":7') }), 'src/a.txt')).toBe(`${rootBad}its mounts do not match its entry lists`);
    expect(await refused(await crafted(p, { root: (t) => t.replace('"mounts":[', '"mounts":[{"target":"x"},') }), 'src/a.txt')).toBe(`${rootBad}its mounts do not match its entry lists`);
    expect(await refused(await crafted(p, { root: (t) => t.replace('"revision":', '"revision":,') }), 'src/a.txt')).toMatch(new RegExp(`^${rootBad}its JSON is malformed \\(.+\\)$`));
    expect(
      await refused(await crafted(p, { manifest: (m) => m.layers.splice(0, 2, m.layers[1]!, m.layers[0]!) }), 'src/a.txt'),
    ).toBe('does not match its root document: its first layers are not the 2 pieces the root names');
    // An entry without what locating it reads: each is SEAL_CORRUPT naming it, none a TypeError.
    const entry = (change: (t: string) => string) => ['src/a.txt', (t: string) => t.replace(/\{"kind":"file","link_target":"","mode":0,"path":"src\/a\.txt","sha256":"[0-9a-f]{64}","size":6\}/, change)] as [string, (t: string) => string];
    const malformed = `does not hold a valid snapshot manifest: the entry of src/a.txt is malformed`;
    for (const change of [
      (e: string) => e.replace('"size":6', '"size":6.5'),
      (e: string) => e.replace('"mode":0', '"mode":"0"'),
      (e: string) => e.replace(/"sha256":"([0-9a-f]{64})"/, (_m, h: string) => `"sha256":"${h.toUpperCase()}"`),
      (e: string) => e.replace(/"sha256":"([0-9a-f]{64})"/, '"sha256":"x$1"'),
      (e: string) => e.replace(/"sha256":"([0-9a-f]{64})"/, '"sha256":"$1x"'),
      (e: string) => e.replace('"kind":"file"', '"kind":"fifo"'),
      (e: string) => e.replace('"size":6}', '"size":6x}'),
    ]) {
      expect(await refused(await crafted(p, { piece: entry(change) }), 'src/a.txt')).toBe(malformed);
    }
    const link = (await crafted(p, { piece: ['payload/pkg/run-link', (t) => t.replace('"link_target":"bin/run"', '"link_target":7')] }));
    expect(await refused(link, 'node_modules/pkg/run-link')).toBe('does not hold a valid snapshot manifest: the entry of payload/pkg/run-link is malformed');
    // A pack layer too small to hold an index, and a pack whose index lacks the file.
    const { layer } = packOf(p, 'src/a.txt');
    const small = await crafted(p, { manifest: (m) => Object.assign(m.layers.find((l) => l.digest === layer.digest)!, { size: 15 }) });
    expect(await refused(small, 'src/a.txt')).toBe(`does not hold a valid pack ${layer.digest}: it is too small to end with an index`);
    const sha = p.snap.entries.find((e) => e.path === 'src/a.txt')!.sha256;
    const pack = Buffer.from(p.blob(layer.digest));
    const at = pack.lastIndexOf(Buffer.from(sha, 'hex'));
    expect(at).toBeGreaterThan(0);
    pack[at] ^= 0xff;
    const other = await upload(p.repo, pack);
    const lacking = await crafted(p, { manifest: (m) => Object.assign(m.layers.find((l) => l.digest === layer.digest)!, { digest: other }) });
    expect(await refused(lacking, 'src/a.txt')).toBe(`does not hold a valid pack ${other}: its index does not hold sha256 ${sha} of 6 bytes`);
  });

  it('a file exactly at a piece\'s first path is read from that piece alone; the first format falls back and still reads', async () => {
    const p = await pushed('lazy-edges', 3000);
    const { repo } = p;
    // A piece whose first entry is a file: its first path names it, and that piece alone is read.
    const piece = pieces(p).find((l) => p.snap.entries.find((e) => e.path === l.annotations!['vnd.treeseal.first-path'])?.kind === 'file')!;
    const path = piece.annotations!['vnd.treeseal.first-path']!;
    p.proxy.log.length = 0;
    expect((await catRemote(p.remote, { manifest: p.manifestDigest }, path)).equals(readFileSync(join(p.source, path)))).toBe(true);
    expect(blobLines(p).filter((l) => !l.includes('range='))).toEqual([`GET /v2/${repo}/blobs/${p.manifest.config.digest}`, `GET /v2/${repo}/blobs/${piece.digest}`]);
    // The first format: the whole manifest.json as the config, no pieces. Read whole, proven against the digest.
    const doc = readFileSync(join(p.snap.root, 'manifest.json'));
    const first = structuredClone(p.manifest);
    first.config = { mediaType: 'application/vnd.treeseal.snapshot.manifest.v1+json', digest: await upload(repo, doc), size: doc.length };
    first.layers = first.layers.filter((l) => l.mediaType !== ENTRIES_TYPE);
    const digest = await putManifest(repo, 'first-format', first);
    const r = await catRemote(p.remote, { manifest: digest }, 'src/a.txt', { output: new Writable({ write: (_c, _e, done) => done() }) });
    expect([r.proof, r.size]).toEqual(['snapshot', 6]);
  });
});

describe('the pack index', () => {
  const bad = (why: string): Error => new Error(why);
  const contents = [
    { sha256: 'a'.repeat(64), size: 3 },
    { sha256: 'b'.repeat(64), size: 5 },
    { sha256: 'c'.repeat(64), size: 1 },
  ];
  const index = packIndex(contents);
  const packSize = 9 + index.length;

  it('is each sha256 and size in pack order, the count and a magic; a content is found at the sum of the sizes before it', () => {
    expect(index.length).toBe(indexBytes(3));
    expect(index.length).toBe(3 * 40 + 16);
    expect(index.subarray(0, 32).toString('hex')).toBe('a'.repeat(64));
    expect(index.readBigUInt64BE(32)).toBe(3n);
    expect(index.subarray(index.length - 8).toString('latin1')).toBe('tsPackIx');
    expect(index.readBigUInt64BE(index.length - 16)).toBe(3n);
    expect(footerCount(index.subarray(index.length - 16), packSize, bad as never)).toBe(3);
    expect(findInIndex(index, packSize, 'a'.repeat(64), bad as never)).toEqual({ offset: 0, size: 3 });
    expect(findInIndex(index, packSize, 'b'.repeat(64), bad as never)).toEqual({ offset: 3, size: 5 });
    expect(findInIndex(index, packSize, 'c'.repeat(64), bad as never)).toEqual({ offset: 8, size: 1 });
    expect(findInIndex(index, packSize, 'd'.repeat(64), bad as never)).toBeUndefined();
    // A sha256 listed twice (no push writes that): the first record says where.
    const twice = packIndex([...contents, { sha256: 'a'.repeat(64), size: 2 }]);
    expect(findInIndex(twice, 11 + twice.length, 'a'.repeat(64), bad as never)).toEqual({ offset: 0, size: 3 });
    // Sizes past 2^53 never add up to the bytes before the index.
    const huge = packIndex([{ sha256: 'a'.repeat(64), size: 2 ** 60 }, { sha256: 'b'.repeat(64), size: 2 ** 60 }]);
    huge.writeBigUInt64BE(2n ** 64n - 1n, 32);
    expect(() => findInIndex(huge, 9 + huge.length, 'b'.repeat(64), bad as never)).toThrow("its index's sizes add up to");
  });

  it('refuses a footer without the magic, a count the pack cannot hold, and sizes that do not add up to the bytes before the index', () => {
    const noMagic = Buffer.from(index);
    noMagic[noMagic.length - 1] ^= 1;
    expect(() => footerCount(noMagic, packSize, bad as never)).toThrow('it does not end with a pack index');
    expect(() => footerCount(index.subarray(index.length - 15), packSize, bad as never)).toThrow('it does not end with a pack index');
    expect(() => footerCount(index, index.length - 1, bad as never)).toThrow('its index claims 3 contents');
    const huge = Buffer.from(index);
    huge.writeBigUInt64BE(2n ** 40n, huge.length - 16);
    expect(() => footerCount(huge, 2 ** 50, bad as never)).toThrow(`its index claims ${2 ** 40} contents`);
    expect(footerCount(index, indexBytes(3), bad as never)).toBe(3);
    // However large the pack, at most 400,000 records (16 MB) are read.
    const many = Buffer.from(index);
    many.writeBigUInt64BE(400_001n, many.length - 16);
    expect(() => footerCount(many, 2 ** 40, bad as never)).toThrow('its index claims 400001 contents');
    many.writeBigUInt64BE(400_000n, many.length - 16);
    expect(footerCount(many, 2 ** 40, bad as never)).toBe(400_000);
    expect(() => findInIndex(index, packSize + 1, 'a'.repeat(64), bad as never)).toThrow("its index's sizes add up to 9 bytes, not the 10 before it");
    expect(() => findInIndex(index, packSize - 1, 'c'.repeat(64), bad as never)).toThrow("its index's sizes add up to 9 bytes, not the 8 before it");
  });
});
