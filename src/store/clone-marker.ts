// clone-marker.ts: the in-progress marker in a clone: created O_EXCL, replaced only when a dead materialize left it, never followed.
import { SealError } from '../base/errors.js';
import { own } from '../base/fd.js';
import { readFrom, writeAll } from '../base/io.js';
import { AT_SYMLINK_NOFOLLOW, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_WRONLY, isDir, isLink, isReg } from '../sys/constants.js';
import { hasCode } from '../sys/errno.js';
import type { Stat, Sys } from '../sys/native.js';
import { statOrNull } from './clone-paths.js';
import { CLONE_MARKER, CLONE_STAGE_PREFIX } from './layout.js';

/** The marker a materialize made: which inode, so only that one is ever removed. */
export interface MarkerId {
  dev: bigint;
  ino: bigint;
}

/** A marker is one short line; a bigger file is not one. */
const MARKER_MAX_BYTES = 4096;
const DIGEST = /^[0-9a-f]{64}$/;
const STAGE_HEX = /^[0-9a-f]{24}$/;

/** The marker's bytes: the snapshot being materialized and the stage its roots come from. */
function markerLine(digest: string, stage: string): string {
  return `${JSON.stringify({ digest, stage })}\n`;
}

function planted(what: string): SealError {
  return new SealError('SEAL_COLLISION', `materialize marker in the clone is not one materialize made (${what}): ${CLONE_MARKER}`, { path: CLONE_MARKER });
}

/** True when text is exactly a line markerLine makes. */
function isMarkerLine(text: string): boolean {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return false;
  }
  if (typeof value !== 'object' || value === null) return false;
  const { digest, stage } = value as Record<string, unknown>;
  if (typeof digest !== 'string' || typeof stage !== 'string' || !DIGEST.test(digest)) return false;
  if (!stage.startsWith(CLONE_STAGE_PREFIX) || !STAGE_HEX.test(stage.slice(CLONE_STAGE_PREFIX.length))) return false;
  return text === markerLine(digest, stage);
}

/** Why an open marker is not one a materialize wrote (undefined: it is). */
function notOurs(sys: Sys, fd: number, seen: Stat): string | undefined {
  const st = sys.fstat(fd);
  if (st.dev !== seen.dev || st.ino !== seen.ino || !isReg(st.mode)) return 'it changed while being checked';
  if (st.nlink !== 1) return `a file with ${st.nlink} links`;
  const uid = process.geteuid?.();
  if (uid !== undefined && st.uid !== uid) return `owned by uid ${st.uid}`;
  // Empty: made by a materialize that died before it wrote the line.
  if (st.size === 0) return undefined;
  if (st.size > MARKER_MAX_BYTES) return 'too large';
  const bytes = Buffer.alloc(st.size + 1);
  if (readFrom(sys, fd, bytes) !== st.size || !isMarkerLine(bytes.toString('utf8', 0, st.size))) return 'not a marker';
  return undefined;
}

/**
 * Checks the marker the clone holds, if any, without changing it: false when there is
 * none; true when a materialize that died left it (a regular file with one link, owned by
 * this user, holding a marker line or still empty), so it may be replaced. Anything else was planted
 * (a symlink, a hard link to a file elsewhere, a FIFO, a directory, other bytes) and is
 * refused with SEAL_COLLISION, left exactly as it is; a FIFO or device is never opened.
 */
export function checkMarker(sys: Sys, cloneFd: number): boolean {
  let seen: Stat;
  try {
    seen = sys.fstatat(cloneFd, CLONE_MARKER, AT_SYMLINK_NOFOLLOW);
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return false;
    throw err;
  }
  if (isLink(seen.mode)) throw planted('a symlink');
  if (isDir(seen.mode)) throw planted('a directory');
  if (!isReg(seen.mode)) throw planted('not a regular file');
  let fd: number;
  try {
    fd = sys.openat(cloneFd, CLONE_MARKER, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    if (hasCode(err, 'ELOOP', 'ENOENT', 'ENXIO')) throw planted('it changed while being checked');
    throw err;
  }
  using file = own(sys, fd);
  const why = notOurs(sys, file.fd, seen);
  if (why !== undefined) throw planted(why);
  return true;
}

/** Creates the marker O_EXCL (never through a link, never over a file); undefined when the name is taken. */
function createMarker(sys: Sys, cloneFd: number): number | undefined {
  try {
    return sys.openat(cloneFd, CLONE_MARKER, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, 0o600);
  } catch (err) {
    if (hasCode(err, 'EEXIST')) return undefined;
    throw err;
  }
}

/**
 * Writes the in-progress marker: a new file, or, in place of one a dead materialize left
 * (checkMarker), a new file after that one is removed. Returns what it made; on a
 * failure, nothing of it is left and anything planted is left as it was.
 */
export function writeMarker(sys: Sys, cloneFd: number, digest: string, stage: string): MarkerId {
  let fd = createMarker(sys, cloneFd);
  if (fd === undefined) {
    checkMarker(sys, cloneFd);
    removeName(sys, cloneFd);
    fd = createMarker(sys, cloneFd);
    if (fd === undefined) throw planted('it reappeared while being replaced');
  }
  using marker = own(sys, fd);
  let made: MarkerId | undefined;
  try {
    const st = sys.fstat(marker.fd);
    made = { dev: st.dev, ino: st.ino };
    writeAll(sys, marker.fd, Buffer.from(markerLine(digest, stage)));
    return made;
  } catch (err) {
    try {
      // Not known which inode it is: removed only when it is still one a materialize made.
      if (made !== undefined) removeMarker(sys, cloneFd, made);
      else if (checkMarker(sys, cloneFd)) removeName(sys, cloneFd);
    } catch {
      // the first error says why; a marker left behind is replaced by the next materialize
    }
    throw err;
  }
}

function removeName(sys: Sys, cloneFd: number): void {
  try {
    sys.unlinkat(cloneFd, CLONE_MARKER, 0);
  } catch (err) {
    if (!hasCode(err, 'ENOENT')) throw err;
  }
}

/** Removes the marker this materialize made; whatever else is at its name now is left alone. */
export function removeMarker(sys: Sys, cloneFd: number, made: MarkerId): void {
  const st = statOrNull(sys, cloneFd, CLONE_MARKER);
  if (st !== null && st.dev === made.dev && st.ino === made.ino) removeName(sys, cloneFd);
}

/** True when the clone holds the in-progress marker. */
export function hasMarker(sys: Sys, cloneFd: number): boolean {
  try {
    sys.fstatat(cloneFd, CLONE_MARKER, AT_SYMLINK_NOFOLLOW);
    return true;
  } catch (err) {
    if (hasCode(err, 'ENOENT')) return false;
    throw err;
  }
}
