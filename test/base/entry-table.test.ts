// entry-table.test.ts: packed entry tables: unique paths, manifest order, canonical JSON byte for byte as the entry objects give it, shared across threads.
import { Worker } from 'node:worker_threads';

import { describe, expect, it } from 'vitest';

import { canonicalJson, manifestDigest, mountDigests, type ManifestEntry } from '../../dist/index.js';
import { EntryTable, compareUtf8, entriesText, sha256Hex } from '../../dist/internal.js';

const NAMES = ['a', 'a b', 'a-b', 'q"x', 'back\\slash', 'ctl\u0001\u001f', 'del\u007f', '\u00e9\u20ac', '\u{1f600}x', '\uffff', 'tab\t', 'long'.repeat(300)];

/** Every kind, odd paths and link targets, sizes past 2^32, modes, in the order added (not sorted). */
function awkward(): ManifestEntry[] {
  const out: ManifestEntry[] = [];
  let n = 0;
  for (const x of NAMES) {
    for (const y of NAMES) {
      const kind = (['directory', 'file', 'symlink'] as const)[n++ % 3]!;
      const sha256 = kind === 'directory' ? '' : sha256Hex(`${x}/${y}`);
      const link_target = kind === 'symlink' ? `../${y}"\u0002\u00e9` : '';
      out.push({ kind, path: `${x}/${y}`, size: kind === 'directory' ? 0 : n * 987_654_321, sha256, mode: n % 2 ? 0o755 : 0, link_target });
    }
  }
  return out;
}

const sorted = (entries: ManifestEntry[]): ManifestEntry[] => [...entries].sort((a, b) => compareUtf8(a.path, b.path));
const objects = (entries: ManifestEntry[]): object[] =>
  entries.map((e) => ({ kind: e.kind, link_target: e.link_target, mode: e.mode, path: e.path, sha256: e.sha256, size: e.size }));

describe('EntryTable', () => {
  it('keeps one entry per path and gives them back in manifest order', () => {
    const entries = awkward();
    const table = EntryTable.from(entries);
    expect(table.add({ ...entries[5]!, kind: 'file' })).toEqual({ index: 5, added: false });
    expect(table.find(entries[7]!.path)).toBe(7);
    expect(table.find('missing')).toBe(-1);
    expect([...table.sort()]).toEqual(sorted(entries));
  });

  it('finds every path and refuses every duplicate as its index grows past its first slots, many times over (kills a grow that re-places members under another hash)', () => {
    const t = new EntryTable();
    const n = 20_000;
    const path = (i: number): string => `d${i % 97}/f${i}`;
    for (let i = 0; i < n; i++) expect(t.add({ kind: 'file', path: path(i), size: i, sha256: '', mode: 0, link_target: '' }).added).toBe(true);
    for (let i = 0; i < n; i += 7) expect(t.add({ kind: 'file', path: path(i), size: 0, sha256: '', mode: 0, link_target: '' })).toEqual({ index: i, added: false });
    for (let i = 0; i < n; i += 3) expect(t.find(path(i))).toBe(i);
    for (const missing of ['d0/f20000', 'd0', '', 'd1/f0']) expect(t.find(missing)).toBe(-1);
    expect(t.length).toBe(n);
  });

  it('encodes as canonicalJson of the entry objects, and digests the same as the array', () => {
    const entries = sorted(awkward());
    const table = EntryTable.from(awkward()).sort();
    expect(entriesText(table)).toBe(canonicalJson(objects(entries) as never));
    expect(manifestDigest(table as never)).toBe(manifestDigest(entries));
    const mounts = (list: unknown) => [{ source: 'node_modules', target: 'node_modules', entries: list as ManifestEntry[] }];
    expect(mountDigests(mounts(table))).toEqual(mountDigests(mounts(entries)));
  });

  it('encodes a list larger than its chunks the same way', () => {
    const entries: ManifestEntry[] = [];
    for (let i = 0; i < 20_000; i++) {
      entries.push({ kind: 'file', path: `d/${String(i).padStart(6, '0')}${i % 7 === 0 ? '\u00e9' : ''}`, size: i, sha256: sha256Hex(String(i)), mode: 0, link_target: '' });
    }
    const text = entriesText(EntryTable.from(entries).sort());
    expect(text.length).toBeGreaterThan(1 << 21);
    expect(text).toBe(canonicalJson(objects(sorted(entries)) as never));
  });

  it('escapes a path that needs it wherever it was added: past the first MiB of path bytes, first in manifest order', () => {
    const entries: ManifestEntry[] = [];
    for (let i = 0; i < 9000; i++) entries.push({ kind: 'file', path: `plain/${String(i).padStart(120, '0')}`, size: i, sha256: sha256Hex(String(i)), mode: 0, link_target: '' });
    for (const path of ['a\u00e9', 'b"q', 'c\u0001']) entries.push({ kind: 'file', path, size: 1, sha256: sha256Hex(path), mode: 0, link_target: '' });
    const table = EntryTable.from(entries).sort();
    expect(entriesText(table)).toBe(canonicalJson(objects(sorted(entries)) as never));
  });

  it('keeps recorded mtimes only where entries have one, grown with the table, across threads, encoded as the objects are', async () => {
    const entries: ManifestEntry[] = [];
    // Untimed entries first (a copy root's implicit parents), then thousands with times, before 1970 and near int64's ends.
    for (let i = 0; i < 3; i++) entries.push({ kind: 'directory', path: `p${i}`, size: 0, sha256: '', mode: 0, link_target: '' });
    const times = ['0', '-1', '-9223372036854775807', '9223372036854775807', '1700000000123456789'];
    for (let i = 0; i < 5000; i++) {
      entries.push({ kind: 'file', path: `p2/${String(i).padStart(5, '0')}`, size: i, sha256: sha256Hex(String(i)), mode: 0, link_target: '', mtime_ns: times[i % times.length]! });
    }
    const table = EntryTable.from(entries).sort();
    expect(table.timed).toBe(true);
    expect(EntryTable.from(entries.slice(0, 3)).timed).toBe(false);
    expect([...table]).toEqual(sorted(entries));
    expect(Object.keys(table.at(0))).not.toContain('mtime_ns');
    const withTimes = sorted(entries).map((e) => ({ ...objects([e])[0]!, ...(e.mtime_ns === undefined ? {} : { mtime_ns: e.mtime_ns }) }));
    expect(entriesText(table)).toBe(canonicalJson(withTimes as never));
    expect(manifestDigest(table as never)).toBe(manifestDigest(sorted(entries)));
    const back = await new Promise<string[]>((resolve, reject) => {
      const code = `const { parentPort, workerData } = require('node:worker_threads'); parentPort.postMessage(Array.from(workerData.mtimes.subarray(0, 8), String));`;
      const w = new Worker(code, { eval: true, workerData: table.pack() });
      w.once('message', resolve);
      w.once('error', reject);
    });
    expect(back).toEqual(['-9223372036854775808', '-9223372036854775808', '-9223372036854775808', '0', '-1', '-9223372036854775807', '9223372036854775807', '1700000000123456789']);
    expect([...EntryTable.unpack(table.pack())]).toEqual(sorted(entries));
    expect(() => EntryTable.from([{ ...entries[3]!, mtime_ns: '01' }])).toThrow(RangeError);
  });

  it('an unpacked table finds paths without touching its bytes: its entries read the same after (a find once swapped its paths for empty memory)', () => {
    const table = EntryTable.from(awkward()).sort();
    const before = [...table];
    const unpacked = EntryTable.unpack(table.pack());
    for (const e of before) expect(unpacked.find(e.path)).toBe(table.find(e.path));
    expect(unpacked.find('no/such/path')).toBe(-1);
    expect([...unpacked]).toEqual(before);
    expect([...table]).toEqual(before);
  });

  it('crosses to another thread as shared memory, not copied', async () => {
    const table = EntryTable.from(awkward()).sort();
    const packed = table.pack();
    const code = `const { parentPort, workerData } = require('node:worker_threads'); workerData.ends[0] = -1; parentPort.postMessage(workerData.count);`;
    const count = await new Promise((resolve, reject) => {
      const w = new Worker(code, { eval: true, workerData: packed });
      w.once('message', resolve);
      w.once('error', reject);
    });
    expect(count).toBe(table.length);
    // The other thread wrote into the same memory.
    expect(packed.ends[0]).toBe(-1);
    expect(packed.ends.buffer).toBeInstanceOf(SharedArrayBuffer);
  });
});
