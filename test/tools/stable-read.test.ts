// stable-read.test.ts: readStable: bounded, race-checked reads that never follow a link or block.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, chmodSync, mkdirSync, readFileSync, renameSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, readStable, readStableAt, readStableSync } from '../../dist/index.js';
import { AT_FDCWD, O_DIRECTORY, O_RDONLY, sys } from '../../dist/sys/index.js';
import { checkNoFdLeaks, countingPreads, expectError, inFlight, mkfifo, reflinkMount, tempDir, wrapSys } from '../helpers.js';

checkNoFdLeaks();


describe('readStable', () => {
  it.each(['this filesystem', 'ext4', 'xfs'] as const)('a write through a shared mapping during the read (its pages dirty and writable before it began, so the write moves no time) is SEAL_CHANGED, never torn bytes: the pages are put under writeback first (%s)', async (where) => {
    const base = where === 'this filesystem' ? undefined : reflinkMount(where);
    if (where !== 'this filesystem' && base === undefined) return;
    const dir = tempDir(base);
    const file = join(dir, 'mapped');
    const size = 64 * 1024;
    writeFileSync(file, Buffer.alloc(size, 'A'));
    for (const fifo of ['ready', 'go', 'done']) mkfifo(join(dir, fifo));
    // Maps the file shared and writes it whole through the mapping (each page faulted, dirty and writable), says so, then
    // on 'go' writes it whole again with other bytes (no fault: no time moves, unless the pages were written back since).
    const writer = spawn('python3', ['-c', [
      'import mmap, os, sys',
      'd = sys.argv[1]; fd = os.open(d + "/mapped", os.O_RDWR); m = mmap.mmap(fd, 0)',
      'm[:] = b"A" * len(m)',
      'open(d + "/ready", "w").write("1")',
      'open(d + "/go").read()',
      'm[:] = b"B" * len(m)',
      'open(d + "/done", "w").write("1")',
    ].join('\n'), dir], { stdio: 'ignore' });
    readFileSync(join(dir, 'ready'));
    // Past the window a fresh file is read twice in (its last fault 300 ms ago): read once, as an old file is.
    await new Promise((r) => setTimeout(r, 300));
    let preads = 0;
    const midRead = wrapSys({
      pread: (orig) => (fd, buffer, offset, length, position) => {
        if (++preads > 1) return orig(fd, buffer, offset, length, position);
        // The first half read, then the writer's second pass, then the rest.
        const n = orig(fd, buffer, offset, Math.min(length, size / 2), position);
        writeFileSync(join(dir, 'go'), '1');
        readFileSync(join(dir, 'done'));
        return n;
      },
    });
    expectError(() => readStableSync(file, { maxBytes: size, sys: midRead }), { code: 'SEAL_CHANGED', message: `file changed while being copied: ${file}` });
    expect(preads).toBeGreaterThan(1);
    await new Promise((r) => writer.once('close', r));
    // Unchanged since, it reads whole.
    expect(readStableSync(file, { maxBytes: size }).bytes).toEqual(Buffer.alloc(size, 'B'));
  });

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
    // The bound is required: left out, the error names it.
    for (const call of [() => (readStableSync as (p: string) => unknown)(join(dir, 'ten')), () => readStableSync(join(dir, 'ten'), {} as never)]) {
      expectError(call, { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options.maxBytes" property must be of type number. Received undefined' });
    }
    expectError(() => readStableSync(join(dir, 'ten'), null as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "options" argument must be of type object. Received null' });
  });

  it('a FIFO is SEAL_SPECIAL_FILE without blocking; a symlink is SEAL_SYMLINK; a directory and a missing file are refused', () => {
    const dir = tempDir();
    mkfifo(join(dir, 'pipe'));
    writeFileSync(join(dir, 'real'), 'x');
    symlinkSync('real', join(dir, 'link'));
    mkdirSync(join(dir, 'd'));
    expectError(() => readStableSync(join(dir, 'pipe'), { maxBytes: 10 }), { code: 'SEAL_SPECIAL_FILE', message: `must be a regular file: ${join(dir, 'pipe')}` });
    // A socket cannot be opened at all (ENXIO): a special file too, not an unavailable one.
    const server = spawnSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(join(dir, 'sock'))}, () => process.exit(0))`]);
    expect(server.status).toBe(0);
    expectError(() => readStableSync(join(dir, 'sock'), { maxBytes: 10 }), { code: 'SEAL_SPECIAL_FILE', message: `must be a regular file: ${join(dir, 'sock')}` });
    expectError(() => readStableSync(join(dir, 'link'), { maxBytes: 10 }), { code: 'SEAL_SYMLINK', message: `file must not be a symlink: ${join(dir, 'link')}` });
    expectError(() => readStableSync(join(dir, 'd'), { maxBytes: 10 }), { code: 'SEAL_BAD_PATH' });
    expectError(() => readStableSync(join(dir, 'missing'), { maxBytes: 10 }), { code: 'SEAL_UNAVAILABLE' });
    // A trailing slash names a directory: the kernel refuses `real/` (ENOTDIR), and so does readStable.
    expectError(() => readStableSync(`${join(dir, 'real')}/`, { maxBytes: 10 }), { code: 'SEAL_BAD_PATH', message: `not a file path: ${join(dir, 'real')}/` });
    // A relative or non-canonical path is named as given (it once said `parent directory … : .`).
    expectError(() => readStableSync('real', { maxBytes: 10 }), { code: 'SEAL_BAD_PATH', message: 'file must be an absolute path: real' });
    expectError(() => readStableSync(`${dir}/../x/real`, { maxBytes: 10 }), { code: 'SEAL_BAD_PATH', message: `file must be a canonical path (no '.', '..' or empty components): ${dir}/../x/real` });
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

describe('readStable options', () => {
  it('a missing or wrong maxBytes is Node\'s TypeError or RangeError, before any open', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'f'), 'x');
    expectError(() => readStableSync(join(dir, 'f'), { maxBytes: -1 }), {
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.maxBytes" is out of range. It must be >= 0 && <= 4294967295. Received -1',
    });
    // Past what one Buffer holds: refused at the call (a file over 4 GiB once gave a RangeError from deep in the read, about "size").
    expectError(() => readStableSync(join(dir, 'f'), { maxBytes: Number.MAX_SAFE_INTEGER }), {
      code: 'ERR_OUT_OF_RANGE',
      message: 'The value of "options.maxBytes" is out of range. It must be >= 0 && <= 4294967295. Received 9_007_199_254_740_991',
    });
    expectError(() => readStableSync(join(dir, 'f'), {} as never), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options.maxBytes" property must be of type number. Received undefined',
    });
    await expectError(async () => readStable(join(dir, 'f'), { maxBytes: 1.5 }), { code: 'ERR_OUT_OF_RANGE' });
    expectError(() => readStableSync(Buffer.from('x') as never, { maxBytes: 1 }), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "path" argument must be of type string. Received an instance of Buffer',
    });
  });
});

describe('readStableAt', () => {
  it('reads one entry of the directory: a name that climbs, is absolute or holds a / (and so could pass through a link) is SEAL_BAD_PATH, nothing opened', () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'sub'));
    writeFileSync(join(dir, 'sub', 'f'), 'inside');
    writeFileSync(join(dir, 'secret'), 'outside');
    symlinkSync(dir, join(dir, 'sub', 'lnk'));
    const fd = sys.openat(AT_FDCWD, join(dir, 'sub'), O_RDONLY | O_DIRECTORY);
    try {
      expect(readStableAt(fd, 'f', { maxBytes: 100 }).bytes.toString()).toBe('inside');
      for (const name of ['../secret', 'lnk/secret', join(dir, 'secret'), '.', '..', '', 'f/']) {
        expectError(() => readStableAt(fd, name, { maxBytes: 100 }), {
          code: 'SEAL_BAD_PATH',
          message: `name must be one entry of the directory (no '/', not '.' or '..'): ${name}`,
        });
      }
      expectError(() => readStableAt(fd, 'lnk', { maxBytes: 100 }), { code: 'SEAL_SYMLINK' });
    } finally {
      sys.close(fd);
    }
  });
});

describe('readStable and a write in flight at the first fstat', () => {
  it('is SEAL_CHANGED once the write is over (the file no longer reads the same)', () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, Buffer.alloc(64 * 1024, 0x41));
    expectError(() => readStableSync(path, { maxBytes: 1 << 20, sys: inFlight(path, Buffer.alloc(64 * 1024, 0x42)) }), {
      code: 'SEAL_CHANGED',
      message: `file changed while being copied: ${path}`,
      path,
    });
  });

  it('an empty file whose write lands after the first read (its stats unchanged) is SEAL_CHANGED, not returned empty', () => {
    const dir = tempDir();
    const path = join(dir, 'e');
    writeFileSync(path, '');
    const ino = BigInt(statSync(path).ino);
    let first: ReturnType<typeof sys.fstat> | undefined;
    let looks = 0;
    const hide = (st: ReturnType<typeof sys.fstat>): ReturnType<typeof sys.fstat> => (st.ino === ino ? (first ??= st) : st);
    const inFlightEmpty = wrapSys({
      fstatat: (orig) => (dirfd, name, flags) => hide(orig(dirfd, name, flags)),
      fstat: (orig) => (fd) => {
        const st = orig(fd);
        // The identity check after the read: the write's bytes land now, its timestamps were set before the first look.
        if (st.ino === ino && ++looks === 2) writeFileSync(path, 'late bytes');
        return hide(st);
      },
    });
    expectError(() => readStableSync(path, { maxBytes: 1 << 20, sys: inFlightEmpty }), { code: 'SEAL_CHANGED', message: `file changed while being copied: ${path}`, path });
  });

  it('a file changed just now is read twice and returned whole when it held still', () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, 'fresh bytes');
    const counting = countingPreads();
    const r = readStableSync(path, { maxBytes: 100, sys: counting.sys });
    expect(r.bytes.toString()).toBe('fresh bytes');
    // Two reads to EOF (each a read and the empty read that shows EOF).
    expect(counting.preads()).toBe(4);
  });

  it('a file last changed outside the window is read once', () => {
    const dir = tempDir();
    const path = join(dir, 'f');
    writeFileSync(path, 'settled');
    utimesSync(path, 1e9, 1e9);
    const start = Date.now();
    // ctime cannot be set back: let it age past the in-flight window.
    while (Date.now() - start < 400) {
      // wait
    }
    const counting = countingPreads();
    expect(readStableSync(path, { maxBytes: 100, sys: counting.sys }).bytes.toString()).toBe('settled');
    expect(counting.preads()).toBe(2);
  });
});

describe('messages name hostile paths escaped', () => {
  it("a system error's own text is escaped too: no control character reaches the message (it once carried the raw name after the escaped one)", async () => {
    const dir = tempDir();
    const name = 'no\nsuch\x1b[31m';
    const message = `file is unavailable: ${dir}/no\\x0asuch\\x1b[31m: ENOENT: no such file or directory, openat 'no\\x0asuch\\x1b[31m'`;
    expectError(() => readStableSync(join(dir, name), { maxBytes: 1 }), { code: 'SEAL_UNAVAILABLE', message });
    await expectError(async () => readStable(join(dir, name), { maxBytes: 1 }), { code: 'SEAL_UNAVAILABLE', message });
  });
});

describe('kernel pseudo-files', () => {
  it('a procfs or sysfs file, whose length is not its size, is SEAL_SPECIAL_FILE and not retryable (it was SEAL_CHANGED, retried forever)', () => {
    // A process's own /proc files are as new as the process: told by the filesystem, not by their times.
    for (const [path, how] of [['/proc/cpuinfo', 'more bytes than its size (0)'], [`/proc/${process.pid}/status`, 'more bytes than its size (0)'], ['/sys/kernel/mm/transparent_hugepage/enabled', 'fewer bytes than its size (4096)']] as const) {
      if (!statSync(path, { throwIfNoEntry: false })) continue;
      const err = expectError(() => readStableSync(path, { maxBytes: 1 << 20 }), {
        code: 'SEAL_SPECIAL_FILE',
        message: `file reads ${how} says: a kernel pseudo-file (procfs, sysfs), not stable contents: ${path}`,
      }) as SealError;
      expect(err.retryable).toBe(false);
    }
  });
});

describe('the path of a failure', () => {
  it("a parent that is a link, or that this user may not open, is named in the error's path (it had none)", () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'real'));
    writeFileSync(join(dir, 'real/f'), 'x');
    symlinkSync('real', join(dir, 'link'));
    expectError(() => readStableSync(join(dir, 'link/f'), { maxBytes: 9 }), {
      code: 'SEAL_SYMLINK',
      message: `parent directory must be a real directory, not a symlink: ${join(dir, 'link')}`,
      path: join(dir, 'link'),
    });
    expectError(() => readStableSync(join(dir, 'gone/f'), { maxBytes: 9 }), { code: 'SEAL_UNAVAILABLE', path: join(dir, 'gone') });
  });
});
