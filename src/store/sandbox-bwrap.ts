// sandbox-bwrap.ts: which bubblewrap a sandboxed run starts: one on PATH, never in the working directory or inside the clone the command can write.
import { accessSync, constants as fsConstants, realpathSync, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

import { checkString, invalidArgType } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { escapePath, isBelow } from '../base/paths.js';

export const NO_BWRAP = 'a sandboxed run needs bubblewrap: no bwrap on PATH (Debian and Ubuntu: apt-get install bubblewrap)';

/** The real path of `path`, or undefined where it cannot be resolved (missing, unreadable). */
function realOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

/**
 * The path of the `bwrap` a sandboxed run starts: the first executable file of that name
 * in an absolute directory of env's PATH; an empty or relative entry (the working
 * directory, which may be an arm an agent wrote a `bwrap` into) is skipped, where a shell
 * would search it; so is, given the `clone` the command will run in, one that is inside
 * that clone, or a `bwrap` that resolves into it (an arm's `node_modules/.bin` on PATH, as
 * npm scripts put it there, holds what the last command wrote): SEAL_UNTRUSTED where only
 * such a one was found, SEAL_UNAVAILABLE naming the package when there is none.
 * spawnSandboxed asks first, before it makes anything; a caller that prepares a clone for
 * it can ask before that too.
 */
export function findBubblewrap(env: NodeJS.ProcessEnv = process.env, clone?: string): string {
  if (env === null || typeof env !== 'object') throw invalidArgType('env', 'object', env);
  if (clone !== undefined) checkString('clone', clone);
  const inside = clone === undefined ? undefined : realOrUndefined(clone);
  let planted: string | undefined;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const file = join(dir, 'bwrap');
    try {
      accessSync(file, fsConstants.X_OK);
      if (!statSync(file).isFile()) continue;
    } catch {
      // not here
      continue;
    }
    if (inside !== undefined && [realOrUndefined(file), realOrUndefined(dir)].some((real) => real !== undefined && isBelow(real, inside))) {
      planted ??= file;
      continue;
    }
    return file;
  }
  if (planted !== undefined) {
    throw new SealError('SEAL_UNTRUSTED', `untrusted bubblewrap: the only bwrap on PATH, ${escapePath(planted)}, is inside the clone ${escapePath(clone!)}, which the sandboxed command can write: install bubblewrap (apt-get install bubblewrap), or put the directory it is in ahead on PATH`, { path: planted });
  }
  throw new SealError('SEAL_UNAVAILABLE', NO_BWRAP);
}
