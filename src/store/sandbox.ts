// sandbox.ts: sandboxArgs: the bubblewrap and docker arguments that run a command in a clone, its payloads mounted read-only.
import { lstatSync, readlinkSync } from 'node:fs';

import { checkBoolean, checkOptions, checkString, invalidArgType } from '../base/arg-errors.js';
import { checkWorkspace } from '../base/paths.js';
import type { MountPoint } from './mount-points.js';
import type { Snapshot } from './snapshot.js';

export interface SandboxOptions {
  /** Where the clone is bound inside the sandbox, and the working directory there (default /workspace). */
  workspace?: string;
  /** Share the host's network (default false: bubblewrap unshares it, docker gets `--network none`). */
  network?: boolean;
  /**
   * Host directories bound read-only at the same path in the bubblewrap sandbox (default
   * /usr and /etc; /bin, /sbin, /lib, /lib32, /lib64 and /libx32 follow as they are on the
   * host: the same symlink, or a read-only bind of a real directory).
   */
  system?: string[];
}

export interface SandboxArgs {
  /** The snapshot's mount points, made inside the clone. */
  mounts: MountPoint[];
  /** Arguments for `bwrap` before `--` and the command. */
  bwrap: string[];
  /** Arguments for `docker run` before the image (the clone bound at the workspace, the payloads read-only). */
  docker: string[];
}

const ROOT_LINKS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

interface Checked {
  workspace: string;
  network: boolean;
  system: string[];
}

function checkSandboxOptions(options: SandboxOptions): Checked {
  checkOptions('options', options);
  const workspace = checkWorkspace(options.workspace, 'options.workspace');
  const network = checkBoolean('options.network', options.network) ?? false;
  const system = options.system ?? ['/usr', '/etc'];
  if (!Array.isArray(system)) throw invalidArgType('options.system', 'Array', system);
  system.forEach((p, i) => checkWorkspace(checkString(`options.system[${i}]`, p), `options.system[${i}]`));
  return { workspace, network, system: [...system] };
}

/** The host's root links and directories as bubblewrap recreates them: a link as the same link, a directory bound read-only. */
function rootLinks(): string[] {
  const out: string[] = [];
  for (const path of ROOT_LINKS) {
    let st;
    try {
      st = lstatSync(path);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) out.push('--symlink', readlinkSync(path), path);
    else if (st.isDirectory()) out.push('--ro-bind', path, path);
  }
  return out;
}

/** One field of docker's comma-separated --mount value, quoted as CSV when it holds a comma or a quote. */
function csvField(field: string): string {
  return /[",\n]/.test(field) ? `"${field.replace(/"/g, '""')}"` : field;
}

function dockerMount(fields: string[]): string[] {
  return ['--mount', fields.map(csvField).join(',')];
}

function argsFor(clone: string, mounts: MountPoint[], o: Checked): SandboxArgs {
  const payloads = mounts.flatMap((m) => ['--ro-bind', m.source, m.target, ...m.tmpfs.flatMap((t) => ['--tmpfs', t])]);
  const bwrap = [
    '--unshare-all',
    ...(o.network ? ['--share-net'] : []),
    '--die-with-parent',
    // A new session: the command cannot push input into the caller's terminal (TIOCSTI).
    '--new-session',
    // Run by root, bubblewrap keeps the caller's capabilities: the command could remount the
    // read-only binds (a payload, /usr, /etc) writable. Dropped, they stay read-only.
    '--cap-drop', 'ALL',
    ...o.system.flatMap((p) => ['--ro-bind', p, p]),
    ...rootLinks(),
    '--dev', '/dev',
    '--proc', '/proc',
    '--tmpfs', '/tmp',
    // The clone first, then the payloads over their mount points inside it.
    '--bind', clone, o.workspace,
    ...payloads,
    '--chdir', o.workspace,
  ];
  const docker = [
    ...dockerMount(['type=bind', `src=${clone}`, `dst=${o.workspace}`]),
    ...mounts.flatMap((m) => [...dockerMount(['type=bind', `src=${m.source}`, `dst=${m.target}`, 'readonly']), ...m.tmpfs.flatMap((t) => dockerMount(['type=tmpfs', `dst=${t}`]))]),
    '-w', o.workspace,
    ...(o.network ? [] : ['--network', 'none']),
  ];
  return { mounts, bwrap, docker };
}

/**
 * Makes snap's mount points inside clone (as `mountPoints` does) and returns the arguments
 * that run a command with clone bound read-write at the workspace, each payload read-only
 * at its target with a writable tmpfs where it keeps one (`.vite-temp`), and for
 * bubblewrap: every namespace unshared (the network too unless `network`), the host's
 * /usr and /etc read-only, a private /dev, /proc and /tmp, a new session, no capability
 * (for root too).
 */
export function sandboxArgs(snap: Snapshot, clone: string, options: SandboxOptions = {}): SandboxArgs {
  checkString('clone', clone);
  const o = checkSandboxOptions(options);
  return argsFor(clone, snap.mountPoints(clone, { workspace: o.workspace }), o);
}

/** sandboxArgs with the mount points made on the worker thread. */
export async function sandboxArgsAsync(snap: Snapshot, clone: string, options: SandboxOptions = {}): Promise<SandboxArgs> {
  checkString('clone', clone);
  const o = checkSandboxOptions(options);
  return argsFor(clone, await snap.mountPointsAsync(clone, { workspace: o.workspace }), o);
}
