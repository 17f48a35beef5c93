// checks.js: the invariants after a faulted run: the error's type, code and cause, fds, the store, the clone.
import { readdirSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

import { SealError, SnapshotStore } from '../../dist/index.js';
import { firstDiff, outside, subtree, treeState } from './tree.js';

/** Which SealError codes say what an injected errno means. */
const ALLOWED = {
  ENOSPC: ['SEAL_IO'],
  EIO: ['SEAL_IO'],
  EMFILE: ['SEAL_IO'],
  ENOLCK: ['SEAL_IO'],
  EACCES: ['SEAL_IO', 'SEAL_UNAVAILABLE'],
  EPERM: ['SEAL_IO', 'SEAL_UNAVAILABLE'],
  EMLINK: ['SEAL_IO'],
  EDQUOT: ['SEAL_IO'],
};

/** The fds open on files and directories (sockets a keep-alive HTTP agent holds, pipes and event fds of threads aside). */
export function openFds() {
  const out = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('/')) out.push(fd);
    } catch {
      // the fd readdir itself used, closed already
    }
  }
  return out.sort().join(',');
}

/**
 * The outcome of a run with `injected` thrown at one call: success, or a SealError
 * whose code fits the errno and whose cause is that very system error.
 */
export function judgeOutcome(outcome, injected) {
  if (outcome.ok) return [];
  const err = outcome.err;
  if (!(err instanceof SealError)) {
    return [`raw ${err?.code ?? err?.name ?? typeof err} escaped: ${err?.message ?? String(err)}`];
  }
  const out = [];
  if (!(ALLOWED[injected.code] ?? []).includes(err.code)) out.push(`${err.code} for ${injected.code}: ${err.message}`);
  if (err.cause !== injected) {
    const cause = err.cause instanceof Error ? `${err.cause.name} ${err.cause.code ?? ''}` : String(err.cause);
    out.push(`${err.code}'s cause is not the system error (${cause}): ${err.message}`);
  }
  return out;
}

/**
 * The store after a faulted run, as the next user sees it: it opens, its tmp/ is empty
 * after that open, and every published snapshot verifies; `mustHave` are digests that
 * must still be published.
 */
export function checkStore(root, mustHave = []) {
  const out = [];
  let store;
  try {
    store = SnapshotStore.openSync(root);
  } catch (err) {
    return [`store does not open after the fault: ${err.code ?? ''} ${err.message}`];
  }
  try {
    const tmp = readdirSync(join(root, 'tmp'));
    if (tmp.length > 0) out.push(`store tmp/ not empty after the next open: ${tmp.join(', ')}`);
    const published = readdirSync(join(root, 'snapshots'));
    for (const name of published) {
      if (!/^[0-9a-f]{64}$/.test(name)) {
        out.push(`partial entry visible in snapshots/: ${name}`);
        continue;
      }
      try {
        store.get(name).verifySync();
      } catch (err) {
        out.push(`published snapshot ${name.slice(0, 12)} no longer verifies: ${err.message}`);
      }
    }
    for (const d of mustHave) if (!published.includes(d)) out.push(`published snapshot ${d.slice(0, 12)} disappeared`);
  } finally {
    store.closeSync();
  }
  return out;
}

/** A materialize's stage inside the clone: one whose cleanup was refused stays there until the next materialize sweeps it. */
const STAGE_PREFIX = '.treeseal-materialize-';

/** A clone's state without materialize stages (the caller checks the next materialize sweeps them). */
export function withoutStages(state) {
  return new Map([...state].filter(([path]) => !path.startsWith(STAGE_PREFIX)));
}

/** Inside a clone while a materialize swaps its roots: left by a failed one on purpose, so a harness can tell. */
const CLONE_MARKER = '.treeseal-materializing';

/**
 * A clone after a faulted materialize: everything outside the roots as before (a
 * materialize-in-progress marker aside), and each root either exactly as before or
 * exactly the snapshot's.
 */
export function checkClone(clone, roots, before, after) {
  const now = withoutStages(treeState(clone));
  const out = [];
  const rest = firstDiff(outside(before, [...roots, CLONE_MARKER]), outside(now, [...roots, CLONE_MARKER]));
  if (rest !== undefined) out.push(`clone changed outside its roots: ${rest}`);
  for (const root of roots) {
    const got = subtree(now, root);
    if (firstDiff(subtree(before, root), got) === undefined) continue;
    const vsNew = firstDiff(subtree(after, root), got);
    if (vsNew !== undefined) out.push(`clone root ${root} is neither as before nor whole: ${vsNew}`);
  }
  return out;
}

/** Names in dir starting with prefix (leftover stages). */
export function leftovers(dir, prefix) {
  return readdirSync(dir).filter((n) => n.startsWith(prefix));
}
