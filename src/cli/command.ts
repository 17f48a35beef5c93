// command.ts: what a subcommand is (name, help, options, handler), the context it runs with, and shared argument helpers.
import type { SnapshotStore } from '../index.js';
import type { Io } from './io.js';

/** A usage error: exit status 2, the message and the command's help on stderr. */
export class UsageError extends Error {
  constructor(
    message: string,
    /** The command whose help to show (default: the one being run; '' for the main help). */
    readonly command?: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

/** One option as node:util parseArgs takes it. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
  short?: string;
}

export type OptionValue = string | boolean | (string | boolean)[] | undefined;

export interface Context {
  readonly command: string;
  readonly args: string[];
  readonly io: Io;
  /** The parsed options (common ones and this command's own), by long name. */
  readonly options: Readonly<Record<string, OptionValue>>;
  /** The store (`--store`, `$TREESEAL_STORE`, …), opened (sync) on first use and closed after the command. */
  store(): Promise<SnapshotStore>;
  /** The store's directory, as the command names it (not opened, maybe not made yet). */
  readonly storeDir: string;
}

export interface CommandSpec {
  name: string;
  /** `capture <source>`: the command's line in `treeseal help`. */
  synopsis: string;
  /** One line: what it does. */
  summary: string;
  /** The full text of `treeseal help <name>`, starting `usage: treeseal <name>`. */
  help: string;
  /** Options this command takes besides the common ones. */
  options?: Record<string, OptionSpec>;
  /**
   * The exit status of every failure of the command's own, a usage error included, where its
   * other statuses are another program's (run: 125, as env(1), timeout(1) and `docker run`
   * say theirs). Unset: 1, and 2 for a usage error.
   */
  ownFailureStatus?: number;
  /** Runs the command; returns the exit status (default 0). */
  run(ctx: Context): Promise<number | void> | number | void;
}

/** Throws a usage error unless there are exactly `count` arguments. */
export function need(ctx: Context, count: number, names: string): void {
  if (ctx.args.length !== count) throw new UsageError(`${ctx.command} takes ${names}`, ctx.command);
}

export function stringOption(ctx: Context, name: string): string | undefined {
  const v = ctx.options[name];
  return typeof v === 'string' ? v : undefined;
}

export function listOption(ctx: Context, name: string): string[] {
  const v = ctx.options[name];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

export function flag(ctx: Context, name: string): boolean {
  return ctx.options[name] === true;
}

/** A non-negative integer option (undefined when absent); anything else is a usage error. */
export function countOption(ctx: Context, name: string, what: string): number | undefined {
  const raw = stringOption(ctx, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(n)) throw new UsageError(`--${name} takes ${what}, not ${JSON.stringify(raw)}`, ctx.command);
  return n;
}

/** One of `choices` (or `fallback` when absent); anything else is a usage error. */
export function choiceOption<T extends string>(ctx: Context, name: string, choices: readonly T[], fallback: T): T {
  const raw = stringOption(ctx, name) ?? fallback;
  if (!(choices as readonly string[]).includes(raw)) {
    const list = `${choices.slice(0, -1).join(', ')} or ${choices[choices.length - 1]!}`;
    throw new UsageError(`--${name} must be ${list}, not ${JSON.stringify(raw)}`, ctx.command);
  }
  return raw as T;
}

export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
