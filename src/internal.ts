// internal.ts: the one internal entry the tests and the torture suite import (not part of the package's exports).
export { compareUtf8, escapePath, normalize } from './base/paths.js';
export { sha256Hex } from './base/manifest.js';
export { EntryTable } from './base/entry-table.js';
export { entriesText } from './base/manifest-stream.js';
export { killWorker, offload, stopIdleWorker } from './base/offload.js';
export { FilePool } from './capture/pool.js';
export { HashBatch } from './capture/hash-batch.js';
export { reviveError, serializeError } from './base/jobs.js';
export { GRANULARITY_NS, STAT_CACHE_VERSION, StatCache, decodeStatCache, encodeStatCache, isRacy, type CacheEntry } from './capture/stat-cache.js';
export { bucketOf, chooseLayout, layersOf, layoutWith, manifestOf, MAX_FILE_LAYERS, MAX_PACKS, LARGE_FILE_BYTES } from './store/registry/mapping.js';
export { expectLayers, parseArtifact } from './store/registry/artifact.js';
export { parseRemote, isLoopback } from './store/registry/remote.js';
export { parseChallenge } from './store/registry/auth.js';
export { findCredentials } from './store/registry/credentials.js';
export { MAX_MANIFEST_BYTES, RegistryClient } from './store/registry/client.js';
export { ADDON_REVISION } from './sys/native.js';
export { computeDigests, documentText } from './store/document.js';
export { EMPTY_BLOB, EMPTY_DIGEST, CONFIG_TYPE } from './store/registry/mapping.js';
