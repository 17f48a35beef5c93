// mount-points.ts: the read-only mount list of a snapshot, with each mount point prepared inside the clone.
import { openChildDir, openRealDir, own, walkDown } from '../base/fd.js';
import type { StoredSnapshot } from './document.js';
import { checkOptions, checkString } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import { openMountParent, parentCollision, preflightMount, statOrNull, targetCollision } from './clone-paths.js';
import { checkRelative, checkWorkspace, escapePath } from '../base/paths.js';
import { AT_SYMLINK_NOFOLLOW, O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_WRONLY, isDir, isLink, isReg } from '../sys/constants.js';
import type { Sys } from '../sys/native.js';
import { PAYLOAD_NAME, mountArea } from './layout.js';
import { readingSnapshot } from './lock.js';

export interface MountPoint {
  /** Absolute path of the frozen payload inside the snapshot. */
  source: string;
  /** `${workspace}/${target}`. */
  target: string;
  readOnly: true;
  /**
   * Empty directories of the payload a tool writes into (`.vite-temp` at the top of a
   * node_modules payload, and `.vite` and `.cache` where the payload holds them empty, as
   * the capture's `ensureDirs` makes them), as sandbox paths: a sandbox covers each with a
   * writable tmpfs.
   */
  tmpfs: string[];
}

/**
 * The directories at the top of a payload that tools write into (vite's temporary files,
 * vite's and vitest's cache, the cache of babel, eslint and others under node_modules); a
 * sandbox puts a tmpfs on each the payload holds empty. `.vite-temp` is made by default
 * (as the Python task-asset cache makes it); the others where `ensureDirs` asks.
 */
const TOOL_DIRS = ['.vite-temp', '.vite', '.cache'];

/** Whether the payload's entries hold `payload/<name>` as an empty directory. */
function hasEmptyDir(entries: Iterable<{ path: string; kind: string }>, name: string): boolean {
  const path = `${PAYLOAD_NAME}/${name}`;
  let found = false;
  for (const e of entries) {
    if (e.path === path && e.kind === 'directory') found = true;
    else if (e.path.startsWith(`${path}/`)) return false;
  }
  return found;
}

export interface MountPointOptions {
  workspace?: string | undefined;
}

/** Refuses a target that cannot be prepared (a symlink, special file or other type on its path), writing nothing. */
function checkTarget(sys: Sys, cloneFd: number, parts: readonly string[], directory: boolean): void {
  const rel = parts.join('/');
  preflightMount(sys, cloneFd, parts);
  using _ = walkDown(sys, cloneFd, parts, (dirfd, name, i) => {
    const st = statOrNull(sys, dirfd, name);
    if (st === null) return null;
    if (i < parts.length - 1) {
      if (!isDir(st.mode)) throw parentCollision(rel);
      return openChildDir(sys, dirfd, name);
    }
    if (directory ? !isDir(st.mode) : !isReg(st.mode)) {
      throw targetCollision(rel);
    }
    return null;
  });
}

/** Makes the target (an empty directory or file) and its missing parents; an existing one of its type is kept. */
function prepareTarget(sys: Sys, cloneFd: number, parts: readonly string[], directory: boolean): void {
  const rel = parts.join('/');
  using parent = own(sys, openMountParent(sys, cloneFd, parts.slice(0, -1), rel));
  const name = parts[parts.length - 1]!;
  const st = statOrNull(sys, parent.fd, name);
  if (st !== null && isLink(st.mode)) throw new SealError('SEAL_SYMLINK', `mount target cannot be a symlink: ${escapePath(rel)}`, { path: rel });
  if (st !== null && (directory ? !isDir(st.mode) : !isReg(st.mode))) {
    throw targetCollision(rel);
  }
  if (st !== null) return;
  if (directory) sys.mkdirat(parent.fd, name, 0o700);
  else own(sys, sys.openat(parent.fd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600)).close();
}

export function mountPointsOf(sys: Sys, snapshotRoot: string, data: StoredSnapshot, clone: string, options: MountPointOptions = {}): MountPoint[] {
  checkString('clone', clone);
  const workspace = checkWorkspace(checkOptions('options', options).workspace, 'options.workspace');
  using cloneDir = own(sys, openRealDir(sys, clone, 'clone'));
  // Under the store's shared lock: an rm waits; a snapshot already removed is SEAL_UNAVAILABLE.
  return readingSnapshot(sys, snapshotRoot, data.digest, (snapshotFd) => {
    const points = data.mounts.map((m, i) => {
      checkPayload(sys, snapshotFd, i, m);
      // Checked again here, lexically, whatever loaded the snapshot: nothing is made outside the clone.
      const parts = checkRelative(m.target, { label: 'mount target', name: `mounts[${i}].target`, maxPathBytes: Number.MAX_SAFE_INTEGER });
      const scratch = m.kind === 'directory' ? TOOL_DIRS.filter((name) => hasEmptyDir(m.entries, name)) : [];
      return { parts, directory: m.kind === 'directory', source: `${snapshotRoot}/${mountArea(i)}/${PAYLOAD_NAME}`, scratch };
    });
    // Every target is checked before any is made: a refusal writes nothing.
    for (const p of points) checkTarget(sys, cloneDir.fd, p.parts, p.directory);
    return points.map((p) => {
      prepareTarget(sys, cloneDir.fd, p.parts, p.directory);
      const target = `${workspace === '/' ? '' : workspace}/${p.parts.join('/')}`;
      return { source: p.source, target, readOnly: true as const, tmpfs: p.scratch.map((name) => `${target}/${name}`) };
    });
  });
}

/** The frozen payload of mount i is there, of the kind the manifest says. */
function checkPayload(sys: Sys, snapshotFd: number, i: number, m: StoredSnapshot['mounts'][number]): void {
  let st;
  try {
    st = sys.fstatat(snapshotFd, `${mountArea(i)}/${PAYLOAD_NAME}`, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    throwIfRefused(err, `mount snapshot cannot be read: ${escapePath(m.source)}`);
    throw new SealError('SEAL_CORRUPT', `mount snapshot changed: ${escapePath(m.source)}`, { cause: err });
  }
  if (m.kind === 'directory' ? !isDir(st.mode) : !isReg(st.mode)) {
    throw new SealError('SEAL_CORRUPT', `mount snapshot changed: ${escapePath(m.source)}`);
  }
}
