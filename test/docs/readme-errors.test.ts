// readme-errors.test.ts: walks README's error table: every row's code and class is what a real call throws (sync) and rejects with (async), and the table lists exactly the codes there are.
import { appendFileSync, chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SEAL_CODES, SealError, SnapshotStore, freeze, freezeSync, readStable, readStableSync, writeFrozenFile, writeFrozenFileSync } from '../../dist/index.js';
import { failOnce, mkfifo, tempDir, wrapSys, writeTree } from '../helpers.js';

const README = readFileSync(fileURLToPath(new URL('../../README.md', import.meta.url)), 'utf8');

/** The rows of README's table under "## Errors": code, class and the text of "thrown when". */
function tableRows(): { code: string; cls: string; when: string }[] {
  const section = README.slice(README.indexOf('\n## Errors\n'), README.indexOf('\n## ', README.indexOf('\n## Errors\n') + 1));
  const rows = [];
  for (const line of section.split('\n')) {
    const m = /^\| `([A-Z_]+)` \| (\w+) \| (.+) \|$/.exec(line);
    if (m !== null) rows.push({ code: m[1]!, cls: m[2]!, when: m[3]! });
  }
  return rows;
}

const CLASSES: Record<string, new (...args: never[]) => Error> = { SealError, TypeError, RangeError };

/** A small repository and a store with one snapshot of it. */
function world(): { root: string; repo: string; store: SnapshotStore } {
  const root = tempDir();
  writeTree(root, { 'repo/src/a.txt': 'alpha', 'repo/src/b.txt': 'bravo', 'repo/dep/x.js': 'x', clone: null });
  return { root, repo: join(root, 'repo'), store: SnapshotStore.openSync(join(root, 'store')) };
}

type Call = () => unknown;

/**
 * One real call per row (`sync`), and its async twin where it has one (`async`), each
 * failing with that row's code. Keyed by code: a row without a witness fails the walk.
 */
const WITNESSES: Record<string, () => { sync?: Call; async?: () => Promise<unknown> }> = {
  SEAL_CHANGED: () => {
    // The file grows while it is copied: right after the first read of its bytes, a line is appended.
    const growing = () => {
      const { repo, root } = world();
      const path = join(repo, 'src/a.txt');
      let appended = false;
      const sys = wrapSys({
        pread: (orig) => (...args) => {
          const n = orig(...args);
          if (!appended && n > 0) {
            appended = true;
            appendFileSync(path, 'more\n');
          }
          return n;
        },
      });
      return { store: SnapshotStore.openSync(join(root, 'other'), { sys }), options: { source: repo, copy: ['src'], parallelism: 0, statCache: false } };
    };
    const one = growing();
    const two = growing();
    return { sync: () => one.store.captureSync(one.options), async: () => two.store.capture(two.options) };
  },
  SEAL_SYMLINK: () => {
    const { repo, store } = world();
    symlinkSync('a.txt', join(repo, 'src/link'));
    return { sync: () => store.captureSync({ source: repo, copy: ['src'] }), async: () => store.capture({ source: repo, copy: ['src'] }) };
  },
  SEAL_SPECIAL_FILE: () => {
    const { repo, store } = world();
    mkfifo(join(repo, 'src/fifo'));
    return { sync: () => store.captureSync({ source: repo, copy: ['src'] }), async: () => store.capture({ source: repo, copy: ['src'] }) };
  },
  SEAL_LIMIT: () => {
    const { repo } = world();
    return { sync: () => readStableSync(join(repo, 'src/a.txt'), { maxBytes: 2 }), async: () => readStable(join(repo, 'src/a.txt'), { maxBytes: 2 }) };
  },
  SEAL_BAD_PATH: () => ({ sync: () => SnapshotStore.openSync('relative/store'), async: () => SnapshotStore.open('relative/store') }),
  SEAL_OVERLAP: () => {
    const { repo, store } = world();
    return { sync: () => store.captureSync({ source: repo, copy: ['src', 'src/a.txt'] }), async: () => store.capture({ source: repo, copy: ['src', 'src/a.txt'] }) };
  },
  SEAL_COLLISION: () => {
    const { repo } = world();
    const path = join(repo, 'src/a.txt');
    return { sync: () => writeFrozenFileSync(path, Buffer.from('new')), async: () => writeFrozenFile(path, Buffer.from('new')) };
  },
  SEAL_BINDING: () => {
    const { repo, store } = world();
    const options = { source: repo, copy: ['src'], mounts: [{ source: 'dep', target: 'node_modules' }], expectMounts: { contentDigest: '0'.repeat(64), manifestDigest: '0'.repeat(64) } };
    return { sync: () => store.captureSync(options), async: () => store.capture(options) };
  },
  SEAL_ESCAPE: () => {
    const { repo, store } = world();
    symlinkSync('../../src/a.txt', join(repo, 'dep/out'));
    const options = { source: repo, copy: ['src'], mounts: [{ source: 'dep', target: 'node_modules' }] };
    return { sync: () => store.captureSync(options), async: () => store.capture(options) };
  },
  SEAL_UNAVAILABLE: () => {
    const { store } = world();
    return { sync: () => store.get('f'.repeat(64)), async: () => store.getAsync('f'.repeat(64)) };
  },
  SEAL_NO_REFLINK: () => {
    // tmpfs cannot clone: `reflink: 'always'` refuses before writing anything.
    const root = tempDir('/dev/shm');
    writeTree(root, { 'repo/src/a.txt': 'alpha', clone: null });
    const store = SnapshotStore.openSync(join(root, 'store'));
    const snap = store.captureSync({ source: join(root, 'repo'), copy: ['src'] });
    return { sync: () => snap.materializeSync(join(root, 'clone'), { reflink: 'always' }), async: () => snap.materialize(join(root, 'clone'), { reflink: 'always' }) };
  },
  SEAL_CORRUPT: () => {
    const { repo, store } = world();
    const snap = store.captureSync({ source: repo, copy: ['src'] });
    const stored = join(snap.root, 'copy/src/a.txt');
    chmodSync(stored, 0o600);
    writeFileSync(stored, 'ALPHA');
    chmodSync(stored, 0o400);
    return { sync: () => snap.verifySync(), async: () => snap.verify() };
  },
  SEAL_UNTRUSTED: () => {
    const root = tempDir();
    mkdirSync(join(root, 'store'));
    // A store anyone can write: what another user could have planted in it is not trusted.
    chmodSync(join(root, 'store'), 0o777);
    return { sync: () => SnapshotStore.openSync(join(root, 'store')), async: () => SnapshotStore.open(join(root, 'store')) };
  },
  SEAL_CLOSED: () => {
    const { store } = world();
    store.closeSync();
    return { sync: () => store.list(), async: () => store.listAsync() };
  },
  SEAL_ABORTED: () => {
    const { repo, store } = world();
    const signal = AbortSignal.abort();
    return { sync: () => store.captureSync({ source: repo, copy: ['src'], signal }), async: () => store.capture({ source: repo, copy: ['src'], signal }) };
  },
  SEAL_BUSY: () => {
    const { repo, store } = world();
    const snap = store.captureSync({ source: repo, copy: ['src'] });
    snap.lease();
    return { sync: () => store.remove(snap.digest), async: () => store.removeAsync(snap.digest) };
  },
  SEAL_AMBIGUOUS: () => {
    const { root, store } = world();
    // 17 snapshots: two of them share a first hex digit.
    const firsts = new Map<string, number>();
    let shared: string | undefined;
    for (let i = 0; shared === undefined; i++) {
      writeTree(root, { [`repo/n/${i}`]: String(i) });
      const d = store.captureSync({ source: join(root, 'repo'), copy: ['n'] }).digest;
      firsts.set(d[0]!, (firsts.get(d[0]!) ?? 0) + 1);
      if (firsts.get(d[0]!) === 2) shared = d[0]!;
    }
    const prefix = shared;
    return { sync: () => store.remove(prefix), async: () => store.removeAsync(prefix) };
  },
  SEAL_REMOTE: () => {
    const { repo, store } = world();
    const digest = store.captureSync({ source: repo, copy: ['src'] }).digest;
    // Nothing listens on port 1 of loopback: the registry cannot be reached.
    // push is async only.
    return { async: () => store.push(digest, '127.0.0.1:1/treeseal/x', { retries: 0 }) };
  },
  SEAL_IO: () => {
    const { repo } = world();
    const { sys } = failOnce('fchmod', 'ENOSPC');
    const { sys: again } = failOnce('fchmod', 'ENOSPC');
    return { sync: () => freezeSync(join(repo, 'src'), { sys }), async: () => freeze(join(repo, 'src'), { sys: again }) };
  },
  ERR_INVALID_ARG_TYPE: () => ({ sync: () => freezeSync(42 as unknown as string), async: () => freeze(42 as unknown as string) }),
  ERR_INVALID_ARG_VALUE: () => {
    const { repo, store } = world();
    const snap = store.captureSync({ source: repo, copy: ['src'] });
    const options = { reflink: 'sometimes' as 'auto' };
    return { sync: () => snap.materializeSync(join(repo, '..', 'clone'), options), async: () => snap.materialize(join(repo, '..', 'clone'), options) };
  },
  ERR_OUT_OF_RANGE: () => {
    const { repo, store } = world();
    return { sync: () => store.captureSync({ source: repo, copy: ['src'], parallelism: 65 }), async: () => store.capture({ source: repo, copy: ['src'], parallelism: 65 }) };
  },
};

describe("README's error table", () => {
  const rows = tableRows();

  it('lists every SealError code exactly once, and Node\'s three argument codes', () => {
    const codes = rows.map((r) => r.code);
    expect(new Set(codes).size).toBe(codes.length);
    expect(codes.filter((c) => c.startsWith('SEAL_')).sort()).toEqual([...SEAL_CODES].sort());
    expect(codes.filter((c) => !c.startsWith('SEAL_')).sort()).toEqual(['ERR_INVALID_ARG_TYPE', 'ERR_INVALID_ARG_VALUE', 'ERR_OUT_OF_RANGE']);
    for (const r of rows) expect([r.code, Object.keys(CLASSES).includes(r.cls)]).toEqual([r.code, true]);
  });

  for (const row of tableRows()) {
    it(`${row.code} (${row.cls}): a real call throws it and its async twin rejects with it`, async () => {
      const make = WITNESSES[row.code];
      expect(make, `no witness for README's row ${row.code}`).toBeDefined();
      const { sync, async } = make!();
      const Cls = CLASSES[row.cls]!;
      const seen: unknown[] = [];
      if (sync !== undefined) {
        try {
          sync();
          seen.push('no error');
        } catch (err) {
          seen.push(err);
        }
      }
      if (async !== undefined) seen.push(await async().then(() => 'no error', (err: unknown) => err));
      expect(seen.length).toBeGreaterThan(0);
      for (const err of seen) {
        expect(err).toBeInstanceOf(Cls);
        expect((err as { code?: string }).code).toBe(row.code);
      }
    });
  }
});
