// recapture-mmap.test.ts: the stat cache sees a write through a shared mapping that was already dirty: writeback before a record, no reuse on tmpfs.
import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { SnapshotStore, type Snapshot } from '../../dist/index.js';
import { SETTLED, checkNoFdLeaks, failOnce, reflinkMount, rootOrSkip, storeLeftovers, tempDir, writeTree } from '../helpers.js';
import type { Sys } from '../../dist/sys/index.js';

checkNoFdLeaks();

const TREE = { 'tree/mapped.bin': Buffer.alloc(8192, 0x61), 'tree/other.txt': 'other', 'tree/sub/more.txt': 'more' };
const FILES = 3;

/**
 * A python3 process holding tree/mapped.bin mapped MAP_SHARED: each `poke(offset, byte)`
 * stores one byte through the mapping (no msync, no write()), answered once done.
 */
class Mapper {
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #lines: Interface;
  readonly #waiting: ((line: string) => void)[] = [];

  constructor(path: string) {
    const script = [
      'import mmap, os, sys',
      'fd = os.open(sys.argv[1], os.O_RDWR)',
      'm = mmap.mmap(fd, 0, mmap.MAP_SHARED)',
      'print("mapped", flush=True)',
      'for line in sys.stdin:',
      '    at, byte = line.split()',
      '    m[int(at)] = int(byte)',
      '    print("ok", flush=True)',
    ].join('\n');
    this.#child = spawn('python3', ['-c', script, path]);
    this.#lines = createInterface({ input: this.#child.stdout });
    this.#lines.on('line', (line) => this.#waiting.shift()?.(line));
  }

  #next(): Promise<string> {
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  async ready(): Promise<void> {
    expect(await this.#next()).toBe('mapped');
  }

  async poke(at: number, byte: number): Promise<void> {
    const answer = this.#next();
    this.#child.stdin.write(`${at} ${byte}\n`);
    expect(await answer).toBe('ok');
  }

  async stop(): Promise<void> {
    const exited = new Promise((resolve) => this.#child.once('exit', resolve));
    this.#child.stdin.end();
    await exited;
    this.#lines.close();
  }
}

/** One capture through a new store object (nothing remembered in-process), its records made past the racy window. */
function capture(store: string, repo: string, options: { statCache?: boolean; sys?: Sys } = {}): Snapshot {
  const s = SnapshotStore.openSync(store, options.sys === undefined ? SETTLED : { ...SETTLED, sys: options.sys });
  try {
    return s.captureSync({ source: repo, copy: ['tree'], ...(options.statCache === false ? { statCache: false } : {}) });
  } finally {
    s.closeSync();
  }
}

function mappedByte(snap: Snapshot): number {
  return readFileSync(join(snap.root, 'copy/tree/mapped.bin'))[0]!;
}

interface Place {
  repo: string;
  store: string;
  mapper: Mapper;
  /** Files the second capture may reuse: none where the filesystem never writes back. */
  reusable: number;
}

/** An overlay mount (upper and lower on the filesystem of `under`, the temp dir's by default), unmounted after the file's tests. */
function overlay(under?: string): string {
  const base = tempDir(under);
  for (const d of ['lower', 'upper', 'work', 'merged']) mkdirSync(join(base, d));
  execFileSync('mount', ['-t', 'overlay', 'overlay', '-o', `lowerdir=${base}/lower,upperdir=${base}/upper,workdir=${base}/work`, join(base, 'merged')]);
  mounted.push(join(base, 'merged'));
  return join(base, 'merged');
}

const mounted: string[] = [];
/** A tmpfs file bind-mounted over tree/mapped.bin: its directory is on another filesystem than it is. */
function bindTmpfsFile(repo: string): void {
  const file = join(tempDir('/dev/shm'), 'mapped.bin');
  writeFileSync(file, TREE['tree/mapped.bin']);
  execFileSync('mount', ['--bind', file, join(repo, 'tree/mapped.bin')]);
  mounted.unshift(join(repo, 'tree/mapped.bin'));
}

/** Name, the directory the repo goes below, files the second capture reuses, and a step after the repo is written. */
type Target = [string, () => string, number, ((repo: string) => void)?];
const targets: Target[] = [
  ['tmpfs', () => '/dev/shm', 0],
  ['this filesystem', () => tempDir(), FILES - 1],
  // Mounts take root.
  ...(rootOrSkip('bind and overlay mounts')
    ? ([
        ['a tmpfs file bind-mounted into this filesystem', () => tempDir(), FILES - 1, bindTmpfsFile],
        ['overlayfs', () => overlay(), FILES - 1],
        // Its pages are tmpfs's, which never writes back (bwrap --tmp-overlay, a live image): none reused.
        ['overlayfs over tmpfs', () => overlay('/dev/shm'), 0],
      ] as Target[])
    : []),
  // ext4 has no reflink: nothing else writes the page back. XFS and btrfs flush a file they clone (the capture's FICLONE).
  ...(['ext4', 'xfs', 'btrfs'] as const).flatMap((kind): Target[] => {
    const mount = reflinkMount(kind);
    return mount === undefined ? [] : [[kind, () => mount, FILES - 1]];
  }),
];
const places = new Map<string, Place>();
/** For the failure tests: a repo settled like the others, and its store. */
const failing = new Map<string, { repo: string; store: string }>();

beforeAll(async () => {
  for (const [name, base, reusable, setup] of targets) {
    const root = tempDir(base());
    const repo = join(root, 'repo');
    writeTree(repo, TREE);
    setup?.(repo);
    const mapper = new Mapper(join(repo, 'tree/mapped.bin'));
    await mapper.ready();
    // The first store through the mapping: the page is dirty and writable from now on.
    await mapper.poke(0, 0x62);
    places.set(name, { repo, store: join(root, 'store'), mapper, reusable });
  }
  for (const call of ['sync_file_range', 'fstatfs']) {
    const root = tempDir();
    writeTree(join(root, 'repo'), TREE);
    failing.set(call, { repo: join(root, 'repo'), store: join(root, 'store') });
  }
}, 30_000);

afterAll(async () => {
  for (const p of places.values()) await p.mapper.stop();
  for (const m of mounted.splice(0)) execFileSync('umount', [m]);
});

describe('stat cache: a write through a shared mapping whose page is still dirty', () => {
  for (const [name] of targets) {
    it(`${name}: the next capture reads the new bytes, not the cached digest`, async () => {
      const { repo, store, mapper, reusable } = places.get(name)!;
      const first = capture(store, repo);
      expect([first.captureReport?.reusedFiles, mappedByte(first)]).toEqual([0, 0x62]);
      // The same page again: no fault, no new mtime unless the capture wrote the page back.
      await mapper.poke(0, 0x63);
      const second = capture(store, repo);
      expect([second.captureReport?.reusedFiles, mappedByte(second)]).toEqual([reusable, 0x63]);
      expect(second.digest).toBe(capture(tempDir(), repo, { statCache: false }).digest);
      expect(second.digest).not.toBe(first.digest);
    });
  }
});

describe('stat cache: the writeback step fails', () => {
  for (const call of ['sync_file_range', 'fstatfs'] as const) {
    it(`${call} failing (EIO) fails the capture typed; nothing is left in the store and no cache is written`, () => {
      // Its files are older than the granularity: the capture writes each back before reading it.
      const { repo, store } = failing.get(call)!;
      SnapshotStore.openSync(store).closeSync();
      const { sys, injected } = failOnce(call, 'EIO');
      let err: (Error & { code?: string; cause?: unknown }) | undefined;
      try {
        capture(store, repo, { sys });
      } catch (e) {
        err = e as Error;
      }
      expect([err?.name, err?.code, err?.cause]).toEqual(['SealError', 'SEAL_IO', injected()]);
      expect(err?.message).toMatch(new RegExp(`: EIO: injected, ${call}$`));
      expect(storeLeftovers(store)).toEqual([]);
      expect(readdirSync(store).includes('cache') ? readdirSync(join(store, 'cache')) : []).toEqual([]);
    });
  }
});
