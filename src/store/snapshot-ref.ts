// snapshot-ref.ts: how an operation names a snapshot across threads: its root and digest, its data where the caller holds it.
import { basename, dirname } from 'node:path';

import { SealError } from '../base/errors.js';
import { openRealDir, own } from '../base/fd.js';
import type { Sys } from '../sys/native.js';
import { packSnapshot, type PackedSnapshot, type StoredSnapshot } from './document.js';
import { loadSnapshotAt } from './store-dir.js';

/** A snapshot an operation works on: `load` gives its data on the thread that holds it; elsewhere it is read again. */
export interface SnapshotRef {
  root: string;
  digest: string;
  load?: (() => StoredSnapshot) | undefined;
}

/** What crosses threads for a snapshot: its name, never its entries. */
export function sendRef(ref: SnapshotRef): SnapshotRef {
  return { root: ref.root, digest: ref.digest };
}

/** Snapshots this thread captured or loaded lately, by root: a job names one, its entries never cross threads again. */
const held = new Map<string, StoredSnapshot>();
const HELD_MAX = 4;

/** Remembers data as the snapshot at root (the newest HELD_MAX are kept) and returns it. */
export function hold(root: string, data: StoredSnapshot): StoredSnapshot {
  held.delete(root);
  held.set(root, data);
  if (held.size > HELD_MAX) held.delete(held.keys().next().value!);
  return data;
}

/** data held for the caller's thread, packed to cross back to it. */
export function holdPacked(root: string, data: StoredSnapshot): PackedSnapshot {
  return packSnapshot(hold(root, data));
}

/** The snapshot's data: the caller's, else held, else read from its manifest.json and proven against its digest. */
export function dataOf(sys: Sys, ref: SnapshotRef): StoredSnapshot {
  if (ref.load !== undefined) return ref.load();
  const known = held.get(ref.root);
  if (known !== undefined && known.digest === ref.digest) return hold(ref.root, known);
  if (basename(ref.root) !== ref.digest) throw new SealError('SEAL_CORRUPT', `snapshot root does not name its digest: ${ref.digest}`);
  using snapshots = own(sys, openRealDir(sys, dirname(ref.root), 'store snapshots directory'));
  return hold(ref.root, loadSnapshotAt(sys, snapshots.fd, ref.digest));
}
