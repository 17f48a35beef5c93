// cat.ts: catRemote: one file of a snapshot in a registry, fetched alone (the manifest, the snapshot's metadata, a Range of its pack or its blob) and proven against its sha256 before a byte is handed out.
import { createHash } from 'node:crypto';
import { constants as bufferConstants } from 'node:buffer';
import { write } from 'node:fs';
import { mkdtemp, open, rmdir, unlink, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { checkInteger, checkOptions, invalidArgType } from '../../base/arg-errors.js';
import { SealError } from '../../base/errors.js';
import { checkRelative, escapePath } from '../../base/paths.js';
import { sealedAsync } from '../../base/refusal.js';
import { readOnce } from '../../base/op.js';
import { sys as nativeSys, type Sys } from '../../sys/native.js';
import type { CatLocation, CatManifest } from './cat-locate.js';
import type { RegistryClient } from './client.js';
import { runJob, runJobSync } from './jobs.js';
import { REMOTE_KEYS, checkRemoteOptions, makeClient, type RemoteOptions } from './options.js';
import { locateLazily, readBytes } from './cat-lazy.js';
import { claimedDigest, fetchDocument, readManifest, type ManifestRead } from './pull.js';
import { checkReference, type SnapshotRef } from './reference.js';

const writeFd = promisify(write);

/** The most of a file's bytes held in memory by default (see CatOptions.maxBytes). */
const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;
/** A snapshot manifest up to this size is proven on the calling thread (about 80k files); a larger one on the worker thread. */
const INLINE_CONFIG_BYTES = 16 * 1024 * 1024;
/** Pieces of the entry lists fetched at once: they are small, and a registry spends most of a piece on the request itself. */
const PIECES_AT_ONCE = 16;
/** Bytes per write when a spooled file is copied to `output`. */
const COPY_BYTES = 1024 * 1024;

export interface CatOptions extends Omit<RemoteOptions, 'concurrency' | 'onProgress'> {
  /**
   * The most of the file's bytes held in memory (default 64 MiB, at most
   * buffer.constants.MAX_LENGTH). Without `output`, a larger file is SEAL_LIMIT before its
   * bytes are fetched; with it, a larger file goes through a temp file (see `output`).
   */
  maxBytes?: number | undefined;
  /**
   * Where the file's bytes go instead of a Buffer: a file descriptor open for writing (written
   * with fs.write from its current offset, not closed) or a writable stream (each write's
   * callback awaited; not ended). Nothing is written before the bytes are proven: a file of
   * at most `maxBytes` is proven in memory, a larger one is first streamed into a temp file
   * in os.tmpdir() (unlinked as soon as it is made), proven, then copied from there.
   */
  output?: number | NodeJS.WritableStream | undefined;
}

export interface CatReport {
  /** The snapshot's digest: recomputed from its entry lists (proof `snapshot`), or the one the manifest names (proof `manifest`). */
  digest: string;
  /**
   * What the bytes are proven against. `snapshot`: the snapshot digest, recomputed from
   * every entry list (a cat by snapshot digest, or where the artifact has no index to find
   * the file by). `manifest`: the image manifest (by tag or manifest digest) through the
   * blobs it names by digest: its root document and the piece of each list that may record
   * the file (its pack's index says only where to read); the snapshot digest is then the
   * manifest's claim, not recomputed.
   */
  proof: 'snapshot' | 'manifest';
  remote: string;
  /** sha256 of the image manifest read. */
  manifestDigest: string;
  /** The file's path, as asked for (`.` and empty components dropped). */
  path: string;
  size: number;
  /** The sha256 the snapshot records for the file; the bytes handed out have it. */
  sha256: string;
  /** The permission bits the snapshot records (0 for a copy root's file, as capture records them). */
  mode: number;
  /** The blob its bytes came from (a pack, or a blob of its own); undefined for an empty file. */
  blob: string | undefined;
  /** Where its bytes start in that blob. */
  offset: number;
  /** Blob bytes received: the root document and the pieces of the entry lists read (or the first format's config), a pack's index, and the file's range (more if the registry ignored Range). */
  bytesDownloaded: number;
  elapsedMs: number;
}

interface CatCall {
  sys: Sys;
  ref: ReturnType<typeof checkReference>;
  path: string;
  maxBytes: number;
  output: number | NodeJS.WritableStream | undefined;
}

function checkOutput(value: unknown): number | NodeJS.WritableStream | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'number') return checkInteger('options.output', value, 0, 2 ** 31 - 1);
  if (value === null || typeof value !== 'object' || typeof (value as { write?: unknown }).write !== 'function') throw invalidArgType('options.output', ['number', 'Writable'], value);
  return value as NodeJS.WritableStream;
}

/** Writes all of chunk to output: an fd (fs.write until done) or a stream (its callback awaited, so backpressure holds). */
async function writeOut(output: number | NodeJS.WritableStream, chunk: Uint8Array): Promise<void> {
  if (typeof output === 'number') {
    for (let done = 0; done < chunk.length; ) done += (await writeFd(output, chunk, done, chunk.length - done, null)).bytesWritten;
    return;
  }
  await new Promise<void>((resolve, reject) => {
    output.write(chunk, (err?: Error | null) => (err ? reject(err) : resolve()));
  });
}

/** A file of its own in os.tmpdir(), unlinked at once: only its handle holds it, so nothing is left behind however the call ends. */
async function tempFile(): Promise<FileHandle> {
  const dir = await mkdtemp(join(tmpdir(), 'treeseal-cat-'));
  const name = join(dir, 'file');
  try {
    return await open(name, 'wx+', 0o600);
  } finally {
    await unlink(name).catch(() => {});
    await rmdir(dir);
  }
}

function otherBytes(client: RegistryClient, loc: CatLocation): SealError {
  return new SealError('SEAL_CORRUPT', `${client.transport.label} sent other bytes for ${escapePath(loc.path)} than snapshot ${loc.digest} records (sha256 ${loc.sha256})`, {
    path: loc.path,
  });
}

/** Fetches the located file's bytes into memory and proves them. */
async function inMemory(client: RegistryClient, loc: CatLocation): Promise<Buffer> {
  // An empty file has no blob and no bytes to read.
  const bytes = loc.blob === undefined ? Buffer.alloc(0) : await readBytes(client, loc.blob, loc.offset, loc.size);
  if (createHash('sha256').update(bytes).digest('hex') !== loc.sha256) throw otherBytes(client, loc);
  return bytes;
}

/** Streams the located file's bytes into a temp file, proves them, then copies them to output. */
async function spooled(client: RegistryClient, loc: CatLocation, output: number | NodeJS.WritableStream): Promise<void> {
  const file = await tempFile();
  try {
    const hash = createHash('sha256');
    let at = 0;
    await client.readRange(loc.blob!, loc.offset, loc.size, async (chunk) => {
      hash.update(chunk);
      for (let done = 0; done < chunk.length; ) done += (await file.write(chunk, done, chunk.length - done, at + done)).bytesWritten;
      at += chunk.length;
    });
    if (hash.digest('hex') !== loc.sha256) throw otherBytes(client, loc);
    const buffer = Buffer.allocUnsafe(COPY_BYTES);
    for (let pos = 0; pos < loc.size; ) {
      const { bytesRead } = await file.read(buffer, 0, Math.min(COPY_BYTES, loc.size - pos), pos);
      if (bytesRead === 0) throw new SealError('SEAL_IO', `cat: the temp file of ${escapePath(loc.path)} ended early`);
      await writeOut(output, buffer.subarray(0, bytesRead));
      pos += bytesRead;
    }
  } finally {
    await file.close();
  }
}

/**
 * Locates the file through the whole entry lists: the assembled manifest proven against the
 * snapshot digest, the entry found, its pack and offset summed (one hash of the lists and
 * one scan of their bytes, about 30 ms for 50k files), on this thread up to
 * INLINE_CONFIG_BYTES (a fresh process's cat starts no worker thread), on the worker above.
 * `have`: the blobs a lazy attempt already fetched.
 */
async function locateProven(call: CatCall, client: RegistryClient, manifest: ManifestRead, digest: string, have: ReadonlyMap<string, Buffer>): Promise<CatLocation> {
  const { artifact, where } = manifest;
  // Not hashed here: the worker proves more (the snapshot digest, from the lists' own bytes).
  const config = await fetchDocument(client, manifest, PIECES_AT_ONCE, false, have);
  const args: [Uint8Array, CatManifest, string, string] = [config, { where, threshold: artifact.threshold, buckets: artifact.buckets, layers: artifact.layers }, call.path, digest];
  return config.length <= INLINE_CONFIG_BYTES ? runJobSync(call.sys, 'catLocate', args) : await runJob(call.sys, 'catLocate', args);
}

async function catFile(call: CatCall, remoteText: string, options: CatOptions): Promise<{ report: CatReport; bytes: Buffer | undefined }> {
  const started = performance.now();
  const checked = checkRemoteOptions(remoteText, options);
  const { remote } = checked;
  const client = await makeClient(checked, options, [`repository:${remote.repository}:pull`], 'cat');
  // Every connection the cat opened is closed when it ends, however it ends.
  try {
    const manifest = await readManifest(client, call.ref, remote.text);
    const digest = call.ref.kind === 'digest' ? call.ref.digest : claimedDigest(manifest);
    // Named by tag or manifest digest, the manifest is the anchor: one piece and the pack's index say where the file is.
    const got = new Map<string, Buffer>();
    const lazy = call.ref.kind === 'digest' ? undefined : await locateLazily(client, manifest, call.path, digest, got);
    const loc = lazy ?? (await locateProven(call, client, manifest, digest, got));
    if (call.output === undefined && loc.size > call.maxBytes) {
      throw new SealError('SEAL_LIMIT', `file is larger than maxBytes (${call.maxBytes} bytes): ${escapePath(loc.path)} has ${loc.size} bytes`, { path: loc.path });
    }
    let bytes: Buffer | undefined;
    if (loc.size <= call.maxBytes) {
      bytes = await inMemory(client, loc);
      if (call.output !== undefined && bytes.length > 0) await writeOut(call.output, bytes);
    } else {
      await spooled(client, loc, call.output!);
    }
    const { path, size, sha256, mode, blob, offset } = loc;
    const report: CatReport = {
      digest,
      proof: lazy === undefined ? 'snapshot' : 'manifest',
      remote: remote.text,
      manifestDigest: manifest.digest,
      path,
      size,
      sha256,
      mode,
      blob,
      offset,
      bytesDownloaded: client.bytesDown,
      elapsedMs: performance.now() - started,
    };
    return { report, bytes: call.output === undefined ? bytes : undefined };
  } finally {
    await client.close();
  }
}

/**
 * One file of a snapshot in a registry, fetched alone: the image manifest (by the
 * snapshot's digest, `{ tag }` or `{ manifest }`, as pull takes them); by digest the
 * snapshot manifest (its root document and every piece, assembled and proven against the
 * snapshot digest), by tag or manifest digest only the root document, the piece of each
 * list that may hold the file and its pack's index (see cat-lazy.ts; else as by digest);
 * then only the file's bytes: a Range read of the pack that holds it, or of its own blob.
 * `path` is the file as a clone shows it (`src/a.txt`; a mount's as `<target>/…`);
 * relative, no `..` (SEAL_BAD_PATH).
 * Not in the snapshot: SEAL_UNAVAILABLE; a directory: SEAL_BAD_PATH; a symlink:
 * SEAL_SYMLINK. The bytes are proven against the sha256 the snapshot records before any
 * is handed out (else SEAL_CORRUPT, and nothing returned or written).
 *
 * Without `options.output`, resolves to the file's bytes (a Buffer, at most `maxBytes`).
 * With it, writes them there (proven first, in memory or in a temp file) and resolves to a
 * report of what was fetched.
 */
export function catRemote(remote: string, snapshot: SnapshotRef, path: string, options?: CatOptions & { output?: undefined }): Promise<Buffer>;
export function catRemote(remote: string, snapshot: SnapshotRef, path: string, options: CatOptions & { output: number | NodeJS.WritableStream }): Promise<CatReport>;
/** Options whose `output` the compiler cannot tell: the bytes, or the report when there was an output. */
export function catRemote(remote: string, snapshot: SnapshotRef, path: string, options?: CatOptions): Promise<Buffer | CatReport>;
export async function catRemote(remote: string, snapshot: SnapshotRef, path: string, given: CatOptions = {}): Promise<Buffer | CatReport> {
  const options = readOnce(given) as CatOptions;
  const ref = checkReference(readOnce(snapshot) as SnapshotRef);
  const parts = checkRelative(path, { label: 'file path', name: 'path', maxPathBytes: Number.MAX_SAFE_INTEGER });
  const o = checkOptions('options', options, { op: 'catRemote', keys: [...REMOTE_KEYS.filter((k) => k !== 'concurrency' && k !== 'onProgress'), 'maxBytes', 'output'] });
  const maxBytes = o.maxBytes === undefined ? DEFAULT_MAX_BYTES : checkInteger('options.maxBytes', o.maxBytes, 0, bufferConstants.MAX_LENGTH);
  const output = checkOutput(o.output);
  const call: CatCall = { sys: nativeSys, ref, path: parts.join('/'), maxBytes, output };
  const { report, bytes } = await sealedAsync('cat', () => catFile(call, remote, o));
  return output === undefined ? bytes! : report;
}
