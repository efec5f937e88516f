/**
 * Testing a workflow with @ratchet/engine/testing: a fresh database per engine (on $DATABASE_URL's
 * server, or an embedded PostgreSQL), a virtual clock that makes the 3-day sleep and the 7-day
 * timeout pass in milliseconds, a crash at a named fault point, and a replay test that catches a
 * renamed step before a deploy. Run it with `pnpm test:examples` (also part of `pnpm test`).
 */
import { afterAll, beforeAll, beforeEach, expect, it } from 'vitest';
import { createTestEngine, type TestEngine } from '@ratchet/engine/testing';
import { followUp, followUpRenamed, mailer } from './follow-up.js';

let t: TestEngine;
beforeAll(async () => {
  t = await createTestEngine({ workflows: [followUp], effectMargin: '1s' });
}, 120_000);
afterAll(async () => {
  await t?.close();
});
beforeEach(() => {
  mailer.sent.length = 0;
});

it('escalates when no reply comes within a week (ten days of virtual time, no waiting)', async () => {
  const run = await t.runToCompletion(followUp, { orderId: 'o-1', email: 'ada@example.com' });
  expect(run).toMatchObject({ state: 'completed', output: 'escalated: no reply' });
  expect(mailer.sent).toEqual([{ to: 'ada@example.com', key: `${run.runId}:email#1` }]);
});

it('closes on a happy reply', async () => {
  const started = await t.engine.client.start(followUp, { orderId: 'o-2', email: 'grace@example.com' });
  await t.worker();
  await t.waitForState(started.runId, 'sleeping');
  await t.clock.advance('3d'); // the cool-off passes; the email goes out; the run waits for a reply
  await t.waitForState(started.runId, 'waiting');
  await t.engine.client.signal(started.runId, 'reply', { happy: true });
  expect(await t.complete(started.runId)).toMatchObject({ state: 'completed', output: 'closed' });
});

it('emails once when the worker dies between reserving the email and sending it', async () => {
  const crashed = await t.crashAt('afterReserveBeforeExecute', followUp, { orderId: 'o-3', email: 'linus@example.com' });
  expect(crashed.stepKey).toBe('email#1');
  expect(mailer.sent).toEqual([]);
  const run = await t.complete(crashed.runId); // the lease expires on the virtual clock; a worker resumes
  expect(run.state).toBe('completed');
  expect(mailer.sent).toEqual([{ to: 'linus@example.com', key: `${crashed.runId}:email#1` }]);
});

it('replays recorded runs: the renamed step is caught before the deploy', async () => {
  const run = await t.runToCompletion(followUp, { orderId: 'o-4', email: 'barbara@example.com' });
  await expect(t.assertReplays(followUp, [run.runId])).resolves.toHaveLength(1);
  await expect(t.assertReplays(followUpRenamed, [run.runId])).rejects.toMatchObject({ code: 'NON_DETERMINISM', step: 'email#1' });
});
