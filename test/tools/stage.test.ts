// stage.test.ts: stageFiles: private stage, checked targets, planted symlinks never followed, verify and close.
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, stageFiles, stageFilesSync } from '../../dist/index.js';
import { DIST_INDEX, checkNoFdLeaks, expectError, rootOrSkip, tempDir, wrapSys } from '../helpers.js';

checkNoFdLeaks();

const files = [
  { target: 'oracle/expected.json', bytes: Buffer.from('{"ok":true}') },
  { target: 'oracle/deep/check.sh', bytes: Buffer.from('#!/bin/sh') },
  { target: 'top.txt', bytes: Buffer.from('top') },
];


describe('stageFiles', () => {
  it('stages read-only files in a private directory, verifies them and removes them on close', async () => {
    const parent = tempDir();
    const stage = await stageFiles(parent, files, { prefix: '.oracle-' });
    expect(stage.root).toMatch(new RegExp(`^${parent}/\\.oracle-[0-9a-f]{32}$`));
    expect(statSync(stage.root).mode & 0o7777).toBe(0o700);
    expect(readFileSync(join(stage.root, 'oracle/expected.json'), 'utf8')).toBe('{"ok":true}');
    expect(statSync(join(stage.root, 'oracle/deep/check.sh')).mode & 0o7777).toBe(0o400);
    expect(stage.files.map((f) => [f.target, f.size])).toEqual([
      ['oracle/expected.json', 11],
      ['oracle/deep/check.sh', 9],
      ['top.txt', 3],
    ]);
    stage.verify();
    stage.close();
    stage.close();
    expect(readdirSync(parent)).toEqual([]);
    expect(() => stage.verify()).toThrow(expect.objectContaining({ code: 'SEAL_CLOSED' }));
  });

  it('a stage its process left when it died is removed by the next stageFiles under the same parent; a live one, another prefix\'s and a look-alike are left (stages of killed processes piled up)', async () => {
    const parent = tempDir();
    // A process that stages and is killed before it closes its stage.
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', [
      `import { stageFilesSync } from ${JSON.stringify(DIST_INDEX)};`,
      `const stage = stageFilesSync(${JSON.stringify(parent)}, [{ target: 'a/b.txt', bytes: Buffer.from('left') }]);`,
      'process.stdout.write(stage.root);',
      'process.kill(process.pid, "SIGKILL");',
    ].join('\n')], { encoding: 'utf8' });
    expect(child.signal).toBe('SIGKILL');
    const dead = child.stdout;
    expect(existsSync(join(dead, 'a/b.txt'))).toBe(true);
    const live = stageFilesSync(parent, [{ target: 'x', bytes: Buffer.from('live') }]);
    // The dead one went with that call; the live one stays through the next, as do another prefix's and a name that is not a stage's.
    expect(existsSync(dead)).toBe(false);
    const other = stageFilesSync(parent, [{ target: 'y', bytes: Buffer.from('other') }], { prefix: 'mine-' });
    mkdirSync(join(parent, '.treeseal-stage-not-hex'));
    const next = await stageFiles(parent, [{ target: 'z', bytes: Buffer.from('next') }]);
    expect(readdirSync(parent).sort()).toEqual([basename(live.root), basename(next.root), basename(other.root), '.treeseal-stage-not-hex'].sort());
    live.verify();
    for (const s of [live, other, next]) s.close();
    expect(readdirSync(parent)).toEqual(['.treeseal-stage-not-hex']);
  });

  it.runIf(rootOrSkip('mount --bind'))('close never empties a directory bound into the stage, directly inside it or below: SEAL_BUSY, the bound directory as it was; once unmounted, close removes the stage (it emptied one bound directly inside)', () => {
    const parent = tempDir();
    const host = tempDir();
    writeFileSync(join(host, 'precious.txt'), 'precious');
    for (const at of ['data', 'oracle/deep/data']) {
      const stage = stageFilesSync(parent, files);
      const bound = join(stage.root, at);
      mkdirSync(bound, { recursive: true });
      execFileSync('mount', ['--bind', host, bound]);
      try {
        expectError(() => stage.close(), { code: 'SEAL_BUSY', message: 'data is a mount point: a removal never crosses into another filesystem (unmount it first)' });
        expect(readdirSync(host)).toEqual(['precious.txt']);
      } finally {
        execFileSync('umount', [bound]);
      }
      stage.close();
      expect(existsSync(stage.root)).toBe(false);
    }
    expect(readdirSync(parent)).toEqual([]);
  });

  it('checks every target before creating anything', () => {
    const parent = tempDir();
    const cases: [string[], string, string][] = [
      [['a', 'a/b'], 'SEAL_OVERLAP', 'stage targets overlap: a and a/b'],
      [['a', 'a'], 'SEAL_OVERLAP', 'stage targets overlap: a and a'],
      [['../x'], 'SEAL_BAD_PATH', "stage target must not contain '..': ../x"],
      [['/etc/x'], 'SEAL_BAD_PATH', 'stage target must be relative: /etc/x'],
      [['a//b'], 'SEAL_BAD_PATH', "stage target must not have empty or '.' components: a//b"],
      [['a/./b'], 'SEAL_BAD_PATH', "stage target must not have empty or '.' components: a/./b"],
      [['dir/'], 'SEAL_BAD_PATH', 'stage target must name a file: dir/'],
      [[''], 'SEAL_BAD_PATH', 'stage target must be a non-empty relative path'],
    ];
    for (const [targets, code, message] of cases) {
      expectError(() => stageFilesSync(parent, targets.map((target) => ({ target, bytes: Buffer.from('x') }))), { code, message });
      expect(readdirSync(parent)).toEqual([]);
    }
    expectError(() => stageFilesSync(parent, files, { maxPathBytes: 10 }), { code: 'SEAL_LIMIT' });
    expectError(() => stageFilesSync(parent, files, { prefix: '../x' }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.prefix' must be a plain name. Received '../x'",
      unchanged: parent,
    });
    expectError(() => stageFilesSync(tempDir(), files, { prefix: '\ud800' }), {
      code: 'ERR_INVALID_ARG_VALUE',
      message: "The property 'options.prefix' must be a plain name. Received '\\ud800'",
    });
    expectError(() => stageFilesSync(parent, files, { maxPathBytes: -1 }), { code: 'ERR_OUT_OF_RANGE', unchanged: parent });
    expectError(() => stageFilesSync(parent, 'x' as never), { code: 'ERR_INVALID_ARG_TYPE', unchanged: parent });
    expectError(() => stageFilesSync(parent, [{ target: 'a', bytes: 'x' as never }]), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "files[0].bytes" property must be an instance of Buffer or Uint8Array. Received type string (\'x\')',
      unchanged: parent,
    });
    expectError(() => stageFilesSync(parent, [{ target: 7 as never, bytes: Buffer.from('x') }]), { code: 'ERR_INVALID_ARG_TYPE', unchanged: parent });
    expectError(() => stageFilesSync(7 as never, files), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "parent" argument must be of type string. Received type number (7)' });
  });

  it('needs a real parent directory', () => {
    const work = tempDir();
    mkdirSync(join(work, 'real'));
    symlinkSync(join(work, 'real'), join(work, 'alias'));
    expectError(() => stageFilesSync(join(work, 'alias'), files), { code: 'SEAL_SYMLINK' });
    expect(readdirSync(join(work, 'real'))).toEqual([]);
  });

  it('a symlink planted in a parent before staging is never followed; nothing is created outside', () => {
    const work = tempDir();
    const parent = join(work, 'parent');
    const outside = join(work, 'outside');
    mkdirSync(parent);
    mkdirSync(outside);
    // Plant the link inside the fresh stage right after it is created, before the parents are made.
    const planting = wrapSys({
      mkdirat: (orig) => (dirfd, path, mode) => {
        orig(dirfd, path, mode);
        if (typeof path === 'string' && path.startsWith('.treeseal-stage-')) symlinkSync(outside, join(parent, path, 'oracle'));
      },
    });
    expectError(() => stageFilesSync(parent, files, { sys: planting }), { code: 'SEAL_SYMLINK', message: 'stage parent must be a real directory: oracle/expected.json' });
    expect(readdirSync(outside)).toEqual([]);
    expect(readdirSync(parent)).toEqual([]);
  });

  it('verify flags an extra file planted in the stage', () => {
    const stage = stageFilesSync(tempDir(), files);
    writeFileSync(join(stage.root, 'oracle/planted'), 'evil');
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message: 'stage changed during verification: oracle/planted' });
    stage.close();
    expect(existsSync(stage.root)).toBe(false);
  });

  it('verify flags a staged file made writable and rewritten, and close still removes the stage', () => {
    const parent = tempDir();
    const stage = stageFilesSync(parent, files);
    const path = join(stage.root, 'top.txt');
    chmodSync(path, 0o600);
    writeFileSync(path, 'TOP');
    chmodSync(path, 0o400);
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message: 'stage changed during verification: top.txt' });
    stage.close();
    expect(readdirSync(parent)).toEqual([]);
  });

  it('verify flags a stage moved away with a look-alike (or a link to it) put at its path, whose files are what stage.files names', () => {
    const parent = tempDir();
    const stage = stageFilesSync(parent, files);
    const moved = join(parent, 'moved');
    renameSync(stage.root, moved);
    mkdirSync(stage.root);
    for (const f of stage.files) {
      mkdirSync(join(stage.root, f.target, '..'), { recursive: true });
      writeFileSync(join(stage.root, f.target), 'EVIL');
    }
    const message = `stage is no longer at its path: ${stage.root}`;
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message, path: stage.root });
    rmSync(stage.root, { recursive: true });
    symlinkSync('moved', stage.root);
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message, path: stage.root });
    rmSync(stage.root);
    // Nothing at its path at all.
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message, path: stage.root });
    renameSync(moved, stage.root);
    stage.verify();
    stage.close();
    expect(readdirSync(parent)).toEqual([]);
  });

  it('verify flags a replaced inode and a missing file', () => {
    const stage = stageFilesSync(tempDir(), files);
    const path = join(stage.root, 'top.txt');
    writeFileSync(`${path}.new`, 'top');
    chmodSync(`${path}.new`, 0o400);
    renameSync(`${path}.new`, path);
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message: 'stage changed during verification: top.txt' });
    rmSync(path);
    expectError(() => stage.verify(), { code: 'SEAL_CHANGED', message: 'stage changed during verification: top.txt' });
    stage.close();
  });

  it('close removes a stage holding a planted symlink without following it', () => {
    const work = tempDir();
    const outside = join(work, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'canary'), 'alive');
    const stage = stageFilesSync(join(work), files);
    symlinkSync(outside, join(stage.root, 'oracle/evil'));
    chmodSync(join(stage.root, 'oracle'), 0o500);
    stage.close();
    expect(existsSync(stage.root)).toBe(false);
    expect(readFileSync(join(outside, 'canary'), 'utf8')).toBe('alive');
  });

  it('no space for a staged file is SEAL_IO naming its target, and the stage is gone', () => {
    const parent = tempDir();
    const full = wrapSys({
      pwrite: () => () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, pwrite'), { code: 'ENOSPC', errno: -28, syscall: 'pwrite' });
      },
    });
    expectError(() => stageFilesSync(parent, files, { sys: full }), {
      code: 'SEAL_IO',
      message: 'cannot write stage target: oracle/expected.json: ENOSPC: no space left on device, pwrite',
      path: 'oracle/expected.json',
    });
    expect(readdirSync(parent)).toEqual([]);
  });

  it('close empties the stage it made, through its fd, and never removes another directory swapped in under its name (a parent others can write)', () => {
    const work = tempDir();
    const stage = stageFilesSync(work, files);
    // Someone who can write the parent moves the stage away and puts a directory of their own (or one they could not empty) in its place.
    const moved = join(work, 'moved');
    renameSync(stage.root, moved);
    mkdirSync(join(stage.root, 'keep'), { recursive: true });
    writeFileSync(join(stage.root, 'keep', 'precious'), 'not the stage');
    stage.close();
    expect(readFileSync(join(stage.root, 'keep', 'precious'), 'utf8')).toBe('not the stage');
    // The stage itself was emptied where it went; its name there is not the stager's to remove.
    expect(readdirSync(moved)).toEqual([]);
  });

  it('bytes in shared memory that change while they are written: the sha256 recorded is the staged file\'s, and verify passes', () => {
    const shared = new Uint8Array(new SharedArrayBuffer(64 * 1024)).fill(1);
    // Another thread rewriting the buffer, at the moment the file is written.
    const rewriting = wrapSys({
      pwrite: (orig) => (fd, buffer, offset, length, position) => {
        const n = orig(fd, buffer, offset, length, position);
        shared.fill(2);
        return n;
      },
    });
    const stage = stageFilesSync(tempDir(), [{ target: 'shared.bin', bytes: shared }], { sys: rewriting });
    const onDisk = readFileSync(join(stage.root, 'shared.bin'));
    expect(onDisk.equals(Buffer.alloc(64 * 1024, 1))).toBe(true);
    expect(stage.files[0]!.sha256).toBe(createHash('sha256').update(onDisk).digest('hex'));
    stage.verify();
    stage.close();
  });
});
