/**
 * `pnpm demo`: starts (or attaches to) the embedded PostgreSQL under .ratchet/postgres, migrates
 * it, and prints what Ratchet created.
 */
import { createEngine } from '@ratchet/engine';

const engine = await createEngine();
try {
  const applied = await engine.migrate();
  console.log(applied > 0 ? `Applied ${applied} migration(s).` : 'Schema is up to date.');
  const { rows } = await engine.pool.query<{ table_name: string; columns: number }>(
    `SELECT table_name, count(*)::int AS columns FROM information_schema.columns
      WHERE table_schema = 'ratchet' GROUP BY table_name ORDER BY table_name`,
  );
  for (const r of rows) console.log(`  ratchet.${r.table_name.padEnd(12)} ${r.columns} columns`);
} finally {
  await engine.close();
}
