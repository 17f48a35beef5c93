// run.test.ts: `treeseal run` and the library's sandboxArgs: a command in a clone inside real bubblewrap, payloads read-only, no network, its exit status passed through.
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore, checkSandboxArgs, checkSandboxClone, findBubblewrap, sandboxArgs, sandboxArgsAsync, spawnSandboxed } from '../../dist/index.js';
import { canDropPrivileges, expectError, reflinkMount, rootPassOnly, tempDir, writeTree } from '../helpers.js';
import { CLI, CLI_TIMEOUT_MS, cli, json } from './run-cli.js';

/**
 * XFS_IOC_SWAPEXT of argv[1] with argv[2] (same size): the request with the target's own mtime and ctime, which the kernel
 * demands and leaves as they are. Prints `swapped`, or `refused <errno>`.
 */
const SWAPEXT_PY = [
  'import fcntl, os, struct, sys',
  't = os.open(sys.argv[1], os.O_RDWR); d = os.open(sys.argv[2], os.O_RDWR); st = os.fstat(t); b = bytearray(192)',
  "struct.pack_into('<qqqqq', b, 0, 0, t, d, 0, st.st_size)",
  "struct.pack_into('<qi', b, 112, st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9)",
  "struct.pack_into('<qi', b, 128, st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9)",
  'try:',
  '    fcntl.ioctl(t, 0xc0c0586d, b); print(\'swapped\')',
  'except OSError as e:',
  "    print('refused', e.errno)",
].join('\n');

/** EXT4_IOC_MOVE_EXT of argv[1]'s blocks (the caller's own file, opened read-write) into argv[2] (the donor), whose cached pages are then dropped: prints `moved`, or `refused <errno>`. */
const MOVEEXT_PY = [
  'import fcntl, os, struct, sys',
  'o = os.open(sys.argv[1], os.O_RDWR); d = os.open(sys.argv[2], os.O_WRONLY); os.fsync(o); os.fsync(d)',
  "b = bytearray(struct.pack('<IIQQQQ', 0, d, 0, 0, (os.fstat(d).st_size + 4095) // 4096, 0))",
  'try:',
  '    fcntl.ioctl(o, 0xc028660f, b); os.posix_fadvise(d, 0, 0, os.POSIX_FADV_DONTNEED); print(\'moved\')',
  'except OSError as e:',
  "    print('refused', e.errno)",
].join('\n');

function bwrapAvailable(): boolean {
  const found = spawnSync('bwrap', ['--version']).status === 0;
  if (!found && process.env.CI === 'true') throw new Error('CI=true but bwrap is not installed (apt-get install -y bubblewrap; .ci/run does)');
  return found;
}

function setup(): { work: string; store: string; digest: string; payload: string } {
  const work = tempDir();
  const repo = join(work, 'repo');
  writeTree(repo, { 'src/a.ts': 'alpha', 'node_modules/p/index.js': 'module.exports = 1;\n' });
  mkdirSync(join(repo, 'node_modules/.bin'));
  symlinkSync('../p/index.js', join(repo, 'node_modules/.bin/p'));
  const store = join(work, 'store');
  const snap = json(cli(store, 'capture', repo, '--copy', 'src', '--mount', 'node_modules', '--json'));
  return { work, store, digest: snap.digest, payload: join(snap.root, 'mounts/00000/payload') };
}

/**
 * `treeseal run args…` with a bwrap first on PATH that runs `first` (a shell line: what another user, or the
 * caller's own tooling, does as bubblewrap starts; 99 when it fails), then the real bwrap with the same arguments.
 */
function runWithBwrapFirst(work: string, store: string, first: string, args: string[]): SpawnSyncReturns<string> {
  const bin = join(work, 'bin');
  mkdirSync(bin);
  const real = spawnSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim();
  writeFileSync(join(bin, 'bwrap'), `#!/bin/sh\n${first} || exit 99\nexec '${real}' "$@"\n`, { mode: 0o755 });
  return spawnSync(process.execPath, [CLI, 'run', ...args], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: store, PATH: `${bin}:${process.env.PATH}` } });
}

describe('treeseal run', { timeout: CLI_TIMEOUT_MS }, () => {
  it('materializes a missing clone and runs the command in bubblewrap: the clone writable, the payload read-only, no network, the exit status passed through', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    const inside = [
      'pwd',
      'cat src/a.ts; echo',
      'cat node_modules/.bin/p',
      'touch node_modules/.vite-temp/t && echo vite-temp writable',
      '(echo x > node_modules/p/index.js) 2>/dev/null || echo payload read-only',
      // No capability, for root too: the read-only binds cannot be remounted writable (as root they once could: the store's payload and the host's /etc written).
      "grep CapEff /proc/self/status | tr -d '\\t'",
      '(mount -o remount,bind,rw node_modules && echo x > node_modules/p/index.js) 2>/dev/null || echo payload stays read-only',
      '(mount -o remount,bind,rw /etc && echo remounted /etc) 2>/dev/null || echo /etc stays read-only',
      'echo agent > src/out.txt',
      // Only the loopback interface: the network namespace is the sandbox's own.
      "grep -c : /proc/net/dev | tr -d ' '",
      'exit 7',
    ].join('; ');
    const r = cli(store, 'run', digest.slice(0, 12), clone, '--', 'sh', '-c', inside);
    expect([r.status, r.stderr]).toEqual([7, '']);
    expect(r.stdout).toBe('/workspace\nalpha\nmodule.exports = 1;\nvite-temp writable\npayload read-only\nCapEff:0000000000000000\npayload stays read-only\n/etc stays read-only\n1\n');
    expect(readFileSync(join(clone, 'src/out.txt'), 'utf8')).toBe('agent\n');
    expect(readdirSync(clone).sort()).toEqual(['node_modules', 'src']);
    expect(readdirSync(join(clone, 'node_modules'))).toEqual([]);

    // The clone exists: a second run continues in it; --reset makes it the snapshot again first.
    expect(cli(store, 'run', digest, clone, '--', 'cat', 'src/out.txt').stdout).toBe('agent\n');
    const reset = cli(store, 'run', digest, clone, '--reset', '--', 'ls', 'src');
    expect([reset.status, reset.stdout, reset.stderr]).toEqual([0, 'a.ts\n', '']);
    expect(json(cli(store, 'verify', digest, '--json')).ok).toBe(true);

    // The command gets the caller's environment less treeseal's own registry credentials.
    const env = { ...process.env, TREESEAL_STORE: store, TREESEAL_REGISTRY_USER: 'ci', TREESEAL_REGISTRY_PASSWORD: 's3cret', HARNESS_TASK: 't1' };
    const seen = spawnSync(process.execPath, [CLI, 'run', digest, clone, '--', 'sh', '-c', 'env | grep -E "^(TREESEAL_REGISTRY|HARNESS)" | sort'], { encoding: 'utf8', env });
    expect([seen.status, seen.stdout, seen.stderr]).toEqual([0, 'HARNESS_TASK=t1\n', '']);
  });

  it('a second run --reset into a clone whose command still runs is SEAL_BUSY and changes nothing there (it reset the clone under the first)', async () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    const first = spawn(process.execPath, [CLI, 'run', digest, clone, '--', 'sh', '-c', 'echo work > src/out.txt; echo started; read line; cat src/out.txt'], {
      env: { ...process.env, TREESEAL_STORE: store },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    first.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    try {
      for (let i = 0; i < 500 && !out.includes('started'); i++) await new Promise((r) => setTimeout(r, 20));
      expect(out).toBe('started\n');
      const second = cli(store, 'run', digest, clone, '--reset', '--', 'true');
      const busy = `treeseal: SEAL_BUSY: clone is in use by another call (a materialize or reset of it, or a sandboxed command running in it); wait for that one: ${clone}`;
      // Tried again twice (the CLI's default for a busy clone), then said.
      expect([second.status, second.stdout, second.stderr]).toEqual([125, '', `${busy}; retrying in 100 ms (1 of 2)\n${busy}; retrying in 200 ms (2 of 2)\n${busy}\n`]);
    } finally {
      // Whatever failed above, the first run ends (its command waits for this line).
      first.stdin!.end('go\n');
    }
    const [code] = (await once(first, 'close')) as [number];
    expect([code, out]).toEqual([0, 'started\nwork\n']);
    // Free again once the first has ended.
    expect(cli(store, 'run', digest, clone, '--reset', '--', 'ls', 'src').stdout).toBe('a.ts\n');
  });

  it('--network shares the host network; --workspace moves the clone; a signal shows as 128 + its number', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    // A workspace that would hide what the sandbox binds: refused before the clone is made.
    const hidden = cli(store, 'run', digest, clone, '--workspace', '/usr', '--', 'true');
    expect([hidden.status, hidden.stderr]).toEqual([125, 'treeseal: SEAL_BAD_PATH: workspace /usr would hide /usr, which the sandbox binds: give one of its own, as /workspace\n']);
    expect(existsSync(clone)).toBe(false);
    const hostInterfaces = readFileSync('/proc/net/dev', 'utf8').trim().split('\n').length - 2;
    const shared = cli(store, 'run', digest, clone, '--network', '--workspace', '/w', '--', 'sh', '-c', "pwd; grep -c : /proc/net/dev | tr -d ' '");
    expect([shared.status, shared.stdout]).toEqual([0, `/w\n${hostInterfaces}\n`]);
    const killed = cli(store, 'run', digest, clone, '--', 'sh', '-c', 'kill -TERM $$');
    expect(killed.status).toBe(128 + 15);
  });

  it('an interrupt or a termination of treeseal run ends the sandbox and then the run, as the command ended (128 + the signal), its lease and the clone\'s lock let go (they were left for gc)', async () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const run = spawn(process.execPath, [CLI, 'run', digest, clone, '--', 'sh', '-c', 'echo started; exec sleep 30'], { env: { ...process.env, TREESEAL_STORE: store }, stdio: ['ignore', 'pipe', 'pipe'] });
      await once(run.stdout!, 'data');
      run.kill(signal);
      const [code] = (await once(run, 'close')) as [number | null];
      expect([signal, code]).toEqual([signal, signal === 'SIGTERM' ? 128 + 15 : 128 + 2]);
      expect([readdirSync(join(store, 'leases')), readdirSync(join(store, 'tmp'))]).toEqual([[], []]);
    }
  });

  it('a command bubblewrap could not run is SEAL_UNAVAILABLE after bubblewrap\'s own message and status 125, not the status 1 it exits with (with --keep-going: no diff of a clone the command never saw)', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    const r = cli(store, 'run', digest, clone, '--keep-going', '--', '/nonexistent/command');
    const lines = r.stderr.split('\n');
    expect([r.status, r.stdout, lines.length]).toEqual([125, '', 3]);
    expect(lines[0]).toBe('bwrap: execvp /nonexistent/command: No such file or directory');
    expect(lines[1]).toMatch(/^treeseal: SEAL_UNAVAILABLE: the command did not run: bubblewrap \(\/.*\/bwrap\) exited 1 before it ran it: /);
    // The command's own status 1 is still its own.
    expect(cli(store, 'run', digest, clone, '--', 'sh', '-c', 'exit 1')).toMatchObject({ status: 1, stdout: '', stderr: '' });
  });

  rootPassOnly('--keep-going prints what the command changed after its own output, as diff does (--json: with its status), and exits with its status', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    const r = cli(store, 'run', digest, clone, '--keep-going', '--', 'sh', '-c', 'echo working; echo fixed > src/a.ts; echo new > src/b.ts; exit 3');
    expect([r.status, r.stderr]).toEqual([3, '']);
    expect(r.stdout).toBe(`working\n+ src/b.ts\n~ src/a.ts\nDIFFERS (ledger)  ${clone}: 1 added, 0 removed, 1 changed\n`);
    const reset = cli(store, 'run', digest, clone, '--reset', '--keep-going', '--json', '--', 'true');
    expect(reset.status).toBe(0);
    expect(json(reset)).toMatchObject({ clone, status: 0, ok: true, method: 'ledger', added: [], removed: [], changed: [] });
    // Without it, nothing but the command's output.
    expect(cli(store, 'run', digest, clone, '--', 'true')).toMatchObject({ status: 0, stdout: '', stderr: '' });
  });

  rootPassOnly('--keep-going when the diff fails: the failure said on stderr (--json: as error), the exit status still the command\'s', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    expect(cli(store, 'run', digest, clone, '--', 'true').status).toBe(0);
    // Another snapshot run in the same clone without --reset: the clone's ledger is the first one's.
    writeFileSync(join(work, 'repo/src/b.ts'), 'beta');
    const other = json(cli(store, 'capture', join(work, 'repo'), '--copy', 'src', '--mount', 'node_modules', '--json')).digest;
    const binding = `SEAL_BINDING: clone was materialized from snapshot ${digest}, not ${other} (its ledger records the other; materialize it, or diff with verify to hash it against this one): ${clone}`;
    const r = cli(store, 'run', other, clone, '--keep-going', '--', 'sh', '-c', 'echo working; exit 4');
    expect([r.status, r.stdout, r.stderr]).toEqual([4, 'working\n', `treeseal: run: what the command changed is unknown: ${binding}\n`]);
    const j = cli(store, 'run', other, clone, '--keep-going', '--json', '--', 'true');
    expect([j.status, j.stderr]).toEqual([0, `treeseal: run: what the command changed is unknown: ${binding}\n`]);
    expect(JSON.parse(j.stdout)).toEqual({ clone, status: 0, error: { code: 'SEAL_BINDING', message: binding.slice('SEAL_BINDING: '.length) } });
    if (process.getuid?.() === 0) return;
    // Without root: a directory the command made unreadable is reported; the clone itself made unreadable fails the diff.
    const unreadable = cli(store, 'run', digest, clone, '--reset', '--keep-going', '--', 'sh', '-c', 'chmod 000 src; exit 6');
    expect([unreadable.status, unreadable.stderr]).toEqual([6, '']);
    expect(unreadable.stdout).toBe(`~ src\n? src  (this user may not list it: what lies below is not known)\nDIFFERS (ledger)  ${clone}: 0 added, 0 removed, 1 changed, 1 unreadable\n`);
    const locked = cli(store, 'run', digest, clone, '--reset', '--keep-going', '--', 'sh', '-c', 'chmod 000 .; exit 5');
    try {
      expect([locked.status, locked.stdout]).toEqual([5, '']);
      expect(locked.stderr).toBe(`treeseal: run: what the command changed is unknown: SEAL_IO: clone cannot be opened: ${clone}: EACCES: permission denied, openat2 '${clone}'\n`);
    } finally {
      chmodSync(clone, 0o700);
    }
  });

  it('binds the clone it opened, not its path: a clone swapped for a link to another directory as bwrap starts is still the one bound (kills --bind <path>)', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    expect(cli(store, 'materialize', digest, clone).status).toBe(0);
    writeFileSync(join(clone, 'marker'), 'the arm\n');
    const elsewhere = join(work, 'elsewhere');
    writeTree(elsewhere, { marker: 'another directory\n' });
    // A bwrap on PATH that first does what another user can do in a directory both may write (the clone's name
    // swapped for a link), then runs the real bwrap with the same arguments.
    const r = runWithBwrapFirst(work, store, `mv '${clone}' '${clone}.moved' && ln -s '${elsewhere}' '${clone}'`, [digest, clone, '--', 'sh', '-c', 'cat marker; echo agent > out']);
    expect([r.status, r.stdout, r.stderr]).toEqual([0, 'the arm\n', '']);
    expect(readFileSync(join(`${clone}.moved`, 'out'), 'utf8')).toBe('agent\n');
    expect(readdirSync(elsewhere)).toEqual(['marker']);
  });

  it('a lease whose file cannot be removed when the command ends is said on stderr; the status is still the command\'s (it was an uncaught SEAL_SYMLINK, exit 1)', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const clone = join(work, 'arm');
    // A bwrap on PATH that first moves the store away and leaves a link at its name (so its leases/ is no longer reached without a link).
    const r = runWithBwrapFirst(work, store, `mv '${store}' '${store}.moved' && ln -s '${store}.moved' '${store}'`, [digest, clone, '--', 'sh', '-c', 'exit 7']);
    expect(r.status).toBe(7);
    expect(r.stderr).toContain(`treeseal: run: the lease on snapshot ${digest} ended, but its file was left: SEAL_SYMLINK: `);
    expect(r.stderr).not.toContain('    at ');
  });

  it('no fd of the caller reaches the command: one it inherited without close-on-exec is closed in the sandbox (kills the close_range)', () => {
    if (!bwrapAvailable()) return;
    const { work, store, digest } = setup();
    const secret = join(work, 'secret');
    writeFileSync(secret, 'secret\n', { mode: 0o600 });
    const fd = openSync(secret, 'r+');
    try {
      // The harness's fd becomes treeseal's fd 30 (spawn clears close-on-exec on the fds it hands over; Node reuses low ones).
      const r = spawnSync(process.execPath, [CLI, 'run', digest, join(work, 'arm'), '--', 'sh', '-c', 'if [ -e /proc/self/fd/30 ]; then echo leaked; cat /proc/self/fd/30; else echo closed; fi'], {
        encoding: 'utf8',
        env: { ...process.env, TREESEAL_STORE: store },
        stdio: ['ignore', 'pipe', 'pipe', ...Array<'ignore'>(27).fill('ignore'), fd],
      });
      expect([r.status, r.stdout, r.stderr]).toEqual([0, 'closed\n', '']);
      expect(readFileSync(secret, 'utf8')).toBe('secret\n');
    } finally {
      closeSync(fd);
    }
  });

  // The defragmenters' calls: any process that can open a clone file for writing changes its bytes and keeps its times.
  const defrag: [string, 'xfs' | 'ext4', string, (work: string, file: string) => string[], string, Buffer][] = [
    [
      "XFS's extent swap (XFS_IOC_SWAPEXT: the file's extents swapped with another's)",
      'xfs',
      `donor=$(mktemp -p src); printf '%4096s' '' | tr ' ' E > "$donor"; python3 -c "${SWAPEXT_PY}" src/a.ts "$donor"; rm -f "$donor"`,
      (work, file) => [SWAPEXT_PY, file, join(work, 'donor')],
      'swapped\n',
      Buffer.from('E'.repeat(4096)),
    ],
    [
      "ext4's extent move (EXT4_IOC_MOVE_EXT: the file's range left reading as zeros)",
      'ext4',
      `printf '%4096s' '' | tr ' ' E > evil; python3 -c "${MOVEEXT_PY}" evil src/a.ts; rm -f evil`,
      (work, file) => [MOVEEXT_PY, join(work, 'donor'), file],
      'moved\n',
      Buffer.alloc(4096),
    ],
  ];
  for (const [what, kind, inside, outsideArgs, outsideSays, after] of defrag) {
    it(`${what}, no capability needed, times left as they were, is refused in the sandbox; outside it, diff by the ledger would not see it`, () => {
      if (!bwrapAvailable()) return;
      const mount = reflinkMount(kind);
      if (mount === undefined) return;
      const work = tempDir(mount);
      writeTree(join(work, 'repo'), { 'src/a.ts': 'A'.repeat(4096) });
      const store = join(work, 'store');
      const { digest } = json(cli(store, 'capture', join(work, 'repo'), '--copy', 'src', '--json'));
      const arm = join(work, 'arm');
      const r = spawnSync(process.execPath, [CLI, 'run', digest, arm, '--', 'sh', '-c', inside], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: store } });
      expect([r.status, r.stdout, r.stderr]).toEqual([0, 'refused 1\n', '']);
      expect(readFileSync(join(arm, 'src/a.ts'), 'utf8')).toBe('A'.repeat(4096));
      // The premise: outside the sandbox the same call changes the bytes and leaves the identity diff trusts.
      writeFileSync(join(work, 'donor'), 'E'.repeat(4096));
      const outside = spawnSync('python3', ['-c', ...outsideArgs(work, join(arm, 'src/a.ts'))], { encoding: 'utf8' });
      expect(outside.stdout).toBe(outsideSays);
      expect(readFileSync(join(arm, 'src/a.ts'))).toEqual(after);
      expect(json(cli(store, 'diff', digest, arm, '--json'))).toMatchObject({ ok: true, changed: [] });
      const verified = cli(store, 'diff', digest, arm, '--verify', '--json');
      expect([verified.status, JSON.parse(verified.stdout)]).toMatchObject([1, { ok: false, changed: ['src/a.ts'] }]);
    });
  }

  it('run\'s own failures exit 125, the command\'s statuses being its own: without bwrap on PATH, SEAL_UNAVAILABLE naming the package; without a command, a usage error; a snapshot not in the store', () => {
    const { work, store, digest } = setup();
    const r = spawnSync(process.execPath, [CLI, 'run', digest, join(work, 'arm'), '--', 'true'], {
      encoding: 'utf8',
      env: { ...process.env, TREESEAL_STORE: store, PATH: join(work, 'empty') },
    });
    expect([r.status, r.stderr]).toEqual([125, 'treeseal: SEAL_UNAVAILABLE: a sandboxed run needs bubblewrap: no bwrap on PATH (Debian and Ubuntu: apt-get install bubblewrap)\n']);
    // Said before the clone is made: nothing is left behind.
    expect(existsSync(join(work, 'arm'))).toBe(false);
    const usage = cli(store, 'run', digest, join(work, 'arm'));
    expect([usage.status, usage.stderr.split('\n')[0]]).toEqual([125, 'treeseal: run takes <digest> <clone> -- <command> [<arg>...]']);
    const unknown = cli(store, 'run', '0'.repeat(64), join(work, 'arm'), '--', 'true');
    expect([unknown.status, unknown.stderr]).toEqual([125, `treeseal: SEAL_UNAVAILABLE: no such snapshot: ${'0'.repeat(64)}\n`]);
    expect(cli(store, 'run', digest, join(work, 'arm'), '--bogus', '--', 'true').status).toBe(125);
    // Other commands keep theirs: 1 for a SealError, 2 for a usage error.
    expect([cli(store, 'rm', '0'.repeat(64)).status, cli(store, 'rm').status]).toEqual([1, 2]);
  });
});

/** A store holding a capture of src/a.ts ('alpha'), materialized into a new arm. */
function armOfOneFile(): { work: string; store: SnapshotStore; snap: ReturnType<SnapshotStore['captureSync']>; clone: string } {
  const work = tempDir();
  writeTree(work, { 'repo/src/a.ts': 'alpha' });
  const store = SnapshotStore.openSync(join(work, 'store'));
  const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'] });
  const clone = join(work, 'arm');
  snap.materializeSync(clone, { createClone: true });
  return { work, store, snap, clone };
}

describe('spawnSandboxed', () => {
  it('run by root: the sysctls are read-only to the command (it wrote kernel.core_pattern as host uid 0), and a clone no directory above keeps other users out of is SEAL_UNTRUSTED before anything runs (a setuid file the command made there, after opening the clone up, ran as root for them)', async () => {
    if (!bwrapAvailable() || process.getuid!() !== 0) return;
    // work is 0700 (mkdtemp): what the command leaves in the clone is out of other users' reach, however it sets the clone's own mode.
    const { work, store, snap, clone } = armOfOneFile();
    // test -w is access(2): it fails on a read-only mount whatever the mode says.
    const script = 'test -w /proc/sys/kernel/core_pattern; echo $?; chmod 755 /workspace; cp /bin/true /workspace/sid; chmod 4755 /workspace/sid; echo done';
    const child = await spawnSandboxed(snap, clone, ['sh', '-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    expect(((await once(child, 'close')) as [number])[0]).toBe(0);
    expect(out).toBe('1\ndone\n');
    expect(statSync(join(clone, 'sid')).mode & 0o7777).toBe(0o4755);
    if (canDropPrivileges()) {
      // Another user cannot reach it: work keeps her out.
      const reach = spawnSync('runuser', ['-u', 'campuser', '--', 'test', '-e', join(clone, 'sid')]);
      expect(reach.status).toBe(1);
    }
    rmSync(join(clone, 'sid'));
    // Every directory above searchable by others (work opened up, /tmp, /): refused, nothing run.
    chmodSync(work, 0o755);
    await expectError(async () => spawnSandboxed(snap, clone, ['touch', 'ran'], { stdio: 'ignore' }), {
      code: 'SEAL_UNTRUSTED',
      message: `untrusted clone: no directory above ${clone} keeps other users out (each lets its group or others search it), and a command root runs in a sandbox is host uid 0 (without capabilities): it may open the clone up and leave a setuid file there that would run as root for anyone who can reach it; fix: keep the clone below a directory of mode 0700 (chmod 700 ${work})`,
      path: clone,
      fds: false,
    });
    expect(existsSync(join(clone, 'ran'))).toBe(false);
    // treeseal run says it before it makes the clone: nothing is left behind.
    const fresh = join(work, 'arm-new');
    const r = cli(join(work, 'store'), 'run', snap.digest, fresh, '--', 'true');
    expect([r.status, r.stderr]).toEqual([125, `treeseal: SEAL_UNTRUSTED: untrusted clone: no directory above ${fresh} keeps other users out (each lets its group or others search it), and a command root runs in a sandbox is host uid 0 (without capabilities): it may open the clone up and leave a setuid file there that would run as root for anyone who can reach it; fix: keep the clone below a directory of mode 0700 (chmod 700 ${work})\n`]);
    expect(existsSync(fresh)).toBe(false);
    // The same look, public, for a harness that makes the clone first; a relative name from the working directory.
    const cwd = process.cwd();
    process.chdir(work);
    try {
      expect(() => checkSandboxClone('arm-new')).toThrow(expect.objectContaining({ code: 'SEAL_UNTRUSTED', path: 'arm-new' }));
    } finally {
      process.chdir(cwd);
    }
    expect(() => checkSandboxClone(7 as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    chmodSync(work, 0o700);
    expect(() => checkSandboxClone(fresh)).not.toThrow();
    store.closeSync();
  });

  it('leases the snapshot and holds the clone while the command runs (rm, materialize, reset and another sandbox there are SEAL_BUSY; diff reads it), frees both when it ends, and checks stdio', async () => {
    if (!bwrapAvailable()) return;
    const { store, snap, clone } = armOfOneFile();
    for (const stdio of ['bogus', ['inherit', 'pipe'], ['inherit', 'pipe', -1]]) {
      await expectError(async () => spawnSandboxed(snap, clone, ['true'], { stdio: stdio as never }), { code: 'ERR_INVALID_ARG_VALUE' });
    }
    const child = await spawnSandboxed(snap, clone, ['sh', '-c', 'read line; cat src/a.ts; echo agent > src/b.ts'], { stdio: ['pipe', 'pipe', 'inherit'] });
    expectError(() => store.remove(snap.digest), { code: 'SEAL_BUSY', fds: false });
    // The clone is the command's while it runs: no materialize or reset of it (another run's, a retry's) rewrites it
    // under the command; a second sandbox in it waits its turn too. Reading it (diff) is not held up.
    const busy = { code: 'SEAL_BUSY', message: `clone is in use by another call (a materialize or reset of it, or a sandboxed command running in it); wait for that one: ${clone}`, path: clone, fds: false };
    expectError(() => snap.materializeSync(clone), busy);
    expectError(() => snap.resetSync(clone), busy);
    await expectError(async () => spawnSandboxed(snap, clone, ['true'], { stdio: 'ignore' }), busy);
    expect(snap.diffSync(clone)).toMatchObject({ ok: true });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stdin!.end('go\n');
    const [code] = (await once(child, 'close')) as [number];
    expect([code, out]).toEqual([0, 'alpha']);
    // Once it has ended, the clone is free again: the reset takes back what the command wrote.
    expect(snap.diffSync(clone)).toMatchObject({ ok: false, added: ['src/b.ts'] });
    expect(snap.resetSync(clone)).toMatchObject({ added: ['src/b.ts'] });
    expect(readdirSync(join(clone, 'src'))).toEqual(['a.ts']);
    expect(store.remove(snap.digest)).toBe(snap.digest);
    store.closeSync();
  });

  it("vite's and vitest's cache (node_modules/.vite) and node_modules/.cache, made by ensureDirs, are writable scratch in the sandbox as .vite-temp is; without them the read-only payload refuses the write (vitest run failed: mkdir node_modules/.vite, ENOENT)", async () => {
    if (!bwrapAvailable()) return;
    const work = tempDir();
    writeTree(work, { 'repo/src/a.ts': 'alpha', 'repo/node_modules/p/index.js': '1' });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const write = 'for d in .vite-temp .vite .cache; do (mkdir -p node_modules/$d/x && echo $d writable) 2>/dev/null || echo $d read-only; done';
    for (const [ensureDirs, expected] of [
      [undefined, '.vite-temp writable\n.vite read-only\n.cache read-only\n'],
      [['.vite-temp', '.vite', '.cache'], '.vite-temp writable\n.vite writable\n.cache writable\n'],
    ] as const) {
      const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'node_modules', target: 'node_modules', ...(ensureDirs === undefined ? {} : { ensureDirs: [...ensureDirs] }) }] });
      const clone = join(work, `arm-${ensureDirs === undefined ? 'default' : 'tools'}`);
      snap.materializeSync(clone, { createClone: true });
      expect(snap.mountPoints(clone).map((m) => m.tmpfs)).toEqual([(ensureDirs ?? ['.vite-temp']).map((d) => `/workspace/node_modules/${d}`)]);
      const child = await spawnSandboxed(snap, clone, ['sh', '-c', write], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      const [code] = (await once(child, 'close')) as [number];
      expect([code, out]).toEqual([0, expected]);
      // The scratch was the sandbox's: nothing of it reached the payload.
      expect(readdirSync(join(snap.root, 'mounts/00000/payload')).sort()).toEqual([...(ensureDirs ?? ['.vite-temp']), 'p'].sort());
      for (const d of ensureDirs ?? ['.vite-temp']) expect(readdirSync(join(snap.root, 'mounts/00000/payload', d))).toEqual([]);
    }
    store.closeSync();
  });

  it('a spawn that fails at once (no fd left: EMFILE) rejects with its error and frees the clone and the lease (it read the missing stdio of the child and crashed the process)', async () => {
    if (!bwrapAvailable()) return;
    const { store, snap, clone } = armOfOneFile();
    const cp = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
    const spawnOf = cp.spawn;
    // Every fd taken as the library spawns bubblewrap, given back as soon as spawn returns.
    cp.spawn = ((...args: Parameters<typeof spawnOf>) => {
      const held: number[] = [];
      try {
        for (;;) held.push(openSync('/dev/null', 'r'));
      } catch {
        // The table is full.
      }
      try {
        return spawnOf(...args);
      } finally {
        held.forEach((fd) => closeSync(fd));
      }
    }) as typeof spawnOf;
    try {
      await expect(spawnSandboxed(snap, clone, ['true'], { stdio: 'ignore' })).rejects.toMatchObject({ code: 'EMFILE' });
    } finally {
      cp.spawn = spawnOf;
    }
    const child = await spawnSandboxed(snap, clone, ['true'], { stdio: 'ignore' });
    expect((await once(child, 'close'))[0]).toBe(0);
    expect(store.remove(snap.digest)).toBe(snap.digest);
    store.closeSync();
  });

  it("commandExit is the command's own status (bubblewrap's report of it), and SEAL_UNAVAILABLE where bubblewrap exited without running it (a status 1 the command never had)", async () => {
    if (!bwrapAvailable()) return;
    const { work, store, snap, clone } = armOfOneFile();
    const exitOf = async (command: string[], env?: NodeJS.ProcessEnv): Promise<number> => {
      const child = await spawnSandboxed(snap, clone, command, { stdio: ['ignore', 'ignore', 'pipe'], ...(env === undefined ? {} : { env }) });
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      try {
        return await child.commandExit;
      } catch (err) {
        throw Object.assign(err as Error, { stderr });
      }
    };
    expect(await exitOf(['true'])).toBe(0);
    expect(await exitOf(['sh', '-c', 'exit 1'])).toBe(1);
    expect(await exitOf(['sh', '-c', 'exit 3'])).toBe(3);
    expect(await exitOf(['sh', '-c', 'kill -9 $$'])).toBe(128 + 9);
    // The command is not found in the sandbox: bubblewrap exits 1 as `sh -c 'exit 1'` does, but wrote no exit code.
    const notRun = (status: number): RegExp =>
      new RegExp(`^the command did not run: bubblewrap \\(/.*/bwrap\\) exited ${status} before it ran it: it could not set up the sandbox \\(user namespaces refused to this user, a kernel without seccomp filters, a mount it could not make\\) or not execute the command \\(not found in the sandbox\\); its own message went to the command's stderr$`);
    await expect(exitOf(['/nonexistent/command'])).rejects.toMatchObject({ code: 'SEAL_UNAVAILABLE', message: notRun(1), stderr: expect.stringContaining('bwrap: execvp /nonexistent/command: No such file or directory') });
    // A kernel that refuses the filter (as one without CONFIG_SECCOMP_FILTER does): a bwrap on PATH handing the real one an empty filter.
    const real = spawnSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).stdout.trim();
    const bin = join(work, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'bwrap'), `#!/bin/sh\nexec '${real}' "$@" 4</dev/null\n`, { mode: 0o755 });
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH}` };
    await expect(exitOf(['true'], env)).rejects.toMatchObject({ code: 'SEAL_UNAVAILABLE', message: notRun(1), stderr: expect.stringContaining('bwrap: Unable to set up system call filtering as requested') });
    // One that fails before it starts anything (as where user namespaces are refused), with a status of its own.
    writeFileSync(join(bin, 'bwrap'), '#!/bin/sh\necho "bwrap: No permissions to create new namespace" >&2\nexit 42\n', { mode: 0o755 });
    await expect(exitOf(['true'], env)).rejects.toMatchObject({ code: 'SEAL_UNAVAILABLE', message: notRun(42), stderr: 'bwrap: No permissions to create new namespace\n' });
    // bubblewrap killed (a harness's timeout): 128 + the signal, as a shell says it; the command went with it (--die-with-parent).
    // Once the command runs (killed sooner, bubblewrap may not yet have tied the sandbox's life to its own).
    const long = await spawnSandboxed(snap, clone, ['sh', '-c', 'echo started; exec sleep 20'], { stdio: ['ignore', 'pipe', 'ignore'] });
    await once(long.stdout!, 'data');
    long.kill('SIGKILL');
    expect(await long.commandExit).toBe(128 + 9);
    // A child of bubblewrap's that outlives it (as one killed while it set up does, still holding the filter's socket) keeps
    // nothing waiting: the socket is closed on this side once the filter is written.
    writeFileSync(join(bin, 'bwrap'), `#!/bin/sh\n(exec 0<&- 1>&- 2>&- 5>&-; sleep 20) &\nexec '${real}' "$@"\n`, { mode: 0o755 });
    const started = Date.now();
    const outlived = await spawnSandboxed(snap, clone, ['true'], { stdio: 'ignore', env });
    expect(await outlived.commandExit).toBe(0);
    expect(Date.now() - started).toBeLessThan(10_000);
    // Whoever never awaits it meets no unhandled rejection: waiting on 'close' alone still works.
    const ignored = await spawnSandboxed(snap, clone, ['/nonexistent/command'], { stdio: 'ignore' });
    expect((await once(ignored, 'close'))[0]).toBe(1);
    expect(store.remove(snap.digest)).toBe(snap.digest);
    store.closeSync();
  }, 120_000);

  it("a file given as stdout or stderr (or inherited) reaches the command through a pipe, relayed whole before close: the command cannot open the file again through /proc to read back or empty it (it emptied the log it was handed); both on one file share one pipe, their lines in the order written; stdin is handed over as it is (a relay read ahead: a shell's while-read loop over tasks lost all but the first)", async () => {
    if (!bwrapAvailable()) return;
    const { work, store, snap, clone } = armOfOneFile();
    const outLog = join(work, 'out.log');
    const errLog = join(work, 'err.log');
    writeFileSync(outLog, 'SECRET-OUT\n', { mode: 0o600 });
    writeFileSync(errLog, '', { mode: 0o600 });
    const out = openSync(outLog, 'a');
    const err = openSync(errLog, 'a');
    // What fds 1 and 2 are to the command; an attempt to empty the log through /proc (without O_CREAT: the sandbox's /proc
    // is read-only to a create); a lot of output.
    const script = [
      // Node's stdio pipes are socket pairs, which /proc cannot open again at all.
      'for n in 1 2; do case $(readlink /proc/$$/fd/$n) in pipe:* | socket:*) echo "$n relayed";; *) echo "$n other";; esac; done',
      'truncate -c -s 0 /proc/$$/fd/1 2>/dev/null',
      'head -c 300000 /dev/zero | tr "\\0" x; echo',
      'echo err >&2',
    ].join('\n');
    try {
      const child = await spawnSandboxed(snap, clone, ['sh', '-c', script], { stdio: ['ignore', out, err] });
      const [code] = (await once(child, 'close')) as [number];
      expect(code).toBe(0);
    } finally {
      for (const fd of [out, err]) closeSync(fd);
    }
    expect(readFileSync(outLog, 'utf8')).toBe(`SECRET-OUT\n1 relayed\n2 relayed\n${'x'.repeat(300_000)}\n`);
    expect(readFileSync(errLog, 'utf8')).toBe('err\n');
    // The command line, stdout and stderr one file (a harness's `> arm.log 2>&1`), stdin a file of tasks read a line a run.
    const log = join(work, 'run.log');
    const tasks = join(work, 'tasks');
    writeFileSync(log, 'HEADER\n', { mode: 0o600 });
    writeFileSync(tasks, 't1\nt2\nt3\n');
    const loop = [
      `exec < ${tasks} >> ${log} 2>&1`,
      'while read -r t; do',
      `  echo "task $t"`,
      `  ${process.execPath} ${CLI} run ${snap.digest} ${clone} -- sh -c 'truncate -c -s 0 /proc/$$/fd/1 2>/dev/null; case $(readlink /proc/$$/fd/2) in pipe:*) echo "one pipe";; *) echo other;; esac; for i in 1 2 3; do echo out$i; echo err$i >&2; done'`,
      'done',
    ].join('\n');
    const r = spawnSync('sh', ['-c', loop], { env: { ...process.env, TREESEAL_STORE: store.root }, encoding: 'utf8' });
    expect(r.status).toBe(0);
    const run = 'one pipe\nout1\nerr1\nout2\nerr2\nout3\nerr3\n';
    expect(readFileSync(log, 'utf8')).toBe(`HEADER\ntask t1\n${run}task t2\n${run}task t3\n${run}`);
    store.closeSync();
  });

  it('a relayed file that cannot be written (one opened read-only, a full disk) is said once as a warning, TREESEAL_STDIO_LOST, and the rest is read and dropped: the command is never blocked, close still comes, and the descriptor of the caller stays open, its file as it was', async () => {
    if (!bwrapAvailable()) return;
    const { work, store, snap, clone } = armOfOneFile();
    const log = join(work, 'read-only.log');
    writeFileSync(log, 'kept\n');
    const fd = openSync(log, 'r');
    const warnings: Error[] = [];
    const warned = (w: Error): void => void warnings.push(w);
    process.on('warning', warned);
    try {
      // Far more than a pipe holds: a relay that stopped reading would leave the command blocked.
      const child = await spawnSandboxed(snap, clone, ['sh', '-c', 'head -c 1000000 /dev/zero; echo done >&2'], { stdio: ['ignore', fd, 'pipe'] });
      let err = '';
      child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      const [code] = (await once(child, 'close')) as [number];
      await new Promise((resolve) => setImmediate(resolve));
      expect([code, err]).toEqual([0, 'done\n']);
      expect(statSync(`/proc/self/fd/${fd}`).ino).toBe(statSync(log).ino);
    } finally {
      process.off('warning', warned);
      closeSync(fd);
    }
    expect(warnings.map((w) => [(w as NodeJS.ErrnoException).code, w.message])).toEqual([['TREESEAL_STDIO_LOST', `the sandboxed command's stdout could not be written to fd ${fd}; the rest of it is dropped: EBADF: bad file descriptor, write`]]);
    expect(readFileSync(log, 'utf8')).toBe('kept\n');
    store.closeSync();
  });

  it("the stage a killed materialize or reset left in the clone (the last task's files under its name) is swept before the command runs: it is not the command's to find (it listed and read them)", async () => {
    if (!bwrapAvailable()) return;
    const { store, snap, clone } = armOfOneFile();
    const stage = join(clone, `.treeseal-materialize-${'ab'.repeat(12)}`);
    mkdirSync(join(stage, 'old/src'), { recursive: true, mode: 0o700 });
    chmodSync(stage, 0o700);
    writeFileSync(join(stage, 'old/src/notes.txt'), 'the last agent\'s secret');
    const child = await spawnSandboxed(snap, clone, ['sh', '-c', 'ls -A; cat .treeseal-materialize-*/old/src/notes.txt 2>/dev/null; true'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const [code] = (await once(child, 'close')) as [number];
    expect([code, out]).toEqual([0, 'src\n']);
    expect(existsSync(stage)).toBe(false);
    store.closeSync();
  });

  it("a bwrap inside the clone (an arm's node_modules/.bin on PATH, as npm scripts put it there, or a link into the clone) is never run: the next one on PATH is, and with none SEAL_UNTRUSTED before anything is made (the agent's bwrap ran the next command unsandboxed)", async () => {
    if (!bwrapAvailable()) return;
    const { work, store, snap, clone } = armOfOneFile();
    const realDir = spawnSync('sh', ['-c', 'dirname "$(command -v bwrap)"'], { encoding: 'utf8' }).stdout.trim();
    const marker = join(work, 'agent-bwrap-ran');
    const planted = join(clone, 'node_modules/.bin');
    mkdirSync(planted, { recursive: true });
    writeFileSync(join(planted, 'bwrap'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    // A directory outside the clone whose bwrap is a link into it.
    const linked = join(work, 'linked');
    mkdirSync(linked);
    symlinkSync(join(planted, 'bwrap'), join(linked, 'bwrap'));
    // What the command makes lands in the clone (the sandbox binds nothing else writable).
    const ran = join(clone, 'ran');
    const child = await spawnSandboxed(snap, clone, ['sh', '-c', 'echo ok'], { stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: `${planted}:${linked}:${realDir}` } });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const [code] = (await once(child, 'close')) as [number];
    expect([code, out, existsSync(marker)]).toEqual([0, 'ok\n', false]);
    expect(findBubblewrap({ PATH: `${planted}:${realDir}` }, clone)).toBe(join(realDir, 'bwrap'));
    // Without a clone to keep out of, the lookup is PATH's.
    expect(findBubblewrap({ PATH: `${planted}:${realDir}` })).toBe(join(planted, 'bwrap'));
    const untrusted = { code: 'SEAL_UNTRUSTED', message: `untrusted bubblewrap: the only bwrap on PATH, ${join(planted, 'bwrap')}, is inside the clone ${clone}, which the sandboxed command can write: install bubblewrap (apt-get install bubblewrap), or put the directory it is in ahead on PATH`, path: join(planted, 'bwrap') };
    await expectError(async () => spawnSandboxed(snap, clone, ['sh', '-c', 'touch ran'], { stdio: 'ignore', env: { PATH: `${planted}:${linked}` } }), { ...untrusted, fds: false });
    expect([existsSync(marker), existsSync(ran)]).toEqual([false, false]);
    // The command line the same way, before anything is made.
    const r = spawnSync(process.execPath, [CLI, 'run', snap.digest, clone, '--', 'sh', '-c', 'touch ran'], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: store.root, PATH: `${planted}:${linked}:${process.env.PATH}` } });
    expect([r.status, r.stderr, existsSync(marker), existsSync(ran)]).toEqual([0, '', false, true]);
    const alone = spawnSync(process.execPath, [CLI, 'run', snap.digest, clone, '--', 'true'], { encoding: 'utf8', env: { ...process.env, TREESEAL_STORE: store.root, PATH: `${planted}:${linked}` } });
    expect([alone.status, alone.stderr.split('\n')[0], existsSync(marker)]).toEqual([125, `treeseal: SEAL_UNTRUSTED: ${untrusted.message}`, false]);
    store.closeSync();
  });

  it('a clone replaced while the sandbox is prepared is SEAL_CHANGED (nothing runs, the replacement only gets its mount points); no bwrap is SEAL_UNAVAILABLE; neither leaves a lease', async () => {
    if (!bwrapAvailable()) return;
    const work = tempDir();
    writeTree(work, { 'repo/src/a.ts': 'alpha', 'repo/node_modules/p/index.js': 'p', 'other/keep': 'k' });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'node_modules', target: 'node_modules' }] });
    const clone = join(work, 'arm');
    snap.materializeSync(clone, { createClone: true });
    const marker = join(work, 'ran');
    // The call opens the clone before its first await: swapped right after, the path names another directory.
    const call = spawnSandboxed(snap, clone, ['sh', '-c', `touch ${marker}`], { stdio: 'ignore' });
    renameSync(clone, join(work, 'arm-moved'));
    renameSync(join(work, 'other'), clone);
    const err = await call.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ code: 'SEAL_CHANGED', path: clone, message: `clone was replaced while the sandbox was prepared: ${clone}` });
    expect(existsSync(marker)).toBe(false);
    expect(readdirSync(clone).sort()).toEqual(['keep', 'node_modules']);
    expect(readdirSync(join(clone, 'node_modules'))).toEqual([]);
    // Said before anything is made: an empty clone directory gets no mount points (it got node_modules/ before).
    const untouched = join(work, 'untouched');
    mkdirSync(untouched);
    await expectError(async () => spawnSandboxed(snap, untouched, ['true'], { stdio: 'ignore', env: { PATH: join(work, 'empty') } }), {
      code: 'SEAL_UNAVAILABLE',
      message: 'a sandboxed run needs bubblewrap: no bwrap on PATH (Debian and Ubuntu: apt-get install bubblewrap)',
      unchanged: untouched,
    });
    expect(readdirSync(untouched)).toEqual([]);
    // A bwrap on PATH that cannot run (a wrapper script whose interpreter is missing): said as such, not as no bwrap.
    const bin = join(work, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'bwrap'), '#!/nonexistent/interpreter\n', { mode: 0o755 });
    const other = join(work, 'arm-2');
    mkdirSync(other, { mode: 0o700 });
    await expectError(async () => spawnSandboxed(snap, other, ['true'], { stdio: 'ignore', env: { PATH: bin } }), {
      code: 'SEAL_UNAVAILABLE',
      message: `bubblewrap at ${join(bin, 'bwrap')} cannot be run: ENOENT (an interpreter its first line names is missing?)`,
      fds: false,
    });
    // The lookup itself: the first executable bwrap on PATH, as spawn finds it.
    expect(findBubblewrap()).toMatch(/^\/.*\/bwrap$/);
    expect(() => findBubblewrap({ PATH: join(work, 'empty') })).toThrow(expect.objectContaining({ code: 'SEAL_UNAVAILABLE' }));
    expect(() => findBubblewrap(null as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_TYPE' }));
    // An empty or relative PATH entry is the working directory's: an arm an agent left a ./bwrap in ran unsandboxed.
    const cwd = process.cwd();
    process.chdir(bin);
    try {
      expect(() => findBubblewrap({ PATH: `:.:bin:${join(work, 'empty')}` })).toThrow(expect.objectContaining({ code: 'SEAL_UNAVAILABLE' }));
      expect(findBubblewrap({ PATH: `:${bin}` })).toBe(join(bin, 'bwrap'));
    } finally {
      process.chdir(cwd);
    }
    expect(store.remove(snap.digest)).toBe(snap.digest);
    store.closeSync();
  });
});

describe('sandboxArgs', () => {
  it('makes the mount points and returns bubblewrap and docker arguments', async () => {
    const work = tempDir();
    writeTree(work, { 'repo/src/a.ts': 'alpha', 'repo/node_modules/p/index.js': 'p', 'arm with, comma': null });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'node_modules', target: 'node_modules' }] });
    const clone = join(work, 'arm with, comma');
    const payload = `${snap.root}/mounts/00000/payload`;
    const args = sandboxArgs(snap, clone, { system: ['/usr'] });
    expect(args.mounts).toEqual([{ source: payload, target: '/workspace/node_modules', readOnly: true, tmpfs: ['/workspace/node_modules/.vite-temp'] }]);
    expect(existsSync(join(clone, 'node_modules'))).toBe(true);
    const start = ['--unshare-all', '--die-with-parent', '--new-session', '--cap-drop', 'ALL', '--ro-bind', '/usr', '/usr'];
    expect(args.bwrap.slice(0, start.length)).toEqual(start);
    // Between them, the host's root links (/bin -> usr/bin, ...) as the host has them.
    expect(args.bwrap.slice(-18)).toEqual([
      '--dev', '/dev', '--proc', '/proc', '--remount-ro', '/proc', '--tmpfs', '/tmp',
      '--bind', clone, '/workspace',
      '--ro-bind', payload, '/workspace/node_modules',
      '--tmpfs', '/workspace/node_modules/.vite-temp',
      '--chdir', '/workspace',
    ]);
    expect(args.docker).toEqual([
      '--mount', `type=bind,"src=${clone}",dst=/workspace`,
      '--mount', `type=bind,src=${payload},dst=/workspace/node_modules,readonly`,
      '--mount', 'type=tmpfs,dst=/workspace/node_modules/.vite-temp',
      '-w', '/workspace',
      '--network', 'none',
    ]);
    const shared = await sandboxArgsAsync(snap, clone, { network: true, workspace: '/w' });
    expect(shared.bwrap.slice(0, 2)).toEqual(['--unshare-all', '--share-net']);
    expect(shared.docker.slice(-2)).toEqual(['-w', '/w']);
    store.closeSync();
  });

  it('refuses bad options as Node does, before making anything', async () => {
    const work = tempDir();
    writeTree(work, { 'repo/src/a.ts': 'alpha', 'repo/dep/x': 'x', arm: null });
    const store = SnapshotStore.openSync(join(work, 'store'));
    const snap = store.captureSync({ source: join(work, 'repo'), copy: ['src'], mounts: [{ source: 'dep', target: 'dep' }] });
    const clone = join(work, 'arm');
    expectError(() => sandboxArgs(snap, clone, { network: 'yes' as unknown as boolean }), { code: 'ERR_INVALID_ARG_TYPE', unchanged: clone });
    expectError(() => sandboxArgs(null as unknown as typeof snap, clone), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "snap" argument must be an instance of Snapshot. Received null', unchanged: clone });
    expectError(() => sandboxArgs(snap, clone, { system: '/usr' as unknown as string[] }), { code: 'ERR_INVALID_ARG_TYPE', unchanged: clone });
    expectError(() => sandboxArgs(snap, clone, { system: ['usr'] }), { code: 'SEAL_BAD_PATH', message: 'system directory options.system[0] must be an absolute path: usr', unchanged: clone });
    await expectError(async () => sandboxArgsAsync(snap, 3 as unknown as string), { code: 'ERR_INVALID_ARG_TYPE', unchanged: clone });
    // A null byte in the command is named as its own argument (spawn named its place among bwrap's: args[41]).
    await expectError(async () => spawnSandboxed(snap, clone, ['echo', 'a\0b']), { code: 'ERR_INVALID_ARG_VALUE', message: /^The property 'command\[1\]' must be a string without null bytes/, unchanged: clone });
    // An fd that is not open: named, before a mount point is made (it was spawn's bare EBADF).
    await expectError(async () => spawnSandboxed(snap, clone, ['true'], { stdio: ['ignore', 99_999, 'ignore'] }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.stdio[1]' must be an open file descriptor. Received 99999",
      unchanged: clone,
    });
    // One string longer than an exec holds (MAX_ARG_STRLEN): SEAL_LIMIT naming it, before a mount point is made.
    await expectError(async () => spawnSandboxed(snap, clone, ['echo', 'x'.repeat(200_000)], { stdio: 'ignore' }), {
      code: 'SEAL_LIMIT',
      message: 'command[1] is 200000 bytes: one argument or environment string of an exec holds at most 131071 (pass it in a file or on stdin)',
      unchanged: clone,
    });
    await expectError(async () => spawnSandboxed(snap, clone, ['echo'], { stdio: 'ignore', env: { PATH: '/usr/bin', PROMPT: 'y'.repeat(131_065) } }), {
      code: 'SEAL_LIMIT',
      message: 'environment variable PROMPT is 131072 bytes: one argument or environment string of an exec holds at most 131071 (pass it in a file or on stdin)',
      unchanged: clone,
    });
    if (bwrapAvailable()) {
      // More than one exec takes in all (E2BIG), each string short enough: SEAL_LIMIT, not the raw spawn error.
      const other = join(work, 'arm-2');
      mkdirSync(other, { mode: 0o700 });
      // Past 6 MiB: E2BIG whatever the stack limit (the kernel caps argument space there).
      await expectError(async () => spawnSandboxed(snap, other, ['echo', ...Array.from({ length: 70 }, () => 'x'.repeat(100_000))], { stdio: 'ignore' }), { code: 'SEAL_LIMIT', message: "the command's arguments and environment are more than one exec takes (E2BIG): echo", fds: false });
      // One string of exactly the most an exec holds runs.
      const longest = await spawnSandboxed(snap, join(work, 'arm-2'), ['true', 'x'.repeat(131_071)], { stdio: 'ignore' });
      expect(await new Promise((resolve) => longest.on('close', resolve))).toBe(0);
    }
    writeFileSync(join(clone, 'dep'), 'a file where the mount goes');
    expectError(() => sandboxArgs(snap, clone), { code: 'SEAL_COLLISION' });
    rmSync(join(clone, 'dep'));
    // A workspace the clone bound there would hide what the sandbox needs by, or lie inside (sh was not found, or the
    // command's /tmp was the clone): refused before a mount point is made, and by checkSandboxArgs alone.
    const cases: [string, string, string[]?][] = [
      ['/', 'workspace / would hide /usr, which the sandbox binds: give one of its own, as /workspace'],
      ['/usr', 'workspace /usr would hide /usr, which the sandbox binds: give one of its own, as /workspace'],
      ['/usr/bin', 'workspace /usr/bin would lie inside /usr, which the sandbox binds: give one of its own, as /workspace'],
      ['/etc/app', 'workspace /etc/app would lie inside /etc, which the sandbox binds: give one of its own, as /workspace'],
      ['/dev', 'workspace /dev would hide /dev, which the sandbox binds: give one of its own, as /workspace'],
      ['/proc/x', 'workspace /proc/x would lie inside /proc, which the sandbox binds: give one of its own, as /workspace'],
      ['/lib', 'workspace /lib would hide /lib, which the sandbox binds: give one of its own, as /workspace'],
      ['/tmp', "workspace /tmp would hide the sandbox's own /tmp: give one of its own, as /workspace"],
      ['/opt/tools', 'workspace /opt/tools would lie inside /opt, which the sandbox binds: give one of its own, as /workspace', ['/usr', '/etc', '/opt']],
    ];
    for (const [workspace, message, dirs] of cases) {
      const system = dirs === undefined ? {} : { system: dirs };
      expectError(() => sandboxArgs(snap, clone, { workspace, ...system }), { code: 'SEAL_BAD_PATH', message, unchanged: clone });
      expectError(() => checkSandboxArgs({ workspace, ...system }), { code: 'SEAL_BAD_PATH', message });
      await expectError(async () => spawnSandboxed(snap, clone, ['true'], { workspace, ...system }), { code: 'SEAL_BAD_PATH', message, unchanged: clone });
    }
    for (const workspace of ['/tmp/ws', '/w', '/home/arm', '/srv/x']) expect(() => checkSandboxArgs({ workspace })).not.toThrow();
    expect(() => checkSandboxArgs({ workspce: '/w' } as never)).toThrow(expect.objectContaining({ code: 'ERR_INVALID_ARG_VALUE', message: "The property 'options.workspce' is not an option of checkSandboxArgs (workspace, network, system). Received '/w'" }));
    store.closeSync();
  });
});
