/**
 * The chaos workload: five workflows that between them use every durable primitive, and the
 * application tables they write, which are what the invariants are checked against afterwards.
 *
 *   order   step → effect at a key-honouring provider (reconcile) → effect at a provider that
 *           ignores keys → a step that fails its first attempt (retried) → emit
 *   triage  infer → seal → commit (test/fixtures/triage.ts: a ticket row and an outbox message)
 *   nap     a sleep in one branch of Promise.all, steps in the other → emit
 *   signal  waitFor a signal the harness sends → emit
 *   parent  a child run (one effect at the honouring provider) → emit
 *
 * Application tables (all in the engine's database, written from the worker processes):
 *   chaos_charges(key PK)       the honouring provider: one row per idempotency key, whatever the retries
 *   chaos_attempts              one row per call the honouring provider received (started/finished)
 *   chaos_raw_calls             the provider that ignores keys: one row per call, duplicates and all
 *   chaos_flaky                 attempts of the failing-once step
 *   chaos_published             one row per outbox delivery the relay made (at least once)
 */
import pg from 'pg';
import { z } from 'zod';
import { workflow, type RetryPolicy } from '@ratchet/sdk';
import { APP_DDL, triageWorkflow } from '../fixtures/triage.js';

/**
 * Users a triage run may touch. Each run touches its own (run n → user n): two commits that lock a
 * user FOR SHARE (the `exists` dependency) and then update it deadlock by design, and under chaos
 * enough of them exhaust the commit's retries (StepFailedError, a documented outcome, not a lost
 * commit). The index keeps the `notExists` check from predicate-locking all of `tickets`.
 */
export const USERS = 100_000;

export const CHAOS_DDL = `
  ${APP_DDL}
  CREATE TABLE IF NOT EXISTS chaos_charges (key text PRIMARY KEY, amount int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
  CREATE TABLE IF NOT EXISTS chaos_attempts (id bigserial PRIMARY KEY, key text NOT NULL, pid int NOT NULL,
                                             started_at timestamptz NOT NULL, finished_at timestamptz);
  CREATE TABLE IF NOT EXISTS chaos_raw_calls (id bigserial PRIMARY KEY, key text NOT NULL, pid int NOT NULL);
  CREATE TABLE IF NOT EXISTS chaos_flaky (id bigserial PRIMARY KEY, run_id uuid NOT NULL);
  CREATE TABLE IF NOT EXISTS chaos_published (id bigserial PRIMARY KEY, message_id uuid NOT NULL, key text NOT NULL, attempt int NOT NULL, pid int NOT NULL);
  CREATE INDEX IF NOT EXISTS tickets_dedupe_key ON tickets (dedupe_key);
  INSERT INTO users (id, name) SELECT i, 'user ' || i FROM generate_series(1, ${USERS}) AS i ON CONFLICT DO NOTHING;`;

let appPool: pg.Pool | undefined;
/** The providers' own connection (DATABASE_URL): they are "the outside world", not the engine. */
function app(): pg.Pool {
  if (!appPool) {
    appPool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 4, connectionTimeoutMillis: 5_000 });
    appPool.on('error', () => {}); // idle clients cut off by a restart: the next query reconnects
    appPool.on('connect', (client) => client.on('error', () => {}));
  }
  return appPool;
}

/** Effect attempts time out after this; the engine waits this plus its margin before re-executing. */
export const EFFECT_TIMEOUT_MS = 2_000;

/** A provider that honours idempotency keys: the charge happens once per key. Its calls are logged with their time span. */
async function chargeHonouring(key: string, amount: number): Promise<{ chargeId: string; amount: number }> {
  const { rows } = await app().query<{ id: string }>(
    `INSERT INTO chaos_attempts (key, pid, started_at) VALUES ($1, $2, clock_timestamp()) RETURNING id`,
    [key, process.pid],
  );
  // Work that takes a moment, so a second caller would overlap if the engine let one in.
  await new Promise((resolve) => setTimeout(resolve, 5 + Math.floor(Math.random() * 40)));
  await app().query(`INSERT INTO chaos_charges (key, amount) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, [key, amount]);
  await app().query(`UPDATE chaos_attempts SET finished_at = clock_timestamp() WHERE id = $1`, [rows[0]!.id]);
  return { chargeId: `ch_${key}`, amount };
}

async function findCharge(key: string): Promise<{ found: true; result: { chargeId: string; amount: number } } | { found: false }> {
  const { rows } = await app().query<{ amount: number }>(`SELECT amount FROM chaos_charges WHERE key = $1`, [key]);
  return rows[0] ? { found: true, result: { chargeId: `ch_${key}`, amount: rows[0].amount } } : { found: false };
}

/** A provider that ignores keys: every call counts. */
async function notifyRaw(key: string): Promise<{ sent: true }> {
  await app().query(`INSERT INTO chaos_raw_calls (key, pid) VALUES ($1, $2)`, [key, process.pid]);
  return { sent: true };
}

/** Effects keep retrying through a Postgres restart (their provider is that same database). */
const EFFECT_RETRY: RetryPolicy = { maxAttempts: 20, initial: '100ms', factor: 2, max: '2s', jitter: 0.2 };

const honouring = (amount: number) => ({
  input: { amount },
  timeout: EFFECT_TIMEOUT_MS,
  retry: EFFECT_RETRY,
  execute: ({ idempotencyKey, input }: { idempotencyKey: string; input: { amount: number } }) => chargeHonouring(idempotencyKey, input.amount),
  reconcile: ({ idempotencyKey }: { idempotencyKey: string }) => findCharge(idempotencyKey),
});

export const order = workflow(
  { name: 'chaos-order', version: '1', input: z.object({ n: z.number().int(), amount: z.number().int().positive() }) },
  async (ctx, { n, amount }) => {
    const prepared = await ctx.step('prepare', () => ({ n, amount }));
    const receipt = await ctx.effect('charge', honouring(prepared.amount));
    await ctx.effect('notify', {
      input: { n },
      timeout: EFFECT_TIMEOUT_MS,
      retry: EFFECT_RETRY,
      execute: ({ idempotencyKey }) => notifyRaw(idempotencyKey),
    });
    const tries = await ctx.step(
      'flaky',
      async () => {
        await app().query(`INSERT INTO chaos_flaky (run_id) VALUES ($1)`, [ctx.runId]);
        const { rows } = await app().query<{ n: number }>(`SELECT count(*)::int AS n FROM chaos_flaky WHERE run_id = $1`, [ctx.runId]);
        if (rows[0]!.n < 2) throw new Error('the first attempt always fails');
        return rows[0]!.n;
      },
      { retry: { maxAttempts: 20, initial: '100ms', factor: 1.5, max: '1s', jitter: 0 } },
    );
    await ctx.emit('order.done', { n, chargeId: receipt.chargeId });
    return { chargeId: receipt.chargeId, tries };
  },
);

/** infer → seal → commit; the dedupe key makes a second commit of the same decision impossible to hide. */
export const triage = triageWorkflow(async () => {});

export const nap = workflow({ name: 'chaos-nap', version: '1', input: z.object({ ms: z.number().int().min(0) }) }, async (ctx, { ms }) => {
  const [, worked] = await Promise.all([
    ctx.sleep('nap', ms),
    (async () => {
      const one = await ctx.step('work-1', async () => 1);
      return ctx.step('work-2', async () => one + 1);
    })(),
  ]);
  await ctx.emit('nap.done', { ms });
  return { worked, woke: ctx.now().toISOString() };
});

export const Go = z.object({ token: z.string() });
export const signalled = workflow({ name: 'chaos-signal', version: '1', input: z.object({ n: z.number().int() }) }, async (ctx, { n }) => {
  const go = await ctx.waitFor('go', { schema: Go, timeout: '10m' });
  await ctx.emit('signal.done', { n, token: go.token });
  return { token: go.token };
});

export const kid = workflow({ name: 'chaos-kid', version: '1', input: z.object({ n: z.number().int() }) }, async (ctx, { n }) => {
  const receipt = await ctx.effect('charge', honouring(n + 1));
  return { chargeId: receipt.chargeId };
});

export const parent = workflow({ name: 'chaos-parent', version: '1', input: z.object({ n: z.number().int() }) }, async (ctx, { n }) => {
  const child = await ctx.child('kid', kid, { n });
  await ctx.emit('parent.done', { n, chargeId: child.chargeId });
  return child;
});

export const chaosWorkflows = [order, triage, nap, signalled, kid, parent];

/** The final output each workflow must reach (a triage rejected would mean its commit ran twice). */
export function outputProblem(workflowName: string, output: unknown): string | undefined {
  if (workflowName === 'triage') {
    const status = (output as { status?: string } | null)?.status;
    return status === 'committed' ? undefined : `triage output status ${JSON.stringify(status)}, expected "committed"`;
  }
  return output === null || output === undefined ? 'no output' : undefined;
}
