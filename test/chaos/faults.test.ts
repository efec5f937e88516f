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
import { engineOn, events, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(`CREATE TABLE charges (key text PRIMARY KEY, n int NOT NULL DEFAULT 1)`);
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
});
