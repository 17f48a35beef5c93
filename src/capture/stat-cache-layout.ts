// stat-cache-layout.ts: the byte layout of a stat cache file (header, records) and of the records a capture holds before writing one.

/** The first 8 bytes of every cache file. */
export const MAGIC = Buffer.from('TSSTATC\0', 'latin1');

/*
 * The file, in order: a header, the snapshot digests, fixed records, the location
 * strings (UTF-8, not terminated), and a sha256 of everything before it. Integers are
 * little-endian.
 */

/** The header's size. */
export const HEADER_BYTES = 64;
/** One snapshot digest (raw sha256) after the header. */
export const DIGEST_BYTES = 32;
/** The sha256 that ends the file. */
export const TRAILER_BYTES = 32;
/** The key in the header. */
export const KEY_BYTES = 32;

/** Header fields, as byte offsets in the header (bytes 56-63 are unused). */
export const HEADER = {
  /** 8 bytes: MAGIC. */
  MAGIC: 0,
  /** u32: the format version (STAT_CACHE_VERSION). */
  VERSION: 8,
  /** u32: how many records follow the digests. */
  COUNT: 12,
  /** KEY_BYTES: the key (store, source) the file was written for. */
  KEY: 16,
  /** u32: how many snapshot digests follow the header. */
  DIGEST_COUNT: 48,
  /** u32: the bytes of all location strings together. */
  STRING_BYTES: 52,
} as const;

/** One record's size. */
export const RECORD_BYTES = 96;

/** Record fields, as byte offsets in a record. */
export const RECORD = {
  /** u64: st_dev when the file was hashed. */
  DEV: 0,
  /** u64: st_ino. */
  INO: 8,
  /** i64: mtime, ns. */
  MTIME: 16,
  /** i64: ctime, ns. */
  CTIME: 24,
  /** i64: when it was recorded (the store's clock before the walk that hashed it), ns. */
  RECORD_TIME: 32,
  /** f64: size in bytes. */
  SIZE: 40,
  /** u32: st_mode. */
  MODE: 48,
  /** u32: the index among the file's digests of the snapshot holding the bytes. */
  SNAPSHOT: 52,
  /** u32: where its location string starts, counted from the first string. */
  LOCATION_AT: 56,
  /** u32: its location string's length in bytes. */
  LOCATION_BYTES: 60,
  /** SHA256_BYTES: the sha256 of the file's bytes. */
  SHA256: 64,
} as const;
/** The sha256 in a record (raw). */
export const SHA256_BYTES = 32;

/** 8-byte words per record (a record is read in place through 64-bit views). */
export const RECORD_WORDS = RECORD_BYTES / 8;
/** 4-byte words per record (the 32-bit view). */
export const RECORD_U32_WORDS = RECORD_BYTES / 4;

/** The 8-byte fields as word indices in a record (BigUint64Array, BigInt64Array, Float64Array views). */
export const RECORD_U64 = {
  DEV: RECORD.DEV / 8,
  INO: RECORD.INO / 8,
  MTIME: RECORD.MTIME / 8,
  CTIME: RECORD.CTIME / 8,
  RECORD_TIME: RECORD.RECORD_TIME / 8,
  SIZE: RECORD.SIZE / 8,
} as const;

/**
 * dev and ino as 32-bit words (low word first), by which records are matched and
 * ordered: the same in a file's record and in a held one.
 */
export const ID_U32 = {
  DEV_LOW: RECORD.DEV / 4,
  DEV_HIGH: RECORD.DEV / 4 + 1,
  INO_LOW: RECORD.INO / 4,
  INO_HIGH: RECORD.INO / 4 + 1,
} as const;
/** The 32-bit words of ID_U32. */
export const ID_WORDS = 4;

/** The 4-byte fields as word indices in a record (Uint32Array view). */
export const RECORD_U32 = {
  MODE: RECORD.MODE / 4,
  SNAPSHOT: RECORD.SNAPSHOT / 4,
  LOCATION_AT: RECORD.LOCATION_AT / 4,
  LOCATION_BYTES: RECORD.LOCATION_BYTES / 4,
} as const;

/**
 * A record while a capture runs (CacheRecords, 48 bytes): dev, ino, mtime and ctime at
 * their offsets in a file's record (copied across as they are), then the mode and
 * three 32-bit words of bookkeeping.
 */
export const HELD_BYTES = 48;
/** 4-byte words per held record. */
export const HELD_WORDS = HELD_BYTES / 4;

/** Held record fields, as byte offsets. */
export const HELD = {
  /** u64 dev, u64 ino, i64 mtime, i64 ctime (HELD_IDENTITY_BYTES), as at RECORD.DEV to RECORD.CTIME. */
  IDENTITY: 0,
  /** u32: st_mode. */
  MODE: 32,
} as const;
/** The bytes of dev, ino, mtime and ctime at HELD.IDENTITY. */
export const HELD_IDENTITY_BYTES = 32;

/** Held record fields as 32-bit word indices (dev and ino: ID_U32). */
export const HELD_U32 = {
  /** The loaded cache's entry this capture reused (its record is copied out whole), or NOT_REUSED. */
  REUSED: 9,
  /** The number of the entry table the file's entry is in. */
  TABLE: 10,
  /** The file's entry index in that table. */
  ENTRY: 11,
} as const;

/** HELD_U32.REUSED of a file hashed by this capture. */
export const NOT_REUSED = 0xffffffff;
