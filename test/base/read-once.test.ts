// read-once.test.ts: a caller's options are read once, so what is checked is what is used (getters, Proxies, an object changed after the call); the digest helpers check their input.
import { closeSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, canonicalJson, readStable, readStableAt, readStableSync, sandboxArgs, snapshotDigest, writeFrozenFileSync } from '../../dist/index.js';
import { expectError, tempDir, writeTree } from '../helpers.js';

/** An options object whose `key` answers `first` on its first read and `later` on every read after. */
function shifting<T>(key: string, first: T, later: T, rest: Record<string, unknown> = {}): { options: Record<string, unknown>; reads: () => number } {
  let n = 0;
  const options = { ...rest };
  Object.defineProperty(options, key, { enumerable: true, get: () => (n++ === 0 ? first : later) });
  return { options, reads: () => n };
}

function repo(): { work: string; source: string } {
  const work = tempDir();
  const source = join(work, 'src');
  writeTree(source, { 'top.txt': 'top', 'secret/key': 'private', 'lib/a.ts': 'a' });
  return { work, source };
}

describe('options are read once', () => {
  it('capture: a copy list checked as one root is the one captured (it was read again as omitted: the whole source), sync and async', async () => {
    const { work, source } = repo();
    const store = await SnapshotStore.open(join(work, 'store'));
    for (const call of ['sync', 'async'] as const) {
      const { options, reads } = shifting('copy', ['top.txt'], undefined, { source, revision: call });
      const snap = call === 'sync' ? store.captureSync(options as never) : await store.capture(options as never);
      expect(snap.declarations).toEqual(['top.txt']);
      expect(snap.entries.map((e) => e.path)).toEqual(['top.txt']);
      expect(reads()).toBe(1);
    }
    await store.close();
  });

  it('open: options changed after the call (or answering otherwise on a second read) are not what the store uses', async () => {
    const { work, source } = repo();
    const opts: { concurrency: number; ephemeral?: boolean } = { concurrency: 2 };
    const pending = SnapshotStore.open(join(work, 'store'), opts);
    opts.concurrency = 0;
    opts.ephemeral = true;
    const store = await pending;
    expect(store.concurrency).toBe(2);
    expect(store.ephemeral).toBe(false);
    expect((await store.capture({ source, copy: ['lib'] })).entries.map((e) => e.path)).toEqual(['lib', 'lib/a.ts']);
    await store.close();
    expect(statSync(join(work, 'store/snapshots')).isDirectory()).toBe(true);
    const { options } = shifting('concurrency', 3, 0);
    const sync = SnapshotStore.openSync(join(work, 'store'), options as never);
    expect(sync.concurrency).toBe(3);
    sync.closeSync();
  });

  it('readStable: the maxBytes checked is the limit enforced (a second read of 2**53 let a 100-byte file past a limit of 10), readStableAt too', async () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, Buffer.alloc(100, 7));
    const message = `file exceeds the per-file limit (10 bytes): ${path}`;
    expectError(() => readStableSync(path, shifting('maxBytes', 10, 2 ** 53).options as never), { code: 'SEAL_LIMIT', message });
    await expectError(async () => readStable(path, shifting('maxBytes', 10, 2 ** 53).options as never), { code: 'SEAL_LIMIT', message });
    const dirfd = openSync(dir, 'r');
    expectError(() => readStableAt(dirfd, 'f', shifting('maxBytes', 10, undefined).options as never), { code: 'SEAL_LIMIT', message: 'file exceeds the per-file limit (10 bytes): f' });
    closeSync(dirfd);
  });

  it('an option that is not enumerable is still read, once (a non-enumerable copy list was dropped: the whole source captured)', async () => {
    const { work, source } = repo();
    const store = await SnapshotStore.open(join(work, 'store'));
    const options: Record<string, unknown> = { source };
    Object.defineProperty(options, 'copy', { value: ['top.txt'], enumerable: false });
    expect((await store.capture(options as never)).declarations).toEqual(['top.txt']);
    await store.close();
  });

  it('an onProgress checked as absent is never called (a second read of 42 was "callback is not a function", no code)', async () => {
    const { work, source } = repo();
    const store = await SnapshotStore.open(join(work, 'store'));
    const snap = await store.capture({ ...shifting('onProgress', undefined, 42, { source, copy: ['lib'] }).options } as never);
    // The spread above read the getter already: pass the shifting object itself.
    const shifty = shifting('onProgress', undefined, 42, { source, copy: ['lib', 'top.txt'] });
    expect((await store.capture(shifty.options as never)).declarations).toEqual(['lib', 'top.txt']);
    const clone = join(work, 'clone');
    await snap.materialize(clone, shifting('onProgress', undefined, 42, { createClone: true }).options as never);
    expect(readFileSync(join(clone, 'lib/a.ts'), 'utf8')).toBe('a');
    expect((await snap.verify(shifting('onProgress', undefined, 42).options as never)).entries).toBe(2);
    expect((await snap.reset(clone, shifting('onProgress', undefined, 42).options as never)).method).toBe('reset');
    await store.close();
  });

  it('writeFrozenFile: executable checked as false makes a 0444 file (a second read of true made it 0555)', () => {
    const dir = tempDir();
    writeFrozenFileSync(join(dir, 'f'), Buffer.from('x'), shifting('executable', false, true).options as never);
    expect(statSync(join(dir, 'f')).mode & 0o7777).toBe(0o444);
  });

  it('sandboxArgs: a system directory checked as /usr is the one bound (a second read of a relative path was put in the bwrap line)', async () => {
    const { work, source } = repo();
    const store = await SnapshotStore.open(join(work, 'store'));
    const snap = await store.capture({ source, copy: ['lib'] });
    const clone = join(work, 'clone');
    await snap.materialize(clone, { createClone: true });
    let n = 0;
    const system = new Proxy(['/usr'], { get: (t, k, r) => (k === '0' && n++ > 0 ? 'relative/../x' : Reflect.get(t, k, r)) });
    const args = sandboxArgs(snap, clone, { system });
    expect(args.bwrap.join(' ')).toContain('--ro-bind /usr /usr');
    expect(args.bwrap.join(' ')).not.toContain('relative');
    // A Proxy of a valid options object is as good as the object, sync and async.
    const proxied = new Proxy({ workspace: '/workspace' }, {});
    expect((await snap.mountPointsAsync(clone, proxied)).map((m) => m.target)).toEqual(snap.mountPoints(clone, proxied).map((m) => m.target));
    // A workspace that is no string is the same TypeError, sync and async (async once said it could not be sent to a worker).
    const expected = { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.workspace" property must be of type string. Received type symbol (Symbol(w))' };
    expectError(() => snap.mountPoints(clone, { workspace: Symbol('w') } as never), expected);
    await expectError(async () => snap.mountPointsAsync(clone, { workspace: Symbol('w') } as never), expected);
    expectError(() => sandboxArgs(snap, clone, { workspace: null } as never), { code: 'ERR_INVALID_ARG_TYPE' });
    expectError(() => sandboxArgs(snap, clone, { workspace: '/workspace//' }), { code: 'SEAL_BAD_PATH', message: 'workspace must be a canonical absolute path: /workspace/' });
    expectError(() => sandboxArgs(snap, clone, { system: null } as never), { code: 'ERR_INVALID_ARG_TYPE' });
    await store.close();
  });
});

describe('the digest helpers check their input', () => {
  const parts = { source: '/src', revision: 'r', declarations: ['a'], manifestDigest: 'a'.repeat(64), mountContentDigest: 'b'.repeat(64), mountManifestDigest: 'c'.repeat(64) };

  it('snapshotDigest: an object of strings (and string lists), no other key', () => {
    expect(snapshotDigest(parts)).toBe(snapshotDigest({ ...parts, exclude: [] }));
    expectError(() => snapshotDigest(undefined as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "input" argument must be of type object. Received undefined' });
    expectError(() => snapshotDigest({ ...parts, source: 42 } as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "input.source" property must be of type string. Received type number (42)' });
    expectError(() => snapshotDigest({ ...parts, declarations: 'a' } as never), { code: 'ERR_INVALID_ARG_TYPE' });
    expectError(() => snapshotDigest({ ...parts, exclude: [5] } as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "input.exclude[0]" property must be of type string. Received type number (5)' });
    expectError(() => snapshotDigest({ ...parts, bogus: 1 } as never), { code: 'ERR_INVALID_ARG_VALUE' });
    // What no capture gives: a relative source, a digest that is not sha256 hex.
    expectError(() => snapshotDigest({ ...parts, source: 'rel' }), { code: 'ERR_INVALID_ARG_VALUE', message: "The property 'input.source' must be an absolute path. Received 'rel'" });
    expectError(() => snapshotDigest({ ...parts, manifestDigest: 'zz' }), { code: 'ERR_INVALID_ARG_VALUE' });
    expectError(() => snapshotDigest({ ...parts, mountContentDigest: 'A'.repeat(64) }), { code: 'ERR_INVALID_ARG_VALUE' });
    const { manifestDigest: _m, ...missing } = parts;
    expectError(() => snapshotDigest(missing as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "input.manifestDigest" property must be of type string. Received undefined' });
  });

  it('canonicalJson: JSON values only (a Date or a Map was written as {}, undefined an untyped TypeError)', () => {
    expect(canonicalJson({ b: [1, null, 'x'], a: true })).toBe('{"a":true,"b":[1,null,"x"]}');
    expectError(() => canonicalJson(undefined as never), { code: 'ERR_INVALID_ARG_TYPE' });
    expectError(() => canonicalJson(new Date(0) as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "value" argument must be of type plain object or an instance of Array. Received an instance of Date' });
    expectError(() => canonicalJson({ a: [new Map()] } as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "value.a[0]" property must be of type plain object or an instance of Array. Received an instance of Map' });
    expectError(() => canonicalJson({ a: undefined } as never), { code: 'ERR_INVALID_ARG_TYPE' });
    // Checked and written from one read: a getter answering a number, then a Date, writes the number.
    let n = 0;
    const shifty = {};
    Object.defineProperty(shifty, 'a', { enumerable: true, get: () => (n++ === 0 ? 1 : new Date(0)) });
    expect(canonicalJson(shifty as never)).toBe('{"a":1}');
  });
});
