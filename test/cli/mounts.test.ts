// mounts.test.ts: `treeseal mounts`: mount points made in the clone; JSON, docker and bubblewrap forms; the bwrap form run for real.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { tempDir, writeTree } from '../helpers.js';
import { CLI_TIMEOUT_MS, cli, json } from './run-cli.js';

/** Paths with a space, a quote and a comma, so every form's quoting is exercised. */
function setup(): { work: string; repo: string; store: string; clone: string; digest: string; payload: string } {
  const work = tempDir(undefined, "treeseal mounts 'q',");
  const repo = join(work, 'repo');
  writeTree(repo, { 'src/a.ts': 'alpha', 'node_modules/p/index.js': 'module.exports = 1;\n', 'node_modules/p/package.json': '{}' });
  mkdirSync(join(repo, 'node_modules/.bin'));
  symlinkSync('../p/index.js', join(repo, 'node_modules/.bin/p'));
  const store = join(work, 'the store');
  const snap = json(cli(store, 'capture', repo, '--copy', 'src', '--mount', 'node_modules', '--json'));
  const clone = join(work, "arm 1's");
  const m = cli(store, 'materialize', snap.digest, clone);
  expect(m.stdout.split('\n').slice(1)).toEqual([`1 mount to bind read-only: treeseal mounts ${snap.digest.slice(0, 12)} ${clone}`, '']);
  return { work, repo, store, clone, digest: snap.digest, payload: join(snap.root, 'mounts/00000/payload') };
}

/** The words a shell makes of `text` (bash's own parsing). */
function words(text: string): string[] {
  const out = execFileSync('bash', ['-c', `eval "set -- $1"; printf '%s\\0' "$@"`, 'bash', text], { encoding: 'utf8' });
  return out.split('\0').slice(0, -1);
}

function bwrapAvailable(): boolean {
  const found = spawnSync('bwrap', ['--version']).status === 0;
  if (!found && process.env.CI === 'true') throw new Error('CI=true but bwrap is not installed (apt-get install -y bubblewrap; .ci/run does)');
  return found;
}

/** What bwrap needs besides the mounts: the host's /usr read-only, its root links, /dev, /proc, and the clone at /workspace. */
function sandboxBase(clone: string): string[] {
  const args = ['--ro-bind', '/usr', '/usr'];
  for (const name of ['bin', 'sbin', 'lib', 'lib32', 'lib64', 'libx32']) {
    const path = `/${name}`;
    if (!existsSync(path)) continue;
    const st = lstatSync(path);
    if (st.isSymbolicLink()) args.push('--symlink', execFileSync('readlink', [path], { encoding: 'utf8' }).trim(), path);
    else args.push('--ro-bind', path, path);
  }
  return [...args, '--dev', '/dev', '--proc', '/proc', '--bind', clone, '/workspace'];
}

describe('treeseal mounts', { timeout: CLI_TIMEOUT_MS }, () => {
  it('makes the mount point in the clone and prints the mounts as JSON and as docker arguments', () => {
    const { work, store, clone, digest, payload } = setup();
    expect(readdirSync(clone)).toEqual(['src']);
    const list = json(cli(store, 'mounts', digest, clone));
    expect(list).toEqual([{ source: payload, target: '/workspace/node_modules', readOnly: true, tmpfs: ['/workspace/node_modules/.vite-temp'] }]);
    expect(readdirSync(clone).sort()).toEqual(['node_modules', 'src']);
    expect(readdirSync(join(clone, 'node_modules'))).toEqual([]);
    expect(json(cli(store, 'mounts', digest, clone, '--workspace', '/w/'))[0].target).toBe('/w/node_modules');

    const docker = cli(store, 'mounts', digest, clone, '--format', 'docker');
    expect([docker.status, docker.stderr]).toEqual([0, '']);
    expect(words(docker.stdout)).toEqual(['--mount', `type=bind,"src=${payload}",dst=/workspace/node_modules,readonly`, '--mount', 'type=tmpfs,dst=/workspace/node_modules/.vite-temp']);
    expect(json(cli(store, 'mounts', digest, clone, '--format', 'docker', '--json'))).toEqual(words(docker.stdout));
    const bad = cli(store, 'mounts', digest, clone, '--format', 'podman');
    expect([bad.status, bad.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --format must be json, bwrap or docker, not "podman"']);
    expect(cli(store, 'mounts', digest, join(work, 'missing')).stderr).toMatch(/^treeseal: SEAL_UNAVAILABLE: clone is unavailable: /);
  });

  it('refuses a path holding a control character as shell words (raw it reaches the terminal; $\'\\ooo\' is other bytes in dash), before making anything; JSON prints it escaped', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'src/a.ts': 'alpha', 'node_modules/p/index.js': '1' });
    const store = join(work, "s\x1b]0;owned\x07 'x'\nline\u0085");
    const snap = json(cli(store, 'capture', repo, '--copy', 'src', '--mount', 'node_modules', '--json'));
    const clone = join(work, 'arm');
    cli(store, 'materialize', snap.digest, clone);
    const shown = `${work}/s\\x1b]0;owned\\x07 'x'\\x0aline\\x85/snapshots/${snap.digest}`;
    for (const format of ['bwrap', 'docker']) {
      const printed = cli(store, 'mounts', snap.digest, clone, '--format', format);
      expect([printed.status, printed.stdout, printed.stderr]).toEqual([
        1,
        '',
        `treeseal: SEAL_BAD_PATH: a path holding a control character cannot be printed as shell words that every sh reads back as itself: use --format json (or --json): ${shown}\n`,
      ]);
      expect(readdirSync(clone)).toEqual(['src']);
    }
    const words = json(cli(store, 'mounts', snap.digest, clone, '--format', 'bwrap', '--json'));
    expect(words).toEqual(['--ro-bind', join(snap.root, 'mounts/00000/payload'), '/workspace/node_modules', '--tmpfs', '/workspace/node_modules/.vite-temp']);
    const plain = cli(store, 'mounts', snap.digest, clone);
    expect(json(plain)[0].source).toBe(join(snap.root, 'mounts/00000/payload'));
    // As every --json document: the C1 control in the store's path escaped (U+0085, raw, is a line break to some terminals).
    expect([plain.stdout.includes('line\\u0085'), /[\u007f-\u009f]/u.test(plain.stdout)]).toEqual([true, false]);
    // A workspace holding one: the same, before anything is made.
    rmSync(join(clone, 'node_modules'), { recursive: true });
    const ws = cli(store, 'mounts', snap.digest, clone, '--format', 'docker', '--workspace', '/w\tx');
    expect([ws.status, ws.stderr.split(': ').slice(0, 2)]).toEqual([1, ['treeseal', 'SEAL_BAD_PATH']]);
    expect(ws.stderr).toContain(': /w\\x09x\n');
    expect(readdirSync(clone)).toEqual(['src']);
  });

  it('without --copy, a mount below the top level says which top-level directory it leaves out whole (a workspace captured with no packages/, silently)', () => {
    const work = tempDir();
    const repo = join(work, 'repo');
    writeTree(repo, { 'packages/a/src/i.ts': 'a', 'packages/a/node_modules/p/index.js': '1', 'packages/b/node_modules/q/index.js': '2', 'node_modules/r/index.js': '3', 'package.json': '{}' });
    const store = join(work, 'store');
    const r = cli(store, 'capture', repo, '--mount', 'node_modules', '--mount', 'packages/a/node_modules', '--mount', './packages/b/node_modules', '--json');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout).declarations).toEqual(['package.json']);
    expect(r.stderr).toBe('treeseal: warning: packages is no copy root: it holds the mount source packages/a/node_modules, so nothing else in it is captured (name what to copy with --copy)\n');
    // Named with --copy (or a top-level mount only), nothing is said.
    const named = cli(store, 'capture', repo, '--copy', 'packages/a/src', '--mount', 'packages/a/node_modules');
    expect([named.status, named.stderr]).toEqual([0, '']);
    expect(cli(store, 'capture', repo, '--mount', 'node_modules').stderr).toBe('');
  });

  it('prints bubblewrap arguments that mount the payload read-only, with a writable .vite-temp', () => {
    const { store, clone, digest, payload } = setup();
    const printed = cli(store, 'mounts', digest, clone, '--format', 'bwrap');
    expect([printed.status, printed.stderr]).toEqual([0, '']);
    expect(words(printed.stdout)).toEqual(['--ro-bind', payload, '/workspace/node_modules', '--tmpfs', '/workspace/node_modules/.vite-temp']);
    if (!bwrapAvailable()) return;
    const inside = [
      'cat /workspace/src/a.ts; echo',
      'cat /workspace/node_modules/p/index.js',
      'readlink /workspace/node_modules/.bin/p; cat /workspace/node_modules/.bin/p',
      'touch /workspace/node_modules/.vite-temp/t && echo vite-temp writable',
      'echo x > /workspace/node_modules/p/index.js || echo write refused',
      'mkdir /workspace/node_modules/new || echo mkdir refused',
      'touch /workspace/written && echo workspace writable',
    ].join('; ');
    const base = sandboxBase(clone).map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
    const r = spawnSync('bash', ['-c', `eval "bwrap ${base.replace(/"/g, '\\"')} $1 -- sh -c \\"\\$2\\""`, 'bash', printed.stdout.trim(), inside], {
      encoding: 'utf8',
      env: { ...process.env, LC_ALL: 'C' },
    });
    const refusals = r.stderr.trimEnd().split('\n');
    expect(refusals).toHaveLength(2);
    expect(refusals[0]).toMatch(/cannot create \/workspace\/node_modules\/p\/index\.js: Read-only file system$/);
    expect(refusals[1]).toMatch(/cannot create directory '\/workspace\/node_modules\/new': Read-only file system$/);
    expect(r.stdout).toBe('alpha\nmodule.exports = 1;\n../p/index.js\nmodule.exports = 1;\nvite-temp writable\nwrite refused\nmkdir refused\nworkspace writable\n');
    expect(r.status).toBe(0);
    expect(existsSync(join(clone, 'written'))).toBe(true);
    expect(readdirSync(join(clone, 'node_modules'))).toEqual([]);
    expect(json(cli(store, 'verify', digest, '--json')).ok).toBe(true);
  });
});
