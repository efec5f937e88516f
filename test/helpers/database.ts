/**
 * Per-file databases for tests: `freshDatabase()` clones the migrated template made by the
 * global setup; `emptyDatabase()` makes one with no schema at all (for migration tests).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  readonly pool: pg.Pool;
  /** Closes the pool and drops the database (forcing out stray connections). */
  drop(): Promise<void>;
}

export async function freshDatabase(): Promise<TestDatabase> {
  return createDatabase(inject('templateDatabase'));
}

export async function emptyDatabase(): Promise<TestDatabase> {
  return createDatabase('template0');
}

async function createDatabase(template: string): Promise<TestDatabase> {
  const adminUrl = inject('adminUrl');
  const name = `ratchet_t_${randomBytes(6).toString('hex')}`;
  await withAdmin(adminUrl, (c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  pool.on('error', () => {});
  let dropped = false;
  return {
    name,
    url,
    pool,
    async drop() {
      if (dropped) return;
      dropped = true;
      await pool.end();
      await withAdmin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}

async function withAdmin<T>(adminUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
