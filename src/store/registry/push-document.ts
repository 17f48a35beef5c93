// push-document.ts: a published snapshot's manifest.json read for push in windows (never held whole): its tables, proven; its root document and pieces' digests; each piece read again when it is sent.
import { createHash } from 'node:crypto';

import { SealError } from '../../base/errors.js';
import { sha256Digest } from '../../base/manifest.js';
import { own } from '../../base/fd.js';
import { releasable, release } from '../../base/growable.js';
import { throwIfRefused } from '../../base/refusal.js';
import { O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isReg } from '../../sys/constants.js';
import { isSystemError } from '../../sys/errno.js';
import type { Sys } from '../../sys/native.js';
import type { StoredSnapshot } from '../document.js';
import { WINDOW_BYTES, readDocumentStream, type ReadAt } from '../document-stream.js';
import { DOCUMENT_NAME } from '../layout.js';
import { readingSnapshot } from '../lock.js';
import { CutCandidates, cutLists, firstPath, piecesOf, type PieceRange } from './pieces.js';

/** The largest snapshot manifest push reads. */
export const MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024;

/** What push needs of a snapshot's manifest.json, read in windows. */
export interface StreamedPush {
  /** The snapshot, decoded from the document and proven. */
  data: StoredSnapshot;
  /** The root document, and its pieces as ranges of manifest.json with their digests. */
  root: string;
  pieces: PieceRange[];
  /** When it was published (its directory's mtime, ms since the epoch). */
  createdMs: number;
}

/**
 * Runs fn on snapshot `digest`'s manifest.json (its fd and size), opened under the store's
 * shared lock, never through a link. A call the kernel refuses is SEAL_IO (the system error
 * its cause), any other system error SEAL_CORRUPT, as readPushConfig says them.
 */
function withDocument<T>(sys: Sys, snapshotRoot: string, digest: string, fn: (fd: number, size: number, rootFd: number) => T): T {
  return readingSnapshot(sys, snapshotRoot, digest, (rootFd) => {
    try {
      using file = own(sys, sys.openat(rootFd, DOCUMENT_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
      const st = sys.fstat(file.fd);
      if (!isReg(st.mode) || st.size > MAX_DOCUMENT_BYTES) throw new SealError('SEAL_CORRUPT', `snapshot has no readable manifest: ${digest}`);
      return fn(file.fd, st.size, rootFd);
    } catch (err) {
      if (!isSystemError(err)) throw err;
      throwIfRefused(err, `snapshot manifest cannot be read: ${digest}`);
      throw new SealError('SEAL_CORRUPT', `snapshot has no readable manifest: ${digest}`, { cause: err });
    }
  });
}

/** The error for a manifest whose bytes are not the ones read before (or fewer than its size). */
const changed = (digest: string): SealError => new SealError('SEAL_CORRUPT', `snapshot manifest changed while it was read: ${digest}`);

/** Reads exactly into.length bytes at position, else SEAL_CORRUPT. */
function readExactly(sys: Sys, fd: number, into: Buffer, position: number, digest: string): void {
  for (let got = 0; got < into.length; ) {
    const n = sys.pread(fd, into, got, into.length - got, position + got);
    if (n <= 0) throw changed(digest);
    got += n;
  }
}

/** How much of each piece's start the second read keeps for its first path (an entry's link target and path fit many times over). */
const HEAD_BYTES = 128 * 1024;

/**
 * The sha256 of a document of `size` bytes read again in windows, each range's digest on
 * the way (ranges in document order, none overlapping), and its first HEAD_BYTES.
 */
function hashRanges(readAt: ReadAt, size: number, ranges: readonly [number, number][], digest: string): { sha256: string; digests: string[]; heads: Buffer[] } {
  const whole = createHash('sha256');
  const hashes = ranges.map(() => createHash('sha256'));
  const heads = ranges.map(([start, end]) => Buffer.allocUnsafe(Math.min(HEAD_BYTES, end - start)));
  const buf = Buffer.allocUnsafe(Math.min(WINDOW_BYTES, Math.max(size, 1)));
  let first = 0;
  for (let at = 0; at < size; ) {
    const n = readAt(buf, 0, Math.min(buf.length, size - at), at);
    if (n <= 0) throw changed(digest);
    const chunk = buf.subarray(0, n);
    whole.update(chunk);
    for (let r = first; r < ranges.length && ranges[r]![0] < at + n; r++) {
      const [start, end] = ranges[r]!;
      if (end <= at) {
        first = r + 1;
        continue;
      }
      const from = Math.max(start - at, 0);
      const part = chunk.subarray(from, Math.min(end - at, n));
      hashes[r]!.update(part);
      const head = heads[r]!;
      const into = at + from - start;
      if (into < head.length) part.copy(head, into, 0, Math.min(part.length, head.length - into));
    }
    at += n;
  }
  return { sha256: whole.digest('hex'), digests: hashes.map((h) => `sha256:${h.digest('hex')}`), heads };
}

/**
 * Reads snapshot `digest`'s manifest.json for push, under the store's shared lock, in
 * windows: its lists into tables, the snapshot proven to encode to exactly the bytes read
 * (and to have that digest), and where its pieces are cut; then again, each piece hashed,
 * the whole proven to be the same bytes. Undefined for a document that is not canonical
 * (push then reads it whole, as before).
 */
export function streamPushDocument(sys: Sys, snapshotRoot: string, digest: string): StreamedPush | undefined {
  return withDocument(sys, snapshotRoot, digest, (fd, size, rootFd) => {
    const createdMs = Number(sys.fstat(rootFd).mtimeNs / 1_000_000n);
    const readAt: ReadAt = (buffer, offset, length, position) => sys.pread(fd, buffer, offset, length, position);
    const cuts = new CutCandidates();
    const read = readDocumentStream(readAt, size, digest, cuts);
    if (read === undefined) return undefined;
    // The cut, as cutPieces makes it; each piece's digest from a second read, which must be of the same bytes.
    const wanted = cutLists(cuts.lists).flat();
    const again = hashRanges(readAt, size, wanted, digest);
    if (again.sha256 !== read.sha256) throw changed(digest);
    // Each piece's first path from the bytes just proven; one that does not fit its head (an entry past 128 KiB)
    // is left to the whole read, as a document that is not canonical is.
    const firsts: string[] = [];
    for (const head of again.heads) {
      try {
        firsts.push(firstPath(head, 0, head.length));
      } catch {
        return undefined;
      }
    }
    let k = 0;
    const { root, pieces } = piecesOf(read.parts, cuts.lists, () => {
      const at = k++;
      return { digest: again.digests[at]!, first: firsts[at]! };
    });
    return { data: read.data, root, pieces, createdMs };
  });
}

/** Piece `piece` of snapshot `digest`'s manifest.json, read again under the store's shared lock and proven to be the bytes its digest names. */
export function readPushPiece(sys: Sys, snapshotRoot: string, digest: string, piece: PieceRange): Buffer {
  return withDocument(sys, snapshotRoot, digest, (fd) => {
    const bytes = releasable(piece.end - piece.start);
    try {
      readExactly(sys, fd, bytes, piece.start, digest);
      if (sha256Digest(bytes) !== piece.digest) throw changed(digest);
      return bytes;
    } catch (err) {
      release(bytes);
      throw err;
    }
  });
}
