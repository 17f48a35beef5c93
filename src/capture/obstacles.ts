// obstacles.ts: what keeps a tree from being captured (symlinks, special files, mount links that escape, names that are not UTF-8), gathered over the whole walk and refused in one SealError; mount paths shown as the user named them.
import { SealError, type SealCode, type SealErrorDetail } from '../base/errors.js';
import { escapePath, nameText } from '../base/paths.js';
import { S_IFBLK, S_IFCHR, S_IFIFO, S_IFMT, S_IFSOCK } from '../sys/constants.js';
import { matchedName, patternOf } from './exclude.js';

/** Obstacles listed in one error; the message counts the rest. */
export const MAX_DETAILS = 100;

/** The codes of what the walk steps past (never opening or following it) and refuses at its end. */
const OBSTACLE_CODES: ReadonlySet<SealCode> = new Set(['SEAL_SYMLINK', 'SEAL_SPECIAL_FILE', 'SEAL_ESCAPE']);

/**
 * link: a symlink inside a copy root; root-link: a declared root that is one; special: a
 * FIFO, socket or device; escape: a mount link kept only when it stays inside;
 * link-escape: a copy-root link (links: 'contained') that does not; bad-name: a name that
 * is not valid UTF-8 (a manifest path cannot hold it); stop: one that stopped the walk (a
 * symlink on the way to a declared root).
 */
export type ObstacleKind = 'link' | 'root-link' | 'special' | 'escape' | 'link-escape' | 'bad-name' | 'stop';

export interface ObstacleWhere {
  /** The source path a mount's area root (`payload`) stands for; undefined in the copy area. */
  payloadSource?: string | undefined;
  /** The copy root being walked (a link's way out is to mount it). */
  copyRoot?: string | undefined;
  /** The entry's mode (which kind of special file). */
  mode?: number;
  /**
   * An obstacle at a declared root itself: how the root came to be declared (`copy`, a
   * mount's source, or `default`: every top-level entry), which says how to leave it out.
   */
  declaredBy?: 'copy' | 'mount' | 'default' | undefined;
  /** A name that is not UTF-8: its path below the source as exclude patterns see it (each invalid sequence U+FFFD). */
  matched?: string | undefined;
}

/** A path of a mount's area (`payload`, `payload/x`) as the user named it: below the mount's source path. */
export function userPath(rel: string, payloadSource: string | undefined): string {
  if (payloadSource === undefined) return rel;
  if (rel === 'payload') return payloadSource;
  return rel.startsWith('payload/') ? `${payloadSource}${rel.slice('payload'.length)}` : rel;
}

/** err with its path, and that path in its message, as the user named it (a mount's source path, never `payload`). */
export function asUserPath(err: unknown, payloadSource: string): unknown {
  if (!(err instanceof SealError) || err.path === undefined) return err;
  const path = userPath(err.path, payloadSource);
  if (path === err.path) return err;
  const shown = escapePath(err.path);
  const [from, to] = err.message.includes(shown) ? [shown, escapePath(path)] : [err.path, path];
  return new SealError(err.code, err.message.replace(from, () => to), { path, cause: err.cause, retryable: err.retryable, details: err.details });
}

function specialName(mode: number | undefined): string {
  switch ((mode ?? 0) & S_IFMT) {
    case S_IFIFO:
      return 'a FIFO';
    case S_IFSOCK:
      return 'a socket';
    case S_IFCHR:
      return 'a character device';
    case S_IFBLK:
      return 'a block device';
    default:
      return 'a special file';
  }
}

/** A word for the shell as it must be typed: quoted unless it is plain. */
function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The way out that always works: the exclude pattern for exactly this path (none shown for a name that must be escaped). */
function excludeHint(path: string): string {
  return escapePath(path) === path ? `--exclude ${shellWord(patternOf(path))} leaves it out` : '--exclude with a pattern for it leaves it out';
}

/**
 * Records the name below dirRel that is not valid UTF-8 (the walk steps past it, never
 * opening it): SEAL_BAD_PATH, its hint an exclude pattern with `?` for each invalid
 * sequence, offered only when none of its UTF-8 siblings matches it too. `userDir` is
 * dirRel as the patterns see it (a mount's source path).
 */
export function addBadName(obstacles: Obstacles, name: Buffer, dirRel: string, userDir: string, siblings: readonly string[], where: ObstacleWhere = {}): void {
  const path = `${dirRel === '' ? '' : `${dirRel}/`}${nameText(name)}`;
  const err = new SealError('SEAL_BAD_PATH', `path is not valid UTF-8: ${escapePath(path)}`, { path });
  const seen = matchedName(name);
  const like = new RegExp(`^${[...seen].map((c) => (c === '\uFFFD' ? '.' : c.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&'))).join('')}$`, 'u');
  const matched = siblings.some((n) => like.test(n)) ? undefined : `${userDir === '' ? '' : `${userDir}/`}${seen}`;
  obstacles.add(err, 'bad-name', { ...where, matched });
}

/**
 * The exclude pattern for a name that is not UTF-8: patterns see each invalid sequence as
 * U+FFFD (exclude.ts, matchedName), which `?` matches; shown only where the rest needs no escape.
 */
function badNameExclude(matched: string | undefined): string {
  // The name's own characters escaped, each invalid sequence then a ? (patternOf leaves U+FFFD as it is).
  const pattern = matched === undefined ? undefined : patternOf(matched).replace(/\uFFFD/g, '?');
  if (pattern === undefined || escapePath(pattern) !== pattern) return '--exclude with a pattern for it leaves it out (? matches each sequence that is not UTF-8)';
  return `--exclude ${shellWord(pattern)} leaves it out`;
}

/** Whether rel lies in a node_modules below its copy root (not the copy root itself being one): a workspace package's links. */
export function inNestedModules(rel: string, copyRoot: string): boolean {
  if (copyRoot.split('/').at(-1) === 'node_modules') return false;
  return rel.slice(copyRoot.length + 1).split('/').slice(0, -1).includes('node_modules');
}

function hintFor(kind: ObstacleKind, code: SealCode, path: string, where: ObstacleWhere): string {
  // A root named in copy or mounts cannot be excluded (a pattern that leaves out a declared root is refused): it is left out of the declaration.
  const exclude = where.declaredBy === 'copy' ? 'leaving it out of --copy leaves it out' : where.declaredBy === 'mount' ? 'leaving out its --mount leaves it out' : excludeHint(path);
  if (kind === 'link' && where.copyRoot !== undefined) {
    const root = escapePath(where.copyRoot);
    const mount = escapePath(root) === root ? shellWord(root) : root;
    // A node_modules' links lead to tools: kept, they need their x bits too (without --keep-exec a clone's files are 0600).
    const modules = path.split('/').includes('node_modules');
    const keep = modules ? '--links contained keeps it (with --keep-exec, so the tools it leads to stay executable)' : '--links contained keeps it';
    // In a node_modules below the root (a workspace's package), a mount of the whole root would make the project's source read-only.
    if (inNestedModules(path, where.copyRoot)) return `a symlink in a node_modules inside copy root ${root}: ${keep}, ${exclude}`;
    return `a symlink in copy root ${root}: ${keep}, --mount ${mount} captures ${root} as a mount, ${exclude}`;
  }
  if (kind === 'special' || code === 'SEAL_SPECIAL_FILE') return `${specialName(where.mode)}: ${exclude}`;
  if (kind === 'link-escape') return `a symlink in a copy root that dangles or leads out of what the snapshot captures: capture what it leads to (as a copy root or a mount), or ${exclude}`;
  if (kind === 'escape' || code === 'SEAL_ESCAPE') return `a mount symlink that dangles or leads out of its payload or the workspace: ${exclude}`;
  if (kind === 'bad-name') return `a name that is not valid UTF-8 (a manifest holds UTF-8 paths): rename it, or ${badNameExclude(where.matched)}`;
  if (kind === 'root-link' && where.declaredBy === 'default') {
    return `a top-level symlink (with no --copy every top-level entry is a copy root): --links contained keeps it, ${exclude}, or name the copy roots with --copy`;
  }
  // A copy root may be a link where links are kept; a mount source never.
  if (kind === 'root-link' && where.declaredBy === 'copy') return `a declared root that is a symlink: --links contained keeps it, declare what it points to, or ${exclude}`;
  if (kind === 'root-link') return `a declared root that is a symlink: declare what it points to, or ${exclude}`;
  return `a symlink on the way to a declared root: declare a path that does not pass through it`;
}

/** The obstacles one capture found, in the order found; refused together once the walk is over. */
export class Obstacles {
  #first: SealError | undefined;
  readonly #details: SealErrorDetail[] = [];
  #count = 0;

  get count(): number {
    return this.#count;
  }

  /** Records err (an obstacle the walk stepped past) with the way out for its kind. */
  add(err: SealError, kind: ObstacleKind, where: ObstacleWhere = {}): void {
    const payloadSource = where.payloadSource;
    const shown = payloadSource === undefined ? err : (asUserPath(err, payloadSource) as SealError);
    this.#first ??= shown;
    this.#count++;
    const path = shown.path ?? '';
    if (this.#details.length < MAX_DETAILS) this.#details.push({ path, code: shown.code, hint: hintFor(kind, shown.code, path, where) });
  }

  /** Throws every obstacle found as one SealError: the first's code, path and message, the count, and the details. */
  throwIfAny(): void {
    const first = this.#first;
    if (first === undefined) return;
    const more = this.#count - 1;
    let message = first.message;
    if (more > 0) message += `, and ${more} more obstacle${more === 1 ? '' : 's'}`;
    if (this.#count > MAX_DETAILS) message += ` (details lists the first ${MAX_DETAILS})`;
    throw new SealError(first.code, message, { path: first.path, cause: first.cause, details: this.#details });
  }

  /**
   * Runs the walk, then refuses what it stepped past. An obstacle that stops the walk
   * (a symlink on the way to a declared root) is refused with those found before it.
   */
  collect<T>(walk: () => T): T {
    let result: T;
    try {
      result = walk();
    } catch (err) {
      if (err instanceof SealError && OBSTACLE_CODES.has(err.code)) {
        this.add(err, 'stop');
        this.throwIfAny();
      }
      throw err;
    }
    this.throwIfAny();
    return result;
  }
}
