// verify.ts: re-hashes a published snapshot (on the helper threads capture uses) and checks every kind, mode and byte against its manifest.

import { CHUNK_BYTES } from '../base/io.js';
import { FileJobs, type JobResult } from '../capture/pool.js';
import { DIR_FLAGS, openBeneath, openChildDir, own } from '../base/fd.js';
import type { StoredSnapshot } from './document.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { throttled, type ProgressFn } from '../base/progress.js';
import { escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isDir, isLink, isReg } from '../sys/constants.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';
import { COPY_AREA, mountArea } from './layout.js';
import { readingSnapshot } from './lock.js';

export interface VerifyReport {
  entries: number;
  bytes: number;
}

export interface VerifyOptions {
  onProgress?: ProgressFn | undefined;
  /** Helper threads hashing files (undefined: one per spare core); 0 hashes everything on this thread. */
  parallelism?: number | undefined;
}

interface Walk {
  sys: Sys;
  expected: Map<string, ManifestEntry>;
  seen: Set<string>;
  /** Drifted paths with their place in the walk (hashes come back in any order). */
  drift: [number, string][];
  seq: number;
  shared: Shared;
}

function flag(w: Walk, path: string, seq = w.seq++): void {
  w.drift.push([seq, path]);
}

/** Hands one file to the helper threads; a digest or size that differs is drift, found in its walk order. */
function hashFile(w: Walk, dirfd: number, name: string, path: string, want: ManifestEntry): void {
  const seq = w.seq++;
  using file = own(w.sys, w.sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  const before = w.sys.fstat(file.fd);
  const shared = w.shared;
  // The job owns (and closes) the fd from here.
  w.shared.jobs.run(file.release(), -1, before, { clone: false, range: false }, (r: JobResult) => {
    if (r instanceof Error) throw r;
    if (r === 'changed' || r.sha256 !== want.sha256 || before.size !== want.size) flag(w, path, seq);
    shared.bytes += before.size;
    shared.entries++;
    shared.progress(shared.entries, shared.bytes);
  });
}

function checkDir(w: Walk, fd: number, rel: string): void {
  for (const item of w.sys.readdir(fd)) {
    const name = String(item.name);
    const path = rel === '' ? name : `${rel}/${name}`;
    const want = typeof item.name === 'string' ? w.expected.get(path) : undefined;
    if (want === undefined) {
      flag(w, path);
      continue;
    }
    w.seen.add(path);
    const st = w.sys.fstatat(fd, name, AT_SYMLINK_NOFOLLOW);
    const perm = st.mode & 0o7777;
    if (want.kind === 'directory') {
      if (perm !== 0o500 || !isDir(st.mode)) flag(w, path);
      if (!isDir(st.mode)) continue;
      using child = own(w.sys, openChildDir(w.sys, fd, name));
      checkDir(w, child.fd, path);
    } else if (want.kind === 'file') {
      const frozen = want.mode & 0o111 ? 0o500 : 0o400;
      if (!isReg(st.mode) || perm !== frozen || st.size !== want.size) {
        flag(w, path);
        continue;
      }
      hashFile(w, fd, name, path, want);
    } else if (!isLink(st.mode) || w.sys.readlinkat(fd, name) !== want.link_target) {
      flag(w, path);
    }
  }
}

interface Shared {
  drift: string[];
  jobs: FileJobs;
  bytes: number;
  entries: number;
  progress: (entries: number, bytes: number) => void;
}

function verifyArea(sys: Sys, rootFd: number, area: string, entries: Entries, shared: Shared): void {
  const walk: Walk = { sys, expected: new Map(Array.from(entries, (e) => [e.path, e])), seen: new Set(), drift: [], seq: 0, shared };
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
  shared.jobs.drain();
  for (const e of entries) if (!walk.seen.has(e.path)) flag(walk, e.path);
  walk.drift.sort((a, b) => a[0] - b[0]);
  for (const [, path] of walk.drift) shared.drift.push(`${area}/${path}`);
}

/** Throws SEAL_CORRUPT naming the first drifted path and the count; otherwise reports what was checked. */
export function verifyAt(sys: Sys, snapshotFd: number, data: StoredSnapshot, options: VerifyOptions = {}): VerifyReport {
  const jobs = new FileJobs(sys, Buffer.allocUnsafe(CHUNK_BYTES), options.parallelism, sys === nativeSys);
  const shared: Shared = { drift: [], jobs, bytes: 0, entries: 0, progress: throttled(options.onProgress) };
  try {
    verifyArea(sys, snapshotFd, COPY_AREA, data.entries, shared);
    data.mounts.forEach((m, i) => verifyArea(sys, snapshotFd, mountArea(i), m.entries, shared));
  } finally {
    jobs.close();
  }
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

/** verifyAt for a published snapshot given by path, under the store's shared lock (an rm waits; a removed one is SEAL_UNAVAILABLE). */
export function verifySnapshotAt(sys: Sys, snapshotRoot: string, data: StoredSnapshot, options: VerifyOptions = {}): VerifyReport {
  return readingSnapshot(sys, snapshotRoot, data.digest, (fd) => verifyAt(sys, fd, data, options));
}
