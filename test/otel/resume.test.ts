/**
 * A run that spans three segments on two engines: it sleeps on the first (direct path, inside
 * the caller's span), resumes on another engine's worker and waits for a signal there, then
 * resumes again when the signal arrives. Each resumed segment is a new trace linked to the
 * run's origin and to the previous segment (whose span id the engine wrote on the event that
 * ended it); replay emits no `chat` span and calls no model.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SpanKind } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { workflow } from '@ratchet/sdk';
import { captureSpans } from '@ratchet/otel/testing';
import { engineOn, eventually, shift, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { eventIds, operationIds } from './agent.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await testDatabase();
});

let modelCalls = 0;
const napper = workflow({ name: 'napper', version: '1', input: z.object({ ticket: z.string() }) }, async (ctx, { ticket }) => {
  const decision = await ctx.infer('classify', {
    model: 'gpt-4.1-mini',
    provider: 'openai',
    schema: z.object({ team: z.string() }),
    call: async () => {
      modelCalls += 1;
      return { output: { team: ticket.includes('bill') ? 'billing' : 'support' }, usage: { inputTokens: 12, outputTokens: 4 } };
    },
  });
  await ctx.sleep('cool-off', '1h');
  const routed = await ctx.step('route', () => `routed to ${decision.team}`);
  const approval = await ctx.waitFor<{ ok: boolean }>('approval', { timeout: '1d', schema: z.object({ ok: z.boolean() }) });
  return { routed, approved: approval.ok };
});

const ids = (span: ReadableSpan) => ({ traceId: span.spanContext().traceId, spanId: span.spanContext().spanId });
const links = (span: ReadableSpan) => span.links.map((l) => ({ type: l.attributes?.['ratchet.link.type'], traceId: l.context.traceId, spanId: l.context.spanId }));

describe('a run resumed on another engine', () => {
  it('yields one segment span per segment, each linked to the origin and the previous segment; replay makes no chat span', async () => {
    const first = captureSpans();
    const second = captureSpans();
    const engineA = await engineOn(db, { workflows: [napper], instrumentation: first.instrumentation });
    const engineB = await engineOn(db, { workflows: [napper], instrumentation: second.instrumentation });

    // Segment 1: the direct path, inside the caller's span, until the sleep suspends it.
    const request = first.provider.getTracer('app').startSpan('POST /tickets', { kind: SpanKind.SERVER });
    const { trace, context } = await import('@opentelemetry/api');
    const started = await context.with(trace.setSpan(context.active(), request), () => engineA.run(napper, { ticket: 'double bill' }));
    request.end();
    expect(started.state).toBe('sleeping');
    const runId = started.runId;
    expect(modelCalls).toBe(1);

    const [segment1] = first.named('invoke_workflow');
    expect(segment1!.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(segment1!.attributes).toMatchObject({ 'ratchet.segment.outcome': 'sleeping', 'ratchet.run.wake_at': (await task(db, runId)).wake_at.toISOString() });
    expect(first.named('chat')).toHaveLength(1);
    const [sleep] = first.named('sleep');
    expect(sleep!.attributes['ratchet.sleep.until']).toBe((await task(db, runId)).wake_at.toISOString());

    // Segment 2: another engine's worker, an hour later; it replays infer and sleep, then waits.
    await shift(db, 3_600_000 + 1_000);
    const worker = engineB.worker({ pollMs: 50 });
    await worker.start();
    try {
      await eventually(async () => (await task(db, runId)).state === 'waiting');
      // Segment 3: the signal wakes it on the same worker.
      await engineA.client.signal(runId, 'approval', { ok: true });
      await eventually(async () => (await task(db, runId)).state === 'completed');
    } finally {
      await worker.stop();
    }
    expect(modelCalls).toBe(1);
    expect(second.named('chat')).toEqual([]); // replayed: no model call, no span

    const [segment2, segment3, ...more] = second.named('invoke_workflow');
    expect(more).toEqual([]);
    const origin = { traceId: request.spanContext().traceId, spanId: request.spanContext().spanId };
    for (const segment of [segment2!, segment3!]) {
      expect(segment.parentSpanContext).toBeUndefined(); // a new trace per resumed segment
      expect(segment.spanContext().traceId).not.toBe(origin.traceId);
    }
    expect(links(segment2!)).toEqual([
      { type: 'origin', ...origin },
      { type: 'previous_segment', ...ids(segment1!) },
    ]);
    expect(segment2!.attributes).toMatchObject({
      'ratchet.segment.resumed_after': 'sleeping',
      'ratchet.segment.outcome': 'waiting',
      'ratchet.segment.replayed_steps': 2,
      'ratchet.segment.fresh_steps': 2,
    });
    expect(links(segment3!)).toEqual([
      { type: 'origin', ...origin },
      { type: 'previous_segment', ...ids(segment2!) },
    ]);
    expect(segment3!.attributes).toMatchObject({ 'ratchet.segment.resumed_after': 'waiting', 'ratchet.segment.outcome': 'completed', 'ratchet.segment.replayed_steps': 3 });

    // Segment 2's children: the fresh step and the wait, not the replayed infer or sleep.
    const children2 = second.spans().filter((s) => s.parentSpanContext?.spanId === segment2!.spanContext().spanId).map((s) => s.name);
    expect(children2).toEqual(['step route', 'wait approval']);

    // The rows: each written by the span that did the work; events by the segment that moved the run.
    const byKey = Object.fromEntries((await operationIds(db, runId)).map((o) => [o.stepKey, { traceId: o.traceId, spanId: o.spanId }]));
    expect(byKey['classify#1']).toEqual(ids(first.named('chat')[0]!));
    expect(byKey['cool-off#1']).toEqual(ids(sleep!));
    expect(byKey['route#1']).toEqual(ids(second.named('step')[0]!));
    // The wait's record was completed in segment 3, which consumed the signal: its ids are segment 3's.
    expect(byKey['approval#1']).toEqual(ids(segment3!));
    const events = await eventIds(db, runId);
    expect(events.map((e) => e.type)).toEqual(['started', 'sleeping', 'woke', 'waiting', 'signalled', 'completed']);
    expect(events).toEqual([
      { type: 'started', ...origin },
      { type: 'sleeping', ...ids(segment1!) },
      { type: 'woke', ...origin },
      { type: 'waiting', ...ids(segment2!) },
      { type: 'signalled', ...origin },
      { type: 'completed', ...ids(segment3!) },
    ]);
  });

  it('keeps resumed segments in the origin trace when asked, still linked to the previous segment', async () => {
    const capture = captureSpans({ resumedSegments: 'origin-trace' });
    const engine = await engineOn(db, { workflows: [napper], instrumentation: capture.instrumentation });
    const root = capture.provider.getTracer('app').startSpan('job');
    const { trace, context } = await import('@opentelemetry/api');
    const started = await context.with(trace.setSpan(context.active(), root), () => engine.run(napper, { ticket: 'question' }));
    root.end();
    await engine.client.signal(started.runId, 'approval', { ok: false });
    await shift(db, 3_600_000 + 1_000);
    const worker = engine.worker({ pollMs: 50 });
    await worker.start();
    try {
      await eventually(async () => (await task(db, started.runId)).state === 'completed');
    } finally {
      await worker.stop();
    }
    const [segment1, segment2] = capture.named('invoke_workflow');
    expect(segment2!.spanContext().traceId).toBe(root.spanContext().traceId);
    expect(segment2!.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
    expect(links(segment2!)).toEqual([{ type: 'previous_segment', ...ids(segment1!) }]);
    // The signal sent before the wait was reached is consumed at once: one resumed segment only.
    expect(segment2!.attributes['ratchet.segment.outcome']).toBe('completed');
  });

  it('after a worker is cut off mid-run, links the next segment to the last span it recorded (resumed_after=interrupted)', async () => {
    const first = captureSpans();
    const second = captureSpans();
    let release!: () => void;
    const hung = new Promise<void>((resolve) => (release = resolve));
    const charged = workflow({ name: 'charged', version: '1', input: z.object({}) }, async (ctx) => {
      const receipt = await ctx.effect('charge', { input: { cents: 500 }, execute: async () => ({ receipt: 'r-1' }) });
      return ctx.step('confirm', () => `confirmed ${receipt.receipt}`);
    });
    // Engine A records the charge, then stalls (a GC pause, a partition) past its lease.
    const engineA = await engineOn(db, {
      workflows: [charged],
      instrumentation: first.instrumentation,
      leaseMs: 60_000,
      faults: { afterRecord: () => hung },
    });
    const engineB = await engineOn(db, { workflows: [charged], instrumentation: second.instrumentation });
    const direct = engineA.run(charged, {});
    const runId = await eventually(async () => (await db.pool.query(`SELECT task_id FROM ratchet.operations WHERE step_key = 'charge#1' AND state = 'succeeded'`)).rows[0]?.task_id as string | undefined);
    await db.pool.query(`UPDATE ratchet.tasks SET due_at = ratchet.now() - interval '1 second', lease_expires_at = ratchet.now() - interval '1 second' WHERE id = $1`, [runId]);
    const worker = engineB.worker({ pollMs: 50 });
    await worker.start();
    try {
      await eventually(async () => (await task(db, runId)).state === 'completed');
    } finally {
      await worker.stop();
    }
    release();
    expect((await direct).state).toBe('completed'); // A stops writing: it reports the run as it finds it

    const [effect] = first.named('effect');
    const [segmentA] = first.named('invoke_workflow');
    expect(segmentA!.attributes).toMatchObject({ 'ratchet.segment.outcome': 'lost', 'error.type': 'LEASE_LOST' });
    const [segmentB] = second.named('invoke_workflow');
    expect(segmentB!.attributes).toMatchObject({ 'ratchet.segment.resumed_after': 'interrupted', 'ratchet.segment.outcome': 'completed', 'ratchet.segment.replayed_steps': 1 });
    expect(links(segmentB!).find((l) => l.type === 'previous_segment')).toEqual({ type: 'previous_segment', ...ids(effect!) });
    expect(second.named('effect')).toEqual([]); // the recorded charge is not executed (or traced) again
  });
});
