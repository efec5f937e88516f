/**
 * Regressions found in review: a backend terminated mid-checkpoint (what a Postgres restart does),
 * lease renewals racing our own seals and commits, strings JSON cannot carry.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { z } from 'zod';
import { defineAction, workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, events, operations, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
let engine: Engine;
beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, {});
});

describe('a backend terminated in the middle of a checkpoint (57P01, as on a restart)', () => {
  // A step followed by another is written by its own checkpoint statement; the last step before
  // the run returns is written by the run's settlement (a deferred step): both are retried.
  it.each([
    { statement: 'a step checkpoint', steps: 2, waiting: '%INSERT INTO ratchet.operations%' },
    { statement: 'the settlement that records the last step', steps: 1, waiting: '%UPDATE ratchet.tasks t%' },
  ])('retries $statement on a new connection instead of failing the run', async ({ steps, waiting }) => {
    let executions = 0;
    const wf = workflow({ name: `terminated-${steps}`, version: '1', input: z.object({}) }, async (ctx) => {
      const n = await ctx.step('a', () => (executions += 1));
      if (steps === 2) await ctx.step('b', () => n);
      return n;
    });
    const side = new pg.Client({ connectionString: db.url });
    await side.connect();
    let terminated = 0;
    const onError: unknown[] = [];
    const e = await engineOn(db, {
      workflows: [wf],
      onError: (error) => onError.push(error),
      faults: {
        beforeStepRecord: async ({ runId }) => {
          if (terminated > 0) return;
          // Hold the run's row so the next statement waits on it, then terminate the waiting backend.
          await side.query('BEGIN');
          await side.query('SELECT 1 FROM ratchet.tasks WHERE id = $1 FOR UPDATE', [runId]);
          setTimeout(async () => {
            const { rows } = await db.pool.query(
              `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`,
              [waiting],
            );
            for (const r of rows) terminated += (await db.pool.query('SELECT pg_terminate_backend($1) AS ok', [r.pid])).rows[0].ok ? 1 : 0;
            await side.query('ROLLBACK');
          }, 300);
        },
      },
    });
    try {
      const result = await e.run(wf, {});
      expect(terminated).toBe(1);
      expect(result).toMatchObject({ state: 'completed', output: 1 });
      expect(executions).toBe(1);
      expect(onError.some((err) => (err as { code?: string }).code === '57P01')).toBe(true);
      const ops = await operations(db, result.runId);
      expect(ops.map((op) => [op.stepKey, op.state])).toEqual(steps === 2 ? [['a#1', 'succeeded'], ['b#1', 'succeeded']] : [['a#1', 'succeeded']]);
    } finally {
      await side.end();
    }
  });
});

describe('lease renewals racing our own seals and commits', () => {
  it('never mistake a version we moved ourselves for a lost lease', async () => {
    const slow = defineAction({
      name: 'slow.noop',
      input: z.object({ ms: z.number() }),
      run: async (tx, { ms }) => {
        await tx.query('SELECT pg_sleep($1::float8 / 1000)', [ms]);
        return { ok: true };
      },
    });
    const wf = workflow({ name: 'renew-vs-commit', version: '1', input: z.object({}) }, async (ctx) => {
      for (let i = 0; i < 10; i += 1) await ctx.commit(await ctx.seal(`c${i}`, { operations: [{ action: 'slow.noop', input: { ms: 250 } }] }));
      return 'done';
    });
    // A 1.2 s lease renews every 400 ms while each commit holds the run's row for 250 ms:
    // renewals land in the middle of commits again and again (a lease short enough for that,
    // long enough that a loaded machine does not miss renewals for real).
    const e = await engineOn(db, { workflows: [wf], actions: [slow], leaseMs: 1_200 });
    const result = await e.run(wf, {});
    expect(result).toMatchObject({ state: 'completed', output: 'done' });
    const types = (await events(db, result.runId)).map((x) => x.type);
    expect(types.filter((t) => t === 'contract_committed')).toHaveLength(10);
    expect(types.at(-1)).toBe('completed');
  });
});

describe('strings JSON cannot carry', () => {
  it('a lone surrogate in an effect input is refused with its path before anything runs', async () => {
    let sent = 0;
    const wf = workflow({ name: 'surrogate', version: '1', input: z.object({}) }, async (ctx) => {
      try {
        await ctx.effect('send', { input: { note: 'bad \ud800 text' }, execute: async () => (sent += 1) });
        return 'sent';
      } catch (error) {
        return (error as Error).message;
      }
    });
    const result = await engine.run(wf, {});
    expect(result.output).toMatch(/input\.note: contains a lone UTF-16 surrogate/);
    expect(sent).toBe(0);
    expect(await operations(db, result.runId)).toEqual([]);
  });
});
