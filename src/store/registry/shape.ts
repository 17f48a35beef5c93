// shape.ts: the structural checks a snapshot manifest from a registry must pass before anything is built from it.
import { SealError } from '../../base/errors.js';
import type { Entries } from '../../base/manifest.js';
import { compareUtf8, escapePath, isWellFormed } from '../../base/paths.js';
import type { StoredSnapshot } from '../document.js';

const SHA_RE = /^[0-9a-f]{64}$/;

function refuse(digest: string, why: string, path?: string): SealError {
  const where = path === undefined ? '' : `: ${escapePath(path)}`;
  return new SealError('SEAL_CORRUPT', `snapshot ${digest} from the registry is malformed (${why})${where}`, path === undefined ? {} : { path });
}

function checkPath(digest: string, path: string): void {
  const parts = path.split('/');
  if (!isWellFormed(path) || path.includes('\0') || parts.some((p) => p === '' || p === '.' || p === '..')) {
    throw refuse(digest, 'bad path', path);
  }
  // NAME_MAX: no filesystem here can hold a longer name.
  if (parts.some((p) => Buffer.byteLength(p, 'utf8') > 255)) throw refuse(digest, 'path component longer than 255 bytes', path);
}

/** One area's entries: sorted, unique, well-formed paths whose parents are directories listed before them. */
function checkArea(digest: string, entries: Entries, mount: boolean): number {
  const dirs = new Set<string>();
  let bytes = 0;
  let previous: string | undefined;
  for (const e of entries) {
    checkPath(digest, e.path);
    if (previous !== undefined && compareUtf8(previous, e.path) >= 0) throw refuse(digest, 'entries out of order or repeated', e.path);
    previous = e.path;
    const cut = e.path.lastIndexOf('/');
    if (cut >= 0 && !dirs.has(e.path.slice(0, cut))) throw refuse(digest, 'parent is not a directory entry', e.path);
    if (mount && e.path !== 'payload' && !e.path.startsWith('payload/')) throw refuse(digest, 'mount entry outside its payload', e.path);
    if (!Number.isSafeInteger(e.size) || e.size < 0 || !Number.isSafeInteger(e.mode) || e.mode < 0 || e.mode > 0o7777) {
      throw refuse(digest, 'bad size or mode', e.path);
    }
    if (e.kind === 'directory') dirs.add(e.path);
    else if (e.kind === 'file') {
      if (!SHA_RE.test(e.sha256)) throw refuse(digest, 'bad sha256', e.path);
      bytes += e.size;
    } else {
      const t = e.link_target;
      if (!mount || t === '' || t.startsWith('/') || t.includes('\0') || !isWellFormed(t)) throw refuse(digest, 'bad symlink', e.path);
      bytes += Buffer.byteLength(t, 'utf8');
    }
  }
  return bytes;
}

/** Throws SEAL_CORRUPT unless every area is well formed and total_bytes adds up. */
export function checkShape(data: StoredSnapshot): void {
  let bytes = checkArea(data.digest, data.entries, false);
  for (const m of data.mounts) {
    if (m.entries.length === 0 || m.entries[Symbol.iterator]().next().value?.path !== 'payload') throw refuse(data.digest, 'mount without payload');
    bytes += checkArea(data.digest, m.entries, true);
  }
  if (bytes !== data.totalBytes) throw refuse(data.digest, `total_bytes ${data.totalBytes} but the entries hold ${bytes}`);
}
