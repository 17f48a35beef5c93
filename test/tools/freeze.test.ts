// freeze.test.ts: freeze and thaw set modes through fds, never follow a link, refuse special files and symlinked roots, and copy hard-linked files.
import { chmodSync, chownSync, closeSync, ftruncateSync, linkSync, lstatSync, mkdirSync, openSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SealError, freeze, freezeSync, thaw, thawSync } from '../../dist/index.js';
import { O_TMPFILE } from '../../dist/sys/index.js';
import { DIST_INDEX, checkNoFdLeaks, expectError, failOnce, mkfifo, rootOrSkip, rootPassOnly, systemError, tempDir, wrapSys, writeTree } from '../helpers.js';

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

  it('a directory of the tree this user may not open (0000, 0300) is opened up and given the policy\'s mode, by freeze and by thaw, its files too (it was SEAL_IO, EACCES, naming only its last name)', async () => {
    const work = tempDir();
    const dir = join(work, 't');
    writeTree(dir, { 'a/b/f': 'x', 'c/b/g': 'y' });
    const mode = (p: string): number => statSync(join(dir, p)).mode & 0o7777;
    for (const shut of [0o000, 0o300, 0o100]) {
      chmodSync(join(dir, 'c/b'), shut);
      freezeSync(dir);
      expect([mode('c/b'), mode('c/b/g'), mode('a/b'), mode('a/b/f')]).toEqual([0o500, 0o400, 0o500, 0o400]);
      chmodSync(join(dir, 'c/b'), shut);
      await thaw(dir);
      expect([mode('c/b'), mode('c/b/g'), mode('a/b'), mode('a/b/f')]).toEqual([0o700, 0o600, 0o700, 0o600]);
    }
    // As root, another user's shut directory opens all the same, and takes the policy's mode.
    if (process.geteuid?.() === 0) {
      chownSync(join(dir, 'c/b'), 4242, 4242);
      chmodSync(join(dir, 'c/b'), 0o000);
      freezeSync(dir);
      expect(mode('c/b')).toBe(0o500);
      thawSync(dir);
      chownSync(join(dir, 'c/b'), 0, 0);
    }
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

  it('refuses before changing anything: a special file anywhere leaves every mode as it was (freeze once chmodded what it met first)', async () => {
    const work = tempDir();
    const dir = join(work, 't');
    writeTree(dir, { zzz: 'z', 'aaa/f': 'f', 'aaa/b/g': 'g' });
    mkfifo(join(dir, 'aaa/b/mmm'));
    const modes = () => ['', 'zzz', 'aaa', 'aaa/f', 'aaa/b', 'aaa/b/g'].map((p) => lstatSync(join(dir, p)).mode & 0o7777);
    const before = modes();
    expectError(() => freezeSync(dir), { code: 'SEAL_SPECIAL_FILE', message: 'tree contains a special file: aaa/b/mmm', path: 'aaa/b/mmm' });
    await expectError(async () => freeze(dir), { code: 'SEAL_SPECIAL_FILE', message: 'tree contains a special file: aaa/b/mmm' });
    expect(modes()).toEqual(before);
    chmodSync(join(dir, 'zzz'), 0o400);
    expectError(() => thawSync(dir), { code: 'SEAL_SPECIAL_FILE', message: 'tree contains a special file: aaa/b/mmm' });
    expect(lstatSync(join(dir, 'zzz')).mode & 0o7777).toBe(0o400);
  });

  // The same for any user: run as root only (the unprivileged pass runs this folder beside the torture suite).
  rootPassOnly('walks 4096 levels on any thread (the sync call once overflowed the stack near 4000 and named limits.maxDepth, which freeze has not); deeper is SEAL_LIMIT with a short path, nothing changed', async () => {
    // One tree 4,200 levels deep (made a level at a time: its path is far past PATH_MAX); the directory 104 levels down holds 4,096.
    const tooDeep = join(tempDir(), 'deep');
    mkdirSync(tooDeep);
    execFileSync('python3', ['-c', 'import os, sys\nos.chdir(sys.argv[1])\nfor i in range(4200):\n    os.mkdir("a"); os.chdir("a")\nopen("f", "w").write("x")', tooDeep]);
    const message = 'tree is deeper than 4096 levels: a/a/a/…/a/a';
    expectError(() => freezeSync(tooDeep), { code: 'SEAL_LIMIT', message });
    await expectError(async () => thaw(tooDeep), { code: 'SEAL_LIMIT', message });
    expect([lstatSync(tooDeep).mode & 0o7777, lstatSync(join(tooDeep, 'a')).mode & 0o7777]).toEqual([0o755 & ~process.umask(), 0o777 & ~process.umask()]);
    const ok = join(tooDeep, ...Array(104).fill('a'));
    freezeSync(ok);
    expect(lstatSync(join(ok, 'a')).mode & 0o7777).toBe(0o500);
    await thaw(ok);
    expect(lstatSync(join(ok, 'a')).mode & 0o7777).toBe(0o700);
    // rm(1): Node's recursive removal of the temp dir would overflow its own stack.
    execFileSync('rm', ['-rf', tooDeep]);
  });

  it('a wrong argument type is Node\'s TypeError, sync or async', async () => {
    expectError(() => freezeSync(5 as never), { code: 'ERR_INVALID_ARG_TYPE', message: 'The "dir" argument must be of type string. Received type number (5)' });
    await expectError(async () => thaw(tempDir(), null as never), {
      code: 'ERR_INVALID_ARG_TYPE',
      message: 'The "options" argument must be of type object. Received null',
    });
  });
});

/** A frozen tree t/ whose files d/f (big) and e (empty) have a second name in other/ (as a newer snapshot shares them). */
function linkedTree(): { dir: string; other: string } {
  const work = tempDir();
  const dir = join(work, 't');
  writeTree(dir, { 'd/f': Buffer.alloc(300_000, 7), 'e': '', 'own': 'o' });
  freezeSync(dir);
  const other = join(work, 'other');
  mkdirSync(other);
  linkSync(join(dir, 'd/f'), join(other, 'f'));
  linkSync(join(dir, 'e'), join(other, 'e'));
  return { dir, other };
}

const inoMode = (p: string): [number, number, number] => {
  const st = statSync(p);
  return [st.ino, st.mode & 0o7777, st.nlink];
};

describe('a tree that changes under the walk', () => {
  it('an entry removed after it was listed is SEAL_CHANGED naming it, which a caller may retry (it was SEAL_UNAVAILABLE, not retryable)', () => {
    for (const [name, at] of [['gone-file', 2], ['gone-dir', 1]] as const) {
      const dir = tempDir();
      writeTree(dir, { keep: 'k', 'gone-file': 'g', 'gone-dir/x': 'x' });
      let listings = 0;
      // Removed right after the listing of the root that names it: the check's walk (1), or freeze's own (2).
      const sys = wrapSys({
        readdir: (orig) => (fd) => {
          const entries = orig(fd);
          if (entries.some((e) => e.name === name) && ++listings === at) rmSync(join(dir, name), { recursive: true });
          return entries;
        },
      });
      const err = expectError(() => freezeSync(dir, { sys }), { code: 'SEAL_CHANGED', message: `path changed while opening: ${name}`, path: name });
      expect((err as SealError).retryable).toBe(true);
      thawSync(dir);
    }
  });
});

describe('freeze and hard links', () => {
  it('a file hard-linked from outside the tree is replaced by a private frozen copy: the outside name keeps its mode (set-id bits too) and bytes', () => {
    const work = tempDir();
    const dir = join(work, 't');
    writeTree(dir, { 'bin/tool': '#!/bin/sh\necho tool\n', own: 'o' });
    writeFileSync(join(work, 'outside'), 'outside bytes');
    chmodSync(join(work, 'outside'), 0o4757);
    linkSync(join(work, 'outside'), join(dir, 'bin/linked'));
    const before = inoMode(join(work, 'outside'));
    freezeSync(dir);
    expect(inoMode(join(work, 'outside'))).toEqual([before[0], 0o4757, 1]);
    const [ino, mode, nlink] = inoMode(join(dir, 'bin/linked'));
    expect([ino === before[0], mode, nlink]).toEqual([false, 0o500, 1]);
    expect(readFileSync(join(dir, 'bin/linked'), 'utf8')).toBe('outside bytes');
    expect([statSync(join(dir, 'own')).mode & 0o7777, statSync(join(dir, 'bin')).mode & 0o7777]).toEqual([0o400, 0o500]);
    expect(readdirSync(join(dir, 'bin')).sort()).toEqual(['linked', 'tool']);
    thawSync(dir);
  });

  it('runs again over a frozen tree: a linked file already frozen is left as it is, one that is not is copied into its 0500 directory (opened for the copy, frozen again after)', () => {
    const work = tempDir();
    const dir = join(work, 't');
    writeTree(dir, { 'd/f': 'f bytes', 'd/g': 'g bytes' });
    freezeSync(dir);
    // g: frozen, with a second name; f: made writable again behind freeze's back, with a second name.
    linkSync(join(dir, 'd/g'), join(work, 'g-outside'));
    chmodSync(join(dir, 'd'), 0o700);
    chmodSync(join(dir, 'd/f'), 0o644);
    chmodSync(join(dir, 'd'), 0o500);
    linkSync(join(dir, 'd/f'), join(work, 'f-outside'));
    const g = inoMode(join(dir, 'd/g'));
    // As a user who owns the tree sees it (root is never refused): creating the copy (unnamed) in the 0500 directory is EACCES.
    const refused = failOnce('openat', 'EACCES', (_fd, name, flags) => name === '.' && (flags & O_TMPFILE) === O_TMPFILE);
    freezeSync(dir, { sys: refused.sys });
    expect(refused.injected()).toBeDefined();
    expect(inoMode(join(dir, 'd/g'))).toEqual(g);
    const [ino, mode, nlink] = inoMode(join(dir, 'd/f'));
    expect([ino === inoMode(join(work, 'f-outside'))[0], mode, nlink, readFileSync(join(dir, 'd/f'), 'utf8')]).toEqual([false, 0o400, 1, 'f bytes']);
    expect([inoMode(join(work, 'f-outside'))[1], statSync(join(dir, 'd')).mode & 0o7777]).toEqual([0o644, 0o500]);
    thawSync(dir);
  });

  it('as root, over another user\'s tree, a hard-linked file\'s private copy keeps its owner and group (thaw and freeze)', () => {
    if (!rootOrSkip('chown to another user')) return;
    const { dir, other } = linkedTree();
    const user = 4321;
    for (const p of [dir, join(dir, 'd'), join(dir, 'd/f'), join(dir, 'e'), join(dir, 'own')]) chownSync(p, user, user + 1);
    thawSync(dir);
    for (const rel of ['d/f', 'e']) {
      const st = statSync(join(dir, rel));
      expect([rel, st.uid, st.gid, st.mode & 0o7777, st.nlink]).toEqual([rel, user, user + 1, 0o600, 1]);
    }
    linkSync(join(dir, 'e'), join(other, 'e2'));
    freezeSync(dir);
    const st = statSync(join(dir, 'e'));
    expect([st.uid, st.gid, st.mode & 0o7777, st.nlink]).toEqual([user, user + 1, 0o400, 1]);
    expect(statSync(join(other, 'e2')).mode & 0o7777).toBe(0o600);
    // Where the caller may not give the copy the file's owner (EPERM: not root), the copy stays the caller's, and the thaw completes.
    linkSync(join(dir, 'own'), join(other, 'own2'));
    const refused = failOnce('fchown', 'EPERM');
    thawSync(dir, { sys: refused.sys });
    expect(refused.injected()).toBeDefined();
    const copy = statSync(join(dir, 'own'));
    expect([copy.uid, copy.mode & 0o7777, copy.nlink]).toEqual([process.getuid!(), 0o600, 1]);
  });
});

/** Runs freezeSync (or thawSync) of dir in a child whose syscall layer `dying` (a JavaScript expression over `sys`) SIGKILLs it at a chosen call. */
function killedIn(work: 'freezeSync' | 'thawSync', dir: string, dying: string): void {
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', [
    `import { ${work} } from ${JSON.stringify(DIST_INDEX)};`,
    `import { sys } from ${JSON.stringify(DIST_INDEX.replace(/index\.js$/, 'sys/index.js'))};`,
    `const die = () => process.kill(process.pid, 'SIGKILL');`,
    `${work}(${JSON.stringify(dir)}, { sys: { ...sys, ${dying} } });`,
  ].join('\n')], { encoding: 'utf8' });
  expect([child.signal, child.stderr]).toEqual(['SIGKILL', '']);
}

describe('a freeze or thaw killed while it copies a linked file', () => {
  it('leaves no name while the copy is made (it is unnamed until its rename: a .treeseal-freeze- copy was left, and the next freeze froze it as a file of the tree)', () => {
    const { dir, other } = linkedTree();
    thawSync(dir);
    linkSync(join(dir, 'd/f'), join(other, 'f2'));
    // Killed as it sets the copy's mode (0400: only a copy is fchmodded to a file's mode; a file of its own is fchmodat'ed).
    killedIn('freezeSync', dir, 'fchmod: (fd, mode) => { if (mode === 0o400) die(); return sys.fchmod(fd, mode); }');
    expect(readdirSync(join(dir, 'd'))).toEqual(['f']);
    expect(inoMode(join(dir, 'd/f'))).toEqual([inoMode(join(other, 'f2'))[0], 0o600, 2]);
    freezeSync(dir);
    expect(readdirSync(join(dir, 'd'))).toEqual(['f']);
    expect([inoMode(join(dir, 'd/f'))[1], inoMode(join(dir, 'd/f'))[2], inoMode(join(other, 'f2'))[1]]).toEqual([0o400, 1, 0o600]);
  });

  it('killed between naming the copy and its rename over the file, leaves the copy, which the next freeze or thaw removes: the file itself is done as ever', () => {
    for (const [work, again, mode] of [['thawSync', thawSync, 0o600], ['freezeSync', freezeSync, 0o400]] as const) {
      const { dir, other } = linkedTree();
      if (work === 'freezeSync') {
        thawSync(dir);
        linkSync(join(dir, 'd/f'), join(other, 'f2'));
      }
      const shared = inoMode(join(dir, 'd/f'));
      killedIn(work, dir, 'renameat2: () => die()');
      // The first linked file met (d/f, or e beside d) has its copy named, not renamed.
      const left = [...readdirSync(dir), ...readdirSync(join(dir, 'd'))].filter((n) => n.startsWith('.treeseal-'));
      expect([work, left.length, left[0]]).toEqual([work, 1, expect.stringMatching(new RegExp(`^\\.treeseal-${work.replace('Sync', '')}-[0-9a-f]{24}$`))]);
      expect(inoMode(join(dir, 'd/f'))).toEqual(shared);
      // A file named like it with other names is no copy left behind (a copy has one name): kept.
      writeFileSync(join(dir, 'e2'), 'mine');
      const lookalike = '.treeseal-freeze-0123456789abcdef01234567';
      linkSync(join(dir, 'e2'), join(dir, lookalike));
      again(dir);
      expect([work, readdirSync(join(dir, 'd'))]).toEqual([work, ['f']]);
      expect(readdirSync(dir).filter((n) => n.startsWith('.treeseal-') && n !== lookalike)).toEqual([]);
      expect(readdirSync(dir).sort()).toEqual([lookalike, 'd', 'e', 'e2', 'own'].sort());
      expect([inoMode(join(dir, 'd/f'))[0] === shared[0], inoMode(join(dir, 'd/f'))[1], inoMode(join(dir, 'd/f'))[2]]).toEqual([false, mode, 1]);
      expect(inoMode(join(other, 'f'))[1]).toBe(0o400);
    }
  });

  it('where the filesystem makes no unnamed file (EOPNOTSUPP) or it cannot be linked in (no /proc, not root), the copy is made under its name: the same result', () => {
    for (const [label, sys] of [
      ['no O_TMPFILE', failOnce('openat', 'EOPNOTSUPP', (_fd, name, flags) => name === '.' && (flags & O_TMPFILE) === O_TMPFILE)],
      ['no linkat', failOnce('linkat', 'EPERM')],
    ] as const) {
      const { dir, other } = linkedTree();
      const shared = inoMode(join(other, 'f'));
      thawSync(dir, { sys: sys.sys });
      expect([label, sys.injected()?.message]).toEqual([label, expect.any(String)]);
      expect([label, readdirSync(join(dir, 'd')), inoMode(join(dir, 'd/f'))[1], inoMode(join(dir, 'd/f'))[2]]).toEqual([label, ['f'], 0o600, 1]);
      expect(readFileSync(join(dir, 'd/f'))).toEqual(Buffer.alloc(300_000, 7));
      expect(inoMode(join(other, 'f'))).toEqual([shared[0], 0o400, 1]);
    }
  });
});

describe('thaw and hard links', () => {
  it('a file with other names is replaced by a private 0600 copy: the shared inode keeps its mode and bytes', async () => {
    const { dir, other } = linkedTree();
    const before = [inoMode(join(other, 'f')), inoMode(join(other, 'e'))];
    expect(before.map((m) => m.slice(1))).toEqual([[0o400, 2], [0o400, 2]]);
    await thaw(dir);
    expect([inoMode(join(other, 'f')), inoMode(join(other, 'e'))]).toEqual(before.map(([ino, mode]) => [ino, mode, 1]));
    for (const [rel, name] of [['d/f', 'f'], ['e', 'e']] as const) {
      const [ino, mode, nlink] = inoMode(join(dir, rel));
      expect([ino === inoMode(join(other, name))[0], mode, nlink]).toEqual([false, 0o600, 1]);
      expect(readFileSync(join(dir, rel)).equals(readFileSync(join(other, name)))).toBe(true);
    }
    expect(statSync(join(dir, 'own')).mode & 0o7777).toBe(0o600);
    expect(readdirSync(join(dir)).sort()).toEqual(['d', 'e', 'own']);
    expect(readdirSync(join(dir, 'd'))).toEqual(['f']);
  });

  it('a sparse linked file is copied by its data segments: the private copy keeps its holes and its bytes', () => {
    const work = tempDir();
    const dir = join(work, 't');
    mkdirSync(dir);
    // 16 MiB with one 4 KiB block of data in the middle.
    const fd = openSync(join(dir, 'sparse'), 'w');
    writeSync(fd, Buffer.alloc(4096, 9), 0, 4096, 8 * 1024 * 1024);
    ftruncateSync(fd, 16 * 1024 * 1024);
    closeSync(fd);
    freezeSync(dir);
    linkSync(join(dir, 'sparse'), join(work, 'other'));
    // Neither a reflink nor a kernel copy: the buffered copy writes the data segments, never the 16 MiB of zeros.
    const buffered = wrapSys({
      ficlone: () => () => false,
      copy_file_range: () => () => {
        throw systemError('EXDEV', 'copy_file_range');
      },
    });
    thawSync(dir, { sys: buffered });
    const st = statSync(join(dir, 'sparse'));
    expect([st.size, st.nlink, st.mode & 0o7777]).toEqual([16 * 1024 * 1024, 1, 0o600]);
    expect(st.blocks * 512).toBeLessThan(1024 * 1024);
    expect(readFileSync(join(dir, 'sparse')).equals(readFileSync(join(work, 'other')))).toBe(true);
  });

  it('a linked file that changes while it is copied: SEAL_CHANGED, its other name untouched, no copy left behind', () => {
    const { dir, other } = linkedTree();
    const ino = BigInt(statSync(join(other, 'f')).ino);
    let seen = 0;
    const sys = wrapSys({
      fstat: (orig) => (fd) => {
        const st = orig(fd);
        if (st.ino !== ino || ++seen < 2) return st;
        return { ...st, mtimeNs: st.mtimeNs + 1n };
      },
    });
    const before = inoMode(join(other, 'f'));
    expectError(() => thawSync(dir, { sys }), { code: 'SEAL_CHANGED', message: 'file changed while being copied: d/f', path: 'd/f', unchanged: dir });
    expect([inoMode(join(other, 'f')), inoMode(join(dir, 'd/f'))]).toEqual([before, before]);
  });

  it('the kernel refusing the copy (its creation, its chmod, its naming or its rename): SEAL_IO, nothing left behind', () => {
    const { dir, other } = linkedTree();
    const before = inoMode(join(other, 'f'));
    const create = failOnce('openat', 'ENOSPC', (_fd, name, flags) => name === '.' && (flags & O_TMPFILE) === O_TMPFILE);
    expectError(() => thawSync(dir, { sys: create.sys }), { code: 'SEAL_IO', message: 'thaw of e: ENOSPC: injected, openat', path: 'e', unchanged: dir });
    const named = wrapSys({ openat: (orig) => (fd, name, flags, mode) => ((flags & O_TMPFILE) === O_TMPFILE ? (() => { throw systemError('EOPNOTSUPP', 'openat'); })() : String(name).startsWith('.treeseal-thaw-') ? (() => { throw systemError('ENOSPC', 'openat'); })() : orig(fd, name, flags, mode)) });
    expectError(() => thawSync(dir, { sys: named }), { code: 'SEAL_IO', message: 'thaw of e: ENOSPC: injected, openat', path: 'e', unchanged: dir });
    const chmod = failOnce('fchmod', 'EIO', (_fd, mode) => mode === 0o600);
    expectError(() => thawSync(dir, { sys: chmod.sys }), { code: 'SEAL_IO', message: 'thaw of e: EIO: injected, fchmod', path: 'e', unchanged: dir });
    expect(chmod.injected()).toBeDefined();
    const link = failOnce('linkat', 'ENOSPC');
    expectError(() => thawSync(dir, { sys: link.sys }), { code: 'SEAL_IO', message: 'thaw of e: ENOSPC: injected, linkat', path: 'e', unchanged: dir });
    const rename = failOnce('renameat2', 'EIO');
    expectError(() => thawSync(dir, { sys: rename.sys }), { code: 'SEAL_IO', message: 'thaw of e: EIO: injected, renameat2', path: 'e', unchanged: dir });
    expect(inoMode(join(other, 'f'))).toEqual(before);
  });
});
