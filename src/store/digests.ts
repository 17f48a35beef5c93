// digests.ts: the digests a store publishes: listing them, and resolving a digest or a unique prefix of one.
import { SealError } from '../base/errors.js';
import { checkString, invalidArgValue } from '../base/arg-errors.js';
import { openRealDir, own, statOrNull } from '../base/fd.js';
import type { Sys } from '../sys/native.js';
import { SNAPSHOTS_DIR } from './layout.js';

export const DIGEST_RE = /^[0-9a-f]{64}$/;

/** A digest or a prefix of one, checked: not 1 to 64 lower-case hex digits is Node's TypeError (ERR_INVALID_ARG_VALUE). */
export function checkDigestPrefix(digestOrPrefix: unknown): string {
  const prefix = checkString('digest', digestOrPrefix);
  if (!/^[0-9a-f]{1,64}$/.test(prefix)) {
    throw invalidArgValue('digest', prefix, 'must be a snapshot digest or a prefix of one (1 to 64 lower-case hex digits)');
  }
  return prefix;
}

/** A full digest, checked. */
export function checkFullDigest(digest: unknown): string {
  const full = checkString('digest', digest);
  if (!DIGEST_RE.test(full)) throw invalidArgValue('digest', full, 'must be a full snapshot digest (64 lower-case hex digits)');
  return full;
}

/** Digests of every snapshot published in the store at root, sorted. */
export function listDigests(sys: Sys, root: string): string[] {
  using snapshots = own(sys, openRealDir(sys, `${root}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
  return sys
    .readdir(snapshots.fd)
    .map((e) => e.name)
    .filter((n): n is string => typeof n === 'string' && DIGEST_RE.test(n))
    .sort();
}

/** The one published digest that starts with a checked prefix: none is SEAL_UNAVAILABLE, several SEAL_AMBIGUOUS. */
export function resolveDigestIn(sys: Sys, root: string, prefix: string): string {
  // A whole digest is looked up by its name, not by listing every snapshot (ls of N snapshots listed them N times).
  if (DIGEST_RE.test(prefix)) {
    using snapshots = own(sys, openRealDir(sys, `${root}/${SNAPSHOTS_DIR}`, 'store snapshots directory'));
    if (statOrNull(sys, snapshots.fd, prefix) === null) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${prefix}`);
    return prefix;
  }
  const matches = listDigests(sys, root).filter((d) => d.startsWith(prefix));
  if (matches.length === 0) throw new SealError('SEAL_UNAVAILABLE', `no such snapshot: ${prefix}`);
  if (matches.length > 1) throw new SealError('SEAL_AMBIGUOUS', `digest prefix is ambiguous: ${prefix} (${matches.length} snapshots)`);
  return matches[0]!;
}
