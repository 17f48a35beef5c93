// cat-lazy.ts: one file located through a manifest the caller named by tag or manifest digest without the whole entry lists: the root document, the piece of each list that may name the file, and its pack's index.
import { SealError } from '../../base/errors.js';
import type { ManifestEntry } from '../../base/manifest.js';
import { compareUtf8, escapePath } from '../../base/paths.js';
import { findEntry, placeEntry, type CatLocation, type CatManifest } from './cat-locate.js';
import type { RegistryClient } from './client.js';
import { ANNOTATION_FIRST_PATH, INDEXED_PACK_TYPE, ROOT_TYPE, type Descriptor } from './mapping.js';
import { FOOTER_BYTES, findInIndex, footerCount, indexBytes } from './pack-index.js';
import { MAX_ROOT_BYTES, readRoot, type RootDocument } from './pieces.js';
import { MAX_CONFIG_BYTES, type ManifestRead } from './pull.js';

/** Bytes read from a pack's end to find its index in one request (about 200 contents' records; more are read after). */
const TAIL_BYTES = 8192;

/** A list a path may be in: which of the root's lists, and the path its entries give it there. */
interface Candidate {
  list: number;
  name: string;
}

/** The mount targets a root document names, in its lists' order after the copy roots'. */
function mountTargets(root: RootDocument, where: string): string[] {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} does not hold a valid snapshot root document: ${why}`);
  let doc: { mounts?: { target?: unknown }[] };
  try {
    doc = JSON.parse(root.parts.join('[]')) as typeof doc;
  } catch (err) {
    throw bad(`its JSON is malformed (${escapePath((err as Error).message)})`);
  }
  const mounts = Array.isArray(doc.mounts) ? doc.mounts : [];
  if (mounts.length !== root.lists.length - 1 || !mounts.every((m) => typeof m?.target === 'string')) throw bad('its mounts do not match its entry lists');
  return mounts.map((m) => m.target as string);
}

/**
 * The lists `path` (a clone's view) may be in, as cat-locate's lookUp reads them: the copy
 * roots', then the one mount whose target holds it (the longest such target).
 */
function candidatesOf(targets: readonly string[], path: string): Candidate[] {
  const out: Candidate[] = [{ list: 0, name: path }];
  const byLength = targets.map((target, i) => ({ target, list: i + 1 })).sort((a, b) => b.target.length - a.target.length);
  const mount = byLength.find(({ target }) => path === target || path.startsWith(`${target}/`));
  if (mount !== undefined) out.push({ list: mount.list, name: path === mount.target ? 'payload' : `payload/${path.slice(mount.target.length + 1)}` });
  return out;
}

/** The piece of a list whose entries would hold `name`: the last whose first path is not after it (undefined when the first piece's is). */
function pieceFor(digests: readonly string[], firsts: ReadonlyMap<string, string>, name: string): string | undefined {
  let found: string | undefined;
  for (const d of digests) {
    if (compareUtf8(firsts.get(d)!, name) > 0) break;
    found = d;
  }
  return found;
}

const HEX64_RE = /^[0-9a-f]{64}$/;

/**
 * The entry for `name` in a piece, checked for what locating it reads (a piece is proven
 * only against the manifest's digest for it, not against a snapshot digest, so it may be
 * anything a manifest's author wrote): else SEAL_CORRUPT.
 */
function entryIn(piece: Buffer, name: string, where: string): ManifestEntry | undefined {
  let e: unknown;
  try {
    e = findEntry(piece, name);
  } catch {
    e = null;
  }
  if (e === undefined) return undefined;
  if (!wellFormed(e)) throw new SealError('SEAL_CORRUPT', `${where} does not hold a valid snapshot manifest: the entry of ${escapePath(name)} is malformed`, { path: name });
  return e;
}

/** Whether an entry has what placeEntry reads: a kind, a sha256 for a file or symlink, a link's target, a size and mode. */
function wellFormed(v: unknown): v is ManifestEntry {
  const e = v as Partial<Record<keyof ManifestEntry, unknown>> | null;
  if (e === null || typeof e !== 'object' || !Number.isSafeInteger(e.size) || (e.size as number) < 0 || !Number.isSafeInteger(e.mode)) return false;
  if (e.kind === 'directory') return true;
  if (typeof e.sha256 !== 'string' || !HEX64_RE.test(e.sha256)) return false;
  return e.kind === 'file' || (e.kind === 'symlink' && typeof e.link_target === 'string');
}

/** Reads a pack's index from its end (one Range read, two for a large index) and finds content `sha256` in it. */
async function placeInPack(client: RegistryClient, layer: Descriptor, sha256: string, size: number, where: string): Promise<number> {
  const bad = (why: string): SealError => new SealError('SEAL_CORRUPT', `${where} does not hold a valid pack ${layer.digest}: ${why}`);
  if (layer.size < FOOTER_BYTES) throw bad('it is too small to end with an index');
  const tailBytes = Math.min(layer.size, TAIL_BYTES);
  let tail = await readBytes(client, layer.digest, layer.size - tailBytes, tailBytes);
  const want = indexBytes(footerCount(tail, layer.size, bad));
  if (want > tail.length) tail = Buffer.concat([await readBytes(client, layer.digest, layer.size - want, want - tail.length), tail]);
  const place = findInIndex(tail.subarray(tail.length - want), layer.size, sha256, bad);
  if (place === undefined || place.size !== size) throw bad(`its index does not hold sha256 ${sha256} of ${size} bytes`);
  return place.offset;
}

/** Bytes [start, start + length) of blob `digest`, read with Range into one buffer (unproven: the caller proves them). */
export async function readBytes(client: RegistryClient, digest: string, start: number, length: number): Promise<Buffer> {
  const out = Buffer.allocUnsafe(length);
  let at = 0;
  await client.readRange(digest, start, length, (chunk) => {
    out.set(chunk, at);
    at += chunk.length;
  });
  return out;
}

/**
 * Locates file `path` of the snapshot image manifest `m` names, reading only what it must:
 * the root document, the piece of each list that may hold the path (the copy roots', and
 * the mount's whose target holds it; chosen by the first paths the manifest's piece layers
 * carry), and for a packed file its pack's index (a Range read of the pack's end). The
 * root document and the pieces are proven against the digests the manifest gives them, so
 * the entry found is what the manifest records; the index only says where to read (the
 * bytes are proven against the entry's sha256 later). The snapshot digest is the one the
 * manifest claims (`claimed`), not recomputed. Undefined when the manifest has not this shape
 * (the first format, pieces without first paths, an unindexed pack) or the piece does not
 * hold the path: the caller then reads the whole entry lists (which also says why a path
 * is missing), taking the blobs this read (left in `got`, by digest) from there.
 */
export async function locateLazily(client: RegistryClient, m: ManifestRead, path: string, claimed: string, got: Map<string, Buffer>): Promise<CatLocation | undefined> {
  const { artifact, where } = m;
  if (artifact.config.mediaType !== ROOT_TYPE || artifact.config.size > MAX_ROOT_BYTES) return undefined;
  const firsts = new Map<string, string>();
  for (const l of artifact.pieces) {
    const first = l.annotations?.[ANNOTATION_FIRST_PATH];
    if (typeof first !== 'string') return undefined;
    firsts.set(l.digest, first);
  }
  // The bound a pull and a cat by digest set on the lists, before anything is fetched.
  const listBytes = artifact.pieces.reduce((n, l) => n + l.size, 0);
  if (listBytes > MAX_CONFIG_BYTES) throw new SealError('SEAL_CORRUPT', `${where} has entry lists of ${listBytes} bytes`);
  const rootBytes = await client.getBlob(artifact.config.digest, artifact.config.size);
  got.set(artifact.config.digest, rootBytes);
  const root = readRoot(rootBytes, where);
  // The root names exactly the manifest's pieces (as a pull checks), so each has its first path.
  if (root.distinct.length !== artifact.pieces.length || root.distinct.some((d, i) => d !== artifact.pieces[i]!.digest)) {
    throw new SealError('SEAL_CORRUPT', `${where} does not match its root document: its first layers are not the ${root.distinct.length} pieces the root names`);
  }
  const sizes = new Map(artifact.pieces.map((l) => [l.digest, l.size]));
  const tries = candidatesOf(mountTargets(root, where), path).flatMap((c) => {
    const piece = pieceFor(root.lists[c.list]!, firsts, c.name);
    return piece === undefined ? [] : [{ ...c, piece }];
  });
  // At most two pieces (one a piece both lists share), each fetched once.
  await Promise.all([...new Set(tries.map((t) => t.piece))].map(async (d) => got.set(d, await client.getBlob(d, sizes.get(d)!))));
  const found = tries.map((t) => entryIn(got.get(t.piece)!, t.name, where));
  const entry = found.find((e) => e !== undefined);
  if (entry === undefined) return undefined;
  const manifest: CatManifest = { where, threshold: artifact.threshold, buckets: artifact.buckets, layers: artifact.layers };
  const placed = placeEntry(entry, manifest, path, claimed);
  if (!('bucket' in placed)) return placed;
  if (placed.layer.mediaType !== INDEXED_PACK_TYPE) return undefined;
  const offset = await placeInPack(client, placed.layer, placed.location.sha256, placed.location.size, where);
  return { ...placed.location, offset };
}
