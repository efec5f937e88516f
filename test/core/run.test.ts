/** The two ways in — engine.run (direct) and client.start → worker → result — and what they write. */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IdempotencyConflictError, NonRetryableError, StepFailedError, ValidationError, isRatchetError, workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, eventually, events, operations, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
let engine: Engine;

const calls: Record<string, number> = {};
const count = (name: string) => (calls[name] = (calls[name] ?? 0) + 1);

const order = workflow(
  { name: 'order', version: '1', input: z.object({ id: z.number().int(), items: z.array(z.string()).min(1) }) },
  async (ctx, { id, items }) => {
    const priced = await ctx.step('price', () => items.map((item, i) => ({ item, cents: 100 * (i + 1) })));
    const total = await ctx.step('total', () => priced.reduce((sum, p) => sum + p.cents, 0));
    const receipt = await ctx.effect('charge', {
      input: { id, total },
      execute: async ({ idempotencyKey, input }) => {
        count(`charge:${idempotencyKey}`);
        return { chargeId: `ch_${input.id}`, amount: input.total };
      },
    });
    return { id, total, receipt, at: ctx.now().toISOString() };
  },
);

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, { workflows: [order] });
});

describe('engine.run (direct path)', () => {
  it('runs inline to completion, one record per step, started and completed events', async () => {
    const result = await engine.run(order, { id: 1, items: ['a', 'b'] });
    expect(result.state).toBe('completed');
    expect(result.output).toMatchObject({ id: 1, total: 300, receipt: { chargeId: 'ch_1', amount: 300 } });
    const ops = await operations(db, result.runId);
    expect(ops.map((o) => [o.stepKey, o.kind, o.state, o.seq])).toEqual([
      ['price#1', 'step', 'succeeded', 1],
      ['total#1', 'step', 'succeeded', 2],
      ['charge#1', 'effect', 'succeeded', 4], // seq 3 was its reservation; seq follows the last write
    ]);
    expect((await events(db, result.runId)).map((e) => [e.seq, e.type])).toEqual([
      [1, 'started'],
      [2, 'completed'],
    ]);
    const row = await task(db, result.runId);
    expect(row.state).toBe('completed');
    expect(row.lease_owner).toBeNull();
    expect(row.due_at).toBeNull();
    expect(row.state_version).toBe(2);
    expect(calls[`charge:${result.runId}:charge#1`]).toBe(1);
  });

  it('records the acting process and the policy version on every event', async () => {
    const audited = await engineOn(db, { workflows: [order], policyVersion: 'pricing-2026-11' });
    const result = await audited.run(order, { id: 5, items: ['a'] });
    const { rows } = await db.pool.query(`SELECT event_type, actor_id, policy_version FROM ratchet.events WHERE task_id = $1 ORDER BY seq`, [result.runId]);
    expect(rows.map((r) => [r.event_type, r.policy_version])).toEqual([
      ['started', 'pricing-2026-11'],
      ['completed', 'pricing-2026-11'],
    ]);
    expect(rows.every((r) => /^engine:/.test(r.actor_id))).toBe(true);
  });

  it('returns the existing run for a reused key without executing it again', async () => {
    const first = await engine.run(order, { id: 2, items: ['x'] }, { idempotencyKey: 'order-2' });
    const again = await engine.run(order, { id: 2, items: ['x'] }, { idempotencyKey: 'order-2' });
    expect(again).toEqual(first);
    expect(calls[`charge:${first.runId}:charge#1`]).toBe(1);
    const conflict = await engine.run(order, { id: 3, items: ['x'] }, { idempotencyKey: 'order-2' }).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(IdempotencyConflictError);
  });

  it('refuses invalid input with the path named, writing nothing', async () => {
    const before = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks`);
    const error = await engine.run(order, { id: 1.5, items: [] } as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).message).toMatch(/input\.id/);
    expect((error as ValidationError).message).toMatch(/input\.items/);
    const bad = await engine.run(order, { id: 1, items: ['a'] }, { tenantId: 'not-a-uuid' }).catch((e: unknown) => e);
    expect(isRatchetError(bad, 'VALIDATION') && bad.path).toEqual(['tenantId']);
    const after = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks`);
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });
});

describe('client.start → worker → run.result()', () => {
  it('is executed by a worker and awaited through NOTIFY', async () => {
    const worker = engine.worker({ concurrency: 4 });
    await worker.start();
    try {
      const run = await engine.client.start(order, { id: 10, items: ['a', 'b', 'c'] });
      const output = await run.result({ timeout: '20s' });
      expect(output).toMatchObject({ id: 10, total: 600 });
      expect((await events(db, run.runId)).map((e) => e.type)).toEqual(['started', 'claimed', 'completed']);
      const events2 = await events(db, run.runId);
      expect(events2[1]!.actor).toBe(worker.workerId);
      expect((await run.status()).state).toBe('completed');
    } finally {
      await worker.stop();
    }
  });

  it('across processes, the completion notifies the run id only (never its outcome: any session may LISTEN), and the caller reads it', async () => {
    const sized = workflow({ name: 'sized', version: '1', input: z.object({ bytes: z.number().int(), fail: z.boolean() }) }, async (ctx, { bytes, fail }) => {
      const text = await ctx.step('make', () => 'x'.repeat(bytes));
      if (fail) throw new NonRetryableError(`refused ${text.length}`);
      return { text };
    });
    // The caller and the worker in two engines (two processes): the settlement must notify.
    const own = await engineOn(db, { workflows: [sized] });
    const workers = await engineOn(db, { workflows: [sized] });
    const listener = await db.pool.connect();
    const payloads: string[] = [];
    listener.on('notification', (n) => payloads.push(n.payload ?? ''));
    await listener.query('LISTEN ratchet_done');
    const worker = workers.worker({ concurrency: 2 });
    try {
      const small = await own.client.start(sized, { bytes: 100, fail: false });
      const large = await own.client.start(sized, { bytes: 10_000, fail: false });
      const failed = await own.client.start(sized, { bytes: 3, fail: true });
      const results = [small, large, failed].map((run) => run.result({ timeout: '20s' }).catch((e: unknown) => e));
      // Every caller is registered before any run settles (no registration, no notification).
      await eventually(async () => (await db.pool.query(`SELECT 1 FROM ratchet.tasks WHERE workflow_name = 'sized' AND awaited_by IS NOT NULL`)).rowCount === 3);
      await worker.start();
      const [smallOut, largeOut, error] = await Promise.all(results);
      expect(smallOut).toEqual({ text: 'x'.repeat(100) });
      expect(largeOut).toEqual({ text: 'x'.repeat(10_000) });
      expect(error).toMatchObject({ name: 'NonRetryableError', message: 'refused 3' });
      await new Promise((r) => setTimeout(r, 100));
      expect(payloads.sort()).toEqual([small.runId, large.runId, failed.runId].sort());
    } finally {
      await worker.stop();
      listener.release();
      await own.close();
      await workers.close();
    }
  });

  it('in one process, the start wakes the local worker and the outcome is handed over in memory: no NOTIFY at all', async () => {
    const local = workflow({ name: 'local', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('inc', () => n + 1));
    const own = await engineOn(db, { workflows: [local] });
    const listener = await db.pool.connect();
    const heard: string[] = [];
    listener.on('notification', (n) => heard.push(`${n.channel} ${n.payload}`));
    await listener.query('LISTEN ratchet_done');
    await listener.query('LISTEN ratchet_work');
    const worker = own.worker({ concurrency: 2, pollMs: 60_000 });
    await worker.start();
    try {
      expect(await own.client.execute(local, { n: 1 }, { timeout: '10s' })).toBe(2);
      const run = await own.client.start(local, { n: 2 });
      expect(await run.result({ timeout: '10s' })).toBe(3);
      const many = await Promise.all(Array.from({ length: 6 }, (_, i) => own.client.execute(local, { n: 10 + i }, { timeout: '10s' })));
      expect(many).toEqual([11, 12, 13, 14, 15, 16]);
      await new Promise((r) => setTimeout(r, 100));
      // Only starts that found both slots taken notified (other processes' workers may take those).
      expect(heard.filter((h) => h.startsWith('ratchet_done'))).toEqual([]);
      expect(heard.filter((h) => h.startsWith('ratchet_work')).length).toBeLessThanOrEqual(4);
    } finally {
      await worker.stop();
      listener.release();
      await own.close();
    }
  });

  it('client.execute starts and awaits in one call: the start registers the caller', async () => {
    const worker = engine.worker({ concurrency: 2 });
    await worker.start();
    try {
      const output = await engine.client.execute(order, { id: 30, items: ['a', 'b'] }, { idempotencyKey: 'exec-30', timeout: '20s' });
      expect(output).toMatchObject({ id: 30, total: 300 });
      const [row] = (await db.pool.query(`SELECT id, awaited_by FROM ratchet.tasks WHERE idempotency_key = 'exec-30'`)).rows;
      expect(row.awaited_by).toMatch(/^engine:/); // registered by the start itself
      // The same key again awaits the same run (already completed): its output, nothing executed again.
      const charges = () => Object.values(calls).reduce((a, b) => a + b, 0);
      const before = charges();
      expect(await engine.client.execute(order, { id: 30, items: ['a', 'b'] }, { idempotencyKey: 'exec-30' })).toEqual(output);
      expect(charges()).toBe(before);
      await expect(engine.client.execute(order, { id: 31, items: ['a'] }, { idempotencyKey: 'exec-30' })).rejects.toBeInstanceOf(IdempotencyConflictError);
    } finally {
      await worker.stop();
    }
  });

  it('client.execute refuses a bad timeout before writing, and times out while the run goes on', async () => {
    const count = async () => Number((await db.pool.query(`SELECT count(*) FROM ratchet.tasks WHERE idempotency_key LIKE 'exec-t%'`)).rows[0].count);
    const error = await engine.client.execute(order, { id: 40, items: ['a'] }, { idempotencyKey: 'exec-t1', timeout: 'soon' as '1s' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).path).toEqual(['timeout']);
    expect(await count()).toBe(0);
    // No worker running: the run stays pending and the caller gives up.
    const late = await engine.client.execute(order, { id: 41, items: ['a'] }, { idempotencyKey: 'exec-t2', timeout: 300 }).catch((e: unknown) => e);
    expect(isRatchetError(late, 'TIMEOUT')).toBe(true);
    expect(await count()).toBe(1);
  });

  it('starting twice with one key returns one run; other input is a conflict', async () => {
    const a = await engine.client.start(order, { id: 20, items: ['a'] }, { idempotencyKey: 'k-20' });
    const b = await engine.client.start(order, { id: 20, items: ['a'] }, { idempotencyKey: 'k-20' });
    expect(b.runId).toBe(a.runId);
    await expect(engine.client.start(order, { id: 21, items: ['a'] }, { idempotencyKey: 'k-20' })).rejects.toBeInstanceOf(IdempotencyConflictError);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE idempotency_key = 'k-20'`);
    expect(rows[0].n).toBe(1);
  });

  it('get() and list() are tenant-scoped', async () => {
    const tenant = '11111111-1111-4111-8111-111111111111';
    const run = await engine.client.start(order, { id: 30, items: ['a'] }, { tenantId: tenant });
    expect((await engine.client.get(run.runId, { tenantId: tenant })).state).toBe('pending');
    await expect(engine.client.get(run.runId)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    const listed = await engine.client.list({ tenantId: tenant });
    expect(listed.map((r) => r.runId)).toEqual([run.runId]);
  });
});

describe('step values and retries', () => {
  const shapes = workflow({ name: 'shapes', version: '1', input: z.object({}) }, async (ctx) => {
    const value = await ctx.step('value', () => ({ zeta: 1, a: new Date('2026-01-02T03:04:05.000Z'), nested: { bb: 2, a: [1, { y: 1, x: 2 }] } }));
    return { keys: Object.keys(value), nestedKeys: Object.keys(value.nested), a: value.a, inner: Object.keys(value.nested.a[1] as object) };
  });

  it('hands back the value exactly as replay will read it (JSON, jsonb key order)', async () => {
    const result = await engine.run(shapes, {});
    expect(result.output).toEqual({ keys: ['a', 'zeta', 'nested'], nestedKeys: ['a', 'bb'], a: '2026-01-02T03:04:05.000Z', inner: ['x', 'y'] });
  });

  it('a value JSON cannot carry fails the step with its path', async () => {
    const wf = workflow({ name: 'unjsonable', version: '1', input: z.object({}) }, async (ctx) => {
      try {
        await ctx.step('bad', () => ({ ok: 1, when: new Map([[1, 2]]) }));
        return 'no error';
      } catch (error) {
        return { code: (error as StepFailedError).code, cause: String(((error as StepFailedError).cause as Error).message) };
      }
    });
    const result = await engine.run(wf, {});
    expect(result.output).toMatchObject({ code: 'STEP_FAILED' });
    expect((result.output as { cause: string }).cause).toMatch(/result\.when/);
  });

  it('retries a failing step, records each attempt, and a NonRetryableError stops at once', async () => {
    let flaky = 0;
    let fatal = 0;
    const wf = workflow({ name: 'retries', version: '1', input: z.object({}), retry: { initial: '10ms', max: '20ms', maxAttempts: 4 } }, async (ctx) => {
      const a = await ctx.step('flaky', () => {
        flaky += 1;
        if (flaky < 3) throw new Error(`flake ${flaky}`);
        return flaky;
      });
      const b = await ctx
        .step('fatal', () => {
          fatal += 1;
          throw new NonRetryableError('card declined');
        })
        .catch((e: StepFailedError) => `${e.code}:${(e.cause as Error).message}`);
      return { a, b };
    });
    const result = await engine.run(wf, {});
    expect(result.output).toEqual({ a: 3, b: 'STEP_FAILED:card declined' });
    expect(fatal).toBe(1);
    const ops = await operations(db, result.runId);
    expect(ops.map((o) => [o.stepKey, o.state, o.attempt])).toEqual([
      ['flaky#1', 'succeeded', 3],
      ['fatal#1', 'failed', 1],
    ]);
  });

  it('exhausted retries fail the run with the StepFailedError stored', async () => {
    const wf = workflow({ name: 'exhausted', version: '1', input: z.object({}), retry: { initial: '5ms', max: '5ms', maxAttempts: 2 } }, async (ctx) => {
      await ctx.step('never', () => {
        throw new Error('nope');
      });
    });
    const result = await engine.run(wf, {});
    expect(result.state).toBe('failed');
    expect(result.error).toMatchObject({ code: 'STEP_FAILED' });
    expect((await events(db, result.runId)).map((e) => e.type)).toEqual(['started', 'failed']);
  });

  it('refuses two calls of one name in flight at once', async () => {
    const wf = workflow({ name: 'same-name', version: '1', input: z.object({}) }, async (ctx) => {
      const results = await Promise.allSettled([ctx.step('x', async () => 1), ctx.step('x', async () => 2)]);
      return results.map((r) => (r.status === 'fulfilled' ? r.value : (r.reason as ValidationError).code));
    });
    const result = await engine.run(wf, {});
    expect(result.output).toEqual([1, 'VALIDATION']);
  });

  it('a ctx call left un-awaited when the workflow returns fails the run', async () => {
    const wf = workflow({ name: 'unawaited', version: '1', input: z.object({}) }, async (ctx) => {
      void ctx.step('slow', () => new Promise((r) => setTimeout(() => r(1), 200)));
      return 'done';
    });
    const result = await engine.run(wf, {});
    expect(result.state).toBe('failed');
    expect(result.error).toMatchObject({ code: 'UNAWAITED_CALL' });
  });

  it('ctx.now(), random() and uuid() are deterministic facts', async () => {
    const wf = workflow({ name: 'det', version: '1', input: z.object({}) }, async (ctx) => {
      const t0 = ctx.now().toISOString();
      const r0 = ctx.random();
      await ctx.step('s', () => 1);
      return { t0, r0, t1: ctx.now().toISOString(), u: ctx.uuid() };
    });
    const result = await engine.run(wf, {});
    const out = result.output as { t0: string; t1: string; r0: number; u: string };
    const row = await task(db, result.runId);
    expect(out.t0).toBe(row.created_at.toISOString());
    const { rows } = await db.pool.query(`SELECT completed_at FROM ratchet.operations WHERE task_id = $1`, [result.runId]);
    expect(out.t1).toBe(rows[0].completed_at.toISOString());
    expect(out.u).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});
