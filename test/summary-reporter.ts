// summary-reporter.ts: ends a vitest run with one plain "N passed, N failed, N skipped" line.
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: readonly TestModule[]): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      // A file that failed outside its tests (a hook, an import) counts as one failure.
      if (module.state() === 'failed' && ![...module.children.allTests()].some((t) => t.result().state === 'failed')) counts.failed++;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
    }
    process.stdout.write(`\n${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped\n`);
  }
}
