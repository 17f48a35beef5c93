// public-args.test.ts: the exported helpers and the `sys` option refuse a wrong argument with Node's TypeError or RangeError naming it, never a bare JavaScript error.
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import {
  SEAL_CODES,
  SnapshotStore,
  escapePath,
  freezeSync,
  manifestDigest,
  mountDigests,
  readStableAt,
  readStableSync,
  stageFilesSync,
  writeFrozenFileSync,
} from '../../dist/index.js';
import { expectError, tempDir, writeTree } from '../helpers.js';

describe('exported helpers', () => {
  it('escapePath takes a string or a Buffer; manifestDigest and mountDigests take entry lists, naming the first entry that is not one', () => {
    expectError(() => escapePath(5 as unknown as string), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "path" argument must be of type string or an instance of Buffer. Received type number (5)' });
    expectError(() => manifestDigest([{}] as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'entries[0]' must be a manifest entry ({ kind, path, size, sha256, mode, link_target }). Received {}",
    });
    expectError(() => manifestDigest('x' as never), { code: 'ERR_INVALID_ARG_TYPE' });
    expectError(() => mountDigests([{ source: 'a', target: 'b', entries: [null] }] as never), { code: 'ERR_INVALID_ARG_VALUE' });
    expectError(() => mountDigests([{ source: 1, target: 'b', entries: [] }] as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "mounts[0].source" property must be of type string. Received type number (1)' });
    // The seed's digest of an empty list, unchanged by the check.
    expect(manifestDigest([])).toBe('4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945');
  });

  it('SEAL_CODES cannot be changed', () => {
    expect(Object.isFrozen(SEAL_CODES)).toBe(true);
    expect(() => (SEAL_CODES as string[]).push('SEAL_X')).toThrow(TypeError);
  });

  it('the sys option is the addon\'s layer or an object of its calls: anything else is a TypeError before anything is made', () => {
    const dir = tempDir();
    writeTree(join(dir, 'tree'), { f: 'x' });
    const store = join(dir, 'store');
    expectError(() => SnapshotStore.openSync(store, { sys: 5 as never }), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.sys" property must be of type object. Received type number (5)' });
    expectError(() => SnapshotStore.openSync(store, { sys: {} as never }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.sys' must be a syscall layer (treeseal/sys): its openat is not a function. Received {}",
    });
    expect(existsSync(store)).toBe(false);
    for (const call of [
      () => freezeSync(join(dir, 'tree'), { sys: 5 as never }),
      () => readStableSync(join(dir, 'tree/f'), { maxBytes: 9, sys: 5 as never }),
      () => readStableAt(-100, 'x', { maxBytes: 9, sys: 5 as never }),
      () => writeFrozenFileSync(join(dir, 'w'), Buffer.from('x'), { sys: 5 as never }),
      () => stageFilesSync(dir, [{ target: 'a', bytes: Buffer.from('x') }], { sys: 5 as never }),
    ]) {
      expectError(call, { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.sys" property must be of type object. Received type number (5)' });
    }
    expect(readdirSync(dir).sort()).toEqual(['tree']);
  });

  it("readStableAt's dirfd is checked as Node checks an fd (it was the read's SEAL_UNAVAILABLE)", () => {
    expectError(() => readStableAt(-1, 'x', { maxBytes: 1 }), { code: 'ERR_OUT_OF_RANGE', message: 'The value of "dirfd" is out of range. It must be >= 0 && <= 2147483647. Received -1' });
    expectError(() => readStableAt('3' as never, 'x', { maxBytes: 1 }), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "dirfd" argument must be of type number. Received type string (\'3\')' });
    expectError(() => readStableAt(1.5, 'x', { maxBytes: 1 }), { code: 'ERR_OUT_OF_RANGE' });
  });

  it('a revision of null is a TypeError, as any other non-string (it was taken as "")', () => {
    const dir = tempDir();
    writeTree(join(dir, 'src'), { 'a/f': 'x' });
    const store = SnapshotStore.openSync(join(dir, 'store'));
    expectError(() => store.captureSync({ source: join(dir, 'src'), copy: ['a'], revision: null as never }), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.revision" property must be of type string. Received null',
    });
    store.closeSync();
  });
});

describe('option keys a call does not take', () => {
  it('are ERR_INVALID_ARG_VALUE naming the key and the call\'s options, before anything is made (a misspelt copy once captured every top-level entry; a misspelt keepLast removed nothing and said nothing)', async () => {
    const dir = tempDir();
    writeTree(join(dir, 'src'), { 'a/f': 'x', 'b/g': 'y' });
    const notAn = (key: string, value: string, op: string, keys: string) => ({
      code: 'ERR_INVALID_ARG_VALUE',
      message: `The property 'options.${key}' is not an option of ${op} (${keys}). Received ${value}`,
    });
    expectError(() => SnapshotStore.openSync(join(dir, 'store'), { concurency: 4 } as never), notAn('concurency', '4', 'open', 'ephemeral, trust, concurrency, sys'));
    expect(existsSync(join(dir, 'store'))).toBe(false);
    const store = SnapshotStore.openSync(join(dir, 'store'));
    const captureKeys = 'source, copy, exclude, mounts, revision, expectMounts, limits, keepExecutable, keepTimes, workspace, links, parallelism, statCache, signal, onProgress';
    expectError(() => store.captureSync({ source: join(dir, 'src'), copyy: ['a'] } as never), notAn('copyy', "[ 'a' ]", 'capture', captureKeys));
    await expectError(async () => store.capture({ source: join(dir, 'src'), copyy: ['a'] } as never), notAn('copyy', "[ 'a' ]", 'capture', captureKeys));
    expect(store.list()).toEqual([]);
    const snap = store.captureSync({ source: join(dir, 'src'), copy: ['a'] });
    const clone = join(dir, 'clone');
    expectError(() => snap.materializeSync(clone, { createclone: true } as never), notAn('createclone', 'true', 'materialize', 'createClone, reflink, fallbackBytes, onProgress, signal'));
    expect(existsSync(clone)).toBe(false);
    snap.materializeSync(clone, { createClone: true });
    expectError(() => snap.resetSync(clone, { cleen: true } as never), notAn('cleen', 'true', 'reset', 'clean, reflink, fallbackBytes, onProgress, signal'));
    expectError(() => snap.diffSync(clone, { verfy: true } as never), notAn('verfy', 'true', 'diff', 'verify, all'));
    expectError(() => snap.verifySync({ paralelism: 2 } as never), notAn('paralelism', '2', 'verify', 'onProgress, parallelism, signal'));
    expectError(() => store.prune({ keepLst: 1 } as never), { code: 'ERR_INVALID_ARG_VALUE', message: "The property 'policy.keepLst' is not an option of prune (olderThanMs, keepLast, maxBytes). Received 1" });
    expectError(() => readStableSync(join(dir, 'src/a/f'), { maxBytes: 9, maxbytes: 1 } as never), notAn('maxbytes', '1', 'readStable', 'maxBytes, sys'));
    await expectError(async () => store.push(snap.digest, '127.0.0.1:9/x', { tga: 'v1' } as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.tga' is not an option of push (concurrency, signal, onProgress, onRetry, insecure, credentials, caFile, retries, timeouts, connections, mountFrom, chunkBytes, monolithicBytes, tag). Received 'v1'",
    });
    expect(store.list()).toEqual([snap.digest]);
    store.closeSync();
  });
});

describe('lists past their bound', () => {
  it('are ERR_OUT_OF_RANGE by their length, before an item is read (a copy list whose length was set to 2^32 - 1 held the call 90 s, then threw V8\'s own TypeError; a million exclude patterns filled the heap)', () => {
    const dir = tempDir();
    writeTree(join(dir, 'src'), { 'a/f': 'x' });
    const store = SnapshotStore.openSync(join(dir, 'store'));
    const huge = ['a'];
    huge.length = 2 ** 32 - 1;
    const t = performance.now();
    expectError(() => store.captureSync({ source: join(dir, 'src'), copy: huge }), { code: 'ERR_OUT_OF_RANGE', message: 'The value of "options.copy.length" is out of range. It must be <= 1048576. Received 4294967295' });
    expectError(() => store.captureSync({ source: join(dir, 'src'), copy: ['a'], mounts: huge as never }), { code: 'ERR_OUT_OF_RANGE', message: 'The value of "options.mounts.length" is out of range. It must be <= 1048576. Received 4294967295' });
    expectError(() => stageFilesSync(dir, huge as never), { code: 'ERR_OUT_OF_RANGE', message: 'The value of "files.length" is out of range. It must be <= 1048576. Received 4294967295' });
    expect(performance.now() - t).toBeLessThan(5000);
    const patterns = Array.from({ length: 10_001 }, (_, i) => `p${i}`);
    expectError(() => store.captureSync({ source: join(dir, 'src'), copy: ['a'], exclude: patterns }), { code: 'ERR_OUT_OF_RANGE', message: 'The value of "options.exclude.length" is out of range. It must be <= 10000. Received 10001' });
    expect(store.captureSync({ source: join(dir, 'src'), copy: ['a'], exclude: patterns.slice(1) }).entries.map((e) => e.path)).toEqual(['a', 'a/f']);
    store.closeSync();
  });
});

describe('options Object.prototype supplies', () => {
  it('are refused, never taken: a polluted Object.prototype.ephemeral made a plain open remove the whole store at close, .clean made a plain reset remove what lies outside the copy roots', async () => {
    const dir = tempDir();
    writeTree(join(dir, 'src'), { 'a/f': 'x' });
    const store = SnapshotStore.openSync(join(dir, 'store'));
    const snap = store.captureSync({ source: join(dir, 'src'), copy: ['a'] });
    const clone = join(dir, 'clone');
    snap.materializeSync(clone, { createClone: true });
    writeFileSync(join(clone, 'precious'), 'outside the copy roots');
    const inherited = (key: string, shown: string) => ({
      code: 'ERR_INVALID_ARG_VALUE',
      message: `The property '${key}' is set on Object.prototype, not on the options object (is Object.prototype polluted?). Received ${shown}`,
    });
    const polluted = <T>(key: string, value: unknown, call: () => T): T => {
      (Object.prototype as Record<string, unknown>)[key] = value;
      try {
        return call();
      } finally {
        delete (Object.prototype as Record<string, unknown>)[key];
      }
    };
    for (const given of [undefined, {}]) {
      polluted('ephemeral', true, () => expectError(() => SnapshotStore.openSync(join(dir, 'store'), given), inherited('options.ephemeral', 'true')));
      polluted('clean', true, () => expectError(() => snap.resetSync(clone, given), inherited('options.clean', 'true')));
      polluted('createClone', true, () => expectError(() => snap.materializeSync(join(dir, 'other'), given), inherited('options.createClone', 'true')));
      polluted('exclude', ['f'], () => expectError(() => store.captureSync({ source: join(dir, 'src'), copy: ['a'], ...given }), inherited('options.exclude', "[ 'f' ]")));
      polluted('clone', clone, () => expectError(() => store.gc(given), inherited('options.clone', `'${clone}'`)));
    }
    // The async call checks its options on the calling thread, as it is made.
    const pending = polluted('clean', true, () => snap.reset(clone));
    await expectError(async () => pending, inherited('options.clean', 'true'));
    // A materialize into a clone holding its ledger resets it: a polluted clean never makes it clean.
    polluted('clean', true, () => expect(snap.materializeSync(clone)).toMatchObject({ reset: true }));
    // Options an object inherits from a prototype of the caller's (defaults under Object.create, a class's getter) are taken.
    expect(snap.diffSync(clone, Object.create({ verify: true }) as never)).toMatchObject({ ok: true, method: 'hash' });
    class Diff {
      get all(): boolean {
        return true;
      }
    }
    expect(snap.diffSync(clone, new Diff() as never)).toMatchObject({ outside: ['precious'] });
    expect(readFileSync(join(clone, 'precious'), 'utf8')).toBe('outside the copy roots');
    expect(existsSync(join(dir, 'other'))).toBe(false);
    store.closeSync();
    expect(existsSync(join(dir, 'store', 'snapshots', snap.digest))).toBe(true);
  });
});

describe('names that are not UTF-8', () => {
  it('escapePath shows a byte kept as a lone surrogate (U+DC80 + byte - 0x80, as reports hold it) as \\xNN, and a backslash as \\\\', () => {
    expect(escapePath('src/f\udcff\n')).toBe('src/f\\xff\\x0a');
    expect(escapePath('src/f\\xff')).toBe('src/f\\\\xff');
    // A lone surrogate below U+DC80 is no byte: shown as itself, escaped.
    expect(escapePath('a\udc41')).toBe('a\\udc41');
  });
});

describe('nameText', () => {
  it('decodes valid UTF-8 and keeps every other byte as a lone surrogate, so no two names give one string', async () => {
    const { nameText } = await import('../../dist/internal.js');
    const b = (...bytes: number[]) => Buffer.from(bytes);
    expect(nameText('plain')).toBe('plain');
    expect(nameText(b(0x61, 0xc3, 0xa9, 0xf0, 0x9f, 0x98, 0x80))).toBe('aé😀');
    expect(nameText(b(0x66, 0xff, 0x6f))).toBe('f\udcffo');
    // Overlong, a UTF-16 surrogate, past U+10FFFF, a cut sequence: each byte kept.
    expect(nameText(b(0xe0, 0x80, 0x80))).toBe('\udce0\udc80\udc80');
    expect(nameText(b(0xed, 0xa0, 0x80))).toBe('\udced\udca0\udc80');
    expect(nameText(b(0xf4, 0x90, 0x80, 0x80))).toBe('\udcf4\udc90\udc80\udc80');
    expect(nameText(b(0x61, 0xe2, 0x82))).toBe('a\udce2\udc82');
    expect(nameText(b(0xff))).not.toBe(nameText(Buffer.from('\\xff')));
  });
});

describe('option keys inside options', () => {
  it('a misspelt key of timeouts, credentials, expectMounts or a staged file is refused too (they were ignored: default deadlines, a file staged without what was asked)', async () => {
    const dir = tempDir();
    writeTree(join(dir, 'src'), { 'a/f': 'x' });
    const store = SnapshotStore.openSync(join(dir, 'store'));
    const snap = store.captureSync({ source: join(dir, 'src'), copy: ['a'] });
    await expectError(async () => store.push(snap.digest, '127.0.0.1:9/x', { timeouts: { headerMs: 5 } } as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.timeouts.headerMs' is not an option of timeouts (headersMs, idleMs, minBytesPerSecond). Received 5",
    });
    await expectError(async () => store.push(snap.digest, '127.0.0.1:9/x', { credentials: { username: 'u', password: 'p', registry: 'x' } } as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.credentials.registry' is not an option of credentials (username, password). Received 'x'",
    });
    expectError(() => store.captureSync({ source: join(dir, 'src'), copy: ['a'], expectMounts: { ...snap.mountBinding, contentDigst: 'x' } } as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.expectMounts.contentDigst' is not an option of expectMounts (contentDigest, manifestDigest). Received 'x'",
    });
    expectError(() => stageFilesSync(dir, [{ target: 'a', bytes: Buffer.from('x'), executable: true }] as never), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'files[0].executable' is not an option of a staged file (target, bytes). Received true",
    });
    expect(readdirSync(dir).sort()).toEqual(['src', 'store']);
    store.closeSync();
  });
});

describe('the path of a refused declaration', () => {
  it('stage targets that overlap or climb out name the path in err.path (it was undefined)', () => {
    const dir = tempDir();
    expectError(() => stageFilesSync(dir, [{ target: 'a', bytes: Buffer.from('x') }, { target: 'a', bytes: Buffer.from('y') }]), { code: 'SEAL_OVERLAP', message: 'stage targets overlap: a and a', path: 'a' });
    expectError(() => stageFilesSync(dir, [{ target: '../a', bytes: Buffer.from('x') }]), { code: 'SEAL_BAD_PATH', path: '../a' });
    expect(readdirSync(dir)).toEqual([]);
  });
});
