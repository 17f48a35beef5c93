// layout.ts: the names of a store's and a snapshot's parts on disk.
export const SNAPSHOTS_DIR = 'snapshots';
export const TMP_DIR = 'tmp';
export const LOCK_NAME = 'lock';
/** Stat caches, one file per source: `cache/<key>.bin`. */
export const CACHE_DIR = 'cache';
export const BUILD_PREFIX = 'build-';
/** Leases on published snapshots, one file per lease: `leases/<digest>-<16 hex>`, flocked while held. */
export const LEASES_DIR = 'leases';
export const REMOVING_PREFIX = 'rm-';
/** The lock of the pulls of one snapshot into the store: `tmp/pull-<digest>`, flocked while a pull downloads it. */
export const PULL_LOCK_PREFIX = 'pull-';
/** Clone ledgers, one file per materialized clone: `clones/<dev>-<ino>.ledger`, keyed by the clone directory's device and inode. */
export const CLONES_DIR = 'clones';
/** A snapshot's copy roots live in `copy/`, its mounts in `mounts/<mountDir(i)>/payload`. */
export const COPY_AREA = 'copy';
export const MOUNTS_AREA = 'mounts';
export const PAYLOAD_NAME = 'payload';
export const DOCUMENT_NAME = 'manifest.json';
/** Inside a build made from the stat cache: the files captured from the source, before the tree is assembled. */
export const LOOSE_AREA = 'loose';

/** The directory name of mount i inside `mounts/`: five digits. */
export function mountDir(i: number): string {
  return String(i).padStart(5, '0');
}

/** The area of mount i relative to the snapshot root. */
export function mountArea(i: number): string {
  return `${MOUNTS_AREA}/${mountDir(i)}`;
}

/** materialize's own names in a clone (kept in base/, where capture checks declarations against them). */
export { CLONE_MARKER, CLONE_STAGE_PREFIX } from '../base/clone-names.js';
