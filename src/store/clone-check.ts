// clone-check.ts: checkClone: re-hashes a clone's copy roots against a manifest and names every difference, and the in-progress marker.
import { CHUNK_BYTES, hashAt } from '../base/io.js';
import { DIR_FLAGS, closeQuietly, openChildDir, openRealDir } from '../base/fd.js';
import type { ManifestEntry } from '../base/manifest.js';
import { compareUtf8, escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, isDir, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Sys } from '../sys/native.js';
import { hasMarker } from './clone-stage.js';
import type { StoredSnapshot } from './document.js';

export interface CloneReport {
  /** No difference and no marker: the clone's copy roots are exactly the snapshot's. */
  ok: boolean;
  /** A materialize was interrupted (or is running): `.treeseal-materializing` is in the clone. */
  marker: boolean;
  /** Paths inside the copy roots the manifest does not have (the top of an added subtree). */
  added: string[];
  /** Manifest paths missing from the clone. */
  removed: string[];
  /** Paths whose kind, size or bytes differ. */
  changed: string[];
  /** Files hashed and their bytes. */
  files: number;
  bytes: number;
}

interface Check {
  sys: Sys;
  expected: Map<string, ManifestEntry>;
  seen: Set<string>;
  report: CloneReport;
  buffer: Buffer;
}

function checkEntry(c: Check, dirfd: number, name: string, path: string, want: ManifestEntry): void {
  let st;
  try {
    st = c.sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return;
    throw err;
  }
  c.seen.add(path);
  if (want.kind === 'directory') {
    if (!isDir(st.mode)) return void c.report.changed.push(path);
    const fd = openChildDir(c.sys, dirfd, name);
    try {
      checkDir(c, fd, path);
    } finally {
      closeQuietly(c.sys, fd);
    }
    return;
  }
  if (!isReg(st.mode) || st.size !== want.size) return void c.report.changed.push(path);
  const got = hashAt(c.sys, c.buffer, dirfd, name);
  c.report.files++;
  c.report.bytes += got.size;
  if (got.size !== want.size || got.sha256 !== want.sha256) c.report.changed.push(path);
}

function checkDir(c: Check, fd: number, rel: string): void {
  for (const item of c.sys.readdir(fd)) {
    const shown = typeof item.name === 'string' ? item.name : escapePath(item.name);
    const path = `${rel}/${shown}`;
    const want = typeof item.name === 'string' ? c.expected.get(path) : undefined;
    if (want === undefined) c.report.added.push(path);
    else checkEntry(c, fd, item.name as string, path, want);
  }
}

/** Opens the directory holding a root (its implicit parents must be directories), or -1 when it is missing. */
function openRootParent(c: Check, cloneFd: number, parts: readonly string[]): number {
  let fd = c.sys.openat(cloneFd, '.', DIR_FLAGS);
  for (let i = 0; i < parts.length - 1; i++) {
    const path = parts.slice(0, i + 1).join('/');
    let next = -1;
    try {
      const st = c.sys.fstatat(fd, parts[i]!, AT_SYMLINK_NOFOLLOW);
      if (isDir(st.mode)) next = openChildDir(c.sys, fd, parts[i]!);
      else c.report.changed.push(path);
    } catch (err) {
      if (!hasCode(err, 'ENOENT')) {
        closeQuietly(c.sys, fd);
        throw err;
      }
    }
    closeQuietly(c.sys, fd);
    if (next < 0) return -1;
    c.seen.add(path);
    fd = next;
  }
  return fd;
}

/** Compares the clone's copy roots (not the rest of the clone) with data's manifest. */
export function checkCloneAt(sys: Sys, data: StoredSnapshot, clone: string): CloneReport {
  const cloneFd = openRealDir(sys, clone, 'clone');
  const report: CloneReport = { ok: false, marker: false, added: [], removed: [], changed: [], files: 0, bytes: 0 };
  const c: Check = { sys, expected: new Map(Array.from(data.entries, (e) => [e.path, e])), seen: new Set(), report, buffer: Buffer.allocUnsafe(CHUNK_BYTES) };
  try {
    report.marker = hasMarker(sys, cloneFd);
    for (const declared of data.declarations) {
      const parts = declared.split('/').filter((p) => p !== '' && p !== '.');
      const parent = openRootParent(c, cloneFd, parts);
      if (parent < 0) continue;
      try {
        const path = parts.join('/');
        checkEntry(c, parent, parts[parts.length - 1]!, path, c.expected.get(path)!);
      } finally {
        closeQuietly(sys, parent);
      }
    }
  } finally {
    closeQuietly(sys, cloneFd);
  }
  for (const e of data.entries) if (!c.seen.has(e.path)) report.removed.push(e.path);
  for (const list of [report.added, report.removed, report.changed]) list.sort(compareUtf8);
  report.ok = !report.marker && report.added.length + report.removed.length + report.changed.length === 0;
  return report;
}
