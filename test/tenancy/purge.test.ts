/**
 * engine.tenants.purge: a tenant with runs in every state is removed while its workers are live;
 * the other tenant's runs complete untouched; a purge interrupted mid-way resumes; nothing of the
 * tenant remains but the audit row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine, Worker } from '@ratchet/engine';
import { engineOn, eventually, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

const P = '0190a5f8-0000-7000-8000-0000000000aa';
const Q = '0190a5f8-0000-7000-8000-0000000000bb';

let db: TestDatabase;
let engine: Engine;
let worker: Worker;

const slowEffect = workflow({ name: 'slow-effect', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
  await ctx.emit('started', { n });
  return ctx.effect('call', {
    input: { n },
    timeout: '1m',
    execute: ({ signal }) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => resolve(n), 1_500);
      signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)));
    }),
  });
});
const sleeper = workflow({ name: 'sleeper', version: '1', input: z.object({}) }, async (ctx) => {
  await ctx.sleep('nap', '1h');
  return 'woke';
});
const waiter = workflow({ name: 'waiter', version: '1', input: z.object({}) }, async (ctx) => ctx.waitFor('go'));
const quick = workflow({ name: 'quick', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('n', () => n));

const workflows = [slowEffect, sleeper, waiter, quick];

/** Rows of `tenant` in every table of the schema that has a tenant_id column. */
async function rowsOf(tenant: string): Promise<Record<string, number>> {
  const { rows: tables } = await db.pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns WHERE table_schema = 'ratchet' AND column_name = 'tenant_id' ORDER BY table_name`,
  );
  const counts: Record<string, number> = {};
  for (const { table_name } of tables) {
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.${table_name} WHERE tenant_id = $1`, [tenant]);
    if (rows[0].n > 0) counts[table_name] = rows[0].n;
  }
  return counts;
}

async function populate(tenant: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) {
    ids.push((await engine.client.start(quick, { n: i }, { tenantId: tenant })).runId);
    ids.push((await engine.client.start(sleeper, {}, { tenantId: tenant })).runId);
    const w = await engine.client.start(waiter, {}, { tenantId: tenant });
    await engine.client.signal(w.runId, 'other', 1, { tenantId: tenant });
    ids.push(w.runId);
  }
  ids.push((await engine.client.start(slowEffect, { n }, { tenantId: tenant })).runId);
  await engine.schedules.create({ workflow: quick, cron: '*/5 * * * *', input: { n: 0 }, tenantId: tenant, name: `nightly-${tenant.slice(-2)}` });
  return ids;
}

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, { workflows, leaseMs: 2_000 });
  worker = engine.worker({ concurrency: 20, pollMs: 200 });
  await worker.start();
});

afterAll(async () => {
  await worker.stop();
});

describe('engine.tenants.purge', () => {
  it('removes a tenant with runs in every state while workers are live; the other tenant is untouched', async () => {
    const mine = await populate(P, 20);
    const theirs = await populate(Q, 3);
    // Every state: completed (quick), sleeping, waiting, running (the slow effect).
    await eventually(async () => {
      const { rows } = await db.pool.query(`SELECT DISTINCT state FROM ratchet.tasks WHERE tenant_id = $1`, [P]);
      const states = rows.map((r) => r.state).sort();
      return ['completed', 'running', 'sleeping', 'waiting'].every((s) => states.includes(s));
    });
    const before = await rowsOf(P);
    expect(before.tasks).toBe(mine.length);

    const progress: number[] = [];
    const report = await engine.tenants.purge(P, { batchSize: 7, onProgress: (p) => progress.push(p.batches) });
    expect(report.removed).toMatchObject({ tasks: mine.length, schedules: 1, signals: 20 });
    expect(report.removed.events).toBe(before.events);
    expect(report.removed.operations).toBe(before.operations ?? 0);
    expect(progress.length).toBeGreaterThan(3); // batched

    // Nothing of P remains but its audit row.
    expect(await rowsOf(P)).toEqual({ tenant_purges: 1 });
    const audit = (await db.pool.query(`SELECT state, policy, removed FROM ratchet.tenant_purges WHERE tenant_id = $1`, [P])).rows[0];
    expect(audit).toMatchObject({ state: 'done', policy: { version: 1 }, removed: { tasks: mine.length } });

    // Q's runs go on: its waiter completes when signalled, its slow effect finishes.
    for (const id of theirs) {
      const info = await engine.client.get(id, { tenantId: Q });
      if (info.workflow === 'waiter') await engine.client.signal(id, 'go', 'ok', { tenantId: Q });
    }
    await eventually(async () => {
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE tenant_id = $1 AND state IN ('completed', 'sleeping')`, [Q]);
      return rows[0].n === theirs.length;
    }, 20_000);
    // The worker survived runs vanishing under it.
    expect(worker.stats.active).toBeGreaterThanOrEqual(0);
  });

  it('an interrupted purge resumes where it stopped, with exact counts', async () => {
    const T = '0190a5f8-0000-7000-8000-0000000000cc';
    const ids = [];
    for (let i = 0; i < 30; i += 1) ids.push((await engine.client.start(sleeper, {}, { tenantId: T })).runId);
    await eventually(async () => (await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE tenant_id = $1 AND state = 'sleeping'`, [T])).rows[0].n === 30);
    let batches = 0;
    await expect(
      engine.tenants.purge(T, {
        batchSize: 4,
        onProgress: () => {
          if (++batches === 3) throw new Error('the process died here');
        },
      }),
    ).rejects.toThrow('the process died here');
    const midway = (await db.pool.query(`SELECT id, state, removed FROM ratchet.tenant_purges WHERE tenant_id = $1`, [T])).rows;
    expect(midway).toHaveLength(1);
    expect(midway[0].state).toBe('running');
    const resumed = await engine.tenants.purge(T, { batchSize: 4 });
    expect(resumed.purgeId).toBe(midway[0].id);
    expect(resumed.removed.tasks).toBe(30);
    expect(await rowsOf(T)).toEqual({ tenant_purges: 1 });
    // Purging again is a new, empty purge.
    const again = await engine.tenants.purge(T);
    expect(again.removed.tasks ?? 0).toBe(0);
  });

  it('application tables join through purge hooks, batched', async () => {
    const T = '0190a5f8-0000-7000-8000-0000000000dd';
    await db.pool.query(`CREATE TABLE IF NOT EXISTS app_notes (tenant_id uuid NOT NULL, id serial PRIMARY KEY, body text)`);
    await db.pool.query(`INSERT INTO app_notes (tenant_id, body) SELECT $1, 'note ' || g FROM generate_series(1, 25) g`, [T]);
    await db.pool.query(`INSERT INTO app_notes (tenant_id, body) VALUES ($1, 'keep me')`, [Q]);
    const hooked = await engineOn(db, {
      workflows,
      purgeHooks: [
        {
          name: 'app.notes',
          purge: async (c, { tenantId, limit }) =>
            (await c.query(`DELETE FROM app_notes WHERE id IN (SELECT id FROM app_notes WHERE tenant_id = $1 LIMIT $2)`, [tenantId, limit])).rowCount ?? 0,
        },
      ],
    });
    const report = await hooked.tenants.purge(T, { batchSize: 10 });
    expect(report.removed['app.notes']).toBe(25);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM app_notes`)).rows[0].n).toBe(1);
  });

  it('bad input is a ValidationError naming the field, and writes nothing', async () => {
    await expect(engine.tenants.purge('not-a-uuid')).rejects.toMatchObject({ code: 'VALIDATION', path: ['tenantId'] });
    await expect(engine.tenants.purge(undefined as unknown as string)).rejects.toMatchObject({ code: 'VALIDATION', path: ['tenantId'] });
    await expect(engine.tenants.purge(Q, { batchSize: 0 })).rejects.toMatchObject({ code: 'VALIDATION', path: ['batchSize'] });
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tenant_purges WHERE tenant_id = $1`, [Q])).rows[0].n).toBe(0);
  });
});
