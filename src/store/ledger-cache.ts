// ledger-cache.ts: a materialized clone's ledger as stat cache entries, so a capture of the clone reads only what changed since the materialize.
import { GRANULARITY_NS, type CacheEntry } from '../capture/stat-cache.js';
import type { Stat, Sys } from '../sys/native.js';
import { loadLedgerAt } from './clone-ledger.js';
import { COPY_AREA } from './layout.js';
import { loadSnapshotAt } from './store-dir.js';

/**
 * The stat cache entries a clone's ledger stands for, when the store open at storeFd keeps
 * one for the directory `source` (its fstat) and still holds the snapshot it names: each
 * regular file materialize (or reset) made, by the identity recorded (device, inode, size,
 * mode, mtime, ctime), with the manifest's sha256 and the snapshot's frozen copy as where
 * its bytes are. Otherwise none.
 *
 * They are trusted as `diff` trusts the ledger: a file whose whole identity is the one
 * recorded is what materialize made (no unprivileged call sets a ctime back, and every
 * write, truncate, chmod, rename or link moves it), so it is not read; the bytes come
 * from the snapshot. Their recording time is put past the racy window: the ledger was
 * recorded after the files were written, with the arm stopped (as reset needs it).
 */
export function ledgerEntries(sys: Sys, storeFd: number, snapshotsFd: number, source: Stat): CacheEntry[] {
  const ledger = loadLedgerAt(sys, storeFd, source);
  if (ledger === undefined) return [];
  let entries;
  try {
    entries = loadSnapshotAt(sys, snapshotsFd, ledger.digest).entries;
  } catch {
    // Removed since, or unreadable: the capture reads every file, as without a ledger.
    return [];
  }
  if (entries.length !== ledger.count) return [];
  const out: CacheEntry[] = [];
  let i = -1;
  for (const e of entries) {
    const r = ledger.fileAt(++i);
    // A racy record (as new as the ledger) is no cache entry: that file is read.
    if (r === undefined || e.kind !== 'file' || r.size !== e.size || !ledger.trustsBytes(i)) continue;
    const newest = r.mtimeNs > r.ctimeNs ? r.mtimeNs : r.ctimeNs;
    out.push({ dev: ledger.fileDev, ...r, recordNs: newest + GRANULARITY_NS + 1n, sha256: e.sha256, snapshot: ledger.digest, location: `${COPY_AREA}/${e.path}` });
  }
  return out;
}
