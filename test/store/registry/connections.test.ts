// connections.test.ts: `connections: 'shared'` moves a snapshot through Node's global connections without loading a second HTTP client; the default keeps a pool of the call's own; a wrong value is Node's TypeError.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { SnapshotStore } from '../../../dist/index.js';
import { DIST_INDEX, tempDir } from '../../helpers.js';
import { captured } from './fixtures.js';
import { repoName, testRegistry } from './harness.js';

const registry = await testRegistry('plain');

/**
 * Pushes, pulls and cats in a fresh node (so nothing else loaded undici first), with `connections` as given (omitted:
 * the default), and reports what came back and how many of undici's own modules the process loaded.
 */
function inFreshNode(store: string, digest: string, remote: string, connections: string | undefined): { pulled: string; cat: string; undici: number; exit: number | null } {
  const options = JSON.stringify(connections === undefined ? {} : { connections });
  const script = `
    import { createRequire } from 'node:module';
    const { SnapshotStore, catRemote } = await import(${JSON.stringify(DIST_INDEX)});
    const require = createRequire(import.meta.url);
    const options = ${options};
    const a = await SnapshotStore.open(${JSON.stringify(store)});
    const pushed = await a.push(${JSON.stringify(digest)}, ${JSON.stringify(remote)}, options);
    await a.close();
    const b = await SnapshotStore.open(${JSON.stringify(store)} + '-pulled');
    const pulled = await b.pull(${JSON.stringify(digest)}, ${JSON.stringify(remote)}, options);
    await b.close();
    const bytes = await catRemote(${JSON.stringify(remote)}, { manifest: pushed.manifestDigest }, 'src/a.txt', options);
    const undici = Object.keys(require.cache).filter((k) => k.includes('/node_modules/undici/')).length;
    console.log(JSON.stringify({ pulled: pulled.digest, cat: bytes.toString('utf8'), undici }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`child failed (${r.status}): ${r.stderr}`);
  return { ...(JSON.parse(r.stdout.trim().split('\n').pop()!) as { pulled: string; cat: string; undici: number }), exit: r.status };
}

describe.skipIf(registry === undefined)('connections', () => {
  it("'shared' pushes, pulls and cats with no HTTP client of its own loaded; the default loads its own pool", async () => {
    const { work, store, snap } = await captured();
    await store.close();
    const src = readFileSync(join(work, 'source/src/a.txt'), 'utf8');
    const shared = inFreshNode(join(work, 'a'), snap.digest, `${registry!.address}/${repoName('shared')}`, 'shared');
    expect(shared).toEqual({ pulled: snap.digest, cat: src, undici: 0, exit: 0 });
    const own = inFreshNode(join(work, 'a'), snap.digest, `${registry!.address}/${repoName('own')}`, undefined);
    expect([own.pulled, own.cat, own.exit]).toEqual([snap.digest, src, 0]);
    expect(own.undici).toBeGreaterThan(0);
  });

  it('a value other than own or shared is Node\'s TypeError, before anything is sent', async () => {
    const store = await SnapshotStore.open(join(tempDir(), 's'));
    for (const connections of ['global', '', 1, true]) {
      await expect(store.pull('d'.repeat(64), '127.0.0.1:1/x', { connections: connections as never })).rejects.toMatchObject({
        name: 'TypeError',
        code: 'ERR_INVALID_ARG_VALUE',
        message: expect.stringMatching(/^The property 'options\.connections' must be one of: 'own', 'shared'\. Received /),
      });
    }
    await store.close();
  });
});
