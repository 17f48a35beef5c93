// verify.ts: re-hashes a published snapshot and checks every kind, mode and byte against its manifest.

import { CHUNK_BYTES, hashAt } from '../base/io.js';
import { DIR_FLAGS, openBeneath, openChildDir, openRealDir, own } from '../base/fd.js';
import type { SnapshotData } from './document.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import type { ManifestEntry } from '../base/manifest.js';
import { throttled, type ProgressFn } from '../base/progress.js';
import { escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, isDir, isLink, isReg } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';
import { COPY_AREA, mountArea } from './layout.js';

export interface VerifyReport {
  entries: number;
  bytes: number;
}

interface Walk {
  sys: Sys;
  expected: Map<string, ManifestEntry>;
  seen: Set<string>;
  drift: string[];
  buffer: Buffer;
  bytes: number;
  progress: (entries: number, bytes: number) => void;
  shared: Shared;
}

function hashFile(w: Walk, dirfd: number, name: string): { sha256: string; size: number } {
  const got = hashAt(w.sys, w.buffer, dirfd, name);
  w.bytes += got.size;
  w.shared.entries++;
  w.progress(w.shared.entries, w.shared.bytes + w.bytes);
  return got;
}

function checkDir(w: Walk, fd: number, rel: string): void {
  for (const item of w.sys.readdir(fd)) {
    const name = String(item.name);
    const path = rel === '' ? name : `${rel}/${name}`;
    const want = typeof item.name === 'string' ? w.expected.get(path) : undefined;
    if (want === undefined) {
      w.drift.push(path);
      continue;
    }
    w.seen.add(path);
    const st = w.sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW);
    const perm = st.mode & 0o7777;
    if (want.kind === 'directory') {
      if (perm !== 0o500 || !isDir(st.mode)) w.drift.push(path);
      if (!isDir(st.mode)) continue;
      using child = own(w.sys, openChildDir(w.sys, fd, name));
      checkDir(w, child.fd, path);
    } else if (want.kind === 'file') {
      const frozen = want.mode & 0o111 ? 0o500 : 0o400;
      if (!isReg(st.mode) || perm !== frozen || st.size !== want.size) {
        w.drift.push(path);
        continue;
      }
      const got = hashFile(w, fd, name);
      if (got.size !== want.size || got.sha256 !== want.sha256) w.drift.push(path);
    } else if (!isLink(st.mode) || w.sys.readlinkat(fd, name) !== want.link_target) {
      w.drift.push(path);
    }
  }
}

interface Shared {
  drift: string[];
  buffer: Buffer;
  bytes: number;
  entries: number;
  progress: (entries: number, bytes: number) => void;
}

function verifyArea(sys: Sys, rootFd: number, area: string, entries: readonly ManifestEntry[], shared: Shared): void {
  const walk: Walk = {
    sys,
    expected: new Map(entries.map((e) => [e.path, e])),
    seen: new Set(),
    drift: [],
    buffer: shared.buffer,
    bytes: 0,
    progress: shared.progress,
    shared,
  };
  let fd: number;
  try {
    fd = openBeneath(sys, rootFd, area.split('/'), DIR_FLAGS);
  } catch (err) {
    throwIfRefused(err, `snapshot area cannot be opened: ${escapePath(area)}`);
    shared.drift.push(area);
    return;
  }
  {
    using dir = own(sys, fd);
    checkDir(walk, dir.fd, '');
  }
  for (const e of entries) if (!walk.seen.has(e.path)) walk.drift.push(e.path);
  for (const path of walk.drift) shared.drift.push(`${area}/${path}`);
  shared.bytes += walk.bytes;
}

/** Throws SEAL_CORRUPT naming the first drifted path and the count; otherwise reports what was checked. */
export function verifyAt(sys: Sys, snapshotFd: number, data: SnapshotData, onProgress?: ProgressFn): VerifyReport {
  const shared: Shared = { drift: [], buffer: Buffer.allocUnsafe(CHUNK_BYTES), bytes: 0, entries: 0, progress: throttled(onProgress) };
  verifyArea(sys, snapshotFd, COPY_AREA, data.entries, shared);
  data.mounts.forEach((m, i) => verifyArea(sys, snapshotFd, mountArea(i), m.entries, shared));
  const drift = shared.drift;
  if (drift.length > 0) {
    const first = drift[0]!;
    throw new SealError(
      'SEAL_CORRUPT',
      `snapshot ${data.digest} is corrupt: ${drift.length} ${drift.length === 1 ? 'entry differs' : 'entries differ'} from its manifest, first: ${escapePath(first)}`,
      { path: first },
    );
  }
  const entries = data.entries.length + data.mounts.reduce((n, m) => n + m.entries.length, 0);
  return { entries, bytes: shared.bytes };
}

/** verifyAt for a snapshot directory given by path. */
export function verifySnapshotAt(sys: Sys, snapshotRoot: string, data: SnapshotData, onProgress?: ProgressFn): VerifyReport {
  using root = own(sys, openRealDir(sys, snapshotRoot, 'snapshot'));
  return verifyAt(sys, root.fd, data, onProgress);
}
