/**
 * `createEngine`: the durable runtime's entry point.
 *
 * @example
 * ```ts
 * import { createEngine, embedded } from '@ratchet/engine';
 * const engine = await createEngine({ database: embedded({ dataDir: '.ratchet/postgres' }), workflows: [greet] });
 * await engine.migrate();
 * const { runId, state, output } = await engine.run(greet, { name: 'Ada' });
 * await engine.close();
 * ```
 */
import type pg from 'pg';
import { openDatabase, type Database, type DatabaseOption } from './store/database.js';
import { checkSchema, migrateSchema, type MigrationStatus } from './store/migrate.js';

export interface EngineOptions {
  /** A Postgres URL, a `pg.Pool` (left open on close), or `embedded({ dataDir })`. Default: `embedded()`. */
  database?: DatabaseOption;
  /** Connections in the engine's pool (ignored for a caller's pool). Default 10. */
  poolSize?: number;
}

export interface Engine {
  /** Applies pending migrations under an advisory lock; safe to race. Resolves to how many were applied. */
  migrate(): Promise<number>;
  /** Verifies the database has every migration this code needs (what a worker does at start). */
  checkSchema(): Promise<MigrationStatus>;
  /** The pool the engine uses (for the application's own queries in the same database). */
  readonly pool: pg.Pool;
  /** Ends the engine's connections and stops an embedded server this process started. */
  close(): Promise<void>;
}

export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const database: Database = await openDatabase(options.database, options.poolSize);
  let closed: Promise<void> | undefined;
  return {
    pool: database.pool,
    migrate: () => migrateSchema(database.pool),
    checkSchema: () => checkSchema(database.pool),
    close: () => (closed ??= database.close()),
  };
}
