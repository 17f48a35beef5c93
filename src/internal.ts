// internal.ts: the one internal entry the tests and the torture suite import (not part of the package's exports).
export { compareUtf8, escapePath, normalize } from './base/paths.js';
export { sha256Hex } from './base/manifest.js';
export { offload, stopIdleWorker } from './base/offload.js';
export { GRANULARITY_NS, STAT_CACHE_VERSION, StatCache, decodeStatCache, encodeStatCache, isRacy, type CacheEntry } from './capture/stat-cache.js';
