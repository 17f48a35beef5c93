// digest-args.ts: manifestDigest and mountDigests as the package exports them: the caller's entry lists checked first, Node's TypeError naming the first that is wrong.
import { invalidArgType, invalidArgValue } from './arg-errors.js';
import { EntryTable } from './entry-table.js';
import type { Entries, ManifestEntry } from './manifest.js';
import { manifestDigest, mountDigests, type MountDigestInput } from './manifest-stream.js';

const KINDS = new Set(['file', 'directory', 'symlink']);

function isEntry(e: unknown): e is ManifestEntry {
  if (e === null || typeof e !== 'object') return false;
  const o = e as Record<string, unknown>;
  return (
    typeof o.path === 'string' &&
    KINDS.has(o.kind as string) &&
    Number.isSafeInteger(o.size) &&
    typeof o.sha256 === 'string' &&
    Number.isSafeInteger(o.mode) &&
    typeof o.link_target === 'string' &&
    (o.mtime_ns === undefined || typeof o.mtime_ns === 'string')
  );
}

function checkEntries(name: string, entries: unknown): Entries {
  if (entries instanceof EntryTable) return entries;
  if (!Array.isArray(entries)) throw invalidArgType(name, 'Array', entries);
  entries.forEach((e, i) => {
    if (!isEntry(e)) throw invalidArgValue(`${name}[${i}]`, e, 'must be a manifest entry ({ kind, path, size, sha256, mode, link_target })');
  });
  return entries as ManifestEntry[];
}

/** sha256 of the canonical JSON list of entries (already sorted), as the seed computes it. */
export function checkedManifestDigest(entries: readonly ManifestEntry[]): string {
  return manifestDigest(checkEntries('entries', entries));
}

/** The seed's dependency content and manifest digests over captured mounts ({ source, target, entries }). */
export function checkedMountDigests(mounts: readonly MountDigestInput[]): { contentDigest: string; manifestDigest: string } {
  if (!Array.isArray(mounts)) throw invalidArgType('mounts', 'Array', mounts);
  mounts.forEach((m: unknown, i) => {
    if (m === null || typeof m !== 'object') throw invalidArgType(`mounts[${i}]`, 'object', m);
    const o = m as Record<string, unknown>;
    if (typeof o.source !== 'string') throw invalidArgType(`mounts[${i}].source`, 'string', o.source);
    if (typeof o.target !== 'string') throw invalidArgType(`mounts[${i}].target`, 'string', o.target);
    checkEntries(`mounts[${i}].entries`, o.entries);
  });
  return mountDigests(mounts);
}
