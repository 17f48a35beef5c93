// entry-json.ts: entry lists as canonical JSON in chunks; a packed table's written as bytes straight from its arrays.
import { EntryTable, NO_MTIME, type EntryArrays } from './entry-table.js';
import { entryText, jsonString, type ManifestEntry } from './manifest.js';

/** A piece of canonical JSON text (ASCII: a Buffer holds one byte per character). */
export type Chunk = string | Buffer;

/** Bytes gathered per chunk. */
const CHUNK_BYTES = 1 << 16;
/** The most one entry takes besides its path and link target (keys, kind, 64 hex digits, two numbers, a recorded mtime). */
const ENTRY_FIXED = 256;
const bytesOf = (text: string): Uint8Array => new Uint8Array(Buffer.from(text, 'latin1'));
/** Each kind's entry up to its link target: `{"kind":"file","link_target":`. */
const KIND_HEAD = ['directory', 'file', 'symlink'].map((k) => bytesOf(`{"kind":"${k}","link_target":`));
const EMPTY_STRING = bytesOf('""');
const MODE_KEY = bytesOf(',"mode":');
const MTIME_KEY = bytesOf(',"mtime_ns":"');
const PATH_KEY = bytesOf(',"path":');
const SHA256_KEY = bytesOf(',"sha256":"');
const SIZE_KEY = bytesOf('","size":');
const HEX = bytesOf('0123456789abcdef');

/** The canonical JSON list of entries (already sorted), handed to sink in chunks: never whole in memory. */
export function encodeEntries(entries: Iterable<ManifestEntry>, sink: (chunk: Chunk) => void): void {
  if (entries instanceof EntryTable) {
    encodeTable(entries.arrays(), sink);
    return;
  }
  let out = '[';
  let first = true;
  for (const e of entries) {
    out += (first ? '' : ',') + entryText(e);
    first = false;
    if (out.length >= CHUNK_BYTES) {
      sink(out);
      out = '';
    }
  }
  sink(out + ']');
}

/** Writes text (ASCII) at `at`; returns the position after it. */
function put(out: Buffer, at: number, text: string | Buffer): number {
  return typeof text === 'string' ? at + out.write(text, at, 'latin1') : at + text.copy(out, at);
}

/** Copies a few constant bytes at `at` (natively: a loop costs more until the JIT has compiled it, and a capture of a few thousand files ends before then); returns the position after them. */
function putBytes(out: Buffer, at: number, bytes: Uint8Array): number {
  out.set(bytes, at);
  return at + bytes.length;
}

/** A non-negative integer's digits at `at`; returns the position after them. */
function putInteger(out: Buffer, at: number, n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) return put(out, at, String(n));
  let digits = 1;
  for (let p = 10; p <= n; p *= 10) digits++;
  for (let i = digits - 1; i >= 0; i--, n = Math.floor(n / 10)) out[at + i] = 0x30 + (n % 10);
  return at + digits;
}

/** A byte a JSON string cannot hold as it is (a control, a quote, a backslash, or not ASCII). */
const NEEDS_ESCAPE = /[^\x20\x21\x23-\x5b\x5d-\x7e]/;

/**
 * Path bytes scanned at once by plainPaths: a string of each window, never of the whole
 * table (which may hold more than a string can), small enough for the young generation
 * (a larger one lives in large-object space until a full collection).
 */
const SCAN_BYTES = 1 << 16;

/** Whether no path of the table needs an escape: native scans of its path bytes (as they were appended), not a loop per path. */
function plainPaths(a: EntryArrays): boolean {
  const used = a.count === 0 ? 0 : a.ends[a.count - 1]!;
  for (let from = 0; from < used; from += SCAN_BYTES) {
    if (NEEDS_ESCAPE.test(a.paths.toString('latin1', from, Math.min(used, from + SCAN_BYTES)))) return false;
  }
  return true;
}

/** A path's JSON string: its bytes copied when they need no escape (`plain`: none in the table does), else decoded and escaped. */
function putPath(out: Buffer, at: number, a: EntryArrays, i: number, plain: boolean): number {
  const start = i === 0 ? 0 : a.ends[i - 1]!;
  const end = a.ends[i]!;
  if (!plain && NEEDS_ESCAPE.test(a.paths.toString('latin1', start, end))) return put(out, at, jsonString(a.paths.toString('utf8', start, end)));
  out[at] = 0x22;
  a.paths.copy(out, at + 1, start, end);
  out[at + 1 + end - start] = 0x22;
  return at + 2 + end - start;
}

/** Entry i's canonical JSON at `at` (keys sorted); returns the position after it. */
function putEntry(out: Buffer, at: number, a: EntryArrays, i: number, plain: boolean): number {
  const kind = a.kinds[i]!;
  at = putBytes(out, at, KIND_HEAD[kind]!);
  const link = a.links.size === 0 ? undefined : a.links.get(i);
  at = link === undefined ? putBytes(out, at, EMPTY_STRING) : put(out, at, jsonString(link));
  at = putBytes(out, at, MODE_KEY);
  at = putInteger(out, at, a.modes[i]!);
  const mtime = a.mtimes?.[i];
  if (mtime !== undefined && mtime !== NO_MTIME) {
    at = putBytes(out, at, MTIME_KEY);
    at = put(out, at, mtime.toString());
    out[at++] = 0x22;
  }
  at = putBytes(out, at, PATH_KEY);
  at = putPath(out, at, a, i, plain);
  at = putBytes(out, at, SHA256_KEY);
  if (kind !== 0) {
    // A loop, not toString('hex'): a string per entry is garbage enough to grow the heap of a 200k-entry push by ~10 MB.
    for (let k = i * 32; k < i * 32 + 32; k++) {
      out[at++] = HEX[a.digests[k]! >> 4]!;
      out[at++] = HEX[a.digests[k]! & 15]!;
    }
  }
  at = putBytes(out, at, SIZE_KEY);
  at = putInteger(out, at, a.sizes[i]!);
  out[at] = 0x7d;
  return at + 1;
}

/** A table's entries in manifest order, as canonical JSON bytes in chunks (each consumed before the next is written). */
function encodeTable(a: EntryArrays, sink: (chunk: Chunk) => void): void {
  let out = Buffer.allocUnsafe(CHUNK_BYTES);
  let used = put(out, 0, '[');
  const plain = plainPaths(a);
  for (let n = 0; n < a.count; n++) {
    const i = a.order === undefined ? n : a.order[n]!;
    const pathBytes = a.ends[i]! - (i === 0 ? 0 : a.ends[i - 1]!);
    // Escaped, a byte takes six characters at most; a link target a UTF-16 unit six.
    const need = ENTRY_FIXED + 6 * pathBytes + 6 * (a.links.get(i)?.length ?? 0);
    if (used + need > out.length) {
      sink(out.subarray(0, used));
      used = 0;
      if (need > out.length) out = Buffer.allocUnsafe(need);
    }
    if (n > 0) out[used++] = 0x2c;
    used = putEntry(out, used, a, i, plain);
  }
  if (used === out.length) {
    sink(out.subarray(0, used));
    used = 0;
  }
  out[used++] = 0x5d;
  sink(out.subarray(0, used));
}
