import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/setup/global.ts'],
    // Every test file gets its own database (a template clone), so files run in parallel.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
