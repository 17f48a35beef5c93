// clone-names.ts: the names materialize keeps for itself in a clone's top level, and the rule that no declared root or mount target may take one.
import { SealError } from './errors.js';
import { checkNoOverlap, escapePath, overlaps } from './paths.js';

/** A materialize's private stage inside the clone: `<clone>/.treeseal-materialize-<24 hex>`, held by an flock. */
export const CLONE_STAGE_PREFIX = '.treeseal-materialize-';
/** Inside a clone while a materialize swaps its roots: written before the first swap, removed after the last. */
export const CLONE_MARKER = '.treeseal-materializing';

/** True when a clone's top-level name belongs to materialize (its marker or a stage). */
export function isCloneOwnName(first: string): boolean {
  return first === CLONE_MARKER || first.startsWith(CLONE_STAGE_PREFIX);
}

/**
 * The places a snapshot declares in a clone: copy roots and mount targets never
 * overlap one another or each other (SEAL_OVERLAP), and none is one of materialize's
 * own names (SEAL_COLLISION). Capture checks it before reading, and every load of a
 * snapshot (from the store or a registry) again.
 */
export function checkClonePlaces(copyRoots: readonly (readonly string[])[], mountTargets: readonly (readonly string[])[]): void {
  checkNoOverlap(copyRoots, 'copy roots');
  checkNoOverlap(mountTargets, 'mount targets');
  for (const t of mountTargets) {
    const root = copyRoots.find((c) => overlaps(c, t));
    if (root !== undefined) {
      throw new SealError('SEAL_OVERLAP', `mount target overlaps a copy root: ${escapePath(t.join('/'))} and ${escapePath(root.join('/'))}`, { path: t.join('/') });
    }
  }
  for (const [label, list] of [['copy root', copyRoots], ['mount target', mountTargets]] as const) {
    for (const parts of list) {
      if (isCloneOwnName(parts[0]!)) {
        const rel = parts.join('/');
        throw new SealError('SEAL_COLLISION', `${label} collides with materialize's own names in the clone: ${escapePath(rel)}`, { path: rel });
      }
    }
  }
}
