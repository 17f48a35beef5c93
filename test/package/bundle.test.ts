// bundle.test.ts: the built package is a few bundled files: every module in one of them only, the entries sharing chunks, a fresh `node` loading treeseal from them alone.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';

import { SealError, SnapshotStore } from '../../dist/index.js';
import { offload } from '../../dist/internal.js';
import { tempDir } from '../helpers.js';

const REPO = fileURLToPath(new URL('../..', import.meta.url));

interface Meta {
  inputs: Record<string, unknown>;
  outputs: Record<string, { entryPoint?: string; inputs: Record<string, unknown>; imports: { path: string; kind: string; external?: boolean }[] }>;
}
const META = JSON.parse(readFileSync(join(REPO, 'tsc-out/bundle-meta.json'), 'utf8')) as Meta;
/** The command's side, bundled apart into one file (dist/cli/commands.js), which cli.js imports by URL. */
const COMMANDS = JSON.parse(readFileSync(join(REPO, 'tsc-out/commands-meta.json'), 'utf8')) as Meta;
const COMMANDS_FILE = 'dist/cli/commands.js';
const OUTPUTS = Object.keys(META.outputs).filter((o) => o.endsWith('.js'));
/** The entry points (a module imported dynamically is an entry of its own, but a chunk). */
const ENTRIES = OUTPUTS.filter((o) => META.outputs[o]!.entryPoint !== undefined && !o.startsWith('dist/chunks/'));

/** Every .js file under dir, relative to the repository. */
function jsFiles(dir: string): string[] {
  return readdirSync(join(REPO, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.js'))
    .map((f) => join(dir, f))
    .sort();
}

/** The bundled files a thread loads for `entry`: the entry and every file it imports, statically, at any depth. */
function staticGraph(entry: string): string[] {
  const seen = new Set<string>([entry]);
  for (const file of seen) {
    for (const i of META.outputs[file]!.imports) if (i.external !== true && i.kind === 'import-statement') seen.add(i.path);
  }
  return [...seen].sort();
}

/** A fresh `node` whose module loads are logged: run it with args, then read which files it loaded (relative to the repository). */
function loadLog(): { dir: string; node: (args: string[]) => string; loaded: () => string[] } {
  const dir = tempDir();
  const log = join(dir, 'loaded.txt');
  writeFileSync(log, '');
  writeFileSync(
    join(dir, 'hooks.mjs'),
    `import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  if (url.startsWith('file:')) appendFileSync(${JSON.stringify(log)}, url + '\\n');
  return next(url, context);
}`,
  );
  writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n`);
  return {
    dir,
    node: (args) => execFileSync(process.execPath, ['--import', pathToFileURL(join(dir, 'register.mjs')).href, ...args], { encoding: 'utf8' }),
    loaded: () => readFileSync(log, 'utf8').trim().split('\n').map((url) => relative(REPO, fileURLToPath(url))),
  };
}

describe('the bundled package', () => {
  it('puts every module tsc compiled in exactly one file of the library, or, the command\'s own, only in the command\'s file, which holds all it needs', () => {
    const counts = new Map<string, number>(jsFiles('tsc-out').map((m) => [m, 0]));
    for (const o of OUTPUTS) for (const input of Object.keys(META.outputs[o]!.inputs)) counts.set(input, (counts.get(input) ?? 0) + 1);
    const commands = COMMANDS.outputs[COMMANDS_FILE]!;
    const inCommands = new Set(Object.keys(commands.inputs));
    // Only in the command's file: main and the commands (what cli.js reaches only through it).
    const commandsOnly = [...counts].filter(([, n]) => n === 0).map(([m]) => m);
    expect(commandsOnly.length).toBeGreaterThan(10);
    expect(commandsOnly.filter((m) => !inCommands.has(m) || !m.startsWith('tsc-out/cli/'))).toEqual([]);
    expect([...counts].filter(([, n]) => n > 1)).toEqual([]);
    // One file, whole: it imports no chunk (a process running a command loads each module once).
    expect(Object.keys(COMMANDS.outputs).filter((o) => o.endsWith('.js'))).toEqual([COMMANDS_FILE]);
    expect(commands.imports.filter((i) => i.external !== true)).toEqual([]);
    expect(inCommands.has('tsc-out/store/store.js')).toBe(true);
  });

  it('marks where each module starts in its bundled file (the fault injection names call sites by these marks)', () => {
    const unmarked: string[] = [];
    for (const [o, meta] of [...OUTPUTS.map((o) => [o, META] as const), [COMMANDS_FILE, COMMANDS] as const]) {
      const text = readFileSync(join(REPO, o), 'utf8');
      for (const [input, { bytesInOutput }] of Object.entries(meta.outputs[o]!.inputs as Record<string, { bytesInOutput: number }>)) {
        if (bytesInOutput > 0 && !`\n${text}`.includes(`\n// ${input}\n`)) unmarked.push(`${input} in ${o}`);
      }
    }
    expect(unmarked).toEqual([]);
  });

  it('is ASCII in every file, comments too (one `…` left in a doc comment made the 0.8 MB command file a two-byte string to decode and parse at every start)', () => {
    const sources = jsFiles('tsc-out').filter((f) => /[^\x00-\x7f]/.test(readFileSync(join(REPO, f), 'utf8')));
    // The sources do hold such characters (else this would test nothing); what is built from them does not.
    expect(sources.length).toBeGreaterThan(0);
    expect(jsFiles('dist').filter((f) => /[^\x00-\x7f]/.test(readFileSync(join(REPO, f), 'utf8')))).toEqual([]);
  });

  it('imports threads, child processes, sockets and TLS only where a call uses them: no file but the thread entries names them in a static import (each cost every start 2-6 ms; an ls about 11 ms in all at load 2)', () => {
    const lazy = /^import [^;]* from "node:(worker_threads|child_process|net|tls|stream)";$/m;
    const threadEntries = ['dist/worker.js', 'dist/files/pool-worker.js'];
    expect(jsFiles('dist').filter((f) => !threadEntries.includes(f) && lazy.test(readFileSync(join(REPO, f), 'utf8')))).toEqual([]);
    for (const entry of threadEntries) expect(readFileSync(join(REPO, entry), 'utf8')).toMatch(lazy);
  });

  it('holds in dist/ only its entry points and their shared chunks; the exports, bin and thread entries are entry points', () => {
    expect(jsFiles('dist').filter((f) => !ENTRIES.includes(f) && !f.startsWith('dist/chunks/') && f !== COMMANDS_FILE)).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { main: string; exports: Record<string, { default: string }>; bin: Record<string, string> };
    const named = [pkg.main, ...Object.values(pkg.exports).map((e) => e.default), ...Object.values(pkg.bin)].map((p) => relative('.', p));
    // The thread entries are found from import.meta.url (base/offload, files/pool), the tests' internal entry, and the
    // command's --version (which reads package.json from where it lands).
    expect(ENTRIES.sort()).toEqual([...new Set([...named, 'dist/worker.js', 'dist/files/pool-worker.js', 'dist/internal.js', 'dist/cli/version.js'])].sort());
    for (const entry of ENTRIES) expect(staticGraph(entry).every((f) => f === entry || f.startsWith('dist/chunks/'))).toBe(true);
  });

  it('is loaded by a fresh `node` from the files of its static graph, each once, nothing from tsc-out/', () => {
    const { node, loaded } = loadLog();
    const script = `await import(${JSON.stringify(pathToFileURL(join(REPO, 'dist/index.js')).href)});`;
    node(['--input-type=module', '-e', script]);
    expect(loaded().sort()).toEqual(staticGraph('dist/index.js'));
    expect(loaded().length).toBeLessThanOrEqual(12);
  });

  it('runs a command from cli.js, its chunk and the command\'s one file, each read once, none of the library\'s chunks', () => {
    const { dir, node, loaded } = loadLog();
    SnapshotStore.openSync(join(dir, 'store')).closeSync();
    expect(node([join(REPO, 'dist/cli.js'), '--store', join(dir, 'store'), 'ls'])).toBe('no snapshots\n');
    const fromDist = loaded().filter((f) => f.startsWith('dist/'));
    expect(fromDist.sort()).toEqual([...staticGraph('dist/cli.js'), COMMANDS_FILE].sort());
    // What cli.js loads before it: itself, its output, --version and run's early status, no module of the library.
    expect(staticGraph('dist/cli.js').flatMap((f) => Object.keys(META.outputs[f]!.inputs)).sort()).toEqual(['tsc-out/cli.js', 'tsc-out/cli/io.js', 'tsc-out/cli/own-failure.js', 'tsc-out/cli/version.js']);
    expect(new Set(loaded()).size).toBe(loaded().length);
  });

  it('shares one copy of each module between the entries: an error from the worker is the public SealError', async () => {
    const root = tempDir();
    const store = await SnapshotStore.open(join(root, 'store'), { ephemeral: true });
    try {
      const fromCapture = await store.capture({ source: join(root, 'missing'), copy: ['x'] }).catch((err: unknown) => err);
      expect(fromCapture).toBeInstanceOf(SealError);
      const fromInternal = await offload('openStore', [join(root, 'missing', 'store')]).catch((err: unknown) => err);
      expect(fromInternal).toBeInstanceOf(SealError);
    } finally {
      await store.close();
    }
  });
});
