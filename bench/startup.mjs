// startup.mjs: `npm run bench:startup`: what a fresh `node` pays before treeseal is fast: import, the first async calls, against `cp -a` as a process.
// usage: node bench/startup.mjs [--reps=N] [--files=N] [--dist=DIR[,DIR...]]  (several builds: alternated rep by rep, one table each)
// Then the `treeseal` command of each build, each step a whole process: --version, capture, materialize, ls; and `node -e 0`.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const flag = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback;
const reps = Number(flag('reps', 7));
const files = Number(flag('files', 50));
const dists = flag('dist', fileURLToPath(new URL('../dist', import.meta.url))).split(',').map((d) => resolve(d));

/** The child: one fresh process as a harness drives it; wall and CPU (user+sys, every thread) per step. */
const CHILD = `
const started = performance.now();
const out = { boot: started };
const cpu0 = process.cpuUsage();
let last = { t: started, cpu: cpu0 };
const step = (name) => {
  const t = performance.now();
  const cpu = process.cpuUsage();
  out[name] = t - last.t;
  out[name + 'Cpu'] = (cpu.user - last.cpu.user + cpu.system - last.cpu.system) / 1000;
  last = { t, cpu };
};
const [dist, source, storeDir, clone] = process.argv.slice(1);
const { SnapshotStore } = await import(dist + '/index.js');
step('import');
const store = await SnapshotStore.open(storeDir);
step('open');
const snap = await store.capture({ source, copy: ['tree'] });
step('capture');
await store.capture({ source, copy: ['tree'], revision: 'again' });
step('capture2');
await snap.materialize(clone, { createClone: true });
step('materialize');
await store.close();
step('close');
const total = process.cpuUsage();
out.totalCpu = (total.user + total.system) / 1000;
out.total = performance.now();
console.log(JSON.stringify(out));
`;

function makeTree(root) {
  for (let i = 0; i < files; i++) {
    const dir = join(root, 'tree', `d${i % 5}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `f${i}.txt`), `file ${i}\n`.repeat(40));
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const work = mkdtempSync(join(tmpdir(), 'treeseal-startup-'));
try {
  // The tree in a folder of its own: a clone or store must not lie inside a snapshot's source.
  const source = join(work, 'src');
  makeTree(source);
  const runs = dists.map(() => []);
  const clis = dists.map(() => []);
  const bare = [];
  const cp = [];
  for (let r = 0; r < reps; r++) {
    execFileSync('sync');
    const t = performance.now();
    execFileSync('cp', ['-a', '--reflink=auto', join(source, 'tree'), join(work, `cp${r}`)]);
    cp.push(performance.now() - t);
    dists.forEach((dist, d) => {
      const at = (name) => join(work, `${name}${r}-${d}`);
      const spawned = performance.now();
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', CHILD, dist, source, at('store'), at('clone')], { encoding: 'utf8' });
      const wall = performance.now() - spawned;
      if (child.status !== 0) throw new Error(`child exited ${child.status}: ${child.stderr}`);
      runs[d].push({ ...JSON.parse(child.stdout), wall });
      // The command, as a user runs it: one whole process per step.
      const cli = (args) => {
        const t = performance.now();
        const r = spawnSync(join(dist, 'cli.js'), args, { encoding: 'utf8' });
        if (r.status !== 0) throw new Error(`treeseal ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
        return { ms: performance.now() - t, stdout: r.stdout };
      };
      const store = ['--store', at('cli-store')];
      const version = cli(['--version']).ms;
      const captured = cli([...store, '--json', 'capture', source, '--copy', 'tree']);
      const materialize = cli([...store, 'materialize', JSON.parse(captured.stdout).digest, at('cli-clone')]).ms;
      clis[d].push({ version, capture: captured.ms, materialize, ls: cli([...store, 'ls']).ms });
    });
    const t0 = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    bare.push(performance.now() - t0);
  }
  const keys = ['boot', 'import', 'open', 'capture', 'capture2', 'materialize', 'close', 'total', 'wall'];
  console.log(`treeseal start-up, ${files}-file tree, ${reps} fresh processes each, medians in ms (cpu: user+sys of every thread)`);
  console.log(`  cp -a --reflink=auto (process): ${median(cp).toFixed(1)}`);
  dists.forEach((dist, d) => {
    console.log(`  ${dist}:`);
    for (const k of keys) {
      const cpu = runs[d][0][`${k}Cpu`] === undefined ? '' : `  cpu ${median(runs[d].map((x) => x[`${k}Cpu`])).toFixed(1).padStart(6)}`;
      console.log(`    ${k.padEnd(12)} ${median(runs[d].map((x) => x[k])).toFixed(1).padStart(7)}${cpu}`);
    }
    console.log(`    process cpu total: ${median(runs[d].map((x) => x.totalCpu)).toFixed(1)}`);
    console.log('    the treeseal command, whole processes (wall):');
    for (const k of ['version', 'capture', 'materialize', 'ls']) console.log(`      ${k.padEnd(12)} ${median(clis[d].map((x) => x[k])).toFixed(1).padStart(7)}`);
  });
  console.log(`  node -e 0 (process): ${median(bare).toFixed(1)}`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
