// manifest.test.ts: canonical JSON byte-compatibility with Python and the seed's golden digests.
import { describe, expect, it } from 'vitest';

import { canonicalJson, manifestDigest, mountDigests, snapshotDigest, type ManifestEntry } from '../../dist/index.js';
import { compareUtf8, sha256Hex } from '../../dist/internal.js';

const file = (path: string, content: string): ManifestEntry => ({
  kind: 'file',
  path,
  size: Buffer.byteLength(content),
  sha256: sha256Hex(content),
  mode: 0,
  link_target: '',
});

describe('canonicalJson', () => {
  it('sorts keys, drops spaces and escapes like json.dumps(ensure_ascii=True)', () => {
    expect(canonicalJson({ b: 1, a: [true, false, null], c: 'x' })).toBe('{"a":[true,false,null],"b":1,"c":"x"}');
    expect(canonicalJson('"\\\b\f\n\r\t')).toBe('"\\"\\\\\\b\\f\\n\\r\\t"');
    expect(canonicalJson('\u0000\u001f\u007f')).toBe('"\\u0000\\u001f\\u007f"');
    expect(canonicalJson('é€')).toBe('"\\u00e9\\u20ac"');
    expect(canonicalJson('😀')).toBe('"\\ud83d\\ude00"');
    expect(canonicalJson('/~ ')).toBe('"/~ "');
  });

  it('sorts keys by code point, not UTF-16 unit', () => {
    expect(canonicalJson({ '\uffff': 1, '😀': 2 })).toBe('{"\\uffff":1,"\\ud83d\\ude00":2}');
    expect(compareUtf8('\uffff', '😀')).toBeLessThan(0);
    expect(compareUtf8('a', 'a/b')).toBeLessThan(0);
    expect(compareUtf8('a-b', 'a/b')).toBeLessThan(0);
  });

  it('writes numbers as Python does', () => {
    expect(canonicalJson([0, -5, 2 ** 53, 1.5, 0.0001, 1e-5, 1e16, 123456789012.25, 10n ** 20n])).toBe(
      '[0,-5,9007199254740992,1.5,0.0001,1e-05,10000000000000000,123456789012.25,100000000000000000000]',
    );
  });

  it('refuses values JSON cannot hold', () => {
    expect(() => canonicalJson({ a: undefined } as never)).toThrow(TypeError);
    expect(() => canonicalJson((() => 1) as never)).toThrow(TypeError);
  });
});

describe('golden digests (seed-compatible)', () => {
  it('copy ["one","two"] from /tmp/repo at revision a*40', () => {
    const entries = [file('one', '1'), file('two', '2')];
    const manifest = manifestDigest(entries);
    expect(manifest).toBe('9ae5789c2ed0b9aac154a385a78feda0255b76213fd2be5f2022e06e48b5e31e');
    const mounts = mountDigests([]);
    expect(mounts.contentDigest).toBe('4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945');
    expect(mounts.manifestDigest).toBe('d3b4762162da14671a9ab386aaf94b5ccd89eea18eb33b637134a52cdec1557b');
    expect(
      snapshotDigest({
        source: '/tmp/repo',
        revision: 'a'.repeat(40),
        declarations: ['one', 'two'],
        manifestDigest: manifest,
        mountContentDigest: mounts.contentDigest,
        mountManifestDigest: mounts.manifestDigest,
      }),
    ).toBe('3b082f959c1a4825be35c726240aa6c18e1dabce006582b65d3cc82b403ccd9b');
  });

  it('copy ["assets/index"] = "original"', () => {
    const entries: ManifestEntry[] = [
      { kind: 'directory', path: 'assets', size: 0, sha256: '', mode: 0, link_target: '' },
      file('assets/index', 'original'),
    ];
    expect(manifestDigest(entries)).toBe('368e1825c77615a6893010b262debd2ea539d98d0a9f146f8ced67f1bf3c27ec');
  });
});

describe('digests written directly equal canonicalJson of the seed objects', () => {
  const entries: ManifestEntry[] = [
    { kind: 'directory', path: 'payload', size: 0, sha256: '', mode: 0o755, link_target: '' },
    { kind: 'file', path: 'payload/\u00e9\n"q"\\', size: 12, sha256: 'a'.repeat(64), mode: 0o644, link_target: '' },
    { kind: 'symlink', path: 'payload/\u{1f600}', size: 3, sha256: 'b'.repeat(64), mode: 0, link_target: '../\u007f' },
  ];
  const objects = entries.map((e) => ({ kind: e.kind, link_target: e.link_target, mode: e.mode, path: e.path, sha256: e.sha256, size: e.size }));

  it('manifest and mount digests', () => {
    expect(manifestDigest(entries)).toBe(sha256Hex(canonicalJson(objects)));
    const mounts = [
      { source: 'node_modules', target: 'node_modules', entries },
      { source: 'a\u00e9', target: 'b"c', entries: entries.slice(0, 1) },
    ];
    const content = [{ entries: objects }, { entries: objects.slice(0, 1) }];
    expect(mountDigests(mounts)).toEqual({
      contentDigest: sha256Hex(canonicalJson(content)),
      manifestDigest: sha256Hex(
        canonicalJson({ dependencies: mounts.map((m, i) => ({ content: content[i]!, source: m.source, target: m.target })), schema_version: 1 }),
      ),
    });
  });
});
