/**
 * The committed `packages/engine/schema.sql` must equal a dump of a freshly migrated database,
 * so every DDL change shows up in review as a diff of that file.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { dumpSchema } from '../helpers/schema-dump.js';

const SNAPSHOT = fileURLToPath(new URL('../../packages/engine/schema.sql', import.meta.url));

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

it('schema.sql matches the migrated database', async () => {
  const live = await dumpSchema(db.pool);
  if (process.env.UPDATE_SCHEMA_SNAPSHOT === '1') await writeFile(SNAPSHOT, live);
  const committed = await readFile(SNAPSHOT, 'utf8').catch(() => '');
  expect(live, 'schema changed: review it, then UPDATE_SCHEMA_SNAPSHOT=1 pnpm test test/schema/snapshot.test.ts').toBe(committed);
});
