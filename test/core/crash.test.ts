/**
 * A worker process SIGKILLed at each phase of reserve → execute → record, and the run completes
 * on another worker with its effect executed exactly once per key (the provider honours keys and
 * reconcile finds an attempt whose record was lost) — counted at the provider.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '@ratchet/engine';
import { events, operations } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { providerWorld } from '../helpers/provider-world.js';
import { payment } from '../fixtures/workflows.js';

const world = providerWorld({}, { LEASE_MS: '1000', EFFECT_MARGIN_MS: '300' });
let db: TestDatabase;
let engine: Engine;
const worker = (faults?: string) => world.worker(faults);
beforeAll(() => {
  db = world.db;
  engine = world.engine;
});

describe.each([
  ['afterClaim', 0],
  ['afterReserveBeforeExecute', 0],
  ['afterExecuteBeforeRecord', 1],
  ['afterRecord', 1],
])('a worker SIGKILLed at %s', (point, attemptsBeforeCrash) => {
  it('leaves the run to another worker, which completes it with the charge made once', async () => {
    const run = await engine.client.start(payment, { orderId: `o-${point}`, amount: 42 });
    const doomed = worker(`${point}:kill`);
    expect(await doomed.exited).toBe('SIGKILL');
    const key = `${run.runId}:charge#1`;
    const before = await db.pool.query(`SELECT count(*)::int AS n FROM provider_attempts WHERE key = $1`, [key]);
    expect(before.rows[0].n).toBe(attemptsBeforeCrash);

    const survivor = worker();
    const output = (await run.result({ timeout: '30s' })) as { receipt: { amount: number }; preparedBy: number; confirmedBy: number };
    expect(output.receipt.amount).toBe(42);
    expect(output.confirmedBy).toBe(survivor.child.pid);

    const charges = await db.pool.query(`SELECT count(*)::int AS n FROM provider_charges WHERE key = $1`, [key]);
    const attempts = await db.pool.query(`SELECT count(*)::int AS n FROM provider_attempts WHERE key = $1`, [key]);
    expect(charges.rows[0].n).toBe(1);
    expect(attempts.rows[0].n).toBe(1); // reconcile found the lost attempt: never executed twice
    const ops = await operations(db, run.runId);
    expect(ops.map((o) => [o.stepKey, o.state])).toEqual([
      ['prepare#1', 'succeeded'],
      ['charge#1', 'succeeded'],
      ['confirm#1', 'succeeded'],
    ]);
    const types = (await events(db, run.runId)).map((e) => e.type);
    expect(types[0]).toBe('started');
    expect(types).toContain('lease_reclaimed');
    expect(types.at(-1)).toBe('completed');
    const seqs = (await events(db, run.runId)).map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1)); // contiguous
  });
});
