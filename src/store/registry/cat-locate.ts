// cat-locate.ts: where one file of a snapshot in a registry lies: the config proven against the snapshot digest from its own text, the file's entry, and its pack and offset (or its own blob).
import { createHash } from 'node:crypto';

import { SealError } from '../../base/errors.js';
import { jsonString, snapshotDigest, type ManifestEntry } from '../../base/manifest.js';
import { mountDigestsOf } from '../../base/manifest-stream.js';
import { escapePath } from '../../base/paths.js';
import { cutDocument } from '../document-cut.js';
import { isPackType, packLayerSize } from './artifact.js';
import { ANNOTATION_BUCKET, FILE_TYPE, bucketOf, type Descriptor } from './mapping.js';

/** What locating a file needs of the image manifest (its claims; each is checked or proven). */
export interface CatManifest {
  /** `remote:tag` or `remote@sha256:…`, for messages. */
  where: string;
  threshold: number;
  buckets: number;
  layers: Descriptor[];
}

/** One file of a snapshot and where its bytes are in the repository. */
export interface CatLocation {
  /** The snapshot digest: recomputed from the config (cat by digest), or the manifest's claim (cat-lazy.ts). */
  digest: string;
  /** The file's path as asked for (components joined by `/`). */
  path: string;
  sha256: string;
  size: number;
  mode: number;
  /** The blob that holds its bytes (a pack, or a blob of its own); undefined for an empty file. */
  blob: string | undefined;
  /** Where its bytes start in that blob. */
  offset: number;
}

/** One entry list of the document: its canonical JSON (ASCII bytes, as the config holds it), and where a clone shows it. */
interface List {
  text: Buffer;
  /** '' for the copy roots; a mount's target. */
  target: string;
}

interface Skeleton {
  schema_version?: unknown;
  digest?: unknown;
  source?: unknown;
  revision?: unknown;
  declarations?: unknown;
  exclude?: unknown;
  mounts?: { source?: unknown; target?: unknown }[];
}

const HEX64_RE = /^[0-9a-f]{64}$/;

/** The document's entry lists and the rest of it parsed (each list standing as `[]`). */
function cutAndParse(config: Buffer, bad: (why: string) => SealError): { lists: Buffer[]; skeleton: Skeleton } {
  const { parts, lists } = cutDocument(config, bad);
  try {
    return { lists, skeleton: JSON.parse(parts.join('[]')) as Skeleton };
  } catch (err) {
    throw bad(`its JSON is malformed (${escapePath((err as Error).message)})`);
  }
}

function stringList(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((x) => typeof x === 'string');
}

/**
 * Proves the config is snapshot `expect`: its digest recomputed from the document's own
 * texts of its entry lists (hashed as they stand, never re-encoded) and its source,
 * revision, declarations, exclude patterns and mount sources and targets. Once it is, each
 * list's text is that snapshot's canonical entry list, byte for byte.
 */
function proveLists(config: Buffer, expect: string, where: string): List[] {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} does not hold a valid snapshot manifest: ${why}`);
  const { lists, skeleton: d } = cutAndParse(config, bad);
  const mounts = Array.isArray(d.mounts) ? d.mounts : [];
  if (d.schema_version !== 3 || typeof d.source !== 'string' || typeof d.revision !== 'string' || !stringList(d.declarations)) throw bad('unknown schema');
  if (d.exclude !== undefined && !stringList(d.exclude)) throw bad('exclude is not a list of patterns');
  if (mounts.length !== lists.length - 1 || !mounts.every((m) => typeof m?.source === 'string' && typeof m.target === 'string')) throw bad('its mounts do not match its entry lists');
  const named = mounts as { source: string; target: string }[];
  const mountBinding = mountDigestsOf(named, (i, sink) => sink(lists[i + 1]!));
  const digest = snapshotDigest({
    source: d.source,
    revision: d.revision,
    declarations: d.declarations,
    exclude: d.exclude as string[] | undefined,
    manifestDigest: createHash('sha256').update(lists[0]!).digest('hex'),
    mountContentDigest: mountBinding.contentDigest,
    mountManifestDigest: mountBinding.manifestDigest,
  });
  if (digest !== expect) throw new SealError('SEAL_CORRUPT', `${where} holds snapshot ${digest}, not ${expect} (the tag was moved or the registry lies)`);
  return [{ text: lists[0]!, target: '' }, ...named.map((m, i) => ({ text: lists[i + 1]!, target: m.target }))];
}

/**
 * The entry at `path` in a proven list: found by its `,"path":<json>,"sha256":"` (in
 * canonical JSON an unescaped quote only delimits, so this names one entry's path key
 * and its whole value), read from its `{"kind":` to its `}`.
 */
export function findEntry(list: Buffer, path: string): ManifestEntry | undefined {
  const at = list.indexOf(`,"path":${jsonString(path)},"sha256":"`, 0, 'latin1');
  if (at < 0) return undefined;
  const start = list.lastIndexOf('{"kind":"', at, 'latin1');
  const end = list.indexOf('}', at, 'latin1');
  return JSON.parse(list.toString('latin1', start, end + 1)) as ManifestEntry;
}

/** The entry a clone-relative path names: a copy root's, else a mount's (`payload` is its target, the longest target first). */
function lookUp(lists: List[], path: string): ManifestEntry | undefined {
  const copy = findEntry(lists[0]!.text, path);
  if (copy !== undefined) return copy;
  for (const m of lists.slice(1).sort((a, b) => b.target.length - a.target.length)) {
    if (path === m.target) return findEntry(m.text, 'payload');
    if (path.startsWith(`${m.target}/`)) return findEntry(m.text, `payload/${path.slice(m.target.length + 1)}`);
  }
  return undefined;
}

const KEY = Buffer.from(',"sha256":"', 'latin1');
const SIZE_KEY_BYTES = '","size":'.length;

/** The value of hex digit byte c (-1 when it is not one). */
function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return -1;
}

/** The bucket of the sha256 whose hex digits start at `at` (its first 8 digits, as bucketOf reads them); -1 when they are not hex. */
function bucketAt(text: Buffer, at: number, buckets: number): number {
  let top = 0;
  for (let k = 0; k < 8; k++) {
    const v = hexValue(text[at + k]!);
    if (v < 0) return -1;
    top = top * 16 + v;
  }
  return Math.floor((top * buckets) / 2 ** 32);
}

/**
 * Every distinct file content in bucket `bucket` below `threshold` bytes (the pack's
 * contents), from the proven lists' bytes: each `,"sha256":"<64 hex>","size":N}` of a file
 * entry. Returns the size of the pack's contents, their count, and the offset of content
 * `sha256` in it (contents are packed in sha256 order, an indexed pack's index after them).
 */
function packPlace(lists: List[], sha256: string, threshold: number, buckets: number, bucket: number): { offset: number; size: number; count: number } {
  const seen = new Set<string>();
  let offset = 0;
  let size = 0;
  for (const { text } of lists) {
    for (let at = text.indexOf(KEY); at >= 0; at = text.indexOf(KEY, at + KEY.length)) {
      const hexAt = at + KEY.length;
      // A directory's is "": only 64 digits and a quote are a content's.
      if (text[hexAt + 64] !== 0x22 || bucketAt(text, hexAt, buckets) !== bucket) continue;
      const sha = text.toString('latin1', hexAt, hexAt + 64);
      if (seen.has(sha) || !HEX64_RE.test(sha)) continue;
      // Symlinks have a sha256 too; only files are packed.
      if (text[text.lastIndexOf('{"kind":"', at, 'latin1') + 9] !== 0x66) continue;
      const sizeAt = hexAt + 64 + SIZE_KEY_BYTES;
      const n = Number(text.toString('latin1', sizeAt, text.indexOf('}', sizeAt, 'latin1')));
      if (n === 0 || n >= threshold) continue;
      seen.add(sha);
      size += n;
      if (sha < sha256) offset += n;
    }
  }
  return { offset, size, count: seen.size };
}

/** A file entry whose bytes are in a pack: what a CatLocation says but where in the pack. */
export interface PackedEntry {
  location: Omit<CatLocation, 'offset'> & { blob: string };
  bucket: number;
  /** The pack's layer. */
  layer: Descriptor;
}

/**
 * Where the entry found for `path` in snapshot `digest` keeps its bytes, as far as its
 * kind and size say: none found is SEAL_UNAVAILABLE, a directory SEAL_BAD_PATH, a symlink
 * SEAL_SYMLINK; an empty file has no blob; a file of at least the manifest's threshold has
 * a blob of its own, which the manifest must hold at its size (else SEAL_CORRUPT); a smaller
 * one is in pack `bucketOf(sha256)`, whose layer the manifest must have (else SEAL_CORRUPT).
 */
export function placeEntry(entry: ManifestEntry | undefined, manifest: CatManifest, path: string, digest: string): CatLocation | PackedEntry {
  const shown = escapePath(path);
  if (entry === undefined) throw new SealError('SEAL_UNAVAILABLE', `no such file in snapshot ${digest}: ${shown}`, { path });
  if (entry.kind === 'directory') throw new SealError('SEAL_BAD_PATH', `not a file in snapshot ${digest}: ${shown} is a directory`, { path });
  if (entry.kind === 'symlink') throw new SealError('SEAL_SYMLINK', `not a file in snapshot ${digest}: ${shown} is a symlink (to ${escapePath(entry.link_target)})`, { path });
  const base = { digest, path, sha256: entry.sha256, size: entry.size, mode: entry.mode };
  if (entry.size === 0) return { ...base, blob: undefined, offset: 0 };
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${manifest.where} does not match its snapshot manifest: ${why}`);
  if (entry.size >= manifest.threshold) {
    const blob = `sha256:${entry.sha256}`;
    const layer = manifest.layers.find((l) => l.mediaType === FILE_TYPE && l.digest === blob);
    if (layer === undefined || layer.size !== entry.size) throw bad(`no file blob ${blob} of ${entry.size} bytes`);
    return { ...base, blob, offset: 0 };
  }
  const bucket = bucketOf(entry.sha256, manifest.buckets);
  const layer = manifest.layers.find((l) => isPackType(l.mediaType) && l.annotations?.[ANNOTATION_BUCKET] === String(bucket));
  if (layer === undefined) throw bad(`pack ${bucket} is missing`);
  return { location: { ...base, blob: layer.digest }, bucket, layer };
}

/**
 * Locates file `path` (a clone's view: a copy root's path, or a mount's target and the
 * path below it) of snapshot `expect` whose config is `config`: proves the config (see
 * proveLists), finds the entry and where its bytes are (see placeEntry); in a pack, at
 * the sum of the sizes of the bucket's smaller contents, the pack's layer of the size its
 * contents (and an indexed pack's index) make (else SEAL_CORRUPT). The bytes read are
 * proven against the sha256 later.
 */
export function locateFile(config: Uint8Array, manifest: CatManifest, path: string, expect: string): CatLocation {
  if (!HEX64_RE.test(expect)) throw new SealError('SEAL_CORRUPT', `${manifest.where} names no snapshot digest`);
  const lists = proveLists(Buffer.from(config.buffer, config.byteOffset, config.byteLength), expect, manifest.where);
  const placed = placeEntry(lookUp(lists, path), manifest, path, expect);
  if (!('bucket' in placed)) return placed;
  const { bucket, layer } = placed;
  const { offset, size, count } = packPlace(lists, placed.location.sha256, manifest.threshold, manifest.buckets, bucket);
  const want = packLayerSize(layer.mediaType, size, count)!;
  if (layer.size !== want) throw new SealError('SEAL_CORRUPT', `${manifest.where} does not match its snapshot manifest: pack ${bucket} is not ${want} bytes`);
  return { ...placed.location, offset };
}
