/**
 * The span tree of an agent run (tool + infer + seal + commit) in an in-memory exporter: names,
 * kinds, parents, GenAI and ratchet.* attributes; content only on opt-in; the trace and span
 * ids written on tasks, operations and events equal the exported spans'; GenAI and Ratchet
 * metrics; failures carry error.type.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { NonRetryableError, workflow } from '@ratchet/sdk';
import { captureSpans, type SpanCapture } from '@ratchet/otel/testing';
import type { HistogramMetricData, GaugeMetricData } from '@opentelemetry/sdk-metrics';
import { engineOn, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { APP_DDL, appActions, appChecks, appTables } from '../fixtures/triage.js';
import { collectMetrics, eventIds, operationIds, RESPONSE_MODEL, supportAgent } from './agent.js';

/** The query of docs/observability.md, "From a failed row to its trace". */
const FAILED_RUNS_SQL = `
SELECT t.id AS run_id, t.workflow_name, t.error->>'code' AS code, t.error->>'message' AS message,
       e.trace_id AS failed_in_trace, e.span_id AS segment_span,
       o.step_key AS failed_step, o.span_id AS step_span,
       t.trace_id AS origin_trace
  FROM ratchet.tasks t
  JOIN ratchet.events e ON e.tenant_id = t.tenant_id AND e.task_id = t.id AND e.seq = t.state_version
  LEFT JOIN LATERAL (
    SELECT step_key, span_id FROM ratchet.operations o
     WHERE o.tenant_id = t.tenant_id AND o.task_id = t.id AND o.state IN ('failed', 'unknown')
     ORDER BY o.seq DESC LIMIT 1) o ON true
 WHERE t.state IN ('failed', 'parked') AND t.updated_at > now() - interval '1 day'
 ORDER BY t.updated_at DESC`;

let db: TestDatabase;
const engineOptions = { actions: appActions, checks: appChecks, contractTables: appTables };

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(APP_DDL);
  await db.pool.query(`INSERT INTO users (id, name) SELECT g, 'user ' || g FROM generate_series(1, 10) g`);
});

const ids = (span: ReadableSpan) => ({ traceId: span.spanContext().traceId, spanId: span.spanContext().spanId });
const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

/** engine.run inside a caller's span (an HTTP handler, say), as an app would. */
async function runInRequest(capture: SpanCapture, run: () => Promise<{ runId: string; state: string; output?: unknown }>) {
  const tracer = capture.provider.getTracer('app');
  return tracer.startActiveSpan('POST /tickets', async (request) => {
    try {
      return { result: await run(), request };
    } finally {
      request.end();
    }
  });
}

describe('an agent run, traced', () => {
  it('is one invoke_workflow span under the caller, with chat, execute_tool, seal and commit children', async () => {
    const capture = captureSpans();
    const metrics = collectMetrics();
    capture.instrumentation.setMeterProvider(metrics.provider);
    const engine = await engineOn(db, { workflows: [supportAgent], ...engineOptions, instrumentation: capture.instrumentation });
    const stopObserving = capture.instrumentation.observe(engine);

    const { result, request } = await runInRequest(capture, () => engine.run(supportAgent, { ticket: 'my invoices are wrong', userId: 1 }));
    expect(result.state).toBe('completed');
    const runId = result.runId;
    const output = result.output as { hash: string };

    const [segment, ...others] = capture.named('invoke_workflow');
    expect(others).toEqual([]);
    expect(segment!.name).toBe('invoke_workflow support-agent');
    expect(segment!.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(segment!)).toBe(request.spanContext().spanId);
    expect(segment!.spanContext().traceId).toBe(request.spanContext().traceId);
    expect(segment!.links).toEqual([]);
    expect(segment!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_workflow',
      'gen_ai.workflow.name': 'support-agent',
      'ratchet.run.id': runId,
      'ratchet.workflow.name': 'support-agent',
      'ratchet.workflow.version': '1',
      'ratchet.tenant.id': '00000000-0000-0000-0000-000000000000',
      'ratchet.segment.outcome': 'completed',
      'ratchet.segment.fresh_steps': 4,
      'ratchet.segment.replayed_steps': 0,
    });
    expect(typeof segment!.attributes['ratchet.run.attempt']).toBe('number');
    expect(segment!.status.code).not.toBe(SpanStatusCode.ERROR);

    // Every step span is a child of the segment, in the segment's trace.
    const children = capture.spans().filter((s) => parentOf(s) === segment!.spanContext().spanId);
    expect(children.map((s) => s.name)).toEqual(['execute_tool lookup_user', 'chat gpt-4.1-mini', 'chat gpt-4.1-mini', 'seal ticket', 'commit support-agent']);
    const [tool, rejected, accepted, seal, commit] = children as [ReadableSpan, ReadableSpan, ReadableSpan, ReadableSpan, ReadableSpan];

    expect(tool.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'lookup_user',
      'gen_ai.tool.type': 'function',
      'gen_ai.tool.call.id': `${runId}:lookup_user#1`,
      'ratchet.step.kind': 'tool',
      'ratchet.step.key': 'lookup_user#1',
      'ratchet.run.id': runId,
    });
    for (const [chat, sample] of [[rejected, 1], [accepted, 2]] as const) {
      expect(chat.kind).toBe(SpanKind.CLIENT);
      expect(chat.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': 'gpt-4.1-mini',
        'gen_ai.response.model': RESPONSE_MODEL,
        'gen_ai.usage.input_tokens': 40,
        'ratchet.infer.sample': sample,
        'ratchet.infer.accepted': sample === 2,
        'ratchet.step.key': 'classify#1',
      });
    }
    expect(rejected.attributes['gen_ai.usage.output_tokens']).toBe(5);
    expect(accepted.attributes['gen_ai.usage.output_tokens']).toBe(9);

    const contract = (await db.pool.query(`SELECT id, body_hash FROM ratchet.contracts WHERE task_id = $1`, [runId])).rows[0];
    expect(contract.body_hash).toBe(output.hash);
    expect(seal.attributes).toMatchObject({ 'ratchet.contract.hash': output.hash, 'ratchet.contract.id': contract.id, 'ratchet.contract.status': 'sealed' });
    expect(commit.attributes).toMatchObject({ 'ratchet.contract.hash': output.hash, 'ratchet.contract.id': contract.id, 'ratchet.contract.status': 'committed', 'ratchet.step.attempt': 1 });

    // Content is never captured unless asked for.
    for (const span of capture.spans()) {
      expect(Object.keys(span.attributes).filter((k) => /messages|arguments|call\.result/.test(k))).toEqual([]);
    }

    // The ids on the rows are the exported spans' ids.
    expect(await task(db, runId)).toMatchObject({ trace_id: request.spanContext().traceId, span_id: request.spanContext().spanId });
    expect(await operationIds(db, runId)).toEqual([
      { kind: 'tool', stepKey: 'lookup_user#1', ...ids(tool) },
      { kind: 'infer', stepKey: 'classify#1', ...ids(accepted) },
      { kind: 'seal', stepKey: 'ticket#1', ...ids(seal) },
      { kind: 'commit', stepKey: expect.stringMatching(/^commit:/), ...ids(commit) },
    ]);
    expect(await eventIds(db, runId)).toEqual([
      { type: 'started', traceId: request.spanContext().traceId, spanId: request.spanContext().spanId },
      { type: 'contract_sealed', ...ids(seal) },
      { type: 'contract_committed', ...ids(commit) },
      { type: 'completed', ...ids(segment!) },
    ]);

    // Metrics: GenAI client histograms per model call, seal → commit latency, database gauges.
    const all = await metrics.metrics();
    const duration = all.get('gen_ai.client.operation.duration') as HistogramMetricData;
    expect(duration.descriptor.unit).toBe('s');
    expect(duration.dataPoints.map((p) => [p.attributes, p.value.count])).toEqual([
      [{ 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'gpt-4.1-mini', 'gen_ai.provider.name': 'openai', 'gen_ai.response.model': RESPONSE_MODEL }, 2],
    ]);
    const tokens = all.get('gen_ai.client.token.usage') as HistogramMetricData;
    const byType = Object.fromEntries(tokens.dataPoints.map((p) => [p.attributes['gen_ai.token.type'], p.value.sum]));
    expect(byType).toEqual({ input: 80, output: 14 });
    const sealToCommit = all.get('ratchet.contract.seal_to_commit.duration') as HistogramMetricData;
    expect(sealToCommit.dataPoints[0]!.value.count).toBe(1);
    expect(sealToCommit.dataPoints[0]!.value.min).toBeGreaterThanOrEqual(0);
    const settled = all.get('ratchet.runs.settled')!;
    expect(settled.dataPoints.map((p) => [p.attributes['ratchet.run.state'], p.value])).toEqual([['completed', 1]]);
    const backlog = all.get('ratchet.contracts.sealed') as GaugeMetricData;
    expect(backlog.dataPoints[0]!.value).toBe(0);
    stopObserving();
    await capture.shutdown();
  });

  it('captures prompts, answers, tool arguments and results only when opted in, cut at the configured length', async () => {
    const capture = captureSpans({ captureMessageContent: true, maxContentLength: 4_000 });
    const engine = await engineOn(db, { workflows: [supportAgent], ...engineOptions, instrumentation: capture.instrumentation });
    const result = await engine.run(supportAgent, { ticket: 'please refund order 7', userId: 2 });
    expect(result.state).toBe('completed');
    const [, accepted] = capture.named('chat');
    expect(JSON.parse(String(accepted!.attributes['gen_ai.input.messages']))).toEqual([
      { role: 'system', parts: [{ type: 'text', content: 'Classify the support ticket.' }] },
      { role: 'user', parts: [{ type: 'text', content: 'please refund order 7' }] },
    ]);
    const answer = JSON.parse(String(accepted!.attributes['gen_ai.output.messages']));
    expect(answer[0].role).toBe('assistant');
    expect(JSON.parse(answer[0].parts[0].content)).toEqual({ priority: 'high', team: 'priority-support' });
    const [tool] = capture.named('execute_tool');
    expect(JSON.parse(String(tool!.attributes['gen_ai.tool.call.arguments']))).toEqual({ id: 2 });
    expect(JSON.parse(String(tool!.attributes['gen_ai.tool.call.result']))).toEqual({ id: 2, plan: 'pro' });

    const tiny = captureSpans({ captureMessageContent: true, maxContentLength: 20 });
    const small = await engineOn(db, { workflows: [supportAgent], ...engineOptions, instrumentation: tiny.instrumentation });
    await small.run(supportAgent, { ticket: 'x'.repeat(500), userId: 3 });
    const cut = String(tiny.named('chat')[0]!.attributes['gen_ai.input.messages']);
    expect(cut).toHaveLength(20);
    expect(cut.endsWith('…')).toBe(true);
  });

  it('marks failures with error.type: the step span with the thrown error’s code, the segment with the run’s', async () => {
    const capture = captureSpans();
    const flaky = workflow({ name: 'flaky-tool', version: '1', input: z.object({}) }, async (ctx) => {
      await ctx.tool('charge_card', { input: {}, execute: async () => Promise.reject(new NonRetryableError('card declined')) });
    });
    const engine = await engineOn(db, { workflows: [flaky], instrumentation: capture.instrumentation });
    const result = await engine.run(flaky, {});
    expect(result.state).toBe('failed');
    const [tool] = capture.named('execute_tool');
    expect(tool!.status.code).toBe(SpanStatusCode.ERROR);
    expect(tool!.attributes['error.type']).toBe('NON_RETRYABLE');
    expect(tool!.events.map((e) => e.name)).toContain('exception');
    const [segment] = capture.named('invoke_workflow');
    expect(segment!.status.code).toBe(SpanStatusCode.ERROR);
    expect(segment!.attributes).toMatchObject({ 'error.type': 'STEP_FAILED', 'ratchet.segment.outcome': 'failed' });
    expect((await eventIds(db, result.runId)).at(-1)).toEqual({ type: 'failed', ...ids(segment!) });

    // docs/observability.md: from the failed row to its trace, segment and failing step.
    const { rows } = await db.pool.query(FAILED_RUNS_SQL);
    expect(rows.find((r) => r.run_id === result.runId)).toMatchObject({
      code: 'STEP_FAILED',
      failed_in_trace: segment!.spanContext().traceId,
      segment_span: segment!.spanContext().spanId,
      failed_step: 'charge_card#1',
      step_span: tool!.spanContext().spanId,
    });
  });

  it('a rejected contract leads to its commit span (docs/observability.md)', async () => {
    const capture = captureSpans();
    const engine = await engineOn(db, { workflows: [supportAgent], ...engineOptions, instrumentation: capture.instrumentation });
    const result = await engine.run(supportAgent, { ticket: 'nobody', userId: 999 }); // no such user: the exists dependency fails
    expect(result.state).toBe('failed');
    const [commit] = capture.named('commit');
    expect(commit!.attributes).toMatchObject({ 'ratchet.contract.status': 'failed', 'error.type': 'CONTRACT_REJECTED' });
    expect(String(commit!.attributes['ratchet.contract.rejection_reason'])).toBe('dependency');
    const { rows } = await db.pool.query(
      `SELECT c.id, c.error_detail->>'reason' AS reason, o.trace_id, o.span_id
         FROM ratchet.contracts c
         JOIN ratchet.operations o ON o.tenant_id = c.tenant_id AND o.task_id = c.task_id AND o.kind = 'commit'
                                  AND o.step_key LIKE 'commit:' || c.id || '#%'
        WHERE c.status = 'failed' AND c.tenant_id = $1 AND c.task_id = $2`,
      ['00000000-0000-0000-0000-000000000000', result.runId],
    );
    expect(rows).toEqual([{ id: expect.any(String), reason: 'dependency', ...{ trace_id: ids(commit!).traceId, span_id: ids(commit!).spanId } }]);
  });

  it('a child run started by a step has that step’s span as its origin', async () => {
    const capture = captureSpans();
    const child = workflow({ name: 'otel-child', version: '1', input: z.object({ n: z.number() }) }, async (_ctx, { n }) => n * 2);
    const parent = workflow({ name: 'otel-parent', version: '1', input: z.object({}) }, async (ctx) => ctx.child('double', child, { n: 21 }));
    const engine = await engineOn(db, { workflows: [parent, child], instrumentation: capture.instrumentation });
    const result = await engine.run(parent, {});
    expect(result.state).toBe('waiting'); // no worker runs the child here
    const [span] = capture.named('child');
    expect(span!.attributes).toMatchObject({ 'ratchet.child.workflow': 'otel-child', 'ratchet.step.key': 'double#1' });
    const childRunId = String(span!.attributes['ratchet.child.run_id']);
    expect(await task(db, childRunId)).toMatchObject({ parent_id: result.runId, ...{ trace_id: ids(span!).traceId, span_id: ids(span!).spanId } });
  });

  it('costs nothing but a property read when no hooks are installed: rows carry the caller’s ids, no spans', async () => {
    const capture = captureSpans();
    const engine = await engineOn(db, { workflows: [supportAgent], ...engineOptions, instrumentation: false });
    const { result, request } = await runInRequest(capture, () => engine.run(supportAgent, { ticket: 'untraced', userId: 4 }));
    expect(result.state).toBe('completed');
    expect(capture.spans().map((s) => s.name)).toEqual(['POST /tickets']);
    const rows = await operationIds(db, result.runId);
    // Without hooks, rows carry whatever span is active: here the caller's.
    expect(new Set(rows.map((r) => r.spanId))).toEqual(new Set([request.spanContext().spanId]));
    expect(trace.getActiveSpan()).toBeUndefined();
  });
});
