// errno.test.ts: the addon's one EINTR policy and its error codes, seen from outside: a preloaded library
// (fault-shim.c) fails the C library calls the addon makes with a chosen errno, so every wrapper meets EINTR
// (retried, except close) and errnos libuv has no name for (still named).
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

import { tempDir } from '../helpers.js';

const SYS = new URL('../../dist/sys/index.js', import.meta.url).href;
let shim = '';

beforeAll(() => {
  shim = join(tempDir(), 'fault-shim.so');
  execFileSync('cc', ['-shared', '-fPIC', '-O1', '-o', shim, fileURLToPath(new URL('fault-shim.c', import.meta.url)), '-ldl']);
});

interface Run {
  out: unknown;
  report: Map<string, number>;
}

/** Runs `body` (an async function body given S, the treeseal/sys module, dir, and fs) in a child node under the shim. */
function underShim(body: string, errno: number, times: number): Run {
  const dir = tempDir();
  const report = join(tempDir(), 'report');
  const code = `
    import * as S from ${JSON.stringify(SYS)};
    import fs from 'node:fs';
    const dir = ${JSON.stringify(dir)};
    const out = await (async () => { ${body} })();
    process.stdout.write(JSON.stringify(out));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
    encoding: 'utf8',
    env: { ...process.env, LD_PRELOAD: shim, TREESEAL_SHIM_ERRNO: String(errno), TREESEAL_SHIM_TIMES: String(times), TREESEAL_SHIM_REPORT: report },
  });
  if (r.status !== 0) throw new Error(`child exited ${String(r.status)}: ${r.stderr}`);
  const lines = readFileSync(report, 'utf8').trim().split('\n').filter((l) => l !== '');
  return { out: JSON.parse(r.stdout) as unknown, report: new Map(lines.map((l) => [l.split(' ')[0]!, Number(l.split(' ')[1])])) };
}

/**
 * Every key of sys once, each a call that succeeds; the result of each, or the code it failed with. The
 * scaffolding (opening, closing, renaming back) uses node:fs, whose calls the shim leaves alone.
 */
const EVERY_CALL = `
  const { sys } = S;
  fs.writeFileSync(dir + '/f', 'abcdef');
  const results = {};
  const step = (key, fn) => { try { const v = fn(); results[key] = v === undefined ? 'ok' : v; } catch (e) { results[key] = e.code ?? String(e); } };
  const d = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
  const fd = fs.openSync(dir + '/f', 'r+');
  const dst = fs.openSync(dir + '/dst', 'wx+', 0o600);
  const two = fs.openSync(dir + '/f', 'r');
  step('openat', () => { const n = sys.openat(d, 'f', S.O_RDONLY); fs.closeSync(n); return typeof n; });
  step('openat2', () => { const n = sys.openat2(d, 'f', S.O_RDONLY, 0, S.RESOLVE_BENEATH); fs.closeSync(n); return typeof n; });
  step('fstat', () => sys.fstat(fd).size);
  step('fstatat', () => sys.fstatat(d, 'f', S.AT_SYMLINK_NOFOLLOW).size);
  step('statx', () => S.isReg(sys.statx(d, 'f', S.AT_SYMLINK_NOFOLLOW).mode));
  step('fstatfs', () => typeof sys.fstatfs(fd));
  step('readdir', () => sys.readdir(d).map((e) => e.name).sort().join(','));
  step('mkdirat', () => sys.mkdirat(d, 'm', 0o700));
  step('unlinkat', () => sys.unlinkat(d, 'm', S.AT_REMOVEDIR));
  step('renameat2', () => sys.renameat2(d, 'f', d, 'g', S.RENAME_NOREPLACE));
  if (fs.existsSync(dir + '/g')) fs.renameSync(dir + '/g', dir + '/f');
  step('linkat', () => sys.linkat(d, 'f', d, 'h', 0));
  step('symlinkat', () => sys.symlinkat('f', d, 's'));
  step('readlinkat', () => sys.readlinkat(d, 's'));
  const buf = Buffer.alloc(6);
  step('pread', () => sys.pread(fd, buf, 0, 3, 0) + buf.toString('latin1', 0, 3));
  step('pread at the fd offset', () => sys.pread(fd, buf, 0, 2, -1) + buf.toString('latin1', 0, 2));
  step('pwrite', () => sys.pwrite(fd, Buffer.from('XY'), 0, 2, 4));
  step('pwrite at the fd offset', () => sys.pwrite(fd, Buffer.from('Z'), 0, 1, -1));
  step('lseek', () => sys.lseek(fd, 1, S.SEEK_SET));
  step('ftruncate', () => sys.ftruncate(fd, 6));
  step('fsync', () => sys.fsync(fd));
  step('fdatasync', () => sys.fdatasync(fd));
  step('sync_file_range', () => sys.sync_file_range(fd, 0, 0, S.SYNC_FILE_RANGE_WRITE));
  step('syncfs', () => sys.syncfs(fd));
  step('fchmod', () => sys.fchmod(fd, 0o640));
  step('fchmodat', () => sys.fchmodat(d, 'f', 0o600, 0));
  step('futimens', () => { sys.futimens(fd, 0, S.UTIME_OMIT, 1000, 7); return sys.fstat(fd).mtimeNs.toString(); });
  step('utimensat', () => { sys.utimensat(d, 'f', 0, S.UTIME_OMIT, 2000, 9, S.AT_SYMLINK_NOFOLLOW); return sys.fstat(fd).mtimeNs.toString(); });
  step('flock', () => { sys.flock(fd, S.LOCK_EX | S.LOCK_NB); sys.flock(fd, S.LOCK_UN); });
  step('ficlone', () => typeof sys.ficlone(dst, fd));
  step('copy_file_range', () => sys.copy_file_range(fd, 0, dst, 0, 6));
  step('close', () => sys.close(two));
  // The closed fd is gone (close really closed it, once).
  step('after close', () => { try { fs.fstatSync(two); return 'open'; } catch (e) { return e.code; } });
  results.content = fs.readFileSync(dir + '/f', 'latin1') + '|' + fs.readFileSync(dir + '/dst', 'latin1');
  results.mode = (fs.statSync(dir + '/f').mode & 0o777).toString(8);
  for (const n of [fd, dst, d]) fs.closeSync(n);
  return results;`;

const EXPECTED = {
  openat: 'number',
  openat2: 'number',
  fstat: 6,
  fstatat: 6,
  statx: true,
  fstatfs: 'number',
  readdir: 'dst,f',
  mkdirat: 'ok',
  unlinkat: 'ok',
  renameat2: 'ok',
  linkat: 'ok',
  symlinkat: 'ok',
  readlinkat: 'f',
  pread: '3abc',
  'pread at the fd offset': '2ab',
  pwrite: 2,
  'pwrite at the fd offset': 1,
  lseek: 1,
  ftruncate: 'ok',
  fsync: 'ok',
  fdatasync: 'ok',
  sync_file_range: 'ok',
  syncfs: 'ok',
  fchmod: 'ok',
  fchmodat: 'ok',
  futimens: '1000000000007',
  utimensat: '2000000000009',
  flock: 'ok',
  ficlone: 'boolean',
  copy_file_range: 6,
  close: 'ok',
  'after close': 'EBADF',
  content: 'abZdXY|abZdXY',
  mode: '600',
};

describe('EINTR', () => {
  it('the calls succeed as they do without the shim', () => {
    expect(underShim(EVERY_CALL, 4, 0).out).toEqual(EXPECTED);
  });

  it('every wrapper retries a call that fails with EINTR, and close is never retried (it closed the fd already)', () => {
    const { out, report } = underShim(EVERY_CALL, 4, 2);
    expect(out).toEqual(EXPECTED);
    // Every C library function the addon calls met EINTR. close(two) met it right after a call that succeeded:
    // it reports success and the fd is gone (EXPECTED: 'ok', then EBADF); a retry would have been EBADF.
    const met = [...report.keys()].map((name) => name.replace(/64$/, '')).sort();
    expect(met).toEqual(
      ['close', 'copy_file_range', 'fchmod', 'fdatasync', 'flock', 'fstat', 'fstatat', 'fstatfs', 'fsync', 'ftruncate', 'futimens', 'ioctl', 'linkat', 'lseek', 'mkdirat', 'openat', 'pread', 'pwrite', 'read', 'readlinkat', 'statx', 'symlinkat', 'sync_file_range', 'syncfs', 'syscall', 'unlinkat', 'utimensat', 'write'].sort(),
    );
  });
});

describe('errno codes', () => {
  const fail = (call: string): string => `
    const d = fs.openSync(dir, 'r');
    try { ${call}; return 'no error'; } catch (e) { return [e.code, e.errno, e.syscall, e.message, S.hasCode(e, e.code)]; }`;

  it('an errno libuv has no name for keeps its own (EDQUOT, ENOLCK, ESTALE): base/refusal.ts maps them by name', () => {
    expect(underShim(fail(`S.sys.mkdirat(d, 'm', 0o700)`), 122, 1).out).toEqual(['EDQUOT', -122, 'mkdirat', "EDQUOT: disk quota exceeded, mkdirat 'm'", true]);
    expect(underShim(fail('S.sys.flock(d, S.LOCK_EX)'), 37, 1).out).toEqual(['ENOLCK', -37, 'flock', 'ENOLCK: no locks available, flock', true]);
    expect(underShim(fail('S.sys.fstat(d)'), 116, 1).out).toEqual(['ESTALE', -116, 'fstat', 'ESTALE: stale file handle, fstat', true]);
  });

  it('libuv names what it knows, as node:fs does; an errno nobody knows is UNKNOWN, as in Node', () => {
    expect(underShim(fail('S.sys.fstat(d)'), 5, 1).out).toEqual(['EIO', -5, 'fstat', 'EIO: i/o error, fstat', true]);
    expect(underShim(fail('S.sys.fstat(d)'), 4000, 1).out).toEqual(['UNKNOWN', -4000, 'fstat', 'UNKNOWN: unknown error, fstat', true]);
  });
});
