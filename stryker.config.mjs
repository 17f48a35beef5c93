// stryker.config.mjs: mutation testing of the guard modules (`npm run mutate`). The tests import the
// built package (dist/) and run code on a worker thread and in child processes, so: mutation
// switching on src/, one build of the instrumented sources (buildCommand), and the command runner,
// which hands each mutant to every thread and process through __STRYKER_ACTIVE_MUTANT__.
// Why this and not the vitest runner: docs/testing.md, "Mutation testing".
import { GUARD_MODULES } from './scripts/mutate-tests.mjs';

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  packageManager: 'npm',
  // Every guard module by default; `npm run mutate -- --mutate src/a.ts,src/b.ts` for some.
  mutate: Object.keys(GUARD_MODULES),
  // Instrumented once in the sandbox; tsc and the bundler turn it into the dist/ the tests import.
  buildCommand: 'npm run build:ts',
  testRunner: 'command',
  commandRunner: { command: 'node scripts/mutate-tests.mjs' },
  // The command runner measures no coverage: every mutant runs its module's test files.
  coverageAnalysis: 'off',
  // Instrumented code need not type-check (Stryker marks the files // @ts-nocheck); tsc still emits it.
  checkers: [],
  concurrency: 2,
  // A mutant's run may take timeoutFactor x the dry run (all guard tests) + timeoutMS before it is a timeout.
  timeoutMS: 60_000,
  timeoutFactor: 1.5,
  dryRunTimeoutMinutes: 30,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  clearTextReporter: { allowColor: false, logTests: false, reportScoreTable: true },
  // What the sandbox needs: sources, tests, scripts, the addon (build/Release/treeseal.node); not old builds.
  ignorePatterns: ['dist', 'tsc-out', 'reports', '.bench', '*.img', '*.tgz', 'build/Release/obj.target', 'build/Release/.deps'],
  tempDirName: '.stryker-tmp',
  // Stryker rewrites tsconfig.json's extends/references for the sandbox through TypeScript's JS API,
  // which TypeScript 7 (the native tsc) no longer has; ours has neither, so name no file to rewrite.
  tsconfigFile: 'no-tsconfig-to-rewrite.json',
};
