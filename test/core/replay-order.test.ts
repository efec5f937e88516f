/**
 * Replay releases recorded results in recording order, so parallel branches interleave as they
 * did the first time: step keys never swap between branches, ctx.now()/uuid() agree, and replay
 * never mistakes "not reached yet" for "not reached".
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NonRetryableError, workflow, type Workflow } from '@ratchet/sdk';
import { engineOn, eventually, shift, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});

async function recorded(runId: string, stepKey: string): Promise<boolean> {
  const { rows } = await db.pool.query(`SELECT 1 FROM ratchet.operations WHERE task_id = $1 AND step_key = $2`, [runId, stepKey]);
  return rows.length > 0;
}

/** Runs `wf` inline until it sleeps, then lets a worker replay it from the top past the sleep. */
async function runThenReplay(wf: Workflow<any, any, any>) {
  const engine = await engineOn(db, { workflows: [wf], replayStallMs: 1_000 });
  const first = await engine.run(wf, {});
  expect(first.state).toBe('sleeping');
  await shift(db, 3_600_000 + 5_000);
  const worker = engine.worker({ pollMs: 50 });
  await worker.start();
  try {
    await eventually(async () => ['completed', 'failed', 'parked'].includes((await task(db, first.runId)).state), 20_000);
    return task(db, first.runId);
  } finally {
    await worker.stop();
    await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
  }
}

describe('replay order', () => {
  it('one step name used in two branches keeps its keys: no value swaps between branches', async () => {
    const wf = workflow({ name: 'same-name-branches', version: '1', input: z.object({}) }, async (ctx) => {
      const [a, b] = await Promise.all([
        (async () => {
          const out: string[] = [];
          for (let i = 0; i < 3; i += 1) {
            out.push(await ctx.step('x', () => `A${i}`));
            await pause(20); // not a ctx call: replay compresses nothing it cannot see
          }
          return out;
        })(),
        (async () => {
          await ctx.step('slow', async () => {
            await pause(300);
            return 0;
          });
          return ctx.step('x', () => 'B');
        })(),
      ]);
      await ctx.sleep('nap', '1h');
      return { a, b };
    });
    const row = await runThenReplay(wf);
    expect(row.state).toBe('completed');
    expect(row.output).toEqual({ a: ['A0', 'A1', 'A2'], b: 'B' });
  });

  it('ctx.now() and ctx.uuid() inside parallel branches are the same on replay', async () => {
    const seen: { now: string; uuid: string }[] = [];
    const wf = workflow({ name: 'branch-facts', version: '1', input: z.object({}) }, async (ctx) => {
      await Promise.all([
        (async () => {
          await ctx.step('fast', () => 1);
          seen.push({ now: ctx.now().toISOString(), uuid: ctx.uuid() });
        })(),
        ctx.step('slow', async () => {
          await pause(300);
          return 2;
        }),
      ]);
      await ctx.sleep('nap', '1h');
      return 'done';
    });
    const row = await runThenReplay(wf);
    expect(row.state).toBe('completed');
    expect(seen).toHaveLength(2);
    expect(seen[1]).toEqual(seen[0]);
  });

  it('a branch still in a timer is not "unreached" when another branch suspends', async () => {
    const wf = workflow({ name: 'not-yet-reached', version: '1', input: z.object({}) }, async (ctx) => {
      const [x, y] = await Promise.all([
        (async () => {
          await ctx.step('a', () => 1);
          await pause(50);
          return ctx.step('b', () => 2);
        })(),
        (async () => {
          await ctx.step('slow', async () => {
            await pause(300);
            return 3;
          });
          await ctx.sleep('nap1', '1h');
          await ctx.step('c', () => 4);
          await ctx.sleep('nap2', '2h');
          return 5;
        })(),
      ]);
      return x + y;
    });
    const engine = await engineOn(db, { workflows: [wf], replayStallMs: 1_000 });
    const first = await engine.run(wf, {});
    expect(first.state).toBe('sleeping');
    const worker = engine.worker({ pollMs: 50 });
    await worker.start();
    try {
      await shift(db, 3_600_000 + 5_000);
await eventually(async () => (await task(db, first.runId)).state === 'sleeping' && (await recorded(first.runId, 'nap2#1')));
      await shift(db, 2 * 3_600_000 + 5_000);
      await eventually(async () => (await task(db, first.runId)).state === 'completed', 20_000);
      expect((await task(db, first.runId)).output).toBe(7);
    } finally {
      await worker.stop();
      await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
    }
  });

  it('a branch failing while its sibling replays fails the run, it does not park it', async () => {
    const wf = workflow({ name: 'fail-while-sibling-replays', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.sleep('first', '1h');
      try {
        await Promise.all([
          ctx.step('fails', async () => {
            await pause(300);
            throw new NonRetryableError('no');
          }),
          (async () => {
            for (let i = 0; i < 5; i += 1) await ctx.step(`b${i}`, () => i);
          })(),
        ]);
      } catch (error) {
        await ctx.sleep('cool', '1h');
        throw error;
      }
    });
    const engine = await engineOn(db, { workflows: [wf], replayStallMs: 1_000 });
    const first = await engine.run(wf, {});
    const worker = engine.worker({ pollMs: 50 });
    await worker.start();
    try {
      await shift(db, 3_600_000 + 5_000);
      await eventually(async () => (await task(db, first.runId)).state === 'sleeping' && (await recorded(first.runId, 'cool#1')));
      await shift(db, 3_600_000 + 5_000);
      await eventually(async () => ['failed', 'parked'].includes((await task(db, first.runId)).state), 20_000);
      const row = await task(db, first.runId);
      expect(row.state).toBe('failed');
      expect(row.error).toMatchObject({ code: 'STEP_FAILED' });
    } finally {
      await worker.stop();
      await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
    }
  });
});
