// hash-batch.ts: a batch of files below one directory fd to hash and compare (verify's job), and its shared-memory form.
import { own } from '../base/fd.js';
import { asBuffer } from '../base/transfer.js';
import { stream } from './copy-file.js';
import { AT_SYMLINK_NOFOLLOW, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isReg } from '../sys/constants.js';
import { sameStoredIdentity } from '../sys/identity.js';
import type { Sys } from '../sys/native.js';

/** At most this many files in one batch. */
export const BATCH_ITEMS = 32;
/** At most this many bytes of names in one batch (a name is at most 255). */
export const BATCH_NAME_BYTES = 4096;
/** A batch holds files of at most this many bytes together; a bigger file is a batch of its own. */
export const BATCH_BYTES = 256 * 1024;

/** What a file below a directory must be: size, permission bits, SHA-256 (hex). */
export interface WantedFile {
  size: number;
  perm: number;
  sha256: string;
}

/**
 * Says whether `name` below dirfd is a regular file of the wanted size and permission
 * bits (checked without following a symlink, before it is opened: nothing else is
 * opened) whose bytes hash to the wanted SHA-256, proven unchanged while read (all but
 * its ctime, which a link made or dropped elsewhere to a stored file's shared inode
 * moves: sameStoredIdentity). The open follows no symlink and waits on no FIFO,
 * should one be swapped in meanwhile.
 *
 * Read once, however recently the file changed: unlike a capture, which records the
 * bytes it read as the file's at its identity, verify proves the bytes against the
 * manifest's digest; a write still running into a stored file is no different from one
 * begun just after the check, which no check can see. (A capture's own copies are
 * complete before it publishes, so a verify right after one does not wait 250 ms.)
 */
export function sameFileAt(sys: Sys, buffer: Buffer, dirfd: number, name: string, want: WantedFile): boolean {
  const st = sys.fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW);
  if (!isReg(st.mode) || (st.mode & 0o7777) !== want.perm || st.size !== want.size) return false;
  const file = own(sys, sys.openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  try {
    const before = sys.fstat(file.fd);
    if (!isReg(before.mode) || before.size !== want.size) return false;
    const [sha256, read] = stream(sys, buffer, file.fd, -1, want.size);
    return read === want.size && sameStoredIdentity(before, sys.fstat(file.fd)) && sha256 === want.sha256;
  } finally {
    file[Symbol.dispose]();
  }
}

/** Files below one directory fd (borrowed: its owner keeps it open until the batch is done), with what each must be. */
export class HashBatch {
  readonly names: string[] = [];
  readonly sizes: number[] = [];
  readonly perms: number[] = [];
  readonly sha256s: string[] = [];
  /** The caller's tag of each file (verify: its place in the walk). */
  readonly tags: number[] = [];
  bytes = 0;
  #nameBytes = 0;

  constructor(readonly dirfd: number) {}

  get length(): number {
    return this.names.length;
  }

  /** Whether one more file fits (a first file always does). */
  fits(name: string, size: number): boolean {
    const n = this.names.length;
    if (n === 0) return true;
    return n < BATCH_ITEMS && this.bytes + size <= BATCH_BYTES && this.#nameBytes + Buffer.byteLength(name) <= BATCH_NAME_BYTES;
  }

  add(name: string, size: number, perm: number, sha256: string, tag: number): void {
    this.names.push(name);
    this.sizes.push(size);
    this.perms.push(perm);
    this.sha256s.push(sha256);
    this.tags.push(tag);
    this.bytes += size;
    this.#nameBytes += Buffer.byteLength(name);
  }
}

/** The batches' shared memory, one region per slot: name ends, sizes, permission bits, digests and per-file verdicts. */
export interface BatchArea {
  names: Buffer;
  ends: Int32Array;
  perms: Int32Array;
  sizes: Float64Array;
  sha: Buffer;
  differs: Uint8Array;
}

/** Zeroed shared memory: a page is touched only once a batch in that slot uses it. */
export function allocBatchArea(slots: number): BatchArea {
  const items = slots * BATCH_ITEMS;
  return {
    names: Buffer.from(new SharedArrayBuffer(slots * BATCH_NAME_BYTES)),
    ends: new Int32Array(new SharedArrayBuffer(4 * items)),
    perms: new Int32Array(new SharedArrayBuffer(4 * items)),
    sizes: new Float64Array(new SharedArrayBuffer(8 * items)),
    sha: Buffer.from(new SharedArrayBuffer(32 * items)),
    differs: new Uint8Array(new SharedArrayBuffer(items)),
  };
}

/** The area as received by a helper thread (a clone carries plain Uint8Arrays). */
export function receiveBatchArea(a: BatchArea): BatchArea {
  return { ...a, names: asBuffer(a.names), sha: asBuffer(a.sha) };
}

/** Writes `batch` into slot's region. */
export function writeBatch(a: BatchArea, slot: number, batch: HashBatch): void {
  let at = slot * BATCH_NAME_BYTES;
  const first = slot * BATCH_ITEMS;
  for (let i = 0; i < batch.length; i++) {
    at += a.names.write(batch.names[i]!, at, 'utf8');
    a.ends[first + i] = at;
    a.sizes[first + i] = batch.sizes[i]!;
    a.perms[first + i] = batch.perms[i]!;
    a.sha.write(batch.sha256s[i]!, (first + i) * 32, 32, 'hex');
  }
}

/** Checks file `i` of the batch in slot (its verdict into `differs`); throws a system error as sameFileAt does. */
export function runBatchItem(sys: Sys, buffer: Buffer, a: BatchArea, slot: number, dirfd: number, i: number): void {
  const k = slot * BATCH_ITEMS + i;
  const start = i === 0 ? slot * BATCH_NAME_BYTES : a.ends[k - 1]!;
  const name = a.names.toString('utf8', start, a.ends[k]);
  const same = sameFileAt(sys, buffer, dirfd, name, { size: a.sizes[k]!, perm: a.perms[k]!, sha256: a.sha.toString('hex', k * 32, k * 32 + 32) });
  a.differs[k] = same ? 0 : 1;
}

/** The indices of the batch's files that differ, as the slot's region holds them. */
export function batchDiffers(a: BatchArea, slot: number, count: number): number[] {
  const out: number[] = [];
  const first = slot * BATCH_ITEMS;
  for (let i = 0; i < count; i++) if (a.differs[first + i] !== 0) out.push(i);
  return out;
}
