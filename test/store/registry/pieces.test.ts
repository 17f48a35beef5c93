// pieces.test.ts: a snapshot's metadata in pieces: cut where paths say, the same for the same entries at any source path, one piece per change, and read back byte for byte.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';

import type { SnapshotData } from '../../../dist/index.js';
import { MAX_PIECES, assembleDocument, computeDigests, cutPieces, documentText, readRoot } from '../../../dist/internal.js';

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

interface Piece {
  digest: string;
  start: number;
  end: number;
  first: string;
}

/** A snapshot of `n` files under t/ (each content named by `content(i)`), captured at `source`, with one mount of `mountFiles` files. */
function snapshot(n: number, opts: { source?: string; content?: (i: number) => string; mountFiles?: number; extra?: string[] } = {}): SnapshotData {
  const content = opts.content ?? ((i: number) => `content ${i}`);
  const file = (path: string, c: string) => ({ kind: 'file' as const, path, size: c.length, sha256: sha(c), mode: 0, link_target: '' });
  const names = [...Array.from({ length: n }, (_, i) => `t/f${String(i).padStart(6, '0')}`), ...(opts.extra ?? [])].sort();
  const entries = [{ kind: 'directory' as const, path: 't', size: 0, sha256: '', mode: 0, link_target: '' }, ...names.map((p, i) => file(p, content(i)))];
  const mountEntries = [
    { kind: 'directory' as const, path: 'payload', size: 0, sha256: '', mode: 0o755, link_target: '' },
    ...Array.from({ length: opts.mountFiles ?? 0 }, (_, i) => ({ ...file(`payload/m${String(i).padStart(5, '0')}`, `mount ${i}`), mode: 0o644 })),
  ];
  const base = {
    source: opts.source ?? '/work/a/repo',
    revision: '',
    declarations: ['t'],
    entries,
    totalBytes: entries.reduce((s, e) => s + e.size, 0),
    mounts: opts.mountFiles === undefined ? [] : [{ source: '/deps/node_modules', target: 'node_modules', kind: 'directory' as const, totalBytes: 0, entries: mountEntries }],
  };
  return { ...base, ...computeDigests(base) } as SnapshotData;
}

function cut(d: SnapshotData): { doc: Buffer; root: string; pieces: Piece[] } {
  const doc = Buffer.from(documentText(d), 'latin1');
  return { doc, ...cutPieces(doc) };
}

const digests = (p: Piece[]): string[] => p.map((x) => x.digest);

describe('snapshot metadata in pieces', () => {
  it('cuts a 50k-file manifest into at most MAX_PIECES whole-entry runs and a small root; root and pieces give the manifest back byte for byte', () => {
    const { doc, root, pieces } = cut(snapshot(50_000));
    expect(pieces.length).toBeGreaterThan(MAX_PIECES / 2);
    expect(pieces.length).toBeLessThanOrEqual(MAX_PIECES);
    expect(root.length).toBeLessThan(8 * 1024);
    for (const p of pieces) {
      const text = doc.toString('latin1', p.start, p.end);
      expect(text.startsWith('{"kind":"')).toBe(true);
      expect(text.endsWith('}')).toBe(true);
      expect(p.digest).toBe(`sha256:${sha(text)}`);
    }
    const byDigest = new Map(pieces.map((p) => [p.digest, doc.subarray(p.start, p.end)]));
    const read = readRoot(Buffer.from(root, 'latin1'), 'r/x:tag');
    expect(read.distinct).toEqual(digests(pieces));
    expect(assembleDocument(read, (d: string) => byDigest.get(d)!).equals(doc)).toBe(true);
  });

  it('gives the same pieces for the same tree captured at another path; only the root differs', () => {
    const a = cut(snapshot(5_000, { source: '/ci/job-1/repo' }));
    const b = cut(snapshot(5_000, { source: '/ci/job-22/checkout/repo' }));
    expect(digests(b.pieces)).toEqual(digests(a.pieces));
    expect(b.root).not.toBe(a.root);
    expect(b.root.replace('/ci/job-22/checkout/repo', '/ci/job-1/repo').length).toBe(a.root.length);
  });

  it('changes one piece when one file changes, and at most two when a file is added', () => {
    const before = new Set(digests(cut(snapshot(20_000)).pieces));
    const changed = digests(cut(snapshot(20_000, { content: (i) => (i === 13_337 ? 'new bytes' : `content ${i}`) })).pieces);
    expect(changed.filter((d) => !before.has(d))).toHaveLength(1);
    const added = digests(cut(snapshot(20_000, { extra: ['t/f013337x'], content: (i) => (i === 13_338 ? 'added' : `content ${i < 13_338 ? i : i - 1}`) })).pieces);
    expect(added.filter((d) => !before.has(d)).length).toBeGreaterThanOrEqual(1);
    expect(added.filter((d) => !before.has(d)).length).toBeLessThanOrEqual(2);
  });

  it('keeps a small tree one piece a list; a mount list has pieces of its own; an empty list has none', () => {
    const small = cut(snapshot(20, { mountFiles: 3 }));
    expect(small.pieces).toHaveLength(2);
    const root = JSON.parse(small.root);
    expect(root.entries).toEqual([small.pieces[0]!.digest]);
    expect(root.mounts[0].entries).toEqual([small.pieces[1]!.digest]);
    expect(root.digest).toBe(JSON.parse(small.doc.toString()).digest);
    const d = snapshot(0);
    const empty = cut({ ...d, entries: [], ...computeDigests({ ...d, entries: [] }) } as SnapshotData);
    expect(empty.pieces).toEqual([]);
    expect(JSON.parse(empty.root).entries).toEqual([]);
  });

  it('names a piece the lists share once', () => {
    const d = snapshot(0, { mountFiles: 0 });
    const mountOnly = d.mounts[0]!.entries;
    const same = { ...d, entries: mountOnly, mounts: [d.mounts[0]!, { ...d.mounts[0]!, target: 'other' }] };
    const { root, pieces } = cut({ ...same, ...computeDigests(same) } as SnapshotData);
    expect(pieces).toHaveLength(1);
    const read = readRoot(Buffer.from(root, 'latin1'), 'r/x:tag');
    expect(read.lists).toEqual([[pieces[0]!.digest], [pieces[0]!.digest], [pieces[0]!.digest]]);
    expect(read.distinct).toEqual([pieces[0]!.digest]);
  });

  it('refuses a root that names one piece twice in a list (a small download made into a document of up to 1 GiB: 1.5 GB of memory for a 1 MB pull)', () => {
    const { doc, root, pieces } = cut(snapshot(2000));
    const read = readRoot(Buffer.from(root, 'latin1'), 'r/x:tag');
    const byDigest = new Map(pieces.map((p) => [p.digest, doc.subarray(p.start, p.end)]));
    const twice = { ...read, lists: read.lists.map((l: string[], i: number) => (i === 0 ? [...l, ...l] : l)) };
    expect(read.lists[0].length).toBeGreaterThan(0);
    expect(() => assembleDocument(twice, (x: string) => byDigest.get(x)!)).toThrow('list 0 names a piece twice');
  });

  it('cuts by the rule the format states: after an entry whose quoted path has FNV-1a 0 in the low bits, once the piece holds 128 KiB (pinned: a change of the cut re-sends every piece)', () => {
    const { doc, root, pieces } = cut(snapshot(100_000));
    expect([doc.length, pieces.length]).toEqual([14_700_537, 28]);
    expect(pieces.slice(0, 3).map((p) => [p.start, p.end])).toEqual([
      [109, 869_829],
      [869_830, 1_007_421],
      [1_007_422, 1_631_289],
    ]);
    expect(sha(pieces.map((p) => p.digest).join(','))).toBe('e6cf5ba65f64fb719901a459420871f7426fc15f3a8e14402a288c6e93bde6d8');
    expect(sha(root)).toBe('2e6cb1cbc09364916da4601e3de0d4fe95f1bd1f660487f7ba27f1db5ce54561');
    // The rule, worked out here on its own: the fewest bits (from 6) that give at most MAX_PIECES pieces.
    const fnv = (bytes: Buffer): number => {
      let h = 0x811c9dc5;
      for (const b of bytes) h = Math.imul(h ^ b, 0x01000193);
      return h >>> 0;
    };
    const list = doc.subarray(pieces[0]!.start - 1, pieces[pieces.length - 1]!.end + 1);
    const entries = JSON.parse(list.toString('latin1')) as { path: string }[];
    const texts = entries.map((e) => JSON.stringify(e, Object.keys(e).sort()));
    const hashes = entries.map((e) => fnv(Buffer.from(JSON.stringify(e.path), 'latin1')));
    const rule = (bits: number): number[] => {
      const ends: number[] = [];
      let size = -1;
      texts.forEach((t, i) => {
        size += t.length + 1;
        if (((hashes[i]! & (2 ** bits - 1)) === 0 && size >= 128 * 1024) || i === texts.length - 1) {
          ends.push(i);
          size = -1;
        }
      });
      return ends;
    };
    let bits = 6;
    while (rule(bits).length > MAX_PIECES) bits++;
    expect(bits).toBeGreaterThan(6);
    const counts = pieces.map((p) => JSON.parse(`[${doc.toString('latin1', p.start, p.end)}]`).length as number);
    const ends = counts.map((_, i) => counts.slice(0, i + 1).reduce((a, b) => a + b, 0) - 1);
    expect(ends).toEqual(rule(bits));
  });

  it('cuts a document wherever its bytes lie in memory (offsets are into the document)', () => {
    const { doc, pieces } = cut(snapshot(3_000));
    const padded = Buffer.concat([Buffer.alloc(777, 0x20), doc]).subarray(777);
    expect(cutPieces(padded).pieces).toEqual(pieces);
  });

  it("names each piece's first entry path, cut to 256 UTF-16 units and never inside a surrogate pair", () => {
    const { doc, pieces } = cut(snapshot(50_000));
    for (const p of pieces) expect(doc.toString('latin1', p.start, p.end)).toContain(`,"path":${JSON.stringify(p.first)},"sha256":"`);
    const long = `t/${'x'.repeat(300)}`;
    expect(cut(snapshot(0, { extra: [long] })).pieces.map((p) => p.first)).toEqual(['t']);
    // A list whose first entry is the long path: a mount's, after its payload directory's... so a copy list with only files.
    const d = snapshot(0, { extra: [long, `t/${'y'.repeat(253)}\u{1F600}z`] });
    const onlyFiles = { ...d, entries: d.entries.filter((e) => e.kind === 'file') };
    const firsts = cutPieces(Buffer.from(documentText({ ...onlyFiles, ...computeDigests(onlyFiles) } as SnapshotData), 'latin1')).pieces.map((p: Piece) => p.first);
    expect(firsts).toEqual([long.slice(0, 256)]);
    const emoji = snapshot(0, { extra: [`t/${'y'.repeat(253)}\u{1F600}z`] });
    const emojiFiles = { ...emoji, entries: emoji.entries.filter((e) => e.kind === 'file') };
    const [first] = cutPieces(Buffer.from(documentText({ ...emojiFiles, ...computeDigests(emojiFiles) } as SnapshotData), 'latin1')).pieces.map((p: Piece) => p.first);
    // Unit 255 is the emoji's high surrogate: the cut stops before it.
    expect(first).toBe(`t/${'y'.repeat(253)}`);
  });

  it('refuses to cut a document with an entry that has no path (it never cuts one it cannot read)', () => {
    const { doc } = cut(snapshot(3));
    const text = doc.toString('latin1');
    const refused = (t: string): string => {
      try {
        cutPieces(Buffer.from(t, 'latin1'));
      } catch (err) {
        return `${(err as { code: string }).code}: ${(err as Error).message}`;
      }
      return 'cut';
    };
    const noPath = 'SEAL_CORRUPT: snapshot manifest is corrupt: an entry has no path and sha256';
    // The first entry without its path (the next one has one), the last without its path or its sha256, every entry without a path.
    expect(refused(text.replace('"path":"t",', ''))).toBe(noPath);
    expect(refused(text.replace(/"path":"t\/f000002",/, ''))).toBe(noPath);
    expect(refused(text.replace(/("path":"t\/f000002"),"sha256":"[0-9a-f]{64}"/, '$1'))).toBe(noPath);
    expect(refused(text.replaceAll(/"path":"[^"]*",/g, ''))).toBe(noPath);
    expect(refused(text.replace(',"entries":[', ',"entrees":['))).toBe('SEAL_CORRUPT: snapshot manifest is corrupt: no entries');
  });

  it('refuses a root whose lists are not canonical lists of sha256 digests', () => {
    const { root, pieces } = cut(snapshot(20));
    const d = pieces[0]!.digest;
    const refused = (text: string): string => {
      try {
        readRoot(Buffer.from(text, 'latin1'), 'r/x:tag');
      } catch (err) {
        return `${(err as { code: string }).code}: ${(err as Error).message}`;
      }
      return 'accepted';
    };
    const bad = 'SEAL_CORRUPT: r/x:tag does not hold a valid snapshot root document: ';
    expect(refused(root)).toBe('accepted');
    expect(refused(root.replace(`["${d}"]`, `[ "${d}"]`))).toBe(`${bad}a list of pieces is not in canonical form`);
    expect(refused(root.replace(`["${d}"]`, `["${d.replace('sha256', 'sha512')}"]`))).toBe(`${bad}a list of pieces holds other than sha256 digests`);
    expect(refused(root.replace(`["${d}"]`, `[{"digest":"${d}"}]`))).toBe(`${bad}a list of pieces holds other than sha256 digests`);
    expect(refused(root.replace(`["${d}"]`, `["x${d}"]`))).toBe(`${bad}a list of pieces holds other than sha256 digests`);
    expect(refused(root.replace(`["${d}"]`, `["${d}0"]`))).toBe(`${bad}a list of pieces holds other than sha256 digests`);
    expect(refused(root.replace(`["${d}"]`, `["${d}","sha256:"]`))).toBe(`${bad}a list of pieces holds other than sha256 digests`);
    expect(refused(root.replace(`["${d}"]`, `[["${d}"]]`))).toBe(`${bad}a list of pieces holds other than sha256 digests`);
    expect(refused(root.replace(`["${d}"]`, `["${d}",]`))).toBe(`${bad}a list of pieces is not JSON`);
    expect(refused('{"schema_version":3}')).toBe(`${bad}no entries`);
  });
});
