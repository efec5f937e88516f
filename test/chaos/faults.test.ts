/**
 * The fault actions of RATCHET_FAULTS beyond `kill` (which the crash tests use): `delay=<ms>`
 * holds a run at its point, `drop` cuts every database connection there — and a run whose
 * connections are cut after each record, before a step record and before its effect executes
 * still completes, its effect charged once.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { faultsFromEnv } from '@ratchet/engine/testing';
import { engineOn, eventually, events, testDatabase } from '../helpers/engine.js';
import { APP_DDL, appActions, appChecks, appTables, triageWorkflow } from '../fixtures/triage.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(`CREATE TABLE charges (key text PRIMARY KEY, n int NOT NULL DEFAULT 1)`);
  await db.pool.query(APP_DDL);
  await db.pool.query(`INSERT INTO users (id, name) VALUES (7, 'grace')`);
});

describe('faultsFromEnv', () => {
  it('reads kill, delay=<ms> and drop, each with @n or @*, and refuses anything else', () => {
    const hooks = faultsFromEnv({ RATCHET_FAULTS: 'afterClaim:kill@3, afterRecord:delay=5@*,beforeCommit:drop' });
    expect(Object.keys(hooks).sort()).toEqual(['afterClaim', 'afterRecord', 'beforeCommit']);
    for (const bad of ['afterClaim:explode', 'nowhere:kill', 'afterClaim:delay=', 'afterClaim:kill@', 'afterClaim']) {
      expect(() => faultsFromEnv({ RATCHET_FAULTS: bad })).toThrow(/RATCHET_FAULTS/);
    }
    expect(faultsFromEnv({})).toEqual({});
  });

  it('delay holds the run at its point the nth time only, or every time with @*', async () => {
    let hooks = faultsFromEnv({ RATCHET_FAULTS: 'afterRecord:delay=150@2' });
    const ctx = { point: 'afterRecord', runId: 'r' } as const;
    let t0 = Date.now();
    await hooks.afterRecord!(ctx);
    const first = Date.now() - t0;
    t0 = Date.now();
    await hooks.afterRecord!(ctx);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    expect(first).toBeLessThan(140);
    hooks = faultsFromEnv({ RATCHET_FAULTS: 'afterRecord:delay=60@*' });
    t0 = Date.now();
    await hooks.afterRecord!(ctx);
    await hooks.afterRecord!(ctx);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(110);
  });

  it('a connection cut while a parent starts its child is repeated, not thrown into the workflow', async () => {
    // The start statement is made to wait on a table lock, and its backend is terminated while it
    // waits: the statement itself fails with 57P01, as under a restart.
    let cuts = 0;
    const cutTheStart = async () => {
      const locker = await db.pool.connect();
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE ratchet.tasks IN SHARE MODE');
      void (async () => {
        try {
          await eventually(async () => {
            const { rows } = await db.pool.query(
              `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO ratchet.tasks%'`,
            );
            return rows.length > 0;
          });
          cuts += 1;
        } finally {
          await locker.query('COMMIT');
          locker.release();
        }
      })();
    };
    const kid = workflow({ name: 'cut-kid', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('double', () => n * 2));
    const parent = workflow({ name: 'cut-parent', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
      const doubled = await ctx.child('kid', kid, { n });
      return { doubled };
    });
    const engine = await engineOn(db, { workflows: [parent, kid], faults: { beforeChildStart: cutTheStart } });
    const worker = engine.worker({ pollMs: 100 });
    await worker.start();
    try {
      expect(await engine.client.execute(parent, { n: 21 }, { timeout: '30s' })).toEqual({ doubled: 42 });
      expect(cuts).toBe(1);
    } finally {
      await worker.stop();
      await engine.close();
    }
  });

  it('drop cuts the connections, and a run cut off at every record, before a step record and before its effect still completes, charged once', async () => {
    let drops = 0;
    const hooks = faultsFromEnv(
      { RATCHET_FAULTS: 'afterRecord:drop@*,beforeStepRecord:drop@2,afterReserveBeforeExecute:drop', DATABASE_URL: db.url },
    );
    const counted = Object.fromEntries(
      Object.entries(hooks).map(([point, hook]) => [point, async (c: Parameters<typeof hook>[0]) => (drops += 1, await hook(c))]),
    );
    const flow = workflow({ name: 'cut-off', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
      const a = await ctx.step('a', () => n + 1);
      const charged = await ctx.effect('charge', {
        input: { a },
        execute: async ({ idempotencyKey }) => {
          await db.pool.query(`INSERT INTO charges (key) VALUES ($1) ON CONFLICT (key) DO UPDATE SET n = charges.n + 1`, [idempotencyKey]);
          return { key: idempotencyKey };
        },
      });
      const b = await ctx.step('b', () => a * 2);
      return { a, b, key: charged.key };
    });
    const engine = await engineOn(db, { workflows: [flow], faults: counted, leaseMs: 5_000 });
    const result = await engine.run(flow, { n: 1 });
    expect(drops).toBeGreaterThanOrEqual(3);
    expect(result.state).toBe('completed');
    expect(result.output).toMatchObject({ a: 2, b: 4 });
    const { rows } = await db.pool.query(`SELECT n FROM charges`);
    expect(rows).toEqual([{ n: 1 }]);
    const types = (await events(db, result.runId)).map((e) => e.type);
    expect(types.at(-1)).toBe('completed');
    const cut = await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()`);
    expect(cut.rows[0].n).toBeGreaterThan(0); // the pools reconnected
  });

  it('a commit cut off on every attempt stops its segment (no StepFailedError); the run resumes and commits once', async () => {
    const drop = faultsFromEnv({ RATCHET_FAULTS: 'beforeCommit:drop@*', DATABASE_URL: db.url }).beforeCommit!;
    let cut = 0;
    const triage = triageWorkflow(async () => {});
    // The lease outlasts the commit's whole retry budget (~1.3 s of backoff plus the cuts): with a
    // shorter one, the lease watchdog — whose renewals the cuts also fail — may stop the segment
    // before the last attempt, and the count below becomes a race.
    const options = { workflows: [triage], actions: appActions, checks: appChecks, contractTables: appTables, leaseMs: 5_000 };
    // Every attempt of the first segment loses its connection inside the commit transaction, as
    // a restart longer than the retries would; afterwards the database is fine.
    const doomed = await engineOn(db, { ...options, faults: { beforeCommit: async (c) => (cut < 6 ? (cut += 1, await drop(c)) : undefined) } });
    const first = await doomed.run(triage, { ticket: 'printer on fire', userId: 7 }).catch((error: unknown) => ({ error }));
    expect(cut).toBe(6);
    expect('state' in first ? first.state : 'lost').not.toBe('failed');
    const runId = (await db.pool.query(`SELECT id FROM ratchet.tasks WHERE workflow_name = 'triage'`)).rows[0].id as string;
    const healthy = await engineOn(db, options);
    const worker = healthy.worker({ pollMs: 200 });
    await worker.start();
    const output = await eventually(async () => {
      const { rows } = await db.pool.query(`SELECT state, output FROM ratchet.tasks WHERE id = $1`, [runId]);
      return rows[0].state === 'completed' || rows[0].state === 'failed' ? rows[0] : null;
    }, 30_000);
    await worker.stop();
    expect(output.state).toBe('completed');
    expect(output.output.status).toBe('committed');
    const tickets = await db.pool.query(`SELECT count(*)::int AS n FROM tickets WHERE user_id = 7`);
    expect(tickets.rows[0].n).toBe(1);
    const contract = await db.pool.query(`SELECT status FROM ratchet.contracts WHERE task_id = $1`, [runId]);
    expect(contract.rows).toEqual([{ status: 'committed' }]);
  });
});
