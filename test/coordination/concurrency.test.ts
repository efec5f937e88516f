/** Per-key concurrency: runs sharing a concurrency key execute one at a time, across workers. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine, Worker } from '@ratchet/engine';
import { engineOn, testDatabase } from '../helpers/engine.js';
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
  engines = [await engineOn(db, { workflows: [held] }), await engineOn(db, { workflows: [held] })];
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

it('the database refuses a second running run of a key, whoever writes it', async () => {
  const a = await engines[0]!.client.start(held, { n: 1 }, { concurrencyKey: 'raw' });
  const b = await engines[0]!.client.start(held, { n: 2 }, { concurrencyKey: 'raw' });
  await Promise.all([a.result({ timeout: '60s' }), b.result({ timeout: '60s' })]);
  const sql = `UPDATE ratchet.tasks SET state = 'running', lease_owner = 'x', lease_expires_at = now(), due_at = now() WHERE id = $1`;
  await db.pool.query(sql, [a.runId]);
  await expect(db.pool.query(sql, [b.runId])).rejects.toMatchObject({ code: '23505', constraint: 'tasks_one_running_per_key' });
});
