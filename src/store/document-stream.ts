// document-stream.ts: a canonical manifest.json read from a file in windows into packed tables, never held whole, and proven as decodeDocumentBytes proves it.
import { createHash } from 'node:crypto';

import { EntryTable } from '../base/entry-table.js';
import { NotCanonical, encodedHash, readEntryAt, skeletonOf, snapshotOf } from './document-parse.js';
import type { StoredSnapshot } from './document.js';

/** Bytes read at a time (a window grows only for a single entry or text between lists larger than it). */
export const WINDOW_BYTES = 1024 * 1024;

const latin1 = (text: string): Buffer => Buffer.from(text, 'latin1');
// The marks cutDocument cuts at. Each holds a quote, which a canonical string never holds unescaped, so none occurs inside one.
const ENTRIES_OPEN = latin1(',"entries":[');
const MOUNTS_OPEN = latin1(',"mounts":[');
const MOUNT_OPEN = latin1('{"entries":[');
/** Between two entries of a list. */
const SEP = latin1('},{"kind":"');
/** After the last entry of a list: the copy roots' (before exclude, or the manifest digest when there is none), or a mount's. */
const ENTRIES_CLOSES = [latin1('}],"exclude":['), latin1('}],"manifest_digest":"')];
const MOUNT_CLOSES = [latin1('}],"kind":"')];

/** Reads up to length bytes of the document at position into buffer at offset; returns how many (0 at its end). */
export type ReadAt = (buffer: Buffer, offset: number, length: number, position: number) => number;

/** What a reader of the document's lists is told, in document order; offsets are the document's. */
export interface ListVisitor {
  /** List `index` starts: its `[` is at `open`. */
  list(index: number, open: number): void;
  /** An entry of the current list ends (after its `}`) at `end`; its path's JSON string (quotes included) is buf[pathFrom, pathTo). */
  entry(buf: Buffer, pathFrom: number, pathTo: number, end: number): void;
  /** The current list ends: its `]` is at `last`. */
  end(last: number): void;
}

/**
 * A document read in order through a sliding window: buf[0, len) holds the document's
 * bytes from `base`; bytes before `keep` may be dropped when more are read. Every byte is
 * hashed as it is first read.
 */
class Window {
  buf: Buffer;
  view: Buffer;
  base = 0;
  /** The scan's position, and the first byte still needed, both in buf. */
  pos = 0;
  keep = 0;
  readonly hash = createHash('sha256');

  constructor(
    readonly readAt: ReadAt,
    readonly size: number,
    windowBytes: number,
  ) {
    this.buf = Buffer.allocUnsafe(Math.max(1, Math.min(windowBytes, size)));
    this.view = this.buf.subarray(0, 0);
  }

  get len(): number {
    return this.view.length;
  }

  /** Reads more of the document (dropping the bytes before keep); false at its end. */
  more(): boolean {
    const len = this.len;
    if (this.base + len >= this.size) return false;
    if (this.keep > 0) {
      this.buf.copyWithin(0, this.keep, len);
      this.base += this.keep;
      this.pos -= this.keep;
      this.view = this.buf.subarray(0, len - this.keep);
      this.keep = 0;
    }
    if (this.len === this.buf.length) {
      const bigger = Buffer.allocUnsafe(this.buf.length * 2);
      this.buf.copy(bigger, 0, 0, this.len);
      this.buf = bigger;
    }
    const at = this.len;
    const n = this.readAt(this.buf, at, Math.min(this.buf.length - at, this.size - this.base - at), this.base + at);
    // Shorter than its size: the file changed under the read.
    if (n <= 0) throw new NotCanonical();
    this.hash.update(this.buf.subarray(at, at + n));
    this.view = this.buf.subarray(0, at + n);
    return true;
  }

  /** Where mark next occurs at or after pos (in buf), reading more as needed; -1 when the document has no more of it. */
  find(mark: Buffer): number {
    for (let from = this.pos; ; ) {
      const at = this.view.indexOf(mark, from);
      if (at >= 0) return at;
      // A mark may straddle the window's end: search again from where it could start.
      const searched = this.len - this.pos;
      if (!this.more()) return -1;
      from = this.pos + Math.max(0, searched - mark.length + 1);
    }
  }

  /** The byte at pos, reading more as needed; -1 at the document's end. */
  byte(): number {
    while (this.pos >= this.len) if (!this.more()) return -1;
    return this.view[this.pos]!;
  }

  text(from: number, to: number): string {
    return this.view.toString('latin1', from, to);
  }
}

const SHA256_KEY = latin1(',"sha256":"');

/** Reads list `index` (pos at its `[`) through its `]` into a table: each entry also to the visitor. */
function readList(w: Window, index: number, closes: readonly Buffer[], visit: ListVisitor | undefined): EntryTable {
  const table = new EntryTable();
  visit?.list(index, w.base + w.pos);
  w.pos++;
  w.keep = w.pos;
  if (w.byte() === 0x5d) {
    visit?.end(w.base + w.pos);
    w.pos++;
    return table;
  }
  // Where the list's close is (in the document), once the window has reached it; none is before noClose.
  let close = -1;
  let noClose = w.base + w.pos;
  const findClose = (): void => {
    if (close >= 0) return;
    close = firstOf(w, closes, Math.max(w.pos, noClose - w.base - CLOSE_BYTES));
    if (close < 0) noClose = w.base + w.len;
  };
  for (;;) {
    w.keep = w.pos;
    let sep = w.view.indexOf(SEP, w.pos);
    findClose();
    while (sep < 0 && close < 0) {
      if (!w.more()) throw new NotCanonical();
      sep = w.view.indexOf(SEP, w.pos);
      findClose();
    }
    // The entry ends at its `}`: before the next entry, or before the list's close.
    const last = close >= 0 && (sep < 0 || w.base + sep > close);
    const end = (last ? close - w.base : sep) + 1;
    const pathFrom = readEntryAt(w.view, w.pos, end, table);
    visit?.entry(w.view, pathFrom, w.view.indexOf(SHA256_KEY, pathFrom), w.base + end);
    w.pos = end;
    if (last) {
      // The `]` after the last entry's `}`.
      visit?.end(w.base + w.pos);
      w.pos++;
      return table;
    }
    // The `,` before the next entry.
    w.pos++;
  }
}

/** The longest close mark: a search resumed after reading more starts this far before where the last one ended. */
const CLOSE_BYTES = Math.max(...[...ENTRIES_CLOSES, ...MOUNT_CLOSES].map((m) => m.length));

/** The first of the marks at or after `from` in what the window holds, in the document; -1 when none is there yet. */
function firstOf(w: Window, marks: readonly Buffer[], from: number): number {
  let first = -1;
  for (const m of marks) {
    const at = w.view.indexOf(m, from);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  return first < 0 ? -1 : w.base + first;
}

/** Where a list opened by `open` starts (its `[`), pos moved there; -1 when the document has no more of it. */
function nextList(w: Window, open: Buffer): number {
  const at = w.find(open);
  if (at < 0) return -1;
  w.pos = at + open.length - 1;
  return w.pos;
}

/** A document read in windows: its tables, the text around its lists, and the sha256 and length of its bytes. */
export interface StreamedDocument {
  /** The text around the lists (cutDocument's parts). */
  parts: string[];
  skeleton: Record<string, unknown>;
  tables: EntryTable[];
  sha256: string;
  length: number;
}

/**
 * Reads a document of `size` bytes through readAt, in windows, into one table a list (the
 * copy roots', then each mount's), cut where cutDocument cuts it; each entry also to
 * `visit`. Undefined when it is not what encodeDocumentPieces writes in that shape.
 */
export function streamDocument(readAt: ReadAt, size: number, visit?: ListVisitor, windowBytes = WINDOW_BYTES): StreamedDocument | undefined {
  const w = new Window(readAt, size, windowBytes);
  const parts: string[] = [];
  const tables: EntryTable[] = [];
  try {
    /** The text from keep to pos, then the list at pos. */
    const list = (closes: readonly Buffer[]): void => {
      parts.push(w.text(w.keep, w.pos));
      tables.push(readList(w, tables.length, closes, visit));
      w.keep = w.pos;
    };
    if (nextList(w, ENTRIES_OPEN) < 0) return undefined;
    list(ENTRIES_CLOSES);
    const mounts = w.find(MOUNTS_OPEN);
    if (mounts < 0) return undefined;
    w.pos = mounts;
    // Each mount's list, to the last (the text after it, revision, source and total, holds no `{"entries":[`).
    for (let at = w.find(MOUNT_OPEN); at >= 0; at = w.find(MOUNT_OPEN)) {
      w.pos = at + MOUNT_OPEN.length - 1;
      list(MOUNT_CLOSES);
    }
    while (w.more());
    parts.push(w.text(w.keep, w.len));
  } catch (err) {
    if (err instanceof NotCanonical) return undefined;
    throw err;
  }
  const skeleton = skeletonOf(parts);
  if (skeleton === undefined) return undefined;
  return { parts, skeleton, tables, sha256: w.hash.digest('hex'), length: w.base + w.len };
}

/**
 * decodeDocumentBytes of a document read in windows (never held whole): its lists into
 * tables, its digests recomputed from them, and taken only when the snapshot encodes to
 * bytes of the same sha256 and length as those read. Undefined for any other document
 * (decodeDocumentBytes of its bytes then says what it is).
 */
export function readDocumentStream(
  readAt: ReadAt,
  size: number,
  expectDigest: string | undefined,
  visit?: ListVisitor,
  windowBytes = WINDOW_BYTES,
): { data: StoredSnapshot; parts: string[]; sha256: string } | undefined {
  const read = streamDocument(readAt, size, visit, windowBytes);
  if (read === undefined) return undefined;
  const data = snapshotOf(read.skeleton, read.tables, expectDigest);
  if (data === undefined) return undefined;
  const encoded = encodedHash(data);
  return encoded.sha256 === read.sha256 && encoded.length === read.length ? { data, parts: read.parts, sha256: read.sha256 } : undefined;
}
