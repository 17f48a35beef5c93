// pull.ts: store.pull: a snapshot from an OCI registry, proven against its digest, built in tmp/ and published by rename.
import { createHash } from 'node:crypto';
import { close, ftruncate, write } from 'node:fs';
import { promisify } from 'node:util';

import { SealError, abortedError } from '../../base/errors.js';
import { checkAbsolutePath } from '../../base/paths.js';
import { checkBoolean } from '../../base/arg-errors.js';
import { movable } from '../../base/transfer.js';
import type { Sys } from '../../sys/native.js';
import { parseArtifact, type Artifact } from './artifact.js';
import { sha256Digest } from '../../base/manifest.js';
import type { RegistryClient } from './client.js';
import { isLost, RetryBudget, sleep } from './http.js';
import { runJob } from './jobs.js';
import { Meter, PULL_KEYS, checkRemoteOptions, eachLimited, makeClient, type PullOptions, type PullReport } from './options.js';
import { CONFIG_TYPE, MAX_PACK_BYTES, ROOT_TYPE } from './mapping.js';
import { DocumentAssembly, MAX_ROOT_BYTES, readRoot, type RootDocument } from './pieces.js';
import { manifestReference, shownReference, type Reference } from './reference.js';
import type { FetchedRef } from './prove.js';
import type { FileToPull } from './pull-build.js';

const writeAt = promisify(write);
const closeFd = promisify(close);
const truncateFd = promisify(ftruncate);

/** The largest snapshot manifest accepted (a config blob, or the pieces of a root document together). */
export const MAX_CONFIG_BYTES = 1024 * 1024 * 1024;
/** Bytes gathered before each write of a streamed large file. */
const WRITE_BYTES = 4 * 1024 * 1024;

/**
 * A pack is held whole in memory while it comes down and is written out: at most this
 * much of them at once (a pack larger alone), and none larger than MAX_PACK_BYTES. The sizes
 * are the registry's word: a crafted layout of one 3 GiB pack took a pull to 3.3 GB of
 * memory and failed with a bare RangeError (the command then printed its usage); push
 * never makes one past MAX_PACK_BYTES.
 */
const PACKS_IN_FLIGHT_BYTES = 256 * 1024 * 1024;

/** Bytes of packs in flight, shared by a pull's fetches: take waits until `size` (capped at the whole) is free. */
class PackBudget {
  #free = PACKS_IN_FLIGHT_BYTES;
  readonly #waiting: (() => void)[] = [];

  async take(size: number): Promise<number> {
    const want = Math.min(size, PACKS_IN_FLIGHT_BYTES);
    while (this.#free < want) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#free -= want;
    return want;
  }

  give(taken: number): void {
    this.#free += taken;
    for (const wake of this.#waiting.splice(0)) wake();
  }
}

export interface PullTarget {
  sys: Sys;
  storeRoot: string;
  /** Whether the store already holds a snapshot. */
  has: (digest: string) => boolean;
  /** Throws where the store cannot be written (a read-only one): once the store is found not to hold the snapshot, before anything of it is fetched. */
  checkWritable?: () => void;
}

/** An image manifest read by its reference: its bytes, their digest, and what it says (not yet proven). */
export interface ManifestRead {
  bytes: Buffer;
  /** sha256 of the bytes (`sha256:…`), as read. */
  digest: string;
  artifact: Artifact;
  /** `remote:tag` or `remote@sha256:…`, for messages. */
  where: string;
}

/**
 * GETs the image manifest a reference names: `ts-<digest>`, a tag, or a manifest digest,
 * whose bytes must then hash to it (else SEAL_CORRUPT: a registry that answers a digest
 * with other bytes is never believed). A missing one is SEAL_REMOTE with the registry's answer.
 */
export async function readManifest(client: RegistryClient, ref: Reference, remoteText: string): Promise<ManifestRead> {
  const reference = manifestReference(ref);
  const where = shownReference(remoteText, ref);
  const missing = (detail: string): SealError =>
    new SealError(
      'SEAL_REMOTE',
      ref.kind === 'digest'
        ? `snapshot ${ref.digest} is not in ${remoteText} (no tag ${reference}): ${detail}`
        : `${ref.kind === 'tag' ? `tag ${ref.tag}` : `manifest ${ref.manifest}`} is not in ${remoteText}: ${detail}`,
    );
  const bytes = (await client.getManifest(reference, missing))!;
  const digest = sha256Digest(bytes);
  if (ref.kind === 'manifest' && digest !== ref.manifest) {
    throw new SealError('SEAL_CORRUPT', `${client.transport.label} answered manifest ${ref.manifest} with other bytes (${digest})`);
  }
  return { bytes, digest, artifact: parseArtifact(bytes, where), where };
}

/** The snapshot digest a manifest's annotation claims: only a name to wait on and look for, until its config proves it. */
export function claimedDigest(m: ManifestRead): string {
  if (!/^[0-9a-f]{64}$/.test(m.artifact.snapshot)) {
    throw new SealError('SEAL_CORRUPT', `${m.where} is not a treeseal snapshot: annotation vnd.treeseal.snapshot is not a snapshot digest`);
  }
  return m.artifact.snapshot;
}

/**
 * The snapshot manifest (manifest.json's text) an image manifest names: its config blob
 * when that is a whole manifest.json, else the document its root document and the pieces
 * it names make (each piece a layer of the manifest, in the order the root first names
 * them). Sizes are bounded and, with `prove`, each blob's sha256 checked as it comes; what
 * it holds is still only a claim until the snapshot digest is recomputed from it. `have`:
 * blobs already fetched (and proven against their digests), by digest, not fetched again.
 */
export async function fetchDocument(client: RegistryClient, m: ManifestRead, concurrency: number, prove: boolean, have?: ReadonlyMap<string, Buffer>): Promise<Buffer> {
  return fetchInto(client, m, concurrency, prove, have, {
    whole: async (bytes) => bytes,
    begin: async (root, sizes) => new DocumentAssembly(root, (d) => sizes.get(d)!, MAX_CONFIG_BYTES, rootTooLarge(m.where)),
    put: async (doc, digest, piece) => doc.put(digest, piece),
    end: async (doc) => doc.bytes,
    drop: async () => {},
  });
}

/** The error for a root document whose lists make a manifest past MAX_CONFIG_BYTES. */
function rootTooLarge(where: string): (why: string) => SealError {
  return (why) => new SealError('SEAL_CORRUPT', `${where} has a root document whose ${why}`);
}

/** Where fetchInto puts a document as it comes: whole (a config blob), or a root's pieces one by one. */
interface DocumentSink<D, R> {
  whole: (bytes: Buffer) => Promise<R>;
  begin: (root: RootDocument, sizes: ReadonlyMap<string, number>) => Promise<D>;
  put: (doc: D, digest: string, piece: Buffer) => Promise<void>;
  end: (doc: D) => Promise<R>;
  /** Forgets a document begun that will not end. */
  drop: (doc: D) => Promise<void>;
}

/** fetchDocument's fetches, each blob handed to `sink` as it comes (see fetchDocument). */
async function fetchInto<D, R>(client: RegistryClient, m: ManifestRead, concurrency: number, prove: boolean, have: ReadonlyMap<string, Buffer> | undefined, sink: DocumentSink<D, R>): Promise<R> {
  const { artifact, where } = m;
  const { config } = artifact;
  if (config.mediaType === CONFIG_TYPE) {
    if (config.size > MAX_CONFIG_BYTES) throw new SealError('SEAL_CORRUPT', `${where} has a config of ${config.size} bytes`);
    return sink.whole(await client.getBlob(config.digest, config.size, prove));
  }
  if (config.size > MAX_ROOT_BYTES) throw new SealError('SEAL_CORRUPT', `${where} has a root document of ${config.size} bytes`);
  const root = readRoot(have?.get(config.digest) ?? (await client.getBlob(config.digest, config.size, prove)), where);
  const { pieces } = artifact;
  if (pieces.length !== root.distinct.length || pieces.some((l, i) => l.digest !== root.distinct[i])) {
    throw new SealError('SEAL_CORRUPT', `${where} does not match its root document: its first layers are not the ${root.distinct.length} pieces the root names`);
  }
  const total = pieces.reduce((n, l) => n + l.size, 0);
  if (total > MAX_CONFIG_BYTES) throw new SealError('SEAL_CORRUPT', `${where} has entry lists of ${total} bytes`);
  // A piece the root names many times counts each time (DocumentAssembly bounds the whole).
  const doc = await sink.begin(root, new Map(pieces.map((l) => [l.digest, l.size])));
  try {
    await eachLimited(pieces, concurrency, async (l) => {
      await sink.put(doc, l.digest, have?.get(l.digest) ?? (await client.getBlob(l.digest, l.size, prove)));
    });
  } catch (err) {
    await sink.drop(doc);
    throw err;
  }
  return sink.end(doc);
}

/**
 * GETs the snapshot manifest an image manifest names (see fetchDocument), each blob proven
 * against its digest and handed to the worker as it comes: the document is assembled there,
 * where it is proven against `digest` and built, and never held whole on this thread.
 */
export async function fetchConfig(client: RegistryClient, sys: Sys, storeRoot: string, m: ManifestRead, digest: string, concurrency: number): Promise<FetchedRef> {
  const document = await fetchInto(client, m, concurrency, true, undefined, {
    whole: (bytes) => runJob(sys, 'pullDocWhole', [movable(bytes)]),
    begin: (root, sizes) => runJob(sys, 'pullDocBegin', [storeRoot, root, [...sizes], MAX_CONFIG_BYTES, m.where]),
    put: (id, d, piece) => runJob(sys, 'pullDocPut', [id, d, movable(piece)]),
    end: async (id) => id,
    drop: (id) => runJob(sys, 'pullDocDrop', [id]),
  });
  return { digest, where: m.where, document, artifact: m.artifact };
}

/** Writes block[from, to) at position + from to fd (async). */
async function writeFully(fd: number, block: Buffer, position: number, from = 0, to = block.length): Promise<void> {
  for (let done = from; done < to; ) {
    const { bytesWritten } = await writeAt(fd, block, done, to - done, position + done);
    done += bytesWritten;
  }
}

/** The page a pulled file's zeros are left unwritten by (a hole), as a capture's copy leaves a source's holes. */
const PAGE_BYTES = 4096;
const ZERO_PAGE = Buffer.alloc(PAGE_BYTES);

/**
 * Writes block at position to a file made empty for it, leaving each page of zeros
 * unwritten: a sparse file pulled stays sparse, as it was captured (a 4 GiB file of holes
 * was written whole, and its snapshot then refused to materialize on a filesystem that
 * cannot reflink, past the buffered budget). What is not written reads as zeros: the file
 * was empty, a restart empties it again, and the caller sets its size at the end.
 */
async function writeSparse(fd: number, block: Buffer, position: number): Promise<void> {
  let run = -1;
  for (let at = 0; at < block.length; ) {
    const end = Math.min(block.length, at + PAGE_BYTES - ((position + at) % PAGE_BYTES));
    const zero = block.compare(ZERO_PAGE, 0, end - at, at, end) === 0;
    if (!zero && run < 0) run = at;
    if (zero && run >= 0) {
      await writeFully(fd, block, position, run, at);
      run = -1;
    }
    at = end;
  }
  if (run >= 0) await writeFully(fd, block, position, run, block.length);
}

/**
 * Streams a large file's blob into the build at the content's first place (created by a
 * worker job, fd-relatively, so a path of any length works): async writes, hashed as it
 * comes, its size and sha256 proven before the file counts. A body cut short (a dropped
 * connection, a passed deadline) is resumed with a Range request from the last byte
 * received, up to `retries` times; a registry that answers it with the whole blob is read
 * again from byte 0. The sha256 is of the whole file, however many requests brought it,
 * and of the bytes as written: each write is hashed as it goes out, at the offset where
 * the last one ended (from 0 after a restart), so the file holds exactly the bytes proven.
 */
async function streamFile(client: RegistryClient, sys: Sys, buildId: number, content: FileToPull, meter: Meter): Promise<void> {
  const digest = `sha256:${content.sha256}`;
  const fd = await runJob(sys, 'pullOpenFile', [buildId, content.index]);
  try {
    let hash = createHash('sha256');
    /** Bytes received, and bytes written (hashed): equal but for what `pending` holds. */
    let size = 0;
    let written = 0;
    let over = false;
    // Chunks from the socket are small: gather them into WRITE_BYTES writes.
    const pending: Uint8Array[] = [];
    let pendingBytes = 0;
    const flush = async (): Promise<void> => {
      const block = Buffer.concat(pending, pendingBytes);
      pending.length = 0;
      pendingBytes = 0;
      hash.update(block);
      await writeSparse(fd, block, written);
      written += block.length;
    };
    const budget = new RetryBudget(client.transport.retries);
    for (;;) {
      const { res, start } = await client.openBlob(digest, size, undefined, budget);
      if (start !== size) {
        // The whole blob again: start over on an empty file (zeros are not written, so nothing of the last try may stay).
        hash = createHash('sha256');
        size = 0;
        written = 0;
        await truncateFd(fd, 0);
      }
      // A failed write is the disk's failure (a system error), not the connection's.
      let writing = false;
      try {
        for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
          if (size + chunk.length > content.size) {
            over = true;
            await res.body?.cancel().catch(() => {});
            break;
          }
          size += chunk.length;
          pending.push(chunk);
          pendingBytes += chunk.length;
          client.bytesDown += chunk.length;
          meter.add(chunk.length);
          if (pendingBytes >= WRITE_BYTES) {
            writing = true;
            await flush();
            writing = false;
          }
        }
        break;
      } catch (err) {
        if (writing) throw err;
        const e = client.lost(err, `reading blob ${digest}`);
        if (!isLost(e) || !budget.take()) throw e;
        // What came before the cut is kept (written below), and asked for from there on.
        await client.pause(budget.used - 1, `reading blob ${digest}`, e);
      } finally {
        if (pendingBytes > 0 && !over) await flush();
      }
    }
    if (over || size !== content.size || written !== size) {
      throw new SealError('SEAL_CORRUPT', `${client.transport.label} sent ${over ? 'more' : 'fewer'} than the ${content.size} bytes of blob ${digest}`);
    }
    if (hash.digest('hex') !== content.sha256) throw new SealError('SEAL_CORRUPT', `${client.transport.label} sent blob ${digest} with other content`);
    // Trailing zeros were not written: the size, without blocks.
    await truncateFd(fd, content.size);
  } finally {
    await closeFd(fd);
  }
}

/**
 * Takes the store's lock of the pulls of `digest` (see pull-lock.ts), waiting while
 * another pull, of this process or another, holds it: tried again after 5 ms, doubling
 * up to 100 ms (a blocking flock would hold a worker thread the other pull needs).
 */
async function takePullLock(target: PullTarget, digest: string, signal: AbortSignal | undefined): Promise<number> {
  for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
    if (signal?.aborted) throw abortedError('pull', signal);
    const fd = await runJob(target.sys, 'pullLock', [target.storeRoot, digest]);
    if (fd >= 0) return fd;
    await sleep(wait, signal);
  }
}

/** The store holds snapshot `digest`, and its manifest.json makes the config this manifest names (so nothing is left to fetch). */
async function heldLocally(target: PullTarget, digest: string, m: ManifestRead | undefined): Promise<boolean> {
  if (!target.has(digest)) return false;
  return m === undefined || (await runJob(target.sys, 'localConfig', [target.storeRoot, digest, m.artifact.config.mediaType === ROOT_TYPE])) === m.artifact.config.digest;
}

/**
 * Pulls a snapshot from `remote` into the store: by its digest (`ts-<digest>`), by a tag
 * or by its image manifest's digest. Network-bound, so it runs on the caller's event
 * loop; the disk work that could block it (the build's directories, contents taken from
 * local snapshots, writing packs, the final walk and publish) runs as worker jobs, and
 * large files are streamed with async writes. The snapshot manifest (assembled from the
 * root document and its pieces) must hash to the snapshot digest asked for (or, by tag
 * or manifest, the one the manifest claims; with options.source, it is then published
 * for that path under the digest a capture there gives), every blob must
 * have its size and every file its sha256 (see finishPull); then the build in tmp/ is
 * published by the no-replace rename. One download per host: the pulls of one snapshot
 * into one store take turns on its pull lock, and a pull that waited finds the snapshot
 * the one before it published and fetches nothing.
 */
export async function pullSnapshot(target: PullTarget, ref: Reference, remoteText: string, options: PullOptions = {}): Promise<PullReport> {
  const started = performance.now();
  const checked = checkRemoteOptions(remoteText, options, PULL_KEYS);
  const { remote } = checked;
  const tag = ref.kind === 'manifest' ? undefined : manifestReference(ref);
  const source = options.source === undefined ? undefined : checkAbsolutePath(options.source, 'options.source', 'source');
  checkBoolean('options.reuseLocal', options.reuseLocal);
  const noReuse = options.reuseLocal === false;
  const held = (digest: string, manifestDigest: string | undefined): PullReport => ({
    digest,
    remoteDigest: digest,
    remote: remote.text,
    tag,
    manifestDigest,
    existed: true,
    blobs: 0,
    downloaded: 0,
    bytesDownloaded: 0,
    reused: 0,
    reusedBytes: 0,
    elapsedMs: performance.now() - started,
  });
  // What the store holds is named by the registry's digest, which a snapshot for another source path does not have.
  const mayHold = source === undefined;
  if (mayHold && ref.kind === 'digest' && target.has(ref.digest)) return held(ref.digest, undefined);
  const client = await makeClient(checked, options, [`repository:${remote.repository}:pull`], 'pull');
  // Every connection the pull opened is closed when it ends, however it ends.
  try {
    let manifest = ref.kind === 'digest' ? undefined : await readManifest(client, ref, remote.text);
    const digest = manifest === undefined ? (ref as { digest: string }).digest : claimedDigest(manifest);
    if (mayHold && manifest !== undefined && (await heldLocally(target, digest, manifest))) return held(digest, manifest.digest);
    // Only now what the store does not hold is known: a store that cannot be written says so before anything is fetched.
    target.checkWritable?.();
    const lock = await takePullLock(target, digest, options.signal);
    try {
      // Another pull of this snapshot may have published it while this one waited.
      if (mayHold && (await heldLocally(target, digest, manifest))) return held(digest, manifest?.digest);
      manifest ??= await readManifest(client, ref, remote.text);
      const fetched = { ...(await fetchConfig(client, target.sys, target.storeRoot, manifest, digest, checked.concurrency)), source, noReuse };
      const report = await download(target, client, fetched, checked.concurrency, options);
      return { remoteDigest: digest, remote: remote.text, tag, manifestDigest: manifest.digest, ...report, elapsedMs: performance.now() - started };
    } finally {
      await runJob(target.sys, 'pullUnlock', [target.storeRoot, digest, lock]);
    }
  } finally {
    await client.close();
  }
}

/** Builds the fetched snapshot in tmp/ (what the store has taken from it, the rest downloaded) and publishes it. */
async function download(
  target: PullTarget,
  client: RegistryClient,
  fetched: FetchedRef,
  concurrency: number,
  options: PullOptions,
): Promise<Pick<PullReport, 'digest' | 'existed' | 'blobs' | 'downloaded' | 'bytesDownloaded' | 'reused' | 'reusedBytes'>> {
  const start = await runJob(target.sys, 'pullStart', [target.storeRoot, fetched]);
  // Published for another source path, the snapshot's digest is known only from its metadata: one the store holds is not fetched again.
  if (fetched.source !== undefined && target.has(start.digest)) {
    await runJob(target.sys, 'pullAbort', [start.id]);
    return { digest: start.digest, existed: true, blobs: 0, downloaded: 1 + fetched.artifact.pieces.length, bytesDownloaded: client.bytesDown, reused: 0, reusedBytes: 0 };
  }
  const needBytes = start.packs.reduce((n, p) => n + p.size, 0) + start.files.reduce((n, f) => n + f.size, 0);
  const huge = start.packs.find((p) => p.size > MAX_PACK_BYTES);
  if (huge !== undefined) {
    await runJob(target.sys, 'pullAbort', [start.id]);
    throw new SealError('SEAL_LIMIT', `${client.transport.label} lays out a pack of ${huge.size} bytes (${huge.digest}): more than a pull holds in memory (${MAX_PACK_BYTES} bytes), which no push makes`);
  }
  const budget = new PackBudget();
  const meter = new Meter(start.packs.length + start.files.length, needBytes, options.onProgress);
  try {
    const tasks = [
      ...start.packs.map((p) => async () => {
        // Not hashed whole here: the worker proves every byte it uses (each content's
        // sha256, the index byte for byte, the size exactly), and writes nothing else.
        const taken = await budget.take(p.size);
        try {
          const bytes = await client.getBlob(p.digest, p.size, false);
          const size = bytes.length;
          // Moved to the worker, not copied: not used here again.
          await runJob(target.sys, 'pullWritePack', [start.id, p.index, movable(bytes)]);
          meter.add(size, 1);
        } finally {
          budget.give(taken);
        }
      }),
      ...start.files.map((f) => async () => {
        await streamFile(client, target.sys, start.id, f, meter);
        meter.add(0, 1);
      }),
    ];
    await eachLimited(tasks, concurrency, (t) => t());
    if (options.signal?.aborted) throw abortedError('pull', options.signal);
    await runJob(target.sys, 'pullFinish', [start.id, start.files.map((f) => f.index)]);
  } catch (err) {
    await runJob(target.sys, 'pullAbort', [start.id]);
    throw err;
  }
  return {
    digest: start.digest,
    existed: false,
    blobs: start.blobs,
    downloaded: 1 + fetched.artifact.pieces.length + start.packs.length + start.files.length,
    bytesDownloaded: client.bytesDown,
    reused: start.reused,
    reusedBytes: start.reusedBytes,
  };
}
