// setting-file.ts: reading a small file a setting names (a CA file, the docker config): a regular file only, of bounded size, never blocking on a FIFO.
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { open } from 'node:fs/promises';

/** The most a setting's file may hold: far past any CA bundle or docker config. */
export const SETTING_FILE_BYTES = 16 * 1024 * 1024;

/** Opened without blocking: a FIFO at the name must not hang the call until a writer comes. */
const FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/** Why a file cannot be a setting's, in words for a message: not a regular file, or too large. */
export class NotSettingFile extends Error {}

function check(st: { isFile(): boolean; size: number }): void {
  if (!st.isFile()) throw new NotSettingFile('not a regular file');
  if (st.size > SETTING_FILE_BYTES) throw new NotSettingFile(`larger than ${SETTING_FILE_BYTES} bytes`);
}

/** The file's bytes; NotSettingFile when it is no regular file or too large, a system error when it cannot be opened or read. */
export function readSettingFile(path: string): Buffer {
  const fd = openSync(path, FLAGS);
  try {
    const st = fstatSync(fd);
    check(st);
    // At most the size its stat gave: a file that grows meanwhile is not read without end.
    const buffer = Buffer.allocUnsafe(st.size);
    let n = 0;
    for (let got = -1; got !== 0 && n < buffer.length; n += got) got = readSync(fd, buffer, n, buffer.length - n, null);
    return buffer.subarray(0, n);
  } finally {
    closeSync(fd);
  }
}

/** readSettingFile with async reads. */
export async function readSettingFileAsync(path: string): Promise<Buffer> {
  const file = await open(path, FLAGS);
  try {
    const st = await file.stat();
    check(st);
    const buffer = Buffer.allocUnsafe(st.size);
    let n = 0;
    for (let got = -1; got !== 0 && n < buffer.length; n += got) got = (await file.read(buffer, n, buffer.length - n, null)).bytesRead;
    return buffer.subarray(0, n);
  } finally {
    await file.close();
  }
}
