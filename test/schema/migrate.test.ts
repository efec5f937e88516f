import { afterEach, describe, expect, it } from 'vitest';
import { isRatchetError } from '@ratchet/sdk';
import { checkSchema, migrateSchema, migrationStatus } from '../../packages/engine/src/store/migrate.js';
import { emptyDatabase, type TestDatabase } from '../helpers/database.js';

const TABLES = ['clock', 'contracts', 'events', 'idempotency_keys', 'operations', 'outbox', 'schedules', 'signals', 'tasks', 'tenant_purges', 'tenant_secret', 'tenant_sessions', 'workers'];
const dbs: TestDatabase[] = [];
afterEach(async () => {
  await Promise.all(dbs.splice(0).map((d) => d.drop()));
});
async function empty(): Promise<TestDatabase> {
  const db = await emptyDatabase();
  dbs.push(db);
  return db;
}
async function tables(db: TestDatabase): Promise<string[]> {
  const { rows } = await db.pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = 'ratchet' ORDER BY 1`,
  );
  return rows.map((r) => r.table_name);
}

describe('migrate', () => {
  it('creates the schema on an empty database, and a re-run is a no-op', async () => {
    const db = await empty();
    const before = await migrationStatus(db.pool);
    expect(before.applied).toEqual([]);
    expect(before.pending).toBe(before.known.length);

    const applied = await migrateSchema(db.pool);
    expect(applied).toBe(before.known.length);
    expect(await tables(db)).toEqual(TABLES);
    const { rows } = await db.pool.query(`SELECT shift FROM ratchet.clock`);
    expect(rows).toHaveLength(1);

    expect(await migrateSchema(db.pool)).toBe(0);
    const after = await migrationStatus(db.pool);
    expect(after.applied).toEqual(after.known);
    expect(after.pending).toBe(0);
  });

  it('five concurrent migrate() calls leave one consistent schema', async () => {
    const db = await empty();
    const results = await Promise.all(Array.from({ length: 5 }, () => migrateSchema(db.pool)));
    const known = (await migrationStatus(db.pool)).known.length;
    expect(results.filter((n) => n === known)).toHaveLength(1);
    expect(results.filter((n) => n === 0)).toHaveLength(4);
    const { rows } = await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ratchet_meta.migrations`);
    expect(Number(rows[0]!.n)).toBe(known);
    expect(await tables(db)).toEqual(TABLES);
  });

  it('refuses a database holding migrations this code does not know, but a worker accepts it', async () => {
    const db = await empty();
    await migrateSchema(db.pool);
    await db.pool.query(
      `INSERT INTO ratchet_meta.migrations (hash, created_at) VALUES ('feedface', (SELECT max(created_at) + 1 FROM ratchet_meta.migrations))`,
    );
    const error = await migrateSchema(db.pool).catch((e: unknown) => e);
    expect(isRatchetError(error, 'SCHEMA_MISMATCH')).toBe(true);
    expect(String((error as Error).message)).toMatch(/does not know/);
    // A worker of this version only needs its own migrations applied: a newer schema is fine.
    const status = await checkSchema(db.pool);
    expect(status.unknown).toBe(1);
  });

  it('a worker refuses a schema that is behind it, naming the fix', async () => {
    const db = await empty();
    const error = await checkSchema(db.pool).catch((e: unknown) => e);
    expect(isRatchetError(error, 'SCHEMA_MISMATCH')).toBe(true);
    expect(String((error as Error).message)).toMatch(/migrate/);
  });
});
