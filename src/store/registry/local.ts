// local.ts: finds contents a pull needs in the snapshots the store already holds.
import { openChildDir, own } from '../../base/fd.js';
import type { Sys } from '../../sys/native.js';
import { loadSnapshotAt } from '../store-dir.js';
import { Contents, type Content } from './contents.js';

const DIGEST_RE = /^[0-9a-f]{64}$/;

/**
 * Calls use(rootFd, local, k) once for each content k of `want` that some published
 * snapshot holds with the same size (`local` names it there; rootFd is that snapshot's
 * directory, open for the call). Contents of both are in sha256 order, so each snapshot's
 * are matched in one pass. Snapshots whose manifest cannot be read are passed over.
 */
export function findLocal(sys: Sys, snapshotsFd: number, want: Contents, use: (rootFd: number, local: Content, k: number) => void): void {
  const found = new Uint8Array(want.count);
  let left = want.count;
  for (const entry of sys.readdir(snapshotsFd)) {
    if (left === 0) return;
    const digest = entry.name;
    if (typeof digest !== 'string' || !DIGEST_RE.test(digest)) continue;
    let local: Contents;
    const pairs: [number, number][] = [];
    try {
      local = new Contents(loadSnapshotAt(sys, snapshotsFd, digest));
      for (let k = 0, j = 0; k < want.count && j < local.count; ) {
        const order = want.compare(k, local, j);
        if (order < 0) k++;
        else if (order > 0) j++;
        else {
          if (found[k] === 0 && want.size(k) === local.size(j)) pairs.push([j, k]);
          k++;
          j++;
        }
      }
    } catch {
      continue;
    }
    if (pairs.length === 0) continue;
    using root = own(sys, openChildDir(sys, snapshotsFd, digest));
    for (const [j, k] of pairs) {
      found[k] = 1;
      left--;
      use(root.fd, local.content(j), k);
    }
  }
}
