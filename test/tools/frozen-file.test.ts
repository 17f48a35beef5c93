// frozen-file.test.ts: writeFrozenFile creates a new read-only file, never overwrites or follows anything, and cleans up a failed write.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { writeFrozenFile, writeFrozenFileSync } from '../../dist/index.js';
import { DIST_INDEX, checkNoFdLeaks, expectError, failOnce, tempDir, wrapSys } from '../helpers.js';

const DIST_SYS = DIST_INDEX.replace(/index\.js$/, 'sys/index.js');

checkNoFdLeaks();

describe('writeFrozenFile', () => {
  it('writes a new read-only file, executable or not', async () => {
    const dir = tempDir();
    writeFrozenFileSync(join(dir, 'data'), Buffer.from('bytes'));
    await writeFrozenFile(join(dir, 'tool'), Buffer.from('#!/bin/sh'), { executable: true, fsync: false });
    expect(readFileSync(join(dir, 'data'), 'utf8')).toBe('bytes');
    expect(statSync(join(dir, 'data')).mode & 0o7777).toBe(0o444);
    expect(statSync(join(dir, 'tool')).mode & 0o7777).toBe(0o555);
  });

  it('never overwrites a file or writes through a dangling symlink', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'exists'), 'keep');
    symlinkSync(join(dir, 'target-that-does-not-exist'), join(dir, 'dangling'));
    expectError(() => writeFrozenFileSync(join(dir, 'exists'), Buffer.from('new')), { code: 'SEAL_COLLISION', message: `file already exists: ${join(dir, 'exists')}` });
    expect(readFileSync(join(dir, 'exists'), 'utf8')).toBe('keep');
    expectError(() => writeFrozenFileSync(join(dir, 'dangling'), Buffer.from('new')), { code: 'SEAL_COLLISION' });
    expect(existsSync(join(dir, 'target-that-does-not-exist'))).toBe(false);
    expect(lstatSync(join(dir, 'dangling')).isSymbolicLink()).toBe(true);
  });

  it('needs a real parent directory and removes a partial file when a write fails', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'real'));
    symlinkSync(join(dir, 'real'), join(dir, 'alias'));
    expectError(() => writeFrozenFileSync(join(dir, 'alias/f'), Buffer.from('x')), { code: 'SEAL_SYMLINK' });
    expect(readdirSync(join(dir, 'real'))).toEqual([]);
    // A relative path is named as given (it once said `parent directory must be an absolute path: real`).
    expectError(() => writeFrozenFileSync('real/f', Buffer.from('x')), { code: 'SEAL_BAD_PATH', message: 'file must be an absolute path: real/f' });
    const failing = wrapSys({
      pwrite: () => () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, pwrite'), { code: 'ENOSPC', errno: -28, syscall: 'pwrite' });
      },
    });
    const full = expectError(() => writeFrozenFileSync(join(dir, 'real/f'), Buffer.from('x'), { sys: failing }), {
      code: 'SEAL_IO',
      message: `cannot write file: ${join(dir, 'real/f')}: ENOSPC: no space left on device, pwrite`,
      path: join(dir, 'real/f'),
      unchanged: join(dir, 'real'),
    });
    expect((full.cause as { code?: string }).code).toBe('ENOSPC');
    expect(readdirSync(join(dir, 'real'))).toEqual([]);
    // The file has no name while it is written: another file put at its name meanwhile is SEAL_COLLISION at the link, and stays.
    const taken = wrapSys({
      pwrite: (orig) => (fd, buffer, offset, length, position) => {
        writeFileSync(join(dir, 'real/g'), 'theirs');
        return orig(fd, buffer, offset, length, position);
      },
    });
    expectError(() => writeFrozenFileSync(join(dir, 'real/g'), Buffer.from('x'), { sys: taken }), { code: 'SEAL_COLLISION', message: `file already exists: ${join(dir, 'real/g')}`, path: join(dir, 'real/g') });
    expect(readFileSync(join(dir, 'real/g'), 'utf8')).toBe('theirs');
    writeFileSync(join(dir, 'real/moved'), '');
    expect(readdirSync(join(dir, 'real')).sort()).toEqual(['g', 'moved']);
    // A close that fails (as NFS reports a write error at close): the file is removed all the same, so a retry can make it.
    const closing = failOnce('close', 'EIO');
    expectError(() => writeFrozenFileSync(join(dir, 'real/h'), Buffer.from('x'), { sys: closing.sys }), { code: 'SEAL_IO', path: join(dir, 'real/h') });
    expect(closing.injected()).toBeDefined();
    expect(readdirSync(join(dir, 'real')).sort()).toEqual(['g', 'moved']);
  });

  it('a process killed while it writes leaves nothing under the name: the next call makes the file whole (it left a short 0400 file there, SEAL_COLLISION for the retry)', () => {
    const dir = tempDir();
    const path = join(dir, 'out.bin');
    // Killed (SIGKILL) right after its first 4 KiB reach the file.
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', [
      `import { writeFrozenFileSync } from ${JSON.stringify(DIST_INDEX)};`,
      `import { sys } from ${JSON.stringify(DIST_SYS)};`,
      'const dying = { ...sys, pwrite: (fd, b, o, l, p) => { sys.pwrite(fd, b, o, Math.min(l, 4096), p); process.kill(process.pid, "SIGKILL"); } };',
      `writeFrozenFileSync(${JSON.stringify(path)}, Buffer.alloc(1 << 20, 120), { sys: dying });`,
    ].join('\n')], { encoding: 'utf8' });
    expect([child.signal, child.stderr]).toEqual(['SIGKILL', '']);
    expect(readdirSync(dir)).toEqual([]);
    writeFrozenFileSync(path, Buffer.alloc(1 << 20, 120));
    expect(readFileSync(path)).toEqual(Buffer.alloc(1 << 20, 120));
    expect(statSync(path).mode & 0o7777).toBe(0o444);
  });

  it('a wrong argument type is Node\'s TypeError, and nothing is written', async () => {
    const dir = tempDir();
    expectError(() => writeFrozenFileSync(join(dir, 'f'), 'text' as never), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "bytes" argument must be an instance of Buffer or Uint8Array. Received type string (\'text\')',
      unchanged: dir,
    });
    await expectError(async () => writeFrozenFile(join(dir, 'f'), Buffer.from('x'), { executable: 'yes' as never }), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.executable" property must be of type boolean. Received type string (\'yes\')',
      unchanged: dir,
    });
    expectError(() => writeFrozenFileSync(7 as never, Buffer.from('x')), { code: 'ERR_INVALID_ARG_TYPE', unchanged: dir });
  });

  it('bytes in shared memory that another thread rewrites while they are written: the file holds one version of them (it mixed two)', () => {
    const dir = tempDir();
    const shared = new Uint8Array(new SharedArrayBuffer(256 * 1024)).fill(1);
    let writes = 0;
    const rewriting = wrapSys({
      pwrite: (orig) => (fd, buffer, offset, length, position) => {
        // Write a little at a time, the buffer rewritten after each piece.
        const n = orig(fd, buffer, offset, Math.min(length, 4096), position);
        shared.fill(2 + (writes++ % 200));
        return n;
      },
    });
    writeFrozenFileSync(join(dir, 'f'), shared, { sys: rewriting });
    expect(readFileSync(join(dir, 'f')).equals(Buffer.alloc(256 * 1024, 1))).toBe(true);
  });
});

