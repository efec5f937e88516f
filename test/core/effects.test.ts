/** Effects across runs and crashes: explicit keys, at-most-once parking and resolve, retries that survive a crash. */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IdempotencyConflictError, workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { eventually, events, operations, task } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { providerWorld } from '../helpers/provider-world.js';
import { charge, flaky, once } from '../fixtures/workflows.js';

const world = providerWorld({}, { LEASE_MS: '1000' });
let db: TestDatabase;
let engine: Engine;
const worker = (faults?: string) => world.worker(faults);
beforeAll(() => {
  db = world.db;
  engine = world.engine;
});

describe('an explicit idempotency key reused by another run', () => {
  const refund = workflow(
    { name: 'refund', version: '1', input: z.object({ order: z.string(), amount: z.number() }) },
    async (ctx, { order, amount }) => {
      try {
        return await ctx.effect('refund', {
          input: { order, amount },
          idempotencyKey: `refund:${order}`,
          execute: ({ idempotencyKey, input }) => charge(idempotencyKey, input.amount),
        });
      } catch (error) {
        return { refused: (error as IdempotencyConflictError).code };
      }
    },
  );

  it('returns the first outcome for the same input, without executing again', async () => {
    const first = await engine.run(refund, { order: 'A', amount: 10 });
    const second = await engine.run(refund, { order: 'A', amount: 10 });
    expect(second.output).toEqual(first.output);
    const attempts = await db.pool.query(`SELECT count(*)::int AS n FROM provider_attempts WHERE key = 'refund:A'`);
    expect(attempts.rows[0].n).toBe(1);
    const adopted = (await db.pool.query(`SELECT idempotency_key, provider_reference, state FROM ratchet.operations WHERE task_id = $1`, [second.runId])).rows[0];
    expect(adopted).toEqual({ idempotency_key: null, provider_reference: `idempotency-key-of:${first.runId}/refund#1`, state: 'succeeded' });
  });

  it('throws IdempotencyConflictError into the workflow for another input', async () => {
    await engine.run(refund, { order: 'B', amount: 10 });
    const conflicting = await engine.run(refund, { order: 'B', amount: 99 });
    expect(conflicting.output).toEqual({ refused: 'IDEMPOTENCY_CONFLICT' });
    const charges = await db.pool.query(`SELECT amount FROM provider_charges WHERE key = 'refund:B'`);
    expect(charges.rows).toEqual([{ amount: 10 }]);
  });
});

describe('at-most-once effects', () => {
  it('an attempt whose outcome was lost parks the run; client.resolve settles it and the run resumes', async () => {
    const run = await engine.client.start(once, { amount: 7 });
    const doomed = worker('afterReserveBeforeExecute:kill');
    expect(await doomed.exited).toBe('SIGKILL');
    worker();
    await eventually(async () => (await task(db, run.runId)).state === 'parked', 20_000);
    const parked = await task(db, run.runId);
    expect(parked.error).toMatchObject({ code: 'UNKNOWN_OUTCOME' });
    expect((await operations(db, run.runId)).map((o) => [o.stepKey, o.state])).toEqual([['wire#1', 'unknown']]);
    const attempts = await db.pool.query(`SELECT count(*)::int AS n FROM provider_attempts WHERE key = $1`, [`${run.runId}:wire#1`]);
    expect(attempts.rows[0].n).toBe(0); // never executed twice: here, not at all

    // The operator checked with the bank and completed the wire by hand: they record its outcome.
    await expect(engine.client.resolve(run.runId, 'nope#1', { result: 1 })).rejects.toMatchObject({ code: 'NOT_PARKED' });
    await engine.client.resolve(run.runId, 'wire#1', { result: { chargeId: 'manual', amount: 7 } });
    const output = await run.result({ timeout: '20s' });
    expect(output).toEqual({ receipt: { chargeId: 'manual', amount: 7 } });
    const types = (await events(db, run.runId)).map((e) => e.type);
    expect(types.slice(-4)).toEqual(['parked', 'resolved', 'claimed', 'completed']);
  });
});

describe('retries', () => {
  it('attempt counts survive a crash during a durable backoff', async () => {
    const run = await engine.client.start(flaky, {});
    const first = worker();
    // Attempt 1 fails; the 1.5 s backoff is durable: the run sleeps holding no worker.
    await eventually(async () => (await task(db, run.runId)).state === 'sleeping', 20_000);
    const op = (await operations(db, run.runId))[0]!;
    expect([op.state, op.attempt]).toEqual(['reserved', 1]);
    await first.kill('SIGKILL');
    worker();
    expect(await run.result({ timeout: '30s' })).toEqual({ attempts: 3 });
    const final = (await operations(db, run.runId))[0]!;
    expect([final.state, final.attempt]).toEqual(['succeeded', 3]);
    const calls = await db.pool.query(`SELECT count(*)::int AS n FROM provider_attempts WHERE key = $1`, [run.runId]);
    expect(calls.rows[0].n).toBe(3);
  });
});
