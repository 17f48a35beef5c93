// document.ts: a snapshot's manifest.json (its commit marker): what it holds, how it is written and re-checked.
import { SealError } from '../base/errors.js';
import { canonicalJson, manifestDigest, mountDigests, snapshotDigest, type Json, type ManifestEntry } from '../base/manifest.js';
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

export function computeDigests(
  d: Pick<SnapshotData, 'source' | 'revision' | 'declarations' | 'entries' | 'mounts'>,
): Pick<SnapshotData, 'digest' | 'manifestDigest' | 'mountBinding'> {
  const manifest = manifestDigest(d.entries);
  const mountBinding = mountDigests(d.mounts);
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

export function encodeDocument(d: SnapshotData): string {
  const doc = {
    schema_version: 3,
    digest: d.digest,
    manifest_digest: d.manifestDigest,
    source: d.source,
    revision: d.revision,
    declarations: d.declarations,
    total_bytes: d.totalBytes,
    entries: d.entries as unknown as Json[],
    mounts: d.mounts.map((m) => ({
      source: m.source,
      target: m.target,
      kind: m.kind,
      total_bytes: m.totalBytes,
      entries: m.entries as unknown as Json[],
    })),
    mount_content_digest: d.mountBinding.contentDigest,
    mount_manifest_digest: d.mountBinding.manifestDigest,
  };
  return canonicalJson(doc) + '\n';
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
