/**
 * Eager start (local.ts): a start that a worker of the same engine has a free slot for is claimed
 * by its own INSERT — leased to that worker, with the `claimed` event a claim would write — and
 * run at once, with no NOTIFY and no claim statement. Everything else takes the queue as before:
 * an older due run of the same workflow version waits (the claim takes it first), a keyed run
 * needs a slot of its key, a full worker has no slot to give.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine, RunHandle } from '@ratchet/engine';
import { engineOn, eventually, events, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { spawnWorker, type WorkerProcess } from '../helpers/processes.js';
import { PROVIDER_DDL, all } from '../fixtures/workflows.js';

let db: TestDatabase;

/** A gate each run of `gated` waits on, by name. */
const gates = new Map<string, { open: () => void; opened: Promise<void> }>();
function gate(name: string) {
  let entry = gates.get(name);
  if (!entry) {
    let open!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    gates.set(name, (entry = { open, opened }));
  }
  return entry;
}

/** A workflow of its own per test (runs a failed test leaves behind are no other test's business). */
let tests = 0;
function gatedWorkflow() {
  tests += 1;
  return workflow({ name: `gated-${tests}`, version: '1', input: z.object({ gate: z.string() }) }, async (ctx, { gate: name }) => {
    await ctx.step('wait', () => gate(name).opened.then(() => name));
    return ctx.step('done', () => `${name} done`);
  });
}

/** The `claimed` events of a run, with their payloads. */
async function claims(runId: string): Promise<{ actor: string; payload: Record<string, unknown> }[]> {
  const { rows } = await db.pool.query(`SELECT actor_id AS actor, payload FROM ratchet.events WHERE task_id = $1 AND event_type = 'claimed' ORDER BY seq`, [runId]);
  return rows;
}

/** Channels heard on a listening connection while `fn` runs. */
async function hearing(fn: () => Promise<void>): Promise<string[]> {
  const listener = await db.pool.connect();
  const heard: string[] = [];
  listener.on('notification', (n) => heard.push(n.channel));
  await listener.query('LISTEN ratchet_work');
  try {
    await fn();
    await new Promise((r) => setTimeout(r, 100));
    return heard;
  } finally {
    await listener.query('UNLISTEN *');
    listener.release();
  }
}

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(PROVIDER_DDL);
  process.env.PROVIDER_URL = db.url; // the provider reconcile asks, in this process
});

afterEach(() => {
  for (const entry of gates.values()) entry.open();
  gates.clear();
});

describe('eager start', () => {
  it('a local worker with a free slot takes the run in the start statement: started, claimed, completed; no NOTIFY', async () => {
    const gated = gatedWorkflow();
    const engine = await engineOn(db, { workflows: [gated] });
    // A poll far away: only the eager start (or a poke) can get these runs going.
    const worker = engine.worker({ concurrency: 2, pollMs: 60_000 });
    await worker.start();
    try {
      let output: unknown;
      const heard = await hearing(async () => {
        gate('a').open();
        output = await engine.client.execute(gated, { gate: 'a' }, { timeout: '10s' });
      });
      expect(output).toBe('a done');
      expect(heard).toEqual([]);
      const [row] = (await db.pool.query(`SELECT id, claim_count, state_version FROM ratchet.tasks WHERE workflow_name = $1 AND input->>'gate' = 'a'`, [gated.name])).rows;
      expect(row.state_version).toBe(3);
      expect((await events(db, row.id)).map((e) => [e.seq, e.type])).toEqual([[1, 'started'], [2, 'claimed'], [3, 'completed']]);
      expect(await claims(row.id)).toEqual([{ actor: worker.workerId, payload: { claims: 1, from: 'pending', eager: true } }]);
      expect(worker.stats).toMatchObject({ claimed: 1, completed: 1, active: 0 });
    } finally {
      await worker.stop();
    }
  });

  it('takes no more runs than the worker has slots; the rest wait in the queue and start as slots free', async () => {
    const gated = gatedWorkflow();
    const engine = await engineOn(db, { workflows: [gated] });
    const worker = engine.worker({ concurrency: 2, pollMs: 60_000 });
    await worker.start();
    const running = async () =>
      Number((await db.pool.query(`SELECT count(*) AS n FROM ratchet.tasks WHERE workflow_name = $1 AND state = 'running'`, [gated.name])).rows[0].n);
    try {
      // One after another: two slots, two eager starts; then a full worker, so two queued runs.
      const runs = [];
      for (const g of ['f1', 'f2', 'f3', 'f4']) runs.push(await engine.client.start(gated, { gate: g }));
      expect(await Promise.all(runs.map(async (r) => (await task(db, r.runId)).state))).toEqual(['running', 'running', 'pending', 'pending']);
      expect(await Promise.all(runs.slice(0, 2).map(async (r) => (await claims(r.runId))[0]!.payload))).toEqual([
        { claims: 1, from: 'pending', eager: true },
        { claims: 1, from: 'pending', eager: true },
      ]);
      // Each freed slot claims the next run at once (the poll is a minute away).
      for (const g of ['f1', 'f2', 'f3', 'f4']) gate(g).open();
      expect(await Promise.all(runs.map((r) => r.result({ timeout: '10s' })))).toEqual(['f1 done', 'f2 done', 'f3 done', 'f4 done']);
      for (const r of runs.slice(2)) expect(await claims(r.runId)).toMatchObject([{ payload: { claims: 1, from: 'pending' } }]);

      // All at once: eager reservations race the claims that the queued starts' NOTIFYs set off.
      // Whichever wins each slot, the worker never runs more than two.
      const burst = await Promise.all(['g1', 'g2', 'g3', 'g4', 'g5', 'g6'].map((g) => engine.client.start(gated, { gate: g })));
      await eventually(async () => worker.stats.active === 2);
      await new Promise((r) => setTimeout(r, 200));
      expect(await running()).toBe(2);
      // Free one slot at a time: the run holding it finishes, the next run takes it.
      const opened = new Set<string>();
      while (opened.size < burst.length) {
        const states = await Promise.all(burst.map(async (r) => (await task(db, r.runId)).state));
        expect(states.filter((st) => st === 'running').length, `after ${opened.size} finished`).toBeLessThanOrEqual(2);
        const next = burst.findIndex((_, n) => states[n] === 'running' && !opened.has(`g${n + 1}`));
        if (next < 0) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        opened.add(`g${next + 1}`);
        gate(`g${next + 1}`).open();
        await burst[next]!.result({ timeout: '10s' });
      }
      for (const g of ['g1', 'g2', 'g3', 'g4', 'g5', 'g6']) gate(g).open();
      expect(await Promise.all(burst.map((r) => r.result({ timeout: '10s' })))).toEqual(['g1 done', 'g2 done', 'g3 done', 'g4 done', 'g5 done', 'g6 done']);
      for (const r of burst) expect(await claims(r.runId)).toHaveLength(1);
    } finally {
      await worker.stop();
    }
  });

  it('a claim in flight holds the slots it asked for: an eager start meanwhile cannot push the worker past its concurrency', async () => {
    const gated = gatedWorkflow();
    const engine = await engineOn(db, { workflows: [gated] });
    const starter = await engineOn(db, { workflows: [gated] }); // no worker: its starts are queued
    const worker = engine.worker({ concurrency: 2, pollMs: 60_000 });
    await worker.start();
    const running = async () =>
      Number((await db.pool.query(`SELECT count(*) AS n FROM ratchet.tasks WHERE workflow_name = $1 AND state = 'running'`, [gated.name])).rows[0].n);
    // The claim reads ratchet.operations; an eager start does not. Held, the lock keeps the
    // claim that the queued starts set off in flight while the eager starts are tried.
    const holder = await db.pool.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE ratchet.operations IN ACCESS EXCLUSIVE MODE');
    let runs: RunHandle<string>[] = [];
    try {
      const queued = [await starter.client.start(gated, { gate: 'q1' }), await starter.client.start(gated, { gate: 'q2' })];
      await eventually(async () => {
        const { rows } = await db.pool.query(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'operations' AND NOT l.granted`,
        );
        return rows[0].n > 0;
      });
      // Higher priority than the queued runs: nothing older stands in their way.
      const urgent = [await engine.client.start(gated, { gate: 'u1' }, { priority: 10 }), await engine.client.start(gated, { gate: 'u2' }, { priority: 10 })];
      runs = [...queued, ...urgent];
      await holder.query('COMMIT');
      await eventually(async () => worker.stats.active === 2);
      await new Promise((r) => setTimeout(r, 200));
      expect(worker.stats.active).toBe(2);
      expect(await running()).toBe(2);
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      for (const g of ['q1', 'q2', 'u1', 'u2']) gate(g).open();
      await Promise.all(runs.map((r) => r.result({ timeout: '10s' })));
      await worker.stop();
    }
  });

  it('leaves the run in the queue when an older due run of the same version waits: the claim takes that one first', async () => {
    const gated = gatedWorkflow();
    const engine = await engineOn(db, { workflows: [gated] });
    const starter = await engineOn(db, { workflows: [gated] }); // no worker: its starts are queued
    const older = await starter.client.start(gated, { gate: 'older' });
    // The older run stays due but out of reach (a claim skips locked rows) while the new one starts.
    const holder = await db.pool.connect();
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM ratchet.tasks WHERE id = $1 FOR UPDATE`, [older.runId]);
    const worker = engine.worker({ concurrency: 2, pollMs: 60_000 });
    await worker.start();
    try {
      gate('newer').open();
      const newer = await engine.client.start(gated, { gate: 'newer' });
      expect(await newer.result({ timeout: '10s' })).toBe('newer done');
      expect((await claims(newer.runId))[0]!.payload).toEqual({ claims: 1, from: 'pending' }); // claimed, not eager
      await holder.query('COMMIT');
      gate('older').open();
      expect(await older.result({ timeout: '10s' })).toBe('older done');
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      await worker.stop();
    }
  });

  it('never takes a run with a concurrency key eagerly: the claim assigns its slot', async () => {
    const gated = gatedWorkflow();
    const engine = await engineOn(db, { workflows: [gated] });
    const worker = engine.worker({ concurrency: 2, pollMs: 60_000 });
    await worker.start();
    try {
      gate('keyed').open();
      const run = await engine.client.start(gated, { gate: 'keyed' }, { concurrencyKey: 'account-1' });
      expect(await run.result({ timeout: '10s' })).toBe('keyed done');
      expect((await claims(run.runId))[0]!.payload).toEqual({ claims: 1, from: 'pending' });
    } finally {
      await worker.stop();
    }
  });

  it('a start that finds its idempotency key taken gives the slot back', async () => {
    const gated = gatedWorkflow();
    const engine = await engineOn(db, { workflows: [gated] });
    const worker = engine.worker({ concurrency: 1, pollMs: 60_000 });
    await worker.start();
    try {
      gate('key').open();
      const first = await engine.client.start(gated, { gate: 'key' }, { idempotencyKey: 'k-1' });
      await first.result({ timeout: '10s' });
      for (let i = 0; i < 3; i += 1) expect((await engine.client.start(gated, { gate: 'key' }, { idempotencyKey: 'k-1' })).runId).toBe(first.runId);
      // The one slot is free again: the next start is still taken eagerly.
      gate('after').open();
      const next = await engine.client.start(gated, { gate: 'after' });
      expect(await next.result({ timeout: '10s' })).toBe('after done');
      expect((await claims(next.runId))[0]!.payload.eager).toBe(true);
    } finally {
      await worker.stop();
    }
  });
});

describe('eager start and a crash', () => {
  let doomed: WorkerProcess | undefined;
  afterEach(async () => {
    await doomed?.kill();
  });

  it('a process SIGKILLed while running a run it took eagerly: another worker reclaims it when the lease expires, the charge happens once', async () => {
    doomed = spawnWorker({
      DATABASE_URL: db.url,
      PROVIDER_URL: db.url,
      LEASE_MS: '1000',
      START: JSON.stringify({ workflow: 'payment', input: { orderId: 'eager-crash', amount: 7 } }),
      RATCHET_FAULTS: 'afterExecuteBeforeRecord:kill',
    });
    expect(await doomed.exited).toBe('SIGKILL');
    const runId = /started (\S+)/.exec(doomed.output())?.[1];
    expect(runId, doomed.output()).toBeDefined();
    const before = await claims(runId!);
    expect(before).toHaveLength(1);
    expect(before[0]!.payload.eager).toBe(true);

    const engine: Engine = await engineOn(db, { workflows: all, leaseMs: 1000, effectMargin: 300 });
    const worker = engine.worker({ pollMs: 50 });
    await worker.start();
    try {
      const output = await engine.client.handle(runId!).result({ timeout: '20s' });
      expect(output).toMatchObject({ receipt: { amount: 7 } });
      const types = (await events(db, runId!)).map((e) => e.type);
      expect(types[0]).toBe('started');
      expect(types[1]).toBe('claimed');
      expect(types).toContain('lease_reclaimed');
      expect(types.at(-1)).toBe('completed');
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM provider_charges WHERE key = $1`, [`${runId}:charge#1`]);
      expect(rows[0].n).toBe(1);
    } finally {
      await worker.stop();
    }
  });
});
