/**
 * @ratchet/engine/testing — helpers for testing workflows against a real Postgres.
 *
 * @example
 * ```ts
 * import { shiftClock } from '@ratchet/engine/testing';
 * await shiftClock(engine.pool, '1d');   // sleeps, leases and timeouts come due without waiting
 * ```
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
