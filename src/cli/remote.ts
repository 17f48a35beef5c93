// remote.ts: the push and pull subcommands: a snapshot to or from an OCI registry repository.
import { type PullReport, type PushReport, type SnapshotStore } from '../index.js';
import { bytes, ms, progressLine } from './format.js';
import { UsageError, emit, need, type Io } from './shared.js';

/** The options push and pull take. */
export interface RemoteValues {
  concurrency: string | undefined;
  insecure: boolean;
  mountFrom: string[];
}

function concurrency(v: RemoteValues, command: string): { concurrency?: number } {
  if (v.concurrency === undefined) return {};
  const n = Number(v.concurrency);
  if (!/^\d+$/.test(v.concurrency) || n < 1 || n > 64) throw new UsageError(`--concurrency takes a number from 1 to 64, not ${JSON.stringify(v.concurrency)}`, command);
  return { concurrency: n };
}

export async function push(store: SnapshotStore, args: string[], v: RemoteValues, io: Io): Promise<void> {
  need(args, 2, 'push', '<digest> <remote>');
  const line = progressLine('pushing', io.err);
  const r: PushReport = await store.push(args[0]!, args[1]!, {
    ...concurrency(v, 'push'),
    insecure: v.insecure,
    mountFrom: v.mountFrom,
    onProgress: (p) => line.update(p),
  });
  line.done();
  const what = r.existed
    ? `already there, nothing sent`
    : `${r.uploaded} of ${r.blobs} blobs uploaded (${bytes(r.bytesUploaded)}), ${r.mounted} mounted, ${r.skipped} already there`;
  emit(io, r, `pushed ${r.digest.slice(0, 12)} to ${r.remote}:${r.tag}: ${what} in ${ms(r.elapsedMs)}`);
}

export async function pull(store: SnapshotStore, args: string[], v: RemoteValues, io: Io): Promise<void> {
  need(args, 2, 'pull', '<digest> <remote>');
  const line = progressLine('pulling', io.err);
  const r: PullReport = await store.pull(args[0]!, args[1]!, { ...concurrency(v, 'pull'), insecure: v.insecure, onProgress: (p) => line.update(p) });
  line.done();
  const what = r.existed
    ? 'already in the store, nothing fetched'
    : `${r.downloaded} of ${r.blobs} blobs downloaded (${bytes(r.bytesDownloaded)}), ${r.reused} contents (${bytes(r.reusedBytes)}) taken from local snapshots, all verified`;
  emit(io, r, `pulled ${r.digest.slice(0, 12)} from ${r.remote}: ${what} in ${ms(r.elapsedMs)}`);
}
