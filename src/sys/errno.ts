// errno.ts: recognising the Node-shaped system errors the addon throws, and making one where JavaScript reports a failure the addon returned.
import { constants } from 'node:os';
import { getSystemErrorMap, getSystemErrorName } from 'node:util';

export interface SystemError extends Error {
  errno: number;
  code: string;
  syscall: string;
  path?: string;
  dest?: string;
}

export function isSystemError(err: unknown): err is SystemError {
  return (
    err instanceof Error &&
    typeof (err as Partial<SystemError>).code === 'string' &&
    typeof (err as Partial<SystemError>).errno === 'number' &&
    typeof (err as Partial<SystemError>).syscall === 'string'
  );
}

export function hasCode(err: unknown, ...codes: string[]): boolean {
  return isSystemError(err) && codes.includes(err.code);
}

/**
 * EIO as a Node-shaped error's errno (negative, as libuv's UV_EIO and the addon's): what
 * is reported for a failure that carried no errno of its own.
 */
export const UV_EIO = -constants.errno.EIO;

/** A Node-shaped system error for errno (negative, as libuv's), its message naming `path` as the addon's do. */
export function systemError(errno: number, syscall: string, path?: string): SystemError {
  const code = getSystemErrorName(errno);
  const text = getSystemErrorMap().get(errno)?.[1] ?? 'unknown error';
  if (path === undefined) return Object.assign(new Error(`${code}: ${text}, ${syscall}`), { errno, code, syscall });
  return Object.assign(new Error(`${code}: ${text}, ${syscall} '${path}'`), { errno, code, syscall, path });
}
