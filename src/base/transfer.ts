// transfer.ts: bytes a job hands to another thread by moving them (postMessage's transfer list) instead of copying: only buffers marked as the sender's alone.
const marked = new WeakSet<ArrayBuffer>();

/** A Buffer view of bytes a thread received as a plain Uint8Array (a clone drops the Buffer class). */
export const asBuffer = (u: Uint8Array): Buffer => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/**
 * Marks bytes as moved, not copied, when they are next sent to another thread: the
 * sender must not use them afterwards (they are empty there once sent). Only bytes that
 * are their whole, unshared ArrayBuffer are marked; others (a pooled Buffer, a view of
 * something larger, shared memory) are copied as always. Returns them.
 */
export function movable<T extends Uint8Array>(bytes: T): T {
  const buffer = bytes.buffer;
  if (buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength && buffer.byteLength > 0) marked.add(buffer);
  return bytes;
}

/**
 * movable for a view of memory the caller allocated itself and holds alone (never a
 * slice of Node's pool: Buffer.allocUnsafeSlow): its whole ArrayBuffer is moved, the
 * bytes outside the view with it. Returns the view.
 */
export function movableView<T extends Uint8Array>(bytes: T): T {
  const buffer = bytes.buffer;
  if (buffer instanceof ArrayBuffer && buffer.byteLength > 0) marked.add(buffer);
  return bytes;
}

/** The marked buffers a message holds: itself, or the members of its arrays and objects, two levels down (a job's arguments or result). */
export function transferList(value: unknown, depth = 2): ArrayBuffer[] {
  if (value instanceof Uint8Array) {
    const buffer = value.buffer;
    return buffer instanceof ArrayBuffer && marked.has(buffer) ? [buffer] : [];
  }
  if (depth === 0 || value === null || typeof value !== 'object') return [];
  const out = new Set<ArrayBuffer>();
  for (const member of Array.isArray(value) ? value : Object.values(value)) for (const b of transferList(member, depth - 1)) out.add(b);
  return [...out];
}
