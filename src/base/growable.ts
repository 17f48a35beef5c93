// growable.ts: buffers grown in place (no copy, no old buffer left for the collector), their pages resident only once written.

import { SealError } from './errors.js';

/** The largest buffer V8 grows in place: 4 GiB. */
export const MAX_GROWABLE_BYTES = 2 ** 32;

/** What ES2024 adds to (Shared)ArrayBuffer, which this TypeScript lib does not declare. */
interface Growable {
  readonly byteLength: number;
  readonly maxByteLength: number;
  grow?(size: number): void;
  resize?(size: number): void;
}

const Shared = SharedArrayBuffer as unknown as new (size: number, options: { maxByteLength: number }) => SharedArrayBuffer;
const Private = ArrayBuffer as unknown as new (size: number, options: { maxByteLength: number }) => ArrayBuffer;

/** Shared memory (another thread can be handed it without a copy) that grows up to maxBytes. */
export function growableShared(maxBytes: number): SharedArrayBuffer {
  return new Shared(0, { maxByteLength: Math.min(maxBytes, MAX_GROWABLE_BYTES) });
}

/** Private memory that grows up to maxBytes. */
export function growablePrivate(maxBytes: number): ArrayBuffer {
  return new Private(0, { maxByteLength: Math.min(maxBytes, MAX_GROWABLE_BYTES) });
}

/**
 * Grows buf to hold at least `need` bytes (doubling, from 4 KiB); true when it grew.
 * Typed arrays made on it without a length follow its length; a Buffer must be made again.
 */
export function ensureBytes(buffer: ArrayBufferLike, need: number): boolean {
  const buf = buffer as unknown as Growable;
  if (need <= buf.byteLength) return false;
  // SEAL_LIMIT, not a RangeError (which the command line takes for a wrong option): what a table holds comes from a tree or a document.
  if (need > buf.maxByteLength) throw new SealError('SEAL_LIMIT', `a table outgrows its ${buf.maxByteLength}-byte buffer`);
  const size = Math.min(buf.maxByteLength, Math.max(need, buf.byteLength * 2, 4096));
  if (buf.grow !== undefined) buf.grow(size);
  else buf.resize!(size);
  return true;
}

/**
 * `size` bytes of private memory that release() gives back to the system at once, not
 * when a collector next runs (a collector does not hurry for memory outside its heap):
 * for a large buffer whose use ends at a known point.
 */
export function releasable(size: number): Buffer {
  const memory = growablePrivate(Math.max(size, 1));
  ensureBytes(memory, size);
  (memory as unknown as Growable).resize!(size);
  return Buffer.from(memory, 0, size);
}

/** Gives a releasable buffer's memory back (it is empty afterwards); any other buffer is left to the collector. */
export function release(bytes: Uint8Array): void {
  const memory = bytes.buffer as unknown as Growable;
  if ((memory as { resizable?: boolean }).resizable === true && memory.resize !== undefined) memory.resize(0);
}
