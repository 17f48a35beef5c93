// shared-store.mjs: malformed-input cases for the store trust rule: a store, one of its parts or one of its snapshots that
// others can write. Every command must refuse it (SEAL_UNTRUSTED) before it reads or writes anything there.
import { chmodSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const SNAP = (s) => join(s.store, 'snapshots', s.digest);

const OPENED = [
  ['the store directory, world-writable', (s) => chmodSync(s.store, 0o777)],
  ['the store directory, group-writable', (s) => chmodSync(s.store, 0o770)],
  ['snapshots/, group-writable', (s) => chmodSync(join(s.store, 'snapshots'), 0o770)],
  ['tmp/, world-writable and sticky', (s) => chmodSync(join(s.store, 'tmp'), 0o1777)],
  ['the lock, world-writable', (s) => chmodSync(join(s.store, 'lock'), 0o666)],
  ['leases/, world-writable', (s) => chmodSync(join(s.store, 'leases'), 0o777)],
];
const USED = [['a snapshot directory, group-writable', (s) => chmodSync(SNAP(s), 0o570)]];

const COMMANDS = [
  ['ls', { cli: (s) => ['--store', s.store, 'ls'] }],
  ['materialize', { cli: (s) => ['--store', s.store, 'materialize', s.digest, s.clone] }],
  ['verify', { cli: (s) => ['--store', s.store, 'verify', s.digest] }],
  // The snapshot's own capture (its recorded source, so the same digest): a reuse of the snapshot.
  ['capture', { lib: `({ treeseal: t, args: s }) => { const st = t.SnapshotStore.openSync(s.store); try { return st.captureSync({ source: s.recorded, copy: ['tree'] }).digest; } finally { st.closeSync(); } }` }],
];

export const SHARED_STORE_CASES = [...OPENED, ...USED].flatMap(([what, setup]) =>
  COMMANDS.filter(([command]) => OPENED.some(([w]) => w === what) || command !== 'ls').map(([command, call]) => ({
    group: 'shared store',
    name: `${command}: ${what}`,
    setup: (s) => {
      // The sandbox is a copy of the template: the snapshot records the template's source.
      s.recorded = JSON.parse(readFileSync(join(SNAP(s), 'manifest.json'), 'utf8')).source;
      setup(s);
    },
    ...call,
    codes: ['SEAL_UNTRUSTED'],
  })),
);
