/** Per-key concurrency (limits by key pattern, across workers) and priority, on a real Postgres. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine, Worker } from '@ratchet/engine';
import { engineOn, eventually, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
let engines: Engine[];
let workers: Worker[];

const held = workflow({ name: 'held', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => {
  const begin = await ctx.step('begin', () => Date.now());
  await ctx.sleep('hold', '150ms');
  const end = await ctx.step('end', () => Date.now());
  return { n, begin, end };
});

beforeAll(async () => {
  db = await testDatabase();
  const concurrencyLimits = { 'pair:*': 2 };
  engines = [await engineOn(db, { workflows: [held], concurrencyLimits }), await engineOn(db, { workflows: [held], concurrencyLimits })];
  workers = engines.map((e) => e.worker({ concurrency: 4, pollMs: 1_000 }));
  await Promise.all(workers.map((w) => w.start()));
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

type Span = { n: number; begin: number; end: number };
const overlaps = (spans: Span[]) => {
  const sorted = [...spans].sort((a, b) => a.begin - b.begin);
  return sorted.some((s, i) => i > 0 && s.begin < sorted[i - 1]!.end);
};

it('runs of one key never overlap, across two workers; other keys run alongside', async () => {
  const keyed = await Promise.all(
    Array.from({ length: 6 }, (_, n) => engines[n % 2]!.client.start(held, { n }, { concurrencyKey: 'customer-1' })),
  );
  const free = await Promise.all(Array.from({ length: 4 }, (_, n) => engines[0]!.client.start(held, { n: 100 + n })));
  const keyedSpans = (await Promise.all(keyed.map((r) => r.result({ timeout: '60s' })))) as Span[];
  const freeSpans = (await Promise.all(free.map((r) => r.result({ timeout: '60s' })))) as Span[];
  expect(overlaps(keyedSpans)).toBe(false);
  expect(overlaps(freeSpans)).toBe(true); // without a key they run in parallel
});

it('a key with a limit of 2 never shows 3 running, sampled from the table under load', async () => {
  let max = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE concurrency_key = 'pair:x' AND state = 'running'`);
      max = Math.max(max, rows[0].n);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const runs = await Promise.all(Array.from({ length: 12 }, (_, n) => engines[n % 2]!.client.start(held, { n }, { concurrencyKey: 'pair:x' })));
  const spans = (await Promise.all(runs.map((r) => r.result({ timeout: '60s' })))) as Span[];
  sampling = false;
  await sampler;
  expect(max).toBe(2);
  // From the runs' own clocks too: at no moment were three inside their hold.
  const edges = spans.flatMap((s) => [[s.begin, 1] as const, [s.end, -1] as const]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let inside = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (inside += d));
  expect(most).toBeLessThanOrEqual(2);
  const limits = await db.pool.query(`SELECT DISTINCT concurrency_limit FROM ratchet.tasks WHERE concurrency_key = 'pair:x'`);
  expect(limits.rows).toEqual([{ concurrency_limit: 2 }]);
});

it('the database refuses more running runs of a key than its slots, whoever writes them', async () => {
  const a = await engines[0]!.client.start(held, { n: 1 }, { concurrencyKey: 'raw' });
  const b = await engines[0]!.client.start(held, { n: 2 }, { concurrencyKey: 'raw' });
  await Promise.all([a.result({ timeout: '60s' }), b.result({ timeout: '60s' })]);
  const sql = `UPDATE ratchet.tasks SET state = 'running', lease_owner = 'x', lease_expires_at = now(), due_at = now(), concurrency_slot = $2 WHERE id = $1`;
  await db.pool.query(sql, [a.runId, 1]);
  await expect(db.pool.query(sql, [b.runId, 1])).rejects.toMatchObject({ code: '23505', constraint: 'tasks_running_key_slots' });
  await expect(db.pool.query(sql, [b.runId, 2])).rejects.toMatchObject({ code: '23514', constraint: 'tasks_running_keyed_has_slot' }); // the limit is 1
  await expect(db.pool.query(sql, [b.runId, null])).rejects.toMatchObject({ code: '23514', constraint: 'tasks_running_keyed_has_slot' });
});

it('bad limits and keys are ValidationErrors naming the field', async () => {
  await expect(engineOn(db, { workflows: [held], concurrencyLimits: { 'a:*': 0 } })).rejects.toMatchObject({ code: 'VALIDATION', path: ['concurrencyLimits', 'a:*'] });
  await expect(engines[0]!.client.start(held, { n: 1 }, { concurrencyKey: '' })).rejects.toMatchObject({ code: 'VALIDATION', path: ['concurrencyKey'] });
  await expect(engines[0]!.client.start(held, { n: 1 }, { priority: 1.5 })).rejects.toMatchObject({ code: 'VALIDATION', path: ['priority'] });
});

it('a worker claims due pending runs by priority, then age', async () => {
  const ranked = workflow({ name: 'ranked', version: '1', input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('at', () => ({ n, at: Date.now() })));
  const engine = await engineOn(db, { workflows: [ranked] });
  const starts = [];
  for (const [n, priority] of [[1, 0], [2, 0], [3, 5], [4, 0], [5, 9]] as const) starts.push(await engine.client.start(ranked, { n }, { priority }));
  // Callers register for the results first: a registration locks its run's row for a moment, and
  // a claim skips locked rows (SKIP LOCKED), which would let a lower priority through.
  const results = starts.map((r) => r.result({ timeout: '30s' }));
  await eventually(async () => (await db.pool.query(`SELECT bool_and(awaited_by IS NOT NULL) AS all FROM ratchet.tasks WHERE workflow_name = 'ranked'`)).rows[0].all);
  const worker = engine.worker({ concurrency: 1, pollMs: 200 });
  await worker.start();
  try {
    const outs = (await Promise.all(results)) as { n: number; at: number }[];
    expect(outs.sort((a, b) => a.at - b.at).map((o) => o.n)).toEqual([5, 3, 1, 2, 4]);
  } finally {
    await worker.stop();
  }
});
