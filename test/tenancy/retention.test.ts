/**
 * engine.retention: finished runs older than the cutoff go with every row they own, and nothing
 * else does (not live runs in any state, not recent runs, not other tenants when scoped); their
 * keys stay as tombstones that a late retry, an explicit effect key and a contract key meet;
 * tombstones expire; a job SIGKILLed mid-batch resumes; concurrent jobs and locked rows never
 * block, double count or deadlock. Time moves with the shifted database clock, not by waiting.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  defineAction,
  IdempotencyConflictError,
  isRatchetError,
  NonRetryableError,
  workflow,
  type RunExpiredError,
} from '@ratchet/sdk';
import { DEFAULT_TENANT_ID, type Engine, type RetentionProgress, type Worker } from '@ratchet/engine';
import { engineOn, eventually, shift, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

const A = DEFAULT_TENANT_ID;
const B = '0190a5f8-0000-7000-8000-00000000b0b0';
const C = '0190a5f8-0000-7000-8000-00000000c0c0';
const D = '0190a5f8-0000-7000-8000-00000000d0d0';
const E = '0190a5f8-0000-7000-8000-00000000e0e0';
const DAY = 86_400_000;

let executed = 0;
const order = workflow(
  { name: 'order', version: '1', input: z.object({ n: z.number(), chargeKey: z.string().optional() }) },
  async (ctx, { n, chargeKey }) => {
    const charged = await ctx.effect('charge', {
      input: { n },
      ...(chargeKey ? { idempotencyKey: chargeKey } : {}),
      execute: async () => {
        executed += 1;
        return { charged: n };
      },
    });
    await ctx.emit('orders', { n });
    return charged;
  },
);
const failing = workflow({ name: 'failing', version: '1', input: z.object({}) }, async (ctx) =>
  ctx.step('boom', () => {
    throw new NonRetryableError('no');
  }),
);
const waiter = workflow({ name: 'waiter', version: '1', input: z.object({ n: z.number() }) }, async (ctx) => ctx.waitFor('go'));
const sleeper = workflow({ name: 'sleeper', version: '1', input: z.object({}) }, async (ctx) => {
  await ctx.sleep('nap', '365d');
  return 'woke';
});
const kid = workflow({ name: 'kid', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('double', () => n * 2));
const parent = workflow({ name: 'parent', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.child('kid', kid, { n }));
const noop = defineAction({ name: 'noop', input: z.object({ n: z.number() }), run: async (_tx, input) => input });
const agent = workflow({ name: 'agent', version: '1', input: z.object({ n: z.number(), contractKey: z.string() }) }, async (ctx, { n, contractKey }) => {
  const contract = await ctx.seal('decide', { operations: [{ action: 'noop', input: { n } }], idempotencyKey: contractKey });
  return ctx.commit(contract);
});
const quick = workflow({ name: 'quick', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('n', () => n));
// Never served by a worker: its runs stay pending (or are parked by hand below).
const unserved = workflow({ name: 'unserved', version: '1', input: z.object({}) }, async () => 'never');
// Executed inline by a second engine, held inside a step: a running run with a live lease.
let release: () => void = () => {};
const gate = new Promise<void>((resolve) => (release = resolve));
const blocker = workflow({ name: 'blocker', version: '1', input: z.object({}) }, async (ctx) => ctx.step('hold', () => gate.then(() => 'released')));

let db: TestDatabase;
let engine: Engine;
let inline: Engine;
let worker: Worker;

const TABLES = ['operations', 'events', 'outbox', 'signals', 'contracts'] as const;

/** Rows of the given runs in every table a run owns. */
async function rowsOf(ids: string[]): Promise<Record<(typeof TABLES)[number] | 'tasks', number>> {
  const out = { tasks: 0 } as Record<(typeof TABLES)[number] | 'tasks', number>;
  out.tasks = (await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE id = ANY($1::uuid[])`, [ids])).rows[0].n;
  for (const table of TABLES) {
    out[table] = (await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.${table} WHERE task_id = ANY($1::uuid[])`, [ids])).rows[0].n;
  }
  return out;
}

async function states(ids: string[]): Promise<Record<string, string>> {
  const { rows } = await db.pool.query(`SELECT id, state FROM ratchet.tasks WHERE id = ANY($1::uuid[])`, [ids]);
  return Object.fromEntries(rows.map((r) => [r.id, r.state]));
}

async function tombstones(): Promise<{ tenantId: string; scope: string; key: string; runId: string; outcome: string; expiresAt: Date }[]> {
  const { rows } = await db.pool.query(
    `SELECT tenant_id AS "tenantId", scope, key, run_id AS "runId", outcome, expires_at AS "expiresAt" FROM ratchet.idempotency_keys ORDER BY scope, key`,
  );
  return rows;
}

async function settled(runId: string, tenantId?: string): Promise<string> {
  return eventually(async () => {
    const info = await engine.client.get(runId, tenantId ? { tenantId } : {});
    return ['completed', 'failed', 'cancelled'].includes(info.state) && info.state;
  });
}

async function completedRuns(tenantId: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i += 1) ids.push((await engine.run(quick, { n: i }, { tenantId, idempotencyKey: `q-${i}` })).runId);
  return ids;
}

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, { workflows: [order, failing, waiter, sleeper, kid, parent, agent, quick], actions: [noop], leaseMs: 2_000 });
  inline = await engineOn(db, { workflows: [blocker], leaseMs: 2_000 });
  worker = engine.worker({ concurrency: 4, pollMs: 50 });
  await worker.start();
});

afterAll(async () => {
  release();
  await worker?.stop();
});

describe('retention', () => {
  const old = {} as Record<'completed' | 'failed' | 'signalled' | 'cancelled' | 'contract' | 'parent' | 'child', string>;
  const live = {} as Record<'sleeping' | 'waiting' | 'pending' | 'parked' | 'running', string>;
  let recent = '';
  let blocked: Promise<unknown> = Promise.resolve();

  it('removes exactly the finished runs past the cutoff, with every row they own, and nothing else', async () => {
    // Finished long ago (they will be 31 days old): every final state and every table a run owns.
    old.completed = (await engine.run(order, { n: 1, chargeKey: 'charge-1' }, { idempotencyKey: 'order-1' })).runId;
    old.failed = (await engine.run(failing, {})).runId;
    old.signalled = (await engine.run(waiter, { n: 1 })).runId;
    await engine.client.signal(old.signalled, 'go', { ok: true });
    old.cancelled = (await engine.run(waiter, { n: 2 })).runId;
    await engine.client.cancel(old.cancelled);
    old.contract = (await engine.run(agent, { n: 1, contractKey: 'contract-1' })).runId;
    old.parent = (await engine.run(parent, { n: 3 })).runId;
    for (const id of Object.values(old)) await settled(id);
    old.child = (await db.pool.query(`SELECT id FROM ratchet.tasks WHERE parent_id = $1`, [old.parent])).rows[0].id;
    const otherTenant = (await engine.run(order, { n: 1, chargeKey: 'charge-1' }, { tenantId: B, idempotencyKey: 'order-1' })).runId;
    expect(await settled(otherTenant, B)).toBe('completed');

    // Live, in every state that is not final.
    live.sleeping = (await engine.run(sleeper, {})).runId;
    live.waiting = (await engine.run(waiter, { n: 3 })).runId;
    live.pending = (await engine.client.start(unserved, {})).runId;
    live.parked = (await engine.client.start(unserved, {}, { idempotencyKey: 'to-park' })).runId;
    await db.pool.query(`UPDATE ratchet.tasks SET state = 'parked', due_at = NULL WHERE id = $1`, [live.parked]);
    blocked = inline.run(blocker, {});
    live.running = await eventually(async () => (await db.pool.query(`SELECT id FROM ratchet.tasks WHERE workflow_name = 'blocker' AND state = 'running'`)).rows[0]?.id);

    const oldIds = Object.values(old);
    const before = await rowsOf(oldIds);
    expect(before.tasks).toBe(oldIds.length);
    for (const table of TABLES) expect(before[table], table).toBeGreaterThan(0);
    expect(await states(Object.values(live))).toEqual({
      [live.sleeping]: 'sleeping', [live.waiting]: 'waiting', [live.pending]: 'pending', [live.parked]: 'parked', [live.running]: 'running',
    });

    await shift(db, 31 * DAY);
    recent = (await engine.run(order, { n: 2 }, { idempotencyKey: 'order-2' })).runId;
    const untouched = [recent, otherTenant, ...Object.values(live)];
    const untouchedBefore = await rowsOf(untouched);
    const liveBefore = await rowsOf([recent, ...Object.values(live)]);

    // Scoped to the default tenant first: tenant B's equally old run stays.
    const progress: RetentionProgress[] = [];
    const report = await engine.retention.run({ olderThan: '30d', keepKeysFor: '90d', batchSize: 2, tenantId: A, onProgress: (p) => progress.push(p) });
    expect(report.removed).toMatchObject({ runs: oldIds.length, ...Object.fromEntries(TABLES.map((t) => [t, before[t]])) });
    expect(report.stopped).toBe(false);
    expect(await rowsOf(oldIds)).toEqual({ tasks: 0, operations: 0, events: 0, outbox: 0, signals: 0, contracts: 0 });
    expect(await rowsOf(untouched)).toEqual(untouchedBefore);
    expect(await states(Object.values(live))).toMatchObject({ [live.sleeping]: 'sleeping', [live.waiting]: 'waiting', [live.pending]: 'pending', [live.parked]: 'parked' });

    // Progress: one report per batch, totals growing to the job's size; the child went before its parent.
    const runBatches = progress.filter((p) => p.phase === 'runs');
    expect(runBatches.length).toBeGreaterThanOrEqual(Math.ceil(oldIds.length / 2));
    expect(runBatches.map((p) => p.batch)).toEqual(runBatches.map((_, i) => i + 1));
    expect(runBatches.at(-1)!.removed.runs).toBe(oldIds.length);
    expect(runBatches.every((p) => p.total === oldIds.length && p.batchRemoved.runs <= 2)).toBe(true);

    // Tombstones: the run keys (the child's default key too), the explicit effect key, the explicit contract key.
    const kept = await tombstones();
    const byScope = (x: (string | undefined)[], y: (string | undefined)[]) => `${x[1]} ${x[2]}`.localeCompare(`${y[1]} ${y[2]}`);
    expect(kept.map((k) => [k.tenantId, k.scope, k.key, k.runId, k.outcome]).sort(byScope)).toEqual(
      [
        [A, 'contract', 'contract-1', old.contract, 'committed'],
        [A, 'effect', 'charge-1', old.completed, 'succeeded'],
        [A, 'run:kid', `${old.parent}:kid#1`, old.child, 'completed'],
        [A, 'run:order', 'order-1', old.completed, 'completed'],
      ].sort(byScope),
    );
    const now = (await db.pool.query(`SELECT ratchet.now() AS now`)).rows[0].now as Date;
    for (const k of kept) expect(Math.abs(k.expiresAt.getTime() - (now.getTime() + 90 * DAY))).toBeLessThan(60_000);

    // Unscoped: now tenant B's old run goes too, and nothing else.
    const second = await engine.retention.run({ olderThan: '30d', keepKeysFor: '90d' });
    expect(second.removed.runs).toBe(1);
    expect(await rowsOf([otherTenant])).toEqual({ tasks: 0, operations: 0, events: 0, outbox: 0, signals: 0, contracts: 0 });
    expect(await rowsOf([recent, ...Object.values(live)])).toEqual(liveBefore);
    expect((await tombstones()).filter((k) => k.tenantId === B).map((k) => k.key).sort()).toEqual(['charge-1', 'order-1']);

    release();
    await blocked;
    expect((await states([live.running]))[live.running]).toBe('completed');
  });

  it('refuses keepKeysFor shorter than the run retention, and other bad options, before removing anything', async () => {
    await expect(engine.retention.run({ olderThan: '30d', keepKeysFor: '7d' })).rejects.toMatchObject({ code: 'VALIDATION', path: ['keepKeysFor'] });
    await expect(engine.retention.run({ olderThan: '30d', finishedBefore: new Date() })).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(engine.retention.run({ batchSize: 0 })).rejects.toMatchObject({ code: 'VALIDATION', path: ['batchSize'] });
    await expect(engine.retention.run({ tenantId: 'nope' })).rejects.toMatchObject({ code: 'VALIDATION', path: ['tenantId'] });
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE id = $1`, [recent])).rows[0].n).toBe(1);
  });

  it('recognises a late retry of a removed run: same input → its id and RUN_EXPIRED with the outcome; other input → conflict', async () => {
    const handle = await engine.client.start(order, { n: 1, chargeKey: 'charge-1' }, { idempotencyKey: 'order-1' });
    expect(handle.runId).toBe(old.completed);
    const error = (await handle.result().catch((e: unknown) => e)) as RunExpiredError;
    expect(isRatchetError(error, 'RUN_EXPIRED')).toBe(true);
    expect(error).toMatchObject({ runId: old.completed, key: 'order-1', outcome: 'completed' });
    expect(error.message).toMatch(/removed by retention/);
    await expect(handle.status()).rejects.toMatchObject({ code: 'RUN_EXPIRED', outcome: 'completed' });
    // The direct path says the same, and executes nothing.
    const before = executed;
    await expect(engine.run(order, { n: 1, chargeKey: 'charge-1' }, { idempotencyKey: 'order-1' })).rejects.toMatchObject({ code: 'RUN_EXPIRED', runId: old.completed });
    expect(executed).toBe(before);
    // Other input: the same conflict as while the run existed.
    await expect(engine.client.start(order, { n: 2 }, { idempotencyKey: 'order-1' })).rejects.toBeInstanceOf(IdempotencyConflictError);
    await expect(engine.run(order, { n: 2 }, { idempotencyKey: 'order-1' })).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT' });
    // No run was inserted for any of these attempts.
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE idempotency_key = 'order-1' AND tenant_id = $1`, [A])).rows[0].n).toBe(0);
    // A child key's tombstone holds for its scope only; keys of other workflows and keyless starts are not affected.
    const fresh = await engine.run(quick, { n: 7 }, { idempotencyKey: 'order-1' });
    expect(fresh.state).toBe('completed');
    expect((await engine.run(quick, { n: 8 })).state).toBe('completed');
  });

  it('fails, without executing it, an effect whose explicit key belonged to a removed run; and a contract key likewise', async () => {
    const before = executed;
    const same = await engine.run(order, { n: 1, chargeKey: 'charge-1' });
    expect(same.state).toBe('failed');
    expect(executed).toBe(before);
    expect(same.error).toMatchObject({ code: 'KEY_EXPIRED', data: { key: 'charge-1', scope: 'effect', outcome: 'succeeded', heldByRunId: old.completed } });
    // A retry of that key now meets this failed record on the live index: the same outcome, still not executed.
    const again = await engine.run(order, { n: 1, chargeKey: 'charge-1' });
    expect(again.error).toMatchObject({ code: 'KEY_EXPIRED' });
    expect(executed).toBe(before);

    const other = await engine.run(order, { n: 5, chargeKey: 'charge-1' }, { tenantId: B });
    expect(other.state).toBe('failed');
    expect(other.error).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', data: { key: 'charge-1' } });
    expect(executed).toBe(before);

    const sealed = await engine.run(agent, { n: 2, contractKey: 'contract-1' });
    expect(sealed.state).toBe('failed');
    expect(sealed.error).toMatchObject({ code: 'KEY_EXPIRED', data: { key: 'contract-1', scope: 'contract', outcome: 'committed', heldByRunId: old.contract } });
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.contracts WHERE idempotency_key = 'contract-1'`)).rows[0].n).toBe(0);
  });

  it('forgets a key when its tombstone expires: the retry then starts anew, and expired tombstones are purged', async () => {
    await shift(db, 91 * DAY);
    // Expired but not yet purged: already ignored by every reader.
    const reborn = await engine.run(order, { n: 1, chargeKey: 'charge-1-new' }, { idempotencyKey: 'order-1' });
    expect(reborn.state).toBe('completed');
    expect(reborn.runId).not.toBe(old.completed);

    const expired = (await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.idempotency_keys WHERE expires_at <= ratchet.now()`)).rows[0].n;
    expect(expired).toBeGreaterThanOrEqual(6);
    const report = await engine.retention.run({ olderThan: '365d', batchSize: 2 });
    expect(report.removed.expiredKeys).toBe(expired);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.idempotency_keys WHERE expires_at <= ratchet.now()`)).rows[0].n).toBe(0);
  });

  it('resumes after a retention process is SIGKILLed with a batch open: nothing half-removed, nothing counted twice', async () => {
    const ids = await completedRuns(C, 10);
    const perRun = (await rowsOf(ids)).events / 10;
    await shift(db, 31 * DAY);
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('./retention-process.ts', import.meta.url))], {
      cwd: fileURLToPath(new URL('../..', import.meta.url)),
      env: { ...process.env, DATABASE_URL: db.url, TENANT: C, BATCH: '2', RATCHET_FAULTS: 'retentionBeforeCommit:kill@3' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const exit = await new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
    expect(exit, output).toBe('SIGKILL');
    expect(output).toContain('batch 2 4');
    expect(output).not.toContain('done');

    // Two batches committed, the third rolled back whole: 6 runs left, each with all its rows.
    const left = Object.keys(await states(ids));
    expect(left).toHaveLength(6);
    const rows = await rowsOf(left);
    expect(rows.events).toBe(6 * perRun);
    expect(rows.operations).toBe(6);
    const keys = (await tombstones()).filter((k) => k.tenantId === C);
    expect(keys.map((k) => k.runId).sort()).toEqual(ids.filter((id) => !left.includes(id)).sort());

    // Run again: it finishes the job, counting only what it removed.
    const report = await engine.retention.run({ olderThan: '30d', tenantId: C, batchSize: 2 });
    expect(report.removed.runs).toBe(6);
    expect(report.removed.tombstones).toBe(6);
    expect(await rowsOf(ids)).toEqual({ tasks: 0, operations: 0, events: 0, outbox: 0, signals: 0, contracts: 0 });
    expect((await tombstones()).filter((k) => k.tenantId === C)).toHaveLength(10);
  });

  it('concurrent jobs split the work without double counting or deadlock, beside live workers and a locked row', async () => {
    const ids = await completedRuns(D, 40);
    const perRun = (await rowsOf(ids)).events / 40;
    await shift(db, 31 * DAY);
    // A live transaction holds one finished run's row: retention skips it instead of waiting.
    const holder = await db.pool.connect();
    await holder.query('BEGIN');
    const heldId = ids[0]!;
    await holder.query(`SELECT 1 FROM ratchet.tasks WHERE id = $1 FOR UPDATE`, [heldId]);
    // Live work meanwhile: runs of the same tenant start and complete while the jobs run.
    const liveRuns = Promise.all(Array.from({ length: 8 }, (_, i) => engine.client.start(quick, { n: i }, { tenantId: D }).then((h) => h.result({ timeout: '20s' }))));
    const started = Date.now();
    const [x, y, z] = await Promise.all([
      engine.retention.run({ olderThan: '30d', tenantId: D, batchSize: 3 }),
      engine.retention.run({ olderThan: '30d', tenantId: D, batchSize: 3 }),
      engine.retention.run({ olderThan: '30d', tenantId: D, batchSize: 5 }),
    ]);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(x.removed.runs + y.removed.runs + z.removed.runs).toBe(39);
    expect(x.removed.tombstones + y.removed.tombstones + z.removed.tombstones).toBe(39);
    expect(x.removed.events + y.removed.events + z.removed.events).toBe(39 * perRun);
    expect(Object.keys(await states(ids))).toEqual([heldId]);
    expect(await liveRuns).toHaveLength(8);
    await holder.query('ROLLBACK');
    holder.release();
    expect((await engine.retention.run({ olderThan: '30d', tenantId: D })).removed.runs).toBe(1);
  });

  it('runs on a schedule until stopped', async () => {
    const ids = await completedRuns(E, 3);
    await shift(db, 31 * DAY);
    const reports: number[] = [];
    const job = engine.retention.schedule({ every: '50ms', olderThan: '30d', tenantId: E, onReport: (r) => reports.push(r.removed.runs) });
    await eventually(async () => reports.length >= 2);
    await job.stop();
    const count = reports.length;
    expect(reports[0]).toBe(3);
    expect(reports.slice(1).every((n) => n === 0)).toBe(true);
    expect(await rowsOf(ids)).toMatchObject({ tasks: 0 });
    await new Promise((r) => setTimeout(r, 150));
    expect(reports).toHaveLength(count);
  });
});
