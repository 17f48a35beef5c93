// paths.ts: declaration checks for relative paths, overlap checks, byte order and escaping for messages.
import { checkString, invalidArgType } from './arg-errors.js';
import { SealError } from './errors.js';

export function utf8Bytes(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** True when the string has no lone surrogates, so it encodes to UTF-8 and back unchanged. */
export function isWellFormed(s: string): boolean {
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(s);
}

/**
 * Characters that reorder or break what a terminal shows (bidi controls, line and paragraph
 * separators) or show nothing at all (zero-width spaces and joiners, the byte-order mark,
 * the soft hyphen, variation selectors and the other default-ignorable code points):
 * escaped so a name cannot disguise itself, nor two names print alike.
 */
function isDisplayControl(cp: number): boolean {
  if (cp < 0xad) return false;
  return (
    cp === 0xad ||
    cp === 0x034f ||
    cp === 0x061c ||
    cp === 0x115f ||
    cp === 0x1160 ||
    cp === 0x17b4 ||
    cp === 0x17b5 ||
    (cp >= 0x180b && cp <= 0x180f) ||
    (cp >= 0x200b && cp <= 0x200f) ||
    (cp >= 0x2028 && cp <= 0x202e) ||
    (cp >= 0x2060 && cp <= 0x206f) ||
    cp === 0x3164 ||
    (cp >= 0xfe00 && cp <= 0xfe0f) ||
    cp === 0xfeff ||
    cp === 0xffa0 ||
    (cp >= 0xfff0 && cp <= 0xfff8) ||
    (cp >= 0x1d173 && cp <= 0x1d17a) ||
    (cp >= 0xe0000 && cp <= 0xe0fff)
  );
}

/** The length of the valid UTF-8 sequence at buf[i] (1 to 4), or 0 where the byte there starts none. */
function utf8Length(buf: Buffer, i: number): number {
  const b = buf[i]!;
  if (b < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf): boolean => i + k < buf.length && buf[i + k]! >= lo && buf[i + k]! <= hi;
  if (b >= 0xc2 && b <= 0xdf) return cont(1) ? 2 : 0;
  if (b >= 0xe0 && b <= 0xef) return cont(1, b === 0xe0 ? 0xa0 : 0x80, b === 0xed ? 0x9f : 0xbf) && cont(2) ? 3 : 0;
  if (b >= 0xf0 && b <= 0xf4) return cont(1, b === 0xf0 ? 0x90 : 0x80, b === 0xf4 ? 0x8f : 0xbf) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

/**
 * A directory entry's name as a string, losing nothing: its UTF-8 decoded, and each byte
 * that is not part of valid UTF-8 as the lone surrogate U+DC80 + (byte - 0x80) (Python's
 * surrogateescape, PEP 383), which no decoded name holds: two names never give one
 * string (`escapePath` shows such a byte as `\xNN`, a backslash as `\\`).
 */
export function nameText(name: string | Buffer): string {
  if (typeof name === 'string') return name;
  let out = '';
  for (let i = 0; i < name.length; ) {
    const n = utf8Length(name, i);
    if (n === 0) {
      out += String.fromCharCode(0xdc00 + name[i]!);
      i++;
    } else {
      out += name.toString('utf8', i, i + n);
      i += n;
    }
  }
  return out;
}

/**
 * Escapes a path for an error message: control characters, DEL, backslash, invalid bytes
 * (a Buffer's, or a byte nameText kept as U+DC80–U+DCFF: `\xNN`) and the characters that
 * reorder or break a line on a terminal (U+202E and the other bidi controls, U+2028,
 * U+2029) become visible escapes, so a hostile name cannot forge output.
 */
export function escapePath(p: string | Buffer): string {
  if (typeof p !== 'string' && !Buffer.isBuffer(p)) throw invalidArgType('path', ['string', 'Buffer'], p);
  const s = typeof p === 'string' ? p : p.toString('latin1');
  let out = '';
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0;
    if (ch === '\\') out += '\\\\';
    else if (cp < 0x20 || cp === 0x7f || (cp >= 0x80 && cp < 0xa0)) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (cp >= 0xdc80 && cp <= 0xdcff) out += `\\x${(cp - 0xdc00).toString(16)}`;
    else if ((cp >= 0xd800 && cp <= 0xdfff) || isDisplayControl(cp)) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else if (typeof p !== 'string' && cp >= 0x80) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out;
}

export interface RelativeCheck {
  /** The words a SEAL_BAD_PATH message starts with (`copy root`). */
  label: string;
  /** The argument's name in a TypeError (`options.copy[0]`). */
  name: string;
  maxPathBytes: number;
}

/**
 * Checks a declared relative path (copy root, mount source or target, stage target)
 * and returns its components: non-empty, relative, no `..`, no NUL, valid UTF-8,
 * within maxPathBytes. `.` and empty components are dropped as POSIX paths do.
 * Not a string is a TypeError (ERR_INVALID_ARG_TYPE), as in node:fs.
 */
export function checkRelative(raw: unknown, check: RelativeCheck): string[] {
  const { label, maxPathBytes } = check;
  if (typeof raw !== 'string') throw invalidArgType(check.name, 'string', raw);
  if (raw === '') {
    throw new SealError('SEAL_BAD_PATH', `${label} must be a non-empty relative path`);
  }
  if (!isWellFormed(raw)) throw new SealError('SEAL_BAD_PATH', `${label} is not valid UTF-8: ${escapePath(raw)}`, { path: raw });
  if (raw.includes('\0')) throw new SealError('SEAL_BAD_PATH', `${label} contains a NUL byte: ${escapePath(raw)}`, { path: raw });
  if (raw.startsWith('/')) throw new SealError('SEAL_BAD_PATH', `${label} must be relative: ${escapePath(raw)}`, { path: raw });
  const parts = raw.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.length === 0) throw new SealError('SEAL_BAD_PATH', `${label} must name something below its root: ${escapePath(raw)}`, { path: raw });
  if (parts.includes('..')) throw new SealError('SEAL_BAD_PATH', `${label} must not contain '..': ${escapePath(raw)}`, { path: raw });
  if (utf8Bytes(parts.join('/')) > maxPathBytes) {
    throw new SealError('SEAL_LIMIT', `${label} exceeds the path byte limit (${maxPathBytes} bytes): ${escapePath(raw)}`, { path: raw });
  }
  return parts;
}

/**
 * Checks a sandbox workspace (where a clone is bound): an absolute, canonical path
 * (no empty, `.` or `..` component, no NUL; one trailing slash dropped); default
 * `/workspace`. Not a string is a TypeError; a bad value is SEAL_BAD_PATH.
 */
export function checkWorkspace(raw: unknown, name: string): string {
  return checkAbsolutePath(raw === undefined ? '/workspace' : raw, name, 'workspace');
}

/**
 * An absolute, canonical path as an option names it (no empty, `.` or `..` component, no
 * NUL, valid UTF-8; one trailing slash dropped), not opened. Not a string is a TypeError
 * naming `name`; a bad value is SEAL_BAD_PATH naming `label`.
 */
export function checkAbsolutePath(raw: unknown, name: string, label: string): string {
  // One trailing slash names the same directory: dropped (`/` stays itself), as for every directory path the API takes.
  const path = checkString(name, raw).replace(/(?<=.)\/$/, '');
  if (!path.startsWith('/')) throw new SealError('SEAL_BAD_PATH', `${label} must be an absolute path: ${escapePath(path)}`);
  if (path.includes('\0')) throw new SealError('SEAL_BAD_PATH', `${label} contains a NUL byte: ${escapePath(path)}`);
  if (!isWellFormed(path)) throw new SealError('SEAL_BAD_PATH', `${label} is not valid UTF-8: ${escapePath(path)}`);
  if (path !== '/' && path.split('/').slice(1).some((p) => p === '' || p === '.' || p === '..')) {
    throw new SealError('SEAL_BAD_PATH', `${label} must be a canonical absolute path: ${escapePath(path)}`);
  }
  return path;
}

/** True when a and b (component lists) are equal or one lies inside the other. */
export function overlaps(a: readonly string[], b: readonly string[]): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Whether `path` is `root` or lies below it (both absolute, or both relative to the same place; `/` holds every absolute path). */
export function isBelow(path: string, root: string): boolean {
  if (path === root) return true;
  if (root === '/') return path.startsWith('/');
  return path.length > root.length && path.startsWith(root) && path.charCodeAt(root.length) === 0x2f;
}

/** Refuses any pair of overlapping paths with SEAL_OVERLAP. */
export function checkNoOverlap(paths: readonly (readonly string[])[], label: string): void {
  for (let i = 0; i < paths.length; i++) {
    for (let j = i + 1; j < paths.length; j++) {
      const a = paths[i]!;
      const b = paths[j]!;
      if (overlaps(a, b)) {
        throw new SealError('SEAL_OVERLAP', `${label} overlap: ${escapePath(a.join('/'))} and ${escapePath(b.join('/'))}`, { path: a.join('/') });
      }
    }
  }
}

/**
 * Orders strings by code point (= by their UTF-8 bytes), as Python sorts str.
 * UTF-16 order differs only where a surrogate meets U+E000..U+FFFF: remap those.
 */
export function compareUtf8(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/**
 * Lexical normalisation of POSIX path components, as posixpath.normpath: `..` above
 * an absolute root stays at the root; above a relative start it is kept.
 */
export function normalize(parts: readonly string[], absolute: boolean): string[] {
  const out: string[] = [];
  for (const part of parts) {
    if (part === '' || part === '.') continue;
    if (part !== '..') out.push(part);
    else if (out.length > 0 && out[out.length - 1] !== '..') out.pop();
    else if (!absolute) out.push('..');
  }
  return out;
}
