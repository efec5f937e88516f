/** Signals and waits, cancellation, child runs and timeouts: against a real Postgres and real workers. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CancelledError, StepFailedError, TimeoutError, ValidationError, isRatchetError, workflow } from '@ratchet/sdk';
import type { Engine, Worker } from '@ratchet/engine';
import { engineOn, eventually, events, operations, shift, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
let engine: Engine;
let worker: Worker;

const approval = workflow(
  {
    name: 'approval',
    version: '1',
    input: z.object({ id: z.number() }),
    signals: { approval: z.object({ ok: z.boolean(), by: z.string() }) },
  },
  async (ctx, { id }) => {
    const proposal = await ctx.step('propose', () => ({ id, amount: 42 }));
    try {
      const decision = await ctx.waitFor<{ ok: boolean; by: string }>('approval', { timeout: '1d' });
      return { proposal, decision, at: ctx.now().toISOString() };
    } catch (error) {
      if (isRatchetError(error, 'TIMEOUT')) return { proposal, decision: null, at: ctx.now().toISOString() };
      throw error;
    }
  },
);

const late = workflow({ name: 'late', version: '1', input: z.object({}) }, async (ctx) => {
  try {
    return { first: await ctx.waitFor('answer', { timeout: '1h' }) };
  } catch (error) {
    if (!isRatchetError(error, 'TIMEOUT')) throw error;
    return { late: await ctx.waitFor('answer') };
  }
});

const either = workflow({ name: 'either', version: '1', input: z.object({}) }, async (ctx) => {
  const first = await ctx.waitForAny('decide', { signals: ['approve', 'reject'] });
  const second = await ctx.waitFor('note');
  return { first, second };
});

const raced = workflow({ name: 'raced', version: '1', input: z.object({}) }, async (ctx) => {
  const winner = await Promise.race([
    ctx.waitFor('poke').then((p) => ({ kind: 'signal', p })),
    ctx.sleep('nap', '2h').then(() => ({ kind: 'sleep' })),
  ]);
  return winner;
});

const compensated: string[] = [];
const saga = workflow({ name: 'saga', version: '1', input: z.object({}) }, async (ctx) => {
  await ctx.step('reserve', () => 'reserved');
  try {
    await ctx.effect('ship', {
      input: {},
      timeout: '1m',
      execute: ({ signal }) =>
        new Promise((resolve, reject) => {
          const timer = setTimeout(() => resolve('shipped'), 60_000);
          signal.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(signal.reason);
          });
        }),
    });
    await ctx.step('after', () => 'not reached');
    return 'shipped';
  } finally {
    await ctx.step('release', () => {
      compensated.push(ctx.runId);
      return 'released';
    });
  }
});

const kid = workflow({ name: 'kid', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
  if (n < 0) throw new Error('negative');
  await ctx.waitFor('go');
  return n * 2;
});

const parent = workflow({ name: 'parent', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
  const doubled = await ctx.child('double', kid, { n });
  try {
    await ctx.child('bad', kid, { n: -1 });
  } catch (error) {
    return { doubled, failed: error instanceof StepFailedError ? error.message : String(error) };
  }
  return { doubled, failed: null };
});

const slow = workflow({ name: 'slow', version: '1', input: z.object({}), timeout: '2s' }, async (ctx) => {
  await ctx.sleep('forever', '1d');
  return 'woke';
});

const stepTimeout = workflow({ name: 'step-timeout', version: '1', input: z.object({}) }, async (ctx) => {
  try {
    await ctx.step('hang', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))), {
      timeout: '100ms',
      retry: { maxAttempts: 2, initial: 10 },
    });
    return 'done';
  } catch (error) {
    return (error as StepFailedError).message;
  }
});

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, { workflows: [approval, late, either, raced, saga, kid, parent, slow, stepTimeout] });
  worker = engine.worker({ concurrency: 8, pollMs: 200 });
  await worker.start();
});

afterAll(async () => {
  await worker.stop();
});

describe('signals', () => {
  it('a run waiting for a signal holds no worker, wakes on it, and replays the same payload', async () => {
    const run = await engine.client.start(approval, { id: 1 });
    await eventually(async () => (await task(db, run.runId)).state === 'waiting');
    const row = await task(db, run.runId);
    expect(row.lease_owner).toBeNull();
    expect(row.wake_at).not.toBeNull(); // the 1d timeout
    await engine.client.signal(run.runId, 'approval', { ok: true, by: 'ada' });
    const out = await run.result({ timeout: '20s' });
    expect(out).toMatchObject({ proposal: { id: 1, amount: 42 }, decision: { ok: true, by: 'ada' } });
    const types = (await events(db, run.runId)).map((e) => e.type);
    expect(types).toEqual(['started', 'claimed', 'waiting', 'signalled', 'completed']);
    const ops = await operations(db, run.runId);
    expect(ops.find((o) => o.stepKey === 'approval#1')).toMatchObject({ kind: 'wait', state: 'succeeded' });
  });

  it('a signal sent before the run reaches its wait is not lost', async () => {
    const run = await engine.client.start(approval, { id: 2 });
    await engine.client.signal(run.runId, 'approval', { ok: false, by: 'early' });
    expect(await run.result({ timeout: '20s' })).toMatchObject({ decision: { ok: false, by: 'early' } });
  });

  it('validates the payload against the declared schema at send time: ValidationError, nothing stored', async () => {
    const run = await engine.client.start(approval, { id: 3 });
    await expect(engine.client.signal(run.runId, 'approval', { ok: 'yes' })).rejects.toBeInstanceOf(ValidationError);
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.signals WHERE task_id = $1`, [run.runId]);
    expect(rows[0].n).toBe(0);
    await engine.client.signal(run.runId, 'approval', { ok: true, by: 'x' });
    await run.result({ timeout: '20s' });
    await expect(engine.client.signal(run.runId, 'approval', { ok: true, by: 'late' })).rejects.toMatchObject({ code: 'RUN_FINISHED' });
  });

  it('a signal retried with the same idempotency key is stored once', async () => {
    const run = await engine.client.start(either, {});
    const a = await engine.client.signal(run.runId, 'approve', 1, { idempotencyKey: 'hook-1' });
    const b = await engine.client.signal(run.runId, 'approve', 1, { idempotencyKey: 'hook-1' });
    expect(a.signalId).toBe(b.signalId);
    await engine.client.signal(run.runId, 'note', 'n');
    expect(await run.result({ timeout: '20s' })).toEqual({ first: { signal: 'approve', payload: 1 }, second: 'n' });
  });

  it('the timeout throws TimeoutError into the workflow, catchable, at the recorded target', async () => {
    const run = await engine.client.start(approval, { id: 4 });
    await eventually(async () => (await task(db, run.runId)).state === 'waiting');
    await shift(db, 86_400_000 + 1_000);
    const out = (await run.result({ timeout: '20s' })) as { decision: unknown; at: string };
    expect(out.decision).toBeNull();
    const ops = await operations(db, run.runId);
    expect(ops.find((o) => o.stepKey === 'approval#1')).toMatchObject({ state: 'failed' });
  });

  it('a signal after its wait timed out is queued for the next wait of that name', async () => {
    const run = await engine.client.start(late, {});
    await eventually(async () => (await task(db, run.runId)).state === 'waiting');
    await shift(db, 3_600_000 + 1_000);
    await eventually(async () => (await operations(db, run.runId)).some((o) => o.stepKey === 'answer#1' && o.state === 'failed'));
    await engine.client.signal(run.runId, 'answer', 42);
    expect(await run.result({ timeout: '20s' })).toEqual({ late: 42 });
  });

  it('Promise.race of a wait and a sleep: the signal wins, the sleep is left behind', async () => {
    const run = await engine.client.start(raced, {});
    await eventually(async () => (await task(db, run.runId)).state === 'waiting');
    await engine.client.signal(run.runId, 'poke', 'hi');
    expect(await run.result({ timeout: '20s' })).toEqual({ kind: 'signal', p: 'hi' });
  });

  it('bad arguments are ValidationErrors naming the field', async () => {
    const run = await engine.client.start(approval, { id: 5 });
    await expect(engine.client.signal('nope', 'approval', {})).rejects.toMatchObject({ code: 'VALIDATION', path: ['runId'] });
    await expect(engine.client.signal(run.runId, '', {})).rejects.toMatchObject({ code: 'VALIDATION', path: ['name'] });
    await expect(engine.client.signal(run.runId, 'x', { bad: 'a\u0000b' })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(engine.client.signal('0190a5f8-0000-7000-8000-000000000000', 'x', {})).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await engine.client.cancel(run.runId);
  });
});

describe('cancellation', () => {
  it('cancels a run no worker holds at once, with its event', async () => {
    const run = await engine.client.start(approval, { id: 10 });
    await eventually(async () => (await task(db, run.runId)).state === 'waiting');
    const result = await engine.client.cancel(run.runId);
    expect(result.cancelled).toEqual([run.runId]);
    await expect(run.result({ timeout: '5s' })).rejects.toBeInstanceOf(CancelledError);
    const row = await task(db, run.runId);
    expect(row).toMatchObject({ state: 'cancelled', due_at: null });
    expect((await events(db, run.runId)).at(-1)!.type).toBe('cancelled');
    // Idempotent on a finished run.
    expect(await engine.client.cancel(run.runId)).toEqual({ cancelled: [], requested: [] });
  });

  it('a running run sees CancelledError, its in-flight effect aborts, and finally may still run steps', async () => {
    const run = await engine.client.start(saga, {});
    await eventually(async () => (await operations(db, run.runId)).some((o) => o.stepKey === 'ship#1'));
    const result = await engine.client.cancel(run.runId);
    expect(result.requested).toEqual([run.runId]);
    await expect(run.result({ timeout: '20s' })).rejects.toBeInstanceOf(CancelledError);
    expect(compensated).toContain(run.runId);
    const ops = await operations(db, run.runId);
    expect(ops.map((o) => o.stepKey)).toContain('release#1');
    expect(ops.map((o) => o.stepKey)).not.toContain('after#1');
    expect((await task(db, run.runId)).state).toBe('cancelled');
  });
});

describe('child runs', () => {
  it('the parent waits without a worker slot, resumes when the child finishes, and sees a child failure as StepFailedError', async () => {
    const run = await engine.client.start(parent, { n: 21 });
    const child = await eventually(async () => {
      const { rows } = await db.pool.query(`SELECT id, state FROM ratchet.tasks WHERE parent_id = $1`, [run.runId]);
      return rows[0]?.state === 'waiting' ? rows[0] : undefined;
    });
    await eventually(async () => (await task(db, run.runId)).state === 'waiting');
    await engine.client.signal(child.id, 'go', null);
    const out = await run.result({ timeout: '20s' });
    expect(out).toMatchObject({ doubled: 42 });
    expect((out as { failed: string }).failed).toMatch(/negative/);
    const ops = await operations(db, run.runId);
    expect(ops.map((o) => [o.stepKey, o.kind, o.state])).toEqual([
      ['double#1', 'child', 'succeeded'],
      ['bad#1', 'child', 'failed'],
    ]);
    // The child's key makes the start idempotent: exactly one child per step.
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE parent_id = $1`, [run.runId]);
    expect(rows[0].n).toBe(2);
  });

  it('cancelling a parent cancels its children', async () => {
    const run = await engine.client.start(parent, { n: 1 });
    const child = await eventually(async () => {
      const { rows } = await db.pool.query(`SELECT id FROM ratchet.tasks WHERE parent_id = $1`, [run.runId]);
      return rows[0];
    });
    await eventually(async () => (await task(db, run.runId)).state === 'waiting' && (await task(db, child.id)).state === 'waiting');
    const result = await engine.client.cancel(run.runId);
    expect(result.cancelled.sort()).toEqual([run.runId, child.id].sort());
    expect((await task(db, child.id)).state).toBe('cancelled');
  });
});

describe('timeouts', () => {
  it('a run past its workflow deadline fails with TimeoutError, even while asleep', async () => {
    const run = await engine.client.start(slow, {});
    await eventually(async () => (await task(db, run.runId)).state === 'sleeping');
    const row = await task(db, run.runId);
    expect(row.due_at.getTime() - row.created_at.getTime()).toBeLessThan(60_000); // due at the deadline, not in a day
    await expect(run.result({ timeout: '20s' })).rejects.toBeInstanceOf(TimeoutError);
  });

  it('a step attempt past its timeout is aborted and retried, then fails', async () => {
    const run = await engine.client.start(stepTimeout, {});
    expect(await run.result({ timeout: '20s' })).toMatch(/hang#1 failed after 2 attempt/);
  });
});
