// local.ts: finds contents a pull needs in the snapshots the store already holds.
import { openChildDir, own } from '../../base/fd.js';
import type { Sys } from '../../sys/native.js';
import { loadSnapshotAt } from '../store-dir.js';
import { contentsOf, type Content } from './mapping.js';

const DIGEST_RE = /^[0-9a-f]{64}$/;

/**
 * Calls use(rootFd, local, content) once for each wanted content that some published
 * snapshot holds (`local` names it there; rootFd is that snapshot's directory, open
 * for the call). Snapshots whose manifest cannot be read are passed over.
 */
export function findLocal(sys: Sys, snapshotsFd: number, wanted: readonly Content[], use: (rootFd: number, local: Content, content: Content) => void): void {
  const missing = new Map(wanted.map((c) => [c.sha256, c]));
  for (const entry of sys.readdir(snapshotsFd)) {
    if (missing.size === 0) return;
    const digest = entry.name;
    if (typeof digest !== 'string' || !DIGEST_RE.test(digest)) continue;
    let found: [Content, Content][];
    try {
      const { contents } = contentsOf(loadSnapshotAt(sys, snapshotsFd, digest));
      found = contents.flatMap((local) => {
        const want = missing.get(local.sha256);
        return want !== undefined && want.size === local.size ? [[local, want] as [Content, Content]] : [];
      });
    } catch {
      continue;
    }
    if (found.length === 0) continue;
    using root = own(sys, openChildDir(sys, snapshotsFd, digest));
    for (const [local, want] of found) {
      missing.delete(want.sha256);
      use(root.fd, local, want);
    }
  }
}
