// plan.ts: turns capture options into a checked plan before any file is touched.
import { checkBoolean, checkInteger, checkListLength, checkOneOf, checkOptions, checkString, invalidArgType, invalidArgValue } from '../base/arg-errors.js';
import { checkRootPath } from '../base/fd.js';
import { resolveLimits, type LimitOptions, type Limits } from '../base/limits.js';
import { checkClonePlaces } from '../base/clone-names.js';
import { checkRelative, checkWorkspace } from '../base/paths.js';
import { LINK_MODES, type LinkMode } from './links.js';
import { planExcludes } from './exclude.js';

export interface MountDeclaration {
  /** Path below the source to capture (a directory or a file). */
  source: string;
  /** Path below the workspace where it is mounted read-only. */
  target: string;
  /**
   * Empty directories added to the payload before the digests are computed.
   * Default: `['.vite-temp']` when the target's last component is `node_modules`
   * and the payload is a directory (the seed's behaviour), else none.
   */
  ensureDirs?: string[] | undefined;
}

export interface MountBinding {
  contentDigest: string;
  manifestDigest: string;
}

export interface CaptureOptions {
  /** Absolute path of a real directory (not a symlink). */
  source: string;
  /**
   * Relative paths below source to copy (files or directories); symlinks anywhere inside
   * are refused. Omitted: every top-level entry of the source that holds no mount source
   * and that `exclude` does not leave out (`[]`: no copy roots, only mounts).
   */
  copy?: string[] | undefined;
  /**
   * gitignore patterns, relative to the source, for what the capture leaves out, inside
   * every copy root and mount source: `build/`, `*.log`, `__pycache__/` (at any depth), `/dist`
   * (anchored), `!keep.log` (negation; a later pattern wins). An entry left out is never
   * opened or read. The patterns are part of the snapshot, and of its digest.
   */
  exclude?: string[] | undefined;
  mounts?: MountDeclaration[] | undefined;
  /** Folded into the digest (e.g. a commit id). */
  revision?: string | undefined;
  /** Fail closed (SEAL_BINDING) unless the mounts captured have exactly these digests. */
  expectMounts?: MountBinding | undefined;
  limits?: LimitOptions | undefined;
  /**
   * Record the permission bits of executable files in copy roots (as mounts record
   * them), so they are frozen 0500 and materialized 0700. Off by default: it changes
   * the manifest (and the digests) of any tree that holds an executable, which then
   * no longer match the seed's, whose copy roots record mode 0.
   */
  keepExecutable?: boolean | undefined;
  /**
   * Record the mtime (nanoseconds) of every file and directory in copy roots, which
   * materialize then gives the clone. Off by default: the manifest then gains a field,
   * and the digests change with every mtime.
   */
  keepTimes?: boolean | undefined;
  /** The sandbox workspace mounts are checked against (default /workspace). */
  workspace?: string | undefined;
  /**
   * Symlinks inside copy roots: 'refuse' (the default: SEAL_SYMLINK), or 'contained':
   * kept when relative and resolving, in the clone, to an entry this snapshot captures
   * (else SEAL_ESCAPE). A tree without links gets the same digests either way.
   */
  links?: LinkMode | undefined;
  /**
   * Helper threads that clone/copy and hash files while the walk goes on (default:
   * one per spare core, at most 4, started once the tree proves big enough); 0 keeps
   * the whole capture on one thread. The manifest and errors are the same either way.
   */
  parallelism?: number | undefined;
  /**
   * Use the store's stat cache (default true): a file whose identity is unchanged and
   * older than its cache entry reuses its hash without being read, and its bytes come
   * from the snapshot that holds them. false: every file is read, and no cache is kept.
   */
  statCache?: boolean | undefined;
}

export interface PlannedMount {
  source: string;
  target: string;
  sourceParts: string[];
  targetParts: string[];
  ensureDirs: string[][] | undefined;
}

export interface Plan {
  source: string;
  revision: string;
  declarations: string[];
  copyParts: string[][];
  mounts: PlannedMount[];
  limits: Limits;
  workspace: string;
  expectMounts: MountBinding | undefined;
  parallelism: number | undefined;
  statCache: boolean;
  keepExecutable: boolean;
  keepTimes: boolean;
  links: LinkMode;
  /** The exclude patterns (none: []). */
  exclude: string[];
  /** copy was omitted: the copy roots are the source's top-level entries, listed when the capture opens it. */
  defaultCopy: boolean;
  /** Added to the stat cache's recording time (tests only, through the store's STAT_CLOCK_AHEAD option): 0 always in use. */
  clockAheadNs: bigint;
}

/** The `parallelism` option of capture and verify: helper threads, an integer from 0 to 64 (undefined: the default). */
export function checkParallelism(parallelism: unknown): number | undefined {
  return parallelism === undefined ? undefined : checkInteger('options.parallelism', parallelism, 0, 64);
}

function list(value: unknown, name: string): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalidArgType(name, 'Array', value);
  checkListLength(name, value);
  return value;
}

const MOUNT_KEYS: readonly string[] = ['source', 'target', 'ensureDirs'];

function planMount(m: unknown, i: number, maxPathBytes: number): PlannedMount {
  const name = `options.mounts[${i}]`;
  if (m === null || typeof m !== 'object' || Array.isArray(m)) throw invalidArgType(name, 'object', m);
  // A misspelt key (ensuredirs) would otherwise be a different snapshot without a word; the Python cache refuses any other key too.
  for (const key of Object.keys(m)) {
    if (!MOUNT_KEYS.includes(key)) throw invalidArgValue(`${name}.${key}`, (m as Record<string, unknown>)[key], `is not a key of a mount declaration (${MOUNT_KEYS.join(', ')})`);
  }
  const { source, target, ensureDirs } = m as MountDeclaration;
  const sourceParts = checkRelative(source, { label: 'mount source', name: `${name}.source`, maxPathBytes });
  const targetParts = checkRelative(target, { label: 'mount target', name: `${name}.target`, maxPathBytes });
  const dirs =
    ensureDirs === undefined
      ? undefined
      : list(ensureDirs, `${name}.ensureDirs`).map((d, j) =>
          checkRelative(d, { label: 'ensureDirs entry', name: `${name}.ensureDirs[${j}]`, maxPathBytes }),
        );
  return { source, target, sourceParts, targetParts, ensureDirs: dirs };
}

function checkBinding(value: unknown): MountBinding | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object') throw invalidArgType('options.expectMounts', 'object', value);
  checkOptions('options.expectMounts', value, { op: 'expectMounts', keys: ['contentDigest', 'manifestDigest'] });
  const { contentDigest, manifestDigest } = value as MountBinding;
  checkString('options.expectMounts.contentDigest', contentDigest);
  checkString('options.expectMounts.manifestDigest', manifestDigest);
  return { contentDigest, manifestDigest };
}

/**
 * Checks capture options before any file is touched. A wrong option type or value is
 * Node's TypeError/RangeError (ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE,
 * ERR_OUT_OF_RANGE); a bad path value is SEAL_BAD_PATH.
 */
export function planCapture(options: CaptureOptions): Plan {
  if (options === null || typeof options !== 'object') throw invalidArgType('options', 'object', options);
  const limits = resolveLimits(options.limits);
  const source = checkRootPath(checkString('options.source', options.source), 'source');
  const revision = options.revision === undefined ? '' : checkString('options.revision', options.revision);
  const declarations = list(options.copy, 'options.copy') as string[];
  const copyParts = declarations.map((raw, i) =>
    checkRelative(raw, { label: 'copy root', name: `options.copy[${i}]`, maxPathBytes: limits.maxPathBytes }),
  );
  const mounts = list(options.mounts, 'options.mounts').map((m, i) => planMount(m, i, limits.maxPathBytes));
  checkClonePlaces(
    copyParts,
    mounts.map((m) => m.targetParts),
  );
  const workspace = checkWorkspace(options.workspace, 'options.workspace');
  const parallelism = checkParallelism(options.parallelism);
  const expectMounts = checkBinding(options.expectMounts);
  const statCache = checkBoolean('options.statCache', options.statCache) ?? true;
  const keepExecutable = checkBoolean('options.keepExecutable', options.keepExecutable) ?? false;
  const keepTimes = checkBoolean('options.keepTimes', options.keepTimes) ?? false;
  const links = checkOneOf('options.links', options.links, LINK_MODES) ?? 'refuse';
  const exclude = planExcludes(options.exclude, source, declarations, copyParts, mounts);
  return { exclude, defaultCopy: options.copy === undefined, clockAheadNs: 0n, links, statCache, keepExecutable, keepTimes, parallelism, source, revision, declarations: [...declarations], copyParts, mounts, limits, workspace, expectMounts };
}
