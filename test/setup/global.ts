/**
 * Vitest global setup: one PostgreSQL for the whole run, and a migrated template database that
 * every test file clones (CREATE DATABASE … TEMPLATE), so files run in parallel on fresh data.
 *
 * DATABASE_URL set: that server (its database is used only to connect; clones are made beside it).
 * Otherwise: an embedded PostgreSQL in a temporary data dir, stopped at the end.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { startEmbedded, type EmbeddedServer } from '../../packages/engine/src/embedded/embedded.js';
import { migrateSchema } from '../../packages/engine/src/store/migrate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    adminUrl: string;
    templateDatabase: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: EmbeddedServer | undefined;
  let dataRoot: string | undefined;
  let adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    dataRoot = await mkdtemp(join(tmpdir(), 'ratchet-test-pg-'));
    // Postgres runs as its own user when we are root: it must be able to reach the data dir.
    await chmod(dataRoot, 0o755);
    server = await startEmbedded({ dataDir: join(dataRoot, 'data') });
    adminUrl = server.adminUrl;
  }
  const templateDatabase = `ratchet_template_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${templateDatabase}`);
    await admin.query(`CREATE DATABASE ${templateDatabase}`);
  } finally {
    await admin.end();
  }
  const pool = new pg.Pool({ connectionString: withDatabase(adminUrl, templateDatabase), max: 2 });
  try {
    await migrateSchema(pool);
  } finally {
    await pool.end();
  }
  project.provide('adminUrl', adminUrl);
  project.provide('templateDatabase', templateDatabase);

  return async () => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      // Clones made by test files are dropped by the files; sweep what a crash left.
      const { rows } = await client.query<{ datname: string }>(
        `SELECT datname FROM pg_database WHERE datname LIKE 'ratchet_t_%' OR datname = $1`,
        [templateDatabase],
      );
      for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    } finally {
      await client.end();
    }
    await server?.release();
    if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
  };
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
