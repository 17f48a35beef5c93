// links.test.ts: `treeseal capture --links contained`, and the links through materialize, show and verify --clone.
import { readlinkSync, symlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { tempDir, writeTree } from '../helpers.js';
import { CLI_TIMEOUT_MS, cli, json } from './run-cli.js';

function repoWithLinks(): { work: string; repo: string; store: string } {
  const work = tempDir();
  const repo = join(work, 'repo');
  writeTree(repo, { 'include/libpng16/png.h': 'int png_ok(void);\n', 'src/main.c': '#include <png.h>\n' });
  symlinkSync('libpng16', join(repo, 'include/libpng'));
  symlinkSync('libpng/png.h', join(repo, 'include/png.h'));
  symlinkSync('../include', join(repo, 'src/include'));
  return { work, repo, store: join(work, 'store') };
}

describe('treeseal capture --links', { timeout: CLI_TIMEOUT_MS }, () => {
  it('keeps contained links with --links contained; materialize makes them, verify --clone checks them', () => {
    const { work, repo, store } = repoWithLinks();
    const refused = cli(store, 'capture', repo);
    expect([refused.status, refused.stdout]).toEqual([1, '']);
    expect(refused.stderr).toBe(
      'treeseal: SEAL_SYMLINK: capture must not traverse a symlink: include/libpng (in copy root include: declare include as a mount (--mount include) or leave it out), and 2 more obstacles\n' +
        '  include/libpng: a symlink in copy root include: --links contained keeps it, --mount include captures include as a mount, --exclude /include/libpng leaves it out\n' +
        '  include/png.h: a symlink in copy root include: --links contained keeps it, --mount include captures include as a mount, --exclude /include/png.h leaves it out\n' +
        '  src/include: a symlink in copy root src: --links contained keeps it, --mount src captures src as a mount, --exclude /src/include leaves it out\n',
    );
    const snap = json(cli(store, 'capture', repo, '--links', 'contained', '--json'));
    expect(snap).toMatchObject({ declarations: ['include', 'src'], entries: 8, built: true });
    expect(cli(store, 'show', snap.digest).stdout).toContain('include/png.h -> libpng/png.h');
    const arm = join(work, 'arm');
    const made = cli(store, 'materialize', snap.digest, arm, '--reflink', 'never');
    expect([made.status, made.stderr]).toEqual([0, '']);
    expect(made.stdout).toMatch(/^materialized [0-9a-f]{12} into .*: 2 files, 3 directories, 3 symlinks \(0 reflinked, 2 copied, 35 B buffered\) in \d+ ms\n$/);
    expect(readlinkSync(join(arm, 'src/include'))).toBe('../include');
    expect(cli(store, 'verify', snap.digest, '--clone', arm).status).toBe(0);
    unlinkSync(join(arm, 'include/png.h'));
    symlinkSync('/etc/passwd', join(arm, 'include/png.h'));
    const differs = cli(store, 'verify', snap.digest, '--clone', arm);
    expect([differs.status, differs.stdout]).toEqual([1, `~ include/png.h\nDIFFERS  ${arm}: 0 added, 0 removed, 1 changed\n`]);
  });

  it('refuses an escaping link with SEAL_ESCAPE (exit 1), and a value other than refuse or contained as a usage error (exit 2)', () => {
    const { repo, store } = repoWithLinks();
    symlinkSync('../../../etc', join(repo, 'src/etc'));
    const escaped = cli(store, 'capture', repo, '--links', 'contained');
    expect([escaped.status, escaped.stdout, escaped.stderr]).toEqual([1, '', 'treeseal: SEAL_ESCAPE: symlink escapes the workspace: src/etc -> ../../../etc\n  src/etc: a symlink in a copy root that dangles or leads out of what the snapshot captures: capture what it leads to (as a copy root or a mount), or --exclude /src/etc leaves it out\n']);
    const bad = cli(store, 'capture', repo, '--links', 'follow');
    expect([bad.status, bad.stderr.split('\n')[0]]).toEqual([2, 'treeseal: --links must be refuse or contained, not "follow"']);
  });
});
