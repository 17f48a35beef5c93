// default-copy.ts: the copy roots of a capture that names none (every top-level entry of the source that holds no mount source), and the rule that the store lies outside every declared root.
import { checkClonePlaces } from '../base/clone-names.js';
import { SealError } from '../base/errors.js';
import { checkRelative, escapePath, isWellFormed } from '../base/paths.js';
import type { Sys } from '../sys/native.js';
import { keptEntries, type Excludes } from './exclude.js';
import type { Plan } from './plan.js';

/**
 * A store below the source is fine unless a declared root (a copy root or a mount source)
 * contains it: it would copy itself. A source that is the store or lies inside it would
 * walk into its own build. (By path here; the walk also refuses a directory that is the
 * store or the build by identity, as a bind mount shows them.)
 */
export function checkStoreOutside(storeRoot: string, source: string, declared: readonly (readonly string[])[]): void {
  if (source === storeRoot || source.startsWith(`${storeRoot}/`)) {
    throw new SealError('SEAL_OVERLAP', `the source ${source === storeRoot ? 'is the store' : 'lies inside the store'}: ${escapePath(source)}`);
  }
  for (const parts of declared) {
    const path = `${source}/${parts.join('/')}`;
    if (storeRoot === path || storeRoot.startsWith(`${path}/`)) {
      throw new SealError('SEAL_OVERLAP', `the store lies inside what is being captured: ${escapePath(parts.join('/'))}`);
    }
  }
}

/**
 * Every top-level entry of the source open at sourceFd, except those holding a mount
 * source and those the excludes leave out, in JavaScript's string order (UTF-16 code
 * units; the order the command always gave them in, so their digests stay the same).
 */
export function topLevelRoots(sys: Sys, sourceFd: number, plan: Pick<Plan, 'mounts'>, excludes: Excludes | undefined): TopLevel {
  const names: string[] = [];
  const badNames: Buffer[] = [];
  for (const { name } of keptEntries(sys, sourceFd, '', sys.readdir(sourceFd), excludes)) {
    // One that is not UTF-8 cannot be a root: the capture refuses it with the walk's other obstacles.
    if (typeof name === 'string' && isWellFormed(name)) names.push(name);
    else badNames.push(Buffer.from(name));
  }
  const mounted = new Set(plan.mounts.map((m) => m.sourceParts[0]));
  return { roots: [...names].sort().filter((n) => !mounted.has(n)), names, badNames: badNames.sort(Buffer.compare) };
}

/** The source's top level as default copy roots see it. */
export interface TopLevel {
  /** The copy roots, in JavaScript's string order. */
  roots: string[];
  /** Every UTF-8 name kept (the roots and the mount sources' first components). */
  names: string[];
  /** Names that are not valid UTF-8, in byte order: obstacles of the capture. */
  badNames: Buffer[];
}

/**
 * The plan with its copy roots: as given, or (copy omitted) the source's top-level
 * entries, checked as given ones are (a name capture refuses, a place materialize keeps
 * for itself, a root holding the store).
 */
export function withCopyRoots(sys: Sys, sourceFd: number, plan: Plan, storeRoot: string, excludes: Excludes | undefined, onBadName: (name: Buffer, siblings: readonly string[]) => void): Plan {
  if (!plan.defaultCopy) return plan;
  const top = topLevelRoots(sys, sourceFd, plan, excludes);
  for (const name of top.badNames) onBadName(name, top.names);
  const declarations = top.roots;
  const copyParts = declarations.map((name, i) => checkRelative(name, { label: 'copy root', name: `copy root ${i}`, maxPathBytes: plan.limits.maxPathBytes }));
  checkClonePlaces(
    copyParts,
    plan.mounts.map((m) => m.targetParts),
  );
  checkStoreOutside(storeRoot, plan.source, copyParts);
  return { ...plan, declarations, copyParts };
}
