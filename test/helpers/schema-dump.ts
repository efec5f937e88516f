/**
 * A normalized text dump of the `ratchet` schema, built from the catalogs (pg_dump refuses a
 * server newer than itself, and CI runs both PostgreSQL 15 and 18): tables with their columns,
 * constraints (not NOT NULL ones, which PostgreSQL 18 also lists as constraints), indexes,
 * triggers and functions. Sorted, so it is stable across versions and runs.
 */
import type pg from 'pg';

export async function dumpSchema(pool: pg.Pool, schema = 'ratchet'): Promise<string> {
  const q = async (sql: string) => (await pool.query<{ line: string }>(sql, [schema])).rows.map((r) => r.line);
  const columns = await q(`
    SELECT format('%s.%s %s%s%s', c.table_name, c.column_name,
                  CASE WHEN c.data_type = 'USER-DEFINED' THEN c.udt_name ELSE c.data_type END,
                  CASE WHEN c.is_nullable = 'NO' THEN ' NOT NULL' ELSE '' END,
                  CASE WHEN c.column_default IS NOT NULL THEN ' DEFAULT ' || c.column_default ELSE '' END) AS line
      FROM information_schema.columns c
     WHERE c.table_schema = $1
     ORDER BY c.table_name, c.ordinal_position`);
  const constraints = await q(`
    SELECT format('%s CONSTRAINT %s %s', t.relname, k.conname, pg_get_constraintdef(k.oid)) AS line
      FROM pg_constraint k JOIN pg_class t ON t.oid = k.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
     WHERE n.nspname = $1 AND k.contype IN ('p', 'f', 'u', 'c', 'x')
     ORDER BY t.relname, k.conname`);
  const indexes = await q(`
    SELECT regexp_replace(indexdef, ' USING btree', '') AS line
      FROM pg_indexes WHERE schemaname = $1 ORDER BY tablename, indexname`);
  const triggers = await q(`
    SELECT format('%s TRIGGER %s %s', c.relname, t.tgname,
                  regexp_replace(pg_get_triggerdef(t.oid), '^CREATE TRIGGER \\S+ ', '')) AS line
      FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND NOT t.tgisinternal
     ORDER BY c.relname, t.tgname`);
  const functions = await q(`
    SELECT format('FUNCTION %s(%s) RETURNS %s %s %s', p.proname, pg_get_function_arguments(p.oid),
                  pg_get_function_result(p.oid), l.lanname,
                  CASE p.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END) AS line
      FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
     WHERE n.nspname = $1
     ORDER BY p.proname`);
  return [
    `-- Normalized dump of schema "${schema}". Regenerate: UPDATE_SCHEMA_SNAPSHOT=1 pnpm test test/schema/snapshot.test.ts`,
    '',
    '-- columns',
    ...columns,
    '',
    '-- constraints',
    ...constraints,
    '',
    '-- indexes',
    ...indexes,
    '',
    '-- triggers',
    ...triggers,
    '',
    '-- functions',
    ...functions,
    '',
  ].join('\n');
}
