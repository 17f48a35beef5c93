// snapshot-summary.ts: a snapshot without its entries (each list's count in its place), made from its data or checked as read back from a record.
import type { PackedEntries } from '../base/entry-table.js';
import type { Entries } from '../base/manifest.js';
import type { PackedSnapshot, StoredSnapshot } from './document.js';

/** A snapshot without its entries (Snapshot.summary): each entry list's count in its place. */
export interface SnapshotSummary {
  digest: string;
  manifestDigest: string;
  source: string;
  revision: string;
  declarations: string[];
  /** The capture's exclude patterns ([] when it had none). */
  exclude: string[];
  mounts: { source: string; target: string; kind: 'directory' | 'file'; entries: number }[];
  /** Entries of the copy roots and every mount. */
  entries: number;
  totalBytes: number;
  mountBinding: { contentDigest: string; manifestDigest: string };
}

function count(list: Entries | PackedEntries): number {
  return 'used' in list ? list.count : list.length;
}

/** The summary of a snapshot's data, loaded or packed: no entry is made into an object. */
export function summaryOf(d: StoredSnapshot | PackedSnapshot): SnapshotSummary {
  const mounts = 'packedEntries' in d ? d.mounts.map((m) => ({ ...m, n: count(m.packedEntries) })) : d.mounts.map((m) => ({ ...m, n: count(m.entries) }));
  const own = 'packedEntries' in d ? count(d.packedEntries) : count(d.entries);
  return {
    digest: d.digest,
    manifestDigest: d.manifestDigest,
    source: d.source,
    revision: d.revision,
    declarations: [...d.declarations],
    exclude: [...(d.exclude ?? [])],
    mounts: mounts.map((m) => ({ source: m.source, target: m.target, kind: m.kind, entries: m.n })),
    entries: own + mounts.reduce((n, m) => n + m.n, 0),
    totalBytes: d.totalBytes,
    mountBinding: { ...d.mountBinding },
  };
}

const isDigest = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{64}$/.test(v);
const isCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === 'string');

function hasKeys(v: unknown, keys: readonly string[]): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const own = Object.keys(v);
  return own.length === keys.length && keys.every((k) => own.includes(k));
}

const SUMMARY_KEYS = ['digest', 'manifestDigest', 'source', 'revision', 'declarations', 'exclude', 'mounts', 'entries', 'totalBytes', 'mountBinding'];
const MOUNT_KEYS = ['source', 'target', 'kind', 'entries'];

/** Whether v is a summary of the snapshot `digest`, field for field (a record read back is used only then). */
export function isSummaryOf(v: unknown, digest: string): v is SnapshotSummary {
  if (!hasKeys(v, SUMMARY_KEYS) || v.digest !== digest || !isDigest(v.manifestDigest)) return false;
  if (typeof v.source !== 'string' || typeof v.revision !== 'string' || !isStrings(v.declarations) || !isStrings(v.exclude)) return false;
  if (!isCount(v.entries) || !isCount(v.totalBytes)) return false;
  const b = v.mountBinding;
  if (!hasKeys(b, ['contentDigest', 'manifestDigest']) || !isDigest(b.contentDigest) || !isDigest(b.manifestDigest)) return false;
  const mounts = v.mounts;
  return (
    Array.isArray(mounts) &&
    mounts.every((m) => hasKeys(m, MOUNT_KEYS) && typeof m.source === 'string' && typeof m.target === 'string' && (m.kind === 'directory' || m.kind === 'file') && isCount(m.entries))
  );
}
