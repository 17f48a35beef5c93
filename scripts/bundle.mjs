// bundle.mjs: bundles tsc's output (tsc-out/) into dist/: one file per entry point plus shared chunks, so every module is loaded once per thread from a few files; the command's side in one file of its own.
// usage: node scripts/bundle.mjs [--sourcemap]
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

// A checkout whose node_modules predates esbuild: say what to do rather than fail on the import.
const { build } = await import('esbuild').catch((err) => {
  console.error(`bundle: esbuild is not installed (${err.message.split('\n')[0]}): run npm install`);
  process.exit(1);
});

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FROM = 'tsc-out';
const TO = 'dist';

/** Every entry point: the package's exports and bin (with its `--version`, which reads package.json from where it lands), the two thread entries, and the tests' internal entry. */
const ENTRIES = ['index', 'sys/index', 'cli', 'cli/version', 'worker', 'files/pool-worker', 'internal'];

const depth = (path) => path.split('/').length - 1;
const inside = (dir, path) => relative(dir, path).split(sep).join('/');
const usesOwnUrl = (input) => readFileSync(join(ROOT, input), 'utf8').includes('import.meta.url');

/** The relative paths a module resolves from its own URL: `new URL('../worker.js', import.meta.url)`. */
const ownUrls = (input) => [...readFileSync(join(ROOT, input), 'utf8').matchAll(/new URL\((['"])([^'"]+)\1, import\.meta\.url\)/g)].map((m) => m[2]);

/**
 * A module that resolves a path from its own `import.meta.url` (the worker entries, the
 * addon's package root, package.json) must land as deep in dist/ as it sits in src/:
 * those relative paths are written for the folder it is in. What they name must be
 * there (a thread entry not listed in ENTRIES would be missing).
 */
function checkPlacement(metafile) {
  const wrong = [];
  for (const [out, info] of Object.entries(metafile.outputs)) {
    for (const input of Object.keys(info.inputs)) {
      if (!usesOwnUrl(input)) continue;
      const from = inside(FROM, input);
      const to = inside(TO, out);
      if (depth(from) !== depth(to)) wrong.push(`${from} (depth ${depth(from)}) landed in ${to} (depth ${depth(to)})`);
      for (const rel of ownUrls(input)) {
        if (!existsSync(fileURLToPath(new URL(rel, pathToFileURL(join(ROOT, out)))))) wrong.push(`${from} names ${rel}, missing from ${to}`);
      }
    }
  }
  if (wrong.length > 0) throw new Error(`bundle: paths resolved from import.meta.url do not hold in dist/:\n  ${wrong.join('\n  ')}`);
}

const sourcemap = process.argv.includes('--sourcemap');
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: ENTRIES.map((e) => ({ in: `${FROM}/${e}.js`, out: e })),
  outdir: TO,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // Dependencies (bindings, node-addon-api) stay installed packages.
  packages: 'external',
  chunkNames: 'chunks/[name]-[hash]',
  sourcemap: sourcemap ? 'linked' : false,
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});
// The command's library side in one file (cli.js imports it by URL, past `--version`): a
// process that runs one command resolves and reads one module, not a dozen chunks (about
// 7 ms of an `ls`). It holds its own copy of the library, which only the command loads.
const commands = await build({
  absWorkingDir: ROOT,
  entryPoints: [{ in: `${FROM}/cli/commands.js`, out: 'cli/commands' }],
  outdir: TO,
  bundle: true,
  splitting: false,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  packages: 'external',
  sourcemap: sourcemap ? 'linked' : false,
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});
/**
 * Makes each output file ASCII: esbuild escapes what is not ASCII in strings, regexps and
 * names, but leaves comments as written (a `…` or `≈` in a doc comment), and one such
 * character makes the whole file a two-byte string to decode and parse: about 5 ms more
 * for the command's 0.8 MB file on every start. Left only in comments, each is written
 * `\u{…}` there, inert.
 */
function asciiOnly(metafile) {
  for (const out of Object.keys(metafile.outputs)) {
    if (!out.endsWith('.js')) continue;
    const path = join(ROOT, out);
    const text = readFileSync(path, 'utf8');
    if (/^[\x00-\x7f]*$/.test(text)) continue;
    writeFileSync(path, text.replace(/[^\x00-\x7f]/gu, (ch) => `\\u{${ch.codePointAt(0).toString(16)}}`));
  }
}

// Checked once both are written: cli.js names the command's file by URL.
checkPlacement(result.metafile);
checkPlacement(commands.metafile);
asciiOnly(result.metafile);
asciiOnly(commands.metafile);
chmodSync(join(ROOT, TO, 'cli.js'), 0o755);
writeFileSync(join(ROOT, FROM, 'bundle-meta.json'), JSON.stringify(result.metafile));
writeFileSync(join(ROOT, FROM, 'commands-meta.json'), JSON.stringify(commands.metafile));
