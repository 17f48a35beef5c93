// mounts.ts: capture of mount payloads, their symlink containment, and mount points in a clone.
import { CaptureContext, TreeBuilder, openChecked } from './walk.js';
import { closeQuietly } from '../base/fd.js';
import { SealError } from '../base/errors.js';
import type { ManifestEntry } from '../base/manifest.js';
import type { PlannedMount } from './plan.js';
import { escapePath, normalize } from '../base/paths.js';

export interface CapturedMount {
  source: string;
  target: string;
  kind: 'directory' | 'file';
  entries: ManifestEntry[];
  totalBytes: number;
}

const MAX_LINK_HOPS = 40;

function escape(rel: string, what: string): SealError {
  return new SealError('SEAL_ESCAPE', `symlink ${what}: ${escapePath(rel)}`, { path: rel });
}

/**
 * Resolves manifest path components inside `payload`, following the manifest's own
 * symlinks as the kernel would; throws when it dangles, loops or leaves the payload.
 */
function resolveInPayload(entries: Map<string, ManifestEntry>, start: string[], linkRel: string): void {
  let pending = [...start];
  let resolved: string[] = [];
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '..') {
      resolved.pop();
      if (resolved.length === 0) throw escape(linkRel, 'is dangling or escapes its snapshot');
      continue;
    }
    resolved.push(part);
    if (resolved[0] !== 'payload') throw escape(linkRel, 'is dangling or escapes its snapshot');
    const entry = entries.get(resolved.join('/'));
    if (entry === undefined) throw escape(linkRel, 'is dangling or escapes its snapshot');
    if (entry.kind === 'symlink') {
      if (++hops > MAX_LINK_HOPS) throw escape(linkRel, 'is dangling or escapes its snapshot');
      resolved.pop();
      pending = [...entry.link_target.split('/').filter((p) => p !== '' && p !== '.'), ...pending];
    } else if (entry.kind === 'file' && pending.length > 0) {
      throw escape(linkRel, 'is dangling or escapes its snapshot');
    }
  }
}

/** The seed's containment rule for symlinks kept in a mount payload. */
export function checkMountSymlinks(entries: ManifestEntry[], targetParts: string[], workspace: string): void {
  const byPath = new Map(entries.map((e) => [e.path, e]));
  const workspaceParts = normalize(workspace.split('/'), true);
  for (const entry of entries) {
    if (entry.kind !== 'symlink') continue;
    const parts = entry.path.split('/');
    const parent = parts.slice(0, -1);
    const link = entry.link_target.split('/');
    const inSandbox = normalize([...workspaceParts, ...targetParts, ...parent.slice(1), ...link], true);
    const inside = workspaceParts.every((p, i) => inSandbox[i] === p);
    if (!inside) throw escape(entry.path, 'escapes the sandbox workspace');
    const inManifest = normalize([...parent, ...link], false);
    if (inManifest[0] !== 'payload') continue;
    resolveInPayload(byPath, [...parent, ...link], entry.path);
  }
}

/** Captures one mount into the container open at containerFd (`payload` inside it). */
export function captureMount(
  ctx: CaptureContext,
  sourceFd: number,
  containerFd: number,
  mount: PlannedMount,
  workspace: string,
): CapturedMount {
  const { sys } = ctx;
  const builder = new TreeBuilder(ctx, containerFd, { allowSymlinks: true, preserveModes: true, freezeDirs: false });
  let parent = -1;
  try {
    for (let i = 0; i < mount.sourceParts.length - 1; i++) {
      const rel = mount.sourceParts.slice(0, i + 1).join('/');
      const [fd] = openChecked(sys, parent < 0 ? sourceFd : parent, mount.sourceParts[i]!, rel, true);
      closeQuietly(sys, parent);
      parent = fd;
    }
    const last = mount.sourceParts[mount.sourceParts.length - 1]!;
    builder.copyChild(parent < 0 ? sourceFd : parent, containerFd, last, 'payload', 1, 'payload', true);
  } finally {
    closeQuietly(sys, parent);
  }
  const payload = builder.entries.get('payload');
  if (payload === undefined) throw new SealError('SEAL_UNAVAILABLE', `mount snapshot is empty: ${escapePath(mount.source)}`);
  const ensureDirs =
    mount.ensureDirs ?? (mount.targetParts[mount.targetParts.length - 1] === 'node_modules' ? [['.vite-temp']] : []);
  if (payload.kind === 'directory') {
    for (const dir of ensureDirs) closeQuietly(sys, builder.ensureDirs(['payload', ...dir]));
  } else if (mount.ensureDirs !== undefined && mount.ensureDirs.length > 0) {
    throw new SealError('SEAL_BAD_PATH', `ensureDirs needs a directory mount: ${escapePath(mount.source)}`);
  }
  const entries = builder.finished();
  checkMountSymlinks(entries, mount.targetParts, workspace);
  return { source: mount.source, target: mount.target, kind: payload.kind === 'file' ? 'file' : 'directory', entries, totalBytes: builder.totalBytes };
}
