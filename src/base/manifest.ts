// manifest.ts: manifest entries, Python-compatible canonical JSON, and the seed's digests.
import { createHash } from 'node:crypto';

import { compareUtf8 } from './paths.js';

export type EntryKind = 'directory' | 'file' | 'symlink';

/** One manifest entry; field names are the seed's, so digests match byte for byte. */
export interface ManifestEntry {
  readonly kind: EntryKind;
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  readonly mode: number;
  readonly link_target: string;
  /**
   * The modification time in nanoseconds since the epoch, as a decimal string: only in
   * copy roots captured with keepTimes (absent otherwise, so the seed's manifests and
   * digests are unchanged).
   */
  readonly mtime_ns?: string;
}

export type Json = null | boolean | number | bigint | string | readonly Json[] | { readonly [key: string]: Json };

/** Characters json.dumps writes as themselves: printable ASCII but the quote and the backslash. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A string as json.dumps writes it (quoted, ASCII only). */
export function jsonString(s: string): string {
  if (PLAIN.test(s)) return '"' + s + '"';
  let out = '"';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c <= 0x7e && c !== 0x22 && c !== 0x5c) continue;
    out += s.slice(start, i);
    start = i + 1;
    switch (c) {
      case 0x22: out += '\\"'; break;
      case 0x5c: out += '\\\\'; break;
      case 0x08: out += '\\b'; break;
      case 0x0c: out += '\\f'; break;
      case 0x0a: out += '\\n'; break;
      case 0x0d: out += '\\r'; break;
      case 0x09: out += '\\t'; break;
      default: out += '\\u' + c.toString(16).padStart(4, '0');
    }
  }
  return out + s.slice(start) + '"';
}

/** A float as Python's repr writes it (integral numbers are written as ints). */
function formatNumber(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (n === Infinity) return 'Infinity';
  if (n === -Infinity) return '-Infinity';
  if (Number.isSafeInteger(n)) return String(n);
  if (Number.isInteger(n)) return BigInt(n).toString();
  const [mantissa, expText] = n.toExponential().split('e') as [string, string];
  const exp = Number(expText);
  if (exp >= -4 && exp < 16) {
    const digits = mantissa.replace('-', '').replace('.', '');
    const sign = n < 0 ? '-' : '';
    if (exp < 0) return `${sign}0.${'0'.repeat(-exp - 1)}${digits}`;
    const whole = digits.padEnd(exp + 1, '0');
    const frac = digits.slice(exp + 1);
    return `${sign}${whole.slice(0, exp + 1)}.${frac === '' ? '0' : frac}`;
  }
  return `${mantissa}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
}

/**
 * Python's `json.dumps(v, sort_keys=True, separators=(",", ":"))` byte for byte:
 * sorted keys, no spaces, ASCII only with lowercase \uXXXX escapes (surrogate pairs for astral).
 */
export function canonicalJson(value: Json): string {
  return encodeValue(value);
}

/** Text that is already canonical JSON, spliced in verbatim (an entry list encoded once). */
export class RawJson {
  constructor(readonly text: string) {}
}

/** canonicalJson of a value that may hold RawJson pieces. */
export function encodeValue(value: Json | RawJson): string {
  if (value === null) return 'null';
  if (value instanceof RawJson) return value.text;
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      return formatNumber(value);
    case 'bigint':
      return value.toString();
    case 'string':
      return jsonString(value);
    case 'object': {
      if (Array.isArray(value)) return '[' + (value as readonly Json[]).map(encodeValue).join(',') + ']';
      const obj = value as { readonly [key: string]: Json | RawJson };
      const keys = Object.keys(obj).sort(compareUtf8);
      const parts: string[] = [];
      for (const key of keys) {
        const v = obj[key];
        if (v === undefined) throw new TypeError(`canonicalJson: undefined value at key ${JSON.stringify(key)}`);
        parts.push(jsonString(key) + ':' + encodeValue(v));
      }
      return '{' + parts.join(',') + '}';
    }
    default:
      throw new TypeError(`canonicalJson: unsupported value of type ${typeof value}`);
  }
}

export function sha256Hex(text: string | Uint8Array): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The OCI digest of bytes: `sha256:` and their sha256 in hex (a blob's, a piece's, a manifest's). */
export function sha256Digest(bytes: Uint8Array): string {
  return `sha256:${sha256Hex(bytes)}`;
}

const numberText = (n: number): string => (Number.isSafeInteger(n) ? String(n) : formatNumber(n));

/** One entry's canonical JSON, its keys in sorted order, written directly. */
export function entryText(e: ManifestEntry): string {
  return (
    `{"kind":${jsonString(e.kind)},"link_target":${jsonString(e.link_target)},"mode":${numberText(e.mode)},` +
    (e.mtime_ns === undefined ? '' : `"mtime_ns":${jsonString(e.mtime_ns)},`) +
    `"path":${jsonString(e.path)},"sha256":${jsonString(e.sha256)},"size":${numberText(e.size)}}`
  );
}

/** Entries in manifest order: an array, or a packed table (base/entry-table.ts). */
export interface Entries extends Iterable<ManifestEntry> {
  readonly length: number;
}


export interface SnapshotDigestInput {
  readonly source: string;
  readonly revision: string;
  readonly declarations: readonly string[];
  readonly manifestDigest: string;
  readonly mountContentDigest: string;
  readonly mountManifestDigest: string;
  /** The capture's exclude patterns: folded in only when there are some, so a capture without them keeps the seed's digest. */
  readonly exclude?: readonly string[] | undefined;
}

/** The seed's snapshot digest, schema 3 (and the exclude patterns, when there are some). */
export function snapshotDigest(d: SnapshotDigestInput): string {
  return sha256Hex(
    canonicalJson({
      ...(d.exclude === undefined || d.exclude.length === 0 ? {} : { exclude: d.exclude }),
      declarations: d.declarations,
      dependency_content_digest: d.mountContentDigest,
      dependency_manifest_digest: d.mountManifestDigest,
      harness_identity: '',
      manifest_digest: d.manifestDigest,
      repo_identity: d.source,
      resolved_sha: d.revision,
      schema_version: 3,
    }),
  );
}
