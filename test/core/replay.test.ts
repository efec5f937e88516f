/** Replay by step key: parallel branches, loops of one name, sleeps in a branch, nondeterminism. */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, eventually, events, operations, shift, task } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { providerWorld } from '../helpers/provider-world.js';
import { fanout, napper } from '../fixtures/workflows.js';

const world = providerWorld({ leaseMs: 1000, effectMargin: 300 });
let db: TestDatabase;
let engine: Engine;
const worker = (faults?: string) => world.worker(faults);
beforeAll(() => {
  db = world.db;
  engine = world.engine;
});

describe('replay after a crash', () => {
  it('replays Promise.all branches and a loop of one effect name, executing each key once', async () => {
    const run = await engine.client.start(fanout, { n: 5 });
    // Killed right after recording the third effect of the loop (after the branches' four steps).
    const doomed = worker('afterRecord:kill@3');
    expect(await doomed.exited).toBe('SIGKILL');
    const recorded = await operations(db, run.runId);
    expect(recorded.filter((o) => o.kind === 'effect').map((o) => o.stepKey)).toEqual(['line#1', 'line#2', 'line#3']);

    worker();
    const output = await run.result({ timeout: '30s' });
    expect(output).toEqual({
      left: 'lefta+leftb',
      right: 'righta+rightb',
      charges: [1, 2, 3, 4, 5].map((i) => `ch_${run.runId}:line#${i}`),
    });
    const { rows } = await db.pool.query(
      `SELECT key, count(*)::int AS n FROM provider_attempts WHERE key LIKE $1 GROUP BY key ORDER BY key`,
      [`${run.runId}:%`],
    );
    expect(rows.map((r) => r.n)).toEqual([1, 1, 1, 1, 1]);
    const ops = await operations(db, run.runId);
    expect(new Set(ops.map((o) => o.stepKey)).size).toBe(ops.length);
    expect(ops.map((o) => o.stepKey).sort()).toEqual(
      ['left-a#1', 'left-b#1', 'right-a#1', 'right-b#1', 'line#1', 'line#2', 'line#3', 'line#4', 'line#5'].sort(),
    );
  });

  it('a sleep inside one parallel branch suspends the run only once the other branch is done', async () => {
    const worker1 = engine.worker({ pollMs: 100 });
    await worker1.start();
    try {
      const run = await engine.client.start(napper, { nap: '1h' });
      await eventually(async () => (await task(db, run.runId)).state === 'sleeping');
      const sleeping = await task(db, run.runId);
      const ops = await operations(db, run.runId);
      // The stepping branch finished before the run suspended.
      expect(ops.map((o) => o.stepKey).sort()).toEqual(['nap#1', 'work-1#1', 'work-2#1']);
      expect(sleeping.lease_owner).toBeNull();
      expect(sleeping.wake_at.toISOString()).toBe((ops.find((o) => o.stepKey === 'nap#1')!.result as { wakeAt: string }).wakeAt);

      // Nothing happens before wake_at; after it, any worker resumes the run.
      await new Promise((r) => setTimeout(r, 300));
      expect((await task(db, run.runId)).state).toBe('sleeping');
      await shift(db, 3_600_000 + 1_000);
      const output = (await run.result({ timeout: '20s' })) as { slept: string; worked: number; after: string };
      expect(output.worked).toBe(2);
      expect(output.after).toBe('woke');
      expect(output.slept).toBe(sleeping.wake_at.toISOString()); // ctx.now() after a sleep is its target
      const types = (await events(db, run.runId)).map((e) => e.type);
      expect(types).toEqual(['started', 'claimed', 'sleeping', 'woke', 'completed']);
    } finally {
      await worker1.stop();
      await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
    }
  });

  it('a sleep survives a worker restart and honours wake_at', async () => {
    const run = await engine.client.start(napper, { nap: '2s' });
    const first = worker();
    await eventually(async () => (await task(db, run.runId)).state === 'sleeping');
    const { wake_at: wakeAt } = await task(db, run.runId);
    await first.kill('SIGKILL');
    worker();
    const output = (await run.result({ timeout: '30s' })) as { slept: string };
    expect(output.slept).toBe(wakeAt.toISOString());
    const woke = await db.pool.query(`SELECT created_at FROM ratchet.events WHERE task_id = $1 AND event_type = 'woke'`, [run.runId]);
    expect(woke.rows[0].created_at.getTime()).toBeGreaterThanOrEqual(wakeAt.getTime());
  });
});

describe('nondeterminism', () => {
  it('parks a run whose code reaches a different kind at a recorded key, naming both', async () => {
    const v1 = workflow({ name: 'drift', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.step('a', () => 1);
      await ctx.sleep('wait', '1h');
      return 'v1';
    });
    const run = await engine.run(v1, {});
    expect(run.state).toBe('sleeping');
    // A bad deploy: same name and version, different code.
    const v1bad = workflow({ name: 'drift', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.effect('a', { input: {}, execute: async () => 1 });
      return 'v1-bad';
    });
    const other = await engineOn(db, { workflows: [v1bad] });
    const w = other.worker({ pollMs: 100 });
    await w.start();
    await shift(db, 3_600_000 + 1_000);
    try {
      await eventually(async () => (await task(db, run.runId)).state === 'parked');
      const parked = await task(db, run.runId);
      expect(parked.error).toMatchObject({ code: 'NON_DETERMINISM' });
      expect(parked.error.message).toMatch(/effect a#1/);
      expect(parked.error.message).toMatch(/step a#1/);
      expect((await operations(db, run.runId)).map((o) => o.stepKey)).toEqual(['a#1', 'wait#1']); // nothing destroyed
      expect((await events(db, run.runId)).at(-1)!.type).toBe('parked');
    } finally {
      await w.stop();
      await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
    }
  });

  it('parks a run whose code no longer reaches a recorded step', async () => {
    const v = workflow({ name: 'shrink', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.step('a', () => 1);
      await ctx.step('b', () => 2);
      await ctx.sleep('s', '1h');
      return 'done';
    });
    const run = await engine.run(v, {});
    const shrunk = workflow({ name: 'shrink', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.step('a', () => 1);
      await ctx.sleep('s', '1h');
      return 'done';
    });
    const other = await engineOn(db, { workflows: [shrunk] });
    const w = other.worker({ pollMs: 100 });
    await w.start();
    await shift(db, 3_600_000 + 1_000);
    try {
      await eventually(async () => (await task(db, run.runId)).state === 'parked');
      expect((await task(db, run.runId)).error.message).toMatch(/step b#1/);
    } finally {
      await w.stop();
      await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
    }
  });
});
