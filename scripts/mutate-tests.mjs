// mutate-tests.mjs: the guard modules `npm run mutate` mutates, the test files that cover each, and the
// test command Stryker's command runner runs once per mutant: one vitest run of the files covering the
// module that holds the active mutant (for the dry run, those of every mutated module). How and why:
// docs/testing.md, "Mutation testing".
// usage (from Stryker, in its sandbox): node scripts/mutate-tests.mjs   (reads __STRYKER_ACTIVE_MUTANT__)
// MUTATE_SURVIVORS_OF=report.json (an earlier run's JSON report, same files and sources): its killed mutants are not run again.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * Each guard module and the tests run against its mutants: the suites that reach its code
 * (through the built package, in the test process, the worker thread or the CLI's processes)
 * and fail when one of its checks goes, and no more, so a mutant costs seconds. `skip` names
 * tests (by a part of their full name) left out of those runs: statistical ones (a real
 * concurrent mutator) and slow ones that exercise none of the module's checks.
 */
export const GUARD_MODULES = {
  'src/sys/identity.ts': {
    tests: ['test/sys/identity.test.ts', 'test/capture/ctime-race.test.ts', 'test/capture/capture-races.test.ts', 'test/tools/stable-read.test.ts'],
    skip: ['a real concurrent mutator'],
  },
  'src/store/clone-paths.ts': {
    tests: ['test/store/clone-paths.test.ts', 'test/store/materialize.test.ts', 'test/store/clone-overlap.test.ts', 'test/store/clone-stage.test.ts'],
    skip: ['sparse files', 'a 20 MiB file', 'real reflink', 'clone is itself a mount point'],
  },
  'src/store/lock.ts': { tests: ['test/store/store-lock.test.ts', 'test/store/clone-stage.test.ts', 'test/store/registry/push-lock.test.ts'] },
  'src/store/registry/auth.ts': { tests: ['test/store/registry/auth-challenges.test.ts', 'test/store/registry/auth.test.ts', 'test/store/registry/transport.test.ts'] },
  'src/files/copy-file.ts': {
    tests: ['test/capture/ctime-race.test.ts', 'test/capture/capture-races.test.ts', 'test/capture/in-flight.test.ts', 'test/capture/kernel-copy.test.ts', 'test/capture/pool.test.ts', 'test/store/verify.test.ts'],
    skip: ['a real concurrent mutator'],
  },
  'src/capture/stat-cache.ts': { tests: ['test/capture/stat-cache.test.ts', 'test/store/recapture.test.ts'] },
  'src/store/registry/pull-build.ts': { tests: ['test/store/registry/crafted.test.ts', 'test/store/registry/roundtrip.test.ts', 'test/store/registry/failures.test.ts', 'test/store/registry/cat-lazy.test.ts', 'test/store/registry/transfers.test.ts', 'test/store/registry/refusals.test.ts'] },
  'src/store/registry/pack-index.ts': { tests: ['test/store/registry/cat-lazy.test.ts'] },
  'src/store/registry/cat-lazy.ts': { tests: ['test/store/registry/cat-lazy.test.ts'] },
  'src/store/document-parse.ts': { tests: ['test/store/document-parse.test.ts', 'test/store/document-stream.test.ts'] },
  'src/store/document-stream.ts': { tests: ['test/store/document-stream.test.ts'] },
  'src/store/registry/push-document.ts': { tests: ['test/store/document-stream.test.ts', 'test/store/registry/push.test.ts'] },
  'src/capture/links.ts': { tests: ['test/capture/mount-links.test.ts', 'test/capture/copy-links.test.ts', 'test/capture/capture.test.ts', 'test/store/document-check.test.ts'] },
  'src/store/document-check.ts': { tests: ['test/store/document-check.test.ts', 'test/store/registry/crafted.test.ts'] },
  'src/base/clone-names.ts': { tests: ['test/store/document-check.test.ts', 'test/capture/capture.test.ts'] },
  'src/store/registry/pieces.ts': { tests: ['test/store/registry/pieces.test.ts', 'test/store/registry/mapping.test.ts', 'test/store/document-stream.test.ts'] },
  'src/store/clone-ledger.ts': { tests: ['test/store/clone-ledger.test.ts', 'test/store/diff-reset.test.ts', 'test/store/arm-capture.test.ts', 'test/store/clone-stage.test.ts', 'test/store/mapped-writes.test.ts'] },
  'src/store/trust.ts': { tests: ['test/store/store-trust.test.ts', 'test/store/non-root.test.ts', 'test/store/clone-stage.test.ts'] },
  'src/store/summary-record.ts': { tests: ['test/store/summary-record.test.ts'] },
  'src/store/snapshot-summary.ts': { tests: ['test/store/summary-record.test.ts'] },
  'src/capture/gitignore.ts': { tests: ['test/capture/gitignore.test.ts'] },
};

/** The mutant switch Stryker's instrumenter writes around mutant `id` (mutation switching). */
const switchOf = (id) => `stryMutAct_9fa48("${id}")`;

/** The guard module whose instrumented source holds mutant `id`. */
function moduleOf(id) {
  const needle = switchOf(id);
  const found = Object.keys(GUARD_MODULES).find((file) => readFileSync(file, 'utf8').includes(needle));
  if (found === undefined) throw new Error(`mutate-tests: mutant ${id} is in none of the guard modules (is ${Object.keys(GUARD_MODULES).join(', ')} instrumented?)`);
  return found;
}

/** The failed tests of vitest's JSON report, one line each: `file > describe > title: first line of the failure`. */
function failures(report) {
  const out = [];
  for (const file of report.testResults ?? []) {
    const name = relative(process.cwd(), file.name);
    const failed = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
    for (const t of failed) out.push(`${name} > ${[...t.ancestorTitles, t.title].join(' > ')}: ${(t.failureMessages?.[0] ?? '').split('\n')[0]}`);
    if (failed.length === 0 && file.status === 'failed') out.push(`${name}: ${(file.message ?? 'failed outside its tests').split('\n')[0]}`);
  }
  return out;
}

/** One vitest run of a module's tests (bail at the first failure); the lines to print and the exit status. */
function vitest({ tests, skip = [] }, label) {
  const dir = mkdtempSync(join(tmpdir(), 'treeseal-mutate-'));
  const out = join(dir, 'report.json');
  try {
    const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const filter = skip.length === 0 ? [] : ['-t', `^(?!.*(?:${skip.map(escape).join('|')}))`];
    // The mutant reaches the worker thread and the CLI's processes through the environment
    // (the instrumented code reads __STRYKER_ACTIVE_MUTANT__ where it loads), which vitest's
    // forks, their Worker threads and the processes they spawn all inherit.
    const r = spawnSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', '--bail=1', '--reporter=json', `--outputFile=${out}`, ...filter, ...tests], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      maxBuffer: 64 << 20,
    });
    let report;
    try {
      report = JSON.parse(readFileSync(out, 'utf8'));
    } catch {
      report = undefined;
    }
    if (r.status === 0) return { status: 0, lines: [`${label}: ${report?.numPassedTests ?? '?'} passed, ${report?.numPendingTests ?? '?'} skipped in ${tests.join(' ')}`] };
    const failed = report === undefined ? [] : failures(report);
    const why = failed.length > 0 ? failed : [`vitest exit ${r.status ?? r.signal}: ${r.stderr.trim().split('\n').slice(-5).join('\n  ')}`];
    return { status: r.status || 1, lines: [`${label}: failed`, ...why.map((l) => `  ${l}`)] };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The mutants an earlier run killed, by id, with what killed them (MUTATE_SURVIVORS_OF). Ids are
 * the same when the mutated files and their sources are: checkSameMutants proves it in the dry run.
 */
function killedIn(reportPath) {
  const report = JSON.parse(readFileSync(reportPath, 'utf8'));
  const killed = new Map();
  for (const file of Object.values(report.files)) {
    for (const m of file.mutants) if (m.status === 'Killed') killed.set(m.id, (m.statusReason ?? '').trim().split('\n').slice(1).join(' ').trim());
  }
  return { report, killed };
}

/**
 * Fails (in the dry run, so Stryker stops) unless this run mutates the same files, with the
 * same sources, as the earlier run: only then do its mutant ids name the same mutants.
 */
function checkSameMutants(reportPath, instrumented) {
  const { report } = killedIn(reportPath);
  const before = Object.keys(report.files).sort();
  if (JSON.stringify(before) !== JSON.stringify([...instrumented].sort())) return `${reportPath} mutated ${before.join(', ')}; this run mutates ${instrumented.join(', ')}`;
  // The sandbox is <project>/.stryker-tmp/sandbox-*: the sources as they are, not instrumented, are two levels up.
  const changed = before.filter((f) => report.files[f].source !== readFileSync(join(process.cwd(), '..', '..', f), 'utf8'));
  return changed.length === 0 ? undefined : `${changed.join(', ')} changed since ${reportPath}`;
}

/** The guard modules instrumented in this sandbox (those this run mutates). */
const instrumentedModules = () => Object.keys(GUARD_MODULES).filter((file) => readFileSync(file, 'utf8').includes('stryMutAct_9fa48('));

function main() {
  const id = process.env.__STRYKER_ACTIVE_MUTANT__;
  // A relative path is the project's: the sandbox is <project>/.stryker-tmp/sandbox-*.
  const earlier = process.env.MUTATE_SURVIVORS_OF ? resolve(process.cwd(), '..', '..', process.env.MUTATE_SURVIVORS_OF) : undefined;
  if (earlier !== undefined && id === undefined) {
    const wrong = checkSameMutants(earlier, instrumentedModules());
    if (wrong !== undefined) {
      process.stdout.write(`MUTATE_SURVIVORS_OF: ${wrong}: its mutant ids do not carry over\n`);
      return 1;
    }
  }
  if (earlier !== undefined && id !== undefined) {
    const by = killedIn(earlier).killed.get(id);
    if (by !== undefined) {
      process.stdout.write(`mutant ${id}: killed in ${earlier} by\n  ${by}\n`);
      return 1;
    }
  }
  // The dry run runs the tests of every instrumented module as its mutants will (they must pass); a mutant, its module's.
  const runs = id === undefined ? instrumentedModules().map((file) => [file, `dry run, ${file}`]) : [moduleOf(id)].map((file) => [file, `mutant ${id} (${file})`]);
  for (const [file, label] of runs) {
    const { status, lines } = vitest(GUARD_MODULES[file], label);
    process.stdout.write(`${lines.join('\n')}\n`);
    if (status !== 0) return status;
  }
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.exitCode = main();
