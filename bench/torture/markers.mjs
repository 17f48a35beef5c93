// markers.mjs: malformed-input cases that plant something at the clone's in-progress marker name before a materialize:
// a hard link to a file outside the clone, a symlink, a FIFO, a directory, garbage. Each must be refused typed and left as it was.
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MARKER = '.treeseal-materializing';
const at = (s) => join(s.clone, MARKER);

const PLANTS = [
  ['a hard link to a file outside the clone', (s) => linkSync(join(s.outside, 'key'), at(s))],
  ['a hard link to an outside file holding a marker line', (s) => {
    writeFileSync(join(s.outside, 'marker-like'), `${JSON.stringify({ digest: s.digest, pid: 1 })}\n`);
    linkSync(join(s.outside, 'marker-like'), at(s));
  }],
  ['a symlink to a file outside the clone', (s) => symlinkSync(join(s.outside, 'key'), at(s))],
  ['a dangling symlink', (s) => symlinkSync(join(s.outside, 'nothing'), at(s))],
  ['a FIFO', (s) => execFileSync('mkfifo', [at(s)])],
  ['a directory', (s) => mkdirSync(at(s))],
  ['garbage', (s) => writeFileSync(at(s), 'not a marker\n')],
];

export const MARKER_CASES = PLANTS.flatMap(([what, plant]) => [
  { group: 'marker', name: `materialize over a planted marker: ${what}`, setup: plant, cli: (s) => ['--store', s.store, 'materialize', s.digest, s.clone], codes: ['SEAL_COLLISION'] },
  { group: 'marker', name: `materializeSync over a planted marker: ${what}`, setup: plant, lib: `({ treeseal: t, args: s }) => { const st = t.SnapshotStore.openSync(s.store); try { return st.get(s.digest).materializeSync(s.clone); } finally { st.closeSync(); } }`, codes: ['SEAL_COLLISION'] },
]);
