/**
 * The schema distributes by tenant_id unchanged (Citus, DESIGN §2): every primary key, unique
 * constraint or index and foreign key of a tenant table includes tenant_id, foreign keys join on
 * it, and no key is fed by a sequence. ratchet.clock is the one table without a tenant (a Citus
 * reference table: one row, read by ratchet.now()).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

// workers: engine-wide heartbeat rows (a worker serves every tenant); a Citus reference table too.
const REFERENCE_TABLES = ['clock', 'tenant_secret', 'tenant_sessions', 'workers'];

it('every key of every tenant table includes tenant_id, and foreign keys join on it', async () => {
  const { rows: keys } = await db.pool.query<{ table: string; name: string; kind: string; columns: string[]; referenced: string[] | null }>(`
    SELECT c.relname AS table, k.conname AS name, k.contype AS kind,
           array(SELECT a.attname FROM unnest(k.conkey) n JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = n) AS columns,
           CASE WHEN k.contype = 'f' THEN array(SELECT a.attname FROM unnest(k.confkey) n JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = n) END AS referenced
      FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace s ON s.oid = c.relnamespace
     WHERE s.nspname = 'ratchet' AND k.contype IN ('p', 'u', 'f')`);
  const { rows: uniques } = await db.pool.query<{ table: string; name: string; columns: string[] }>(`
    SELECT t.relname AS table, i.relname AS name, array(SELECT a.attname FROM unnest(x.indkey) n JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = n) AS columns
      FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid JOIN pg_namespace s ON s.oid = t.relnamespace
     WHERE s.nspname = 'ratchet' AND x.indisunique`);
  const offenders = [
    ...keys.filter((k) => !REFERENCE_TABLES.includes(k.table) && !k.columns.includes('tenant_id')).map((k) => `${k.table}.${k.name}`),
    ...keys.filter((k) => k.kind === 'f' && k.columns.indexOf('tenant_id') !== k.referenced!.indexOf('tenant_id')).map((k) => `${k.table}.${k.name} (tenant_id not joined to tenant_id)`),
    ...uniques.filter((u) => !REFERENCE_TABLES.includes(u.table) && !u.columns.includes('tenant_id')).map((u) => `${u.table}.${u.name}`),
  ];
  expect(offenders).toEqual([]);
  expect(keys.filter((k) => k.kind === 'p').map((k) => k.table).sort()).toEqual(['clock', 'contracts', 'events', 'idempotency_keys', 'operations', 'outbox', 'schedules', 'signals', 'tasks', 'tenant_purges', 'tenant_secret', 'tenant_sessions', 'workers']);
});

it('no column of a ratchet table is fed by a sequence (ids are UUIDv7 made by the engine)', async () => {
  const { rows } = await db.pool.query(`
    SELECT table_name, column_name FROM information_schema.columns
     WHERE table_schema = 'ratchet' AND (column_default LIKE 'nextval(%' OR is_identity = 'YES')`);
  expect(rows).toEqual([]);
  const { rows: sequences } = await db.pool.query(`SELECT sequence_name FROM information_schema.sequences WHERE sequence_schema = 'ratchet'`);
  expect(sequences).toEqual([]);
});
