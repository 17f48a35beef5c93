// document-parse.ts: a canonical manifest.json read from its bytes into packed tables (no object or string per entry), taken only when it re-encodes to exactly those bytes.
import { createHash } from 'node:crypto';

import { SealError } from '../base/errors.js';
import { EntryTable } from '../base/entry-table.js';
import type { EntryKind } from '../base/manifest.js';
import { eachChunk } from '../base/manifest-stream.js';
import { parseMtime } from '../base/times.js';
import type { MountData } from '../capture/mounts.js';
import { cutDocument } from './document-cut.js';
import { decodeDocument, encodeDocumentPieces, finishDecode, mountOf, type StoredSnapshot } from './document.js';

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');
const KIND_HEADS: readonly [EntryKind, Buffer][] = (['directory', 'file', 'symlink'] as const).map((k) => [k, latin1(`{"kind":"${k}","link_target":`)]);
const MODE_KEY = latin1(',"mode":');
const MTIME_KEY = latin1(',"mtime_ns":"');
const PATH_KEY = latin1(',"path":');
const SHA256_KEY = latin1(',"sha256":"');
const SIZE_KEY = latin1('","size":');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Not what encodeTable writes: the caller falls back to JSON.parse, which gives the document's own error. */
export class NotCanonical extends Error {}

/** A cursor over one entry list's bytes, each step refusing (NotCanonical) what encodeTable would not have written. */
class ListReader {
  at: number;

  constructor(
    readonly b: Buffer,
    from: number,
    readonly end: number,
  ) {
    this.at = from;
  }

  /** Steps over bytes, which must be next. */
  expect(bytes: Uint8Array): void {
    const { b } = this;
    if (this.at + bytes.length > this.end) throw new NotCanonical();
    for (let k = 0; k < bytes.length; k++) if (b[this.at + k] !== bytes[k]) throw new NotCanonical();
    this.at += bytes.length;
  }

  /** Steps over byte c if it is next. */
  take(c: number): boolean {
    if (this.at < this.end && this.b[this.at] === c) {
      this.at++;
      return true;
    }
    return false;
  }

  /**
   * A JSON string: its bytes [from, to) when they are the UTF-8 of its value (no escape, so
   * printable ASCII), else its decoded value. Canonical strings hold printable ASCII only.
   */
  string(): { from: number; to: number; value: string | undefined } {
    const { b, end } = this;
    if (b[this.at] !== QUOTE) throw new NotCanonical();
    const from = ++this.at;
    let escaped = false;
    for (; this.at < end; this.at++) {
      const c = b[this.at]!;
      if (c === QUOTE) break;
      if (c < 0x20 || c > 0x7e) throw new NotCanonical();
      if (c === BACKSLASH) {
        escaped = true;
        this.at++;
      }
    }
    if (this.at >= end) throw new NotCanonical();
    const to = this.at++;
    if (!escaped) return { from, to, value: undefined };
    let value: unknown;
    try {
      value = JSON.parse(b.toString('latin1', from - 1, to + 1));
    } catch {
      throw new NotCanonical();
    }
    return { from, to, value: value as string };
  }

  /** A non-negative integer as canonical JSON writes it (no sign, no leading zero), at most 2^53 - 1. */
  integer(): number {
    const { b, end } = this;
    const from = this.at;
    let n = 0;
    for (; this.at < end; this.at++) {
      const c = b[this.at]!;
      if (c < 0x30 || c > 0x39) break;
      n = n * 10 + (c - 0x30);
    }
    const digits = this.at - from;
    if (digits === 0 || digits > 16 || (digits > 1 && b[from] === 0x30) || !Number.isSafeInteger(n)) throw new NotCanonical();
    return n;
  }

  /** Where the 64 digits of a sha256 start (stepped over; the table proves them hex). */
  digestAt(): number {
    if (this.at + 64 > this.end) throw new NotCanonical();
    this.at += 64;
    return this.at - 64;
  }

  /** `{"kind":"…","link_target":`: the kind. */
  kind(): EntryKind {
    for (const [kind, head] of KIND_HEADS) {
      if (this.at + head.length <= this.end && this.b.compare(head, 0, head.length, this.at, this.at + head.length) === 0) {
        this.at += head.length;
        return kind;
      }
    }
    throw new NotCanonical();
  }
}

/** One entry of a list into the table; returns where its path's JSON string starts (its opening quote). */
function readEntry(r: ListReader, table: EntryTable): number {
  const kind = r.kind();
  const link = r.string();
  r.expect(MODE_KEY);
  const mode = r.integer();
  let mtime: bigint | undefined;
  if (r.b[r.at] === MTIME_KEY[0] && r.b[r.at + 2] === MTIME_KEY[2]) {
    r.expect(MTIME_KEY);
    const from = r.at;
    while (r.at < r.end && r.b[r.at] !== QUOTE) r.at++;
    mtime = parseMtime(r.b.toString('latin1', from, r.at));
    if (mtime === undefined || !r.take(QUOTE)) throw new NotCanonical();
  }
  r.expect(PATH_KEY);
  const path = r.string();
  r.expect(SHA256_KEY);
  const hexAt = kind === 'directory' ? -1 : r.digestAt();
  r.expect(SIZE_KEY);
  const size = r.integer();
  if (!r.take(0x7d)) throw new NotCanonical();
  const i = path.value === undefined ? table.appendRead(kind, r.b, path.from, path.to, hexAt, size, mode, mtime) : appendDecoded(table, kind, Buffer.from(path.value, 'utf8'), r.b, hexAt, size, mode, mtime);
  if (i === false) throw new NotCanonical();
  const target = link.value ?? r.b.toString('latin1', link.from, link.to);
  if (target !== '') table.setLink(i, target);
  return path.from - 1;
}

/**
 * The entry at b[from, to) (from its `{` to its `}`, inclusive) into the table, refused
 * (NotCanonical) unless it is exactly one entry as encodeTable writes it. Returns where its
 * path's JSON string starts (its opening quote; the string ends before `,"sha256":"`).
 */
export function readEntryAt(b: Buffer, from: number, to: number, table: EntryTable): number {
  const r = new ListReader(b, from, to);
  const path = readEntry(r, table);
  if (r.at !== to) throw new NotCanonical();
  return path;
}

/** appendRead of an entry whose path had escapes: its sha256 copied next to its decoded bytes, so both come from one buffer. */
function appendDecoded(table: EntryTable, kind: EntryKind, path: Buffer, src: Buffer, hexAt: number, size: number, mode: number, mtime: bigint | undefined): number | false {
  if (hexAt < 0) return table.appendRead(kind, path, 0, path.length, -1, size, mode, mtime);
  const both = Buffer.concat([path, src.subarray(hexAt, hexAt + 64)]);
  return table.appendRead(kind, both, 0, path.length, path.length, size, mode, mtime);
}

/** An entry list's bytes (`[…]`) as a table in the order they hold. */
function readList(list: Buffer): EntryTable {
  const table = new EntryTable();
  const r = new ListReader(list, 0, list.length);
  if (!r.take(0x5b)) throw new NotCanonical();
  if (r.take(0x5d)) return table;
  for (;;) {
    readEntry(r, table);
    if (r.take(0x2c)) continue;
    if (r.take(0x5d) && r.at === r.end) return table;
    throw new NotCanonical();
  }
}

/** Whether the chunks `pieces` encode to are exactly doc's bytes. */
function encodesTo(doc: Buffer, snapshot: StoredSnapshot): boolean {
  let at = 0;
  let same = true;
  eachChunk(encodeDocumentPieces(snapshot), (chunk) => {
    if (!same) return;
    const bytes = typeof chunk === 'string' ? latin1(chunk) : chunk;
    same = at + bytes.length <= doc.length && doc.compare(bytes, 0, bytes.length, at, at + bytes.length) === 0;
    at += bytes.length;
  });
  return same && at === doc.length;
}

/** The fields around a document's lists (the text around them, each list as `[]`); undefined when they are not an object with one mount a list after the first. */
export function skeletonOf(parts: readonly string[]): Record<string, unknown> | undefined {
  let skeleton: unknown;
  try {
    skeleton = JSON.parse(parts.join('[]'));
  } catch {
    return undefined;
  }
  if (skeleton === null || typeof skeleton !== 'object') return undefined;
  const s = skeleton as Record<string, unknown>;
  return Array.isArray(s.mounts) && s.mounts.length === parts.length - 2 ? s : undefined;
}

/** The sha256 (hex) and length of the bytes a snapshot encodes to: a document read through a hash is exactly them when both match. */
export function encodedHash(snapshot: StoredSnapshot): { sha256: string; length: number } {
  const hash = createHash('sha256');
  let length = 0;
  eachChunk(encodeDocumentPieces(snapshot), (chunk) => {
    const bytes = typeof chunk === 'string' ? latin1(chunk) : chunk;
    hash.update(bytes);
    length += bytes.length;
  });
  return { sha256: hash.digest('hex'), length };
}

/** A canonical document's fields around its lists, and its lists as tables; undefined when it is not what encodeDocumentPieces writes. */
function readCanonical(doc: Buffer): { skeleton: Record<string, unknown>; tables: EntryTable[]; lists: Buffer[] } | undefined {
  try {
    const { parts, lists } = cutDocument(doc, () => new NotCanonical() as unknown as SealError);
    const skeleton = skeletonOf(parts);
    if (skeleton === undefined) return undefined;
    return { skeleton, tables: lists.map(readList), lists };
  } catch (err) {
    if (err instanceof NotCanonical) return undefined;
    throw err;
  }
}

/**
 * The snapshot a canonical document's skeleton and tables make, its digests proven as
 * decodeDocument proves them (from the lists' bytes when given, else from the tables);
 * undefined for anything that fails (decodeDocument of the bytes says what).
 */
export function snapshotOf(skeleton: Record<string, unknown>, tables: readonly EntryTable[], expectDigest: string | undefined, lists?: readonly Buffer[]): StoredSnapshot | undefined {
  try {
    const mounts = (skeleton.mounts as Record<string, unknown>[]).map((m, i): MountData => mountOf(m, tables[i + 1]!));
    return finishDecode(skeleton, tables[0]!, mounts, expectDigest, lists);
  } catch {
    return undefined;
  }
}

/**
 * decodeDocument of a manifest.json's bytes, its entry lists read straight into packed
 * tables: about 80 bytes and its path an entry, against several hundred as objects. Taken
 * only when the tables and fields encode back to exactly these bytes (so the snapshot is
 * the one JSON.parse would give); any other document is decoded by decodeDocument, which
 * gives the same snapshot or the same error as before.
 */
export function decodeDocumentBytes(doc: Buffer, expectDigest?: string): StoredSnapshot {
  return readDocumentBytes(doc, expectDigest).data;
}

/** decodeDocumentBytes, and whether the document is proven canonical (false: decoded by JSON.parse, canonical or not). */
export function readDocumentBytes(doc: Buffer, expectDigest?: string): { data: StoredSnapshot; canonical: boolean } {
  const read = readCanonical(doc);
  if (read !== undefined) {
    // The digests from the lists' bytes as they stand, the rest proven as decodeDocument proves it; then the
    // snapshot must encode to exactly these bytes (its tables, and every digest the document claims).
    // Anything else: decodeDocument below says what is wrong, as it always has.
    const data = snapshotOf(read.skeleton, read.tables, expectDigest, read.lists);
    if (data !== undefined && encodesTo(doc, data)) return { data, canonical: true };
  }
  return { data: decodeDocument(doc.toString('utf8'), expectDigest), canonical: false };
}

