// pull.ts: store.pull: a snapshot from an OCI registry, proven against its digest, built in tmp/ and published by rename.
import { createHash } from 'node:crypto';
import { close, write } from 'node:fs';
import { promisify } from 'node:util';

import { SealError } from '../../base/errors.js';
import type { Sys } from '../../sys/native.js';
import { parseArtifact } from './artifact.js';
import type { RegistryClient } from './client.js';
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
 * comes, its size and sha256 proven before the file counts.
 */
async function streamFile(client: RegistryClient, sys: Sys, buildId: number, content: FileToPull, meter: Meter): Promise<void> {
  const digest = `sha256:${content.sha256}`;
  const fd = await runJob(sys, 'pullOpenFile', [buildId, content.index]);
  try {
    const res = await client.openBlob(digest);
    const hash = createHash('sha256');
    let size = 0;
    // Chunks from the socket are small: gather them into WRITE_BYTES writes.
    const pending: Uint8Array[] = [];
    let pendingBytes = 0;
    // A failed write is the disk's failure (a system error), not the connection's.
    let writing = false;
    const flush = async (): Promise<void> => {
      const block = Buffer.concat(pending, pendingBytes);
      pending.length = 0;
      pendingBytes = 0;
      writing = true;
      await writeFully(fd, block, size - block.length);
      writing = false;
    };
    try {
      for await (const chunk of (res.body ?? []) as AsyncIterable<Uint8Array>) {
        size += chunk.length;
        if (size > content.size) break;
        hash.update(chunk);
        pending.push(chunk);
        pendingBytes += chunk.length;
        if (pendingBytes >= WRITE_BYTES) await flush();
        client.bytesDown += chunk.length;
        meter.add(chunk.length);
      }
      if (pendingBytes > 0 && size <= content.size) await flush();
    } catch (err) {
      if (writing) throw err;
      throw client.lost(err, `reading blob ${digest}`);
    }
    if (size !== content.size) {
      await res.body?.cancel().catch(() => {});
      throw new SealError('SEAL_CORRUPT', `${client.transport.label} sent ${size > content.size ? 'more' : 'fewer'} than the ${content.size} bytes of blob ${digest}`);
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
