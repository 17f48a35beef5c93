// digest-args.ts: the digest functions as the package exports them (manifestDigest, mountDigests, snapshotDigest, canonicalJson): the caller's input checked first, Node's TypeError naming the first part that is wrong.
import { checkOptions, invalidArgType, invalidArgValue } from './arg-errors.js';
import { readOnce } from './op.js';
import { EntryTable } from './entry-table.js';
import { canonicalJson, snapshotDigest, type Entries, type Json, type ManifestEntry, type SnapshotDigestInput } from './manifest.js';
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
  return manifestDigest(checkEntries('entries', readOnce(entries)));
}

/** The seed's dependency content and manifest digests over captured mounts ({ source, target, entries }). */
export function checkedMountDigests(given: readonly MountDigestInput[]): { contentDigest: string; manifestDigest: string } {
  if (!Array.isArray(given)) throw invalidArgType('mounts', 'Array', given);
  const mounts = readOnce(given) as MountDigestInput[];
  mounts.forEach((m: unknown, i) => {
    if (m === null || typeof m !== 'object') throw invalidArgType(`mounts[${i}]`, 'object', m);
    const o = m as Record<string, unknown>;
    if (typeof o.source !== 'string') throw invalidArgType(`mounts[${i}].source`, 'string', o.source);
    if (typeof o.target !== 'string') throw invalidArgType(`mounts[${i}].target`, 'string', o.target);
    checkEntries(`mounts[${i}].entries`, o.entries);
  });
  return mountDigests(mounts);
}

const DIGEST_KEYS = ['source', 'revision', 'declarations', 'manifestDigest', 'mountContentDigest', 'mountManifestDigest', 'exclude'] as const;

function checkStrings(name: string, value: unknown): void {
  if (!Array.isArray(value)) throw invalidArgType(name, 'Array', value);
  value.forEach((v: unknown, i) => {
    if (typeof v !== 'string') throw invalidArgType(`${name}[${i}]`, 'string', v);
  });
}

/** The snapshot digest of a snapshot's parts ({ source, revision, declarations, manifestDigest, mountContentDigest, mountManifestDigest, exclude? }): each a string (the lists of strings), no other key. */
export function checkedSnapshotDigest(given: SnapshotDigestInput): string {
  if (given === null || typeof given !== 'object' || Array.isArray(given)) throw invalidArgType('input', 'object', given);
  const d = checkOptions('input', readOnce(given) as SnapshotDigestInput, { op: 'snapshotDigest', keys: DIGEST_KEYS });
  for (const key of ['source', 'revision', 'manifestDigest', 'mountContentDigest', 'mountManifestDigest'] as const) {
    if (typeof d[key] !== 'string') throw invalidArgType(`input.${key}`, 'string', d[key]);
  }
  // What no capture could give is no snapshot's digest: a source that is not an absolute path, a digest that is not sha256 hex.
  if (!d.source.startsWith('/')) throw invalidArgValue('input.source', d.source, 'must be an absolute path');
  for (const key of ['manifestDigest', 'mountContentDigest', 'mountManifestDigest'] as const) {
    if (!/^[0-9a-f]{64}$/.test(d[key])) throw invalidArgValue(`input.${key}`, d[key], 'must be 64 lower-case hex digits (a sha256)');
  }
  checkStrings('input.declarations', d.declarations);
  if (d.exclude !== undefined) checkStrings('input.exclude', d.exclude);
  return snapshotDigest(d);
}

/**
 * A copy of a JSON value the caller passed, each property and item read once, refusing what
 * JSON cannot hold as canonicalJson writes it: undefined, a function, a symbol, an object
 * that is not a plain one or an array (a Date, a Map), naming where.
 */
function copyJson(name: string, value: unknown, depth: number): Json {
  if (value === null || typeof value === 'boolean' || typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value as Json;
  if (typeof value !== 'object') throw invalidArgType(name, ['null', 'boolean', 'number', 'bigint', 'string', 'Array', 'object'], value);
  if (depth > 1000) throw invalidArgValue(name, value, 'is nested more than 1000 levels deep');
  if (Array.isArray(value)) {
    const n = value.length;
    const out: Json[] = [];
    for (let i = 0; i < n; i++) out.push(copyJson(`${name}[${i}]`, value[i], depth + 1));
    return out;
  }
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) throw invalidArgType(name, ['Array', 'plain object'], value);
  const out: Record<string, Json> = {};
  for (const key of Object.keys(value)) out[key] = copyJson(`${name}.${key}`, (value as Record<string, unknown>)[key], depth + 1);
  return out;
}

/** canonicalJson of a JSON value the caller passed, checked on a copy read once. */
export function checkedCanonicalJson(value: Json): string {
  return canonicalJson(copyJson('value', value, 0));
}
