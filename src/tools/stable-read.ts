// stable-read.ts: bounded reads of one file that prove the bytes did not change while read.
import { constants } from 'node:buffer';
import { dirname, basename } from 'node:path';

import { checkFilePath, isPlainName, openRealPlace, own } from '../base/fd.js';
import { checkInteger, checkOptions, checkString, invalidArgType } from '../base/arg-errors.js';

import { SealError } from '../base/errors.js';
import { checkSys, defineOp, readOnce } from '../base/op.js';
import { escapePath } from '../base/paths.js';
import { sealed } from '../base/refusal.js';
import { readAllAt, type StableRead } from '../base/io.js';
import { movableView } from '../base/transfer.js';
import type { Sys } from '../sys/native.js';
import { AT_FDCWD } from '../sys/constants.js';

export type { StableRead };

export interface ReadStableOptions {
  /** Largest file accepted; bigger is SEAL_LIMIT before a byte is read. */
  maxBytes: number;
  sys?: Sys | undefined;
}

/** The most bytes one read can return: a Buffer of size + 1 (the byte that tells a file grew) must be possible. */
const MAX_READ_BYTES = constants.MAX_LENGTH - 1;

/** The options of `op` checked: its syscall layer and byte bound. */
function checkReadOptions(given: ReadStableOptions, op = 'readStable'): { sys: Sys; maxBytes: number } {
  // Left out: the error names what it must hold (options.maxBytes), not only that it is missing.
  if (given === undefined) given = {} as ReadStableOptions;
  if (given === null || typeof given !== 'object') throw invalidArgType('options', 'object', given);
  // Read once (readStableAt is no defineOp call): the maxBytes checked is the one enforced.
  const options = readOnce(given) as ReadStableOptions;
  checkOptions('options', options, { op, keys: ['maxBytes', 'sys'] });
  checkInteger('options.maxBytes', options.maxBytes, 0, MAX_READ_BYTES);
  return { sys: checkSys('options.sys', options.sys), maxBytes: options.maxBytes };
}

/** readStableAt's dirfd: an fd (0 to 2^31 - 1) or AT_FDCWD, else Node's TypeError or RangeError (not wrapped as the read's failure). */
function checkDirFd(dirfd: unknown): void {
  if (typeof dirfd !== 'number') throw invalidArgType('dirfd', 'number', dirfd);
  if (dirfd !== AT_FDCWD) checkInteger('dirfd', dirfd, 0, 2 ** 31 - 1);
}

/** readStableAt's name: one component below dirfd, never a path that could climb out or pass through a link. */
function checkComponent(name: string): void {
  if (!isPlainName(name) || name.includes('\0')) {
    throw new SealError('SEAL_BAD_PATH', `name must be one entry of the directory (no '/', not '.' or '..'): ${escapePath(name)}`, { path: name });
  }
}

const READ_STABLE = defineOp('readStable', {
  validate: (path: string, options: ReadStableOptions) => {
    checkString('path', path);
    const { sys, maxBytes } = checkReadOptions(options);
    checkFilePath(path);
    return { sys, args: [path, maxBytes] as [string, number] };
  },
  core: (sys, [path, maxBytes]): StableRead => {
    using parent = own(sys, openRealPlace(sys, dirname(path), 'parent directory'));
    return readAllAt(sys, parent.fd, basename(path), maxBytes, path);
  },
  // On the worker only: the bytes are moved to the calling thread, not copied (a copy doubled the memory and time of a
  // large read); nothing there uses them again. (Marked on the calling thread, a sync result would be moved away from
  // the caller by the next async call it is passed to.)
  reply: (read) => ({ ...read, bytes: movableView(read.bytes) }),
  // The bytes cross back as a Uint8Array: a Buffer again for the caller.
  finish: (r) => ({ ...r, bytes: Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.byteLength) }),
});

/** readAllAt for a path: its parent must be a real directory; the file itself is opened O_NOFOLLOW. */
export function readStableSync(path: string, options: ReadStableOptions): StableRead {
  return READ_STABLE.sync(path, options);
}

/** readStableSync on the worker thread (on the calling thread when `sys` is another layer than the addon's). */
export function readStable(path: string, options: ReadStableOptions): Promise<StableRead> {
  return READ_STABLE.async(path, options);
}

/** The dirfd-relative form: name, one entry of the directory dirfd, is opened without following a symlink. */
export function readStableAt(dirfd: number, name: string, options: ReadStableOptions): StableRead {
  const { sys, maxBytes } = checkReadOptions(options, 'readStableAt');
  checkDirFd(dirfd);
  checkString('name', name);
  checkComponent(name);
  return sealed('readStable', () => readAllAt(sys, dirfd, name, maxBytes));
}
