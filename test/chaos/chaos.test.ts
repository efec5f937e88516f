/**
 * The chaos run CI keeps: 60 s of a mixed workload on 3 worker processes, a random worker
 * SIGKILLed every 0.5–2 s, Postgres restarted twice (fast, then immediate), backends terminated —
 * then every invariant checked from the database (harness.ts, invariants.ts). The long run is
 * `pnpm chaos --duration 10m --workers 3` (docs/reliability.md).
 *
 * The harness runs its own embedded PostgreSQL 18, which it restarts. CI's second pass (Debian
 * PostgreSQL 15 via DATABASE_URL) skips this file: it would run the same server again, and the
 * engine code under test is the same. `.ci/run` runs it on its own after the first pass
 * (RATCHET_SKIP_CHAOS=1 there), so its load does not skew the timing of the lease tests.
 */
import { describe, expect, it } from 'vitest';
import { runChaos } from './harness.js';

describe.skipIf(process.env.DATABASE_URL !== undefined || process.env.RATCHET_SKIP_CHAOS === '1')('chaos', () => {
  it('SIGKILLed workers and restarted Postgres lose no run, duplicate no effect or business row, and lose no message', async () => {
    const report = await runChaos({ durationMs: 60_000, workers: 3, rate: 3, restarts: 2, drainMs: 150_000 });
    console.log(
      `chaos: ${report.counts.runs} runs, ${report.kills} worker kills, restarts ${report.restarts.fast} fast + ${report.restarts.immediate} immediate, ` +
        `${report.backendsTerminated} backends terminated, drained in ${report.drainMs} ms; ` +
        `raw duplicates ${report.counts.rawDuplicates}, redeliveries ${report.counts.redeliveries}; violations ${report.violations.length}`,
    );
    expect(report.violations).toEqual([]);
    // The chaos really happened (a harness that stopped killing would pass the line above). Kills
    // wait for a worker to be ready, which a loaded CI machine slows: the floor is low on purpose.
    expect(report.kills).toBeGreaterThanOrEqual(3);
    expect(report.restarts).toEqual({ fast: 1, immediate: 1 });
    expect(report.counts.runs).toBeGreaterThanOrEqual(100);
    expect(report.counts.contracts).toBeGreaterThanOrEqual(15);
    expect(report.counts.outbox).toBeGreaterThanOrEqual(80);
    expect(report.versionSamples).toBeGreaterThanOrEqual(30);
  }, 300_000);
});
