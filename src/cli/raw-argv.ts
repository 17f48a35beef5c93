// raw-argv.ts: the command's arguments as the kernel passed them (bytes), so one that is not valid UTF-8 is refused instead of decoded lossily.
import { readFileSync } from 'node:fs';

import { SealError, escapePath } from '../index.js';

/**
 * The last `count` arguments of this process as bytes (/proc/self/cmdline), or
 * undefined where they cannot be read. Node decodes argv as UTF-8, replacing bytes
 * that are not: `c\xff` and `c\xfe` would both arrive as `c\uFFFD`.
 */
export function rawArguments(count: number): Buffer[] | undefined {
  let bytes: Buffer;
  try {
    bytes = readFileSync('/proc/self/cmdline');
  } catch {
    return undefined;
  }
  const all: Buffer[] = [];
  for (let start = 0; start < bytes.length; ) {
    const end = bytes.indexOf(0, start);
    const stop = end < 0 ? bytes.length : end;
    all.push(bytes.subarray(start, stop));
    start = stop + 1;
  }
  return all.length >= count ? all.slice(all.length - count) : undefined;
}

/**
 * Refuses (SEAL_BAD_PATH, naming it escaped) an environment variable among `names` whose
 * bytes (/proc/self/environ, as the process was started) are not valid UTF-8: Node decodes
 * the environment as it decodes argv, so `TREESEAL_STORE=/s\xff` and `/s\xfe` would name
 * one store. Where the environment cannot be read, nothing is refused.
 */
export function checkEnvironmentBytes(names: readonly string[]): void {
  let bytes: Buffer;
  try {
    bytes = readFileSync('/proc/self/environ');
  } catch {
    return;
  }
  for (let start = 0; start < bytes.length; ) {
    const end = bytes.indexOf(0, start);
    const stop = end < 0 ? bytes.length : end;
    const pair = bytes.subarray(start, stop);
    start = stop + 1;
    const eq = pair.indexOf(0x3d);
    const name = eq < 0 ? '' : pair.toString('latin1', 0, eq);
    if (!names.includes(name)) continue;
    const value = pair.subarray(eq + 1);
    if (!Buffer.from(value.toString('utf8'), 'utf8').equals(value)) {
      throw new SealError('SEAL_BAD_PATH', `environment variable ${name} is not valid UTF-8: ${escapePath(value)}`);
    }
  }
}

/** Refuses (SEAL_BAD_PATH, naming it escaped) the first argument whose bytes are not valid UTF-8. */
export function checkArgumentBytes(raw: readonly Buffer[] | undefined): void {
  raw?.forEach((bytes, i) => {
    if (Buffer.from(bytes.toString('utf8'), 'utf8').equals(bytes)) return;
    throw new SealError('SEAL_BAD_PATH', `argument ${i + 1} is not valid UTF-8: ${escapePath(bytes)}`);
  });
}
