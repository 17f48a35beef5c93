// document-check.ts: what a snapshot document must be, whoever wrote it: checked before every publish, on every load from the store and on every pull.
import { createHash } from 'node:crypto';

import { checkClonePlaces } from '../base/clone-names.js';
import { SealError } from '../base/errors.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { checkRelative, compareUtf8, escapePath, isWellFormed, utf8Bytes } from '../base/paths.js';
import { checkCopyLinks, checkMountLinks, isRelativeTarget } from '../capture/links.js';
import { parseMtime } from '../base/times.js';
import { Excludes, MAX_PATTERNS, patternProblem } from '../capture/exclude.js';
import { userPath } from '../capture/obstacles.js';
import type { StoredSnapshot } from './document.js';
import { EntryReader } from './manifest-tree.js';

/** The kernel's NAME_MAX: no directory entry can have a longer name. */
const MAX_NAME_BYTES = 255;

/** 64 lowercase hex digits (a loop: a regular expression costs a microsecond a call). */
function isSha256Hex(s: string): boolean {
  if (s.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

function corrupt(why: string, path?: string): SealError {
  const where = path === undefined ? '' : `: ${escapePath(path)}`;
  return new SealError('SEAL_CORRUPT', `snapshot manifest is corrupt: ${why}${where}`, path === undefined ? {} : { path });
}

/** A SealError a declaration check threw, as the corruption of a document that holds it. */
function asCorrupt<T>(what: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof SealError) throw corrupt(`${what}: ${err.message}`);
    throw err;
  }
}

function declared(raw: string, label: string): string[] {
  return asCorrupt(label, () => checkRelative(raw, { label, name: label, maxPathBytes: Number.MAX_SAFE_INTEGER }));
}

function checkSource(source: string): void {
  const parts = source.split('/');
  const canonical = source === '/' || (parts[0] === '' && parts.slice(1).every((p) => p !== '' && p !== '.' && p !== '..'));
  if (!canonical || source.includes('\0') || !isWellFormed(source)) throw corrupt('source is not a canonical absolute path', source);
}

/** A relative path of plain names (no empty, `.` or `..` component, no NUL), each at most NAME_MAX bytes, well-formed UTF-16. */
function checkPathShape(path: string): void {
  if (path.includes('\0') || !isWellFormed(path)) throw corrupt('bad path', path);
  for (let start = 0; ; ) {
    const end = path.indexOf('/', start);
    const stop = end < 0 ? path.length : end;
    const n = stop - start;
    if (n === 0 || (n === 1 && path[start] === '.') || (n === 2 && path[start] === '.' && path[start + 1] === '.')) throw corrupt('bad path', path);
    // A name of at most 85 UTF-16 units is at most 255 UTF-8 bytes: only longer ones are measured.
    if (n > MAX_NAME_BYTES / 3 && utf8Bytes(path.slice(start, stop)) > MAX_NAME_BYTES) throw corrupt(`a path component is longer than ${MAX_NAME_BYTES} bytes`, path);
    if (end < 0) return;
    start = end + 1;
  }
}

/**
 * A recorded mtime (keepTimes) is kept for every entry at or inside a copy root or for none
 * (`timed` says which, from the first), never for a copy root's implicit parent or in a
 * mount, and is mtimeText of an int64 of nanoseconds.
 */
function checkMtime(e: ManifestEntry, timed: boolean | undefined): void {
  if (e.mtime_ns === undefined) {
    if (timed === true) throw corrupt('times kept for some entries of the copy roots but not this one', e.path);
    return;
  }
  if (timed !== true) throw corrupt(timed === false ? 'times kept for this entry but not for others of the copy roots' : 'mtime_ns on an entry that keeps no time', e.path);
  if (parseMtime(e.mtime_ns) === undefined) throw corrupt('bad mtime_ns', e.path);
}

/** The sha256 of no bytes: an empty file's. */
const EMPTY_SHA256 = createHash('sha256').digest('hex');

/** Checks one entry's own fields; returns the bytes it adds to total_bytes. */
function checkFields(e: ManifestEntry, inMount: boolean): number {
  if (!Number.isSafeInteger(e.size) || e.size < 0 || !Number.isSafeInteger(e.mode) || e.mode < 0 || e.mode > 0o7777) throw corrupt('bad size or mode', e.path);
  if (e.kind === 'directory') {
    if (e.size !== 0 || e.mode !== 0 || e.sha256 !== '' || e.link_target !== '') throw corrupt('bad directory entry', e.path);
    return 0;
  }
  if (e.kind === 'file') {
    if (!isSha256Hex(e.sha256) || e.link_target !== '') throw corrupt('bad file entry', e.path);
    // An empty file is made, never read or hashed (capture, pull and materialize alike): its hash can only be the empty input's.
    if (e.size === 0 && e.sha256 !== EMPTY_SHA256) throw corrupt('empty file whose sha256 is not that of no bytes', e.path);
    // Copy roots record mode 0, or (keepExecutable) the bits of an executable file.
    if (!inMount && e.mode !== 0 && (e.mode & 0o111) === 0) throw corrupt('bad file mode in a copy root', e.path);
    return e.size;
  }
  const t = e.link_target;
  if (!isRelativeTarget(t) || t.includes('\0') || !isWellFormed(t)) throw corrupt('bad symlink', e.path);
  const bytes = utf8Bytes(t);
  if (e.mode !== 0 || e.size !== bytes || e.sha256 !== createHash('sha256').update(t, 'utf8').digest('hex')) throw corrupt('bad symlink entry', e.path);
  return bytes;
}

/**
 * One area's entries: sorted, unique, well-formed paths whose parents are directories
 * listed before them, each one's fields consistent; `placed` says where a path may be,
 * given its parent's path ('' for none). Returns the bytes the area holds.
 */
function checkArea(entries: Entries, inMount: boolean, placed: (e: ManifestEntry, parent: string) => void): number {
  const dirs = new Set<string>();
  let bytes = 0;
  let previous: string | undefined;
  for (const e of entries) {
    if (e.kind !== 'directory' && e.kind !== 'file' && e.kind !== 'symlink') throw corrupt('unknown entry kind', e.path);
    checkPathShape(e.path);
    if (previous !== undefined && compareUtf8(previous, e.path) >= 0) throw corrupt('entries out of order or repeated', e.path);
    previous = e.path;
    const cut = e.path.lastIndexOf('/');
    const parent = cut < 0 ? '' : e.path.slice(0, cut);
    if (cut >= 0 && !dirs.has(parent)) throw corrupt('parent is not a directory entry', e.path);
    placed(e, parent);
    bytes += checkFields(e, inMount);
    if (e.kind === 'directory') dirs.add(e.path);
  }
  return bytes;
}

/** The copy area: every entry a declared root, a directory above one, or inside one; every root present. */
function checkCopyArea(entries: Entries, roots: readonly string[][]): number {
  const rootPaths = new Set(roots.map((r) => r.join('/')));
  const above = new Set(roots.flatMap((r) => r.slice(0, -1).map((_p, i) => r.slice(0, i + 1).join('/'))));
  // Directories that are a root or inside one: an entry belongs when its parent is one of them.
  const inside = new Set<string>();
  const found = new Set<string>();
  let timed: boolean | undefined;
  const bytes = checkArea(entries, false, (e, parent) => {
    if (rootPaths.has(e.path)) found.add(e.path);
    else if (above.has(e.path)) {
      if (e.kind !== 'directory') throw corrupt('a copy root has a parent that is not a directory', e.path);
      checkMtime(e, undefined);
      return;
    } else if (!inside.has(parent)) throw corrupt('entry outside every copy root', e.path);
    timed ??= e.mtime_ns !== undefined;
    checkMtime(e, timed);
    if (e.kind === 'directory') inside.add(e.path);
  });
  for (const r of rootPaths) if (!found.has(r)) throw corrupt('a copy root has no entry', r);
  return bytes;
}

function checkMount(m: StoredSnapshot['mounts'][number], targetParts: string[]): number {
  let first: ManifestEntry | undefined;
  const bytes = checkArea(m.entries, true, (e) => {
    first ??= e;
    checkMtime(e, undefined);
    if (e.path !== 'payload' && !e.path.startsWith('payload/')) throw corrupt('mount entry outside its payload', e.path);
  });
  if (first?.path !== 'payload') throw corrupt('mount without payload', m.target);
  if (first.kind !== m.kind) throw corrupt('mount kind differs from its payload', m.target);
  if (m.totalBytes !== bytes) throw corrupt(`mount total_bytes ${m.totalBytes} but its entries hold ${bytes}`, m.target);
  asCorrupt('mount symlink', () => checkMountLinks({ targetParts, entries: m.entries }));
  return bytes;
}

/**
 * The exclude patterns, as capture takes them, and what they leave out absent: no
 * declared root and no entry (a mount's empty directories, which ensureDirs may add
 * after the walk, excepted).
 */
function checkExcluded(d: Pick<StoredSnapshot, 'source' | 'declarations' | 'exclude' | 'entries' | 'mounts'>, roots: readonly string[][], sources: readonly string[][]): void {
  if (d.exclude === undefined) return;
  if (d.exclude.length === 0) throw corrupt('exclude is an empty list');
  // More than a capture takes: a crafted document's million patterns would fill the heap as they compile.
  if (d.exclude.length > MAX_PATTERNS) throw corrupt(`exclude holds ${d.exclude.length} patterns, more than a capture takes (${MAX_PATTERNS})`);
  for (const p of d.exclude) {
    const why = patternProblem(p, d.source);
    if (why !== undefined) throw corrupt(`exclude pattern ${why}`, p);
  }
  const excludes = Excludes.of(d.exclude)!;
  // Each root by the kind it was captured as (a copy root's entry, a mount's payload), as capture checks it; whatever its kind where none says.
  const reader = new EntryReader(d.entries);
  const rootDir = (path: string): boolean | undefined => {
    const i = reader.indexOf(path);
    return i < 0 ? undefined : reader.kind(i) === 'directory';
  };
  for (const parts of roots) {
    if (excludes.patternFor(parts.join('/'), rootDir(parts.join('/'))) !== undefined) throw corrupt('a declared root is excluded', parts.join('/'));
  }
  sources.forEach((parts, i) => {
    if (excludes.patternFor(parts.join('/'), d.mounts[i]!.kind === 'directory') !== undefined) throw corrupt('a declared root is excluded', parts.join('/'));
  });
  const check = (path: string, kind: ManifestEntry['kind'], shown: string): void => {
    if (excludes.excludes(path, kind === 'directory')) throw corrupt('an excluded path is in the snapshot', shown);
  };
  for (const e of d.entries) check(e.path, e.kind, e.path);
  d.mounts.forEach((m, i) => {
    const parents = new Set<string>();
    for (const e of m.entries) parents.add(e.path.slice(0, Math.max(0, e.path.lastIndexOf('/'))));
    const source = sources[i]!.join('/');
    for (const e of m.entries) if (e.kind !== 'directory' || parents.has(e.path)) check(userPath(e.path, source), e.kind, e.path);
  });
}

/**
 * Throws SEAL_CORRUPT unless the snapshot is one capture could have made: canonical
 * source, declared roots and mount targets that capture accepts (relative, no `..`,
 * no overlap, none on materialize's own names), every entry where a declaration puts
 * it and well formed, kept symlinks (in mounts, and in copy roots captured with
 * links: 'contained') relative and contained as capture contains them, exclude
 * patterns as capture takes them that leave out nothing the snapshot holds, and byte
 * totals that add up. The digests are proven separately.
 */
export function checkDocument(d: Pick<StoredSnapshot, 'source' | 'declarations' | 'exclude' | 'entries' | 'mounts' | 'totalBytes'>): void {
  checkSource(d.source);
  const roots = d.declarations.map((raw) => declared(raw, 'copy root'));
  const sources: string[][] = [];
  const targets = d.mounts.map((m) => {
    sources.push(declared(m.source, 'mount source'));
    return declared(m.target, 'mount target');
  });
  asCorrupt('declarations', () => checkClonePlaces(roots, targets));
  checkExcluded(d, roots, sources);
  let bytes = checkCopyArea(d.entries, roots);
  d.mounts.forEach((m, i) => (bytes += checkMount(m, targets[i]!)));
  const mounts = d.mounts.map((m, i) => ({ targetParts: targets[i]!, entries: m.entries }));
  asCorrupt('copy root symlink', () => checkCopyLinks({ entries: d.entries, roots, mounts }));
  if (bytes !== d.totalBytes) throw corrupt(`total_bytes ${d.totalBytes} but the entries hold ${bytes}`);
}
