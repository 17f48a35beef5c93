// document.ts: a snapshot's manifest.json (its commit marker): what it holds, how it is written and re-checked.
import { SealError } from '../base/errors.js';
import { RawJson, canonicalJson, entriesText, mountDigestsOf, sha256Hex, snapshotDigest, type Json, type ManifestEntry } from '../base/manifest.js';
import type { CapturedMount } from '../capture/mounts.js';


/** Everything a snapshot is, as stored in its manifest.json. */
export interface SnapshotData {
  digest: string;
  manifestDigest: string;
  source: string;
  revision: string;
  declarations: string[];
  entries: ManifestEntry[];
  totalBytes: number;
  mounts: CapturedMount[];
  mountBinding: { contentDigest: string; manifestDigest: string };
}

type DigestInput = Pick<SnapshotData, 'source' | 'revision' | 'declarations' | 'entries' | 'mounts'>;

/** The canonical JSON of every entry list of a snapshot, encoded once for its digests and its document. */
export interface EntryTexts {
  entries: string;
  mounts: string[];
}

export function encodeEntryLists(d: Pick<SnapshotData, 'entries' | 'mounts'>): EntryTexts {
  return { entries: entriesText(d.entries), mounts: d.mounts.map((m) => entriesText(m.entries)) };
}

export function computeDigests(d: DigestInput, texts: EntryTexts = encodeEntryLists(d)): Pick<SnapshotData, 'digest' | 'manifestDigest' | 'mountBinding'> {
  const manifest = sha256Hex(texts.entries);
  const mountBinding = mountDigestsOf(d.mounts.map((m, i) => ({ source: m.source, target: m.target, entries: texts.mounts[i]! })));
  const digest = snapshotDigest({
    source: d.source,
    revision: d.revision,
    declarations: d.declarations,
    manifestDigest: manifest,
    mountContentDigest: mountBinding.contentDigest,
    mountManifestDigest: mountBinding.manifestDigest,
  });
  return { digest, manifestDigest: manifest, mountBinding };
}

/** Stands for an entry list in the document's skeleton; canonical JSON never holds a raw NUL, so it cannot collide. */
const SLOT = '\u0000';

/**
 * manifest.json as pieces, the entry lists not copied into one big string: the
 * document's skeleton with each list's text put in its place (write them in order).
 */
export function encodeDocumentPieces(d: SnapshotData, texts: EntryTexts = encodeEntryLists(d)): string[] {
  const doc = {
    schema_version: 3,
    digest: d.digest,
    manifest_digest: d.manifestDigest,
    source: d.source,
    revision: d.revision,
    declarations: d.declarations,
    total_bytes: d.totalBytes,
    entries: new RawJson(SLOT),
    mounts: d.mounts.map((m) => ({ source: m.source, target: m.target, kind: m.kind, total_bytes: m.totalBytes, entries: new RawJson(SLOT) })),
    mount_content_digest: d.mountBinding.contentDigest,
    mount_manifest_digest: d.mountBinding.manifestDigest,
  };
  const skeleton = (canonicalJson(doc as unknown as Json) + '\n').split(SLOT);
  // Keys sort "entries" before "mounts": the lists fill the slots in this order.
  const lists = [texts.entries, ...texts.mounts];
  return skeleton.flatMap((part, i) => (i < lists.length ? [part, lists[i]!] : [part]));
}

/**
 * A snapshot as it crosses threads: each entry list as its canonical JSON text (one
 * flat string, cheap to copy and small), decoded only where the entries are read.
 */
export interface PackedSnapshot extends Omit<SnapshotData, 'entries' | 'mounts'> {
  entriesText: string;
  mounts: (Omit<CapturedMount, 'entries'> & { entriesText: string })[];
}

export function packSnapshot(d: SnapshotData, texts: EntryTexts = encodeEntryLists(d)): PackedSnapshot {
  const { entries: _entries, mounts, ...rest } = d;
  return {
    ...rest,
    entriesText: texts.entries,
    mounts: mounts.map(({ entries: _e, ...m }, i) => ({ ...m, entriesText: texts.mounts[i]! })),
  };
}

/** The full snapshot of a packed one (its texts are canonical JSON lists of entries). */
export function unpackSnapshot(p: PackedSnapshot): SnapshotData {
  const { entriesText, mounts, ...rest } = p;
  return {
    ...rest,
    entries: JSON.parse(entriesText) as ManifestEntry[],
    mounts: mounts.map(({ entriesText: text, ...m }) => ({ ...m, entries: JSON.parse(text) as ManifestEntry[] })),
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
      typeof e.link_target === 'string';
    if (!ok) throw corrupt('an entry is malformed');
    return {
      kind: e.kind as ManifestEntry['kind'],
      path: e.path as string,
      size: e.size as number,
      sha256: e.sha256 as string,
      mode: e.mode as number,
      link_target: e.link_target as string,
    };
  });
}

/** Parses a manifest.json and proves its digests from its own entries (SEAL_CORRUPT otherwise). */
export function decodeDocument(text: string, expectDigest?: string): SnapshotData {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(text) as Record<string, unknown>;
  } catch (err) {
    throw new SealError('SEAL_CORRUPT', 'snapshot manifest is not valid JSON', { cause: err });
  }
  if (doc === null || typeof doc !== 'object' || doc.schema_version !== 3) throw corrupt('unknown schema');
  const mountsRaw = doc.mounts;
  if (!Array.isArray(mountsRaw) || !Array.isArray(doc.declarations)) throw corrupt('mounts or declarations missing');
  const base = {
    source: String(doc.source),
    revision: String(doc.revision),
    declarations: (doc.declarations as unknown[]).map(String),
    entries: entryList(doc.entries),
    mounts: mountsRaw.map((m: Record<string, unknown>): CapturedMount => ({
      source: String(m.source),
      target: String(m.target),
      kind: m.kind === 'file' ? 'file' : 'directory',
      totalBytes: Number(m.total_bytes),
      entries: entryList(m.entries),
    })),
  };
  const digests = computeDigests(base);
  if (digests.digest !== doc.digest || (expectDigest !== undefined && digests.digest !== expectDigest)) {
    throw corrupt(`digest does not match its entries (${String(doc.digest)})`);
  }
  return { ...base, ...digests, totalBytes: Number(doc.total_bytes) };
}
