// declaration.ts: turns capture options into a checked plan before any file is touched.
import { SealError } from '../base/errors.js';
import { checkRootPath } from '../base/fd.js';
import { resolveLimits, type Limits } from '../base/limits.js';
import { checkNoOverlap, checkRelative } from '../base/paths.js';

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
  ensureDirs?: string[];
}

export interface MountBinding {
  contentDigest: string;
  manifestDigest: string;
}

export interface CaptureOptions {
  /** Absolute path of a real directory (not a symlink). */
  source: string;
  /** Relative paths below source to copy (files or directories); symlinks anywhere inside are refused. */
  copy?: string[];
  mounts?: MountDeclaration[];
  /** Folded into the digest (e.g. a commit id). */
  revision?: string;
  /** Fail closed (SEAL_BINDING) unless the mounts captured have exactly these digests. */
  expectMounts?: MountBinding;
  limits?: Partial<Limits>;
  /** The sandbox workspace mounts are checked against (default /workspace). */
  workspace?: string;
  /**
   * Helper threads that clone/copy and hash files while the walk goes on (default:
   * one per spare core, at most 4, started once the tree proves big enough); 0 keeps
   * the whole capture on one thread. The manifest and errors are the same either way.
   */
  parallelism?: number;
  /**
   * Use the store's stat cache (default true): a file whose identity is unchanged and
   * older than its cache entry reuses its hash without being read, and its bytes come
   * from the snapshot that holds them. false: every file is read, and no cache is kept.
   */
  statCache?: boolean;
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
}

function stringList(value: unknown, label: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new SealError('SEAL_BAD_PATH', `${label} must be a list of relative paths`);
  return value as string[];
}

export function planCapture(options: CaptureOptions): Plan {
  if (options === null || typeof options !== 'object') throw new SealError('SEAL_BAD_PATH', 'capture options must be an object');
  const limits = resolveLimits(options.limits);
  const source = checkRootPath(options.source, 'source');
  const revision = options.revision ?? '';
  if (typeof revision !== 'string') throw new SealError('SEAL_BAD_PATH', 'revision must be a string');
  const declarations = stringList(options.copy, 'copy');
  const copyParts = declarations.map((raw) => checkRelative(raw, 'copy root', limits.maxPathBytes));
  checkNoOverlap(copyParts, 'copy roots');
  const rawMounts = options.mounts ?? [];
  if (!Array.isArray(rawMounts)) throw new SealError('SEAL_BAD_PATH', 'mounts must be a list');
  const mounts = rawMounts.map((m): PlannedMount => {
    if (m === null || typeof m !== 'object') throw new SealError('SEAL_BAD_PATH', 'each mount needs a source and a target');
    const sourceParts = checkRelative(m.source, 'mount source', limits.maxPathBytes);
    const targetParts = checkRelative(m.target, 'mount target', limits.maxPathBytes);
    const ensureDirs =
      m.ensureDirs === undefined
        ? undefined
        : stringList(m.ensureDirs, 'ensureDirs').map((d) => checkRelative(d, 'ensureDirs entry', limits.maxPathBytes));
    return { source: m.source, target: m.target, sourceParts, targetParts, ensureDirs };
  });
  checkNoOverlap(
    mounts.map((m) => m.targetParts),
    'mount targets',
  );
  const workspace = options.workspace ?? '/workspace';
  if (typeof workspace !== 'string' || !workspace.startsWith('/')) {
    throw new SealError('SEAL_BAD_PATH', 'workspace must be an absolute path');
  }
  const expectMounts = options.expectMounts;
  if (expectMounts !== undefined && (typeof expectMounts !== 'object' || expectMounts === null)) {
    throw new SealError('SEAL_BINDING', 'expectMounts must be { contentDigest, manifestDigest }');
  }
  const parallelism = options.parallelism;
  if (parallelism !== undefined && (!Number.isSafeInteger(parallelism) || parallelism < 0 || parallelism > 64)) {
    throw new SealError('SEAL_BAD_PATH', 'parallelism must be an integer from 0 to 64');
  }
  const statCache = options.statCache ?? true;
  if (typeof statCache !== 'boolean') {
    throw Object.assign(new TypeError(`The "statCache" option must be of type boolean. Received ${typeof statCache}`), { code: 'ERR_INVALID_ARG_TYPE' });
  }
  return {
    statCache,
    parallelism,
    source,
    revision,
    declarations: [...declarations],
    copyParts,
    mounts,
    limits,
    workspace,
    expectMounts,
  };
}
