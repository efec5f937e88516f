/**
 * Leases and fencing with real connections: two engines (two pools, as two processes would have)
 * racing for one run; a partitioned worker whose effect must not be started again before its
 * timeout; worker processes racing for many runs; the poison pill; a connection lost at COMMIT.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { claimTasks } from '../../packages/engine/src/store/leases.js';
import { engineOn, eventually, events, operations, shift, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { CommitLosingPool } from '../helpers/pools.js';
import { spawnWorker, type WorkerProcess } from '../helpers/processes.js';
import { PROVIDER_DDL, all, charge, findCharge, payment } from '../fixtures/workflows.js';

let db: TestDatabase;
let engine: Engine;
const processes: WorkerProcess[] = [];

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(PROVIDER_DDL);
  process.env.PROVIDER_URL = db.url;
  engine = await engineOn(db, { workflows: all });
});
afterEach(async () => {
  await Promise.all(processes.splice(0).map((p) => p.kill('SIGKILL')));
  await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
});

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('two workers racing for one run', () => {
  it('the stale worker’s write is rejected and it stops; the new owner completes the run', async () => {
    const held = gate();
    let executions = 0;
    const wf = workflow({ name: 'race', version: '1', input: z.object({}) }, async (ctx) => {
      const a = await ctx.step('slow', async () => {
        executions += 1;
        if (executions === 1) await held.wait; // worker A stalls here (a GC pause, a partition)
        return `by execution ${executions}`;
      });
      return a;
    });
    const engineA = await engineOn(db, { workflows: [wf], leaseMs: 60_000 });
    const engineB = await engineOn(db, { workflows: [wf], leaseMs: 60_000 });
    const run = await engineA.client.start(wf, {});
    const workerA = engineA.worker({ pollMs: 50 });
    await workerA.start();
    await eventually(async () => executions === 1);
    // A's lease runs out without A noticing (it renews only every 20 s): B may claim.
    await db.pool.query(`UPDATE ratchet.tasks SET lease_expires_at = ratchet.now() - interval '1s', due_at = ratchet.now() - interval '1s' WHERE id = $1`, [run.runId]);
    const workerB = engineB.worker({ pollMs: 50 });
    await workerB.start();
    expect(await run.result({ timeout: '10s' })).toBe('by execution 2');
    held.open(); // A wakes up and tries to record its result
    await eventually(async () => workerA.stats.lost === 1);
    const ops = await operations(db, run.runId);
    expect(ops.map((o) => [o.stepKey, o.result])).toEqual([['slow#1', 'by execution 2']]);
    const types = (await events(db, run.runId)).map((e) => e.type);
    expect(types).toEqual(['started', 'claimed', 'lease_reclaimed', 'completed']);
    await workerA.stop();
    await workerB.stop();
  });

  it('worker processes racing for many runs execute each exactly once', async () => {
    // All three processes up before the runs exist, so they really race (a slow start on a loaded
    // machine would otherwise let the first process take every run).
    for (let i = 0; i < 3; i += 1) processes.push(spawnWorker({ DATABASE_URL: db.url, PROVIDER_URL: db.url, LEASE_MS: '5000' }));
    await eventually(async () => processes.every((p) => p.output().includes('ready')), 60_000);
    const runs = await Promise.all(Array.from({ length: 30 }, (_, i) => engine.client.start(payment, { orderId: `race-${i}`, amount: i + 1 })));
    await Promise.all(runs.map((r) => r.result({ timeout: '60s' })));
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS keys, sum(n)::int AS attempts FROM (SELECT key, count(*) AS n FROM provider_attempts WHERE key = ANY($1) GROUP BY key) q`,
      [runs.map((r) => `${r.runId}:charge#1`)],
    );
    expect(rows[0]).toEqual({ keys: 30, attempts: 30 });
    const claims = await db.pool.query(
      `SELECT count(*)::int AS n FROM ratchet.events WHERE task_id = ANY($1) AND event_type IN ('claimed', 'lease_reclaimed')`,
      [runs.map((r) => r.runId)],
    );
    expect(claims.rows[0].n).toBe(30);
    const owners = await db.pool.query(`SELECT count(DISTINCT actor_id)::int AS n FROM ratchet.events WHERE task_id = ANY($1) AND event_type = 'claimed'`, [
      runs.map((r) => r.runId),
    ]);
    expect(owners.rows[0].n).toBeGreaterThan(1);
  });
});

describe('a lease lost in the middle of an effect', () => {
  it('is not executed again before its timeout; then reconcile decides', async () => {
    let partitioned = false;
    const started: { who: string; at: number }[] = [];
    const wf = workflow({ name: 'partition', version: '1', input: z.object({}) }, async (ctx) => {
      return ctx.effect('pay', {
        input: { amount: 5 },
        timeout: '3s',
        execute: async ({ idempotencyKey, signal }) => {
          started.push({ who: partitioned ? 'B' : 'A', at: Date.now() });
          if (!partitioned) {
            partitioned = true; // A loses the database from here on
            await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
          }
          return charge(idempotencyKey, 5);
        },
        reconcile: ({ idempotencyKey }) => findCharge(idempotencyKey),
      });
    });
    const engineA = await engineOn(db, {
      workflows: [wf],
      leaseMs: 1000,
      effectMargin: 300,
      faults: {
        duringLeaseRenewal: () => {
          if (partitioned) throw new Error('network partition');
        },
      },
    });
    const engineB = await engineOn(db, { workflows: [wf], leaseMs: 1000, effectMargin: 300 });
    const run = await engineA.client.start(wf, {});
    const workerA = engineA.worker({ pollMs: 50 });
    await workerA.start();
    await eventually(async () => started.length === 1);
    const reserved = (await db.pool.query(`SELECT reserved_at, deadline_at FROM ratchet.operations WHERE task_id = $1`, [run.runId])).rows[0];
    const workerB = engineB.worker({ pollMs: 50 });
    await workerB.start();
    // B claims once A's lease expires, finds the attempt possibly in flight, and suspends until deadline + margin.
    await eventually(async () => (await task(db, run.runId)).state === 'sleeping', 10_000);
    expect((await task(db, run.runId)).wake_at.getTime()).toBe(reserved.deadline_at.getTime() + 300);
    // A learns it lost the lease at its next renewal or write: wait for it rather than race it.
    await eventually(async () => workerA.stats.lost === 1); // A aborted its effect when it could not renew
    const output = await run.result({ timeout: '15s' });
    expect(output).toMatchObject({ amount: 5 });
    expect(started.map((s) => s.who)).toEqual(['A', 'B']);
    expect(started[1]!.at).toBeGreaterThanOrEqual(reserved.deadline_at.getTime());
    const op = (await operations(db, run.runId))[0]!;
    expect([op.state, op.attempt]).toEqual(['succeeded', 2]);
    await workerA.stop();
    await workerB.stop();
  });
});

describe('poison pill', () => {
  it('a run claimed over and over without progress is parked by the claim', async () => {
    const wf = workflow({ name: 'poison', version: '1', input: z.object({}) }, async () => 'never runs here');
    const run = await engine.client.start(wf, {});
    const claim = async (owner: string) =>
      (await claimTasks(db.pool, { names: ['poison'], versions: ['1'], limit: 1, owner, leaseMs: 1000, maxClaims: 3 })).tasks;
    for (let i = 1; i <= 3; i += 1) {
      const [claimed] = await claim(`crashing-worker-${i}`);
      expect(claimed!.state).toBe('running');
      await shift(db, 2_000); // the worker died: its lease expires
    }
    const [parked] = await claim('crashing-worker-4');
    expect(parked!.state).toBe('parked');
    const row = await task(db, run.runId);
    expect([row.state, row.due_at, row.lease_owner]).toEqual(['parked', null, null]);
    expect(row.error).toMatchObject({ code: 'POISON_PILL' });
    expect((await events(db, run.runId)).map((e) => e.type)).toEqual(['started', 'claimed', 'lease_reclaimed', 'lease_reclaimed', 'parked']);
    expect(await claim('crashing-worker-5')).toEqual([]);
  });
});

describe('the claim statement', () => {
  it('says whether a run has records, and when the next run is due', async () => {
    const wf = workflow({ name: 'claim-facts', version: '1', input: z.object({ n: z.number() }) }, async (ctx) => {
      await ctx.step('one', () => 1);
      await ctx.sleep('nap', '10s');
      return 'woke';
    });
    const own = await engineOn(db, { workflows: [wf] });
    const claim = (limit: number) =>
      claimTasks(db.pool, { names: ['claim-facts'], versions: ['1'], limit, owner: 'claim-test', leaseMs: 60_000, maxClaims: 10 });
    expect(await claim(1)).toEqual({ tasks: [], nextDueMs: null });
    const a = await own.client.start(wf, { n: 1 });
    await own.client.start(wf, { n: 2 });
    // Full: the other pending run is due now (the worker claims again when a slot frees).
    const full = await claim(1);
    expect(full.tasks.map((t) => [t.id, t.hasOperations])).toEqual([[a.runId, false]]);
    expect(full.nextDueMs).toBeLessThanOrEqual(0);
    // Not full: the other pending run was taken too; what is due next is the first one's lease expiry.
    const rest = await claim(5);
    expect(rest.tasks).toHaveLength(1);
    expect(rest.nextDueMs).toBeGreaterThan(50_000);
    expect(rest.nextDueMs).toBeLessThanOrEqual(60_000);
    // A run with records, asleep for 10 s: its claim says it has records; until then it is the next due.
    await db.pool.query(`UPDATE ratchet.tasks SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, due_at = ratchet.now() WHERE workflow_name = 'claim-facts'`);
    const worker = own.worker({ pollMs: 50 });
    await worker.start();
    await eventually(async () => (await own.client.list({ workflow: 'claim-facts' })).every((r) => r.state === 'sleeping'));
    await worker.stop();
    const asleep = await claim(5);
    expect(asleep.tasks).toEqual([]);
    expect(asleep.nextDueMs).toBeGreaterThan(5_000);
    expect(asleep.nextDueMs).toBeLessThanOrEqual(10_000);
    await shift(db, 10_000);
    const woken = await claim(5);
    expect(woken.tasks.map((t) => t.hasOperations)).toEqual([true, true]);
    expect(woken.nextDueMs).toBeNull();
    await own.close();
  });
});

describe('a connection lost at COMMIT', () => {
  it('repeats the checkpoint safely: one record, the step executed once', async () => {
    let executions = 0;
    const wf = workflow({ name: 'commit-lost', version: '1', input: z.object({}) }, async (ctx) => {
      const v = await ctx.step('once', async () => (executions += 1));
      const w = await ctx.step('twice', async () => v + 1);
      return { v, w };
    });
    // The statement commits in Postgres, then the client hears nothing back. A fresh step's
    // record: sent again, the plain insert meets its own row (unique violation).
    const pool = new CommitLosingPool({ connectionString: db.url, max: 5 }, 'ratchet_insert_operation');
    const lossy = await engineOn(db, { workflows: [wf] });
    const direct = await (await import('@ratchet/engine')).createEngine({ database: pool, workflows: [wf] });
    try {
      const result = await direct.run(wf, {});
      expect(pool.lost).toBe(1);
      expect(result).toMatchObject({ state: 'completed', output: { v: 1, w: 2 } });
      expect(executions).toBe(1);
      expect((await operations(db, result.runId)).map((o) => o.stepKey)).toEqual(['once#1', 'twice#1']);
    } finally {
      await direct.close();
      await pool.end();
      void lossy;
    }
  });
});

describe('worker.inFlight()', () => {
  it('says which run is stuck, in which ctx call, for how long', async () => {
    const held = gate();
    const wf = workflow({ name: 'stuck', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.step('quick', () => 1);
      await Promise.all([ctx.step('hangs', () => held.wait.then(() => 2)), ctx.sleep('nap', '1h')]);
      return 'done';
    });
    const own = await engineOn(db, { workflows: [wf] });
    const worker = own.worker({ pollMs: 50 });
    expect(worker.inFlight()).toEqual([]);
    const run = await own.client.start(wf, {});
    await worker.start();
    await eventually(async () => worker.inFlight()[0]?.calls.length === 2);
    await new Promise((r) => setTimeout(r, 30));
    const [described] = worker.inFlight();
    expect(described).toMatchObject({ runId: run.runId, workflow: 'stuck@1', phase: 'running', writing: null });
    expect(described!.forMs).toBeGreaterThanOrEqual(30);
    const calls = Object.fromEntries(described!.calls.map((c) => [c.stepKey, c]));
    expect(calls['hangs#1']).toMatchObject({ kind: 'step', durable: false });
    expect(calls['hangs#1']!.forMs).toBeGreaterThanOrEqual(30);
    expect(calls['nap#1']).toMatchObject({ kind: 'sleep', durable: true });
    held.open();
    // Released by the step, the run suspends on its sleep: nothing left in flight.
    await eventually(async () => worker.inFlight().length === 0);
    expect((await own.client.get(run.runId)).state).toBe('sleeping');
    await worker.stop();
    await own.close();
  });
});
