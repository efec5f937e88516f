/**
 * An engine on a fresh per-file database, plus row readers for assertions.
 */
import { afterAll } from 'vitest';
import { createEngine, type Engine, type EngineOptions } from '@ratchet/engine';
import { freshDatabase, type TestDatabase } from './database.js';

export interface TestEngine {
  engine: Engine;
  db: TestDatabase;
}

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A database for this file (dropped after it) and an engine on it. */
export async function testDatabase(): Promise<TestDatabase> {
  const db = await freshDatabase();
  cleanups.push(() => db.drop());
  return db;
}

export async function engineOn(db: TestDatabase, options: Omit<EngineOptions, 'database'> = {}): Promise<Engine> {
  const engine = await createEngine({ database: db.url, poolSize: 20, ...options });
  cleanups.push(() => engine.close());
  return engine;
}

export async function events(db: TestDatabase, runId: string): Promise<{ seq: number; type: string; actor: string | null }[]> {
  const { rows } = await db.pool.query(
    `SELECT seq, event_type AS type, actor_id AS actor FROM ratchet.events WHERE task_id = $1 ORDER BY seq`,
    [runId],
  );
  return rows;
}

export async function operations(db: TestDatabase, runId: string): Promise<{ stepKey: string; kind: string; state: string; attempt: number; result: unknown; seq: number }[]> {
  const { rows } = await db.pool.query(
    `SELECT step_key AS "stepKey", kind, state, attempt, result, seq FROM ratchet.operations WHERE task_id = $1 ORDER BY seq`,
    [runId],
  );
  return rows;
}

export async function task(db: TestDatabase, runId: string): Promise<Record<string, any>> {
  const { rows } = await db.pool.query(`SELECT * FROM ratchet.tasks WHERE id = $1`, [runId]);
  return rows[0];
}

/** Moves ratchet.now() forward for every connection. */
export async function shift(db: TestDatabase, ms: number): Promise<void> {
  await db.pool.query(`UPDATE ratchet.clock SET shift = shift + $1 * interval '1 millisecond'`, [ms]);
}

/** Polls `check` until it returns a truthy value or the time runs out. */
export async function eventually<T>(check: () => Promise<T | undefined | null | false>, timeoutMs = 15_000, everyMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
