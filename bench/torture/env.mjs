// env.mjs: the torture suite's world: a work dir on /dev/shm, ext4 and XFS loop mounts, the packed
// package installed into a fresh project, and a cleanup that runs however the run ends.
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { givenConsumer } from '../../scripts/consumer.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO = resolve(here, '../..');
const SHM = '/dev/shm';
const PREFIX = 'treeseal-torture-';
const cleanups = [];

function sh(cmd, args, opts = {}) {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

/** Removes a tree even when parts of it are frozen read-only. */
export function dropTree(path) {
  if (!existsSync(path)) return;
  spawnSync('chmod', ['-R', 'u+rwx', path], { stdio: 'ignore' });
  rmSync(path, { recursive: true, force: true });
}

function unmountAll(base) {
  const mounts = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1])
    .filter((m) => m !== undefined && (m === base || m.startsWith(`${base}/`)))
    .sort((a, b) => b.length - a.length);
  for (const m of mounts) {
    if (spawnSync('umount', [m], { stdio: 'ignore' }).status !== 0) spawnSync('umount', ['-l', m], { stdio: 'ignore' });
  }
}

/** Work dirs of earlier runs whose process is gone (killed with SIGKILL) are unmounted and removed. */
function sweepDeadRuns() {
  for (const name of readdirSync(SHM)) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number(name.slice(PREFIX.length));
    if (Number.isSafeInteger(pid) && pid !== process.pid && existsSync(`/proc/${pid}`)) continue;
    unmountAll(join(SHM, name));
    dropTree(join(SHM, name));
  }
}

/** Runs every registered cleanup once, newest first. */
export function cleanupAll() {
  while (cleanups.length > 0) {
    const fn = cleanups.pop();
    try {
      fn();
    } catch (err) {
      process.stderr.write(`torture: cleanup: ${err.message}\n`);
    }
  }
}

export function onCleanup(fn) {
  cleanups.push(fn);
}

let exiting = false;
function installSignalCleanup() {
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      if (exiting) return;
      exiting = true;
      process.stderr.write(`torture: ${sig}: cleaning up\n`);
      cleanupAll();
      process.exit(130);
    });
  }
  process.on('exit', () => cleanupAll());
}

/** The run's private work dir on /dev/shm (named by pid so a later run can sweep it). */
export function makeWorkDir() {
  sweepDeadRuns();
  installSignalCleanup();
  const base = join(SHM, `${PREFIX}${process.pid}`);
  mkdirSync(base, { recursive: true, mode: 0o700 });
  onCleanup(() => {
    unmountAll(base);
    dropTree(base);
  });
  return base;
}

/** A loop image on /dev/shm formatted as fs and mounted at base/fs. */
export function loopMount(base, fs, sizeMiB = 1536) {
  // Without root: a mount root prepared and handed over (TORTURE_FS_ROOTS=ext4=/dir,xfs=/dir), a fresh directory in it.
  const given = (process.env.TORTURE_FS_ROOTS ?? '').split(',').map((kv) => kv.split('=')).find(([k]) => k === fs)?.[1];
  if (process.getuid?.() !== 0) {
    if (given === undefined) throw new Error(`the torture suite needs root (loop mounts), or TORTURE_FS_ROOTS naming a ${fs} mount`);
    const dir = join(given, `torture-${process.pid}`);
    mkdirSync(dir, { mode: 0o700 });
    onCleanup(() => dropTree(dir));
    return dir;
  }
  const img = join(base, `${fs}.img`);
  const dir = join(base, fs);
  mkdirSync(dir, { recursive: true });
  sh('truncate', ['-s', `${sizeMiB}M`, img]);
  if (fs === 'xfs') sh('mkfs.xfs', ['-q', '-f', '-m', 'reflink=1', img]);
  else sh('mkfs.ext4', ['-q', '-F', img]);
  sh('mount', ['-o', 'loop', img, dir]);
  onCleanup(() => {
    unmountAll(dir);
    rmSync(img, { force: true });
  });
  return dir;
}

/**
 * The package under test: `npm pack` of the repo installed into a fresh project (or the one
 * installed once for a CI run: TREESEAL_CONSUMER, see scripts/consumer.mjs). When the packed
 * tarball does not install, falls back to the repo's own dist/ (linked as node_modules/treeseal)
 * and says so. Returns { project, cli, source } where scripts copied into project import 'treeseal'.
 */
export function installPackage(base, log) {
  const project = join(base, 'project');
  mkdirSync(join(project, 'node_modules'), { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'torture-project', private: true, type: 'module' }));
  let source = 'tarball';
  let detail = '';
  const consumer = process.env.TORTURE_PACKAGE === 'dist' ? undefined : givenConsumer();
  if (process.env.TORTURE_PACKAGE === 'dist') {
    source = 'dist';
    detail = 'TORTURE_PACKAGE=dist';
  } else if (consumer !== undefined) {
    // Packed and installed once for the whole CI run (scripts/consumer.mjs): its node_modules, addon built there.
    log(`using ${basename(consumer.tarball)} as installed in ${consumer.project} (TREESEAL_CONSUMER)`);
    rmSync(join(project, 'node_modules'), { recursive: true, force: true });
    symlinkSync(join(consumer.project, 'node_modules'), join(project, 'node_modules'));
  } else {
    const packDir = join(base, 'pack');
    mkdirSync(packDir);
    const packed = spawnSync('npm', ['pack', '--silent', '--pack-destination', packDir], { cwd: REPO, encoding: 'utf8' });
    const tgz = packed.status === 0 ? readdirSync(packDir).find((n) => n.endsWith('.tgz')) : undefined;
    if (tgz === undefined) {
      source = 'dist';
      detail = `npm pack failed: ${lastLine(packed.stderr)}`;
    } else {
      log(`installing ${tgz} into ${project}`);
      const inst = spawnSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', join(packDir, tgz)], {
        cwd: project,
        encoding: 'utf8',
      });
      if (inst.status !== 0 || !existsSync(join(project, 'node_modules/treeseal/dist/index.js'))) {
        source = 'dist';
        detail = `npm install of the packed tarball failed: ${lastLine(inst.stderr.split('\n').filter((l) => /error/i.test(l) && !/gyp info/.test(l)).join('\n'))}`;
      }
    }
  }
  if (source === 'dist') {
    rmSync(join(project, 'node_modules'), { recursive: true, force: true });
    mkdirSync(join(project, 'node_modules'));
    symlinkSync(REPO, join(project, 'node_modules/treeseal'));
    log(`NOTE: testing the repo's dist/ (${REPO}/dist), NOT the packed package: ${detail}`);
  }
  const pkg = join(project, 'node_modules/treeseal');
  if (!existsSync(join(pkg, 'dist/index.js'))) throw new Error(`no built package at ${pkg}/dist (run npm run build:ts)`);
  cpSync(here, join(project, 'torture'), { recursive: true });
  const bin = join(project, 'node_modules/.bin/treeseal');
  const cli = existsSync(bin) ? [bin] : [process.execPath, join(pkg, 'dist/cli.js')];
  return { project, scripts: join(project, 'torture'), cli, source };
}

function lastLine(text) {
  const lines = String(text ?? '').trim().split('\n').filter(Boolean);
  return lines.length === 0 ? 'no output' : lines.slice(-2).join(' / ').slice(0, 300);
}
