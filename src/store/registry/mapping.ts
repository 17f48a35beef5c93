// mapping.ts: a snapshot as an OCI artifact: its distinct contents, which are packed and which get a blob, and the image manifest.
import type { StoredSnapshot } from '../document.js';
import { COPY_AREA, mountArea } from '../layout.js';
import { indexBytes } from './pack-index.js';

export const ARTIFACT_TYPE = 'application/vnd.treeseal.snapshot.v1';
/** The config blob of the first format (still pulled): the snapshot's exact manifest.json. */
export const CONFIG_TYPE = 'application/vnd.treeseal.snapshot.manifest.v1+json';
/** The config blob push writes: the root document, manifest.json with each entry list replaced by its pieces' digests (pieces.ts). */
export const ROOT_TYPE = 'application/vnd.treeseal.snapshot.root.v2+json';
/** A piece of an entry list: whole entries as the list holds them, joined by commas. */
export const ENTRIES_TYPE = 'application/vnd.treeseal.entries.v1';
/** One large file's bytes, as they are. */
export const FILE_TYPE = 'application/vnd.treeseal.file.v1';
/** The first pack format (still pulled): the distinct small contents of one bucket, concatenated in digest order. */
export const PACK_TYPE = 'application/vnd.treeseal.pack.v1';
/** The pack push writes: the same contents, then their index (pack-index.ts), so a cat finds one file without the entry lists. */
export const INDEXED_PACK_TYPE = 'application/vnd.treeseal.pack.v2';
export const EMPTY_TYPE = 'application/vnd.oci.empty.v1+json';
export const EMPTY_BLOB = Buffer.from('{}');
export const EMPTY_DIGEST = 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a';

export const ANNOTATION_SNAPSHOT = 'vnd.treeseal.snapshot';
export const ANNOTATION_THRESHOLD = 'vnd.treeseal.threshold';
export const ANNOTATION_BUCKETS = 'vnd.treeseal.buckets';
export const ANNOTATION_BUCKET = 'vnd.treeseal.bucket';
/** On a piece's layer: the path of its first entry (a hint a cat uses to fetch one piece; the piece's bytes decide). */
export const ANNOTATION_FIRST_PATH = 'vnd.treeseal.first-path';
/** The OCI annotations every pushed manifest carries (see the image spec's pre-defined annotation keys). */
export const ANNOTATION_CREATED = 'org.opencontainers.image.created';
export const ANNOTATION_REVISION = 'org.opencontainers.image.revision';
export const ANNOTATION_SOURCE = 'org.opencontainers.image.source';

/** Contents of at least this many bytes get a blob of their own (unless there are more than MAX_FILE_LAYERS of them). */
export const LARGE_FILE_BYTES = 1024 * 1024;
/** At most this many one-file blobs: beyond, the threshold rises so the rest are packed. */
export const MAX_FILE_LAYERS = 64;
/**
 * At most this many packs: with MAX_FILE_LAYERS blobs and MAX_PIECES pieces of the entry
 * lists, at most 464 layers (ECR refuses a manifest of more than 500).
 */
export const MAX_PACKS = 368;
/** Packs are sized towards this (the bucket count doubles until they are no bigger on average). */
export const PACK_TARGET_BYTES = 512 * 1024;

/** Where a content lives in a snapshot: its area (`copy`, `mounts/00000`) and its manifest path there. */
export interface Place {
  area: string;
  path: string;
  mode: number;
}

export interface Content {
  sha256: string;
  size: number;
  places: Place[];
}

export interface Pack {
  bucket: number;
  /** Sorted by sha256; content i starts at the sum of the sizes before it. */
  contents: Content[];
  size: number;
}

export interface Layout {
  threshold: number;
  buckets: number;
  /** Contents of `threshold` bytes or more, by sha256. */
  files: Content[];
  /** The non-empty buckets, in bucket order. */
  packs: Pack[];
  /** Empty files: no bytes to move. */
  empty: Place[];
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

/** Every file of a snapshot grouped by content (empty files apart). */
export function contentsOf(data: StoredSnapshot): { contents: Content[]; empty: Place[] } {
  const byHash = new Map<string, Content>();
  const empty: Place[] = [];
  const areas = [{ area: COPY_AREA, entries: data.entries }, ...data.mounts.map((m, i) => ({ area: mountArea(i), entries: m.entries }))];
  for (const { area, entries } of areas) {
    for (const e of entries) {
      if (e.kind !== 'file') continue;
      const place = { area, path: e.path, mode: e.mode };
      if (e.size === 0) {
        empty.push(place);
        continue;
      }
      let c = byHash.get(e.sha256);
      if (c === undefined) byHash.set(e.sha256, (c = { sha256: e.sha256, size: e.size, places: [] }));
      c.places.push(place);
    }
  }
  const contents = [...byHash.values()].sort((a, b) => (a.sha256 < b.sha256 ? -1 : a.sha256 > b.sha256 ? 1 : 0));
  return { contents, empty };
}

/** The bucket of a content: the top bits of its sha256. */
export function bucketOf(sha256: string, buckets: number): number {
  return Math.floor((Number.parseInt(sha256.slice(0, 8), 16) * buckets) / 2 ** 32);
}

/** Splits contents into one-file blobs and packs for a given threshold and bucket count. */
export function layoutWith(data: StoredSnapshot, threshold: number, buckets: number): Layout {
  const { contents, empty } = contentsOf(data);
  const files: Content[] = [];
  const byBucket = new Map<number, Pack>();
  for (const c of contents) {
    if (c.size >= threshold) {
      files.push(c);
      continue;
    }
    const bucket = bucketOf(c.sha256, buckets);
    let pack = byBucket.get(bucket);
    if (pack === undefined) byBucket.set(bucket, (pack = { bucket, contents: [], size: 0 }));
    pack.contents.push(c);
    pack.size += c.size;
  }
  const packs = [...byBucket.values()].sort((a, b) => a.bucket - b.bucket);
  return { threshold, buckets, files, packs, empty };
}

/**
 * The layout push uses: contents of 1 MiB or more get a blob each (the threshold rises
 * when there are more than MAX_FILE_LAYERS of them); the rest go into a number of packs
 * sized towards PACK_TARGET_BYTES: a power of two up to 256, else MAX_PACKS.
 */
export function chooseLayout(data: StoredSnapshot): Layout {
  const { contents } = contentsOf(data);
  const large = contents.map((c) => c.size).filter((s) => s >= LARGE_FILE_BYTES).sort((a, b) => b - a);
  const threshold = large.length > MAX_FILE_LAYERS ? large[MAX_FILE_LAYERS]! + 1 : LARGE_FILE_BYTES;
  const smallBytes = contents.reduce((n, c) => (c.size < threshold ? n + c.size : n), 0);
  let buckets = 1;
  while (buckets < MAX_PACKS && buckets * PACK_TARGET_BYTES < smallBytes) buckets = Math.min(buckets * 2, MAX_PACKS);
  return layoutWith(data, threshold, buckets);
}

/** The layer descriptors of a layout, given each pack's blob digest: packs in bucket order, then files by digest. */
export function layersOf(layout: Layout, packDigests: readonly string[]): Descriptor[] {
  const layers: Descriptor[] = layout.packs.map((p, i) => ({
    mediaType: INDEXED_PACK_TYPE,
    digest: packDigests[i]!,
    size: p.size + indexBytes(p.contents.length),
    annotations: { [ANNOTATION_BUCKET]: String(p.bucket) },
  }));
  for (const f of layout.files) layers.push({ mediaType: FILE_TYPE, digest: `sha256:${f.sha256}`, size: f.size });
  // An image manifest wants at least one layer; a snapshot without bytes has the empty blob.
  if (layers.length === 0) layers.push({ mediaType: EMPTY_TYPE, digest: EMPTY_DIGEST, size: EMPTY_BLOB.length });
  return layers;
}

/**
 * The OCI image manifest of a snapshot (deterministic: the same snapshot and annotations
 * always give the same bytes). `extra`: annotations besides treeseal's own (the OCI ones).
 */
export function manifestOf(snapshotDigest: string, layout: Layout, config: Descriptor, layers: Descriptor[], extra: Record<string, string> = {}): Buffer {
  const manifest = {
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    artifactType: ARTIFACT_TYPE,
    config,
    layers,
    annotations: {
      ...extra,
      [ANNOTATION_SNAPSHOT]: snapshotDigest,
      [ANNOTATION_THRESHOLD]: String(layout.threshold),
      [ANNOTATION_BUCKETS]: String(layout.buckets),
    },
  };
  return Buffer.from(JSON.stringify(manifest), 'utf8');
}
