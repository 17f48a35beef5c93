// clone-readback.ts: the files a reset or materialize made in a clone a process may be in, read back under their recorded identity before the ledger trusts them.
import { DIR_FLAGS, openBeneath, own } from '../base/fd.js';
import { CHUNK_BYTES, hashAt } from '../base/io.js';
import { writeBack, writebackOf } from '../capture/stat-cache.js';
import { O_NOFOLLOW, O_NONBLOCK, O_RDONLY, isReg } from '../sys/constants.js';
import { statOrNull } from './clone-paths.js';
import type { Stat } from '../sys/native.js';
import type { EntryReader } from './manifest-tree.js';
import type { Run } from './materialize-run.js';

/**
 * A process in the clone can open a file while it is made (the clone and the file are its
 * user's): a write it made before the identity was recorded would be recorded as ours, and
 * a page it faulted writable then takes later writes without another fault, so without
 * moving a time. So each file made is read back: its pages put under writeback first (which
 * write-protects them: any later write faults and moves the ctime), then its identity must
 * still be the one recorded, its bytes the snapshot's, and its identity the same after the
 * read. One that fails is left unrecorded: the next diff names it and the next reset makes
 * it again.
 */
export function checkMadeFiles(run: Run, cloneFd: number, entries: EntryReader, made: readonly number[]): void {
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  for (const index of made) {
    const parts = entries.path(index).split('/');
    let intact = false;
    try {
      using dir = parts.length === 1 ? own(run.sys, run.sys.openat(cloneFd, '.', DIR_FLAGS)) : own(run.sys, openBeneath(run.sys, cloneFd, parts.slice(0, -1), DIR_FLAGS));
      intact = holdsRecorded(run, dir.fd, parts[parts.length - 1]!, index, entries, buffer) !== undefined;
    } catch {
      // Gone, or swapped for a link or a directory: not what was recorded.
    }
    if (!intact) run.ledger.forget(index);
  }
}

/**
 * The identity of dirFd/name after its read when it is the file recorded for entry index,
 * holding its bytes, unchanged while they were read (its pages written back first); else
 * undefined.
 */
export function holdsRecorded(run: Run, dirFd: number, name: string, index: number, entries: EntryReader, buffer: Buffer): Stat | undefined {
  const { sys, ledger } = run;
  writeBackAt(run, dirFd, name);
  const before = statOrNull(sys, dirFd, name);
  if (before === null || !ledger.same(index, before)) return undefined;
  const got = hashAt(sys, buffer, dirFd, name);
  const after = statOrNull(sys, dirFd, name);
  const want = entries.at(index);
  return got.size === want.size && got.sha256 === want.sha256 && after !== null && ledger.same(index, after) ? after : undefined;
}

/**
 * Puts the regular file dirFd/name's dirty pages under writeback, which write-protects every
 * mapping of them (sync_file_range; fdatasync on overlayfs); nothing on a filesystem that
 * never writes back (tmpfs: the ledger hashes its files anyway). Never through a link, and a
 * FIFO is not waited on.
 */
function writeBackAt(run: Run, dirFd: number, name: string): void {
  const { sys } = run;
  using file = own(sys, sys.openat(dirFd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK));
  if (!isReg(sys.fstat(file.fd).mode)) return;
  run.writeback ??= writebackOf(sys, file.fd);
  writeBack(sys, file.fd, run.writeback);
}
