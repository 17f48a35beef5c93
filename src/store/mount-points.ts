// mount-points.ts: the read-only mount list of a snapshot, with each mount point prepared inside the clone.
import { openRealDir, own } from '../base/fd.js';
import type { StoredSnapshot } from './document.js';
import { checkOptions, checkString } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { throwIfRefused } from '../base/refusal.js';
import { openPublishParent, preflightRoot, statOrNull } from './clone-paths.js';
import { escapePath } from '../base/paths.js';
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
}

export interface MountPointOptions {
  workspace?: string;
}

function prepareTarget(sys: Sys, cloneFd: number, parts: string[], directory: boolean): void {
  const rel = parts.join('/');
  preflightRoot(sys, cloneFd, parts, 'mount');
  using parent = own(sys, openPublishParent(sys, cloneFd, parts.slice(0, -1), 'mount'));
  const name = parts[parts.length - 1]!;
  const st = statOrNull(sys, parent.fd, name);
  if (st !== null && isLink(st.mode)) throw new SealError('SEAL_SYMLINK', `mount target cannot be a symlink: ${escapePath(rel)}`, { path: rel });
  if (st !== null && (directory ? !isDir(st.mode) : !isReg(st.mode))) {
    throw new SealError('SEAL_COLLISION', `mount target exists with another type: ${escapePath(rel)}`, { path: rel });
  }
  if (st !== null) return;
  if (directory) sys.mkdirat(parent.fd, name, 0o700);
  else own(sys, sys.openat(parent.fd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0o600)).close();
}

export function mountPointsOf(sys: Sys, snapshotRoot: string, data: StoredSnapshot, clone: string, options: MountPointOptions = {}): MountPoint[] {
  checkString('clone', clone);
  const workspace = checkString('options.workspace', checkOptions('options', options).workspace ?? '/workspace').replace(/\/+$/, '');
  using cloneDir = own(sys, openRealDir(sys, clone, 'clone'));
  // Under the store's shared lock: an rm waits; a snapshot already removed is SEAL_UNAVAILABLE.
  return readingSnapshot(sys, snapshotRoot, data.digest, (snapshotFd) => data.mounts.map((m, i) => {
    const source = `${snapshotRoot}/${mountArea(i)}/${PAYLOAD_NAME}`;
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
    const parts = m.target.split('/').filter((p) => p !== '' && p !== '.');
    prepareTarget(sys, cloneDir.fd, parts, m.kind === 'directory');
    return { source, target: `${workspace}/${parts.join('/')}`, readOnly: true as const };
  }));
}
