// clone-changing.ts: a system error saying a clone's names changed under a call (an agent still at work in it) becomes SEAL_CHANGED, which a caller may retry; one from the store's side of such a call never does.
import { SealError } from '../base/errors.js';
import { escapePath } from '../base/paths.js';
import { throwIfRefused } from '../base/refusal.js';
import { hasCode, isSystemError } from '../sys/errno.js';

/**
 * Runs fn, a walk of a clone (diff, reset, materialize, checkClone): a system error no
 * layer below made into a SealError, and that says a name changed between two looks at
 * it (gone: ENOENT; made a file or a link: ENOTDIR, ELOOP; made meanwhile: EEXIST; filled
 * meanwhile: ENOTEMPTY), is SEAL_CHANGED, `cause` the system's error. The clone is an
 * agent's: such an error says it was at work, never that the store is damaged, and the
 * call run again sees the clone as it is then.
 */
export function whileCloneChanges<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof SealError || !hasCode(err, 'ENOENT', 'ENOTDIR', 'ELOOP', 'EEXIST', 'ENOTEMPTY')) throw err;
    const path = placeOf(err);
    const at = path === undefined ? '' : `${escapePath(path)}: `;
    throw new SealError('SEAL_CHANGED', `clone changed while it was ${what}: ${at}${escapePath((err as Error).message)}`, { cause: err, ...(path === undefined ? {} : { path }) });
  }
}

/** Where in the clone a system error happened: the directory being walked (set once, by the innermost). */
const WHERE = Symbol('treeseal.cloneDir');

/**
 * Runs fn, the walk of the clone's directory `rel` (relative to the clone): a system
 * error from it is marked with that directory, once (the innermost one walked), so that
 * whileCloneChanges can name the path, not only the last name the syscall was given.
 */
export function inCloneDir<T>(rel: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (isSystemError(err) && !Object.hasOwn(err, WHERE)) Object.defineProperty(err, WHERE, { value: rel });
    throw err;
  }
}

/** The clone-relative path a marked system error names: its directory, and the name an *at call was given there (a name alone). */
function placeOf(err: unknown): string | undefined {
  const dir = (err as { [WHERE]?: unknown })[WHERE];
  if (typeof dir !== 'string') return undefined;
  const name = (err as { path?: unknown }).path;
  if (typeof name !== 'string' || name === '' || name.includes('/')) return dir === '' ? undefined : dir;
  return dir === '' ? name : `${dir}/${name}`;
}

/**
 * Runs fn, work a clone call does in the store (the clone's lock in tmp/, its ledger in
 * clones/), so that what fails there is said as the store's, typed, and never reaches
 * whileCloneChanges as a change of the clone: a refusal is SEAL_IO; a name there that is
 * not what the store made (a link, a file, one gone or made meanwhile) SEAL_CORRUPT.
 */
export function inStore<T>(what: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (err instanceof SealError) throw err;
    throwIfRefused(err, `store ${what}`);
    if (hasCode(err, 'ENOENT', 'ENOTDIR', 'ELOOP', 'EEXIST', 'ENOTEMPTY')) {
      throw new SealError('SEAL_CORRUPT', `store ${what}: ${escapePath((err as Error).message)}`, { cause: err });
    }
    throw err;
  }
}
