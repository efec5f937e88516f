import { defineConfig } from 'vitest/config';

// CI sets RATCHET_TEST_REPORT to a path: a JSON report is written there beside the usual output
// (pnpm 12 keeps `--reporter` for itself, so `pnpm test` cannot pass it through).
const report = process.env.RATCHET_TEST_REPORT;

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts', 'examples/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    // Every test file gets its own database (a template clone), so files run in parallel.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    ...(report ? { reporters: ['default', 'json'], outputFile: { json: report } } : {}),
  },
});
