// copy-file.ts: one file's copy into a build: clone-or-copy, hash, and prove the source unchanged around it.
import { createHash } from 'node:crypto';

import { writeAll } from '../base/io.js';
import { identityOf, sameIdentity, type FileIdentity } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';

export interface Filled {
  sha256: string;
  /** The bytes came by FICLONE (else by a buffered copy). */
  cloned: boolean;
}

/** Reads fd from offset 0 to EOF (stopping as soon as more than `size` bytes show up), hashing and optionally writing. */
function stream(sys: Sys, buffer: Buffer, fd: number, out: number, hash: ReturnType<typeof createHash>, size: number): number {
  let copied = 0;
  for (;;) {
    const n = sys.pread(fd, buffer, 0, buffer.length, copied);
    if (n === 0) return copied;
    hash.update(buffer.subarray(0, n));
    if (out >= 0) writeAll(sys, out, buffer.subarray(0, n), copied);
    copied += n;
    if (copied > size) return copied;
    // A short read of a regular file is its end; the identity check after proves it stayed so.
    if (copied === size && n < buffer.length) return copied;
  }
}

/**
 * Clones srcFd into destFd where tryClone and the filesystems allow (else copies it
 * while hashing), then proves the source's identity unchanged since `before`.
 * Returns 'changed' when it was not.
 *
 * A clone is a point-in-time copy: FICLONE takes both inodes' locks, so it waits
 * out a write in progress and no write can interleave with it. The bytes hashed
 * are read from the source's (cached) pages after the clone; as no write began
 * between the fstat before the clone and the fstat after the read (identity
 * unchanged), they are exactly the clone's bytes, and reading cached source pages
 * is far cheaper than reading the fresh clone back from disk.
 */
export function fillFile(sys: Sys, buffer: Buffer, srcFd: number, destFd: number, before: FileIdentity, tryClone: boolean): Filled | 'changed' {
  const hash = createHash('sha256');
  const cloned = tryClone && before.size > 0 && sys.ficlone(destFd, srcFd);
  const copied = stream(sys, buffer, srcFd, cloned ? -1 : destFd, hash, before.size);
  if (copied !== before.size || !sameIdentity(before, identityOf(sys.fstat(srcFd)))) return 'changed';
  return { sha256: hash.digest('hex'), cloned };
}
