// layout.ts: the names of a store's and a snapshot's parts on disk.
export const SNAPSHOTS_DIR = 'snapshots';
export const TMP_DIR = 'tmp';
export const LOCK_NAME = 'lock';
export const BUILD_PREFIX = 'build-';
export const REMOVING_PREFIX = 'rm-';
/** A snapshot's copy roots live in `copy/`, its mounts in `mounts/<mountDir(i)>/payload`. */
export const COPY_AREA = 'copy';
export const MOUNTS_AREA = 'mounts';
export const PAYLOAD_NAME = 'payload';
export const DOCUMENT_NAME = 'manifest.json';

/** The directory name of mount i inside `mounts/`: five digits. */
export function mountDir(i: number): string {
  return String(i).padStart(5, '0');
}

/** The area of mount i relative to the snapshot root. */
export function mountArea(i: number): string {
  return `${MOUNTS_AREA}/${mountDir(i)}`;
}
