// mapping.test.ts: the layout of a snapshot as an OCI artifact: limits for a 50k-file tree, stable buckets, the threshold, and layer checks.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import type { SnapshotData } from '../../../dist/index.js';
import {
  LARGE_FILE_BYTES,
  MAX_FILE_LAYERS,
  MAX_MANIFEST_BYTES,
  MAX_PACK_BYTES,
  MAX_PACKS,
  MAX_PIECES,
  bucketOf,
  chooseLayout,
  cutPieces,
  documentText,
  expectLayers,
  layersOf,
  layoutWith,
  manifestOf,
  oversizedPack,
  parseArtifact,
} from '../../../dist/internal.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

/** A snapshot document with `files` files of the given sizes (no bytes behind it: the layout needs only the manifest). */
function synthetic(sizes: number[]): SnapshotData {
  const entries = sizes.map((size, i) => ({ kind: 'file' as const, path: `t/f${String(i).padStart(6, '0')}`, size, sha256: sha(`content ${i}`), mode: 0, link_target: '' }));
  entries.unshift({ kind: 'directory' as const, path: 't', size: 0, sha256: '', mode: 0, link_target: '' } as never);
  return { digest: sha('snap'), manifestDigest: sha('m'), source: '/src', revision: '', declarations: ['t'], entries, totalBytes: sizes.reduce((a, b) => a + b, 0), mounts: [], mountBinding: { contentDigest: '', manifestDigest: '' } };
}

/** Sizes like ../shared/bench/gen_tree.py: log-normal, median ~2 KiB, capped at 1 MiB. */
function lognormal(n: number): number[] {
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) + 0.5) / 2 ** 31;
  return Array.from({ length: n }, () => {
    const z = Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd());
    return Math.min(Math.floor(Math.exp(7.6 + 1.3 * z)), 1 << 20);
  });
}

/** The image manifest push makes of data: the pieces of its entry lists, then its packs and file blobs. */
function manifestFor(data: SnapshotData): { bytes: Buffer; layers: number; pieces: number } {
  const layout = chooseLayout(data);
  const { pieces } = cutPieces(Buffer.from(documentText(data)));
  const pieceLayers = pieces.map((p: { digest: string; start: number; end: number }) => ({ mediaType: 'application/vnd.treeseal.entries.v1', digest: p.digest, size: p.end - p.start }));
  const layers = [...pieceLayers, ...layersOf(layout, layout.packs.map((_p: unknown, i: number) => `sha256:${sha(`pack ${i}`)}`))];
  const config = { mediaType: 'application/vnd.treeseal.snapshot.root.v2+json', digest: `sha256:${sha('config')}`, size: 123 };
  return { bytes: manifestOf(data.digest, layout, config, layers), layers: layers.length, pieces: pieces.length };
}

describe('snapshot to OCI layout', () => {
  it('keeps a 50k-file tree under 500 layers (the limit ECR enforces) and the manifest far under 4 MiB', () => {
    const data = synthetic(lognormal(50_000));
    const layout = chooseLayout(data);
    const { bytes, layers, pieces } = manifestFor(data);
    expect(MAX_PACKS + MAX_FILE_LAYERS + MAX_PIECES).toBeLessThanOrEqual(500);
    expect(layers).toBe(pieces + layout.packs.length + layout.files.length);
    expect(pieces).toBeGreaterThan(MAX_PIECES / 2);
    expect(pieces).toBeLessThanOrEqual(MAX_PIECES);
    // 220 MiB of small files: the bucket count doubles to 256, then stops at MAX_PACKS (about 640 KB a pack).
    expect(layout.packs.length).toBe(MAX_PACKS);
    expect(layout.files.length).toBe(data.entries.filter((e) => e.kind === 'file' && e.size >= LARGE_FILE_BYTES).length);
    expect(bytes.length).toBeLessThan(MAX_MANIFEST_BYTES / 40);
    // every content is in exactly one place, packs in digest order
    const packed = layout.packs.flatMap((p: { contents: { sha256: string }[] }) => p.contents.map((c) => c.sha256));
    expect(new Set([...packed, ...layout.files.map((f: { sha256: string }) => f.sha256)]).size).toBe(50_000);
    for (const p of layout.packs) expect(p.contents.map((c: { sha256: string }) => c.sha256)).toEqual(p.contents.map((c: { sha256: string }) => c.sha256).sort());
  });

  it('sizes packs from the small bytes (5k tree: 64 packs averaging ~400 KB), with a bucket set by the top bits of the sha256', () => {
    const layout = chooseLayout(synthetic(lognormal(5_000)));
    expect(layout.buckets).toBe(64);
    const sizes = layout.packs.map((p: { size: number }) => p.size);
    expect(sizes.reduce((a: number, b: number) => a + b, 0) / sizes.length).toBeLessThanOrEqual(512 * 1024);
    expect(Math.max(...sizes)).toBeLessThan(2 * LARGE_FILE_BYTES);
    expect(bucketOf('00'.repeat(32), 128)).toBe(0);
    expect(bucketOf('ff'.repeat(32), 128)).toBe(127);
    expect(bucketOf('80' + '00'.repeat(31), 128)).toBe(64);
    expect(bucketOf('80' + '00'.repeat(31), 1)).toBe(0);
  });

  it('a layout packing more than a pull holds (65 files of 2 GiB: 64 blobs, the last packed) is what push refuses; the usual one is not', () => {
    expect(oversizedPack(chooseLayout(synthetic(lognormal(5_000))))).toBeUndefined();
    const layout = chooseLayout(synthetic(Array.from({ length: 65 }, (_, i) => 2 ** 31 + i)));
    expect(oversizedPack(layout)).toBeGreaterThan(MAX_PACK_BYTES);
    // One fewer: every one of them a blob of its own, nothing packed past the bound.
    expect(oversizedPack(chooseLayout(synthetic(Array.from({ length: 64 }, (_, i) => 2 ** 31 + i))))).toBeUndefined();
  });

  it('raises the threshold when there are more large files than one-file layers allowed', () => {
    const sizes = Array.from({ length: 300 }, (_, i) => 2 * LARGE_FILE_BYTES + i);
    const layout = chooseLayout(synthetic(sizes));
    expect(layout.files.length).toBe(MAX_FILE_LAYERS);
    expect(layout.threshold).toBe(2 * LARGE_FILE_BYTES + 300 - MAX_FILE_LAYERS);
    expect(Math.min(...layout.files.map((f: { size: number }) => f.size))).toBe(layout.threshold);
  });

  it('reads back its own manifest and refuses layers that differ from what the config implies', () => {
    const data = synthetic([10, 20, 30, 2 * LARGE_FILE_BYTES]);
    const { bytes } = manifestFor(data);
    const artifact = parseArtifact(bytes, 'r/x:tag');
    expect(artifact.pieces.map((p: { mediaType: string }) => p.mediaType)).toEqual(['application/vnd.treeseal.entries.v1']);
    const layout = layoutWith(data, artifact.threshold, artifact.buckets);
    expect(expectLayers(artifact, layout, 'r/x:tag')).toEqual([{ digest: `sha256:${sha('pack 0')}`, size: 60 + 3 * 40 + 16, indexed: true }]);
    const swapped = { ...artifact, layers: [...artifact.layers].reverse() };
    expect(() => expectLayers(swapped, layout, 'r/x:tag')).toThrow('r/x:tag does not match its snapshot manifest: layer 1 is not pack 0');
    const late = JSON.parse(bytes.toString());
    late.layers.push(late.layers.shift());
    expect(() => parseArtifact(Buffer.from(JSON.stringify(late)), 'r/x:tag')).toThrow(
      'r/x:tag is not a treeseal snapshot: a piece of an entry list is not among the first layers of a manifest with a root document',
    );
    const foreign = JSON.parse(bytes.toString());
    foreign.artifactType = 'application/vnd.example';
    expect(() => parseArtifact(Buffer.from(JSON.stringify(foreign)), 'r/x:tag')).toThrow('r/x:tag is not a treeseal snapshot: artifactType is "application/vnd.example"');
  });

  it('gives a snapshot without bytes the empty layer after the piece of its entries', () => {
    const data = synthetic([]);
    const { bytes } = manifestFor(data);
    const { layers } = JSON.parse(bytes.toString());
    expect(layers[0].mediaType).toBe('application/vnd.treeseal.entries.v1');
    expect(layers.slice(1)).toEqual([{ mediaType: 'application/vnd.oci.empty.v1+json', digest: 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', size: 2 }]);
  });
});

describe('the layout groups contents from tables without an object per entry', () => {
  /** The grouping contentsOf made from objects: contents by sha256, each one's places in area then manifest order, empty files apart. */
  function reference(data: SnapshotData): { contents: { sha256: string; size: number; places: { area: string; path: string; mode: number }[] }[]; empty: string[] } {
    const byHash = new Map<string, { sha256: string; size: number; places: { area: string; path: string; mode: number }[] }>();
    const empty: string[] = [];
    const areas = [{ area: 'copy', entries: data.entries }, ...data.mounts.map((m, i) => ({ area: `mounts/${String(i).padStart(5, '0')}`, entries: m.entries }))];
    for (const { area, entries } of areas) {
      for (const e of entries) {
        if (e.kind !== 'file') continue;
        if (e.size === 0) {
          empty.push(`${area}/${e.path}`);
          continue;
        }
        let c = byHash.get(e.sha256);
        if (c === undefined) byHash.set(e.sha256, (c = { sha256: e.sha256, size: e.size, places: [] }));
        c.places.push({ area, path: e.path, mode: e.mode });
      }
    }
    return { contents: [...byHash.values()].sort((a, b) => (a.sha256 < b.sha256 ? -1 : 1)), empty };
  }

  it('contents whose sha256 share their first 32 bits, and one content at places in the copy roots and a mount, come out as contentsOf listed them', () => {
    const data = synthetic([5, 6, 7, 8, 9, 0, 11]);
    const e = data.entries as { sha256: string; size: number; path: string; mode: number }[];
    // Four digests with the same first 8 hex digits (what the packed sort keys on), in an order the rest decides.
    e[1]!.sha256 = `abcdef01${'f'.repeat(56)}`;
    e[2]!.sha256 = `abcdef01${'0'.repeat(56)}`;
    e[3]!.sha256 = `abcdef01${'8'.repeat(56)}`;
    e[4]!.sha256 = `abcdef01${'0'.repeat(55)}1`;
    // The same content twice in the copy roots and once in a mount.
    e[7]!.sha256 = e[2]!.sha256;
    e[7]!.size = 6;
    e[7]!.mode = 0o755;
    const payload = [
      { kind: 'directory' as const, path: 'payload', size: 0, sha256: '', mode: 0, link_target: '' },
      { kind: 'file' as const, path: 'payload/dup', size: 6, sha256: e[2]!.sha256, mode: 0o644, link_target: '' },
      { kind: 'file' as const, path: 'payload/e', size: 0, sha256: sha(''), mode: 0o644, link_target: '' },
    ];
    data.mounts = [{ source: 'deps', target: 'nm', kind: 'directory', totalBytes: 6, entries: payload }];
    const want = reference(data);
    for (const buckets of [1, 4, 256]) {
      const layout = layoutWith(data, LARGE_FILE_BYTES, buckets);
      const got = layout.packs.flatMap((p: { contents: unknown[] }) => p.contents);
      expect(got).toEqual(want.contents);
      for (const p of layout.packs) {
        expect(p.count).toBe(p.contents.length);
        expect(p.size).toBe(p.contents.reduce((n: number, c: { size: number }) => n + c.size, 0));
        for (const c of p.contents) expect(bucketOf(c.sha256, buckets)).toBe(p.bucket);
      }
      expect([...layout.empty()].map((pl: { area: string; path: string }) => `${pl.area}/${pl.path}`)).toEqual(want.empty);
    }
    // A content at or over the threshold is a file of its own, with every place.
    const big = layoutWith(data, 7, 1);
    expect(big.files).toEqual(want.contents.filter((c) => c.size >= 7));
    expect(big.packs[0].contents).toEqual(want.contents.filter((c) => c.size < 7));
  });

  it('the 50k-file layout is the one contentsOf made', () => {
    const data = synthetic(lognormal(50_000));
    const want = reference(data);
    const layout = chooseLayout(data);
    expect([...layout.packs.flatMap((p: { contents: unknown[] }) => p.contents), ...layout.files].sort((a: { sha256: string }, b: { sha256: string }) => (a.sha256 < b.sha256 ? -1 : 1))).toEqual(want.contents);
  });
});
