// mounts.ts: capture of mount payloads and their symlink containment (the mount points in a clone are store/mount-points.ts).
import { CaptureContext, TreeBuilder, openDeclaredParents } from './walk.js';
import { SealError } from '../base/errors.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { EntryTable } from '../base/entry-table.js';
import type { PlannedMount } from './plan.js';
import { escapePath, normalize } from '../base/paths.js';

export interface CapturedMount {
  source: string;
  target: string;
  kind: 'directory' | 'file';
  entries: ManifestEntry[];
  totalBytes: number;
}

/** A captured mount as the library holds it: its entries an array or a packed table. */
export interface MountData extends Omit<CapturedMount, 'entries'> {
  entries: Entries;
}

/** The kernel's MAXSYMLINKS: links followed while resolving one path. */
const MAX_LINK_HOPS = 40;

function refuse(entry: ManifestEntry, what: string): SealError {
  return new SealError('SEAL_ESCAPE', `symlink ${what}: ${escapePath(entry.path)} -> ${escapePath(entry.link_target)}`, { path: entry.path });
}

const startsWith = (parts: readonly string[], prefix: readonly string[]): boolean =>
  parts.length >= prefix.length && prefix.every((p, i) => parts[i] === p);

interface Payload {
  /** The payload's entry at a path. */
  entry(path: string): ManifestEntry | undefined;
  /** Absolute components of the workspace, and of the mount target (where `payload` is mounted). */
  workspace: string[];
  mountAt: string[];
}

/**
 * Resolves the kept link `link` as the kernel will inside the sandbox: from its
 * parent's absolute place below the mount target, one component at a time; inside
 * the payload each component must be one of its entries, and a link there is
 * followed (MAX_LINK_HOPS in all, the link itself included); elsewhere in the
 * workspace a component is taken as a plain directory. Climbing above the workspace
 * root is an escape (even on the way back in); a dangling component, a loop or a
 * path through a file is refused.
 */
function resolveKernelWay(p: Payload, link: ManifestEntry): void {
  const resolved = [...p.mountAt, ...link.path.split('/').slice(1, -1)];
  let pending = link.link_target.split('/');
  let hops = 1;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '' || part === '.') continue;
    if (part === '..') {
      resolved.pop();
      if (!startsWith(resolved, p.workspace)) throw refuse(link, 'escapes the sandbox workspace');
      continue;
    }
    resolved.push(part);
    if (!startsWith(resolved, p.mountAt)) continue;
    const entry = p.entry(['payload', ...resolved.slice(p.mountAt.length)].join('/'));
    if (entry === undefined) throw refuse(link, 'is dangling or escapes its snapshot');
    if (entry.kind === 'symlink') {
      if (++hops > MAX_LINK_HOPS) throw refuse(link, 'is dangling or escapes its snapshot');
      resolved.pop();
      pending = [...entry.link_target.split('/'), ...pending];
    } else if (entry.kind === 'file' && pending.length > 0) {
      throw refuse(link, 'is dangling or escapes its snapshot');
    }
  }
}

/**
 * The containment rule for symlinks kept in a mount payload: each resolves, as the kernel
 * will, inside the workspace. The first that does not is thrown, or, given onEscape,
 * each is passed to it.
 */
export function checkMountSymlinks(entries: Entries, targetParts: string[], workspace: string, onEscape?: (err: SealError) => void): void {
  const workspaceParts = normalize(workspace.split('/'), true);
  let table: EntryTable | undefined;
  const entry = (path: string): ManifestEntry | undefined => {
    table ??= EntryTable.of(entries);
    const i = table.find(path);
    return i < 0 ? undefined : table.entry(i);
  };
  const p: Payload = { entry, workspace: workspaceParts, mountAt: [...workspaceParts, ...targetParts] };
  for (const e of entries) {
    if (e.kind !== 'symlink') continue;
    try {
      resolveKernelWay(p, e);
    } catch (err) {
      if (onEscape === undefined || !(err instanceof SealError)) throw err;
      onEscape(err);
    }
  }
}

/** Captures one mount into the container open at containerFd (`payload` inside it). */
export function captureMount(
  ctx: CaptureContext,
  sourceFd: number,
  containerFd: number,
  mount: PlannedMount,
  workspace: string,
): MountData {
  const payloadSource = mount.sourceParts.join('/');
  const found = ctx.obstacles.count;
  const builder = new TreeBuilder(ctx, containerFd, { allowSymlinks: true, preserveModes: true, freezeDirs: false, payloadSource });
  {
    using parent = openDeclaredParents(ctx, sourceFd, mount.sourceParts);
    const last = mount.sourceParts[mount.sourceParts.length - 1]!;
    builder.copyChild({ srcDirFd: parent.fd, destDirFd: containerFd, name: last, rel: 'payload', depth: 1, destName: 'payload', declared: true });
  }
  const at = builder.entries.find('payload');
  const payload = at < 0 ? undefined : builder.entries.entry(at);
  // A payload that is a link or a special file is refused with the other obstacles, once the walk is over.
  if (payload === undefined && ctx.obstacles.count > found) return { source: mount.source, target: mount.target, kind: 'file', entries: builder.finished(), totalBytes: 0 };
  if (payload === undefined) throw new SealError('SEAL_UNAVAILABLE', `mount snapshot is empty: ${escapePath(mount.source)}`);
  const ensureDirs =
    mount.ensureDirs ?? (mount.targetParts[mount.targetParts.length - 1] === 'node_modules' ? [['.vite-temp']] : []);
  if (payload.kind === 'directory') {
    for (const dir of ensureDirs) builder.ensureDirs(['payload', ...dir])?.[Symbol.dispose]();
  } else if (mount.ensureDirs !== undefined && mount.ensureDirs.length > 0) {
    throw new SealError('SEAL_BAD_PATH', `ensureDirs needs a directory mount: ${escapePath(mount.source)}`);
  }
  const entries = builder.finished();
  checkMountSymlinks(entries, mount.targetParts, workspace, (err) => ctx.obstacles.add(err, 'escape', { payloadSource }));
  return { source: mount.source, target: mount.target, kind: payload.kind === 'file' ? 'file' : 'directory', entries, totalBytes: builder.totalBytes };
}
