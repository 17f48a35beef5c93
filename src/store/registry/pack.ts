// pack.ts: a pack's bytes read from a frozen snapshot (each content re-hashed), and the file a content is read from.
import { createHash } from 'node:crypto';

import { SealError } from '../../base/errors.js';
import { openBeneath, openRealDir, own } from '../../base/fd.js';
import { readFrom } from '../../base/io.js';
import { escapePath } from '../../base/paths.js';
import { throwIfRefused } from '../../base/refusal.js';
import { O_NONBLOCK, O_RDONLY, isReg } from '../../sys/constants.js';
import type { Sys } from '../../sys/native.js';
import type { Content, Pack, Place } from './mapping.js';

export function placeParts(place: Place): string[] {
  return [...place.area.split('/'), ...place.path.split('/')];
}

function changed(place: Place): SealError {
  const rel = `${place.area}/${place.path}`;
  return new SealError('SEAL_CORRUPT', `snapshot file changed: ${escapePath(rel)}`, { path: rel });
}

/** Opens a content's file in the snapshot open at rootFd (never following a link) and checks it is a regular file of its size. */
export function openContent(sys: Sys, rootFd: number, content: Content): number {
  const place = content.places[0]!;
  let fd: number;
  try {
    fd = openBeneath(sys, rootFd, placeParts(place), O_RDONLY | O_NONBLOCK);
  } catch (err) {
    throwIfRefused(err, `snapshot file cannot be opened: ${escapePath(`${place.area}/${place.path}`)}`);
    throw new SealError('SEAL_CORRUPT', `snapshot file is missing: ${escapePath(`${place.area}/${place.path}`)}`, { cause: err });
  }
  using file = own(sys, fd);
  const st = sys.fstat(fd);
  if (!isReg(st.mode) || st.size !== content.size) throw changed(place);
  return file.release();
}

/**
 * Reads the pack's contents from the snapshot at snapshotRoot into one buffer, in
 * order, proving each content's sha256 (a corrupt store is never uploaded).
 * Returns the bytes and the pack's blob digest.
 */
export function readPack(sys: Sys, snapshotRoot: string, pack: Pack): { bytes: Buffer; digest: string } {
  using root = own(sys, openRealDir(sys, snapshotRoot, 'snapshot'));
  const bytes = Buffer.allocUnsafe(pack.size);
  let offset = 0;
  for (const c of pack.contents) {
    using file = own(sys, openContent(sys, root.fd, c));
    const got = readFrom(sys, file.fd, bytes.subarray(offset, offset + c.size));
    const hash = createHash('sha256').update(bytes.subarray(offset, offset + c.size)).digest('hex');
    if (got !== c.size || hash !== c.sha256) throw changed(c.places[0]!);
    offset += c.size;
  }
  return { bytes, digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}` };
}
