// errno.ts: recognising the Node-shaped system errors the addon throws.
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
