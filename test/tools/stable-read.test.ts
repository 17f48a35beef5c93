// stable-read.test.ts: readStable and writeFrozenFile: bounded, race-checked, never following or blocking.
import { appendFileSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, statSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, readStable, readStableAt, readStableSync, writeFrozenFile, writeFrozenFileSync } from '../../dist/index.js';
import { AT_FDCWD, O_DIRECTORY, O_RDONLY, sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, expectError, mkfifo, tempDir, wrapSys } from '../helpers.js';

checkNoFdLeaks();


describe('readStable', () => {
  it('reads a file with its executable bit and identity', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'tool'), 'run me');
    chmodSync(join(dir, 'tool'), 0o750);
    const r = readStableSync(join(dir, 'tool'), { maxBytes: 100 });
    expect(r.bytes.toString()).toBe('run me');
    expect(r.executable).toBe(true);
    expect(r.identity.ino).toBe(statSync(join(dir, 'tool'), { bigint: true }).ino);
    const a = await readStable(join(dir, 'tool'), { maxBytes: 100 });
    expect(Buffer.isBuffer(a.bytes)).toBe(true);
    expect(a.bytes.toString()).toBe('run me');
    const dirfd = sys.openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY);
    try {
      expect(readStableAt(dirfd, 'tool', { maxBytes: 6 }).bytes.toString()).toBe('run me');
    } finally {
      sys.close(dirfd);
    }
  });

  it('0-byte file, exactly maxBytes, and maxBytes+1', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'empty'), '');
    writeFileSync(join(dir, 'ten'), '0123456789');
    expect(readStableSync(join(dir, 'empty'), { maxBytes: 0 }).bytes.length).toBe(0);
    expect(readStableSync(join(dir, 'ten'), { maxBytes: 10 }).bytes.toString()).toBe('0123456789');
    expectError(() => readStableSync(join(dir, 'ten'), { maxBytes: 9 }), { code: 'SEAL_LIMIT', message: `file exceeds the per-file limit (9 bytes): ${join(dir, 'ten')}` });
  });

  it('a FIFO is SEAL_SPECIAL_FILE without blocking; a symlink is SEAL_SYMLINK; a directory and a missing file are refused', () => {
    const dir = tempDir();
    mkfifo(join(dir, 'pipe'));
    writeFileSync(join(dir, 'real'), 'x');
    symlinkSync('real', join(dir, 'link'));
    mkdirSync(join(dir, 'd'));
    expectError(() => readStableSync(join(dir, 'pipe'), { maxBytes: 10 }), { code: 'SEAL_SPECIAL_FILE', message: `must be a regular file: ${join(dir, 'pipe')}` });
    expectError(() => readStableSync(join(dir, 'link'), { maxBytes: 10 }), { code: 'SEAL_SYMLINK', message: `file must not be a symlink: ${join(dir, 'link')}` });
    expectError(() => readStableSync(join(dir, 'd'), { maxBytes: 10 }), { code: 'SEAL_BAD_PATH' });
    expectError(() => readStableSync(join(dir, 'missing'), { maxBytes: 10 }), { code: 'SEAL_UNAVAILABLE' });
  });

  it('a file that grows past the cap during the read is refused', () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, 'abcd');
    const grow = wrapSys({
      pread: (orig) => (fd, buf, off, len, pos) => {
        const n = orig(fd, buf, off, len, pos);
        if (pos === 0) appendFileSync(path, 'efghijklmnop');
        return n;
      },
    });
    expectError(() => readStableSync(path, { maxBytes: 8, sys: grow }), { code: 'SEAL_LIMIT', message: `file exceeds the per-file limit (8 bytes): ${path}` });
    writeFileSync(path, 'abcd');
    const err = expectError(() => readStableSync(path, { maxBytes: 100, sys: grow }), { code: 'SEAL_CHANGED', message: `file changed while being copied: ${path}` });
    expect((err as SealError).retryable).toBe(true);
  });

  it('a path re-pointed to another file after the read is SEAL_CHANGED', () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, 'first');
    writeFileSync(join(dir, 'g'), 'other');
    let done = false;
    const swap = wrapSys({
      fstatat: (orig) => (dirfd, name, flags) => {
        if (!done && name === 'f') {
          done = true;
          renameSync(join(dir, 'g'), path);
        }
        return orig(dirfd, name, flags);
      },
    });
    expectError(() => readStableSync(path, { maxBytes: 100, sys: swap }), { code: 'SEAL_CHANGED', message: `file changed while being copied: ${path}` });
  });
});

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
    const failing = wrapSys({
      pwrite: () => () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, pwrite'), { code: 'ENOSPC', errno: -28, syscall: 'pwrite' });
      },
    });
    const full = expectError(() => writeFrozenFileSync(join(dir, 'real/f'), Buffer.from('x'), { sys: failing }), {
      code: 'SEAL_IO',
      message: 'writeFrozenFile: ENOSPC: no space left on device, pwrite',
      unchanged: join(dir, 'real'),
    });
    expect((full.cause as { code?: string }).code).toBe('ENOSPC');
    expect(readdirSync(join(dir, 'real'))).toEqual([]);
  });
});
