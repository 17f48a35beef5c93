// manifest-tree.test.ts: a manifest's entries grouped by directory as indices (Children, found by name with namedChildrenOf), each path's place in manifest order (indexOfPath, EntryTable.find) and each entry's fields by that place (EntryReader), from an entry table or a list.
import { describe, expect, it } from 'vitest';

import type { ManifestEntry } from '../../dist/index.js';
import { EntryReader, EntryTable, childrenOf, compareUtf8, indexOfPath, namedChildrenOf, sha256Hex } from '../../dist/internal.js';

/** Directories and files, names that sort around '/' ('a-b' before 'a/', 'a0' after it), one name with an escape and one past ASCII. */
function tree(): ManifestEntry[] {
  const dir = (path: string): ManifestEntry => ({ kind: 'directory', path, size: 0, sha256: '', mode: 0o755, link_target: '' });
  const file = (path: string): ManifestEntry => ({ kind: 'file', path, size: path.length, sha256: sha256Hex(path), mode: 0o644, link_target: '' });
  const link = (path: string): ManifestEntry => ({ kind: 'symlink', path, size: 0, sha256: sha256Hex('x'), mode: 0o777, link_target: 'x' });
  const out = [dir('a'), file('a-b'), dir('a/b'), file('a/b/c'), file('a/b-c'), link('a/l'), file('a0'), dir('q"x'), file('q"x/\u00e9\u20ac'), file('z')];
  return out.sort((x, y) => compareUtf8(x.path, y.path));
}

/** The same entries as a table added in another order, then sorted (as capture makes it), and as one read in order (as a load makes it). */
function forms(entries: ManifestEntry[]): [string, Iterable<ManifestEntry> & { length: number }][] {
  return [
    ['list', entries],
    ['table sorted after adding', EntryTable.of([...entries].reverse()).sort()],
    ['table in manifest order', EntryTable.of(entries)],
  ];
}

describe('childrenOf', () => {
  for (const [name, entries] of forms(tree())) {
    it(`groups a ${name} by parent in manifest order, each entry whole`, () => {
      const children = childrenOf(entries);
      const paths = (parent: string): string[] | undefined => children.get(parent)?.map((e) => e.path);
      expect(paths('')).toEqual(['a', 'a-b', 'a0', 'q"x', 'z']);
      expect(paths('a')).toEqual(['a/b', 'a/b-c', 'a/l']);
      expect(paths('a/b')).toEqual(['a/b/c']);
      expect(paths('q"x')).toEqual(['q"x/\u00e9\u20ac']);
      expect(paths('a/b/c')).toBeUndefined();
      expect(children.get('a')![2]).toEqual(tree().find((e) => e.path === 'a/l'));
      expect([...children].map(([parent, list]) => [parent, list.length])).toEqual([['', 5], ['a', 3], ['a/b', 1], ['q"x', 1]]);
      children.delete('a');
      expect(children.get('a')).toBeUndefined();
      expect(paths('a/b')).toEqual(['a/b/c']);
    });
  }

  it('keeps only the entries keep accepts', () => {
    const children = childrenOf(EntryTable.of(tree()), (e) => e.kind === 'directory');
    expect(children.get('')!.map((e) => e.path)).toEqual(['a', 'q"x']);
    expect(children.get('a')!.map((e) => e.path)).toEqual(['a/b']);
  });
});

describe('EntryReader', () => {
  /** tree() with a recorded mtime on two entries (keepTimes), one of them before 1970. */
  const timed = (): ManifestEntry[] => tree().map((e) => (e.path === 'a/b/c' ? { ...e, mtime_ns: '1700000000123456789' } : e.path === 'a' ? { ...e, mtime_ns: '-5' } : e));
  for (const [name, entries] of [...forms(tree()), ...forms(timed())]) {
    it(`reads each field of a ${name} by manifest index as the whole entry holds it`, () => {
      const want = Array.from(entries);
      const reader = new EntryReader(entries);
      expect(reader.length).toBe(want.length);
      want.forEach((e, i) => {
        expect([e.path, reader.kind(i), reader.size(i), reader.mtimeNs(i), reader.path(i)]).toEqual([e.path, e.kind, e.size, e.mtime_ns === undefined ? undefined : BigInt(e.mtime_ns), e.path]);
        expect(reader.at(i)).toEqual(e);
      });
    });
  }

  it('indices give each directory\'s entries as manifest indices, in manifest order', () => {
    const children = childrenOf(EntryTable.of([...tree()].reverse()).sort());
    expect(children.indices('a')).toEqual([2, 3, 5]);
    expect(children.indices('')).toEqual([0, 1, 6, 7, 9]);
    expect(children.indices('a/b/c')).toBeUndefined();
  });
});

describe('namedChildrenOf', () => {
  for (const [name, entries] of forms(tree())) {
    it(`finds each entry of a ${name} by its name in its parent, and nothing else`, () => {
      const children = namedChildrenOf(entries);
      tree().forEach((e, i) => {
        const cut = e.path.lastIndexOf('/');
        expect(children.child(cut < 0 ? '' : e.path.slice(0, cut), e.path.slice(cut + 1))).toBe(i);
      });
      expect(children.indices('a')).toEqual([2, 3, 5]);
      // A name is looked up in its own parent only: 'c' is in a/b, 'b-c' in a; no whole path is a name.
      for (const [parent, missing] of [['', 'c'], ['a', 'c'], ['a', 'b/c'], ['', 'a/b'], ['a/b', 'b-c'], ['nope', 'a'], ['', ''], ['q"x', '\u00e9']]) {
        expect(children.child(parent!, missing!)).toBeUndefined();
      }
    });
  }
});

describe('a path\'s place', () => {
  for (const [name, entries] of forms(tree())) {
    it(`indexOfPath finds each path of a ${name} by bisection, and -1 for one it lacks`, () => {
      tree().forEach((e, i) => expect(indexOfPath(entries, e.path)).toBe(i));
      for (const missing of ['', 'a/', 'a/b/', 'A', '/a', '0', 'a.', 'a/b/c/d', 'q"x/\u00e9', 'zz', '\u{1f600}', 'é'.repeat(2000)]) expect(indexOfPath(entries, missing)).toBe(-1);
    });
  }

  it('EntryTable.find finds paths longer than the lookup buffer it starts with (4 KiB of UTF-8), before and after a longer one grew it', () => {
    const long = (n: number, c: string): string => `d/${c.repeat(n)}`;
    // 2,000 three-byte characters: 6 KB of UTF-8, past the first buffer; then a four-byte one past that again.
    const paths = [long(2000, '\u20ac'), long(1500, '\u{1f600}'), long(10, 'x'), long(1400, 'y')].sort(compareUtf8);
    const entries: ManifestEntry[] = paths.map((path) => ({ kind: 'file', path, size: 1, sha256: sha256Hex(path), mode: 0o644, link_target: '' }));
    const table = EntryTable.of(entries);
    for (const order of [paths, [...paths].reverse()]) for (const p of order) expect(table.find(p)).toBe(paths.indexOf(p));
    expect(table.find(long(2000, '\u20ac').slice(0, -1))).toBe(-1);
    expect(table.find(`${long(1500, '\u{1f600}')}z`)).toBe(-1);
    for (const missing of ['', 'd/', 'd', 'é'.repeat(2000)]) expect(table.find(missing)).toBe(-1);
  });
});
