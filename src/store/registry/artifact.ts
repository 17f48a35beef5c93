// artifact.ts: reading an image manifest back: is it a treeseal snapshot, and are its layers exactly what its config implies.
import { SealError } from '../../base/errors.js';
import {
  ANNOTATION_BUCKET,
  ANNOTATION_BUCKETS,
  ANNOTATION_SNAPSHOT,
  ANNOTATION_THRESHOLD,
  ARTIFACT_TYPE,
  CONFIG_TYPE,
  EMPTY_DIGEST,
  EMPTY_TYPE,
  ENTRIES_TYPE,
  FILE_TYPE,
  INDEXED_PACK_TYPE,
  PACK_TYPE,
  ROOT_TYPE,
  type Descriptor,
  type LayoutSummary,
} from './mapping.js';
import { indexBytes } from './pack-index.js';

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

export interface Artifact {
  config: Descriptor;
  /** The pieces of its entry lists (the leading layers of a root document's manifest; none for a whole manifest.json config). */
  pieces: Descriptor[];
  /** The layers after the pieces: packs, files, or the empty layer. */
  layers: Descriptor[];
  /** The snapshot digest its annotations claim (never trusted: the config proves it). */
  snapshot: string;
  threshold: number;
  buckets: number;
}

function descriptor(v: unknown, what: string, bad: (why: string) => SealError): Descriptor {
  const d = v as Partial<Descriptor> | null;
  if (d === null || typeof d !== 'object' || typeof d.mediaType !== 'string' || typeof d.digest !== 'string' || !DIGEST_RE.test(d.digest)) {
    throw bad(`${what} is not a sha256 descriptor`);
  }
  if (typeof d.size !== 'number' || !Number.isSafeInteger(d.size) || d.size < 0) throw bad(`${what} has no valid size`);
  const annotations = d.annotations !== undefined && typeof d.annotations === 'object' && d.annotations !== null ? d.annotations : {};
  return { mediaType: d.mediaType, digest: d.digest, size: d.size, annotations };
}

function intAnnotation(a: Record<string, unknown>, key: string, min: number, max: number, bad: (why: string) => SealError): number {
  const v = Number(a[key]);
  if (typeof a[key] !== 'string' || !Number.isSafeInteger(v) || v < min || v > max) throw bad(`annotation ${key} is missing or out of range`);
  return v;
}

/** Parses an image manifest as a treeseal snapshot artifact; anything else is SEAL_CORRUPT naming `where`. */
export function parseArtifact(bytes: Buffer, where: string): Artifact {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} is not a treeseal snapshot: ${why}`);
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new SealError('SEAL_CORRUPT', `${where} is not a treeseal snapshot: its manifest is not JSON`, { cause: err });
  }
  if (m === null || typeof m !== 'object' || m.schemaVersion !== 2) throw bad('not an image manifest (schemaVersion 2)');
  if (m.artifactType !== ARTIFACT_TYPE) throw bad(`artifactType is ${JSON.stringify(m.artifactType)}`);
  const config = descriptor(m.config, 'config', bad);
  if (config.mediaType !== CONFIG_TYPE && config.mediaType !== ROOT_TYPE) throw bad(`config media type is ${config.mediaType}`);
  if (!Array.isArray(m.layers)) throw bad('no layers');
  const all = m.layers.map((l, i) => descriptor(l, `layer ${i}`, bad));
  const split = config.mediaType === ROOT_TYPE ? all.findIndex((l) => l.mediaType !== ENTRIES_TYPE) : 0;
  const pieces = all.slice(0, split < 0 ? all.length : split);
  const layers = all.slice(pieces.length);
  if (layers.some((l) => l.mediaType === ENTRIES_TYPE)) throw bad('a piece of an entry list is not among the first layers of a manifest with a root document');
  const a = (m.annotations ?? {}) as Record<string, unknown>;
  return {
    config,
    pieces,
    layers,
    snapshot: String(a[ANNOTATION_SNAPSHOT] ?? ''),
    threshold: intAnnotation(a, ANNOTATION_THRESHOLD, 1, Number.MAX_SAFE_INTEGER, bad),
    buckets: intAnnotation(a, ANNOTATION_BUCKETS, 1, 4096, bad),
  };
}

/** A pack's layer as the manifest names it: its blob, the blob's size, and whether it ends with an index (pack-index.ts). */
export interface PackLayer {
  digest: string;
  size: number;
  indexed: boolean;
}

/** Whether a layer's media type is a pack's (either format). */
export function isPackType(type: string): boolean {
  return type === PACK_TYPE || type === INDEXED_PACK_TYPE;
}

/**
 * The size a pack layer of `type` must have for `count` contents of `bytes` bytes in all:
 * their bytes, and for an indexed pack its index; undefined for a layer that is not a pack.
 */
export function packLayerSize(type: string, bytes: number, count: number): number | undefined {
  if (type === PACK_TYPE) return bytes;
  if (type === INDEXED_PACK_TYPE) return bytes + indexBytes(count);
  return undefined;
}

/**
 * Checks that the manifest's layers are exactly the layout its config implies: one
 * pack per non-empty bucket (either pack media type, its bucket, its size), then one blob
 * per large content (its sha256, its size). Returns the packs' layers, in bucket order.
 */
export function expectLayers(artifact: Artifact, layout: LayoutSummary, where: string): PackLayer[] {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} does not match its snapshot manifest: ${why}`);
  const { layers } = artifact;
  const wantEmpty = layout.packs.length + layout.files.length === 0;
  if (wantEmpty) {
    if (layers.length !== 1 || layers[0]!.mediaType !== EMPTY_TYPE || layers[0]!.digest !== EMPTY_DIGEST) throw bad('expected only the empty layer');
    return [];
  }
  if (layers.length !== layout.packs.length + layout.files.length) {
    throw bad(`${layers.length} layers, the manifest implies ${layout.packs.length} packs and ${layout.files.length} files`);
  }
  const packs = layout.packs.map((p, i): PackLayer => {
    const l = layers[i]!;
    const size = packLayerSize(l.mediaType, p.size, p.count);
    if (size === undefined || l.annotations?.[ANNOTATION_BUCKET] !== String(p.bucket)) throw bad(`layer ${artifact.pieces.length + i} is not pack ${p.bucket}`);
    if (l.size !== size) throw bad(`pack ${p.bucket} has size ${l.size}, its contents${l.mediaType === PACK_TYPE ? '' : ' and their index'} add up to ${size}`);
    return { digest: l.digest, size, indexed: l.mediaType === INDEXED_PACK_TYPE };
  });
  layout.files.forEach((f, k) => {
    const i = layout.packs.length + k;
    const l = layers[i]!;
    if (l.mediaType !== FILE_TYPE || l.digest !== `sha256:${f.sha256}`) throw bad(`layer ${artifact.pieces.length + i} is not the file blob sha256:${f.sha256}`);
    if (l.size !== f.size) throw bad(`file blob sha256:${f.sha256} has size ${l.size}, the manifest says ${f.size}`);
  });
  return packs;
}
