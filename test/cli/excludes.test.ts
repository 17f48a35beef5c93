// excludes.test.ts: `treeseal capture --exclude/--exclude-from` (a tree a build is still writing into, captured as it is), every obstacle on its own line, and the --max-* limits.
import { spawn } from 'node:child_process';
import { mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { mkfifo, writeTree } from '../helpers.js';
import { CLI_TIMEOUT_MS, cli, json, setup } from './run-cli.js';

const paths = (shown: { entries: { path: string }[]; mounts: { entries: { path: string }[] }[] }): string[] => [
  ...shown.entries.map((e) => e.path),
  ...shown.mounts.flatMap((m) => m.entries.map((e) => `[mount] ${e.path}`)),
];

describe('capture --exclude', { timeout: CLI_TIMEOUT_MS }, () => {
  it('leaves out what --exclude and --exclude-from match; the file first, so an --exclude negation wins', () => {
    const { work, repo, store } = setup();
    writeTree(repo, { 'src/x.log': 'l', 'src/keep.log': 'k', 'build/out.o': 'o', 'src/__pycache__/m.pyc': 'p', 'node_modules/p/debug.log': 'd' });
    const patterns = join(work, 'patterns');
    writeFileSync(patterns, '# build output\r\n\r\nbuild/\r\n*.log\n   \n**/__pycache__/\n');
    const r = cli(store, 'capture', repo, '--mount', 'node_modules', '--exclude-from', patterns, '--exclude', '!keep.log', '--exclude', 'README', '--json');
    const captured = json(r);
    expect(captured.exclude).toEqual(['build/', '*.log', '**/__pycache__/', '!keep.log', 'README']);
    expect(captured.declarations).toEqual(['src']);
    expect(paths(json(cli(store, 'show', captured.digest, '--json')))).toEqual([
      'src',
      'src/a.ts',
      'src/keep.log',
      'src/lib',
      'src/lib/b.ts',
      '[mount] payload',
      '[mount] payload/.vite-temp',
      '[mount] payload/p',
      '[mount] payload/p/index.js',
    ]);
    const human = cli(store, 'capture', repo, '--mount', 'node_modules', '--exclude-from', patterns, '--exclude', '!keep.log', '--exclude', 'README');
    expect(human.stdout).toContain(`\n  exclude   ["build/","*.log","**/__pycache__/","!keep.log","README"]\n`);
    expect(human.stdout).toMatch(/^reused /);
    expect(cli(store, 'show', captured.digest).stdout).toContain(`\nmanifest ${captured.manifestDigest}\nexclude  ["build/","*.log","**/__pycache__/","!keep.log","README"]\n\n`);
    // No pattern, no line, and the JSON says so.
    const plain = cli(store, 'capture', repo, '--copy', 'src');
    expect(plain.stdout).not.toContain('exclude');
    expect(json(cli(store, 'capture', repo, '--copy', 'src', '--json')).exclude).toEqual([]);
  });

  it('a pattern it cannot take is a usage error naming where it came from; a missing file is SEAL_UNAVAILABLE', () => {
    const { work, repo, store } = setup();
    let r = cli(store, 'capture', repo, '--exclude', '[abc');
    expect([r.status, r.stdout, r.stderr.split('\n')[0]]).toEqual([2, '', "treeseal: The exclude pattern from --exclude is not a valid pattern: it has an unclosed [ (write \\[ for a literal [). Received '[abc'"]);
    expect(r.stderr).toContain('\nusage: treeseal capture <source>');
    const patterns = join(work, 'patterns');
    writeFileSync(patterns, 'ok/\n# fine\n../up\n');
    r = cli(store, 'capture', repo, '--exclude-from', patterns);
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, `treeseal: The exclude pattern from ${patterns} line 3 must not hold '..' as a path component (patterns are relative to the source). Received '../up'`]);
    r = cli(store, 'capture', repo, '--exclude', `${repo}/src`);
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, `treeseal: The exclude pattern from --exclude must be relative to the source, not absolute (write /src for ${repo}/src). Received '${repo}/src'`]);
    r = cli(store, 'capture', repo, '--copy', 'src', '--exclude', 'src/');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, `treeseal: --copy 'src' is left out by the exclude pattern "src/"`]);
    // A directory-only pattern keeps a file of that name, declared or not (both were refused: exit 2, and SEAL_CORRUPT without --copy).
    writeFileSync(join(repo, 'build'), '#!/bin/sh\n');
    expect(json(cli(store, 'capture', repo, '--copy', 'build', '--exclude', 'build/', '--json')).declarations).toEqual(['build']);
    expect(json(cli(store, 'capture', repo, '--exclude', 'build/', '--json')).declarations).toContain('build');
    r = cli(store, 'capture', repo, '--exclude-from', join(work, 'missing'));
    expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_UNAVAILABLE: cannot read --exclude-from file ${join(work, 'missing')}: ENOENT: no such file or directory, open '${join(work, 'missing')}'\n`]);
    writeFileSync(patterns, Buffer.from([0x62, 0xff, 0x0a]));
    r = cli(store, 'capture', repo, '--exclude-from', patterns);
    expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_BAD_PATH: --exclude-from file is not valid UTF-8: ${patterns}\n`]);
  });

  it('captures a tree a running build keeps appending to, with the build output left out', async () => {
    const { repo, store } = setup();
    mkdirSync(join(repo, 'build'));
    const log = join(repo, 'build/out.log');
    writeFileSync(log, '');
    const appender = spawn(process.execPath, ['-e', "const fs = require('fs'); const fd = fs.openSync(process.argv[1], 'a'); setInterval(() => fs.writeSync(fd, 'compiling...\\n'), 1);", log], { stdio: 'ignore' });
    const exited = new Promise((resolve) => appender.on('exit', resolve));
    try {
      for (let i = 0; i < 500 && statSync(log).size === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(statSync(log).size).toBeGreaterThan(0);
      const changing = cli(store, 'capture', repo, '--mount', 'node_modules', '--retries', '0');
      expect([changing.status, changing.stderr]).toEqual([1, 'treeseal: SEAL_CHANGED: file changed while snapshotting: build/out.log\n']);
      const before = statSync(log).size;
      const captured = json(cli(store, 'capture', repo, '--mount', 'node_modules', '--exclude', 'build/', '--retries', '0', '--json'));
      expect(captured.declarations).toEqual(['README', 'src']);
      expect(statSync(log).size).toBeGreaterThan(before);
    } finally {
      appender.kill();
      await exited;
    }
  });
});

describe('every obstacle on its own line', { timeout: CLI_TIMEOUT_MS }, () => {
  it('a link in a copy root, a FIFO and a mount link that escapes, each with the flag that gets past it', () => {
    const { repo, store } = setup();
    symlinkSync('a.ts', join(repo, 'src/alias.ts'));
    mkfifo(join(repo, 'src/lib/pipe'));
    symlinkSync('/usr/bin/node', join(repo, 'node_modules/node'));
    const r = cli(store, 'capture', repo, '--mount', 'node_modules');
    expect([r.status, r.stdout, r.stderr]).toEqual([
      1,
      '',
      'treeseal: SEAL_SYMLINK: capture must not traverse a symlink: src/alias.ts (in copy root src: declare src as a mount (--mount src) or leave it out), and 2 more obstacles\n' +
        '  src/alias.ts: a symlink in copy root src: --links contained keeps it, --mount src captures src as a mount, --exclude /src/alias.ts leaves it out\n' +
        '  src/lib/pipe: a FIFO: --exclude /src/lib/pipe leaves it out\n' +
        '  node_modules/node: a mount symlink that dangles or leads out of its payload or the workspace: --exclude /node_modules/node leaves it out\n',
    ]);
    const fixed = cli(store, 'capture', repo, '--mount', 'node_modules', '--exclude', '/src/alias.ts', '--exclude', '/src/lib/pipe', '--exclude', '/node_modules/node');
    expect([fixed.status, fixed.stderr]).toEqual([0, '']);
  });
});

describe('capture --max-*', { timeout: CLI_TIMEOUT_MS }, () => {
  it('each limit has its flag; a count that is not one is a usage error', () => {
    const { repo, store } = setup();
    const refused = (flag: string, n: string): [number, string] => {
      const r = cli(store, 'capture', repo, '--copy', 'src', `--max-${flag}`, n);
      return [r.status, r.stderr];
    };
    expect(refused('entries', '3')).toEqual([1, 'treeseal: SEAL_LIMIT: capture exceeds the entry limit (3 entries): src/lib/b.ts (raise it with --max-entries N, or leave paths out with --exclude)\n']);
    expect(refused('bytes', '8')).toEqual([1, 'treeseal: SEAL_LIMIT: capture exceeds the total byte limit (8 bytes): src/lib/b.ts (raise it with --max-bytes SIZE, or leave paths out with --exclude)\n']);
    // The byte limits take a size as gc's --max-size does.
    expect(refused('bytes', '0.001K')).toEqual([1, 'treeseal: SEAL_LIMIT: capture exceeds the total byte limit (1 bytes): src/a.ts (raise it with --max-bytes SIZE, or leave paths out with --exclude)\n']);
    expect(refused('file-bytes', '0.004KiB')).toEqual([1, 'treeseal: SEAL_LIMIT: file exceeds the per-file limit (4 bytes): src/a.ts (raise it with --max-file-bytes SIZE, or leave paths out with --exclude)\n']);
    expect(refused('file-bytes', '4')).toEqual([1, 'treeseal: SEAL_LIMIT: file exceeds the per-file limit (4 bytes): src/a.ts (raise it with --max-file-bytes SIZE, or leave paths out with --exclude)\n']);
    expect(refused('path-bytes', '8')).toEqual([1, 'treeseal: SEAL_LIMIT: capture exceeds the path byte limit (8 bytes): src/lib/b.ts (raise it with --max-path-bytes N, or leave paths out with --exclude)\n']);
    expect(refused('depth', '2')).toEqual([1, 'treeseal: SEAL_LIMIT: capture exceeds the depth limit (2 levels): src/lib/b.ts (raise it with --max-depth N, or leave paths out with --exclude)\n']);
    const ok = cli(store, 'capture', repo, '--copy', 'src', '--max-entries', '4', '--max-bytes', '9', '--max-file-bytes', '5', '--max-path-bytes', '12', '--max-depth', '3', '--json');
    expect(json(ok).entries).toBe(4);
    const bad = cli(store, 'capture', repo, '--max-depth', 'deep');
    expect([bad.status, bad.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --max-depth takes a count, not "deep"']);
    const help = cli(store, 'help', 'capture').stdout;
    for (const line of ['--exclude PATTERN', '--exclude-from FILE', '--max-entries N', '--max-bytes N', '--max-file-bytes N', '--max-path-bytes N', '--max-depth N']) expect(help).toContain(`\n  ${line} `);
    expect(help).toContain('most path components below <source> (default 256)');
  });
});
