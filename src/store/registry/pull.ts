// pull.ts: store.pull: a snapshot from an OCI registry, proven against its digest, built in tmp/ and published by rename.
import { createHash } from 'node:crypto';
import { close, write } from 'node:fs';
import { promisify } from 'node:util';

import { SealError } from '../../base/errors.js';
import type { Sys } from '../../sys/native.js';
import { parseArtifact } from './artifact.js';
import type { RegistryClient } from './client.js';
import { isLost } from './http.js';
import { runJob } from './jobs.js';
import { Meter, checkRemoteOptions, eachLimited, makeClient, type PullOptions, type PullReport } from './options.js';
import { snapshotTag } from './remote.js';
import type { Fetched } from './prove.js';
import type { FileToPull } from './pull-build.js';

const writeAt = promisify(write);
const closeFd = promisify(close);

/** The largest snapshot manifest (config blob) accepted. */
const MAX_CONFIG_BYTES = 1024 * 1024 * 1024;
/** Bytes gathered before each write of a streamed large file. */
const WRITE_BYTES = 4 * 1024 * 1024;

export interface PullTarget {
  sys: Sys;
  storeRoot: string;
  /** Whether the store already holds a snapshot. */
  has: (digest: string) => boolean;
}

/** Fetches the tag's manifest and its config blob (size and sha256 checked); the worker proves the rest. */
async function fetchSnapshot(client: RegistryClient, digest: string, where: string): Promise<Fetched> {
  const tag = snapshotTag(digest);
  const missing = (detail: string): SealError => new SealError('SEAL_REMOTE', `snapshot ${digest} is not in ${where} (no tag ${tag}): ${detail}`);
  const bytes = (await client.getManifest(tag, missing))!;
  const artifact = parseArtifact(bytes, `${where}:${tag}`);
  if (artifact.config.size > MAX_CONFIG_BYTES) throw new SealError('SEAL_CORRUPT', `${where}:${tag} has a config of ${artifact.config.size} bytes`);
  const config = (await client.getBlob(artifact.config.digest, artifact.config.size)).toString('utf8');
  return { digest, where: `${where}:${tag}`, config, artifact };
}

/** Writes all of block at position to fd (async). */
async function writeFully(fd: number, block: Buffer, position: number): Promise<void> {
  for (let done = 0; done < block.length; ) {
    const { bytesWritten } = await writeAt(fd, block, done, block.length - done, position + done);
    done += bytesWritten;
  }
}

/**
 * Streams a large file's blob into the build at the content's first place (created by a
 * worker job, fd-relatively, so a path of any length works): async writes, hashed as it
 * comes, its size and sha256 proven before the file counts. A body cut short (a dropped
 * connection, a passed deadline) is resumed with a Range request from the last byte
 * received, up to `retries` times; a registry that answers it with the whole blob is read
 * again from byte 0. The sha256 is of the whole file, however many requests brought it.
 */
async function streamFile(client: RegistryClient, sys: Sys, buildId: number, content: FileToPull, meter: Meter): Promise<void> {
  const digest = `sha256:${content.sha256}`;
  const fd = await runJob(sys, 'pullOpenFile', [buildId, content.index]);
  try {
    let hash = createHash('sha256');
    let size = 0;
    let over = false;
    // Chunks from the socket are small: gather them into WRITE_BYTES writes.
    const pending: Uint8Array[] = [];
    let pendingBytes = 0;
    const flush = async (): Promise<void> => {
      const block = Buffer.concat(pending, pendingBytes);
      pending.length = 0;
      pendingBytes = 0;
      await writeFully(fd, block, size - block.length);
    };
    for (let resumes = 0; ; resumes++) {
      const { res, start } = await client.openBlob(digest, size);
      if (start !== size) {
        // The whole blob again: start over (the bytes written so far are overwritten in place).
        hash = createHash('sha256');
        size = 0;
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
          hash.update(chunk);
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
        if (!isLost(e) || resumes >= client.transport.retries) throw e;
        // What came before the cut is kept (written below), and asked for from there on.
        await client.pause(resumes);
      } finally {
        if (pendingBytes > 0 && !over) await flush();
      }
    }
    if (over || size !== content.size) {
      throw new SealError('SEAL_CORRUPT', `${client.transport.label} sent ${over ? 'more' : 'fewer'} than the ${content.size} bytes of blob ${digest}`);
    }
    if (hash.digest('hex') !== content.sha256) throw new SealError('SEAL_CORRUPT', `${client.transport.label} sent blob ${digest} with other content`);
  } finally {
    await closeFd(fd);
  }
}

/**
 * Pulls snapshot `digest` from `remote` into the store. Network-bound, so it runs on
 * the caller's event loop; the disk work that could block it (the build's directories,
 * contents taken from local snapshots, writing packs, the final verify and publish)
 * runs as worker jobs, and large files are streamed with async writes. The config must
 * hash to the requested digest, every blob must have its size and sha256 and every
 * file its sha256; then the build in tmp/ is published by the no-replace rename.
 */
export async function pullSnapshot(target: PullTarget, digest: string, remoteText: string, options: PullOptions = {}): Promise<PullReport> {
  const started = performance.now();
  const checked = checkRemoteOptions(remoteText, options);
  const { remote } = checked;
  const base = { digest, remote: remote.text, tag: snapshotTag(digest) };
  if (target.has(digest)) {
    return { ...base, existed: true, blobs: 0, downloaded: 0, bytesDownloaded: 0, reused: 0, reusedBytes: 0, elapsedMs: performance.now() - started };
  }
  const client = await makeClient(checked, options, [`repository:${remote.repository}:pull`], 'pull');
  // Every connection the pull opened is closed when it ends, however it ends.
  try {
    const fetched = await fetchSnapshot(client, digest, remote.text);
    const start = await runJob(target.sys, 'pullStart', [target.storeRoot, fetched]);
    const needBytes = start.packs.reduce((n, p) => n + p.size, 0) + start.files.reduce((n, f) => n + f.size, 0);
    const meter = new Meter(start.packs.length + start.files.length, needBytes, options.onProgress);
    try {
      const tasks = [
        ...start.packs.map((p) => async () => {
          const bytes = await client.getBlob(p.digest, p.size);
          await runJob(target.sys, 'pullWritePack', [start.id, p.index, bytes]);
          meter.add(bytes.length, 1);
        }),
        ...start.files.map((f) => async () => {
          await streamFile(client, target.sys, start.id, f, meter);
          meter.add(0, 1);
        }),
      ];
      await eachLimited(tasks, checked.concurrency, (t) => t());
      if (options.signal?.aborted) throw new SealError('SEAL_ABORTED', 'pull was aborted');
      await runJob(target.sys, 'pullFinish', [start.id, start.files.map((f) => f.index)]);
    } catch (err) {
      await runJob(target.sys, 'pullAbort', [start.id]);
      throw err;
    }
    return {
      ...base,
      existed: false,
      blobs: start.blobs,
      downloaded: 1 + start.packs.length + start.files.length,
      bytesDownloaded: client.bytesDown,
      reused: start.reused,
      reusedBytes: start.reusedBytes,
      elapsedMs: performance.now() - started,
    };
  } finally {
    await client.close();
  }
}
