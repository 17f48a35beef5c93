// made-store.ts: a store a command made (capture, pull) and then failed in goes again while it holds nothing.
import { lstatSync, readdirSync, rmdirSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The highest directory on the way to path (path included) that does not exist yet, or undefined when path exists. */
export function firstMissing(path: string): string | undefined {
  let missing: string | undefined;
  try {
    for (let at = path; lstatSync(at, { throwIfNoEntry: false }) === undefined && dirname(at) !== at; at = dirname(at)) missing = at;
  } catch {
    return undefined;
  }
  return missing;
}

/** The store's own names, each left empty by a store that holds nothing. */
const STORE_PARTS = new Set(['lock', 'snapshots', 'tmp', 'leases', 'cache', 'clones']);

/**
 * Removes the store at storeDir, which this command made, and the directories above it it
 * made (up to `made`), while it holds nothing but its own empty parts; anything else found
 * (a snapshot, a build, a download to resume, a name it does not make) leaves it all in
 * place. Never follows a link. Called once the store is closed.
 */
export function dropEmptyStore(storeDir: string, made: string): void {
  try {
    const names = readdirSync(storeDir);
    for (const name of names) {
      const st = lstatSync(join(storeDir, name));
      if (!STORE_PARTS.has(name) || (st.isDirectory() && readdirSync(join(storeDir, name)).length > 0) || st.isSymbolicLink()) return;
    }
    for (const name of names) {
      if (lstatSync(join(storeDir, name)).isDirectory()) rmdirSync(join(storeDir, name));
      else unlinkSync(join(storeDir, name));
    }
    for (let at = storeDir; ; at = dirname(at)) {
      rmdirSync(at);
      if (at === made) break;
    }
  } catch {
    // Something else is there now, or it went: left as it is.
  }
}
