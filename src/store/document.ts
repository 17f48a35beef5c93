// document.ts: a snapshot's manifest.json (its commit marker): what it holds, how it is written and re-checked.
import { createHash } from 'node:crypto';

import { SealError } from '../base/errors.js';
import { RawJson, snapshotDigest, type Entries, type ManifestEntry } from '../base/manifest.js';
import { SLOT, chunkText, eachChunk, manifestDigest, mountDigests, mountDigestsOf, piecesOf, type Piece } from '../base/manifest-stream.js';
import { EntryTable, type PackedEntries } from '../base/entry-table.js';
import type { CapturedMount, MountData } from '../capture/mounts.js';
import { checkDocument } from './document-check.js';


/** Everything a snapshot is, as stored in its manifest.json. */
export interface SnapshotData {
  digest: string;
  manifestDigest: string;
  source: string;
  revision: string;
  declarations: string[];
  /** The capture's exclude patterns; absent when it had none (the document and digest are then the seed's). */
  exclude?: string[];
  entries: ManifestEntry[];
  totalBytes: number;
  mounts: CapturedMount[];
  mountBinding: { contentDigest: string; manifestDigest: string };
}

/** A snapshot as the library holds it: each entry list an array or a packed table. */
export interface StoredSnapshot extends Omit<SnapshotData, 'entries' | 'mounts'> {
  entries: Entries;
  mounts: MountData[];
}

type DigestInput = Pick<StoredSnapshot, 'source' | 'revision' | 'declarations' | 'exclude' | 'entries' | 'mounts'>;

/** The digests of a snapshot's entries, each list encoded piecewise (never whole in memory). */
export function computeDigests(d: DigestInput): Pick<StoredSnapshot, 'digest' | 'manifestDigest' | 'mountBinding'> {
  const digests = { manifestDigest: manifestDigest(d.entries), mountBinding: mountDigests(d.mounts) };
  return { digest: digestOf({ ...d, ...digests }), ...digests };
}

/**
 * computeDigests from each list's canonical JSON as it stands (the copy roots' first, then
 * each mount's): for lists already proven to be the encoding of the entries.
 */
function digestsOfLists(d: Omit<DigestInput, 'entries'>, lists: readonly Uint8Array[]): Pick<StoredSnapshot, 'digest' | 'manifestDigest' | 'mountBinding'> {
  const digests = {
    manifestDigest: createHash('sha256').update(lists[0]!).digest('hex'),
    mountBinding: mountDigestsOf(d.mounts, (i, sink) => sink(Buffer.from(lists[i + 1]!.buffer, lists[i + 1]!.byteOffset, lists[i + 1]!.byteLength))),
  };
  return { digest: digestOf({ ...d, ...digests }), ...digests };
}

/** The snapshot digest of a snapshot whose entry lists' digests are known. */
function digestOf(d: Pick<StoredSnapshot, 'source' | 'revision' | 'declarations' | 'exclude' | 'manifestDigest' | 'mountBinding'>): string {
  return snapshotDigest({
    source: d.source,
    revision: d.revision,
    declarations: d.declarations,
    exclude: d.exclude,
    manifestDigest: d.manifestDigest,
    mountContentDigest: d.mountBinding.contentDigest,
    mountManifestDigest: d.mountBinding.manifestDigest,
  });
}

/**
 * The same snapshot captured at another source path: its entries and every digest of
 * them unchanged, its snapshot digest (which folds in the source) recomputed.
 */
export function withSource<T extends StoredSnapshot>(d: T, source: string): T {
  return { ...d, source, digest: digestOf({ ...d, source }) };
}

/** manifest.json as pieces: the document's skeleton, each entry list in its place (encoded in chunks as it is written). */
export function encodeDocumentPieces(d: StoredSnapshot): Piece[] {
  const doc = {
    schema_version: 3,
    digest: d.digest,
    manifest_digest: d.manifestDigest,
    source: d.source,
    revision: d.revision,
    declarations: d.declarations,
    ...(d.exclude === undefined ? {} : { exclude: d.exclude }),
    total_bytes: d.totalBytes,
    entries: new RawJson(SLOT),
    mounts: d.mounts.map((m) => ({ source: m.source, target: m.target, kind: m.kind, total_bytes: m.totalBytes, entries: new RawJson(SLOT) })),
    mount_content_digest: d.mountBinding.contentDigest,
    mount_manifest_digest: d.mountBinding.manifestDigest,
  };
  // Keys sort "entries" before "mounts": the lists fill the slots in this order.
  const pieces = piecesOf(doc, [d.entries, ...d.mounts.map((m) => m.entries)]);
  pieces.push('\n');
  return pieces;
}

/** manifest.json as one string. */
export function documentText(d: StoredSnapshot): string {
  let out = '';
  eachChunk(encodeDocumentPieces(d), (chunk) => (out += chunkText(chunk)));
  return out;
}

/** A snapshot as it crosses threads: each entry list as a packed table's arrays (shared memory, not copied; no object per entry). */
export interface PackedSnapshot extends Omit<SnapshotData, 'entries' | 'mounts'> {
  packedEntries: PackedEntries;
  mounts: (Omit<MountData, 'entries'> & { packedEntries: PackedEntries })[];
}

export function packSnapshot(d: StoredSnapshot): PackedSnapshot {
  const { entries, mounts, ...rest } = d;
  return {
    ...rest,
    packedEntries: EntryTable.of(entries).pack(),
    mounts: mounts.map(({ entries: e, ...m }) => ({ ...m, packedEntries: EntryTable.of(e).pack() })),
  };
}

/** The snapshot of a packed one (its entry lists as tables). */
export function unpackSnapshot(p: PackedSnapshot): StoredSnapshot {
  const { packedEntries, mounts, ...rest } = p;
  return {
    ...rest,
    entries: EntryTable.unpack(packedEntries),
    mounts: mounts.map(({ packedEntries: e, ...m }) => ({ ...m, entries: EntryTable.unpack(e) })),
  };
}

function corrupt(what: string): SealError {
  return new SealError('SEAL_CORRUPT', `snapshot manifest is corrupt: ${what}`);
}

function entryList(v: unknown): ManifestEntry[] {
  if (!Array.isArray(v)) throw corrupt('entries is not a list');
  return v.map((e: Record<string, unknown>) => {
    const ok =
      e !== null &&
      typeof e === 'object' &&
      (e.kind === 'directory' || e.kind === 'file' || e.kind === 'symlink') &&
      typeof e.path === 'string' &&
      typeof e.size === 'number' &&
      typeof e.sha256 === 'string' &&
      typeof e.mode === 'number' &&
      typeof e.link_target === 'string' &&
      (e.mtime_ns === undefined || typeof e.mtime_ns === 'string');
    if (!ok) throw corrupt('an entry is malformed');
    const entry: ManifestEntry = {
      kind: e.kind as ManifestEntry['kind'],
      path: e.path as string,
      size: e.size as number,
      sha256: e.sha256 as string,
      mode: e.mode as number,
      link_target: e.link_target as string,
    };
    // Checked with the rest of the document (checkDocument): where times are kept, and their form.
    return e.mtime_ns === undefined ? entry : { ...entry, mtime_ns: e.mtime_ns as string };
  });
}

/** Parses a manifest.json, proves its digests from its own entries and checks it is one capture could have made (SEAL_CORRUPT otherwise). */
export function decodeDocument(text: string, expectDigest?: string): SnapshotData {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new SealError('SEAL_CORRUPT', 'snapshot manifest is not valid JSON', { cause: err });
  }
  const later = laterSchema(doc);
  if (later !== undefined) laterOrAltered(later, () => decodeDocument(JSON.stringify({ ...doc, schema_version: 3 }), expectDigest));
  checkFields(doc);
  const entries = entryList(doc.entries);
  const mounts = (doc.mounts as Record<string, unknown>[]).map((m): CapturedMount => mountOf(m, entryList(m.entries)));
  return finishDecode(doc, entries, mounts, expectDigest);
}

/** A mount of a parsed document, with its entry list as read. */
export function mountOf<E extends Entries>(m: Record<string, unknown>, entries: E): Omit<MountData, 'entries'> & { entries: E } {
  return { source: String(m.source), target: String(m.target), kind: m.kind === 'file' ? 'file' : 'directory', totalBytes: Number(m.total_bytes), entries };
}

/** The schema_version of a document that claims one later than 3 (an integer); else undefined. */
function laterSchema(doc: unknown): number | undefined {
  const v = doc !== null && typeof doc === 'object' ? (doc as Record<string, unknown>).schema_version : undefined;
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 3 ? v : undefined;
}

/**
 * A document that claims a later schema: SEAL_UNAVAILABLE (a later treeseal's, not
 * damaged: gc keeps it, verify does not call it corrupt), unless it proves itself a schema-3
 * document (`asSchema3` decodes it as one without an error): then only its version was
 * altered (a flipped bit, or a hand that wanted it kept forever), SEAL_CORRUPT.
 */
function laterOrAltered(version: number, asSchema3: () => unknown): never {
  try {
    asSchema3();
  } catch {
    throw new SealError('SEAL_UNAVAILABLE', `snapshot manifest is schema ${version}, newer than this treeseal reads (3): a later treeseal made it; upgrade treeseal to use it`);
  }
  throw corrupt(`schema_version altered: ${version} in a schema-3 manifest`);
}

/** The fields a document must have before its lists are read: schema 3, mounts and declarations lists, exclude patterns. */
function checkFields(doc: Record<string, unknown>): void {
  if (doc === null || typeof doc !== 'object' || doc.schema_version !== 3) throw corrupt('unknown schema');
  if (!Array.isArray(doc.mounts) || !Array.isArray(doc.declarations)) throw corrupt('mounts or declarations missing');
  if (doc.exclude !== undefined && (!Array.isArray(doc.exclude) || !doc.exclude.every((p) => typeof p === 'string'))) throw corrupt('exclude is not a list of patterns');
}

/**
 * The snapshot a parsed document's fields and entry lists make: its digests recomputed
 * from its entries and proven against the one it claims (and expectDigest), then checked
 * as one capture could have made (SEAL_CORRUPT otherwise).
 */
export function finishDecode<E extends Entries, M extends MountData>(
  doc: Record<string, unknown>,
  entries: E,
  mounts: M[],
  expectDigest?: string,
  lists?: readonly Uint8Array[],
): Omit<StoredSnapshot, 'entries' | 'mounts'> & { entries: E; mounts: M[] } {
  const later = laterSchema(doc);
  if (later !== undefined) laterOrAltered(later, () => finishDecode({ ...doc, schema_version: 3 }, entries, mounts, expectDigest, lists));
  checkFields(doc);
  const base = {
    source: String(doc.source),
    revision: String(doc.revision),
    declarations: (doc.declarations as unknown[]).map(String),
    ...(doc.exclude === undefined ? {} : { exclude: doc.exclude as string[] }),
    entries,
    mounts,
  };
  const digests = lists === undefined ? computeDigests(base) : digestsOfLists(base, lists);
  if (digests.digest !== doc.digest || (expectDigest !== undefined && digests.digest !== expectDigest)) {
    throw corrupt(`digest does not match its entries (${String(doc.digest)})`);
  }
  const data = { ...base, ...digests, totalBytes: Number(doc.total_bytes) };
  checkDocument(data);
  return data;
}
