// capture-options.ts: `treeseal capture`'s exclude patterns (--exclude, --exclude-from) and limits (--max-*), as the library's capture options.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import { DEFAULT_LIMITS, SealError, escapePath, type Limits } from '../index.js';
import { countOption, listOption, type Context, type OptionSpec } from './command.js';
import { sizeOption } from './usage.js';

/** Each limit's flag. */
const LIMIT_FLAGS: readonly [flag: string, key: keyof Limits, what: string][] = [
  ['max-entries', 'maxEntries', 'most entries, implicit parent directories counted'],
  ['max-bytes', 'maxTotalBytes', 'most bytes in all, file bytes plus symlink target bytes'],
  ['max-file-bytes', 'maxFileBytes', 'most bytes in one file'],
  ['max-path-bytes', 'maxPathBytes', 'most UTF-8 bytes in one path or link target'],
  ['max-depth', 'maxDepth', 'most path components below <source>'],
];

export const CAPTURE_OPTIONS: Record<string, OptionSpec> = {
  exclude: { type: 'string', multiple: true },
  'exclude-from': { type: 'string', multiple: true },
  ...Object.fromEntries(LIMIT_FLAGS.map(([flag]) => [flag, { type: 'string' }])),
};

export const CAPTURE_OPTIONS_HELP = [
  '  --exclude PATTERN    leave out what a gitignore pattern matches, relative to <source>, in every copy root',
  '                       and mount (repeatable): build/, *.log, **/__pycache__/, /dist (anchored), !keep.log;',
  '                       what is left out is never opened; the patterns are part of the snapshot and its digest',
  '  --exclude-from FILE  patterns from FILE, one a line (blank lines and # comments skipped), before --exclude ones',
  ...LIMIT_FLAGS.map(([flag, key, what]) => `  ${`--${flag} N`.padEnd(21)}${what} (default ${DEFAULT_LIMITS[key]}${key === 'maxTotalBytes' || key === 'maxFileBytes' ? '; or a size: 3G, 500MiB' : ''})`),
  '                       (a capture past a limit fails with SEAL_LIMIT)',
].join('\n');

/** Where each pattern came from, for a refusal that names it. */
export interface Excludes {
  patterns: string[];
  origins: string[];
}

/** The patterns of one --exclude-from file: its lines, but blank ones and # comments. */
function patternsIn(file: string, into: Excludes): void {
  const path = resolve(file);
  let raw: Buffer;
  try {
    raw = readFileSync(path);
  } catch (err) {
    throw new SealError('SEAL_UNAVAILABLE', `cannot read --exclude-from file ${escapePath(path)}: ${escapePath((err as Error).message)}`, { cause: err });
  }
  const text = raw.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(raw)) throw new SealError('SEAL_BAD_PATH', `--exclude-from file is not valid UTF-8: ${escapePath(path)}`);
  text.split('\n').forEach((line, i) => {
    const pattern = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (pattern.trim() === '' || pattern.startsWith('#')) return;
    into.patterns.push(pattern);
    into.origins.push(`${escapePath(file)} line ${i + 1}`);
  });
}

/** The exclude patterns: every --exclude-from file's, in order, then every --exclude (a later pattern wins). */
export function excludeOptions(ctx: Context): Excludes {
  const out: Excludes = { patterns: [], origins: [] };
  for (const file of listOption(ctx, 'exclude-from')) patternsIn(file, out);
  for (const pattern of listOption(ctx, 'exclude')) {
    out.patterns.push(pattern);
    out.origins.push('--exclude');
  }
  return out;
}

/**
 * A refusal of `options.exclude[i]` names the flag or the file line the pattern came from;
 * one of a copy root or mount source the patterns leave out names its --copy or --mount.
 */
export function namingOrigin(err: unknown, excludes: Excludes): unknown {
  if (err instanceof SealError && err.code === 'SEAL_LIMIT') return withLimitFlag(err);
  if (!(err instanceof TypeError)) return err;
  const root = /^The property 'options\.(copy|mounts)\[\d+\](?:\.source)?' (is left out by the exclude pattern [^]*)\. Received ([^]*)$/.exec(err.message);
  if (root !== null) {
    err.message = `--${root[1] === 'copy' ? 'copy' : 'mount'} ${root[3]} ${root[2]}`;
    return err;
  }
  const m = /^The property 'options\.exclude\[(\d+)\]'/.exec(err.message);
  const origin = m === null ? undefined : excludes.origins[Number(m[1])];
  if (origin !== undefined) err.message = `The exclude pattern from ${origin}${err.message.slice(m![0].length)}`;
  return err;
}

/** The exclude patterns, as JSON (a pattern's backslashes and spaces matter), after `label`; none for none. */
export function excludeLine(data: { exclude?: readonly string[] | undefined }, label: string): string[] {
  return data.exclude === undefined || data.exclude.length === 0 ? [] : [`${label}${JSON.stringify(data.exclude)}`];
}

/** The limits the --max-* flags give (none: the defaults). */
export function limitOptions(ctx: Context): Partial<Limits> {
  const limits: Partial<Limits> = {};
  for (const [flag, key] of LIMIT_FLAGS) {
    // The byte limits take a size as gc's --max-size does (3G, 500MiB), or a plain count.
    const n = key === 'maxTotalBytes' || key === 'maxFileBytes' ? sizeOption(ctx, flag) : countOption(ctx, flag, 'a count');
    if (n !== undefined) limits[key] = n;
  }
  return limits;
}

/** The flag that raises each capture limit, by the words of its SEAL_LIMIT. */
const RAISED_BY: [RegExp, string][] = [
  [/^capture exceeds the entry limit /, '--max-entries N'],
  [/^capture exceeds the total byte limit /, '--max-bytes SIZE'],
  [/^(capture exceeds the path byte limit|symlink target exceeds the path limit) /, '--max-path-bytes N'],
  [/^capture exceeds the depth limit /, '--max-depth N'],
  [/^file exceeds the per-file limit /, '--max-file-bytes SIZE'],
];

/** A capture's SEAL_LIMIT with the way out: the flag that raises that limit, or --exclude to leave what passed it out. */
function withLimitFlag(err: SealError): SealError {
  const flag = RAISED_BY.find(([words]) => words.test(err.message))?.[1];
  if (flag !== undefined) err.message = `${err.message} (raise it with ${flag}, or leave paths out with --exclude)`;
  return err;
}
