// pack.ts: what push reads from a published snapshot under the store's shared lock: its manifest, packs (each content re-hashed), large files.
import { createHash } from 'node:crypto';

import { SealError } from '../../base/errors.js';
import { DIR_FLAGS, openBeneath, own, type Fd } from '../../base/fd.js';
import { readFrom } from '../../base/io.js';
import { asBuffer, movable } from '../../base/transfer.js';
import { releasable } from '../../base/growable.js';
import { escapePath } from '../../base/paths.js';
import { throwIfRefused } from '../../base/refusal.js';
import { O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isReg } from '../../sys/constants.js';
import { hasCode } from '../../sys/errno.js';
import type { Sys } from '../../sys/native.js';
import { DOCUMENT_NAME, SNAPSHOTS_DIR } from '../layout.js';
import { readingSnapshot } from '../lock.js';
import type { Content, Pack, Place } from './mapping.js';
import { indexBytes, packIndex } from './pack-index.js';
import { cutPieces } from './pieces.js';
import { MAX_DOCUMENT_BYTES } from './push-document.js';

/** The longest path one openat2 takes (PATH_MAX counts the NUL). */
const OPEN_PATH_BYTES = 4095;

export function placeParts(place: Place): string[] {
  return [...place.area.split('/'), ...place.path.split('/')];
}

/** parts cut into runs whose joined path fits one openat2. */
function runsOf(parts: readonly string[]): string[][] {
  const runs: string[][] = [[]];
  let bytes = -1;
  for (const part of parts) {
    const size = Buffer.byteLength(part, 'utf8') + 1;
    if (bytes + size > OPEN_PATH_BYTES && runs[runs.length - 1]!.length > 0) {
      runs.push([]);
      bytes = -1;
    }
    runs[runs.length - 1]!.push(part);
    bytes += size;
  }
  return runs;
}

/**
 * openBeneath for a path of any length: a path longer than PATH_MAX is opened as runs of
 * components, each directory run beneath the one before (the same no-symlink, no-escape
 * resolution), so a long path in a snapshot is never ENAMETOOLONG.
 */
export function openDeep(sys: Sys, rootFd: number, parts: readonly string[], flags: number, mode = 0): number {
  const runs = runsOf(parts);
  let parent: Fd | undefined;
  try {
    for (const run of runs.slice(0, -1)) {
      const next = own(sys, openBeneath(sys, parent?.fd ?? rootFd, run, DIR_FLAGS));
      parent?.[Symbol.dispose]();
      parent = next;
    }
    return openBeneath(sys, parent?.fd ?? rootFd, runs[runs.length - 1]!, flags, mode);
  } finally {
    parent?.[Symbol.dispose]();
  }
}

/** SEAL_LIMIT for a path this system cannot open (a component over NAME_MAX), naming it. */
export function tooLong(rel: string, err: unknown): SealError {
  return new SealError('SEAL_LIMIT', `path is too long for this system: ${escapePath(rel)}`, { path: rel, cause: err });
}

function changed(place: Place): SealError {
  const rel = `${place.area}/${place.path}`;
  return new SealError('SEAL_CORRUPT', `snapshot file changed: ${escapePath(rel)}`, { path: rel });
}

/** Opens a content's file in the snapshot open at rootFd (never following a link) and checks it is a regular file of its size. */
export function openContent(sys: Sys, rootFd: number, content: Content): number {
  const place = content.places[0]!;
  const rel = `${place.area}/${place.path}`;
  let fd: number;
  try {
    fd = openDeep(sys, rootFd, placeParts(place), O_RDONLY | O_NONBLOCK);
  } catch (err) {
    throwIfRefused(err, `snapshot file cannot be opened: ${escapePath(rel)}`, rel);
    if (hasCode(err, 'ENAMETOOLONG')) throw tooLong(rel, err);
    // Gone, or a link or a directory in its place (the open follows none).
    const what = hasCode(err, 'ENOENT', 'ENOTDIR') ? 'is missing' : 'is not a regular file';
    throw new SealError('SEAL_CORRUPT', `snapshot file ${what}: ${escapePath(rel)}`, { path: rel, cause: err });
  }
  using file = own(sys, fd);
  const st = sys.fstat(fd);
  if (!isReg(st.mode) || st.size !== content.size) throw changed(place);
  return file.release();
}

/**
 * Reads the pack's contents from the published snapshot `digest` at snapshotRoot into one
 * buffer, in order, proving each content's sha256 (a corrupt store is never uploaded), and
 * ends it with their index (pack-index.ts).
 * Holds the store's shared lock while it reads (an rm waits; a snapshot already removed
 * is SEAL_UNAVAILABLE). Returns the bytes and the pack's blob digest.
 */
export function readPack(sys: Sys, snapshotRoot: string, digest: string, pack: Pack): { bytes: Buffer; digest: string } {
  return readingSnapshot(sys, snapshotRoot, digest, (rootFd) => readPackAt(sys, rootFd, pack));
}

function readPackAt(sys: Sys, rootFd: number, pack: Pack): { bytes: Buffer; digest: string } {
  // Moved, not copied, to the thread that uploads it, which gives its memory back once sent.
  const bytes = movable(releasable(pack.size + indexBytes(pack.count)));
  let offset = 0;
  const contents = pack.contents;
  for (const c of contents) {
    using file = own(sys, openContent(sys, rootFd, c));
    const got = readFrom(sys, file.fd, bytes.subarray(offset, offset + c.size));
    const hash = createHash('sha256').update(bytes.subarray(offset, offset + c.size)).digest('hex');
    if (got !== c.size || hash !== c.sha256) throw changed(c.places[0]!);
    offset += c.size;
  }
  packIndex(contents).copy(bytes, offset);
  return { bytes, digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}` };
}

/** Opens a large content's file in the published snapshot under the store's shared lock; the fd stays valid after an rm. */
export function openPushFile(sys: Sys, snapshotRoot: string, digest: string, content: Content): number {
  return readingSnapshot(sys, snapshotRoot, digest, (rootFd) => openContent(sys, rootFd, content));
}

/** A published snapshot's exact manifest.json bytes, and when it was published (its directory's mtime, ms since the epoch). */
export interface PushConfig {
  bytes: Uint8Array;
  createdMs: number;
}

/** The published snapshot's exact manifest.json bytes, read under the store's shared lock, and when it was published. */
export function readPushConfig(sys: Sys, snapshotRoot: string, digest: string): PushConfig {
  return readingSnapshot(sys, snapshotRoot, digest, (rootFd) => {
    const createdMs = Number(sys.fstat(rootFd).mtimeNs / 1_000_000n);
    try {
      using file = own(sys, sys.openat(rootFd, DOCUMENT_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
      const st = sys.fstat(file.fd);
      if (!isReg(st.mode) || st.size > MAX_DOCUMENT_BYTES) throw new Error('not a regular file of a manifest\'s size');
      // Given back as soon as push has sent its pieces and made its layout.
      const bytes = releasable(st.size);
      if (readFrom(sys, file.fd, bytes) !== st.size) throw new Error('shorter than its size');
      return { bytes, createdMs };
    } catch (err) {
      throwIfRefused(err, `snapshot manifest cannot be read: ${digest}`);
      throw new SealError('SEAL_CORRUPT', `snapshot has no readable manifest: ${digest}`, { cause: err });
    }
  });
}

/**
 * The config digest of snapshot `digest` in the store, as push would make it (`root`: the
 * sha256 of its root document; else of its manifest.json), or undefined when the store
 * does not hold it: a pull by tag or manifest digest that finds the config it was given
 * already published has nothing to fetch.
 */
export function localConfigDigest(sys: Sys, storeRoot: string, digest: string, root: boolean): string | undefined {
  let read: PushConfig;
  try {
    read = readPushConfig(sys, `${storeRoot}/${SNAPSHOTS_DIR}/${digest}`, digest);
  } catch (err) {
    if (err instanceof SealError && err.code === 'SEAL_UNAVAILABLE') return undefined;
    throw err;
  }
  const config = root ? cutPieces(asBuffer(read.bytes)).root : read.bytes;
  return `sha256:${createHash('sha256').update(config).digest('hex')}`;
}
