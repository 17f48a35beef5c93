// arg-errors.ts: Node-shaped errors for wrong option types and values (ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE, ERR_OUT_OF_RANGE).
import { inspect } from 'node:util';

export type ArgErrorCode = 'ERR_INVALID_ARG_TYPE' | 'ERR_INVALID_ARG_VALUE' | 'ERR_OUT_OF_RANGE';

/** A TypeError or RangeError that carries Node's `code`, shown as Node shows it (`TypeError [CODE]: …`). */
function withCode<E extends Error>(err: E, code: ArgErrorCode): E & { code: ArgErrorCode } {
  Object.defineProperty(err, 'code', { value: code, enumerable: true, writable: true, configurable: true });
  return err as E & { code: ArgErrorCode };
}

function kind(name: string): string {
  return /[.[]/.test(name) ? 'property' : 'argument';
}

/** How Node prints what it received: `type number (1)`, `an instance of Array`, `null`. */
function received(value: unknown): string {
  if (value === null || value === undefined) return ` Received ${String(value)}`;
  if (typeof value === 'function') return ` Received function ${value.name}`;
  if (typeof value === 'object') {
    const ctor = (value as { constructor?: { name?: string } }).constructor?.name;
    return ctor ? ` Received an instance of ${ctor}` : ` Received ${inspect(value, { depth: -1 })}`;
  }
  let shown = inspect(value, { colors: false });
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`;
  return ` Received type ${typeof value} (${shown})`;
}

function plainReceived(value: unknown): string {
  let shown = inspect(value);
  if (shown.length > 128) shown = `${shown.slice(0, 128)}...`;
  return shown;
}

/**
 * ERR_INVALID_ARG_TYPE. `expected` lists type names: lower-case ones are types
 * (`string`, `object`), capitalised ones classes (`Array`, `Uint8Array`).
 */
export function invalidArgType(name: string, expected: string | readonly string[], actual: unknown): TypeError & { code: ArgErrorCode } {
  const list = typeof expected === 'string' ? [expected] : [...expected];
  const types = list.filter((t) => t[0] === t[0]?.toLowerCase());
  const classes = list.filter((t) => t[0] !== t[0]?.toLowerCase());
  const parts: string[] = [];
  if (types.length > 0) parts.push(`${types.length > 1 ? 'one of type' : 'of type'} ${orList(types)}`);
  if (classes.length > 0) parts.push(`an instance of ${orList(classes)}`);
  const message = `The "${name}" ${kind(name)} must be ${parts.join(' or ')}.${received(actual)}`;
  return withCode(new TypeError(message), 'ERR_INVALID_ARG_TYPE');
}

/** ERR_INVALID_ARG_VALUE: `The property 'options.reflink' must be one of …. Received 'x'` (`argument` for a top-level name). */
export function invalidArgValue(name: string, value: unknown, reason = 'is invalid'): TypeError & { code: ArgErrorCode } {
  return withCode(new TypeError(`The ${kind(name)} '${name}' ${reason}. Received ${plainReceived(value)}`), 'ERR_INVALID_ARG_VALUE');
}

/** ERR_OUT_OF_RANGE: `The value of "name" is out of range. It must be >= 0. Received -1`. */
export function outOfRange(name: string, range: string, value: unknown): RangeError & { code: ArgErrorCode } {
  let shown = String(value);
  if (typeof value === 'number' && Number.isInteger(value) && Math.abs(value) > 2 ** 32) shown = separated(String(value));
  else if (typeof value !== 'number' && typeof value !== 'bigint') shown = plainReceived(value);
  return withCode(new RangeError(`The value of "${name}" is out of range. It must be ${range}. Received ${shown}`), 'ERR_OUT_OF_RANGE');
}

function orList(items: readonly string[]): string {
  if (items.length <= 1) return items.join('');
  if (items.length === 2) return `${items[0]} or ${items[1]}`;
  return `${items.slice(0, -1).join(', ')}, or ${items[items.length - 1]}`;
}

/** 1_000_000 as Node prints a large integer it received. */
function separated(digits: string): string {
  const sign = digits.startsWith('-') ? '-' : '';
  let s = sign === '' ? digits : digits.slice(1);
  let out = '';
  while (s.length > 3) {
    out = `_${s.slice(-3)}${out}`;
    s = s.slice(0, -3);
  }
  return `${sign}${s}${out}`;
}

/** An integer option within [min, max] (Node's validateInteger): TypeError when not a number, RangeError otherwise. */
export function checkInteger(name: string, value: unknown, min = 0, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number') throw invalidArgType(name, 'number', value);
  if (!Number.isInteger(value)) throw outOfRange(name, 'an integer', value);
  if (value < min || value > max) throw outOfRange(name, `>= ${min} && <= ${max}`, value);
  return value;
}

/** A string argument (a path's type, as node:fs checks it); its value is checked elsewhere. */
export function checkString(name: string, value: unknown): string {
  if (typeof value !== 'string') throw invalidArgType(name, 'string', value);
  return value;
}

/** An optional callback option (undefined is fine). */
export function checkFunction(name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'function') throw invalidArgType(name, 'function', value);
}

/** What an options object may hold: the call's name (for the message) and its keys. */
export interface KnownKeys {
  op: string;
  keys: readonly string[];
  /** More to say of an unknown key (where the option a caller meant lives instead), appended after a colon. */
  hint?: ((key: string) => string | undefined) | undefined;
}

/**
 * An options object (or undefined, which becomes `{}`). Given `known`, a key it does not
 * list is ERR_INVALID_ARG_VALUE naming it and the call's options: a misspelt option
 * (`copyy`, `createclone`) would otherwise be a call that silently does something else.
 */
export function checkOptions<T extends object>(name: string, value: T | undefined, known?: KnownKeys): T {
  if (value !== undefined && (value === null || typeof value !== 'object' || Array.isArray(value))) throw invalidArgType(name, 'object', value);
  if (known !== undefined) {
    for (const key of value === undefined ? [] : Object.keys(value)) {
      if (known.keys.includes(key)) continue;
      const hint = known.hint?.(key);
      throw invalidArgValue(`${name}.${key}`, (value as Record<string, unknown>)[key], `is not an option of ${known.op} (${known.keys.join(', ')})${hint === undefined ? '' : `: ${hint}`}`);
    }
    checkNotInherited(name, value, known.keys);
  }
  return value ?? ({} as T);
}

/**
 * An option Object.prototype supplies is ERR_INVALID_ARG_VALUE, for options left out too
 * (their defaults are plain objects): a polluted `Object.prototype.clean`, or `ephemeral`,
 * would turn a plain reset or open into one that removes what it was never asked to. One
 * an options object inherits from its own prototype (a class's getter, defaults under
 * `Object.create`) is the caller's, and taken; nothing on the way is read.
 */
function checkNotInherited(name: string, value: object | undefined, keys: readonly string[]): void {
  for (const key of keys) {
    if (!Object.hasOwn(Object.prototype, key)) continue;
    let own = false;
    for (let o: object | null = value ?? null; o !== null && o !== Object.prototype && !own; o = Object.getPrototypeOf(o) as object | null) own = Object.hasOwn(o, key);
    const polluted = (Object.prototype as unknown as Record<string, unknown>)[key];
    if (!own && polluted !== undefined) {
      throw invalidArgValue(`${name}.${key}`, polluted, 'is set on Object.prototype, not on the options object (is Object.prototype polluted?)');
    }
  }
}

/** The most items a list option holds (copy roots, mounts, staged files, a command's arguments): a longer one is refused before it is walked. */
export const MAX_LIST_ITEMS = 1 << 20;

/**
 * ERR_OUT_OF_RANGE for a list longer than max, checked by its length before any item is
 * read: an array whose length was set to 2^32 - 1 held the call for minutes, then failed
 * with V8's own TypeError.
 */
export function checkListLength(name: string, list: readonly unknown[], max = MAX_LIST_ITEMS): void {
  if (list.length > max) throw outOfRange(`${name}.length`, `<= ${max}`, list.length);
}

/** An optional AbortSignal (Node's validateAbortSignal): anything else, an object that only looks like one included, is ERR_INVALID_ARG_TYPE. */
export function checkSignal(name: string, value: unknown): AbortSignal | undefined {
  if (value !== undefined && !(value instanceof AbortSignal)) throw invalidArgType(name, 'AbortSignal', value);
  return value;
}

/** An optional boolean option. */
export function checkBoolean(name: string, value: unknown): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') throw invalidArgType(name, 'boolean', value);
  return value;
}

/** An optional option that must be one of `choices` (Node's validateOneOf): any other value is ERR_INVALID_ARG_VALUE. */
export function checkOneOf<T extends string>(name: string, value: unknown, choices: readonly T[]): T | undefined {
  if (value === undefined || (choices as readonly unknown[]).includes(value)) return value as T | undefined;
  throw invalidArgValue(name, value, `must be one of: ${choices.map((c) => `'${c}'`).join(', ')}`);
}
