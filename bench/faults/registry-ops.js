// registry-ops.js: faulted push and pull against a real registry (Debian's docker-registry on 127.0.0.1), when the store has them.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { SnapshotStore } from '../../dist/index.js';
import { checkStore } from './checks.js';
import { captureOptions, makeSource, makeStore } from './fixtures.js';
import { forceRemove } from './tree.js';

const REGISTRY_BIN = '/usr/bin/docker-registry';
let runs = 0;

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** A registry with its storage below base, stopped when this process exits. */
async function startRegistry(base) {
  const dir = mkdtempSync(join(base, 'registry-'));
  const port = await freePort();
  const config = `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${join(dir, 'data')}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n`;
  writeFileSync(join(dir, 'config.yml'), config);
  const child = spawn(REGISTRY_BIN, ['serve', join(dir, 'config.yml')], { stdio: 'ignore' });
  process.once('exit', () => child.kill('SIGTERM'));
  const address = `127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      const res = await fetch(`http://${address}/v2/`);
      await res.body?.cancel();
      if (res.status === 200) return address;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`registry at ${address} did not start`);
}

/** What push and pull share: a registry, a source, and the snapshot pushed once to `<registry>/faults-pull`. */
async function prepareRegistry(env) {
  const address = await startRegistry(env.shm);
  const source = makeSource(env.shm);
  const { root, digests } = makeStore(env.shm, [captureOptions(source)]);
  const store = await SnapshotStore.open(root);
  await store.push(digests[0], `${address}/faults-pull`);
  await store.close();
  return { base: env.shm, address, storeRoot: root, digest: digests[0] };
}

const pushOp = {
  name: 'push',
  fs: 'registry',
  prepare: prepareRegistry,
  setup(shared, layer) {
    return { store: SnapshotStore.openSync(shared.storeRoot, { sys: layer.sys }), remote: `${shared.address}/faults-push-${runs++}` };
  },
  run: async (shared, fx) => (await fx.store.push(shared.digest, fx.remote)).digest,
  check: (shared) => checkStore(shared.storeRoot, [shared.digest]),
  cleanup: (fx) => fx.store.closeSync(),
};

const pullOp = {
  name: 'pull',
  fs: 'registry',
  prepare: prepareRegistry,
  setup(shared, layer) {
    const root = mkdtempSync(join(shared.base, 'pulled-'));
    return { root, store: SnapshotStore.openSync(root, { sys: layer.sys }) };
  },
  run: async (shared, fx) => (await fx.store.pull(shared.digest, `${shared.address}/faults-pull`)).digest,
  check: (shared, fx, outcome) => checkStore(fx.root, outcome.ok ? [shared.digest] : []),
  cleanup(fx) {
    fx.store.closeSync();
    forceRemove(fx.root);
  },
};

/** push and pull once the store has them and a registry can run here (under CI=true a missing one is reported). */
export const REGISTRY_OPS = typeof SnapshotStore.prototype.push === 'function' ? [pushOp, pullOp] : [];
export const registryAvailable = () => existsSync(REGISTRY_BIN);
