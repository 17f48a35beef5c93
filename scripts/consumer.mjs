// consumer.mjs: packs the working tree once (prepack builds dist/ in a copy) and installs the tarball into a fresh consumer project, as another project gets the package.
// usage: node scripts/consumer.mjs DIR   (DIR is created; prints nothing but errors and writes DIR/consumer.json)
// .ci/run does this once and exports TREESEAL_CONSUMER=DIR: the packed-install test and the torture suite then use that
// tarball and that installed project instead of packing and compiling the addon again; without it each does this itself.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('..', import.meta.url));

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, npm_config_fund: 'false', npm_config_audit: 'false', npm_config_update_notifier: 'false' },
  });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${String(r.status)}:\n${r.stdout}\n${r.stderr}`);
  return r;
}

/** The working tree as git sees it (tracked and new files, nothing ignored), with the repository's node_modules linked in. */
function copyWorkingTree(dest) {
  const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO, encoding: 'utf8' });
  for (const rel of listed.split('\0')) {
    if (rel === '' || rel === 'node_modules' || !existsSync(join(REPO, rel))) continue;
    mkdirSync(dirname(join(dest, rel)), { recursive: true });
    copyFileSync(join(REPO, rel), join(dest, rel));
    chmodSync(join(dest, rel), statSync(join(REPO, rel)).mode & 0o777);
  }
  symlinkSync(join(REPO, 'node_modules'), join(dest, 'node_modules'));
}

/**
 * Packs a copy of the working tree into DIR/packed and installs the tarball into DIR/consumer
 * (building the addon there). Returns { tarball, files, project, installStderr, mapsInCopy };
 * `files` are the packed paths, ' (x)' after an executable one, sorted.
 */
export function packAndInstall(dir) {
  mkdirSync(dir, { recursive: true });
  const copy = join(dir, 'checkout');
  copyWorkingTree(copy);
  const out = join(dir, 'packed');
  mkdirSync(out);
  const r = run('npm', ['pack', '--json', '--pack-destination', out], copy);
  const [info] = JSON.parse(r.stdout.slice(r.stdout.indexOf('[')));
  const tarball = join(out, info.filename);
  const files = info.files.map((f) => `${f.path}${f.mode & 0o100 ? ' (x)' : ''}`).sort();
  const mapsInCopy = existsSync(join(copy, 'dist/index.js.map'));
  const project = join(dir, 'consumer');
  mkdirSync(project);
  // Approved the way `npm install-scripts approve` records it, so its install script runs without a warning.
  const allowScripts = { [`file:${tarball}`]: true };
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module', allowScripts }));
  const install = run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], project);
  const result = { tarball, files, project, installStderr: install.stderr, mapsInCopy };
  writeFileSync(join(dir, 'consumer.json'), JSON.stringify(result, null, 2));
  return result;
}

/** What an earlier packAndInstall left in DIR (TREESEAL_CONSUMER), or undefined when DIR is not given. */
export function givenConsumer(dir = process.env.TREESEAL_CONSUMER) {
  if (dir === undefined || dir === '') return undefined;
  const file = join(resolve(dir), 'consumer.json');
  if (!existsSync(file)) throw new Error(`TREESEAL_CONSUMER=${dir} holds no consumer.json: run node scripts/consumer.mjs ${dir} first`);
  return JSON.parse(readFileSync(file, 'utf8'));
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const dir = process.argv[2];
  if (dir === undefined) {
    console.error('usage: node scripts/consumer.mjs DIR');
    process.exit(2);
  }
  const started = Date.now();
  const { tarball } = packAndInstall(resolve(dir));
  console.error(`consumer: packed ${tarball} and installed it into ${join(resolve(dir), 'consumer')} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}
