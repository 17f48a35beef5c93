// links.test.ts: a snapshot whose copy roots hold links (links: 'contained') goes through a registry and comes back exact: links made last, re-verified, materialized as links.
import { lstatSync, readFileSync, readlinkSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { storeLeftovers, tempDir, writeTree } from '../../helpers.js';
import { describeTree } from './fixtures.js';
import { checkNoFileFdLeaks, repoName, testRegistry } from './harness.js';

const registry = await testRegistry('plain');

checkNoFileFdLeaks();

describe.skipIf(registry === undefined)('push and pull of copy-root links', () => {
  it('round-trips links to files, to a directory, in a chain, across copy roots and into a mount payload', async () => {
    const work = tempDir();
    const source = join(work, 'source');
    writeTree(source, {
      'include/libpng16/png.h': 'int png_ok(void);\n',
      'include/big.bin': Buffer.alloc(1536 * 1024, 3),
      'src/main.c': '#include <png.h>\n',
      'deps/pkg/index.js': 'module.exports = 1;\n',
    });
    symlinkSync('libpng16', join(source, 'include/libpng'));
    symlinkSync('libpng/png.h', join(source, 'include/png.h'));
    symlinkSync('png.h', join(source, 'include/png-latest.h'));
    symlinkSync('big.bin', join(source, 'include/big-link.bin'));
    symlinkSync('../include', join(source, 'src/include'));
    symlinkSync('../node_modules/pkg/index.js', join(source, 'src/pkg.js'));
    symlinkSync('pkg/index.js', join(source, 'deps/main.js'));
    const a = await SnapshotStore.open(join(work, 'a'));
    const b = await SnapshotStore.open(join(work, 'b'));
    const snap = await a.capture({ source, copy: ['include', 'src'], mounts: [{ source: 'deps', target: 'node_modules' }], links: 'contained' });
    const remote = `${registry!.address}/${repoName('links')}`;
    expect(await a.push(snap.digest, remote)).toMatchObject({ digest: snap.digest, existed: false });
    expect(await b.pull(snap.digest, remote)).toMatchObject({ digest: snap.digest, existed: false });
    const copy = b.get(snap.digest);
    expect(copy.toJSON()).toEqual(snap.toJSON());
    expect(describeTree(copy.root)).toEqual(describeTree(snap.root));
    expect(describeTree(copy.root)).toEqual(
      expect.arrayContaining([
        'l copy/include/libpng -> libpng16',
        'l copy/include/png.h -> libpng/png.h',
        'l copy/include/png-latest.h -> png.h',
        'l copy/include/big-link.bin -> big.bin',
        'l copy/src/include -> ../include',
        'l copy/src/pkg.js -> ../node_modules/pkg/index.js',
        'l mounts/00000/payload/main.js -> pkg/index.js',
      ]),
    );
    expect(await copy.verify()).toEqual(await snap.verify());
    expect(storeLeftovers(b.root)).toEqual([`snapshots/${copy.digest}`]);
    const arm = join(work, 'arm');
    expect(await copy.materialize(arm, { createClone: true })).toMatchObject({ files: 3, symlinks: 6 });
    expect(lstatSync(join(arm, 'src/include')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(arm, 'include/png-latest.h'))).toBe('png.h');
    expect(readFileSync(join(arm, 'src/include/png-latest.h'), 'utf8')).toBe('int png_ok(void);\n');
    expect(await copy.checkClone(arm)).toMatchObject({ ok: true });
    await a.close();
    await b.close();
  });
});
