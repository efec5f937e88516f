/**
 * How a worker answers `ratchet_work` between processes (worker.ts): a start's notice names its
 * run, so a worker claims for a start it can run and has not already taken, and nothing else; a
 * claim that fills the worker says whether it left a due run behind, so the next free slot
 * claims only when one is waiting. Each claim statement is counted on the worker engine's own
 * pool (a real pg.Pool, its queries observed on the way through).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workflow, type Workflow } from '@ratchet/sdk';
import { createEngine, type Engine } from '@ratchet/engine';
import { engineOn, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { observedPool } from '../helpers/pools.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});

interface ClaimCount {
  claims: number;
  /** Claims that took no run. */
  empty: number;
  /** Runs once after the next claim's answer arrives and before the worker sees it: the claim is still in flight. */
  afterNextClaim?: () => Promise<void>;
}

/** An engine whose pool counts its claim statements (and which of them came back empty). */
async function countingEngine(workflows: Workflow<any, any, any>[]): Promise<{ engine: Engine; count: ClaimCount; close: () => Promise<void> }> {
  const count: ClaimCount = { claims: 0, empty: 0 };
  const pool = observedPool(db.url, async (name, result) => {
    if (name !== 'ratchet_claim_tasks') return;
    count.claims += 1;
    if (result?.rows.every((row) => row.id === null)) count.empty += 1;
    const hook = count.afterNextClaim;
    count.afterNextClaim = undefined;
    await hook?.();
  });
  const engine = await createEngine({ database: pool, workflows });
  return {
    engine,
    count,
    close: async () => {
      await engine.close();
      await pool.end();
    },
  };
}

let names = 0;
function trivial(version = '1') {
  names += 1;
  return workflow({ name: `notice-${names}`, version, input: z.object({ n: z.number() }) }, async (ctx, { n }) => ctx.step('inc', () => n + 1));
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('a worker woken by ratchet_work', () => {
  it('claims once per start it can run: not for another workflow, not for another version, never again for a run it took', async () => {
    const mine = trivial('1');
    const otherVersion = workflow({ name: mine.name, version: '2', input: mine.input }, async (_ctx, { n }: { n: number }) => n);
    const theirs = trivial();
    const { engine: workers, count, close } = await countingEngine([mine]);
    const caller = await engineOn(db, { workflows: [mine, otherVersion, theirs] });
    const worker = workers.worker({ concurrency: 1, pollMs: 60_000 });
    await worker.start();
    try {
      await settle();
      const atStart = { claims: count.claims, empty: count.empty };
      // Starts this worker cannot run: heard, and ignored.
      await caller.client.start(theirs, { n: 1 });
      await caller.client.start(otherVersion, { n: 1 });
      await settle();
      expect({ claims: count.claims, empty: count.empty }).toEqual(atStart);
      // One at a time: each start is one claim that takes its run. The run's settlement wakes
      // nothing (the full claim said no other run was due), and its notice, when it comes after
      // the claim, neither.
      for (let n = 0; n < 10; n += 1) expect(await caller.client.execute(mine, { n }, { timeout: '10s' })).toBe(n + 1);
      await settle();
      expect(count.claims - atStart.claims).toBe(10);
      expect(count.empty - atStart.empty).toBe(0);
    } finally {
      await worker.stop();
      await close();
    }
  });

  it('claims again at once for a start heard while its claim was in flight (the claim may not have seen it)', async () => {
    const wf = trivial();
    const { engine: workers, count, close } = await countingEngine([wf]);
    const caller = await engineOn(db, { workflows: [wf] });
    const worker = workers.worker({ concurrency: 2, pollMs: 120_000 });
    await worker.start();
    try {
      await settle();
      let late: Promise<number> | undefined;
      // The claim that takes the first run has answered; before the worker sees that answer, a
      // second run starts and its notice arrives.
      count.afterNextClaim = async () => {
        late = caller.client.execute(wf, { n: 2 }, { timeout: '10s' });
        await settle();
      };
      expect(await caller.client.execute(wf, { n: 1 }, { timeout: '10s' })).toBe(2);
      expect(await late).toBe(3);
    } finally {
      await worker.stop();
      await close();
    }
  });

  it('loses no start: sixty runs from another process at once, none waiting for the poll', async () => {
    const wf = trivial();
    const { engine: workers, count, close } = await countingEngine([wf]);
    const caller = await engineOn(db, { workflows: [wf] });
    // pollMs far beyond the test's timeout: a start whose wake-up were dropped would fail it.
    const worker = workers.worker({ concurrency: 3, pollMs: 120_000 });
    await worker.start();
    try {
      const results = await Promise.all(Array.from({ length: 60 }, (_, n) => caller.client.execute(wf, { n }, { timeout: '30s' })));
      expect(results).toEqual(Array.from({ length: 60 }, (_, n) => n + 1));
      expect(count.claims).toBeLessThanOrEqual(60 + 5);
    } finally {
      await worker.stop();
      await close();
    }
  });

  it('a full claim that leaves due runs behind claims again as slots free: a backlog that no NOTIFY will announce', async () => {
    const wf = trivial();
    const caller = await engineOn(db, { workflows: [wf] });
    // Started before any worker listens: no notice will come for them.
    const runs = await Promise.all(Array.from({ length: 12 }, (_, n) => caller.client.start(wf, { n })));
    const { engine: workers, count, close } = await countingEngine([wf]);
    const worker = workers.worker({ concurrency: 3, pollMs: 120_000 });
    await worker.start();
    try {
      expect(await Promise.all(runs.map((run) => run.result({ timeout: '30s' })))).toEqual(Array.from({ length: 12 }, (_, n) => n + 1));
      expect(count.claims).toBeGreaterThanOrEqual(4);
    } finally {
      await worker.stop();
      await close();
    }
  });
});
