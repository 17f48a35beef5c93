// mounts.ts: capture of mount payloads (their symlink containment is links.ts; the mount points in a clone are store/mount-points.ts).
import { CaptureContext, TreeBuilder, openDeclaredParents } from './walk.js';
import { SealError } from '../base/errors.js';
import type { Entries, ManifestEntry } from '../base/manifest.js';
import { checkMountLinks } from './links.js';
import type { PlannedMount } from './plan.js';
import { escapePath } from '../base/paths.js';

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

/** Captures one mount into the container open at containerFd (`payload` inside it). */
export function captureMount(
  ctx: CaptureContext,
  sourceFd: number,
  containerFd: number,
  mount: PlannedMount,
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
  checkMountLinks({ targetParts: mount.targetParts, entries }, (err) => ctx.obstacles.add(err, 'escape', { payloadSource }));
  return { source: mount.source, target: mount.target, kind: payload.kind === 'file' ? 'file' : 'directory', entries, totalBytes: builder.totalBytes };
}
