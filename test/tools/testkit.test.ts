/**
 * The test kit (@ratchet/engine/testing): the virtual clock makes a one-day sleep complete in
 * under a second, a crash at a named fault point is resumed by another worker once the frozen
 * lease expires on the virtual clock, and the replay helper flags a renamed step (and passes the
 * unchanged code).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createTestEngine, replayRun, type TestEngine } from '@ratchet/engine/testing';

let calls = 0;
const charged: string[] = [];

const reminder = workflow({ name: 'reminder', version: '1', input: z.object({ to: z.string() }) }, async (ctx, { to }) => {
  const text = await ctx.step('compose', () => `hello ${to}`);
  await ctx.sleep('wait-a-day', '1d');
  const sent = await ctx.step('send', () => {
    calls += 1;
    return `${text} (sent)`;
  });
  return { sent, at: ctx.now().toISOString() };
});

// Same name and version, the second step renamed: what a careless deploy does.
const reminderRenamed = workflow({ name: 'reminder', version: '1', input: z.object({ to: z.string() }) }, async (ctx, { to }) => {
  const text = await ctx.step('compose-message', () => `hello ${to}`);
  await ctx.sleep('wait-a-day', '1d');
  return { sent: await ctx.step('send', () => `${text} (sent)`), at: ctx.now().toISOString() };
});

// A compatible change: the same calls, a different return shape.
const reminderCompatible = workflow({ name: 'reminder', version: '1', input: z.object({ to: z.string() }) }, async (ctx, { to }) => {
  const text = await ctx.step('compose', () => `hello ${to}`);
  await ctx.sleep('wait-a-day', '1d');
  const sent = await ctx.step('send', () => `${text} (sent)`);
  return { sent };
});

const checkout = workflow({ name: 'checkout', version: '1', input: z.object({ order: z.string() }) }, async (ctx, { order }) => {
  const receipt = await ctx.effect('charge', {
    input: { order },
    timeout: '10s',
    execute: async ({ idempotencyKey }) => {
      charged.push(idempotencyKey);
      return { receipt: `r-${order}` };
    },
  });
  return receipt;
});

let t: TestEngine;
beforeAll(async () => {
  t = await createTestEngine({ adminUrl: inject('adminUrl'), workflows: [reminder, checkout], effectMargin: '1s' });
  await t.worker(); // started up front: the timing below is the run's, not the worker's start
});
afterAll(async () => {
  await t?.close();
});

describe('virtual clock', () => {
  it('completes a one-day sleep in under a second of real time', async () => {
    const before = await t.clock.now();
    const started = Date.now();
    const run = await t.runToCompletion(reminder, { to: 'ada' });
    const elapsed = Date.now() - started;
    expect(run.state).toBe('completed');
    expect(run.output).toMatchObject({ sent: 'hello ada (sent)' });
    // The sleep really took a day of engine time…
    const after = await t.clock.now();
    expect(after.getTime() - before.getTime()).toBeGreaterThanOrEqual(86_400_000);
    expect(new Date((run.output as { at: string }).at).getTime() - before.getTime()).toBeGreaterThanOrEqual(86_400_000);
    // …and well under a second of ours (the claim loop and the statements only).
    expect(elapsed).toBeLessThan(1_000);
    expect(calls).toBe(1);
  });
});

describe('crashAt', () => {
  it('freezes a run between reserve and execute; another worker resumes it after the lease expires, charging once', async () => {
    const crashed = await t.crashAt('afterReserveBeforeExecute', checkout, { order: 'o-1' });
    expect(crashed.stepKey).toBe('charge#1');
    expect(charged).toEqual([]);
    const { rows } = await t.pool.query(`SELECT state, attempt FROM ratchet.operations WHERE task_id = $1`, [crashed.runId]);
    expect(rows).toEqual([{ state: 'reserved', attempt: 1 }]);
    const run = await t.complete(crashed.runId);
    expect(run).toMatchObject({ state: 'completed', output: { receipt: 'r-o-1' } });
    expect(charged).toEqual([`${crashed.runId}:charge#1`]);
    const events = await t.pool.query(`SELECT event_type FROM ratchet.events WHERE task_id = $1 ORDER BY seq`, [crashed.runId]);
    expect(events.rows.map((e) => e.event_type)).toContain('lease_reclaimed');
  });

  it('says so when the run never reaches the point', async () => {
    await expect(t.crashAt('afterReserveBeforeExecute', reminder, { to: 'x' }, { stepKey: 'nope#1' })).rejects.toMatchObject({ code: 'FAULT_NOT_REACHED' });
  });
});

describe('replay', () => {
  it('flags a renamed step, and passes code that makes the same calls', async () => {
    const run = await t.runToCompletion(reminder, { to: 'grace' });
    const [renamed] = await t.replay(reminderRenamed, [run.runId]);
    expect(renamed!.ok).toBe(false);
    expect(renamed!.error).toMatchObject({ code: 'NON_DETERMINISM', step: 'compose#1', expected: 'step compose#1' });
    expect(renamed!.error!.message).toContain('compose-message#1');
    await expect(t.assertReplays(reminderRenamed, [run.runId])).rejects.toMatchObject({ code: 'NON_DETERMINISM' });

    const [same] = await t.assertReplays(reminderCompatible, [run.runId]);
    expect(same).toMatchObject({ ok: true, replayed: 3, recorded: 3, frontier: [] });
  });

  it('replays a history saved as JSON (ratchet show --json) and stops at the frontier of a run in flight', async () => {
    const started = await t.engine.client.start(reminder, { to: 'linus' });
    // Wait (real time, short) until the run sleeps: compose and the sleep are recorded, send is not.
    for (let i = 0; i < 200 && (await t.engine.client.get(started.runId)).state !== 'sleeping'; i += 1) await new Promise((r) => setTimeout(r, 25));
    const saved = JSON.parse(JSON.stringify(await t.history(started.runId)));
    const report = await replayRun(reminderCompatible, saved);
    // compose and the sleep (recorded with its target when the run went to sleep) replay; send is next.
    expect(report).toMatchObject({ ok: true, replayed: 2, recorded: 2 });
    expect(report.frontier).toEqual(['send#1']);
    const bad = await replayRun(reminderRenamed, saved);
    expect(bad.ok).toBe(false);
  });
});
