// obstacles.test.ts: a capture refused for symlinks, special files and mount links that escape names every one it found, in one SealError, on either thread; messages name the user's paths.
import { mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore, type CaptureCallOptions } from '../../dist/index.js';
import { reviveError, serializeError } from '../../dist/internal.js';
import { checkNoFdLeaks, expectError, mkfifo, storeLeftovers, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

function repoWith(tree: Record<string, string | null>): { base: string; repo: string } {
  const base = tempDir();
  const repo = join(base, 'repo');
  mkdirSync(repo);
  writeTree(repo, tree);
  return { base, repo };
}

/** The error a capture fails with, sync and async alike (class, code, message, path, details); nothing stored. */
async function refusal(repo: string, store: SnapshotStore, options: Omit<CaptureCallOptions, 'source'>, code = 'SEAL_SYMLINK'): Promise<SealError> {
  const sync = expectError(() => store.captureSync({ source: repo, ...options }), { code, unchanged: store.root }) as SealError;
  const shape = (e: SealError): unknown => ({ name: e.name, code: e.code, message: e.message, path: e.path, retryable: e.retryable, details: e.details });
  const async = (await expectError(async () => store.capture({ source: repo, ...options }), { code, unchanged: store.root })) as SealError;
  expect(shape(async)).toEqual(shape(sync));
  expect(Object.isFrozen(async.details)).toBe(true);
  expect(storeLeftovers(store.root)).toEqual([]);
  return sync;
}

const LINK = 'a symlink in copy root app: --links contained keeps it, --mount app captures app as a mount, --exclude /app/link leaves it out';
const OUT = 'a mount symlink that dangles or leads out of its payload or the workspace';

describe('every obstacle in one error', () => {
  it('a symlink, a FIFO and a socket in a copy root and two mount links that escape: all named, the first in the message', async () => {
    const { base, repo } = repoWith({ 'app/a.js': 'a', 'app/z.js': 'z', 'deps/p/i.js': 'i' });
    symlinkSync('a.js', join(repo, 'app/link'));
    mkfifo(join(repo, 'app/pipe'));
    symlinkSync('/etc/passwd', join(repo, 'deps/abs'));
    symlinkSync('../../../../x', join(repo, 'deps/p/up'));
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(join(repo, 'app/sock'), resolve));
    // The worker thread is the one the async capture runs on: a store on the addon's own layer.
    const store = await SnapshotStore.open(join(base, 'store'));
    try {
      const err = await refusal(repo, store, { copy: ['app'], mounts: [{ source: 'deps', target: 'node_modules' }] });
      expect(err.message).toBe('capture must not traverse a symlink: app/link (in copy root app: declare app as a mount (--mount app) or leave it out), and 4 more obstacles');
      expect(err.path).toBe('app/link');
      expect(err.retryable).toBe(false);
      expect(err.details).toEqual([
        { path: 'app/link', code: 'SEAL_SYMLINK', hint: LINK },
        { path: 'app/pipe', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: --exclude /app/pipe leaves it out' },
        { path: 'app/sock', code: 'SEAL_SPECIAL_FILE', hint: 'a socket: --exclude /app/sock leaves it out' },
        { path: 'deps/abs', code: 'SEAL_ESCAPE', hint: `${OUT}: --exclude /deps/abs leaves it out` },
        { path: 'deps/p/up', code: 'SEAL_ESCAPE', hint: `${OUT}: --exclude /deps/p/up leaves it out` },
      ]);
      // Each way out works: leaving them all out captures the rest.
      const snap = await store.capture({ source: repo, copy: ['app'], mounts: [{ source: 'deps', target: 'node_modules' }], exclude: err.details!.map((d) => `/${d.path}`) });
      expect(snap.entries.map((e) => e.path)).toEqual(['app', 'app/a.js', 'app/z.js']);
    } finally {
      await new Promise((resolve) => server.close(resolve));
      await store.close();
    }
  });

  it('a declared root on procfs or sysfs is SEAL_SPECIAL_FILE, not retryable, and the store holds nothing (it failed SEAL_CHANGED, retried for nothing)', async () => {
    const store = SnapshotStore.openSync(join(tempDir(), 'store'));
    for (const [source, root] of [['/proc/sys', 'kernel/hostname'], ['/proc/1', 'status'], ['/sys/kernel', 'mm']]) {
      const message = `declared root is on a kernel pseudo-filesystem (procfs, sysfs), whose files have no stable contents: ${root}`;
      expectError(() => store.captureSync({ source: source!, copy: [root!] }), { code: 'SEAL_SPECIAL_FILE', message, path: root, unchanged: store.root });
      const err = await store.capture({ source: source!, copy: [root!] }).then(() => undefined, (e: unknown) => e as SealError);
      expect([err?.retryable, err?.details]).toEqual([false, [{ path: root, code: 'SEAL_SPECIAL_FILE', hint: 'a special file: leaving it out of --copy leaves it out' }]]);
    }
    expect(storeLeftovers(store.root)).toEqual([]);
    store.closeSync();
  });

  it('one obstacle keeps its message and has its one detail', async () => {
    const { base, repo } = repoWith({ 'app/a.js': 'a' });
    symlinkSync('a.js', join(repo, 'app/link'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const err = await refusal(repo, store, { copy: ['app'] });
    expect([err.message, err.details]).toEqual([
      'capture must not traverse a symlink: app/link (in copy root app: declare app as a mount (--mount app) or leave it out)',
      [{ path: 'app/link', code: 'SEAL_SYMLINK', hint: LINK }],
    ]);
    store.closeSync();
  });

  it("with links: 'contained', copy-root links that are not contained join the obstacles the walk found", async () => {
    const { base, repo } = repoWith({ 'app/a.js': 'a' });
    symlinkSync('a.js', join(repo, 'app/ok'));
    symlinkSync('../../../etc', join(repo, 'app/out'));
    symlinkSync('nope', join(repo, 'app/dangling'));
    mkfifo(join(repo, 'app/pipe'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const err = await refusal(repo, store, { copy: ['app'], links: 'contained' }, 'SEAL_SPECIAL_FILE');
    expect([err.message, err.path]).toEqual(['capture accepts only regular files and directories: app/pipe, and 2 more obstacles', 'app/pipe']);
    const escaped = 'a symlink in a copy root that dangles or leads out of what the snapshot captures: capture what it leads to (as a copy root or a mount), or';
    expect(err.details).toEqual([
      { path: 'app/pipe', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: --exclude /app/pipe leaves it out' },
      { path: 'app/dangling', code: 'SEAL_ESCAPE', hint: `${escaped} --exclude /app/dangling leaves it out` },
      { path: 'app/out', code: 'SEAL_ESCAPE', hint: `${escaped} --exclude /app/out leaves it out` },
    ]);
    const snap = store.captureSync({ source: repo, copy: ['app'], links: 'contained', exclude: ['/app/pipe', '/app/dangling', '/app/out'] });
    expect(snap.entries.map((e) => `${e.kind} ${e.path}`)).toEqual(['directory app', 'file app/a.js', 'symlink app/ok']);
    store.closeSync();
  });

  it('past 100 obstacles the details hold the first 100 and the message counts them all', async () => {
    const { base, repo } = repoWith({ 'app/a.js': 'a' });
    for (let i = 0; i < 105; i++) symlinkSync('a.js', join(repo, `app/l${String(i).padStart(3, '0')}`));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const err = await refusal(repo, store, { copy: ['app'] });
    expect(err.message).toBe('capture must not traverse a symlink: app/l000 (in copy root app: declare app as a mount (--mount app) or leave it out), and 104 more obstacles (details lists the first 100)');
    expect(err.details!.length).toBe(100);
    expect(err.details![99]!.path).toBe('app/l099');
    store.closeSync();
  });

  it('declared roots that are links, and a link on the way to a declared root that stops the walk, join those found before', async () => {
    // With no copy roots named, a top-level link is one only because copy was left out: the hint says so, and names --copy.
    const TOP_LEVEL = (name: string): string =>
      `a top-level symlink (with no --copy every top-level entry is a copy root): --links contained keeps it, --exclude /${name} leaves it out, or name the copy roots with --copy`;
    const { base, repo } = repoWith({ 'app/a.js': 'a', 'real/y': 'y' });
    symlinkSync('a.js', join(repo, 'app/link'));
    symlinkSync('real', join(repo, 'alias'));
    symlinkSync('real', join(repo, 'way'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    // copy omitted: every top-level entry is a copy root, the link `alias` among them.
    const all = await refusal(repo, store, {});
    expect(all.details).toEqual([
      { path: 'alias', code: 'SEAL_SYMLINK', hint: TOP_LEVEL('alias') },
      { path: 'app/link', code: 'SEAL_SYMLINK', hint: LINK },
      { path: 'way', code: 'SEAL_SYMLINK', hint: TOP_LEVEL('way') },
    ]);
    // Named in copy: an exclude pattern would be refused (it leaves out a declared root), so the way out is the declaration.
    mkfifo(join(repo, 'real/fifo'));
    const named = await refusal(repo, store, { copy: ['alias', 'real/fifo'] });
    expect(named.details).toEqual([
      { path: 'alias', code: 'SEAL_SYMLINK', hint: 'a declared root that is a symlink: --links contained keeps it, declare what it points to, or leaving it out of --copy leaves it out' },
      { path: 'real/fifo', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: leaving it out of --copy leaves it out' },
    ]);
    rmSync(join(repo, 'real/fifo'));
    const stopped = await refusal(repo, store, { copy: ['app', 'way/y', 'real'] });
    expect(stopped.message).toBe('capture must not traverse a symlink: app/link (in copy root app: declare app as a mount (--mount app) or leave it out), and 1 more obstacle');
    expect(stopped.details).toEqual([
      { path: 'app/link', code: 'SEAL_SYMLINK', hint: LINK },
      { path: 'way', code: 'SEAL_SYMLINK', hint: 'a symlink on the way to a declared root: declare a path that does not pass through it' },
    ]);
    store.closeSync();
  });

  it('a name that needs quoting gets a quoted pattern that leaves exactly it out; a name that must be escaped gets none', async () => {
    const { base, repo } = repoWith({ 'app/a.js': 'a' });
    symlinkSync('a.js', join(repo, "app/it's [x]*"));
    symlinkSync('a.js', join(repo, 'app/new\nline'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const err = await refusal(repo, store, { copy: ['app'] });
    expect(err.details).toEqual([
      { path: "app/it's [x]*", code: 'SEAL_SYMLINK', hint: `a symlink in copy root app: --links contained keeps it, --mount app captures app as a mount, --exclude '/app/it'\\''s \\[x]\\*' leaves it out` },
      { path: 'app/new\nline', code: 'SEAL_SYMLINK', hint: 'a symlink in copy root app: --links contained keeps it, --mount app captures app as a mount, --exclude with a pattern for it leaves it out' },
    ]);
    const snap = store.captureSync({ source: repo, copy: ['app'], exclude: ["/app/it's \\[x]\\*", '/app/new*'] });
    expect(snap.entries.map((e) => e.path)).toEqual(['app', 'app/a.js']);
    store.closeSync();
  });

  it('details cross threads as they are', () => {
    const err = new SealError('SEAL_SPECIAL_FILE', 'capture accepts only regular files and directories: p, and 1 more obstacle', {
      path: 'p',
      details: [
        { path: 'p', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: --exclude /p leaves it out' },
        { path: 'l', code: 'SEAL_SYMLINK', hint: 'h' },
      ],
    });
    const back = reviveError(structuredClone(serializeError(err))) as SealError;
    expect(back).toBeInstanceOf(SealError);
    expect([back.code, back.message, back.path, back.details]).toEqual([err.code, err.message, err.path, err.details]);
    expect(new SealError('SEAL_SYMLINK', 'x').details).toBeUndefined();
  });
});

describe("messages name the user's paths, never the store's", () => {
  it('a mount source that is a link, or holds a special file or a changed file, is named by its source path', async () => {
    const { base, repo } = repoWith({ 'web/deps/lib/a.js': 'a', 'cfg/app.json': '{}' });
    symlinkSync('cfg', join(repo, 'alias'));
    mkfifo(join(repo, 'web/deps/lib/fifo'));
    const store = SnapshotStore.openSync(join(base, 'store'), { ephemeral: true });
    const err = await refusal(repo, store, { copy: [], mounts: [{ source: 'alias', target: 'x' }, { source: 'web/deps', target: 'deps' }] });
    expect([err.message, err.path]).toEqual(['capture must not traverse a symlink: alias, and 1 more obstacle', 'alias']);
    expect(err.details).toEqual([
      { path: 'alias', code: 'SEAL_SYMLINK', hint: 'a declared root that is a symlink: declare what it points to, or leaving out its --mount leaves it out' },
      { path: 'web/deps/lib/fifo', code: 'SEAL_SPECIAL_FILE', hint: 'a FIFO: --exclude /web/deps/lib/fifo leaves it out' },
    ]);
    expectError(() => store.captureSync({ source: repo, copy: [], mounts: [{ source: 'web/deps', target: 'deps' }], limits: { maxFileBytes: 0 } }), {
      code: 'SEAL_LIMIT',
      message: 'file exceeds the per-file limit (0 bytes): web/deps/lib/a.js',
      path: 'web/deps/lib/a.js',
      unchanged: store.root,
    });
    store.closeSync();
  });
});
