// unix.test.ts: the command as Unix users expect it: --version, help, a closed stdout, the progress line on a terminal, retries, exit statuses.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import * as S from '../../dist/sys/index.js';
import { tempDir, writeTree } from '../helpers.js';
import { CLI_TIMEOUT_MS, CLI, cli, json, setup } from './run-cli.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Runs `treeseal …` under a pseudo-terminal (script(1)); returns what the terminal got and the exit status. */
function onTerminal(store: string, ...args: string[]): { status: number; screen: string } {
  const quoted = [process.execPath, CLI, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const r = spawnSync('script', ['-qec', `TREESEAL_STORE='${store}' ${quoted}`, '/dev/null'], { encoding: 'utf8' });
  return { status: r.status ?? -1, screen: r.stdout };
}

/** A repository whose `many/` holds enough files that `show` prints far more than a pipe holds. */
function manyFiles(repo: string): void {
  const tree: Record<string, string> = {};
  for (let i = 0; i < 1500; i++) tree[`many/file-with-a-long-name-${String(i).padStart(5, '0')}.txt`] = String(i);
  writeTree(repo, tree);
}

describe('version and help', { timeout: CLI_TIMEOUT_MS }, () => {
  it('--version, help, help <command>, and the usage errors', () => {
    const { store } = setup();
    expect(cli(store, '--version')).toEqual({ status: 0, stdout: `treeseal ${VERSION}\n`, stderr: '' });
    const help = cli(store, 'help');
    expect([help.status, help.stderr]).toEqual([0, '']);
    expect(help.stdout).toMatch(/^usage: treeseal <command> \[options\]\n/);
    expect(help.stdout).toMatch(/\n {2}mounts <digest> <clone> +make mount points in a clone/);
    expect(help.stdout).toContain('--retries N');
    // Fits a 100-column terminal: a long synopsis puts its summary on the next line, wrapped.
    expect(help.stdout.split('\n').filter((line) => line.length > 100)).toEqual([]);
    expect(help.stdout).toContain('\n  gc [--clone DIR] [--older-than AGE] [--keep-last N] [--max-size SIZE]\n                                  sweep stale builds and leases;');
    expect(cli(store, '--help').stdout).toBe(help.stdout);
    const one = cli(store, 'help', 'capture');
    expect([one.status, one.stdout.split('\n')[0]]).toEqual([0, 'usage: treeseal capture <source> [--copy PATH]... [--mount SRC[:TARGET]]... [--exclude PATTERN]... [--exclude-from FILE]... [--revision R] [--keep-exec] [--keep-times] [--links refuse|contained] [--no-stat-cache] [--max-entries|--max-bytes|--max-file-bytes|--max-path-bytes|--max-depth N]']);
    expect(one.stdout).toBe(cli(store, 'capture', '--help').stdout);
    expect(one.stdout).toContain('\n  --keep-times         record the mtime of every file and directory in copy roots, which materialize restores\n');
    let r = cli(store, 'help', 'nope');
    expect([r.status, r.stdout]).toEqual([2, '']);
    expect(r.stderr).toMatch(/^treeseal: unknown command: nope\nusage: treeseal <command>/);
    r = cli(store);
    expect([r.status, r.stdout]).toEqual([2, '']);
    expect(r.stderr).toMatch(/^treeseal: a command is required\nusage: treeseal <command>/);
    r = cli(store, 'ls', '--retries', 'many');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --retries takes a count, not "many"']);
    // The words quoted back are the user's: a control character in one reaches the terminal escaped.
    r = cli(store, 'ls', '--\x1b]0;owned\x07red');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown option --\\x1b]0;owned\\x07red']);
    r = cli(store, '\x1b[31mls');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown command: \\x1b[31mls']);
    expect(r.stderr).not.toMatch(/[\u0000-\u0009\u000b-\u001f]/u);
  });
});

describe('an addon that is not built', { timeout: CLI_TIMEOUT_MS }, () => {
  it('is said in one line with the way out, not a stack trace, by the command and to an import of the library (a bare Error without a code, its 13 paths tried)', () => {
    const root = tempDir();
    cpSync(new URL('../../dist', import.meta.url), join(root, 'dist'), { recursive: true });
    cpSync(new URL('../../package.json', import.meta.url), join(root, 'package.json'));
    symlinkSync(new URL('../../node_modules', import.meta.url).pathname, join(root, 'node_modules'));
    const why =
      `treeseal's native addon cannot be loaded from ${root}/: Could not locate the bindings file. Is it built? \`npm rebuild treeseal\` builds it ` +
      '(where npm asks for install scripts to be approved: `npm install-scripts approve treeseal` first)';
    const r = spawnSync(process.execPath, [join(root, 'dist/cli.js'), 'ls'], { encoding: 'utf8' });
    expect([r.status, r.stdout, r.stderr]).toEqual([1, '', `treeseal: cannot load the library: ${why}\n`]);
    // run's own failures are 125 (its other statuses its command's), this one too, wherever its options stand.
    for (const args of [['run', 'abc', 'arm', '--', 'true'], ['--store', 'run', '--retries', '1', 'run', 'abc', 'arm', '--', 'true'], ['--workspace', '/w', '--json', 'run', 'abc', 'arm', '--', 'true'], ['--store=s', 'run', 'abc', 'arm', '--', 'true']]) {
      const run = spawnSync(process.execPath, [join(root, 'dist/cli.js'), ...args], { encoding: 'utf8' });
      expect([args, run.status, run.stderr]).toEqual([args, 125, `treeseal: cannot load the library: ${why}\n`]);
    }
    const imported = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', `try { await import(${JSON.stringify(join(root, 'dist/index.js'))}); } catch (e) { console.log(JSON.stringify([e.code, e.message, e.cause instanceof Error])); }`],
      { encoding: 'utf8' },
    );
    expect([imported.status, imported.stderr, JSON.parse(imported.stdout)]).toEqual([0, '', ['MODULE_NOT_FOUND', why, true]]);
    // --version alone loads neither the library nor its addon.
    const v = spawnSync(process.execPath, [join(root, 'dist/cli.js'), '--version'], { encoding: 'utf8' });
    expect([v.status, v.stdout, v.stderr]).toEqual([0, `treeseal ${VERSION}\n`, '']);
  });
});

describe('a closed stdout', { timeout: CLI_TIMEOUT_MS }, () => {
  it('ends the command quietly, by SIGPIPE, in a shell pipeline and when the reader closes early', async () => {
    const { repo, store } = setup();
    manyFiles(repo);
    const { digest } = json(cli(store, 'capture', repo, '--copy', 'many', '--json'));
    const shell = spawnSync('bash', ['-c', `set -o pipefail; '${process.execPath}' '${CLI}' show ${digest} | head -1`], {
      encoding: 'utf8',
      env: { ...process.env, TREESEAL_STORE: store },
    });
    expect([shell.status, shell.stdout, shell.stderr]).toEqual([141, `snapshot ${digest}\n`, '']);

    const child = spawn(process.execPath, [CLI, 'show', digest, '--json'], { env: { ...process.env, TREESEAL_STORE: store } });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.stdout.once('data', () => child.stdout.destroy());
    const [code, signal] = await new Promise<[number | null, string | null]>((res) => child.on('close', (c, s) => res([c, s])));
    expect([code, signal, stderr]).toEqual([null, 'SIGPIPE', '']);
  });

  it('a stdout that cannot be written (a full disk: /dev/full) is said as SEAL_IO, status 1, no stack trace', () => {
    const { repo, store } = setup();
    const { digest } = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    for (const args of [['--version'], ['help'], ['show', digest]]) {
      const full = openSync('/dev/full', 'w');
      try {
        const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', stdio: ['ignore', full, 'pipe'], env: { ...process.env, TREESEAL_STORE: store } });
        expect([args[0], r.status, r.stderr]).toEqual([args[0], 1, 'treeseal: SEAL_IO: cannot write the output: ENOSPC: no space left on device, write\n']);
      } finally {
        closeSync(full);
      }
    }
  });
});

describe('the progress line on a terminal', { timeout: CLI_TIMEOUT_MS }, () => {
  it('is cleared before an error and before the summary', () => {
    const { repo, store } = setup();
    writeTree(repo, { 'big/a.bin': Buffer.alloc(8 << 20, 7), 'good/a.bin': Buffer.alloc(8 << 20, 8) });
    symlinkSync('a.bin', join(repo, 'big/z-link'));
    const failed = onTerminal(store, 'capture', repo, '--copy', 'big');
    expect(failed.status).toBe(1);
    expect(failed.screen).toMatch(/^\r\x1b\[2Kcapturing \d+ entries, [\d.]+ (B|KiB|MiB)/);
    expect(failed.screen).toMatch(/capturing [^\r\n]*\r\x1b\[2Ktreeseal: SEAL_SYMLINK: capture must not traverse a symlink: big\/z-link \(in copy root big: /);
    expect(failed.screen.slice(failed.screen.indexOf('treeseal: '))).not.toContain('capturing');

    const ok = onTerminal(store, 'capture', repo, '--copy', 'good');
    expect(ok.status).toBe(0);
    expect(ok.screen).toMatch(/capturing [^\r\n]*\r\x1b\[2Kcaptured /);
    const clone = join(repo, '..', 'clone');
    const digest = /digest {4}([0-9a-f]{64})/.exec(ok.screen)![1]!;
    const m = onTerminal(store, 'materialize', digest, clone);
    expect(m.status).toBe(0);
    // The progress line is cleared before the warning that auto had to copy (this filesystem has no reflink), then the summary.
    expect(m.screen).toMatch(/materializing [^\r\n]*\r\x1b\[2K(treeseal: warning: 1 file copied, not reflinked: [^\r\n]+\r?\n)?materialized /);
  });

  it('counts toward the number of entries the work makes or checks (directories too): never past its total or 100%', () => {
    const { repo, store } = setup();
    const tree: Record<string, string> = {};
    for (let d = 0; d < 40; d++) tree[`many/d${d}/e/f`] = String(d);
    writeTree(repo, tree);
    symlinkSync('f', join(repo, 'many/d0/e/l'));
    const digest = json(cli(store, 'capture', repo, '--copy', 'many', '--mount', 'src', '--links', 'contained', '--json')).digest as string;
    // many, 40 × (d, e, f), one symlink; the mount src: src, a.ts, lib, lib/b.ts.
    for (const [args, label, total] of [
      [['materialize', digest, join(repo, '..', 'clone')], 'materializing', 122],
      [['verify', digest], `verifying ${digest.slice(0, 12)}`, 126],
    ] as const) {
      const r = onTerminal(store, ...args);
      expect(r.status).toBe(0);
      const counts = [...r.screen.matchAll(new RegExp(`${label} \\[[#-]+\\] (\\d+)% (\\d+)/(\\d+) entries`, 'g'))].map((x) => [Number(x[1]), Number(x[2]), Number(x[3])]);
      expect(counts.length).toBeGreaterThan(0);
      for (const [percent, done, of] of counts) {
        expect(of).toBe(total);
        expect(done).toBeLessThanOrEqual(of);
        expect(percent).toBeLessThanOrEqual(100);
      }
      expect(counts.at(-1)!.slice(1)).toEqual([total, total]);
    }
  });
});

/** A process that rewrites the start of `path` as fast as it can until killed. */
function keepChanging(path: string): ChildProcess {
  const code = `const fs=require('fs');const fd=fs.openSync(${JSON.stringify(path)},'r+');const b=Buffer.alloc(4096);let i=0;process.stdout.write('go\\n');for(;;){b[0]=i++;fs.writeSync(fd,b,0,4096,0);}`;
  return spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
}

async function started(writer: ChildProcess): Promise<void> {
  await new Promise((res) => writer.stdout!.once('data', res));
}

async function stopped(writer: ChildProcess): Promise<void> {
  const gone = new Promise((res) => writer.once('exit', res));
  writer.kill('SIGKILL');
  await gone;
}

describe('--retries', { timeout: CLI_TIMEOUT_MS }, () => {
  it('runs a capture again after SEAL_CHANGED, saying so on stderr, and gives up after N retries', async () => {
    const { repo, store } = setup();
    const hot = join(repo, 'src', 'hot.bin');
    writeFileSync(hot, Buffer.alloc(48 << 20, 1));
    const retryLine = /^treeseal: SEAL_CHANGED: file changed while snapshotting: src\/hot\.bin; retrying in (\d+) ms \((\d) of (\d)\)$/;

    let writer = keepChanging(hot);
    await started(writer);
    const gaveUp = cli(store, 'capture', repo, '--copy', 'src', '--retries', '1');
    await stopped(writer);
    const lines = gaveUp.stderr.trimEnd().split('\n');
    expect([gaveUp.status, gaveUp.stdout, lines.length]).toEqual([1, '', 2]);
    expect(retryLine.exec(lines[0]!)!.slice(1)).toEqual(['100', '1', '1']);
    expect(lines[1]).toBe('treeseal: SEAL_CHANGED: file changed while snapshotting: src/hot.bin');

    writer = keepChanging(hot);
    await started(writer);
    const child = spawn(process.execPath, [CLI, 'capture', repo, '--copy', 'src', '--json'], { env: { ...process.env, TREESEAL_STORE: store } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    const firstRetry = new Promise<void>((res) =>
      child.stderr.on('data', (b: Buffer) => {
        stderr += b.toString();
        if (stderr.includes('retrying')) res();
      }),
    );
    const exited = new Promise<number | null>((res) => child.on('close', res));
    await Promise.race([firstRetry, exited]);
    await stopped(writer);
    expect(await exited).toBe(0);
    expect(stderr).toMatch(/^treeseal: SEAL_CHANGED: file changed while snapshotting: src\/hot\.bin; retrying in 100 ms \(1 of 2\)\n/);
    expect(JSON.parse(stdout)).toMatchObject({ reused: false, declarations: ['src'] });

    writer = keepChanging(hot);
    await started(writer);
    const none = cli(store, 'capture', repo, '--copy', 'src', '--revision', 'r0', '--retries', '0');
    await stopped(writer);
    expect([none.status, none.stderr]).toEqual([1, 'treeseal: SEAL_CHANGED: file changed while snapshotting: src/hot.bin\n']);
  });
});

describe('exit statuses and reports', { timeout: CLI_TIMEOUT_MS }, () => {
  it('capture says captured or reused; gc counts what the store open swept; JSON milliseconds are integers', () => {
    const { work, repo, store } = setup();
    expect(cli(store, 'capture', repo, '--copy', 'src').stdout).toMatch(/^captured /);
    expect(cli(store, 'capture', repo, '--copy', 'src').stdout).toMatch(/^reused /);
    const again = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    expect(again.reused).toBe(true);
    expect(json(cli(store, 'capture', repo, '--copy', 'README', '--json')).reused).toBe(false);

    mkdirSync(join(store, 'tmp', `build-${'0'.repeat(32)}`));
    writeTree(join(store, 'tmp', `build-${'1'.repeat(32)}`), { 'copy/f': 'x' });
    expect(cli(store, 'gc')).toEqual({ status: 0, stdout: 'swept 2 stale items\n', stderr: '' });
    mkdirSync(join(store, 'tmp', `build-${'2'.repeat(32)}`));
    expect(json(cli(store, 'gc', '--json'))).toEqual({ swept: 1 });
    expect(cli(store, 'gc').stdout).toBe('swept 0 stale items\n');

    const m = json(cli(store, 'materialize', again.digest, join(work, 'fresh'), '--json'));
    expect(Number.isInteger(m.elapsedMs)).toBe(true);
    expect(readFileSync(join(work, 'fresh/src/a.ts'), 'utf8')).toBe('alpha');
  });

  it('materialize creates the clone only when its last component is missing, and never through a symlink', () => {
    const { work, repo, store } = setup();
    const { digest } = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    let r = cli(store, 'materialize', digest, join(work, 'no/such'));
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^treeseal: SEAL_UNAVAILABLE: clone parent is unavailable: .*\/no: ENOENT: no such file or directory, openat2? '.*\/no'\n$/);
    expect(existsSync(join(work, 'no'))).toBe(false);
    const real = join(work, 'real');
    mkdirSync(real);
    symlinkSync(real, join(work, 'link'));
    r = cli(store, 'materialize', digest, join(work, 'link/clone'));
    expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_SYMLINK: clone parent must be a real directory, not a symlink: ${work}/link\n`]);
    symlinkSync(join(real, 'elsewhere'), join(work, 'dangling'));
    r = cli(store, 'materialize', digest, join(work, 'dangling'));
    expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_SYMLINK: clone must be a real directory, not a symlink: ${work}/dangling\n`]);
    expect(spawnSync('ls', ['-A', real], { encoding: 'utf8' }).stdout).toBe('');
    r = cli(store, 'materialize', digest, join(work, 'made'));
    expect(r.status).toBe(0);
    expect(readFileSync(join(work, 'made/src/lib/b.ts'), 'utf8')).toBe('beta');
  });

  it.skipIf(process.env.TREESEAL_TEST_EXT4 === undefined && process.env.CI !== 'true')('a materialize that fails leaves no clone it made, so run materializes instead of running in an empty directory', () => {
    // On ext4 FICLONE fails: --reflink always is SEAL_NO_REFLINK before a file is made.
    const work = tempDir(process.env.TREESEAL_TEST_EXT4);
    const repo = join(work, 'repo');
    writeTree(repo, { 'src/a.ts': 'alpha' });
    const store = join(work, 'store');
    const { digest } = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    const clone = join(work, 'arm');
    const r = cli(store, 'materialize', digest, clone, '--reflink', 'always');
    expect([r.status, r.stderr.split(':').slice(0, 2).join(':')]).toEqual([1, 'treeseal: SEAL_NO_REFLINK']);
    expect(existsSync(clone)).toBe(false);
    const run = cli(store, 'run', digest, clone, '--', 'cat', 'src/a.ts');
    expect([run.status, run.stdout]).toEqual([0, 'alpha']);
  });

  it('--keep-times: the manifest records each mtime in nanoseconds, materialize restores it, diff and verify --clone see it change', () => {
    const { work, repo, store } = setup();
    const at = (rel: string, ns: bigint): void => {
      S.sys.utimensat(S.AT_FDCWD, join(repo, rel), 0, S.UTIME_OMIT, Number(ns / 1_000_000_000n), Number(ns % 1_000_000_000n), S.AT_SYMLINK_NOFOLLOW);
    };
    at('src/lib/b.ts', 1_500_000_000_000_000_123n);
    at('src/lib', 1_500_000_000_000_000_456n);
    const plain = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    const snap = json(cli(store, 'capture', repo, '--copy', 'src', '--keep-times', '--json'));
    expect(snap.manifestDigest).not.toBe(plain.manifestDigest);
    const shown = json(cli(store, 'show', snap.digest, '--json'));
    expect(shown.entries.find((e: { path: string }) => e.path === 'src/lib/b.ts').mtime_ns).toBe('1500000000000000123');
    expect(json(cli(store, 'show', plain.digest, '--json')).entries.every((e: object) => !('mtime_ns' in e))).toBe(true);
    // The same bytes, another time: diff names the entry whose time differs (its directory's stays).
    at('src/a.ts', 1_400_000_000_000_000_000n);
    const moved = json(cli(store, 'capture', repo, '--copy', 'src', '--keep-times', '--json'));
    const d = cli(store, 'diff', snap.digest, moved.digest);
    expect([d.status, d.stdout]).toEqual([1, '~ src/a.ts\n0 added, 0 removed, 1 changed\n']);
    const clone = join(work, 'clone');
    json(cli(store, 'materialize', snap.digest, clone, '--json'));
    expect(statSync(join(clone, 'src/lib/b.ts'), { bigint: true }).mtimeNs).toBe(1_500_000_000_000_000_123n);
    expect(statSync(join(clone, 'src/lib'), { bigint: true }).mtimeNs).toBe(1_500_000_000_000_000_456n);
    expect(cli(store, 'verify', snap.digest, '--clone', clone).status).toBe(0);
    writeFileSync(join(clone, 'src/a.ts'), 'alpha');
    const r = cli(store, 'verify', snap.digest, '--clone', clone);
    expect([r.status, r.stdout.split('\n').filter((l) => l.startsWith('~'))]).toEqual([1, ['~ src/a.ts']]);
  });

  it('capture without --copy copies every top-level entry but the mounts; --keep-exec; a refused link says the way out', () => {
    const { work, repo, store } = setup();
    writeFileSync(join(repo, 'src/run.sh'), '#!/bin/sh\n', { mode: 0o755 });
    mkdirSync(join(repo, 'node_modules/.bin'));
    symlinkSync('../p/index.js', join(repo, 'node_modules/.bin/p'));
    const refused = cli(store, 'capture', repo);
    expect([refused.status, refused.stderr]).toEqual([
      1,
      'treeseal: SEAL_SYMLINK: capture must not traverse a symlink: node_modules/.bin/p (in node_modules/.bin, inside copy root node_modules: declare node_modules as a mount (--mount node_modules) or leave it out)\n' +
        '  node_modules/.bin/p: a symlink in copy root node_modules: --links contained keeps it (with --keep-exec, so the tools it leads to stay executable), --mount node_modules captures node_modules as a mount, --exclude /node_modules/.bin/p leaves it out\n',
    ]);
    const snap = json(cli(store, 'capture', repo, '--mount', 'node_modules', '--keep-exec', '--json'));
    expect(snap.declarations).toEqual(['README', 'src']);
    expect(snap.mounts).toEqual([{ source: 'node_modules', target: 'node_modules', kind: 'directory', entries: 6 }]);
    expect(cli(store, 'show', snap.digest).stdout).toMatch(/\nfile {6}0755 +10 [0-9a-f]{64}  src\/run\.sh\n/);
    json(cli(store, 'materialize', snap.digest, join(work, 'clone'), '--json'));
    expect([0o700, 0o600]).toEqual(['src/run.sh', 'src/a.ts'].map((p) => spawnSync('stat', ['-c', '%a', join(work, 'clone', p)], { encoding: 'utf8' }).stdout.trim()).map((m) => parseInt(m, 8)));
  });
});

describe("the command's first lines", () => {
  it('know every option that takes a value, as main does: the word after one is no command word (run failing before main exits 125 as after)', async () => {
    const { VALUED_OPTIONS, stringOptionNames } = (await import(new URL('../../dist/cli/commands.js', import.meta.url).href)) as { VALUED_OPTIONS: string[]; stringOptionNames: () => string[] };
    expect([...VALUED_OPTIONS].sort()).toEqual(stringOptionNames());
  });
});
