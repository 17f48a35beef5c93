// push.ts: store.push: a published snapshot to an OCI registry as one image manifest, its blobs first and the manifest last.
import { createHash } from 'node:crypto';
import { close, read } from 'node:fs';
import { promisify } from 'node:util';

import { invalidArgType } from '../../base/arg-errors.js';
import { SealError } from '../../base/errors.js';
import { escapePath } from '../../base/paths.js';
import type { Sys } from '../../sys/native.js';
import { parseArtifact } from './artifact.js';
import { sha256Digest, type RegistryClient } from './client.js';
import { runJob } from './jobs.js';
import { CONFIG_TYPE, EMPTY_BLOB, EMPTY_DIGEST, layersOf, manifestOf, type Content } from './mapping.js';
import { Meter, checkChunkBytes, checkRemoteOptions, eachLimited, makeClient, type PushOptions, type PushReport } from './options.js';
import { parseRemote, snapshotTag } from './remote.js';

const readFd = promisify(read);
const closeFd = promisify(close);

async function readAt(fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
  return (await readFd(fd, buffer, offset, length, position)).bytesRead;
}

interface Push {
  client: RegistryClient;
  mountFrom: string[];
  chunkBytes: number;
  meter: Meter;
  counts: { uploaded: number; mounted: number; skipped: number };
}

/** Ensures the repository holds a blob: HEAD, then a cross-repository mount, then upload(location). */
async function ensureBlob(p: Push, digest: string, size: number, upload: (location: string) => Promise<void>): Promise<void> {
  if (await p.client.hasBlob(digest)) {
    p.counts.skipped++;
    p.meter.add(size, 1);
    return;
  }
  let location: string | undefined;
  for (const from of p.mountFrom) {
    const started = await p.client.startUpload({ digest, from });
    if (started === 'mounted') {
      if (location !== undefined) await p.client.cancelUpload(location);
      p.counts.mounted++;
      p.meter.add(size, 1);
      return;
    }
    if (location !== undefined) await p.client.cancelUpload(location);
    location = started;
  }
  location ??= await p.client.startUpload();
  await upload(location);
  p.counts.uploaded++;
  p.meter.add(0, 1);
}

/**
 * Uploads a large file in chunks (PATCH with Content-Range, then PUT ?digest), read with
 * async reads from the frozen snapshot file (opened fd-relatively by a worker job under the
 * store's shared lock): one chunk in memory, hashed as it goes; a file whose bytes no
 * longer match its sha256 is never committed.
 */
async function uploadFile(p: Push, target: PushTarget, content: Content, first: string): Promise<void> {
  const place = content.places[0]!;
  const rel = `${place.area}/${place.path}`;
  const corrupt = (): SealError => new SealError('SEAL_CORRUPT', `snapshot file changed: ${escapePath(rel)}`, { path: rel });
  let location = first;
  let fd = -1;
  try {
    fd = await runJob(target.sys, 'pushOpenFile', [target.root, target.digest, content]);
    const hash = createHash('sha256');
    const buffer = Buffer.allocUnsafe(Math.min(p.chunkBytes, content.size));
    for (let offset = 0; offset < content.size; ) {
      const bytesRead = await readAt(fd, buffer, 0, Math.min(buffer.length, content.size - offset), offset);
      if (bytesRead === 0) throw corrupt();
      const chunk = buffer.subarray(0, bytesRead);
      hash.update(chunk);
      location = await p.client.patchChunk(location, chunk, offset);
      offset += bytesRead;
      p.meter.add(bytesRead);
    }
    if (hash.digest('hex') !== content.sha256) throw corrupt();
    await p.client.finishChunked(location, `sha256:${content.sha256}`);
  } catch (err) {
    await p.client.cancelUpload(location);
    throw err;
  } finally {
    if (fd >= 0) await closeFd(fd);
  }
}

/** A monolithic upload of bytes held in memory (POST, then one PUT ?digest). */
function uploadBytes(p: Push, digest: string, bytes: Buffer): (location: string) => Promise<void> {
  return async (location) => {
    await p.client.putBlob(location, digest, bytes);
    p.meter.add(bytes.length);
  };
}

/** The tag's manifest already names this snapshot's exact config (so its blobs are all there). */
async function alreadyThere(client: RegistryClient, tag: string, configDigest: string): Promise<string | undefined> {
  const bytes = await client.getManifest(tag);
  if (bytes === undefined) return undefined;
  try {
    return parseArtifact(bytes, tag).config.digest === configDigest ? sha256Digest(bytes) : undefined;
  } catch {
    return undefined;
  }
}

export interface PushTarget {
  sys: Sys;
  /** The published snapshot's digest and directory. */
  digest: string;
  root: string;
}

function checkMountFrom(o: PushOptions, insecure: boolean): string[] {
  if (o.mountFrom === undefined) return [];
  if (!Array.isArray(o.mountFrom)) throw invalidArgType('options.mountFrom', 'Array', o.mountFrom);
  return o.mountFrom.map((r) => parseRemote(`localhost/${String(r)}`, insecure).repository);
}

/**
 * Pushes a published snapshot to `remote` (`host[:port]/repository`) under tag
 * `ts-<digest>`. Network-bound, so it runs on the caller's event loop: each pack is
 * read and hashed by a worker job, large files are streamed with async reads, and
 * nothing reads or hashes a whole file on the event loop. Stops early when the tag
 * already names this snapshot; skips every blob the registry has (HEAD); mounts from
 * `mountFrom` repositories; PUTs the manifest last (the registry refuses a manifest
 * naming a missing blob, so a failed push never leaves a tag behind).
 */
export async function pushSnapshot(target: PushTarget, remoteText: string, options: PushOptions = {}): Promise<PushReport> {
  const started = performance.now();
  const checked = checkRemoteOptions(remoteText, options);
  const chunkBytes = checkChunkBytes(options);
  const mountFrom = checkMountFrom(options, options.insecure === true);
  const { remote } = checked;
  const { digest, root } = target;
  const tag = snapshotTag(digest);
  // Every read of the snapshot (this one, each pack, each large file's open) holds the store's
  // shared lock: an rm waits for it, and a snapshot removed between two reads is SEAL_UNAVAILABLE.
  const read = await runJob(target.sys, 'pushConfig', [root, digest]);
  const config = Buffer.from(read.buffer, read.byteOffset, read.byteLength);
  const configDigest = sha256Digest(config);
  const scopes = [`repository:${remote.repository}:pull,push`, ...mountFrom.map((r) => `repository:${r}:pull`)];
  const client = await makeClient(checked, options, scopes, 'push');
  // Every connection the push opened is closed when it ends, however it ends.
  try {
    const base = { digest, remote: remote.text, tag };
    const existing = await alreadyThere(client, tag, configDigest);
    if (existing !== undefined) {
      return { ...base, manifestDigest: existing, existed: true, blobs: 0, uploaded: 0, mounted: 0, skipped: 0, bytesUploaded: 0, elapsedMs: performance.now() - started };
    }
    // On the worker: proves the bytes read are this snapshot's manifest (its digest recomputed from its entries).
    const layout = await runJob(target.sys, 'pushPlan', [config.toString('utf8'), digest]);
    const totalBytes = config.length + layout.packs.reduce((n, x) => n + x.size, 0) + layout.files.reduce((n, x) => n + x.size, 0);
    const blobs = 1 + layout.packs.length + layout.files.length;
    const p: Push = { client, mountFrom, chunkBytes, meter: new Meter(blobs, totalBytes, options.onProgress), counts: { uploaded: 0, mounted: 0, skipped: 0 } };
    const packDigests: string[] = [];
    type Task = () => Promise<void>;
    const tasks: Task[] = [
      () => ensureBlob(p, configDigest, config.length, uploadBytes(p, configDigest, config)),
      ...layout.packs.map((pack, i): Task => async () => {
        const packed = await runJob(target.sys, 'readPack', [root, digest, pack]);
        const bytes = Buffer.from(packed.bytes.buffer, packed.bytes.byteOffset, packed.bytes.byteLength);
        packDigests[i] = packed.digest;
        await ensureBlob(p, packed.digest, bytes.length, uploadBytes(p, packed.digest, bytes));
      }),
      ...layout.files.map((f): Task => () => ensureBlob(p, `sha256:${f.sha256}`, f.size, (loc) => uploadFile(p, target, f, loc))),
    ];
    if (layout.packs.length + layout.files.length === 0) tasks.push(() => ensureBlob(p, EMPTY_DIGEST, EMPTY_BLOB.length, uploadBytes(p, EMPTY_DIGEST, EMPTY_BLOB)));
    await eachLimited(tasks, checked.concurrency, (t) => t());
    const manifest = manifestOf(digest, layout, { mediaType: CONFIG_TYPE, digest: configDigest, size: config.length }, layersOf(layout, packDigests));
    const manifestDigest = await client.putManifest(tag, manifest);
    return { ...base, manifestDigest, existed: false, blobs, ...p.counts, bytesUploaded: client.bytesUp, elapsedMs: performance.now() - started };
  } finally {
    await client.close();
  }
}
