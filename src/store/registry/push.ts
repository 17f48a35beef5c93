// push.ts: store.push: a published snapshot to an OCI registry as one image manifest, its blobs first and the manifest last.
import { createHash } from 'node:crypto';
import { close, read } from 'node:fs';
import { promisify } from 'node:util';

import { checkListLength, invalidArgType } from '../../base/arg-errors.js';
import { SealError } from '../../base/errors.js';
import { release } from '../../base/growable.js';
import { asBuffer } from '../../base/transfer.js';
import { escapePath } from '../../base/paths.js';
import type { Sys } from '../../sys/native.js';
import { parseArtifact } from './artifact.js';
import { sha256Digest } from '../../base/manifest.js';
import type { RegistryClient } from './client.js';
import { bufferBody, type BodySource } from './deadline.js';
import { isLost, statusOf } from './http.js';
import { runJob } from './jobs.js';
import { ANNOTATION_CREATED, ANNOTATION_FIRST_PATH, ANNOTATION_REVISION, ANNOTATION_SOURCE, EMPTY_BLOB, EMPTY_DIGEST, ENTRIES_TYPE, ROOT_TYPE, layersOf, manifestOf, type Content } from './mapping.js';
import { Meter, PUSH_KEYS, checkRemoteOptions, checkUploadSizes, eachLimited, makeClient, type PushOptions, type PushReport } from './options.js';
import { checkTag, revisionTag } from './reference.js';
import { parseRemote, snapshotTag } from './remote.js';
import { indexBytes } from './pack-index.js';

const readFd = promisify(read);
const closeFd = promisify(close);

async function readAt(fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<number> {
  return (await readFd(fd, buffer, offset, length, position)).bytesRead;
}

interface Push {
  client: RegistryClient;
  mountFrom: string[];
  chunkBytes: number;
  monolithicBytes: number;
  meter: Meter;
  counts: { uploaded: number; mounted: number; skipped: number };
}

/** Ensures the repository holds a blob of size bytes: HEAD, then a cross-repository mount, then an upload of what open gives. */
async function ensureBlob(p: Push, digest: string, size: number, open: () => Promise<Body>): Promise<void> {
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
  const source = await open();
  try {
    await upload(p, digest, source, location);
  } finally {
    await source.close?.();
  }
  p.counts.uploaded++;
  p.meter.add(0, 1);
}

/** What an upload sends: bytes from memory or a frozen file, read as each request needs them. */
interface Body extends BodySource {
  close?: () => Promise<void>;
}

/** Whether an upload that failed with err may be tried again: a lost answer, a 429/408/5xx, or a session the registry lost (404, 416). */
function uploadRetryable(err: unknown): boolean {
  if (isLost(err)) return true;
  const status = statusOf(err);
  return status !== undefined && (status === 404 || status === 416 || status === 408 || status === 429 || status >= 500);
}

/**
 * Uploads a blob the registry does not have: one PUT with the whole body (POST, PUT
 * ?digest) up to monolithicBytes, else chunked (PATCHes of chunkBytes, then PUT ?digest).
 * A PUT or PATCH whose answer is lost or refused is never simply sent again: the registry
 * is asked first. A blob it holds (HEAD) counts as uploaded; a chunked session it still
 * holds goes on from the byte it reports; else a new session is started (POST), up to
 * `retries` times with backoff.
 */
async function upload(p: Push, digest: string, body: BodySource, first: string | undefined): Promise<void> {
  const { client } = p;
  for (let attempt = 0; ; attempt++) {
    const location = attempt === 0 && first !== undefined ? first : await client.startUpload();
    let sent = 0;
    try {
      if (body.size <= p.monolithicBytes) {
        await client.putBlob(location, digest, body);
        p.meter.add(body.size);
      } else {
        await chunked(p, location, digest, body, (n) => {
          p.meter.add(n);
          sent += n;
        });
      }
      return;
    } catch (err) {
      if (!uploadRetryable(err)) {
        await client.cancelUpload(location);
        throw err;
      }
      // The work may be done and only its answer lost: ask before redoing anything.
      if (await client.hasBlob(digest, body.size).catch(unlessAborted(false))) {
        if (body.size <= p.monolithicBytes) p.meter.add(body.size);
        else p.meter.add(body.size - sent);
        return;
      }
      await client.cancelUpload(location);
      p.meter.add(-sent);
      if (attempt >= client.transport.retries) throw err;
      await client.pause(attempt, `uploading blob ${digest}`, err);
    }
  }
}

/** A catch handler for a question asked after a failure: its own failure answers `fallback`, except an abort. */
function unlessAborted<T>(fallback: T): (err: unknown) => T {
  return (err) => {
    if (err instanceof SealError && err.code === 'SEAL_ABORTED') throw err;
    return fallback;
  };
}

/** The bytes [offset, offset + size) of body, as a body of their own. */
function slice(body: BodySource, offset: number, size: number): BodySource {
  return { size, read: (position, length) => body.read(offset + position, length) };
}

/**
 * A chunked upload in one session: PATCHes of chunkBytes, then PUT ?digest. A PATCH that
 * fails is followed by asking the session how much it holds (GET on its location), going
 * on from there when that is within the chunk; otherwise the failure ends the session.
 */
async function chunked(p: Push, first: string, digest: string, body: BodySource, progress: (bytes: number) => void): Promise<void> {
  const { client } = p;
  let location = first;
  let offset = 0;
  let failures = 0;
  while (offset < body.size) {
    const size = Math.min(p.chunkBytes, body.size - offset);
    try {
      location = await client.patchChunk(location, slice(body, offset, size), offset);
      progress(size);
      offset += size;
    } catch (err) {
      if (!uploadRetryable(err) || failures++ >= client.transport.retries) throw err;
      await client.pause(failures - 1, `uploading a chunk of blob ${digest}`, err);
      // A status the registry will not give (a stale or unknown session) ends the session.
      const status = await client.uploadStatus(location).catch(unlessAborted(undefined));
      if (status === undefined || status.next < offset || status.next > offset + size) throw err;
      progress(status.next - offset);
      location = status.location;
      offset = status.next;
    }
  }
  await client.finishChunked(location, digest);
}

/**
 * A large file of the snapshot as an upload body, read with async reads from the frozen
 * file (opened fd-relatively by a worker job under the store's shared lock). Bytes are
 * hashed in order as they are first read; the read that reaches the end proves the sha256
 * before its bytes go out, so a file whose bytes no longer match is never sent whole (and
 * the registry, which checks the digest, never stores it).
 */
async function fileBody(target: PushTarget, content: Content): Promise<Body> {
  const place = content.places[0]!;
  const rel = `${place.area}/${place.path}`;
  const corrupt = (): SealError => new SealError('SEAL_CORRUPT', `snapshot file changed: ${escapePath(rel)}`, { path: rel });
  const fd = await runJob(target.sys, 'pushOpenFile', [target.root, target.digest, content]);
  const hash = createHash('sha256');
  let hashed = 0;
  return {
    size: content.size,
    read: async (position, length) => {
      const buffer = Buffer.allocUnsafe(length);
      for (let done = 0; done < length; ) {
        const n = await readAt(fd, buffer, done, length - done, position + done);
        if (n === 0) throw corrupt();
        done += n;
      }
      if (position === hashed) {
        hash.update(buffer);
        hashed += length;
        if (hashed === content.size && hash.digest('hex') !== content.sha256) throw corrupt();
      }
      return buffer;
    },
    close: () => closeFd(fd),
  };
}

/** The tag's manifest, when it already names this snapshot's exact config (so its blobs are all there). */
async function alreadyThere(client: RegistryClient, tag: string, configDigest: string): Promise<Buffer | undefined> {
  const bytes = await client.getManifest(tag);
  if (bytes === undefined) return undefined;
  try {
    return parseArtifact(bytes, tag).config.digest === configDigest ? bytes : undefined;
  } catch {
    return undefined;
  }
}

/** Points a named tag at the manifest (a PUT of the same bytes), unless it already names exactly them. */
async function pointTag(client: RegistryClient, tag: string, manifest: Buffer): Promise<void> {
  const current = await client.getManifest(tag);
  if (current !== undefined && current.equals(manifest)) return;
  await putManifest(client, tag, manifest);
}

/** The OCI annotations of a pushed manifest: when the snapshot was published here, its revision (when it has one) and its source. */
function ociAnnotations(createdMs: number, source: string, revision: string): Record<string, string> {
  return {
    [ANNOTATION_CREATED]: new Date(createdMs).toISOString().replace(/\.\d{3}Z$/, 'Z'),
    ...(revision === '' ? {} : { [ANNOTATION_REVISION]: revision }),
    [ANNOTATION_SOURCE]: source,
  };
}

/**
 * PUTs the manifest under the tag (retried like any request: the same bytes under the same
 * tag). When it still fails, the tag is read back: a tag that names these exact bytes was
 * stored and only the answer was lost.
 */
async function putManifest(client: RegistryClient, tag: string, manifest: Buffer): Promise<string> {
  try {
    return await client.putManifest(tag, manifest);
  } catch (err) {
    if (!uploadRetryable(err)) throw err;
    const stored = await client.getManifest(tag).catch(() => undefined);
    if (stored !== undefined && stored.equals(manifest)) return sha256Digest(manifest);
    throw err;
  }
}

/** An upload body of bytes moved here for it alone: their memory is given back when the upload is done with them. */
function releasedBody(bytes: Buffer): Body {
  return { ...bufferBody(bytes), close: async () => release(bytes) };
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
  checkListLength('options.mountFrom', o.mountFrom);
  return o.mountFrom.map((r) => parseRemote(`localhost/${String(r)}`, insecure).repository);
}

/**
 * Pushes a published snapshot to `remote` (`host[:port]/repository`) under tag
 * `ts-<digest>`, then points the named tag (options.tag, else the one derived from its
 * revision) at the same manifest. Network-bound, so it runs on the caller's event loop:
 * each pack is read and hashed by a worker job, large files are streamed with async
 * reads, and nothing reads or hashes a whole file on the event loop. Sends no blob when
 * `ts-<digest>` already names this snapshot; skips every blob the registry has (HEAD);
 * mounts from `mountFrom` repositories; PUTs the manifest last (the registry refuses a
 * manifest naming a missing blob, so a failed push never leaves a tag behind).
 */
export async function pushSnapshot(target: PushTarget, remoteText: string, options: PushOptions = {}): Promise<PushReport> {
  const started = performance.now();
  const checked = checkRemoteOptions(remoteText, options, PUSH_KEYS);
  const { chunkBytes, monolithicBytes } = checkUploadSizes(options);
  const mountFrom = checkMountFrom(options, options.insecure === true);
  const asked = options.tag === undefined ? undefined : checkTag('options.tag', options.tag);
  const { remote } = checked;
  const { digest, root } = target;
  const tag = snapshotTag(digest);
  // Every read of the snapshot (this one, each pack, each large file's open) holds the store's
  // shared lock: an rm waits for it, and a snapshot removed between two reads is SEAL_UNAVAILABLE.
  // The worker reads the snapshot's manifest.json in windows into its tables (never whole), proves it, and
  // reads each piece again as it is sent (a manifest.json that is not canonical is held whole, as canonical text).
  const start = await runJob(target.sys, 'pushStart', [root, digest]);
  const { pieces, createdMs, source, revision } = start;
  try {
    // The config is the root document; the entry lists go as pieces, each a blob keyed by its bytes.
    const config = Buffer.from(start.root, 'latin1');
    const configDigest = sha256Digest(config);
    const scopes = [`repository:${remote.repository}:pull,push`, ...mountFrom.map((r) => `repository:${r}:pull`)];
    const client = await makeClient(checked, options, scopes, 'push');
    // Every connection the push opened is closed when it ends, however it ends.
    try {
      const named = asked ?? revisionTag(revision);
      const base = { digest, remote: remote.text, tag, tags: named === undefined ? [tag] : [tag, named] };
      const existing = await alreadyThere(client, tag, configDigest);
      if (existing !== undefined) {
        if (named !== undefined) await pointTag(client, named, existing);
        return { ...base, manifestDigest: sha256Digest(existing), existed: true, blobs: 0, uploaded: 0, mounted: 0, skipped: 0, bytesUploaded: 0, elapsedMs: performance.now() - started };
      }
      // On the worker: the layout of the snapshot its manifest proved to be (its digest recomputed
      // from its entries), kept there, where the packs are read; this thread gets what the image
      // manifest needs.
      const layout = await runJob(target.sys, 'pushPlan', [start.id]);
      const pieceBytes = pieces.reduce((n, x) => n + (x.end - x.start), 0);
      // A snapshot without bytes has the empty layer, which is a blob like the others.
      const bare = layout.packs.length + layout.files.length === 0;
      const totalBytes = config.length + pieceBytes + layout.packs.reduce((n, x) => n + x.size + indexBytes(x.count), 0) + layout.files.reduce((n, x) => n + x.size, 0) + (bare ? EMPTY_BLOB.length : 0);
      const blobs = 1 + pieces.length + layout.packs.length + layout.files.length + (bare ? 1 : 0);
      const p: Push = { client, mountFrom, chunkBytes, monolithicBytes, meter: new Meter(blobs, totalBytes, options.onProgress), counts: { uploaded: 0, mounted: 0, skipped: 0 } };
      const packDigests: string[] = [];
      type Task = () => Promise<void>;
      const tasks: Task[] = [
        () => ensureBlob(p, configDigest, config.length, async () => bufferBody(config)),
        ...pieces.map((piece, i): Task => () => ensureBlob(p, piece.digest, piece.end - piece.start, async () => releasedBody(asBuffer(await runJob(target.sys, 'pushPiece', [start.id, i]))))),
      ];
      // The metadata first: then the worker lets go of a manifest.json it held whole (packs and files need only its tables).
      await eachLimited(tasks, checked.concurrency, (t) => t());
      await runJob(target.sys, 'pushSent', [start.id]);
      tasks.length = 0;
      tasks.push(
        ...layout.packs.map((_pack, i): Task => async () => {
          const packed = await runJob(target.sys, 'readPack', [root, digest, start.id, i]);
          const bytes = asBuffer(packed.bytes);
          packDigests[i] = packed.digest;
          try {
            await ensureBlob(p, packed.digest, bytes.length, async () => bufferBody(bytes));
          } finally {
            release(bytes);
          }
        }),
        ...layout.files.map((f): Task => () => ensureBlob(p, `sha256:${f.sha256}`, f.size, () => fileBody(target, f))),
      );
      if (bare) tasks.push(() => ensureBlob(p, EMPTY_DIGEST, EMPTY_BLOB.length, async () => bufferBody(EMPTY_BLOB)));
      await eachLimited(tasks, checked.concurrency, (t) => t());
      const annotations = ociAnnotations(createdMs, source, revision);
      const pieceLayers = pieces.map((x) => ({ mediaType: ENTRIES_TYPE, digest: x.digest, size: x.end - x.start, annotations: { [ANNOTATION_FIRST_PATH]: x.first } }));
      const layers = [...pieceLayers, ...layersOf(layout, packDigests)];
      const manifest = manifestOf(digest, layout, { mediaType: ROOT_TYPE, digest: configDigest, size: config.length }, layers, annotations);
      const manifestDigest = await putManifest(client, tag, manifest);
      if (named !== undefined) await putManifest(client, named, manifest);
      return { ...base, manifestDigest, existed: false, blobs, ...p.counts, bytesUploaded: client.bytesUp, elapsedMs: performance.now() - started };
    } finally {
      await client.close();
    }
  } finally {
    await runJob(target.sys, 'pushEnd', [start.id]);
  }
}
