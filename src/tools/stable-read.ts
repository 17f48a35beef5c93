// stable-read.ts: bounded reads of one file that prove the bytes did not change while read.
import { dirname, basename } from 'node:path';

import { openRealDir, own } from '../base/fd.js';
import { checkInteger, checkString, invalidArgType } from '../base/arg-errors.js';
import { SealError } from '../base/errors.js';
import { escapePath } from '../base/paths.js';

import { inline, offload } from '../base/offload.js';
import { sealed } from '../base/refusal.js';
import { readAllAt, type StableRead } from '../base/io.js';
import { sys as nativeSys, type Sys } from '../sys/native.js';

export type { StableRead };

export interface ReadStableOptions {
  /** Largest file accepted; bigger is SEAL_LIMIT before a byte is read. */
  maxBytes: number;
  sys?: Sys;
}

function checkReadOptions(options: ReadStableOptions): ReadStableOptions {
  if (options === null || typeof options !== 'object') throw invalidArgType('options', 'object', options);
  checkInteger('options.maxBytes', options.maxBytes);
  return options;
}

/** readAllAt for a path: its parent must be a real directory; the file itself is opened O_NOFOLLOW. */
export function readStableSync(path: string, options: ReadStableOptions): StableRead {
  checkString('path', path);
  const { sys = nativeSys, maxBytes } = checkReadOptions(options);
  const name = basename(path);
  if (name === '' || name === '.' || name === '..') throw new SealError('SEAL_BAD_PATH', `not a file path: ${escapePath(path)}`);
  return sealed('readStable', () => {
    using parent = own(sys, openRealDir(sys, dirname(path), 'parent directory'));
    return readAllAt(sys, parent.fd, name, maxBytes, path);
  });
}

/** readStableSync on the worker thread (on the calling thread when `sys` is given). */
export async function readStable(path: string, options: ReadStableOptions): Promise<StableRead> {
  checkString('path', path);
  const { sys, maxBytes } = checkReadOptions(options);
  if (sys !== undefined) return inline(() => readStableSync(path, options));
  const r = await offload('readStable', [path, maxBytes]);
  return { ...r, bytes: Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.byteLength) };
}

/** The dirfd-relative form: name is opened below dirfd without following a symlink. */
export function readStableAt(dirfd: number, name: string, options: ReadStableOptions): StableRead {
  const { sys = nativeSys, maxBytes } = checkReadOptions(options);
  checkString('name', name);
  return sealed('readStable', () => readAllAt(sys, dirfd, name, maxBytes));
}
