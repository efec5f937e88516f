/**
 * A fresh step that succeeds at its first attempt is recorded by the segment's next statement:
 * the next ctx call's (before it does anything), the run's settlement (the same transaction), or
 * its own after the current macrotask. What must hold: nothing that follows a step runs or
 * becomes visible before the step is recorded, and ctx.now() after it is what replay reads.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, eventually, operations, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
let engine: Engine;
beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, {});
});

/** Per step key: whether its row was written by the transaction that wrote the run's current row. */
async function writtenWithSettlement(runId: string): Promise<Record<string, boolean>> {
  const { rows } = await db.pool.query(
    `SELECT o.step_key AS key, o.xmin::text = t.xmin::text AS same
       FROM ratchet.operations o JOIN ratchet.tasks t ON t.tenant_id = o.tenant_id AND t.id = o.task_id
      WHERE o.task_id = $1 ORDER BY o.seq`,
    [runId],
  );
  return Object.fromEntries(rows.map((r) => [r.key, r.same]));
}

describe('deferred step records', () => {
  it('the last step is written by the statement that completes the run; the others each by their own, before the next step runs', async () => {
    const seen: string[][] = [];
    const wf = workflow({ name: 'deferred-three', version: '1', input: z.object({}) }, async (ctx) => {
      const record = async () => {
        const { rows } = await db.pool.query(`SELECT step_key FROM ratchet.operations WHERE task_id = $1 ORDER BY seq`, [ctx.runId]);
        seen.push(rows.map((r) => r.step_key));
      };
      await ctx.step('one', record);
      await ctx.step('two', record);
      await ctx.step('three', record);
      return 'done';
    });
    const result = await engine.run(wf, {});
    expect(result).toMatchObject({ state: 'completed', output: 'done' });
    // Each step's work saw every step before it recorded.
    expect(seen).toEqual([[], ['one#1'], ['one#1', 'two#1']]);
    expect(await writtenWithSettlement(result.runId)).toEqual({ 'one#1': false, 'two#1': false, 'three#1': true });
    const ops = await operations(db, result.runId);
    expect(ops.map((o) => [o.stepKey, o.state, o.attempt, o.seq])).toEqual([
      ['one#1', 'succeeded', 1, 1],
      ['two#1', 'succeeded', 1, 2],
      ['three#1', 'succeeded', 1, 3],
    ]);
    const { rows } = await db.pool.query(`SELECT created_at, completed_at FROM ratchet.operations WHERE task_id = $1 ORDER BY seq`, [result.runId]);
    const row = await task(db, result.runId);
    for (const r of rows) {
      expect(r.created_at.getTime()).toBe(r.completed_at.getTime());
      expect(r.completed_at.getTime()).toBeLessThanOrEqual(row.completed_at.getTime());
    }
  });

  it('a run that fails after a step records the step with its failure, and a step returning nothing or null keeps it', async () => {
    const wf = workflow({ name: 'deferred-then-throw', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.step('nothing', () => undefined);
      await ctx.step('null', () => null);
      throw new Error('after the steps');
    });
    const result = await engine.run(wf, {});
    expect(result.state).toBe('failed');
    expect(await writtenWithSettlement(result.runId)).toEqual({ 'nothing#1': false, 'null#1': true });
    const { rows } = await db.pool.query(`SELECT step_key, result IS NULL AS sql_null, result FROM ratchet.operations WHERE task_id = $1 ORDER BY seq`, [result.runId]);
    expect(rows.map((r) => [r.step_key, r.sql_null, r.result])).toEqual([
      ['nothing#1', true, null],
      ['null#1', false, null],
    ]);
  });

  it('a step followed by something that is not a ctx call is recorded by itself at once', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const waiting = new Promise<void>((resolve) => (entered = resolve));
    const wf = workflow({ name: 'deferred-then-await', version: '1', input: z.object({}) }, async (ctx) => {
      const n = await ctx.step('first', () => 41);
      entered();
      await gate; // not a ctx call: the workflow's code waits on something of its own
      return n + 1;
    });
    const running = engine.run(wf, {});
    await waiting;
    const recorded = await eventually(async () => {
      const { rows } = await db.pool.query(`SELECT o.step_key FROM ratchet.operations o JOIN ratchet.tasks t ON t.id = o.task_id WHERE t.workflow_name = 'deferred-then-await'`);
      return rows.length > 0 && rows.map((r) => r.step_key);
    }, 2_000, 5);
    expect(recorded).toEqual(['first#1']);
    release();
    const result = await running;
    expect(result).toMatchObject({ state: 'completed', output: 42 });
    expect(await writtenWithSettlement(result.runId)).toEqual({ 'first#1': false });
  });

  it('ctx.now() after a deferred step is the time its record carries: a resumed run replays the same instant', async () => {
    const first: string[] = [];
    const wf = workflow({ name: 'deferred-now', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.step('a', () => 1);
      const seen = ctx.now().toISOString();
      first.push(seen);
      const recordedSeen = await ctx.step('keep', () => seen);
      await ctx.sleep('nap', '1500ms'); // past the in-memory limit: the run suspends and replays
      return { recordedSeen, replayedSeen: seen };
    });
    const own = await engineOn(db, { workflows: [wf] });
    const worker = own.worker({ pollMs: 50 });
    await worker.start();
    try {
      const run = await own.client.start(wf, {});
      const output = (await run.result({ timeout: '20s' })) as { recordedSeen: string; replayedSeen: string };
      expect(first).toHaveLength(2); // the first segment and the replay after the sleep
      expect(output.replayedSeen).toBe(output.recordedSeen);
      expect(first[1]).toBe(first[0]);
      const { rows } = await db.pool.query(`SELECT completed_at FROM ratchet.operations WHERE task_id = $1 AND step_key = 'a#1'`, [run.runId]);
      expect(rows[0].completed_at.toISOString()).toBe(output.recordedSeen);
    } finally {
      await worker.stop();
    }
  });

  it('parallel steps: those that finish first are written by themselves, the last with the outcome, each once', async () => {
    const wf = workflow({ name: 'deferred-parallel', version: '1', input: z.object({}) }, async (ctx) => {
      const slow = (ms: number, v: number) => () => new Promise<number>((resolve) => setTimeout(() => resolve(v), ms));
      const values = await Promise.all([ctx.step('a', slow(10, 1)), ctx.step('b', slow(60, 2)), ctx.step('c', slow(120, 3))]);
      return values.reduce((x, y) => x + y, 0);
    });
    const result = await engine.run(wf, {});
    expect(result).toMatchObject({ state: 'completed', output: 6 });
    expect(await writtenWithSettlement(result.runId)).toEqual({ 'a#1': false, 'b#1': false, 'c#1': true });
  });

  it('a step retried after a failed attempt is recorded by its own statement (its row exists)', async () => {
    let attempts = 0;
    const wf = workflow({ name: 'deferred-retried', version: '1', input: z.object({}) }, async (ctx) =>
      ctx.step(
        'flaky',
        () => {
          attempts += 1;
          if (attempts === 1) throw new Error('once');
          return attempts;
        },
        { retry: { maxAttempts: 3, initial: '10ms' } },
      ),
    );
    const result = await engine.run(wf, {});
    expect(result).toMatchObject({ state: 'completed', output: 2 });
    expect(await writtenWithSettlement(result.runId)).toEqual({ 'flaky#1': false });
    expect((await operations(db, result.runId)).map((o) => [o.state, o.attempt])).toEqual([['succeeded', 2]]);
  });
});
