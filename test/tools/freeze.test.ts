// freeze.test.ts: freeze and thaw set modes through fds, never follow a link, and refuse special files and symlinked roots.
import { chmodSync, lstatSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { freeze, freezeSync, thaw, thawSync } from '../../dist/index.js';
import { checkNoFdLeaks, expectError, mkfifo, tempDir, writeTree } from '../helpers.js';

checkNoFdLeaks();

describe('freeze and thaw', () => {
  it('freeze: files 0400 or 0500, dirs 0500; thaw: 0600 and 0700; links are never followed', async () => {
    const work = tempDir();
    const dir = join(work, 't');
    writeTree(dir, { 'f': 'x', 'x.sh': '#!', 'd/g': 'y' });
    chmodSync(join(dir, 'x.sh'), 0o710);
    const outside = join(work, 'outside');
    writeFileSync(outside, 'o');
    chmodSync(outside, 0o644);
    symlinkSync(outside, join(dir, 'd/link'));
    freezeSync(dir);
    const mode = (p: string): number => statSync(join(dir, p)).mode & 0o7777;
    expect([mode('f'), mode('x.sh'), mode('d/g'), mode('d'), mode('')]).toEqual([0o400, 0o500, 0o400, 0o500, 0o500]);
    expect(statSync(outside).mode & 0o7777).toBe(0o644);
    expect(lstatSync(join(dir, 'd/link')).isSymbolicLink()).toBe(true);
    await thaw(dir);
    expect([mode('f'), mode('x.sh'), mode('d/g'), mode('d'), mode('')]).toEqual([0o600, 0o600, 0o600, 0o700, 0o700]);
    await freeze(dir);
    expect(mode('d')).toBe(0o500);
    thawSync(dir);
    expect(statSync(outside).mode & 0o7777).toBe(0o644);
  });

  it('refuses special files and symlinked roots', () => {
    const work = tempDir();
    const dir = join(work, 't');
    mkdirSync(dir);
    mkfifo(join(dir, 'p'));
    expectError(() => freezeSync(dir), { code: 'SEAL_SPECIAL_FILE', message: 'tree contains a special file: p', path: 'p' });
    symlinkSync(dir, join(work, 'link'));
    expectError(() => freezeSync(join(work, 'link')), { code: 'SEAL_SYMLINK', message: `directory must be a real directory, not a symlink: ${join(work, 'link')}` });
    expect(readdirSync(dir)).toEqual(['p']);
  });

  it('a wrong argument type is Node\'s TypeError, sync or async', async () => {
    expectError(() => freezeSync(5 as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "dir" argument must be of type string. Received type number (5)' });
    await expectError(async () => thaw(tempDir(), null as never), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options" argument must be of type object. Received null',
    });
  });
});
