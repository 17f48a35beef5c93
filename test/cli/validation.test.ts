// validation.test.ts: input the CLI and the library must refuse cleanly: repeated flags, missing stores, hostile names, wrong option types.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { expectError, listTree, tempDir, writeTree } from '../helpers.js';
import { CLI, CLI_TIMEOUT_MS, cli, json, setup } from './run-cli.js';

describe('refused input', { timeout: CLI_TIMEOUT_MS }, () => {
  it('a single-valued flag given twice is a usage error (exit 2), not last-wins', () => {
    const { work, repo, store } = setup();
    const a = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    mkdirSync(join(work, 'clone'));
    const r = cli(store, 'materialize', a.digest, join(work, 'clone'), '--reflink', 'always', '--reflink', 'never');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^treeseal: --reflink is given more than once\n/);
    expect(existsSync(join(work, 'clone/src'))).toBe(false);
  });

  it("a value that starts with a dash is Node's three-line usage error, its line breaks kept (they were shown as \\x0a); a control character in a value is still escaped", () => {
    const { store } = setup();
    for (const [option, value] of [['--keep-last', '-1'], ['--max-size', '-1'], ['--older-than', '-1d']] as const) {
      const r = cli(store, 'gc', option, value);
      expect([r.status, r.stderr.split('\n').slice(0, 3)]).toEqual([
        2,
        [
          `treeseal: Option '${option}' argument is ambiguous.`,
          `Did you forget to specify the option argument for '${option}'?`,
          `To specify an option argument starting with a dash use '${option}=-XYZ'.`,
        ],
      ]);
    }
    const escaped = cli(store, 'gc', '--keep-last', '\x1b[31m\n');
    expect([escaped.status, escaped.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --keep-last takes a count, not "\\u001b[31m\\n"']);
  });

  it('push, pull and cat with the digest and the remote swapped: a usage error saying where the digest goes, before any store or network', () => {
    const work = tempDir();
    const store = join(work, 'store');
    const digest = 'a'.repeat(64);
    const remote = '127.0.0.1:9/team/repo';
    const cases: [string[], string][] = [
      [['pull', remote, digest], 'pull takes <digest> <remote>: the digest is the first argument, not the second'],
      [['push', remote, digest], 'push takes <digest> <remote>: the digest is the first argument, not the second'],
      [['cat', digest, remote, 'src/a.ts'], 'cat takes <remote> <digest> <path>: the digest is the second argument, not the first'],
    ];
    for (const [args, message] of cases) {
      const r = cli(store, ...args);
      expect([r.status, r.stdout, r.stderr.split('\n')[0], r.stderr.split('\n')[1]!.startsWith(`usage: treeseal ${args[0]} `)]).toEqual([2, '', `treeseal: ${message}`, true]);
    }
    expect(existsSync(store)).toBe(false);
    // In order, a digest prefix still goes to the store (push takes one).
    expect(cli(store, 'push', 'abc', remote)).toMatchObject({ status: 1, stderr: expect.stringMatching(/^treeseal: SEAL_UNAVAILABLE: /) });
  });

  it('only capture and pull create a missing store: every other command fails and leaves nothing (rm, du, gc, materialize, reset once made one)', () => {
    const work = tempDir();
    const clone = join(work, 'clone');
    // (ls, verify, show and mounts are met again below, on an empty directory.)
    for (const args of [['ls'], ['rm', '0000'], ['du'], ['gc'], ['materialize', '00', clone], ['reset', '00', clone], ['run', '00', clone, '--', 'true']]) {
      const store = join(work, 'missing/deep/store');
      const r = cli(store, ...args);
      // run's failures of its own are 125 (its other statuses are its command's).
      expect(r.status).toBe(args[0] === 'run' ? 125 : 1);
      expect(r.stderr).toBe(`treeseal: SEAL_UNAVAILABLE: no store at ${store} (from $TREESEAL_STORE)\n`);
      expect(existsSync(join(work, 'missing'))).toBe(false);
    }
    // An empty directory is no store either: opening it would make one, which a read-only command must not.
    const empty = join(work, 'empty');
    mkdirSync(empty);
    for (const args of [['ls'], ['verify'], ['show', 'abc'], ['mounts', 'abc', join(work, 'clone')]]) {
      const r = cli(empty, ...args);
      expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_UNAVAILABLE: no store at ${empty} (from $TREESEAL_STORE)\n`]);
      expect(readdirSync(empty)).toEqual([]);
    }
  });

  it('a relative --store or $TREESEAL_STORE is taken from the current directory, as every path argument is; a relative $XDG_CACHE_HOME is ignored (the XDG spec); an empty --store is a usage error', () => {
    const { work, repo } = setup();
    const run = (args: string[], env: Record<string, string | undefined>): { status: number | null; stdout: string; stderr: string } => {
      const clean = { ...process.env, TREESEAL_STORE: undefined, XDG_CACHE_HOME: undefined, ...env };
      return spawnSync(process.execPath, [CLI, ...args], { cwd: work, encoding: 'utf8', env: clean as NodeJS.ProcessEnv });
    };
    const made = run(['capture', repo, '--copy', 'src', '--store', 'rel-store', '--json'], {});
    expect([made.status, made.stderr]).toEqual([0, '']);
    const digest = JSON.parse(made.stdout).digest as string;
    expect(readdirSync(join(work, 'rel-store/snapshots'))).toEqual([digest]);
    expect(run(['ls', '--json'], { TREESEAL_STORE: 'rel-store' }).stdout).toContain(digest);
    expect(run(['ls', '--json', '--store', './rel-store/'], {}).stdout).toContain(digest);
    // XDG_CACHE_HOME=rel-cache is no cache home: the store is $HOME/.cache/treeseal, and nothing is made below rel-cache.
    const home = join(work, 'home');
    const xdg = run(['capture', repo, '--copy', 'src', '--json'], { XDG_CACHE_HOME: 'rel-cache', HOME: home });
    expect([xdg.status, xdg.stderr]).toEqual([0, '']);
    expect(readdirSync(join(home, '.cache/treeseal/snapshots'))).toEqual([digest]);
    expect(existsSync(join(work, 'rel-cache'))).toBe(false);
    const empty = run(['ls', '--store', ''], {});
    expect(empty.status).toBe(2);
    expect(empty.stderr).toMatch(/^treeseal: --store needs a directory, not an empty string\nusage: treeseal ls/);
    // An empty or relative $HOME names no place either: the password database's home is used, and said (it was taken from the current directory).
    const passwdStore = join(userInfo().homedir, '.cache/treeseal');
    for (const HOME of ['', 'rel-home']) {
      const r = run(['ls', '--store', join(work, 'nowhere'), '--json'], { HOME });
      expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_UNAVAILABLE: no store at ${join(work, 'nowhere')} (given by --store)\n`]);
      const byHome = run(['ls'], { HOME });
      if (existsSync(join(passwdStore, 'snapshots'))) expect([byHome.status, byHome.stderr]).toEqual([0, '']);
      else expect([byHome.status, byHome.stderr]).toEqual([1, `treeseal: SEAL_UNAVAILABLE: no store at ${passwdStore} (from the password database's home: $HOME is not an absolute path)\n`]);
      expect(existsSync(join(work, HOME, '.cache'))).toBe(false);
    }
  });

  it('a working directory removed under the shell is said as such, not as a bare ENOENT … uv_cwd; absolute paths still work there', () => {
    const { work, repo } = setup();
    const gone = join(work, 'gone');
    const inGone = (...args: string[]) => {
      mkdirSync(gone, { recursive: true });
      return spawnSync('bash', ['-c', 'cd "$1" && rmdir "$1" && shift && exec "$@"', 'bash', gone, process.execPath, CLI, ...args], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: undefined } });
    };
    const said = 'treeseal: SEAL_UNAVAILABLE: the working directory no longer exists (it was removed after the shell entered it): cd to one that does, or give absolute paths\n';
    for (const args of [['capture', './x', '--store', join(work, 'store')], ['ls', '--store', 'rel']]) {
      const r = inGone(...args);
      expect([r.status, r.stdout, r.stderr], args.join(' ')).toEqual([1, '', said]);
    }
    expect(existsSync(join(work, 'store'))).toBe(false);
    const absolute = inGone('capture', repo, '--copy', 'src', '--store', join(work, 'store'), '--json');
    expect([absolute.status, absolute.stderr]).toEqual([0, '']);
  });

  it('a store path that passes a symlink (a home under /home -> /var/home) is refused naming where it came from and the same place without links, and nothing is made there', () => {
    const { work, repo } = setup();
    const real = join(work, 'var-home');
    mkdirSync(real);
    symlinkSync(real, join(work, 'home'));
    const run = (args: string[], env: Record<string, string | undefined>) =>
      spawnSync(process.execPath, [CLI, ...args], { cwd: work, encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: undefined, XDG_CACHE_HOME: undefined, ...env } as NodeJS.ProcessEnv });
    const why = (path: string, from: string, without: string) =>
      `treeseal: SEAL_SYMLINK: store directory must not traverse symlinks: ${path} (${from}); the same place without links is ${without}: give that as --store or $TREESEAL_STORE\n`;
    const byHome = run(['capture', repo, '--copy', 'src'], { HOME: join(work, 'home') });
    expect([byHome.status, byHome.stderr]).toEqual([1, why(join(work, 'home/.cache/treeseal'), 'from $HOME', join(real, '.cache/treeseal'))]);
    const byEnv = run(['capture', repo, '--copy', 'src'], { TREESEAL_STORE: join(work, 'home/store') });
    expect([byEnv.status, byEnv.stderr]).toEqual([1, why(join(work, 'home/store'), 'from $TREESEAL_STORE', join(real, 'store'))]);
    const byOption = run(['capture', repo, '--copy', 'src', '--store', join(work, 'home/a/b')], {});
    expect([byOption.status, byOption.stderr]).toEqual([1, why(join(work, 'home/a/b'), 'given by --store', join(real, 'a/b'))]);
    // A trailing slash is the same path; a dangling link has no place to name: the refusal alone.
    const slashed = run(['capture', repo, '--copy', 'src', '--store', `${join(work, 'home/a/b')}/`], {});
    expect([slashed.status, slashed.stderr]).toEqual([1, why(join(work, 'home/a/b'), 'given by --store', join(real, 'a/b'))]);
    symlinkSync(join(work, 'nowhere'), join(work, 'dangling'));
    const dangling = run(['capture', repo, '--copy', 'src', '--store', join(work, 'dangling/store')], {});
    expect([dangling.status, dangling.stderr]).toEqual([1, `treeseal: SEAL_SYMLINK: store directory must not traverse symlinks: ${join(work, 'dangling/store')}\n`]);
    expect(readdirSync(real)).toEqual([]);
    // The path it names is one that works.
    expect(run(['capture', repo, '--copy', 'src', '--store', join(real, 'store')], {}).status).toBe(0);
  });

  it('capture says when the stat cache could not be saved, and why (the next capture reads every file); --json has it as statCacheNotSaved', () => {
    const { repo, store } = setup();
    json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    // The stat cache, not the snapshot's summary record beside it.
    const [name] = readdirSync(join(store, 'cache')).filter((n) => n.endsWith('.bin'));
    rmSync(join(store, 'cache', name!));
    mkdirSync(join(store, 'cache', name!, 'in-the-way'), { recursive: true });
    writeFileSync(join(repo, 'src/new.ts'), 'new');
    const text = cli(store, 'capture', repo, '--copy', 'src');
    expect([text.status, text.stderr]).toEqual([0, '']);
    expect(text.stdout).toMatch(new RegExp(`\\n  cache     not saved \\(the next capture reads every file\\): EISDIR: illegal operation on a directory, renameat2 'build-cache-[0-9a-f]{24}' -> '${name}'\\n  root      `));
    writeFileSync(join(repo, 'src/newer.ts'), 'newer');
    expect(json(cli(store, 'capture', repo, '--copy', 'src', '--json')).statCacheNotSaved).toMatch(/^EISDIR: /);
    rmSync(join(store, 'cache', name!), { recursive: true });
    const quiet = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    expect('statCacheNotSaved' in quiet).toBe(false);
  });

  it('show, ls and diff escape control characters in names', () => {
    const { repo, store } = setup();
    writeFileSync(join(repo, 'src/evil\nfile \x1b[31m'), 'x');
    const a = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    const shown = cli(store, 'show', a.digest).stdout;
    expect(shown).toContain('src/evil\\x0afile \\x1b[31m');
    expect(shown).not.toContain('\x1b');
    expect(shown.split('\n').filter((l) => l.includes('evil'))).toHaveLength(1);
  });

  it('ls tells one copy root holding a comma from two (--copy a,b printed as --copy a --copy b did), and a bracket in a root cannot close the list early', () => {
    const { repo, store } = setup();
    writeTree(repo, { 'a,b/x': 'x', a: 'a', b: 'b', 'c]  @forged/y': 'y' });
    const one = json(cli(store, 'capture', repo, '--copy', 'a,b', '--json')).digest as string;
    const two = json(cli(store, 'capture', repo, '--copy', 'a', '--copy', 'b', '--json')).digest as string;
    const bracket = json(cli(store, 'capture', repo, '--copy', 'c]  @forged', '--mount', 'src:lib,x', '--json')).digest as string;
    const lines = cli(store, 'ls').stdout.split('\n');
    const line = (digest: string): string => lines.find((l) => l.startsWith(digest.slice(0, 12)))!;
    expect(line(one)).toMatch(/ \[a\\,b\]$/);
    expect(line(two)).toMatch(/ \[a,b\]$/);
    expect(line(bracket)).toMatch(/ \[c\\\]  @forged,mount:lib\\,x\]$/);
    // A copy root named as a mount's item is not one.
    writeTree(repo, { 'mount:lib/z': 'z' });
    const named = json(cli(store, 'capture', repo, '--copy', 'mount:lib', '--json')).digest as string;
    const mounted = json(cli(store, 'capture', repo, '--copy', 'a', '--mount', 'src:mount:lib', '--json')).digest as string;
    const again = cli(store, 'ls').stdout.split('\n');
    expect(again.find((l) => l.startsWith(named.slice(0, 12)))).toMatch(/ \[mount\\:lib\]$/);
    expect(again.find((l) => l.startsWith(mounted.slice(0, 12)))).toMatch(/ \[a,mount:mount:lib\]$/);
  });

  it('--json escapes what a terminal acts on or hides (DEL, C1 controls such as U+009B, U+2028, a right-to-left override): the same document, nothing raw', () => {
    const { repo, store } = setup();
    const name = 'src/e\x7fv\u009b31mil\u2028x\u202ey\u200b';
    writeFileSync(join(repo, name), 'x');
    const r = cli(store, 'capture', repo, '--copy', 'src', '--revision', 'r\u009b2J', '--json');
    expect([r.status, r.stderr]).toEqual([0, '']);
    expect(r.stdout).not.toMatch(/[\u007f-\u009f\u2028\u2029\u202e\u200b]/u);
    expect(r.stdout).toContain('"revision": "r\\u009b2J"');
    const digest = (JSON.parse(r.stdout) as { digest: string; revision: string }).digest;
    expect((JSON.parse(r.stdout) as { revision: string }).revision).toBe('r\u009b2J');
    const shown = cli(store, 'show', digest, '--json').stdout;
    expect(shown).toContain('"path": "src/e\\u007fv\\u009b31mil\\u2028x\\u202ey\\u200b"');
    expect((JSON.parse(shown) as { entries: { path: string }[] }).entries.map((e) => e.path)).toContain(name);
    // Plain non-ASCII text stays as it is.
    writeFileSync(join(repo, 'src/café-日本'), 'y');
    const again = cli(store, 'capture', repo, '--copy', 'src', '--json');
    expect(cli(store, 'show', (JSON.parse(again.stdout) as { digest: string }).digest, '--json').stdout).toContain('"path": "src/café-日本"');
  });

  it('capture, materialize, reset, freeze and thaw escape control characters in the source, store and clone paths they print (a terminal escape or a newline there was printed raw: a forged line, a retitled terminal)', () => {
    const { work } = setup();
    const evil = 'ev\x1b[31mil\nforged line \x1b]0;TITLE\x07';
    const shownEvil = 'ev\\x1b[31mil\\x0aforged line \\x1b]0;TITLE\\x07';
    const repo = join(work, `repo-${evil}`);
    writeTree(repo, { 'src/a.ts': 'alpha' });
    const store = join(work, `store-${evil}`);
    const clone = join(work, `clone-${evil}`);
    const outputs: string[] = [];
    const run = (...args: string[]): string => {
      const r = cli(store, ...args);
      expect([args[0], r.status, r.stderr]).toEqual([args[0], 0, '']);
      outputs.push(r.stdout);
      return r.stdout;
    };
    const captured = run('capture', repo, '--copy', 'src');
    expect(captured.split('\n')[0]).toBe(`captured ${join(work, 'repo-')}${shownEvil}`);
    expect(captured).toContain(`  root      ${join(work, 'store-')}${shownEvil}/snapshots/`);
    const digest = /digest {4}([0-9a-f]{64})/.exec(captured)![1]!;
    expect(run('materialize', digest, clone, '--reflink', 'never')).toContain(` into ${join(work, 'clone-')}${shownEvil}: 1 file`);
    writeFileSync(join(clone, 'src/a.ts'), 'changed');
    expect(run('reset', digest, clone, '--reflink', 'never')).toContain(` in ${join(work, 'clone-')}${shownEvil}: `);
    expect(run('freeze', clone)).toBe(`froze ${join(work, 'clone-')}${shownEvil}\n`);
    expect(run('thaw', clone)).toBe(`thawed ${join(work, 'clone-')}${shownEvil}\n`);
    for (const out of outputs) {
      // No control character but the newlines that end lines.
      expect(out).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f]/);
    }
  });

  it('--fallback-bytes takes a byte count or a size (2G), as --max-bytes does; anything else is a usage error', () => {
    const { work, repo, store } = setup();
    const digest = json(cli(store, 'capture', repo, '--copy', 'src', '--json')).digest as string;
    // The clone on the store's filesystem here (ext4 or tmpfs: no reflink): every byte is copied, 9 in all.
    const over = cli(store, 'materialize', digest, join(work, 'one'), '--fallback-bytes', '8');
    expect([over.status, over.stderr.split('\n')[0]]).toEqual([1, expect.stringMatching(/^treeseal: SEAL_NO_REFLINK: .*the buffered fallback limit would be exceeded \(8 bytes; /)]);
    for (const size of ['9', '1K', '1KiB', '2G', '0.5k']) {
      const r = cli(store, 'materialize', digest, join(work, `arm-${size}`), '--fallback-bytes', size, '--reflink', 'auto');
      expect([size, r.status]).toEqual([size, 0]);
    }
    for (const bad of ['2GB?', '-1', '1.5', 'lots']) {
      const r = cli(store, 'reset', digest, join(work, 'arm-9'), `--fallback-bytes=${bad}`);
      expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, `treeseal: --fallback-bytes takes a size such as 500M, 50G or 1TiB, not ${JSON.stringify(bad)}`]);
    }
  });

  it('a top-level name that is not UTF-8 is SEAL_BAD_PATH in a whole-source capture', () => {
    const { repo, store } = setup();
    writeFileSync(Buffer.concat([Buffer.from(`${repo}/`), Buffer.from([0x66, 0xff, 0x6f])]), 'x');
    const r = cli(store, 'capture', repo);
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('treeseal: SEAL_BAD_PATH: path is not valid UTF-8: f\\xffo\n  f\\xffo: a name that is not valid UTF-8 (a manifest holds UTF-8 paths): rename it, or --exclude \'/f?o\' leaves it out\n');
  });

  it('the library refuses a NUL or non-canonical workspace, a non-boolean ephemeral and a non-function onProgress', async () => {
    const root = tempDir();
    writeTree(root, { 'repo/a': 'a' });
    const source = join(root, 'repo');
    expect(() => SnapshotStore.openSync(join(root, 's1'), { ephemeral: 'yes' as unknown as boolean })).toThrow(
      expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }),
    );
    const store = SnapshotStore.openSync(join(root, 'store'), { ephemeral: true });
    for (const workspace of ['/work\0space', '/work/../etc', '/work//x', '/work/./x']) {
      expectError(() => store.captureSync({ source, copy: ['a'], workspace }), { code: 'SEAL_BAD_PATH', unchanged: join(root, 'store') });
    }
    expectError(() => store.captureSync({ source, copy: ['a'], onProgress: 42 as unknown as () => void }), { code: 'ERR_INVALID_ARG_TYPE' });
    const snap = store.captureSync({ source, copy: ['a'] });
    await expectError(async () => snap.materialize(join(root, 'repo'), { onProgress: 'x' as unknown as () => void }), { code: 'ERR_INVALID_ARG_TYPE' });
    await expectError(async () => snap.verify({ onProgress: 1 as unknown as () => void }), { code: 'ERR_INVALID_ARG_TYPE' });
    await store.close();
  });
});

describe('treeseal verify --clone and gc --clone', { timeout: CLI_TIMEOUT_MS }, () => {
  it('names every difference in a clone, escaped, and exits 1; gc --clone sweeps dead stages', () => {
    const { work, repo, store } = setup();
    const digest = json(cli(store, 'capture', repo, '--copy', 'src', '--json')).digest as string;
    const clone = join(work, 'clone');
    mkdirSync(clone);
    expect(cli(store, 'materialize', digest, clone).status).toBe(0);
    const clean = cli(store, 'verify', digest, '--clone', clone);
    expect([clean.status, clean.stdout]).toEqual([0, `ok  ${clone}: 0 added, 0 removed, 0 changed\n`]);
    writeFileSync(join(clone, 'src/a.ts'), 'changed');
    writeFileSync(join(clone, 'src/evil\nok  forged'), 'x');
    // A right-to-left override would show the name reversed: escaped as the control characters are.
    writeFileSync(join(clone, 'src/\u202etxt.exe'), 'x');
    // A zero-width space or a byte-order mark shows nothing: escaped, so two names never print alike.
    writeFileSync(join(clone, 'src/a.t\u200bs'), 'x');
    writeFileSync(join(clone, 'src/\ufeffb'), 'x');
    const dirty = cli(store, 'verify', digest, '--clone', clone);
    expect([dirty.status, dirty.stdout]).toEqual([1, `+ src/a.t\\u200bs\n+ src/evil\\x0aok  forged\n+ src/\\u202etxt.exe\n+ src/\\ufeffb\n~ src/a.ts\nDIFFERS  ${clone}: 4 added, 0 removed, 1 changed\n`]);
    mkdirSync(join(clone, '.treeseal-materialize-dead'));
    expect(cli(store, 'gc', '--clone', clone).stdout).toBe('swept 1 stale item\n');
    expect(existsSync(join(clone, '.treeseal-materialize-dead'))).toBe(false);
  });
});

describe('treeseal arguments as the kernel passed them', { timeout: CLI_TIMEOUT_MS }, () => {
  it('a clone path that is not UTF-8 is SEAL_BAD_PATH naming its bytes, and nothing is made (c\\xff and c\\xfe never meet in c\\uFFFD)', () => {
    const { work, repo, store } = setup();
    const digest = json(cli(store, 'capture', repo, '--copy', 'src', '--json')).digest as string;
    for (const byte of ['ff', 'fe']) {
      // Node's spawn encodes arguments as UTF-8: bash passes the raw byte.
      const r = spawnSync('bash', ['-c', `exec "$0" "$1" materialize "$2" "$3"$'\\x${byte}'`, process.execPath, CLI, digest, join(work, 'c')], {
        encoding: 'utf8',
        env: { ...process.env, TREESEAL_STORE: store },
      });
      expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_BAD_PATH: argument 3 is not valid UTF-8: ${join(work, 'c')}\\x${byte}\n`]);
      // run's own failures are 125: a word of its command's that is not UTF-8 too.
      const run = spawnSync('bash', ['-c', `exec "$0" "$1" run "$2" "$3" -- echo $'\\x${byte}'`, process.execPath, CLI, digest, join(work, 'c')], {
        encoding: 'utf8',
        env: { ...process.env, TREESEAL_STORE: store },
      });
      expect([run.status, run.stderr]).toEqual([125, `treeseal: SEAL_BAD_PATH: argument 6 is not valid UTF-8: \\x${byte}\n`]);
    }
    expect(readdirSync(work).sort()).toEqual(['repo', 'store']);
  });

  it('a TREESEAL_STORE that is not UTF-8 is SEAL_BAD_PATH naming its bytes, and no store is made (s\\xff and s\\xfe never meet)', () => {
    const { work, repo } = setup();
    for (const byte of ['ff', 'fe']) {
      const r = spawnSync('bash', ['-c', `TREESEAL_STORE="$2"$'\\x${byte}' exec "$0" "$1" capture "$3" --copy src`, process.execPath, CLI, join(work, 's'), repo], { encoding: 'utf8' });
      expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_BAD_PATH: environment variable TREESEAL_STORE is not valid UTF-8: ${join(work, 's')}\\x${byte}\n`]);
    }
    expect(readdirSync(work).sort()).toEqual(['repo']);
  });

  it('--workspace must be an absolute canonical path', () => {
    const { work, repo, store } = setup();
    const digest = json(cli(store, 'capture', repo, '--copy', 'src', '--mount', 'node_modules', '--json')).digest as string;
    const clone = join(work, 'clone');
    expect(cli(store, 'materialize', digest, clone).status).toBe(0);
    const before = listTree(clone);
    for (const [workspace, why] of [
      ['', 'workspace must be an absolute path: '],
      ['relative', 'workspace must be an absolute path: relative'],
      ['/a/../b', 'workspace must be a canonical absolute path: /a/../b'],
      ['//ws', 'workspace must be a canonical absolute path: //ws'],
    ]) {
      const r = cli(store, 'mounts', digest, clone, '--workspace', workspace!);
      expect([r.status, r.stdout, r.stderr]).toEqual([1, '', `treeseal: SEAL_BAD_PATH: ${why}\n`]);
    }
    expect(listTree(clone)).toEqual(before);
    expect(json(cli(store, 'mounts', digest, clone, '--workspace', '/ws/', '--json'))[0].target).toBe('/ws/node_modules');
  });
});
