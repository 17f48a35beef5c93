// document-parse.test.ts: a manifest.json read straight into tables gives exactly what JSON.parse gives, the same snapshot or the same error, for every document.
import { readFileSync, symlinkSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { EntryTable, decodeDocument, decodeDocumentBytes, documentText, readDocumentBytes, sha256Hex } from '../../dist/internal.js';
import { checkNoFdLeaks, tempDir, writeTree } from '../helpers.js';
import { CASES, text, timed, valid, validWithLinks, type Doc, type Entry } from './documents.js';

checkNoFdLeaks();

type Outcome = { ok: unknown } | { code: string; message: string; path: string | undefined };

/** What a decode gives, as plain data: the snapshot with its lists as arrays, or the error. */
function outcome(decode: () => { entries: Iterable<unknown>; mounts: { entries: Iterable<unknown> }[] }): Outcome {
  try {
    const d = decode();
    return { ok: { ...d, entries: [...d.entries], mounts: d.mounts.map((m) => ({ ...m, entries: [...m.entries] })) } };
  } catch (err) {
    const e = err as { code: string; message: string; path?: string };
    return { code: e.code, message: e.message, path: e.path };
  }
}

const bytesOf = (d: Doc): Buffer => Buffer.from(text(d).text, 'utf8');

/** Both decoders on the same bytes: they must agree exactly. */
function both(bytes: Buffer, digest?: string): { fast: Outcome; slow: Outcome } {
  return { fast: outcome(() => decodeDocumentBytes(bytes, digest)), slow: outcome(() => decodeDocument(bytes.toString('utf8'), digest)) };
}

const file = (path: string, mode = 0): Entry => ({ kind: 'file', path, size: 0, sha256: sha256Hex(Buffer.alloc(0)), mode, link_target: '' });
const dir = (path: string): Entry => ({ kind: 'directory', path, size: 0, sha256: '', mode: 0, link_target: '' });

/** A document whose paths need every kind of escape: quotes, backslashes, controls, non-ASCII, a surrogate pair, DEL. */
function escaped(): Doc {
  const d = valid();
  const names = ['a"q', 'b\\s', 'c\u0001d', 'caf\u00e9', 'e\u{1f600}', 'f\u007f', 'g\tab', 'h\u2028'];
  d.entries = [dir('src'), file('src/a'), ...names.map((n) => file(`src/${n}`))].sort((x, y) => Buffer.compare(Buffer.from(x.path), Buffer.from(y.path)));
  return d;
}

describe('decodeDocumentBytes reads a canonical manifest.json into tables', () => {
  for (const [name, make] of [
    ['the template', valid],
    ['links in the copy roots', validWithLinks],
    ['times kept', timed],
    ['paths that need escapes', escaped],
    [
      'exclude patterns and an empty mount directory',
      () => {
        const d = valid();
        d.exclude = ['*.log', '.vite-temp/'];
        d.mounts[0]!.entries.splice(1, 0, dir('payload/.vite-temp'));
        return d;
      },
    ],
  ] as [string, () => Doc][]) {
    it(`${name}: tables (no object per entry), the same snapshot as JSON.parse gives`, () => {
      const d = make();
      const { digest } = text(d);
      const bytes = bytesOf(d);
      const read = readDocumentBytes(bytes, digest);
      expect(read.canonical).toBe(true);
      expect(read.data.entries).toBeInstanceOf(EntryTable);
      for (const m of read.data.mounts) expect(m.entries).toBeInstanceOf(EntryTable);
      const { fast, slow } = both(bytes, digest);
      expect(fast).toEqual(slow);
      expect('ok' in fast).toBe(true);
      // Written back, the tables make the same bytes.
      expect(documentText(read.data)).toBe(bytes.toString('latin1'));
    });
  }

  it('every branch of the scanner takes the fast path: each escape form, link targets with escapes, the largest mode, negative and extreme times, an empty list', () => {
    const link = (path: string, target: string): Entry => ({ kind: 'symlink', path, size: Buffer.byteLength(target), sha256: sha256Hex(Buffer.from(target)), mode: 0, link_target: target });
    const odd = 'b\bf\fn\nr\rt\t"q\\s\u0001\u001f\u007f\u00e9\u2028\u{1f600}';
    const byBytes = (x: Entry, y: Entry): number => Buffer.compare(Buffer.from(x.path), Buffer.from(y.path));
    const docs: Doc[] = [];
    // Escapes in copy-root paths, kept times at both ends of int64, an executable file.
    const times = valid();
    times.entries = [
      { ...dir('src'), mtime_ns: '-1' },
      { ...file('src/a'), mtime_ns: '9223372036854775807' },
      { ...file(`src/${odd}`, 0o755), mtime_ns: '-9223372036854775807' },
    ].sort(byBytes);
    docs.push(times);
    // Link targets with escapes in a mount payload, the largest mode; no copy roots at all (an empty list).
    const links = valid();
    links.declarations = [];
    links.entries = [];
    links.mounts[0]!.entries = [dir('payload'), { ...file(`payload/${odd}`), mode: 0o7777 }, link('payload/l', odd), file('payload/z')].sort(byBytes);
    docs.push(links);
    for (const d of docs) {
      const { digest } = text(d);
      const bytes = bytesOf(d);
      const read = readDocumentBytes(bytes, digest);
      expect([read.canonical, read.data.entries instanceof EntryTable, read.data.mounts[0]!.entries instanceof EntryTable]).toEqual([true, true, true]);
      const { fast, slow } = both(bytes, digest);
      expect(fast).toEqual(slow);
      expect('ok' in fast).toBe(true);
      expect(documentText(read.data)).toBe(bytes.toString('latin1'));
    }
  });

  it('a document that is valid but not canonical (indented, keys reordered) is decoded by JSON.parse, to the same snapshot', () => {
    const d = valid();
    const { digest, text: t } = text(d);
    const doc = JSON.parse(t) as Record<string, unknown>;
    for (const variant of [JSON.stringify(doc, null, 2), JSON.stringify(Object.fromEntries(Object.entries(doc).reverse()))]) {
      const bytes = Buffer.from(variant);
      const read = readDocumentBytes(bytes, digest);
      expect(read.canonical).toBe(false);
      expect(Array.isArray(read.data.entries)).toBe(true);
      const { fast, slow } = both(bytes, digest);
      expect(fast).toEqual(slow);
      expect('ok' in fast).toBe(true);
    }
  });

  it('a digest the document claims that is not its lists\' own: the same snapshot, but not canonical', () => {
    const d = valid();
    const { digest } = text(d);
    for (const key of ['manifest_digest', 'mount_content_digest', 'mount_manifest_digest']) {
      const bytes = bytesOf(d);
      const at = bytes.indexOf(`"${key}":"`) + key.length + 4;
      bytes[at] = bytes[at] === 0x30 ? 0x31 : 0x30;
      const read = readDocumentBytes(bytes, digest);
      expect(read.canonical).toBe(false);
      const { fast, slow } = both(bytes, digest);
      expect(fast).toEqual(slow);
      expect(documentText(read.data)).not.toBe(bytes.toString('latin1'));
    }
  });

  it('every document capture would refuse gets the same error from both', () => {
    for (const [, edit, message] of CASES) {
      const d = valid();
      edit(d);
      const { digest } = text(d);
      const { fast, slow } = both(bytesOf(d), digest);
      expect(fast).toEqual(slow);
      expect(fast).toMatchObject({ code: 'SEAL_CORRUPT', message: `snapshot manifest is corrupt: ${message}` });
    }
  });

  it('a digest that is not the one asked for, or not its entries', () => {
    const d = valid();
    const { digest } = text(d);
    const bytes = bytesOf(d);
    const other = both(bytes, 'f'.repeat(64));
    expect(other.fast).toEqual(other.slow);
    expect(other.fast).toMatchObject({ code: 'SEAL_CORRUPT', message: `snapshot manifest is corrupt: digest does not match its entries (${digest})` });
    // One entry's size changed, the document's digests left as they were.
    const changed = Buffer.from(bytes.toString('latin1').replace('"size":0}', '"size":1}'), 'latin1');
    const lied = both(changed);
    expect(lied.fast).toEqual(lied.slow);
    expect(lied.fast).toMatchObject({ code: 'SEAL_CORRUPT' });
  });

  it('every single-byte change of a document gives the same snapshot or the same error from both (one change at each byte, about 1,000 documents)', () => {
    const d = validWithLinks();
    d.entries.push(file('src/q"\\\u00e9\u{1f600}', 0o755));
    d.entries.sort((x, y) => Buffer.compare(Buffer.from(x.path), Buffer.from(y.path)));
    const bytes = bytesOf(timedCopy(d));
    // One replacement a byte, cycling: a digit, a quote, a backslash (what moves a number, ends a string, starts an escape).
    const replacements = [0x31, 0x22, 0x5c];
    const { digest } = text(timedCopy(d));
    let accepted = 0;
    for (let i = 0; i < bytes.length; i++) {
      const r = replacements[i % 3]!;
      if (bytes[i] === r) continue;
      const b = Buffer.from(bytes);
      b[i] = r;
      const { fast, slow } = both(b);
      if (JSON.stringify(fast) !== JSON.stringify(slow)) expect({ at: i, byte: r, fast }).toEqual({ at: i, byte: r, fast: slow });
      if ('ok' in fast) {
        // Only a claim the snapshot digest does not cover (manifest_digest, mount_*_digest) may change and still
        // load, as the same snapshot, and never as a canonical document (pull refuses it).
        expect([(fast.ok as { digest: string }).digest, readDocumentBytes(b).canonical]).toEqual([digest, false]);
        accepted++;
      }
    }
    expect(accepted).toBeGreaterThan(0);
  });

  it('a snapshot captured from a real tree loads into tables equal to its manifest.json parsed', () => {
    const dirPath = tempDir();
    const src = join(dirPath, 'repo');
    writeTree(src, { 'a.txt': 'alpha', 'bin/run.sh': '#!/bin/sh\n', 'caf\u00e9/\u{1f600}.md': 'emoji', 'q"uote\\d': 'x', 'empty': '' });
    chmodSync(join(src, 'bin/run.sh'), 0o755);
    symlinkSync('run.sh', join(src, 'bin/link'));
    const store = SnapshotStore.openSync(join(dirPath, 'store'));
    const snap = store.captureSync({ source: src, keepExecutable: true, links: 'contained' });
    const bytes = readFileSync(join(snap.root, 'manifest.json'));
    const read = readDocumentBytes(bytes, snap.digest);
    expect([read.canonical, read.data.entries instanceof EntryTable]).toEqual([true, true]);
    expect(outcome(() => read.data)).toEqual(outcome(() => decodeDocument(bytes.toString('utf8'), snap.digest)));
    expect([...store.get(snap.digest).entries]).toEqual(decodeDocument(bytes.toString('utf8'), snap.digest).entries);
    store.closeSync();
  });
});

/** d with its copy roots' times kept (so mtime_ns is among the bytes changed). */
function timedCopy(d: Doc): Doc {
  return { ...d, entries: d.entries.map((e, i) => ({ ...e, mtime_ns: String(1_600_000_000_000_000_000n + BigInt(i)) })) };
}
