/**
 * Real pg.Pools whose named statements a test can watch: every query still goes to PostgreSQL;
 * the test sees each named statement's answer before the engine does, and may hold it or lose it.
 */
import pg from 'pg';

/**
 * A pool that calls `observe(name, result)` with each named statement's answer (`undefined` when
 * the statement failed) and hands the answer on once `observe` has finished: a test can count
 * statements, or hold one in flight.
 */
export function observedPool(
  connectionString: string,
  observe: (name: string, result: pg.QueryResult | undefined) => void | Promise<void>,
  max = 10,
): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<pg.QueryResult>;
  pool.query = (async (...args: unknown[]) => {
    const name = (args[0] as { name?: string } | undefined)?.name;
    let result: pg.QueryResult;
    try {
      result = await query(...args);
    } catch (error) {
      if (name) await observe(name, undefined);
      throw error;
    }
    if (name) await observe(name, result);
    return result;
  }) as typeof pool.query;
  return pool;
}

/**
 * A pool on which the first execution of statement `name` commits in PostgreSQL and the client
 * then hears nothing back: a connection lost at COMMIT. `lost` counts it.
 */
export class CommitLosingPool extends pg.Pool {
  lost = 0;

  constructor(
    config: pg.PoolConfig,
    private readonly statement: string,
  ) {
    super(config);
    this.on('error', () => {});
  }

  override query(...args: any[]): any {
    const result = (super.query as (...a: any[]) => Promise<unknown>)(...args);
    if (args[0]?.name !== this.statement || this.lost > 0) return result;
    this.lost += 1;
    return result.then(() => {
      throw new Error('Connection terminated unexpectedly');
    });
  }
}
