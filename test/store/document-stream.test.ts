// document-stream.test.ts: a manifest.json read in windows (push's read) gives the snapshot decodeDocumentBytes gives and the pieces cutPieces cuts, whatever the window, and nothing for a document it would not take whole.
import { chmodSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../dist/index.js';
import { CutCandidates, WINDOW_BYTES, cutPieces, decodeDocumentBytes, piecesOf, readDocumentBytes, readDocumentStream, readPushPiece, sha256Digest, sha256Hex, streamPushDocument } from '../../dist/internal.js';
import { sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, tempDir, writeTree } from '../helpers.js';
import { text, timed, valid, validWithLinks, type Doc, type Entry } from './documents.js';

checkNoFdLeaks();

// Empty files: the documents' totals count link targets only (documents.ts).
const file = (path: string, mode = 0): Entry => ({ kind: 'file', path, size: 0, sha256: sha256Hex(Buffer.alloc(0)), mode, link_target: '' });
const dir = (path: string): Entry => ({ kind: 'directory', path, size: 0, sha256: '', mode: 0, link_target: '' });
const byBytes = (x: Entry, y: Entry): number => Buffer.compare(Buffer.from(x.path), Buffer.from(y.path));

/** Reads of a document held in memory, as a file's pread would give them. */
const readerOf =
  (bytes: Buffer) =>
  (into: Buffer, offset: number, length: number, position: number): number =>
    bytes.copy(into, offset, position, Math.min(position + length, bytes.length));

/** The snapshot as plain data (its lists as arrays). */
function plain(d: { entries: Iterable<unknown>; mounts: { entries: Iterable<unknown> }[] }): unknown {
  return { ...d, entries: [...d.entries], mounts: d.mounts.map((m) => ({ ...m, entries: [...m.entries] })) };
}

/** The streamed read of bytes in windows of `window`: the snapshot, and the pieces the candidates it noted cut. */
function streamed(bytes: Buffer, digest: string | undefined, window: number): { data: unknown; pieces: unknown } | undefined {
  const cuts = new CutCandidates();
  const read = readDocumentStream(readerOf(bytes), bytes.length, digest, cuts, window);
  if (read === undefined) return undefined;
  const pieces = piecesOf(read.parts, cuts.lists, (start: number, end: number) => ({ digest: sha256Digest(bytes.subarray(start, end)), first: cutPieces(bytes.subarray(0)).pieces.find((p: { start: number }) => p.start === start)?.first ?? '' }));
  return { data: plain(read.data), pieces };
}

/** Several lists and mounts, every escape, kept times, empty lists: the documents the windows must cut the same. */
function documents(): [string, Doc][] {
  const odd = 'b\bf\fn\nr\rt\t"q\\s\u0001\u001f\u007f\u00e9\u2028\u{1f600}';
  const escapes = valid();
  escapes.entries = [dir('src'), file('src/a'), ...['a"q', 'b\\s', 'c\u0001d', 'caf\u00e9', 'e\u{1f600}', odd].map((n) => file(`src/${n}`, 0o755))].sort(byBytes);
  const empty = valid();
  empty.declarations = [];
  empty.entries = [];
  const mounts = valid();
  mounts.mounts.push({ source: 'more', target: 'vendor', kind: 'directory', totalBytes: 0, entries: [dir('payload'), file('payload/x', 0o644)] });
  mounts.mounts.push({ source: 'none', target: 'empty', kind: 'directory', totalBytes: 0, entries: [dir('payload')] });
  mounts.exclude = ['*.log', '.vite-temp/'];
  // Enough entries for several pieces (a piece holds at least 128 KiB of them).
  const big = valid();
  big.entries = [dir('src'), ...Array.from({ length: 3000 }, (_, i) => file(`src/d${i % 37}/file-${i}-${'p'.repeat(i % 50)}.txt`, i % 3 ? 0 : 0o755))];
  big.entries.push(...[...new Set(big.entries.slice(1).map((e) => e.path.split('/').slice(0, 2).join('/')))].map(dir));
  big.entries.sort(byBytes);
  big.mounts[0]!.entries.push(...Array.from({ length: 1500 }, (_, i) => file(`payload/m${i}.js`, 0o644)));
  big.mounts[0]!.entries.sort(byBytes);
  return [
    ['the template', valid()],
    ['links in the copy roots', validWithLinks()],
    ['times kept', timed()],
    ['paths and contents that need escapes', escapes],
    ['no copy roots (an empty list)', empty],
    ['three mounts, one empty, and exclude patterns', mounts],
    ['4,500 entries in several pieces', big],
  ];
}

describe('readDocumentStream', () => {
  for (const [name, d] of documents()) {
    it(`${name}: the snapshot decodeDocumentBytes gives and the pieces cutPieces cuts, in windows of 1 byte to ${WINDOW_BYTES}`, () => {
      const { digest, text: t } = text(d);
      const bytes = Buffer.from(t, 'utf8');
      const whole = { data: plain(decodeDocumentBytes(bytes, digest)), pieces: cutPieces(bytes) };
      expect(readDocumentBytes(bytes, digest).canonical).toBe(true);
      if (name.includes('several')) expect(whole.pieces.pieces.length).toBeGreaterThan(2);
      for (const window of [1, 2, 13, 64, 1000, 70_000, WINDOW_BYTES]) expect({ window, ...streamed(bytes, digest, window) }).toEqual({ window, ...whole });
    });
  }

  it('takes nothing decodeDocumentBytes would not take as canonical: one changed byte at every place (a digit, a quote, a backslash, a bracket)', () => {
    const d = validWithLinks();
    d.entries.push(file('src/q"\\\u00e9\u{1f600}', 0o755));
    d.entries.sort(byBytes);
    const { digest, text: t } = text(timed());
    const bytes = Buffer.from(text(d).text, 'utf8');
    const replacements = [0x31, 0x22, 0x5c, 0x5d];
    let taken = 0;
    for (let i = 0; i < bytes.length; i++) {
      const b = Buffer.from(bytes);
      b[i] = replacements[i % 4]!;
      if (b[i] === bytes[i]) continue;
      const got = streamed(b, undefined, 7 + (i % 5));
      if (got === undefined) continue;
      const whole = readDocumentBytes(b);
      // Taken only as the canonical document it is, the same snapshot.
      expect({ at: i, canonical: whole.canonical, data: got.data }).toEqual({ at: i, canonical: true, data: plain(whole.data) });
      taken++;
    }
    // No change of one byte keeps a document canonical and its digests whole.
    expect(taken).toBe(0);
    expect(streamed(Buffer.from(t, 'utf8'), digest, 5)).toBeDefined();
  });

  it('nothing for a valid document that is not canonical (indented), for one another digest names, or one read short', () => {
    const { digest, text: t } = text(valid());
    const bytes = Buffer.from(t, 'utf8');
    const indented = Buffer.from(`${JSON.stringify(JSON.parse(t), null, 2)}\n`);
    expect(plain(decodeDocumentBytes(indented, digest))).toEqual(plain(decodeDocumentBytes(bytes, digest)));
    expect(streamed(indented, digest, 64)).toBeUndefined();
    expect(streamed(bytes, 'f'.repeat(64), 64)).toBeUndefined();
    expect(streamed(bytes, digest, 64)).toBeDefined();
    // A file that comes up short of its size (it changed under the read).
    const short = (into: Buffer, offset: number, length: number, position: number): number => (position >= bytes.length - 10 ? 0 : readerOf(bytes)(into, offset, Math.min(length, bytes.length - 10 - position), position));
    expect(readDocumentStream(short, bytes.length, digest, undefined, 64)).toBeUndefined();
  });
});

/** FNV-1a, as the cut hashes a path's JSON string. */
function fnv(bytes: Buffer): number {
  let h = 0x811c9dc5;
  for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

describe('CutCandidates', () => {
  it("notes the entries whose path hashes to 0 in the low 6 bits, never a list's last (the list's end cuts there anyway)", () => {
    // Quoted paths: the first two hash to 0 in the low 6 bits, the third does not.
    const names = Array.from({ length: 5000 }, (_, i) => Buffer.from(`"p${i}"`));
    const zero = names.filter((n) => (fnv(n) & 63) === 0);
    const other = names.find((n) => (fnv(n) & 63) !== 0)!;
    const cuts = new CutCandidates();
    cuts.list(0, 100);
    cuts.entry(zero[0]!, 0, zero[0]!.length, 200);
    cuts.entry(other, 0, other.length, 300);
    cuts.entry(zero[1]!, 0, zero[1]!.length, 400);
    cuts.end(400);
    cuts.list(1, 500);
    cuts.end(501);
    expect(cuts.lists).toEqual([
      { start: 101, last: 400, ends: [200], hashes: [fnv(zero[0]!)] },
      { start: 501, last: 501, ends: [], hashes: [] },
    ]);
  });
});

describe('streamPushDocument', () => {
  it("reads a captured snapshot's manifest.json as push sends it: the root and pieces cutPieces makes, each piece read again proven", () => {
    const dirPath = tempDir();
    const src = join(dirPath, 'repo');
    const files: Record<string, string> = { 'bin/run.sh': '#!/bin/sh\n', 'caf\u00e9/\u{1f600}.md': 'emoji', 'q"uote\\d': 'x', empty: '' };
    for (let i = 0; i < 2500; i++) files[`d${i % 20}/f${i}-${'n'.repeat(i % 40)}`] = `file ${i}`;
    writeTree(src, files);
    symlinkSync('run.sh', join(src, 'bin/link'));
    const store = SnapshotStore.openSync(join(dirPath, 'store'));
    const snap = store.captureSync({ source: src, links: 'contained', keepTimes: true });
    const doc = readFileSync(join(snap.root, 'manifest.json'));
    const got = streamPushDocument(sys, snap.root, snap.digest);
    const whole = cutPieces(doc);
    expect(got.pieces.length).toBeGreaterThan(1);
    expect({ root: got.root, pieces: got.pieces }).toEqual(whole);
    expect(plain(got.data)).toEqual(plain(decodeDocumentBytes(doc, snap.digest)));
    for (const p of got.pieces) expect(Buffer.from(readPushPiece(sys, snap.root, snap.digest, p)).equals(doc.subarray(p.start, p.end))).toBe(true);
    // A piece whose bytes changed after the read (same length) is refused when it is read to be sent.
    const p = got.pieces[1];
    const path = join(snap.root, 'manifest.json');
    chmodSync(snap.root, 0o700);
    chmodSync(path, 0o600);
    const changed = Buffer.from(doc);
    changed[p.start + 20] = changed[p.start + 20] === 0x61 ? 0x62 : 0x61;
    writeFileSync(path, changed);
    let err: unknown;
    try {
      readPushPiece(sys, snap.root, snap.digest, p);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SealError);
    expect([(err as SealError).code, (err as SealError).message]).toEqual(['SEAL_CORRUPT', `snapshot manifest changed while it was read: ${snap.digest}`]);
    // Read again, the changed document is not this snapshot: push reads it whole, and its proof says why.
    expect(streamPushDocument(sys, snap.root, snap.digest)).toBeUndefined();
    // The same snapshot written as valid JSON that is not canonical (indented): read whole, as before.
    const indented = Buffer.from(`${JSON.stringify(JSON.parse(doc.toString('utf8')), null, 1)}\n`);
    expect(plain(decodeDocumentBytes(indented, snap.digest))).toEqual(plain(decodeDocumentBytes(doc, snap.digest)));
    writeFileSync(path, indented);
    expect(streamPushDocument(sys, snap.root, snap.digest)).toBeUndefined();
    writeFileSync(path, doc);
    expect(streamPushDocument(sys, snap.root, snap.digest)?.root).toBe(whole.root);
    store.close();
  });
});
