// pack-index.ts: the index a pack ends with (each content's sha256 and size, in pack order, then a fixed footer), so one file's bytes are found with two Range reads.
import type { SealError } from '../../base/errors.js';

/** One index record: 32 bytes of sha256, then the size as an unsigned 64-bit big-endian integer. */
export const INDEX_RECORD_BYTES = 40;
/** The footer: the record count (unsigned 64-bit big-endian), then MAGIC. */
export const FOOTER_BYTES = 16;
const MAGIC = Buffer.from('tsPackIx', 'latin1');
/**
 * The most contents a pack index may claim (16 MB of index): a reader allocates what the
 * footer claims before it can prove anything, and a pack holds far fewer (a bucket of a
 * tree's distinct small contents; about 130 for a 50k-file tree).
 */
const MAX_RECORDS = 400_000;

/** A content as a pack holds it. */
export interface Packed {
  sha256: string;
  size: number;
}

/** The index's bytes for a pack of `count` contents. */
export function indexBytes(count: number): number {
  return count * INDEX_RECORD_BYTES + FOOTER_BYTES;
}

/** The index that follows the contents of a pack: a record per content in pack order, then the footer. Deterministic. */
export function packIndex(contents: readonly Packed[]): Buffer {
  const out = Buffer.alloc(indexBytes(contents.length));
  contents.forEach((c, i) => {
    const at = i * INDEX_RECORD_BYTES;
    out.write(c.sha256, at, 32, 'hex');
    out.writeBigUInt64BE(BigInt(c.size), at + 32);
  });
  out.writeBigUInt64BE(BigInt(contents.length), contents.length * INDEX_RECORD_BYTES);
  MAGIC.copy(out, out.length - MAGIC.length);
  return out;
}

/**
 * The record count a pack's footer claims (`tail` is the pack's last bytes, at least
 * FOOTER_BYTES), checked against the pack's size: its index must fit in it. Only a claim:
 * a reader proves what it finds through the bytes' sha256.
 */
export function footerCount(tail: Buffer, packSize: number, bad: (why: string) => SealError): number {
  if (tail.length < FOOTER_BYTES || !tail.subarray(tail.length - MAGIC.length).equals(MAGIC)) throw bad('it does not end with a pack index');
  const count = tail.readBigUInt64BE(tail.length - FOOTER_BYTES);
  if (count > BigInt(MAX_RECORDS) || indexBytes(Number(count)) > packSize) throw bad(`its index claims ${count} contents`);
  return Number(count);
}

/**
 * Where content `sha256` lies in a pack, from its index (`index` is the whole index,
 * records and footer, of a pack of `packSize` bytes): the offset is the sum of the sizes
 * of the records before it (the first record of that sha256, should there be more). The
 * records' sizes must add up to the bytes before the index. Undefined when the index has
 * no such content.
 */
export function findInIndex(index: Buffer, packSize: number, sha256: string, bad: (why: string) => SealError): { offset: number; size: number } | undefined {
  const count = (index.length - FOOTER_BYTES) / INDEX_RECORD_BYTES;
  const want = Buffer.from(sha256, 'hex');
  let offset = 0;
  let found: { offset: number; size: number } | undefined;
  for (let i = 0; i < count; i++) {
    const at = i * INDEX_RECORD_BYTES;
    const size = Number(index.readBigUInt64BE(at + 32));
    if (found === undefined && index.compare(want, 0, 32, at, at + 32) === 0) found = { offset, size };
    // Bounded by MAX_RECORDS; a size past 2^53 only makes the sum larger, never equal.
    offset += size;
  }
  if (offset !== packSize - index.length) throw bad(`its index's sizes add up to ${offset} bytes, not the ${packSize - index.length} before it`);
  return found;
}
