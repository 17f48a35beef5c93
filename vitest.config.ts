// vitest.config.ts: forks pool (the addon and fd counting want a process per file), files in parallel, generous timeouts for real I/O.
import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Test files at once: the suites mostly wait (on loop-mounted filesystems, child
 * processes, registries, fsync), so at least 4 even on a 2-core machine, where vitest's
 * default (cores - 1) would run them one at a time. TREESEAL_TEST_WORKERS overrides it.
 */
const workers = Number(process.env.TREESEAL_TEST_WORKERS ?? Math.max(4, availableParallelism()));

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: workers,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
