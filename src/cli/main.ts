// main.ts: one run of the treeseal command: options parsed and checked, the subcommand run (with retries), failures mapped to exit statuses.
import { lstatSync, realpathSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { SealError, SnapshotStore, escapePath } from '../index.js';
import { UsageError, countOption, type CommandSpec, type Context, type OptionSpec, type OptionValue } from './command.js';
import { hasControl } from './format.js';
import { COMMON_OPTIONS, commandHelp, mainHelp } from './help.js';
import { Io } from './io.js';
import { dropEmptyStore, firstMissing, madeStore, type MadeStore } from './made-store.js';
import { checkArgumentBytes, checkEnvironmentBytes } from './raw-argv.js';
import { DEFAULT_RETRIES, withRetries } from './retry.js';
import { COMMANDS, findCommand } from './table.js';
import { unknownCommand, unknownOption } from './suggest.js';
import { version } from './version.js';

/** The options of any command that take a value (own-failure.ts lists them for the command's first lines). */
export function stringOptionNames(): string[] {
  return Object.entries(allOptions()).flatMap(([name, spec]) => (spec.type === 'string' ? [name] : [])).sort();
}

/** Every option any command takes (parseArgs needs them all before it knows the command). */
function allOptions(): Record<string, OptionSpec> {
  const all: Record<string, OptionSpec> = { ...COMMON_OPTIONS };
  for (const c of COMMANDS) {
    for (const [name, spec] of Object.entries(c.options ?? {})) {
      const seen = all[name];
      if (seen !== undefined && (seen.type !== spec.type || seen.multiple !== spec.multiple)) {
        throw new Error(`option --${name} is declared twice with different types`);
      }
      all[name] = spec;
    }
  }
  return all;
}

/** The first word of argv that is neither an option nor an option's value, as a command (undefined: none such). */
function commandWord(argv: readonly string[], options: ReturnType<typeof allOptions>): CommandSpec | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return undefined;
    if (!a.startsWith('-')) return findCommand(a);
    if (a.startsWith('--') && !a.includes('=') && options[a.slice(2)]?.type === 'string') i++;
  }
  return undefined;
}

/** $XDG_CACHE_HOME when it is set and absolute: the XDG base directory spec has a relative one ignored. */
function xdgCacheHome(env: NodeJS.ProcessEnv): string | undefined {
  return env.XDG_CACHE_HOME !== undefined && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : undefined;
}

/** $HOME when it is an absolute path; an empty or relative one names no place (as a relative $XDG_CACHE_HOME does not). */
function absoluteHome(env: NodeJS.ProcessEnv): string | undefined {
  return env.HOME !== undefined && isAbsolute(env.HOME) ? env.HOME : undefined;
}

/** The user's home for the default store: $HOME, else (unset, empty or relative) the password database's. */
function homeOf(env: NodeJS.ProcessEnv): string {
  const home = absoluteHome(env);
  if (home !== undefined) return home;
  let entry: string | undefined;
  try {
    entry = userInfo().homedir;
  } catch {
    // No entry for this uid (a container's arbitrary user): said below.
  }
  if (entry !== undefined && isAbsolute(entry)) return entry;
  const why = env.HOME === undefined ? '$HOME is not set' : `$HOME is not an absolute path (${JSON.stringify(env.HOME)})`;
  throw new SealError('SEAL_BAD_PATH', `no default store: ${why} and the password database gives this user no home: give --store or $TREESEAL_STORE`);
}

/** The store's directory: `--store` or $TREESEAL_STORE (a relative one from the current directory, as every path argument is), else the cache's. */
function storeDirOf(option: string | undefined, env: NodeJS.ProcessEnv): string {
  const given = option ?? (env.TREESEAL_STORE || undefined);
  // Resolved, an empty one would be the current directory.
  if (option === '') throw new UsageError('--store needs a directory, not an empty string');
  if (given !== undefined) return isAbsolute(given) ? given : resolve(given);
  return join(xdgCacheHome(env) ?? join(homeOf(env), '.cache'), 'treeseal');
}

function checkCommandTakes(spec: CommandSpec, values: Record<string, OptionValue>): void {
  for (const name of Object.keys(values)) {
    if (!(name in COMMON_OPTIONS) && !(name in (spec.options ?? {}))) throw new UsageError(`${spec.name} does not take --${name}`, spec.name);
  }
}

/** The commands that put a snapshot into a store make it when it is missing; for every other command a missing store is an error, never created. */
const MAKES_STORE = new Set(['capture', 'pull']);

/** A single-valued option given twice is a usage error, not last-wins. */
function checkRepeats(tokens: readonly { kind: string; name?: string }[], options: Record<string, OptionSpec>): void {
  const seen = new Set<string>();
  for (const t of tokens) {
    if (t.kind !== 'option' || t.name === undefined || options[t.name]?.multiple === true) continue;
    if (seen.has(t.name)) throw new UsageError(`--${t.name} is given more than once`);
    seen.add(t.name);
  }
}

/**
 * The store of a command that puts no snapshot in must be one already: a missing path, or a directory without the
 * store's `snapshots/` (an empty one, which opening would make a store), is `no store`, and
 * nothing is written. Anything else (a file, a directory holding other things) is left to
 * the store's open, which names what is wrong.
 */
function checkStoreExists(storeDir: string, from: string): void {
  const noStore = (err: unknown): SealError => new SealError('SEAL_UNAVAILABLE', `no store at ${escapePath(storeDir)} (${from})`, { cause: err });
  try {
    lstatSync(storeDir);
  } catch (err) {
    throw noStore(err);
  }
  try {
    lstatSync(join(storeDir, 'snapshots'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw noStore(err);
  }
}

/** Where the store's path came from, for a refusal of it. */
function storeSource(option: unknown, env: NodeJS.ProcessEnv): string {
  if (typeof option === 'string') return 'given by --store';
  if (env.TREESEAL_STORE) return 'from $TREESEAL_STORE';
  if (xdgCacheHome(env) !== undefined) return 'from $XDG_CACHE_HOME';
  if (absoluteHome(env) !== undefined) return 'from $HOME';
  return `from the password database's home: $HOME is ${env.HOME === undefined ? 'not set' : 'not an absolute path'}`;
}

/**
 * A store path that passes a symlink is refused (a link can be swapped to lead elsewhere):
 * the refusal then says where the path came from and the same place without links, to give
 * instead (a home under `/home -> /var/home`, a cache directory linked to another disk).
 */
function withRealPath(err: unknown, storeDir: string, from: string): unknown {
  // The library names the path as it checked it: one trailing slash dropped.
  const checked = storeDir.length > 1 && storeDir.endsWith('/') ? storeDir.slice(0, -1) : storeDir;
  if (!(err instanceof SealError) || err.code !== 'SEAL_SYMLINK' || err.path !== checked) return err;
  const below: string[] = [];
  for (let existing = checked; ; existing = dirname(existing)) {
    try {
      const real = join(realpathSync(existing), ...[...below].reverse());
      // Nothing better to name: the same path back, or what a last link leads to is no directory.
      if (real === checked || (below.length === 0 && !statSync(real).isDirectory())) return err;
      return new SealError('SEAL_SYMLINK', `${err.message} (${from}); the same place without links is ${escapePath(real)}: give that as --store or $TREESEAL_STORE`, { path: storeDir, cause: err });
    } catch {
      // A name that is itself a link (dangling, or a loop) cannot be climbed past: its place is unknown.
      if (dirname(existing) === existing || lstatSync(existing, { throwIfNoEntry: false })?.isSymbolicLink() === true) return err;
      below.push(basename(existing));
    }
  }
}

/** The failure of process.cwd() (a relative path resolved from a removed directory): Node's bare `ENOENT … uv_cwd`. */
function isCwdGone(err: unknown): boolean {
  return (err as { syscall?: unknown } | null)?.syscall === 'uv_cwd';
}

function isParseError(err: unknown): boolean {
  return err instanceof TypeError && String((err as { code?: string }).code).startsWith('ERR_PARSE_ARGS');
}

/** A wrong argument or option value the library refused (a malformed digest, a bad count): a usage error. */
function isArgumentError(err: unknown): boolean {
  const code = String((err as { code?: string } | undefined)?.code);
  return (err instanceof TypeError || err instanceof RangeError) && /^ERR_(INVALID_ARG_(TYPE|VALUE)|OUT_OF_RANGE)$/.test(code);
}

/** The obstacles a refused capture found, one a line with the way out of each (none: ''). */
function obstacleLines(err: SealError): string {
  return (err.details ?? []).map((d) => `\n  ${escapePath(d.path)}: ${d.hint}`).join('');
}

/** A message as it is, unless it holds a control character (from a word the user gave): then escaped whole, as a path is. */
function shownControls(message: string): string {
  return hasControl(message) ? escapePath(message) : message;
}

/**
 * A parse error's message: Node's own lines for an option value that starts with a dash
 * (`--retries -1`: three lines that name only the option, no word of the user's), each
 * line as shownControls shows it (they came out joined by `\x0a`); any other message whole.
 */
function shownParseError(message: string, code: unknown): string {
  if (code !== 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') return shownControls(message);
  return message.split('\n').map(shownControls).join('\n');
}

/** Reports a failure on stderr; returns the exit status. */
function report(err: unknown, spec: CommandSpec | undefined, io: Io): number {
  if (err instanceof UsageError || isParseError(err) || isArgumentError(err)) {
    const which = err instanceof UsageError && err.command !== undefined ? findCommand(err.command) : spec;
    const takes = Object.keys({ ...COMMON_OPTIONS, ...(which?.options ?? {}) });
    const message = isParseError(err) && (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? unknownOption((err as Error).message, which, takes) : (err as Error).message;
    // The words quoted are the user's: a control character in one is shown escaped, never sent to the terminal.
    const shown = isParseError(err) ? shownParseError(message, (err as { code?: unknown }).code) : shownControls(message);
    io.warn(`treeseal: ${shown}\n${which === undefined ? mainHelp(COMMANDS) : commandHelp(which)}`);
    return 2;
  }
  if (isCwdGone(err)) err = new SealError('SEAL_UNAVAILABLE', 'the working directory no longer exists (it was removed after the shell entered it): cd to one that does, or give absolute paths', { cause: err });
  if (err instanceof SealError) io.warn(`treeseal: ${err.code}: ${err.message}${obstacleLines(err)}`);
  else io.warn(`treeseal: ${shownControls(err instanceof Error ? err.message : String(err))}`);
  return 1;
}

/**
 * Runs the treeseal command with argv (without `node cli.js`); returns the exit status.
 * `raw`: the same arguments as bytes, where known (an argument that is not UTF-8 is refused).
 */
export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env, io: Io = new Io(), raw?: readonly Buffer[]): Promise<number> {
  let spec: CommandSpec | undefined;
  let store: SnapshotStore | undefined;
  // The store this command made (capture and pull make a missing one), once the library has opened it.
  let made: MadeStore | undefined;
  let failed = false;
  try {
    // The command, as far as the words say before they are parsed: an option the parser
    // refuses is then said with that command's usage, not the top-level one (and a word
    // that is not UTF-8 fails with that command's status for its own failures).
    const options = allOptions();
    spec = commandWord(argv, options);
    checkArgumentBytes(raw);
    const { values, positionals, tokens } = parseArgs({ args: argv, options, allowPositionals: true, strict: true, tokens: true });
    checkRepeats(tokens, options);
    if (values.version === true) {
      io.out(`treeseal ${version()}\n`);
      return 0;
    }
    const [first, ...args] = positionals;
    if (first === undefined) {
      if (values.help !== true) throw new UsageError('a command is required');
      io.out(`${mainHelp(COMMANDS)}\n`);
      return 0;
    }
    spec = findCommand(first);
    if (spec === undefined) throw new UsageError(unknownCommand(first, COMMANDS));
    if (values.help === true) {
      io.out(`${commandHelp(spec)}\n`);
      return 0;
    }
    checkCommandTakes(spec, values);
    io.json = values.json === true;
    // The environment the store's path may come from, as bytes: one not UTF-8 is refused, never decoded lossily.
    if (typeof values.store !== 'string' && env === process.env) checkEnvironmentBytes([env.TREESEAL_STORE ? 'TREESEAL_STORE' : xdgCacheHome(env) !== undefined ? 'XDG_CACHE_HOME' : 'HOME']);
    const storeDir = storeDirOf(typeof values.store === 'string' ? values.store : undefined, env);
    const ctx: Context = {
      command: spec.name,
      args,
      io,
      storeDir,
      options: values,
      store: async () => {
        if (store !== undefined) return store;
        if (!MAKES_STORE.has(spec!.name)) checkStoreExists(storeDir, storeSource(values.store, env));
        const top = MAKES_STORE.has(spec!.name) ? firstMissing(storeDir) : undefined;
        // Every command but push, pull and run runs the library's sync calls: a command has no event
        // loop to keep free, so a worker thread would only add its start-up to the run.
        try {
          store = SnapshotStore.openSync(storeDir);
        } catch (err) {
          throw withRealPath(err, storeDir, storeSource(values.store, env));
        }
        // Made by this open (none of it was there), and opened: what a failure of the command takes away again.
        if (top !== undefined) made = madeStore(storeDir, top);
        return store;
      },
    };
    const retries = countOption(ctx, 'retries', 'a count') ?? DEFAULT_RETRIES;
    const run = spec.run;
    return (await withRetries(async () => run(ctx), retries, io)) ?? 0;
  } catch (err) {
    failed = true;
    const status = report(err, spec, io);
    return spec?.ownFailureStatus ?? status;
  } finally {
    await store?.close().catch(() => {});
    // A capture or pull that failed leaves no empty store behind where there was none (a bad source path, a registry
    // that refused): one that holds anything (a download to resume) stays.
    if (failed && made !== undefined) dropEmptyStore(made);
  }
}
