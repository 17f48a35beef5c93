// cli.test.ts: the treeseal command run as a subprocess: output, JSON, exit codes, progress, concurrency.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../dist/index.js';
import { SETTLED, writeTree } from '../helpers.js';
import { CLI_TIMEOUT_MS, CLI, cli, json, setup } from './run-cli.js';

describe('treeseal CLI', { timeout: CLI_TIMEOUT_MS }, () => {
  it('capture, ls, show, materialize, verify, diff, rm, gc: human and JSON output', () => {
    const { work, repo, store } = setup();
    const human = cli(store, 'capture', repo, '--copy', 'src', '--revision', 'r1');
    expect(human.status).toBe(0);
    expect(human.stderr).toBe('');
    expect(human.stdout).toMatch(new RegExp(`^captured ${repo}\\n  digest    [0-9a-f]{64}\\n  manifest  [0-9a-f]{64}\\n  entries   4\\n  bytes     9 \\(9 B\\)\\n  reused    0 of 2 files unchanged \\(stat cache\\)\\n  root      ${store}/snapshots/[0-9a-f]{64}\\n$`));
    const a = json(cli(store, 'capture', repo, '--copy', 'src', '--revision', 'r1', '--json'));
    expect(a).toMatchObject({ declarations: ['src'], revision: 'r1', entries: 4, totalBytes: 9, source: repo, files: 2, built: false });
    writeFileSync(join(repo, 'src/a.ts'), 'ALPHA!');
    writeFileSync(join(repo, 'src/new.ts'), 'new');
    const b = json(cli(store, 'capture', repo, '--copy', 'src', '--mount', 'node_modules', '--revision', 'r2', '--json'));
    expect(b.mounts).toEqual([{ source: 'node_modules', target: 'node_modules', kind: 'directory', entries: 4 }]);

    const list = json(cli(store, 'ls', '--json'));
    expect(list.map((s: { digest: string }) => s.digest).sort()).toEqual([a.digest, b.digest].sort());
    expect(cli(store, 'ls').stdout).toContain(`${a.digest.slice(0, 12)}        4 entries         9 B  ${repo}  [src]  @r1`);

    const shown = json(cli(store, 'show', a.digest.slice(0, 10), '--json'));
    expect(shown.entries.map((e: { path: string }) => e.path)).toEqual(['src', 'src/a.ts', 'src/lib', 'src/lib/b.ts']);
    expect(cli(store, 'show', a.digest).stdout).toContain('file      0000          5 ');

    const clone = join(work, 'clone');
    mkdirSync(clone);
    const m = json(cli(store, 'materialize', a.digest, clone, '--json'));
    expect(m).toMatchObject({ digest: a.digest, clone, files: 2, directories: 2, copied: 2, reflinked: 0, bytesCopied: 9 });
    expect(readFileSync(join(clone, 'src/a.ts'), 'utf8')).toBe('alpha');
    expect(m.copyReason).toMatch(/^the filesystems cannot share extents \(store on \w+, clone on \w+\)$/);
    const again = cli(store, 'materialize', a.digest, join(work, 'clone2'));
    expect(again.stdout).toMatch(/^materialized [0-9a-f]{12} into .*: 2 files, 2 directories \(0 reflinked, 2 copied, 9 B buffered\) in \d+ ms\n$/);
    // --reflink auto (the default) that had to copy says so on stderr, once (--json: in copyReason); never asked for copies and is quiet.
    expect(again.stderr).toBe(`treeseal: warning: 2 files copied, not reflinked: ${m.copyReason}; --reflink never copies without this warning\n`);
    expect(cli(store, 'materialize', a.digest, join(work, 'clone3'), '--reflink', 'never').stderr).toBe('');
    writeFileSync(join(clone, 'src/a.ts'), 'ALPHA');
    writeFileSync(join(clone, 'src/added'), '+');
    let r = cli(store, 'diff', a.digest, clone);
    expect([r.status, r.stdout]).toEqual([1, `+ src/added\n~ src/a.ts\nDIFFERS (ledger)  ${clone}: 1 added, 0 removed, 1 changed\n`]);
    expect(cli(store, 'reset', a.digest, clone).stdout).toMatch(/^\+ src\/added\n~ src\/a\.ts\nreset [0-9a-f]{12} in .*: 1 removed as added, 1 restored; 1 file made \(0 reflinked, 1 copied, 5 B buffered\) in [\d.]+ m?s\n$/);
    r = cli(store, 'diff', a.digest, clone, '--verify', '--json');
    expect([r.status, json(r)]).toMatchObject([0, { ok: true, method: 'hash', files: 2 }]);
    expect(cli(store, 'materialize', a.digest, clone).stdout).toMatch(/^reset \(the clone held its ledger: only what differed was made again\) [0-9a-f]{12} into .*: 0 files, 0 directories/);
    // Without the ledger, reset materializes whole: nothing was compared, and it says so rather than "0 restored".
    writeFileSync(join(clone, 'src/added'), '+');
    for (const name of readdirSync(join(store, 'clones'))) rmSync(join(store, 'clones', name));
    expect(cli(store, 'reset', a.digest, clone, '--reflink', 'never').stdout).toMatch(/^materialized whole \(the store holds no ledger of this clone, or a materialize was interrupted there\) [0-9a-f]{12} in .*: what differed is not known; 2 files made \(0 reflinked, 2 copied, 9 B buffered\) in [\d.]+ m?s\n$/);
    expect(existsSync(join(clone, 'src/added'))).toBe(false);

    const v = json(cli(store, 'verify', '--json'));
    expect(v.ok).toBe(true);
    expect(v.snapshots).toHaveLength(2);
    expect(cli(store, 'verify', a.digest).stdout).toBe(`ok   ${a.digest}  4 entries, 9 B\n1 ok, 0 corrupt\n`);

    const dr = cli(store, 'diff', a.digest, b.digest, '--json');
    expect([dr.status, dr.stderr]).toEqual([1, '']);
    const d = JSON.parse(dr.stdout);
    expect(d.added).toContain('src/new.ts');
    expect(d.added).toContain('[mount node_modules] payload/p/index.js');
    expect(d.changed).toEqual(['src/a.ts']);
    expect(d.removed).toEqual([]);
    expect(cli(store, 'diff', a.digest, b.digest).stdout).toMatch(/~ src\/a\.ts\n5 added, 0 removed, 1 changed\n$/);
    expect(cli(store, 'diff', a.digest, a.digest)).toEqual({ status: 0, stdout: '0 added, 0 removed, 0 changed\n', stderr: '' });

    expect(json(cli(store, 'gc', '--json'))).toEqual({ swept: 0 });
    expect(cli(store, 'rm', b.digest).stdout).toBe(`removed ${b.digest}\n`);
    expect(json(cli(store, 'ls', '--json')).map((s: { digest: string }) => s.digest)).toEqual([a.digest]);
    expect(readdirSync(join(store, 'tmp'))).toEqual([]);
  });

  it('captures every top-level entry when no root is named, and freezes and thaws', () => {
    const { work, repo, store } = setup();
    const snap = json(cli(store, 'capture', repo, '--json'));
    expect(snap.declarations).toEqual(['README', 'node_modules', 'src']);
    const dir = join(work, 'frozen');
    writeTree(dir, { f: 'x' });
    expect(json(cli(store, 'freeze', dir, '--json'))).toEqual({ frozen: dir });
    expect(cli(store, 'thaw', dir).stdout).toBe(`thawed ${dir}\n`);
  });

  it('exit codes: 1 with the code on stderr for a SealError, 2 with usage for a usage error', () => {
    const { repo, store, work } = setup();
    let r = cli(store, 'capture', repo, '--copy', '../escape');
    expect([r.status, r.stdout, r.stderr]).toEqual([1, '', "treeseal: SEAL_BAD_PATH: copy root must not contain '..': ../escape\n"]);
    // The store that capture made goes again with it: nothing to materialize from.
    expect(existsSync(store)).toBe(false);
    r = cli(store, 'materialize', 'abc', join(work, 'nowhere'));
    expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_UNAVAILABLE: no store at ${store} (from $TREESEAL_STORE)\n`]);
    expect(cli(store, 'capture', repo, '--copy', 'src').status).toBe(0);
    r = cli(store, 'materialize', 'abc', join(work, 'nowhere'));
    expect([r.status, r.stderr]).toEqual([1, 'treeseal: SEAL_UNAVAILABLE: no such snapshot: abc\n']);
    r = cli(store, 'frobnicate');
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^treeseal: unknown command: frobnicate\nusage: treeseal <command>/);
    r = cli(store, 'capture', repo, '--bogus');
    expect(r.status).toBe(2);
    // The parser's refusal comes with the command's usage, the command found past an option's value too.
    expect(r.stderr).toMatch(/^treeseal: unknown option --bogus\nusage: treeseal capture <source>/);
    // A typo of an option or a command names the one meant; an option after run's command, where that command goes (run's own failures exit 125).
    r = cli(store, 'capture', repo, '--copyy', 'src');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown option --copyy (did you mean --copy?)']);
    r = cli(store, 'materialise', 'abc', join(work, 'arm'));
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown command: materialise (did you mean materialize?)']);
    r = cli(store, 'prune', '--keep-last', '1');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown command: prune (snapshots are removed by a policy with gc --keep-last N, --older-than AGE or --max-size SIZE)']);
    r = cli(store, 'run', 'abc', join(work, 'arm'), 'sh', '-c', 'true');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([125, 'treeseal: unknown option -c: the command run in the sandbox goes after --, as in: treeseal run <digest> <clone> -- <command> -c ...']);
    // An option run takes, misspelt: the option meant, not the sandbox hint; a word Object.prototype has is no command.
    r = cli(store, 'run', 'abc', join(work, 'arm'), '--resett', '--', 'true');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([125, 'treeseal: unknown option --resett (did you mean --reset?)']);
    r = cli(store, 'constructor');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown command: constructor']);
    // A store path the system cannot resolve is the library's to judge (it was a bare ENOTDIR from the command's own check).
    r = cli(join(repo, 'README/store'), 'capture', repo);
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([1, expect.stringMatching(/^treeseal: SEAL_(BAD_PATH|UNAVAILABLE): /)]);
    r = cli(store, 'help', 'materialise');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: unknown command: materialise (did you mean materialize?)']);
    r = cli(store, '--timeout', '5', 'gc', '--keep-last', '-1');
    expect([r.status, r.stderr.split('\n').find((l) => l.startsWith('usage:'))]).toEqual([2, 'usage: treeseal gc [--clone DIR] [--older-than AGE] [--keep-last N] [--max-size SIZE]']);
    r = cli(store, 'ls', '--copy', 'x');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: ls does not take --copy']);
    r = cli(store, 'materialize', 'abc', work, '--reflink', 'sometimes');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --reflink must be auto, always or never, not "sometimes"']);
    r = cli(store, 'diff', 'a');
    expect([r.status, r.stderr.split('\n')[0]]).toEqual([2, 'treeseal: diff takes <a> <b>, or <digest> <clone>']);
    r = cli(store);
    expect(r.status).toBe(2);
    r = cli(store, '--help');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: treeseal <command>/);
    for (const c of ['capture', 'materialize', 'mounts', 'verify', 'ls', 'show', 'diff', 'rm', 'gc', 'freeze', 'thaw', 'help']) {
      r = cli(store, c, '--help');
      expect([r.status, r.stdout.startsWith(`usage: treeseal ${c}`)]).toEqual([0, true]);
    }
  });

  it('verify checks the whole store and reports every corrupt snapshot', () => {
    const { repo, store } = setup();
    const a = json(cli(store, 'capture', repo, '--copy', 'src', '--json'));
    const b = json(cli(store, 'capture', repo, '--copy', 'README', '--json'));
    const c = json(cli(store, 'capture', repo, '--copy', 'node_modules', '--json'));
    for (const [digest, file] of [[a.digest, 'copy/src/a.ts'], [b.digest, 'copy/README']] as const) {
      const path = join(store, 'snapshots', digest, file);
      chmodSync(path, 0o600);
      writeFileSync(path, 'tampered');
      chmodSync(path, 0o400);
    }
    const r = cli(store, 'verify', '--json');
    expect(r.status).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.ok).toBe(false);
    const bad = out.snapshots.filter((s: { ok: boolean }) => !s.ok);
    expect(bad.map((s: { digest: string }) => s.digest).sort()).toEqual([a.digest, b.digest].sort());
    expect(bad.every((s: { error: { code: string } }) => s.error.code === 'SEAL_CORRUPT')).toBe(true);
    const human = cli(store, 'verify');
    expect(human.status).toBe(1);
    expect(human.stdout).toContain(`BAD  ${a.digest}  SEAL_CORRUPT: snapshot ${a.digest} is corrupt: 1 entry differs from its manifest, first: copy/src/a.ts`);
    expect(human.stdout).toMatch(/1 ok, 2 corrupt\n$/);
    if (process.geteuid?.() !== 0) return;
    // One it cannot read (another user's: SEAL_UNTRUSTED; EMFILE or EIO alike) is no corrupt one: a harness removing
    // corrupt snapshots must not remove it (it said "corrupt" of any error).
    chownSync(join(store, 'snapshots', c.digest), 65534, 65534);
    const unread = cli(store, 'verify');
    expect(unread.status).toBe(1);
    expect(unread.stdout).toContain(`ERR  ${c.digest}  SEAL_UNTRUSTED: `);
    expect(unread.stdout).toMatch(/\n0 ok, 2 corrupt, 1 not verified \(see its line\)\n$/);
    const unreadJson = JSON.parse(cli(store, 'verify', c.digest, '--json').stdout);
    expect(unreadJson).toMatchObject({ ok: false, snapshots: [{ digest: c.digest, ok: false, corrupt: false, error: { code: 'SEAL_UNTRUSTED' } }] });
    expect(out.snapshots.filter((x: { corrupt?: boolean }) => x.corrupt === true)).toHaveLength(2);
  });

  it('two processes capturing the same tree at once both succeed with the same digest', async () => {
    const { repo, store } = setup();
    writeFileSync(join(repo, 'src/big.bin'), Buffer.alloc(8 << 20, 1));
    const run = promisify(execFile);
    const env = { ...process.env, TREESEAL_STORE: store };
    const outs = await Promise.all([0, 1, 2].map(() => run(process.execPath, [CLI, 'capture', repo, '--copy', 'src', '--json'], { env })));
    const digests = outs.map((o) => JSON.parse(o.stdout).digest);
    expect(new Set(digests).size).toBe(1);
    expect(readdirSync(join(store, 'snapshots'))).toEqual([digests[0]]);
    expect(readdirSync(join(store, 'tmp'))).toEqual([]);
    expect(json(cli(store, 'verify', '--json')).ok).toBe(true);
  });

  it('--no-stat-cache reads every file and keeps no stat cache (the summary of the snapshot is recorded either way); by default an unchanged tree reuses every hash', async () => {
    const { repo, store } = setup();
    const off = cli(store, 'capture', repo, '--copy', 'src', '--no-stat-cache');
    expect(off.stdout).toContain('\n  reused    off (--no-stat-cache)\n');
    const statCaches = (): string[] => readdirSync(join(store, 'cache')).filter((n) => n.endsWith('.bin'));
    expect(statCaches()).toEqual([]);
    expect(readdirSync(join(store, 'cache'))).toEqual([`${json(cli(store, 'ls', '--json'))[0].digest}.${process.getuid!()}.summary`]);
    expect(json(cli(store, 'capture', repo, '--copy', 'src', '--json'))).toMatchObject({ files: 2, reusedFiles: 0, built: true });
    expect(statCaches()).toHaveLength(1);
    // Entries are trusted only once the files are older than the timestamp granularity (2 s): the library records
    // them as if that had passed (the internal STAT_CLOCK_AHEAD option) instead of a sleep, and the CLI reads that cache.
    const lib = await SnapshotStore.open(store, SETTLED);
    expect((await lib.capture({ source: repo, copy: ['src'] })).captureReport).toMatchObject({ files: 2, built: false });
    await lib.close();
    const again = cli(store, 'capture', repo, '--copy', 'src');
    expect(again.stdout).toContain('\n  reused    2 of 2 files unchanged (stat cache), snapshot already stored\n');
    expect(cli(store, 'verify', '--no-stat-cache').stderr).toContain('treeseal: verify does not take --no-stat-cache');
  });

  it('draws a progress line on a terminal and nothing on a pipe', () => {
    const { repo, store } = setup();
    writeFileSync(join(repo, 'src/big.bin'), Buffer.alloc(4 << 20, 1));
    const onPipe = cli(store, 'capture', repo, '--copy', 'src');
    expect(onPipe.stderr).toBe('');
    const tty = execFileSync('script', ['-qec', `TREESEAL_STORE=${store} ${process.execPath} ${CLI} capture ${repo} --copy src --revision tty`, '/dev/null'], {
      encoding: 'utf8',
    });
    expect(tty).toMatch(/\r\x1b\[2Kcapturing \d+ entries, [\d.]+ (B|KiB|MiB)/);
    expect(tty).toContain('captured ');
  });
});

describe('rm of several snapshots', () => {
  it('resolves every digest before it removes any: one the store does not hold removes nothing; one leased stops it with those removed before it said (rm A 0000 B removed A and said nothing)', () => {
    const { repo, store } = setup();
    const digests = ['a', 'b', 'c'].map((v) => json(cli(store, 'capture', repo, '--copy', 'src', '--revision', v, '--json')).digest as string).sort();
    const [a, b, c] = digests as [string, string, string];
    const listed = (): string[] => json(cli(store, 'ls', '--json')).map((s: { digest: string }) => s.digest).sort();
    const missing = cli(store, 'rm', a, '0000', b);
    expect([missing.status, missing.stdout, missing.stderr]).toEqual([1, '', 'treeseal: SEAL_UNAVAILABLE: no such snapshot: 0000\n']);
    expect(listed()).toEqual(digests);
    // A prefix given twice, and the same snapshot by two prefixes: removed once.
    expect(cli(store, 'rm', a.slice(0, 12), a.slice(0, 12), a)).toMatchObject({ status: 0, stdout: `removed ${a}\n`, stderr: '' });
    expect(listed()).toEqual([b, c]);
    // The second leased (by this process): the first is removed and said, then the refusal.
    const s = SnapshotStore.openSync(store);
    const lease = s.get(c).lease();
    try {
      const busy = cli(store, 'rm', b, c);
      expect(busy.status).toBe(1);
      expect(busy.stderr.split('\n')[0]).toBe(`treeseal: removed ${b} before the failure below`);
      expect(busy.stderr.split('\n')[1]).toMatch(/^treeseal: SEAL_BUSY: /);
      expect(listed()).toEqual([c]);
    } finally {
      lease.release();
      s.closeSync();
    }
  }, CLI_TIMEOUT_MS);

  it('store.resolveDigest names the full digest of a digest or unique prefix without loading the snapshot; none is SEAL_UNAVAILABLE, several SEAL_AMBIGUOUS, a bad one TypeError', () => {
    const { repo, store: dir } = setup();
    const store = SnapshotStore.openSync(dir);
    const digests = ['a', 'b'].map((v) => store.captureSync({ source: repo, copy: ['src'], revision: v }).digest).sort();
    const [a] = digests as [string, string];
    expect(store.resolveDigest(a)).toBe(a);
    expect(store.resolveDigest(a.slice(0, 10))).toBe(a);
    expect(() => store.resolveDigest('0'.repeat(64))).toThrow(expect.objectContaining({ code: 'SEAL_UNAVAILABLE', message: `no such snapshot: ${'0'.repeat(64)}` }));
    // A second name sharing all but a's last digit (listed, never loaded): that prefix names two.
    const twin = join(dir, 'snapshots', `${a.slice(0, 63)}${a[63] === '0' ? '1' : '0'}`);
    mkdirSync(twin, { mode: 0o700 });
    expect(() => store.resolveDigest(a.slice(0, 63))).toThrow(expect.objectContaining({ code: 'SEAL_AMBIGUOUS', message: `digest prefix is ambiguous: ${a.slice(0, 63)} (2 snapshots)` }));
    expect(store.resolveDigest(a)).toBe(a);
    rmSync(twin, { recursive: true });
    expect(() => store.resolveDigest('XYZ')).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_VALUE' }));
    expect(() => store.resolveDigest(7 as never)).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }));
    store.closeSync();
    expect(() => store.resolveDigest(a)).toThrow(expect.objectContaining({ code: 'SEAL_CLOSED' }));
  });
});

describe('a failed command and the store it made', () => {
  it('a capture or pull that fails leaves no store where there was none, nor the directories made for it; an existing store, and a directory that was there, stay (a bad source path left an empty store behind)', () => {
    const { work, repo } = setup();
    const before = readdirSync(work).sort();
    const made = join(work, 'new/deeper/store');
    const missing = cli(made, 'capture', join(work, 'absent'));
    expect([missing.status, missing.stderr]).toEqual([1, `treeseal: SEAL_UNAVAILABLE: source is unavailable: ${join(work, 'absent')}: ENOENT: no such file or directory, openat2 '${join(work, 'absent')}'\n`]);
    expect(readdirSync(work).sort()).toEqual(before);
    const root = cli(made, 'capture', repo, '--copy', 'nothere');
    expect([root.status, root.stderr]).toEqual([1, "treeseal: SEAL_UNAVAILABLE: path is unavailable: nothere: ENOENT: no such file or directory, fstatat 'nothere'\n"]);
    expect(readdirSync(work).sort()).toEqual(before);
    // Pull: a registry that answers nothing (a port no one listens on), asked once.
    const pulled = cli(made, 'pull', 'a'.repeat(64), '127.0.0.1:9/none/here', '--timeout', '2');
    expect(pulled.status).toBe(1);
    expect(pulled.stderr).toMatch(/^treeseal: SEAL_REMOTE: /);
    expect(readdirSync(work).sort()).toEqual(before);
    // A directory that was there stays; only the store made in it goes.
    mkdirSync(join(work, 'kept'));
    expect(cli(join(work, 'kept/store'), 'capture', join(work, 'absent')).status).toBe(1);
    expect(readdirSync(join(work, 'kept'))).toEqual([]);
    // A store that was there stays, with what it holds.
    const store = join(work, 'store');
    const digest = json(cli(store, 'capture', repo, '--copy', 'src', '--json')).digest as string;
    expect(cli(store, 'capture', join(work, 'absent')).status).toBe(1);
    expect(json(cli(store, 'ls', '--json')).map((r: { digest: string }) => r.digest)).toEqual([digest]);
  }, CLI_TIMEOUT_MS);
});

describe('a store inside what is captured', () => {
  it('a store the command would make inside a copy root is SEAL_OVERLAP before it is made: nothing is left in the source (the refused capture left the store\'s lock, snapshots/ and tmp/ there, and the next capture took them in)', () => {
    const { work, repo } = setup();
    const before = readdirSync(repo).sort();
    for (const [store, extra, root] of [
      [join(repo, 'sub/dir/store'), [], 'sub'],
      [join(repo, 'src/.store'), [], 'src'],
      [join(repo, 'src/deep/store'), ['--copy', 'src'], 'src'],
    ] as const) {
      const r = cli(store, 'capture', repo, ...extra);
      expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_OVERLAP: the store lies inside what is being captured: ${root}\n`]);
      expect(readdirSync(repo).sort()).toEqual(before);
      expect(existsSync(join(repo, 'src/.store'))).toBe(false);
      expect(existsSync(join(repo, 'src/deep'))).toBe(false);
    }
    // Where the words cannot tell (an exclude pattern; a mount source): the library refuses, and the store the command made
    // there goes again with the parents it made.
    for (const [store, extra, root] of [
      [join(repo, 'src/new/st'), ['--exclude', '*.log'], 'src'],
      [join(repo, 'node_modules/st'), ['--mount', 'node_modules'], 'node_modules'],
    ] as const) {
      const r = cli(store, 'capture', repo, ...extra);
      expect([r.status, r.stderr]).toEqual([1, `treeseal: SEAL_OVERLAP: the store lies inside what is being captured: ${root}\n`]);
      expect(readdirSync(repo).sort()).toEqual(before);
      expect(existsSync(join(repo, 'src/new'))).toBe(false);
      expect(existsSync(join(repo, 'node_modules/st'))).toBe(false);
    }
    // Outside every root (another root named), and through a link to the source: the first is taken, the second refused.
    expect(json(cli(join(repo, 'sub/store'), 'capture', repo, '--copy', 'src', '--json')).entries).toBeGreaterThan(0);
    // The store's snapshot is read-only (as a user, its directories cannot be emptied until made writable).
    execFileSync('chmod', ['-R', 'u+w', join(repo, 'sub')]);
    rmSync(join(repo, 'sub'), { recursive: true });
    symlinkSync(repo, join(work, 'repo-link'));
    const linked = cli(join(work, 'repo-link/src/s'), 'capture', repo, '--copy', 'src');
    expect([linked.status, linked.stderr]).toEqual([1, 'treeseal: SEAL_OVERLAP: the store lies inside what is being captured: src\n']);
    expect(readdirSync(join(repo, 'src')).includes('s')).toBe(false);
  });
});
