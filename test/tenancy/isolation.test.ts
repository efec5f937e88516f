/**
 * Tenant isolation: every client API answers "not found" for another tenant's run, the database
 * refuses a row pointing into another tenant, and the least-privilege role `ratchet_app` sees
 * only the tenant its session entered — with raw SQL, on its own connection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

const A = '0190a5f8-aaaa-7000-8000-00000000000a';
const B = '0190a5f8-bbbb-7000-8000-00000000000b';

let db: TestDatabase;
let engine: Engine;
let app: pg.Client;
let role: string;
const runs: Record<string, string> = {};

const note = workflow({ name: 'note', version: '1', input: z.object({ text: z.string() }) }, async (ctx, { text }) => {
  await ctx.waitFor('go');
  return ctx.step('echo', () => text);
});

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, { workflows: [note] });
  runs.a = (await engine.client.start(note, { text: 'secret of A' }, { tenantId: A })).runId;
  runs.b = (await engine.client.start(note, { text: 'secret of B' }, { tenantId: B })).runId;
  await engine.client.signal(runs.a, 'go', 1, { tenantId: A });
  // A login role of the least-privilege role, connecting with raw SQL.
  role = `app_${randomBytes(4).toString('hex')}`;
  await db.pool.query(`CREATE ROLE ${role} LOGIN PASSWORD 'app-pw' IN ROLE ratchet_app`);
  const url = new URL(db.url);
  url.username = role;
  url.password = 'app-pw';
  app = new pg.Client({ connectionString: url.toString() });
  await app.connect();
});

afterAll(async () => {
  await app?.end();
  await db.pool.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`).catch(() => {});
});

describe('client APIs are tenant-scoped', () => {
  it('another tenant’s run is "not found" through every API, never its data', async () => {
    await expect(engine.client.get(runs.a!, { tenantId: B })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await engine.client.list({ tenantId: B })).map((r) => r.runId)).toEqual([runs.b]);
    await expect(engine.client.handle(runs.a!, B).result({ timeout: '1s' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(engine.client.signal(runs.a!, 'go', 1, { tenantId: B })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(engine.client.cancel(runs.a!, { tenantId: B })).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await expect(engine.client.resolve(runs.a!, 'go#1', { result: 1 }, { tenantId: B })).rejects.toMatchObject({ code: 'NOT_PARKED' });
    // The default tenant sees neither.
    await expect(engine.client.get(runs.a!)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    expect((await engine.client.get(runs.a!, { tenantId: A })).state).toBe('pending');
  });

  it('the database refuses a row that points into another tenant (23503)', async () => {
    await expect(
      db.pool.query(
        `INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state)
         VALUES ($1, gen_random_uuid(), $2, 'x', 'x#1', 1, 'step', 'succeeded')`,
        [B, runs.a],
      ),
    ).rejects.toMatchObject({ code: '23503' });
  });
});

describe('row-level security for the role ratchet_app', () => {
  it('sees nothing before its session enters a tenant', async () => {
    for (const table of ['tasks', 'operations', 'events', 'signals', 'outbox', 'contracts', 'schedules']) {
      const { rows } = await app.query(`SELECT count(*)::int AS n FROM ratchet.${table}`);
      expect(rows[0].n, table).toBe(0);
    }
  });

  it('sees only the tenant it entered with the engine’s proof', async () => {
    await app.query(`SELECT ratchet.enter_tenant($1, $2)`, [A, await engine.tenants.sessionProof(A)]);
    const tasks = await app.query(`SELECT id, tenant_id, input FROM ratchet.tasks`);
    expect(tasks.rows).toEqual([{ id: runs.a, tenant_id: A, input: { text: 'secret of A' } }]);
    const events = await app.query(`SELECT DISTINCT tenant_id FROM ratchet.events`);
    expect(events.rows).toEqual([{ tenant_id: A }]);
    const signals = await app.query(`SELECT count(*)::int AS n FROM ratchet.signals`);
    expect(signals.rows[0].n).toBe(1);
    // Switching tenants needs the other tenant's proof.
    await app.query(`SELECT ratchet.enter_tenant($1, $2)`, [B, await engine.tenants.sessionProof(B)]);
    expect((await app.query(`SELECT id FROM ratchet.tasks`)).rows).toEqual([{ id: runs.b }]);
    await app.query(`SELECT ratchet.leave_tenant()`);
    expect((await app.query(`SELECT count(*)::int AS n FROM ratchet.tasks`)).rows[0].n).toBe(0);
  });

  it('cannot escape: a wrong proof, the session table, the secret, a forged start time', async () => {
    await expect(app.query(`SELECT ratchet.enter_tenant($1, $2)`, [B, 'f'.repeat(64)])).rejects.toMatchObject({ code: '28000' });
    await expect(app.query(`SELECT ratchet.enter_tenant($1, $2)`, [B, await engine.tenants.sessionProof(A)])).rejects.toMatchObject({ code: '28000' });
    await expect(app.query(`SELECT * FROM ratchet.tenant_secret`)).rejects.toMatchObject({ code: '42501' });
    await expect(app.query(`SELECT * FROM ratchet.tenant_sessions`)).rejects.toMatchObject({ code: '42501' });
    await expect(app.query(`INSERT INTO ratchet.tenant_sessions VALUES (pg_backend_pid(), now(), $1)`, [B])).rejects.toMatchObject({ code: '42501' });
    await app.query(`SELECT ratchet.enter_tenant($1, $2)`, [A, await engine.tenants.sessionProof(A)]);
    // The definer function matches the caller's real start time; any other value matches nothing.
    const forged = await app.query(`SELECT ratchet.session_tenant_at(now() - interval '1 day') AS t`);
    expect(forged.rows[0].t).toBeNull();
    await expect(app.query(`SET ratchet.tenant_id = '${B}'`).then(() => app.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE tenant_id = $1`, [B]))).resolves.toMatchObject({
      rows: [{ n: 0 }],
    });
    await app.query(`SELECT ratchet.leave_tenant()`);
  });

  it('has no write, no DDL, and no way to change events', async () => {
    await app.query(`SELECT ratchet.enter_tenant($1, $2)`, [A, await engine.tenants.sessionProof(A)]);
    const refused = [
      `UPDATE ratchet.events SET event_type = 'completed'`,
      `DELETE FROM ratchet.events`,
      `TRUNCATE ratchet.events`,
      `INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type) VALUES ('${A}', '${runs.a}', 99, 'completed')`,
      `UPDATE ratchet.tasks SET state = 'completed'`,
      `DELETE FROM ratchet.tasks`,
      `INSERT INTO ratchet.signals (tenant_id, id, task_id, name) VALUES ('${A}', gen_random_uuid(), '${runs.a}', 'go')`,
      `CREATE TABLE ratchet.intruder (x int)`,
      `ALTER TABLE ratchet.tasks DISABLE ROW LEVEL SECURITY`,
    ];
    for (const sql of refused) await expect(app.query(sql), sql).rejects.toMatchObject({ code: expect.stringMatching(/^42501$|^42809$/) });
    await app.query(`SELECT ratchet.leave_tenant()`);
  });
});
