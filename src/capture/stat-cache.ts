// stat-cache.ts: the stat cache: file identity -> sha256 with its recording time, the racy rule, and its checksummed binary form.
import { createHash } from 'node:crypto';

import type { Stat } from '../sys/native.js';

const MAGIC = Buffer.from('TSSTATC\0', 'latin1');
export const STAT_CACHE_VERSION = 1;
const HEADER_BYTES = 64;
const RECORD_BYTES = 96;
const DIGEST_BYTES = 32;
const TRAILER_BYTES = 32;
/** Entries kept in one cache file at most (older, unseen ones are dropped first). */
export const MAX_CACHE_ENTRIES = 1 << 20;

/**
 * The timestamp granularity assumed for every filesystem, source and store alike:
 * 2 s covers FAT's 2 s and ext4's 1 s (128-byte inodes) timestamps; filesystems with
 * ns timestamps stamp from the kernel's coarse clock, which ticks at most every 10 ms.
 */
export const GRANULARITY_NS = 2_000_000_000n;

/** One cached file: its identity when hashed, the hash, when it was recorded, and where the store holds its bytes. */
export interface CacheEntry {
  dev: bigint;
  ino: bigint;
  mode: number;
  size: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
  /** The filesystem's clock (a ctime taken in the store) before the walk that hashed the file began. */
  recordNs: bigint;
  sha256: string;
  /** The snapshot that holds a frozen copy of these bytes, and that copy's path below its root. */
  snapshot: string;
  location: string;
}

function keyOf(dev: bigint, ino: bigint): string {
  return `${dev}:${ino}`;
}

/**
 * The racy rule (as git's index): an entry is trusted only when the file's mtime and
 * ctime are both older than the entry's recording by more than the granularity, so a
 * write after the hash was taken cannot have left the same timestamps behind.
 */
export function isRacy(entry: Pick<CacheEntry, 'mtimeNs' | 'ctimeNs' | 'recordNs'>): boolean {
  const limit = entry.recordNs - GRANULARITY_NS;
  return !(entry.mtimeNs < limit && entry.ctimeNs < limit);
}

/** The entries of one cache file, by (dev, ino). */
export class StatCache {
  readonly #byKey = new Map<string, CacheEntry>();

  constructor(entries: Iterable<CacheEntry> = []) {
    for (const e of entries) this.#byKey.set(keyOf(e.dev, e.ino), e);
  }

  get size(): number {
    return this.#byKey.size;
  }

  /** The entry for a regular file with this fstatat result when its identity is unchanged and the entry is not racy. */
  trusted(st: Stat): CacheEntry | undefined {
    const e = this.#byKey.get(keyOf(st.dev, st.ino));
    if (e === undefined || e.mode !== st.mode || e.size !== st.size || e.mtimeNs !== st.mtimeNs || e.ctimeNs !== st.ctimeNs) return undefined;
    return isRacy(e) ? undefined : e;
  }

  entries(): IterableIterator<CacheEntry> {
    return this.#byKey.values();
  }

  /** Adds or replaces the entry of its (dev, ino). */
  set(e: CacheEntry): void {
    this.#byKey.set(keyOf(e.dev, e.ino), e);
  }

  has(dev: bigint, ino: bigint): boolean {
    return this.#byKey.has(keyOf(dev, ino));
  }
}

/**
 * The binary form: a 64-byte header (magic, version, entry count, the 32-byte key,
 * digest count, string bytes), the snapshot digests, fixed 96-byte records, the
 * location strings, and a sha256 of everything before it.
 */
export function encodeStatCache(key: Buffer, entries: readonly CacheEntry[]): Buffer {
  const digests = [...new Set(entries.map((e) => e.snapshot))];
  const digestIndex = new Map(digests.map((d, i) => [d, i]));
  const locations = entries.map((e) => Buffer.from(e.location, 'utf8'));
  const stringBytes = locations.reduce((n, b) => n + b.length, 0);
  const recordsAt = HEADER_BYTES + digests.length * DIGEST_BYTES;
  const stringsAt = recordsAt + entries.length * RECORD_BYTES;
  const out = Buffer.alloc(stringsAt + stringBytes + TRAILER_BYTES);
  MAGIC.copy(out, 0);
  out.writeUInt32LE(STAT_CACHE_VERSION, 8);
  out.writeUInt32LE(entries.length, 12);
  key.copy(out, 16);
  out.writeUInt32LE(digests.length, 48);
  out.writeUInt32LE(stringBytes, 52);
  digests.forEach((d, i) => out.write(d, HEADER_BYTES + i * DIGEST_BYTES, 'hex'));
  let strOff = 0;
  entries.forEach((e, i) => {
    const at = recordsAt + i * RECORD_BYTES;
    out.writeBigUInt64LE(e.dev, at);
    out.writeBigUInt64LE(e.ino, at + 8);
    out.writeBigInt64LE(e.mtimeNs, at + 16);
    out.writeBigInt64LE(e.ctimeNs, at + 24);
    out.writeBigInt64LE(e.recordNs, at + 32);
    out.writeDoubleLE(e.size, at + 40);
    out.writeUInt32LE(e.mode, at + 48);
    out.writeUInt32LE(digestIndex.get(e.snapshot)!, at + 52);
    out.writeUInt32LE(strOff, at + 56);
    out.writeUInt32LE(locations[i]!.length, at + 60);
    out.write(e.sha256, at + 64, 'hex');
    locations[i]!.copy(out, stringsAt + strOff);
    strOff += locations[i]!.length;
  });
  createHash('sha256').update(out.subarray(0, out.length - TRAILER_BYTES)).digest().copy(out, out.length - TRAILER_BYTES);
  return out;
}

function checkedLayout(bytes: Buffer, key: Buffer): { count: number; digests: string[]; recordsAt: number; stringsAt: number } | undefined {
  if (bytes.length < HEADER_BYTES + TRAILER_BYTES || !bytes.subarray(0, 8).equals(MAGIC)) return undefined;
  if (bytes.readUInt32LE(8) !== STAT_CACHE_VERSION || !bytes.subarray(16, 48).equals(key)) return undefined;
  const count = bytes.readUInt32LE(12);
  const digestCount = bytes.readUInt32LE(48);
  const stringBytes = bytes.readUInt32LE(52);
  const recordsAt = HEADER_BYTES + digestCount * DIGEST_BYTES;
  const stringsAt = recordsAt + count * RECORD_BYTES;
  if (count > MAX_CACHE_ENTRIES || stringsAt + stringBytes + TRAILER_BYTES !== bytes.length) return undefined;
  const sum = createHash('sha256').update(bytes.subarray(0, bytes.length - TRAILER_BYTES)).digest();
  if (!sum.equals(bytes.subarray(bytes.length - TRAILER_BYTES))) return undefined;
  const digests: string[] = [];
  for (let i = 0; i < digestCount; i++) digests.push(bytes.toString('hex', HEADER_BYTES + i * DIGEST_BYTES, HEADER_BYTES + (i + 1) * DIGEST_BYTES));
  return { count, digests, recordsAt, stringsAt };
}

/** The entries of a cache file, or undefined when it is torn, garbage, of another version or for another key. */
export function decodeStatCache(bytes: Buffer, key: Buffer): CacheEntry[] | undefined {
  const layout = checkedLayout(bytes, key);
  if (layout === undefined) return undefined;
  const { count, digests, recordsAt, stringsAt } = layout;
  const entries: CacheEntry[] = new Array(count);
  for (let i = 0; i < count; i++) {
    const at = recordsAt + i * RECORD_BYTES;
    const snapshot = digests[bytes.readUInt32LE(at + 52)];
    const strOff = stringsAt + bytes.readUInt32LE(at + 56);
    const strEnd = strOff + bytes.readUInt32LE(at + 60);
    if (snapshot === undefined || strEnd > bytes.length - TRAILER_BYTES) return undefined;
    entries[i] = {
      dev: bytes.readBigUInt64LE(at),
      ino: bytes.readBigUInt64LE(at + 8),
      mtimeNs: bytes.readBigInt64LE(at + 16),
      ctimeNs: bytes.readBigInt64LE(at + 24),
      recordNs: bytes.readBigInt64LE(at + 32),
      size: bytes.readDoubleLE(at + 40),
      mode: bytes.readUInt32LE(at + 48),
      snapshot,
      location: bytes.toString('utf8', strOff, strEnd),
      sha256: bytes.toString('hex', at + 64, at + 96),
    };
  }
  return entries;
}
