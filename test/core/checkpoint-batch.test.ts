/**
 * Step records of several runs gathered into one statement (store/operations.ts, CheckpointBatch):
 * records written in the same turn of the event loop go out together, each fenced by its own
 * run's lease; a statement that fails as a whole falls back to one statement per record, whose
 * rules then decide for each.
 */
import type pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow, type Workflow } from '@ratchet/sdk';
import { createEngine } from '@ratchet/engine';
import { claimTasks } from '../../packages/engine/src/store/leases.js';
import { writeOperationBatched, type OperationWrite } from '../../packages/engine/src/store/operations.js';
import { writeCheckpoint } from '../../packages/engine/src/runtime/checkpoint.js';
import type { Fence } from '../../packages/engine/src/store/rows.js';
import { uuidv7 } from '../../packages/engine/src/ids.js';
import { engineOn, operations, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { CommitLosingPool, observedPool } from '../helpers/pools.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});

let names = 0;
function fiveSteps(): Workflow<{ n: number }, number> {
  names += 1;
  return workflow({ name: `batch-${names}`, version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
    let last = n;
    for (let i = 1; i <= 5; i += 1) last = await ctx.step(`s${i}`, () => last + 1);
    return last;
  });
}

/** `count` runs of `wf`, started and claimed by `owner`: their fences. */
async function leased(wf: Workflow<{ n: number }, number>, count: number, owner: string): Promise<Fence[]> {
  const engine = await engineOn(db, { workflows: [wf] });
  for (let n = 0; n < count; n += 1) await engine.client.start(wf, { n });
  const { tasks } = await claimTasks(db.pool, { names: [wf.name], versions: ['1'], limit: count, owner, leaseMs: 60_000, maxClaims: 10 });
  return tasks.map((t) => ({ tenantId: t.tenantId, taskId: t.id, owner, stateVersion: t.stateVersion }));
}

function record(stepKey: string, result: unknown): OperationWrite {
  return {
    id: uuidv7(),
    stepName: stepKey,
    stepKey,
    seq: 1,
    kind: 'step',
    idempotencyKey: null,
    inputHash: null,
    state: 'succeeded',
    attempt: 1,
    expectedAttempt: null,
    inFlight: false,
    deadlineInMs: null,
    result,
    traceId: null,
    spanId: null,
  };
}

/** Counts the engine's batched and single checkpoint statements on a pool of its own. */
function countingPool(): { pool: pg.Pool; counts: Map<string, number> } {
  const counts = new Map<string, number>();
  const pool = observedPool(db.url, (name) => void counts.set(name, (counts.get(name) ?? 0) + 1), 20);
  return { pool, counts };
}

describe('step records gathered into one statement', () => {
  it('writes the records of one turn of the event loop together, each fenced by its own lease', async () => {
    const wf = fiveSteps();
    const [a, b, c] = await leased(wf, 3, 'batch-owner');
    // c's lease moved on (another worker re-claimed it): its record must not land.
    const stale = { ...c!, stateVersion: c!.stateVersion - 1 };
    const { pool, counts } = countingPool();
    try {
      const written = await Promise.all([
        writeOperationBatched(pool, a!, record('one', { a: 1 })),
        writeOperationBatched(pool, b!, record('one', null)),
        writeOperationBatched(pool, stale, record('one', 'lost')),
      ]);
      expect(counts.get('ratchet_insert_operations')).toBe(1);
      expect(counts.get('ratchet_insert_operation')).toBeUndefined();
      expect(written.map((w) => w !== null)).toEqual([true, true, false]);
      expect(written[0]!.completedAt).toBeInstanceOf(Date);
      expect((await operations(db, a!.taskId)).map((o) => [o.stepKey, o.state, o.result])).toEqual([['one', 'succeeded', { a: 1 }]]);
      expect((await operations(db, b!.taskId)).map((o) => o.result)).toEqual([null]);
      expect(await operations(db, c!.taskId)).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('falls back to one statement per record when the whole fails: a record already there is "nothing written", the others land', async () => {
    const wf = fiveSteps();
    const [a, b] = await leased(wf, 2, 'fallback-owner');
    const { pool, counts } = countingPool();
    try {
      // a's step is already recorded (the repeat of a statement whose COMMIT's outcome was lost).
      const first = record('one', 1);
      expect(await writeOperationBatched(pool, a!, first)).not.toBeNull();
      const written = await Promise.all([writeOperationBatched(pool, a!, first), writeOperationBatched(pool, b!, record('one', 2))]);
      expect(counts.get('ratchet_insert_operations')).toBe(1);
      expect(written.map((w) => w !== null)).toEqual([false, true]);
      expect((await operations(db, a!.taskId)).map((o) => o.result)).toEqual([1]);
      expect((await operations(db, b!.taskId)).map((o) => o.result)).toEqual([2]);
    } finally {
      await pool.end();
    }
  });

  it('a connection lost at the COMMIT of a gathered statement: each record is sent again alone and found written', async () => {
    const wf = fiveSteps();
    const fences = await leased(wf, 3, 'lossy-owner');
    // The gathered statement commits in Postgres, then the client hears nothing back.
    const pool = new CommitLosingPool({ connectionString: db.url, max: 10 }, 'ratchet_insert_operations');
    try {
      const records = fences.map((_, i) => record('one', i));
      const written = await Promise.all(fences.map((fence, i) => writeCheckpoint(pool, fence, records[i]!, undefined)));
      expect(pool.lost).toBe(1);
      expect(written.map((w) => (w === 'lost' ? w : w.id))).toEqual(records.map((r) => r.id));
      for (const [i, fence] of fences.entries()) expect((await operations(db, fence.taskId)).map((o) => o.result)).toEqual([i]);
    } finally {
      await pool.end();
    }
  });

  it('runs in flight on one worker share statements: 20 runs × 5 steps in far fewer than 100 checkpoints, every step once', async () => {
    const wf = fiveSteps();
    const { pool, counts } = countingPool();
    const engine = await createEngine({ database: pool, workflows: [wf] });
    try {
      const results = (await Promise.all(Array.from({ length: 20 }, (_, n) => engine.run(wf, { n })))).map((r) => r.output);
      expect(results).toEqual(Array.from({ length: 20 }, (_, n) => n + 5));
      // Four checkpoints per run (the fifth step is recorded by the settlement), gathered.
      const statements = (counts.get('ratchet_insert_operations') ?? 0) + (counts.get('ratchet_insert_operation') ?? 0);
      expect(statements).toBeLessThan(80);
      const { rows } = await db.pool.query(
        `SELECT count(*)::int AS records, count(DISTINCT (task_id, step_key))::int AS steps FROM ratchet.operations o JOIN ratchet.tasks t ON t.id = o.task_id WHERE t.workflow_name = $1`,
        [wf.name],
      );
      expect(rows[0]).toEqual({ records: 100, steps: 100 });
    } finally {
      await engine.close();
      await pool.end();
    }
  });
});
