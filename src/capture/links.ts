// links.ts: symlink containment, the one rule for every link a snapshot keeps (in mount payloads, and in copy roots captured with links: 'contained'): relative, and resolved as the kernel will in the clone's namespace.
import { SealError } from '../base/errors.js';
import { EntryTable } from '../base/entry-table.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { compareUtf8, escapePath } from '../base/paths.js';

/** What capture does with a symlink inside a copy root: refuse it (SEAL_SYMLINK), or keep it when it is contained. */
export const LINK_MODES = ['refuse', 'contained'] as const;
export type LinkMode = (typeof LINK_MODES)[number];

/** The kernel's MAXSYMLINKS: links followed while resolving one path. */
export const MAX_LINK_HOPS = 40;

/**
 * What a path of the clone's namespace (its components below the workspace, where the
 * clone is bound) holds, as the resolution of a link meets it. `end` of a directory:
 * a link may resolve to it (false: a directory the clone holds, the workspace itself
 * or one above a copy root or mount target, whose listing the snapshot does not capture).
 */
type Place =
  | { kind: 'file' }
  | { kind: 'symlink'; target: string }
  | { kind: 'directory'; end: boolean }
  /** Nothing, in a directory the snapshot captures: the link dangles. */
  | { kind: 'missing' }
  /** Nothing the snapshot captures. */
  | { kind: 'uncaptured' };

type Lookup = (parts: readonly string[]) => Place;

/** Why a link is refused ('leaves': a link that names a place in its payload reaches it through a way out of the payload). */
type Why = 'escapes' | 'dangling' | 'loops' | 'file' | 'uncaptured' | 'leaves';

const DIRECTORY: Place = { kind: 'directory', end: true };
const PASSAGE: Place = { kind: 'directory', end: false };
const MISSING: Place = { kind: 'missing' };
const UNCAPTURED: Place = { kind: 'uncaptured' };
const FILE: Place = { kind: 'file' };

/** How a refusal reads for a link in a copy root. */
const COPY_WORDS: Readonly<Record<Why, string>> = {
  escapes: 'escapes the workspace',
  dangling: 'is dangling',
  loops: `loops (more than ${MAX_LINK_HOPS} links to follow)`,
  file: 'goes through a file',
  uncaptured: 'points at something the snapshot does not capture',
  leaves: 'points at something the snapshot does not capture',
};

/** How a refusal reads for a link in a mount payload (the wording mount captures have always had). */
const MOUNT_WORDS: Readonly<Record<Why, string>> = {
  escapes: 'escapes the sandbox workspace',
  dangling: 'is dangling or escapes its snapshot',
  loops: 'is dangling or escapes its snapshot',
  file: 'is dangling or escapes its snapshot',
  uncaptured: 'is dangling or escapes its snapshot',
  leaves: 'is dangling or escapes its snapshot',
};

function refuse(path: string, target: string, what: string): SealError {
  return new SealError('SEAL_ESCAPE', `symlink ${what}: ${escapePath(path)} -> ${escapePath(target)}`, { path });
}

/** A target a snapshot may keep at all: relative and not empty (where it leads is the rest of the rule). */
export function isRelativeTarget(target: string): boolean {
  return target !== '' && !target.startsWith('/');
}

/** SEAL_ESCAPE unless the link at `path` (its manifest path) is relative: no absolute link is ever kept. */
export function checkRelativeLink(path: string, target: string): void {
  if (!isRelativeTarget(target)) throw refuse(path, target, 'must be a bounded relative link');
}

const startsWith = (parts: readonly string[], prefix: readonly string[]): boolean =>
  parts.length >= prefix.length && prefix.every((p, i) => parts[i] === p);

/**
 * Resolves `target` as the kernel will, from the directory `from` (workspace
 * components), one component at a time through `lookup`: a link met on the way is
 * followed (MAX_LINK_HOPS in all, the first link included), `..` goes back one
 * resolved directory, and climbing above the workspace is an escape (even on the way
 * back in), as is leaving `within` when given. Returns why the link is refused, or
 * undefined when it ends on a place a link may end on.
 */
function resolve(lookup: Lookup, from: readonly string[], target: string, within?: readonly string[]): Why | undefined {
  const resolved = [...from];
  let pending = target.split('/');
  let hops = 1;
  // Left `within`: refused at the end, unless the rest of the way is refused for another reason first (an escape says more).
  let left = false;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (resolved.length === 0) return 'escapes';
      resolved.pop();
      if (within !== undefined && !startsWith(resolved, within)) left = true;
      continue;
    }
    resolved.push(part);
    const place = lookup(resolved);
    if (place.kind === 'missing') return 'dangling';
    if (place.kind === 'uncaptured') return 'uncaptured';
    if (place.kind === 'symlink') {
      if (++hops > MAX_LINK_HOPS) return 'loops';
      resolved.pop();
      pending = [...place.target.split('/'), ...pending];
    } else if (place.kind === 'file' && pending.length > 0) {
      return 'file';
    }
  }
  if (left) return 'leaves';
  const end = lookup(resolved);
  return end.kind === 'directory' && !end.end ? 'uncaptured' : undefined;
}

/** An area's entries looked up by path, the table built on first use. */
function finder(entries: Entries): (path: string) => ManifestEntry | undefined {
  let table: EntryTable | undefined;
  return (path) => {
    table ??= EntryTable.of(entries);
    const i = table.find(path);
    return i < 0 ? undefined : table.entry(i);
  };
}

function placeOf(e: ManifestEntry | undefined, end = true): Place {
  if (e === undefined) return MISSING;
  if (e.kind === 'symlink') return { kind: 'symlink', target: e.link_target };
  if (e.kind === 'file') return FILE;
  return end ? DIRECTORY : PASSAGE;
}

/** A mount payload's place for a workspace path at or below its target. */
function payloadPlace(find: (path: string) => ManifestEntry | undefined, targetParts: readonly string[], parts: readonly string[]): Place {
  return placeOf(find(['payload', ...parts.slice(targetParts.length)].join('/')));
}

/** The symlink entries of an area in manifest order; a packed table is scanned by kind, without making every entry. */
function symlinksOf(entries: Entries): ManifestEntry[] {
  if (!(entries instanceof EntryTable)) return [...entries].filter((e) => e.kind === 'symlink');
  const links: ManifestEntry[] = [];
  for (let i = 0; i < entries.length; i++) if (entries.kindOf(i) === 'symlink') links.push(entries.entry(i));
  return links.sort((a, b) => compareUtf8(a.path, b.path));
}

/** A mount as the containment rule sees it: where it mounts and its entries (`payload`, `payload/…`). */
export interface LinkMount {
  targetParts: readonly string[];
  entries: Entries;
}

/** Checks each link: the first refused is thrown, or, given onEscape, each is passed to it and the check goes on. */
function checkEach(links: readonly ManifestEntry[], check: (link: ManifestEntry) => void, onEscape: ((err: SealError) => void) | undefined): void {
  for (const link of links) {
    try {
      check(link);
    } catch (err) {
      if (onEscape === undefined || !(err instanceof SealError)) throw err;
      onEscape(err);
    }
  }
}

/**
 * Whether a link's target, read as text from its directory `at` (manifest components,
 * `payload` first; `..` taking back a name, no link followed), stays in the payload at
 * every step.
 */
function namesInside(at: readonly string[], target: string): boolean {
  let depth = at.length;
  for (const part of target.split('/')) {
    if (part === '' || part === '.') continue;
    if (part !== '..') depth++;
    else if (--depth < 1) return false;
  }
  return true;
}

/**
 * The containment rule for a mount payload's links: each resolves, from the mount
 * target's place in the workspace, through the payload's own entries and links; the
 * rest of the workspace is taken as plain directories. A link whose target, read as
 * text, never leaves its payload must resolve without leaving it either (through a
 * link of the payload that points out), as the Python cache refuses it: resolved in
 * the stored payload, such a way leads nowhere. The rule does not
 * depend on where the workspace is. The first link refused is thrown, or, given
 * onEscape, each.
 */
export function checkMountLinks(mount: LinkMount, onEscape?: (err: SealError) => void): void {
  const find = finder(mount.entries);
  const lookup: Lookup = (parts) => (startsWith(parts, mount.targetParts) ? payloadPlace(find, mount.targetParts, parts) : DIRECTORY);
  const check = (e: ManifestEntry): void => {
    checkRelativeLink(e.path, e.link_target);
    const parents = e.path.split('/').slice(0, -1);
    const from = [...mount.targetParts, ...parents.slice(1)];
    const why = resolve(lookup, from, e.link_target, namesInside(parents, e.link_target) ? mount.targetParts : undefined);
    if (why !== undefined) throw refuse(e.path, e.link_target, MOUNT_WORDS[why]);
  };
  checkEach(symlinksOf(mount.entries), check, onEscape);
}

/** A snapshot as the containment rule for copy-root links sees it: the copy area's entries, its roots, its mounts. */
export interface LinkLayout {
  entries: Entries;
  roots: readonly (readonly string[])[];
  mounts: readonly LinkMount[];
}

/**
 * The containment rule for links in copy roots, in the clone's namespace (the
 * workspace): copy roots at their paths, each mount's payload at its target. A link
 * resolves, as the kernel will, to a file, directory or link the snapshot captures
 * (in a copy root, or in a mount's payload); it never leaves the workspace, never ends
 * on something the snapshot does not capture (the workspace itself, a directory above
 * a root, anything else the clone may hold), and never dangles, loops or passes
 * through a file.
 */
export class CopyLinkRule {
  readonly #lookup: Lookup;

  constructor(layout: LinkLayout) {
    const find = finder(layout.entries);
    const above = new Set(layout.roots.flatMap((r) => r.slice(0, -1).map((_p, i) => r.slice(0, i + 1).join('/'))));
    const mounts = layout.mounts.map((m) => ({ targetParts: m.targetParts, find: finder(m.entries) }));
    this.#lookup = (parts) => {
      if (parts.length === 0) return PASSAGE;
      const path = parts.join('/');
      const e = find(path);
      if (e !== undefined) return placeOf(e, !above.has(path));
      for (const m of mounts) {
        if (startsWith(parts, m.targetParts)) return payloadPlace(m.find, m.targetParts, parts);
        if (startsWith(m.targetParts, parts)) return PASSAGE;
      }
      // Resolution only ever reaches a path whose parent is a directory: a captured one, or a passage.
      const parent = path.slice(0, path.lastIndexOf('/'));
      return parts.length > 1 && !above.has(parent) && find(parent) !== undefined ? MISSING : UNCAPTURED;
    };
  }

  /** Throws SEAL_ESCAPE, naming the link and its target, unless the copy-root link `link` is contained. */
  check(link: ManifestEntry): void {
    checkRelativeLink(link.path, link.link_target);
    const why = resolve(this.#lookup, link.path.split('/').slice(0, -1), link.link_target);
    if (why !== undefined) throw refuse(link.path, link.link_target, COPY_WORDS[why]);
  }
}

/** CopyLinkRule's check of every link in the copy roots, in manifest order: the first refused is thrown, or, given onEscape, each. */
export function checkCopyLinks(layout: LinkLayout, onEscape?: (err: SealError) => void): void {
  const links = symlinksOf(layout.entries);
  if (links.length === 0) return;
  const rule = new CopyLinkRule(layout);
  checkEach(links, (link) => rule.check(link), onEscape);
}
