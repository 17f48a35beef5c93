// capture.ts: `treeseal capture`: a source directory into a snapshot (or the one already in the store).
import { existsSync, lstatSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';

import { SealError, escapePath, type CaptureReport, type MountDeclaration, type Snapshot } from '../index.js';
import { UsageError, choiceOption, flag, listOption, need, plural, stringOption, type CommandSpec, type Context } from './command.js';
import { bytes } from './format.js';
import { CAPTURE_OPTIONS, CAPTURE_OPTIONS_HELP, excludeLine, excludeOptions, limitOptions, namingOrigin } from './capture-options.js';

function parseMount(spec: string): MountDeclaration {
  const cut = spec.indexOf(':');
  const source = cut < 0 ? spec : spec.slice(0, cut);
  const target = cut < 0 ? spec : spec.slice(cut + 1);
  if (source === '' || target === '') throw new UsageError(`--mount takes SRC[:TARGET], not ${JSON.stringify(spec)}`, 'capture');
  return { source, target };
}

const LINKS = ['refuse', 'contained'] as const;

/**
 * Without --copy every top-level entry is a copy root but one that holds a mount source:
 * a mount deeper than the top level (packages/a/node_modules) leaves out the whole
 * top-level directory it is in (packages, and the code beside it). Said once for each.
 */
function warnMountedTops(io: Context['io'], mounts: readonly MountDeclaration[]): void {
  const parts = (p: string): string[] => p.split('/').filter((c) => c !== '' && c !== '.');
  const whole = new Set(mounts.map((m) => parts(m.source)).filter((c) => c.length === 1).map((c) => c[0]!));
  const said = new Set<string>();
  for (const m of mounts) {
    const [top, ...rest] = parts(m.source);
    if (top === undefined || rest.length === 0 || whole.has(top) || said.has(top)) continue;
    said.add(top);
    io.warn(`treeseal: warning: ${escapePath(top)} is no copy root: it holds the mount source ${escapePath(m.source)}, so nothing else in it is captured (name what to copy with --copy)`);
  }
}

/** path made real: its deepest existing ancestor's realpath, then the rest as given. */
function realOf(path: string): string {
  const rest: string[] = [];
  for (let at = path; ; at = dirname(at)) {
    if (existsSync(at)) return join(realpathSync(at), ...rest.reverse());
    if (dirname(at) === at) return path;
    rest.push(basename(at));
  }
}

/**
 * A store the command would make inside a copy root of what it captures is refused before
 * it is made, with the library's own words: the library refuses it too, but only once the
 * store is open, and the store it made (lock, snapshots/, tmp/) was left in the user's
 * source, where the next capture took it in. Only where the roots follow from the words
 * alone (--copy given, or the default roots without --exclude); otherwise the library says.
 */
function checkNewStoreOutside(storeDir: string, source: string, copy: readonly string[], mounts: readonly MountDeclaration[], excluding: boolean): void {
  let src: string;
  let store: string;
  try {
    if (lstatSync(storeDir, { throwIfNoEntry: false }) !== undefined) return;
    src = realOf(source);
    store = realOf(storeDir);
  } catch {
    // A path the system refuses to resolve (a file on the way, no search permission): the library says what is wrong with it.
    return;
  }
  if (!store.startsWith(`${src}/`)) return;
  const rel = store.slice(src.length + 1).split('/');
  const mounted = new Set(mounts.map((m) => m.source.split('/').find((p) => p !== '' && p !== '.')));
  const roots = copy.length > 0 ? copy.map((c) => c.split('/').filter((p) => p !== '' && p !== '.')) : excluding || mounted.has(rel[0]) ? [] : [[rel[0]!]];
  for (const root of roots) {
    if (root.length > 0 && root.every((p, i) => rel[i] === p)) throw new SealError('SEAL_OVERLAP', `the store lies inside what is being captured: ${escapePath(root.join('/'))}`);
  }
}

async function run(ctx: Context): Promise<void> {
  need(ctx, 1, 'one <source> directory');
  const { io } = ctx;
  const source = resolve(ctx.args[0]!);
  const mounts = listOption(ctx, 'mount').map(parseMount);
  const copy = listOption(ctx, 'copy');
  const revision = stringOption(ctx, 'revision');
  const statCache = !flag(ctx, 'no-stat-cache');
  const links = choiceOption(ctx, 'links', LINKS, 'refuse');
  const excludes = excludeOptions(ctx);
  const limits = limitOptions(ctx);
  checkNewStoreOutside(ctx.storeDir, source, copy, mounts, excludes.patterns.length > 0);
  const store = await ctx.store();
  const line = io.progress('capturing');
  let snap: Snapshot;
  try {
    snap = store.captureSync({
    source,
    // None given: the library takes every top-level entry that holds no mount source.
    ...(copy.length === 0 ? {} : { copy }),
    ...(excludes.patterns.length === 0 ? {} : { exclude: excludes.patterns }),
    limits,
    mounts,
    ...(revision === undefined ? {} : { revision }),
    ...(flag(ctx, 'keep-exec') ? { keepExecutable: true } : {}),
    ...(flag(ctx, 'keep-times') ? { keepTimes: true } : {}),
    links,
    statCache,
    onProgress: (p) => line.update(p),
    });
  } catch (err) {
    // A store this command made goes again while it holds nothing (main.ts): one refused as inside what it captures
    // where the words could not tell (an exclude, a bind mount) is not left in the user's source.
    throw namingOrigin(err, excludes);
  }
  line.done();
  if (copy.length === 0) warnMountedTops(io, mounts);
  const s = snap.summary();
  const r: CaptureReport = snap.captureReport ?? { files: 0, reusedFiles: 0, built: true, reused: false };
  const cache = statCache ? `${r.reusedFiles} of ${plural(r.files, 'file')} unchanged (stat cache)${r.built ? '' : ', snapshot already stored'}` : 'off (--no-stat-cache)';
  const unsaved = r.statCacheNotSaved === undefined ? {} : { statCacheNotSaved: r.statCacheNotSaved };
  io.emit({ ...s, root: snap.root, files: r.files, reusedFiles: r.reusedFiles, built: r.built, reused: r.reused, ...unsaved }, [
    `${r.reused ? 'reused' : 'captured'} ${escapePath(source)}`,
    `  digest    ${s.digest}`,
    `  manifest  ${s.manifestDigest}`,
    ...excludeLine(s, '  exclude   '),
    `  entries   ${String(s.entries)}`,
    `  bytes     ${s.totalBytes} (${bytes(s.totalBytes)})`,
    `  reused    ${cache}`,
    ...(r.statCacheNotSaved === undefined ? [] : [`  cache     not saved (the next capture reads every file): ${r.statCacheNotSaved}`]),
    `  root      ${escapePath(snap.root)}`,
  ].join('\n'));
}

export const CAPTURE: CommandSpec = {
  name: 'capture',
  synopsis: 'capture <source>',
  summary: 'capture a snapshot (or reuse the one already stored)',
  help: `usage: treeseal capture <source> [--copy PATH]... [--mount SRC[:TARGET]]... [--exclude PATTERN]... [--exclude-from FILE]... [--revision R] [--keep-exec] [--keep-times] [--links refuse|contained] [--no-stat-cache] [--max-entries|--max-bytes|--max-file-bytes|--max-path-bytes|--max-depth N]

Captures paths below the directory <source> into a frozen, content-addressed snapshot.
Without --copy, every top-level entry of <source> that holds no --mount source (and is not excluded) is a copy root.
Prints "captured" for a new snapshot, "reused" when the store already held it.
  --copy PATH          a file or directory below <source> to copy (repeatable; no symlinks inside but --links contained ones)
  --mount SRC[:TARGET] a path below <source> to capture as a read-only mount at TARGET (default SRC)
  --revision R         folded into the digest (e.g. a commit id)
  --keep-exec          record executable bits in copy roots (changes the manifest; off by default)
  --keep-times         record the mtime of every file and directory in copy roots, which materialize restores
                       (changes the manifest; off by default)
  --links contained    keep relative symlinks in copy roots that resolve to what the snapshot captures
                       (default refuse: any symlink in a copy root is refused)
  --no-stat-cache      read and hash every file (by default a file unchanged since the last capture reuses its hash)
${CAPTURE_OPTIONS_HELP}`,
  options: {
    copy: { type: 'string', multiple: true },
    mount: { type: 'string', multiple: true },
    revision: { type: 'string' },
    'keep-exec': { type: 'boolean' },
    'keep-times': { type: 'boolean' },
    links: { type: 'string' },
    'no-stat-cache': { type: 'boolean' },
    ...CAPTURE_OPTIONS,
  },
  run,
};
