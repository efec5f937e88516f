/**
 * @ratchet/engine/testing — helpers for testing workflows against a real Postgres.
 *
 * @example
 * ```ts
 * import { createTestEngine } from '@ratchet/engine/testing';
 * const t = await createTestEngine({ workflows: [reminder] });     // a fresh database, a virtual clock
 * const run = await t.runToCompletion(reminder, { to: 'ada' });     // a one-day sleep: done in milliseconds
 * expect(run.state).toBe('completed');
 * await t.assertReplays(reminderV2, [run.runId]);                   // new code still replays old runs
 * await t.close();
 * ```
 *
 * Lower level: `shiftClock(engine.pool, '1d')` moves the engine's SQL time on any database.
 */
import type pg from 'pg';
import { parseDuration, type Duration } from '@ratchet/sdk';

/** Moves `ratchet.now()` forward by `by` for every connection of the database. */
export async function shiftClock(pool: pg.Pool, by: Duration): Promise<void> {
  const ms = parseDuration(by, 'by');
  await pool.query(`UPDATE ratchet.clock SET shift = shift + $1 * interval '1 millisecond'`, [ms]);
}

/** Puts `ratchet.now()` back to real time. */
export async function resetClock(pool: pg.Pool): Promise<void> {
  await pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
}

export { faultsFromEnv, FAULT_POINTS } from './faults.js';
export type { FaultHooks, FaultPoint, FaultContext, FaultAction, FaultsFromEnvOptions } from './faults.js';

export { createTestEngine } from './testkit/test-engine.js';
export type { CrashedRun, SettledRun, TestEngine, TestEngineOptions, VirtualClock } from './testkit/test-engine.js';
export { assertReplays, replayRun } from './testkit/replay.js';
export type { RecordedRun, ReplayOptions, ReplayReport } from './testkit/replay.js';
