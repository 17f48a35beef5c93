// mapping.ts: a snapshot as an OCI artifact: its distinct contents, which are packed and which get a blob, and the image manifest.
import type { StoredSnapshot } from '../document.js';
import { Contents, type Content, type Place } from './contents.js';
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
/**
 * The largest pack (with its index) a pull takes: it holds each pack whole in memory. Push
 * refuses a layout that would pack more together (past MAX_FILE_LAYERS large contents and
 * MAX_PACKS packs: hundreds of GiB), so it never publishes what a pull cannot take.
 */
export const MAX_PACK_BYTES = 2 ** 31 - 1;

export type { Content, Place } from './contents.js';

/** A pack: the contents of one bucket below the threshold, a run of the snapshot's contents in sha256 order. */
export class Pack {
  constructor(
    readonly bucket: number,
    /** The contents' bytes in all. */
    readonly size: number,
    /** How many contents. */
    readonly count: number,
    /** Its contents are those of the snapshot's from … to - 1 below the threshold. */
    readonly from: number,
    readonly to: number,
    readonly all: Contents,
    readonly threshold: number,
  ) {}

  /** Its contents in sha256 order; content i starts at the sum of the sizes before it. */
  get contents(): Content[] {
    const out: Content[] = [];
    for (let k = this.from; k < this.to; k++) if (this.all.size(k) < this.threshold) out.push(this.all.content(k));
    return out;
  }
}

/** What a pack's layer needs of it. */
export interface PackSummary {
  bucket: number;
  size: number;
  count: number;
}

/** What the image manifest needs of a layout: small enough to cross threads. */
export interface LayoutSummary {
  threshold: number;
  buckets: number;
  /** Contents of `threshold` bytes or more, by sha256. */
  files: Content[];
  /** The non-empty buckets, in bucket order. */
  packs: PackSummary[];
}

export interface Layout extends LayoutSummary {
  packs: Pack[];
  /** Every content, in sha256 order. */
  contents: Contents;
  /** Each of `files`' index in `contents`. */
  fileIndex: number[];
  /** Empty files: no bytes to move. */
  empty: () => Iterable<Place>;
}

/** A layout without its contents, to cross threads. */
export function summaryOf(layout: LayoutSummary): LayoutSummary {
  return { threshold: layout.threshold, buckets: layout.buckets, files: layout.files, packs: layout.packs.map((p) => ({ bucket: p.bucket, size: p.size, count: p.count })) };
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}

/** The bucket of a content: the top bits of its sha256. */
export function bucketOf(sha256: string, buckets: number): number {
  return bucketOfTop(Number.parseInt(sha256.slice(0, 8), 16), buckets);
}

/** The bucket of a sha256 whose first 32 bits are `top`. */
function bucketOfTop(top: number, buckets: number): number {
  return Math.floor((top * buckets) / 2 ** 32);
}

/** Splits contents into one-file blobs and packs for a given threshold and bucket count. */
export function layoutWith(data: Pick<StoredSnapshot, 'entries' | 'mounts'> | Contents, threshold: number, buckets: number): Layout {
  const all = data instanceof Contents ? data : new Contents(data);
  const files: Content[] = [];
  const fileIndex: number[] = [];
  const packs: Pack[] = [];
  // Contents are in sha256 order, so each bucket's are a run.
  let run: { bucket: number; from: number; size: number; count: number } | undefined;
  const close = (to: number): void => {
    if (run !== undefined && run.count > 0) packs.push(new Pack(run.bucket, run.size, run.count, run.from, to, all, threshold));
  };
  for (let k = 0; k < all.count; k++) {
    const size = all.size(k);
    if (size >= threshold) {
      files.push(all.content(k));
      fileIndex.push(k);
      continue;
    }
    const bucket = bucketOfTop(all.top(k), buckets);
    if (run === undefined || run.bucket !== bucket) {
      close(k);
      run = { bucket, from: k, size: 0, count: 0 };
    }
    run.size += size;
    run.count++;
  }
  close(all.count);
  return { threshold, buckets, files, packs, contents: all, fileIndex, empty: () => all.emptyPlaces() };
}

/**
 * The layout push uses: contents of 1 MiB or more get a blob each (the threshold rises
 * when there are more than MAX_FILE_LAYERS of them); the rest go into a number of packs
 * sized towards PACK_TARGET_BYTES: a power of two up to 256, else MAX_PACKS.
 */
export function chooseLayout(data: Pick<StoredSnapshot, 'entries' | 'mounts'>): Layout {
  const all = new Contents(data);
  const large: number[] = [];
  let bytes = 0;
  for (let k = 0; k < all.count; k++) {
    const size = all.size(k);
    bytes += size;
    if (size >= LARGE_FILE_BYTES) large.push(size);
  }
  large.sort((a, b) => b - a);
  const threshold = large.length > MAX_FILE_LAYERS ? large[MAX_FILE_LAYERS]! + 1 : LARGE_FILE_BYTES;
  const smallBytes = bytes - large.reduce((n, s) => (s >= threshold ? n + s : n), 0);
  let buckets = 1;
  while (buckets < MAX_PACKS && buckets * PACK_TARGET_BYTES < smallBytes) buckets = Math.min(buckets * 2, MAX_PACKS);
  return layoutWith(all, threshold, buckets);
}

/** The size (with its index) of the first pack of `layout` past MAX_PACK_BYTES, if any: what push refuses to make. */
export function oversizedPack(layout: Pick<Layout, 'packs'>): number | undefined {
  for (const p of layout.packs) {
    const size = p.size + indexBytes(p.count);
    if (size > MAX_PACK_BYTES) return size;
  }
  return undefined;
}

/** The layer descriptors of a layout, given each pack's blob digest: packs in bucket order, then files by digest. */
export function layersOf(layout: LayoutSummary, packDigests: readonly string[]): Descriptor[] {
  const layers: Descriptor[] = layout.packs.map((p, i) => ({
    mediaType: INDEXED_PACK_TYPE,
    digest: packDigests[i]!,
    size: p.size + indexBytes(p.count),
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
export function manifestOf(snapshotDigest: string, layout: Pick<LayoutSummary, 'threshold' | 'buckets'>, config: Descriptor, layers: Descriptor[], extra: Record<string, string> = {}): Buffer {
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
