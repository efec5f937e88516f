/**
 * OpenTelemetry for an agent run, on the default embedded PostgreSQL: a tool call, a model call
 * (`chat {model}` with GenAI attributes; the stub model's first answer fails the schema, so two
 * samples), a sealed contract and its commit — with a 2-second cool-off sleep between seal and
 * commit, so the run has two execution segments: the first inline (`engine.run`, inside the
 * caller's span), the second on a worker after the sleep, in a new trace linked to the first.
 *
 * It prints the span trees and then goes the other way, from rows to spans, with the SQL of
 * docs/observability.md: the operation and event rows of the run carry the ids of the spans
 * printed above.
 *
 *   cd /work/main && pnpm exec tsx examples/otel.ts
 *
 * Spans stay in memory here (`captureSpans`, from @ratchet/otel/testing). To send them to
 * Jaeger or Grafana Tempo instead, start NodeSDK with `ratchetInstrumentation()` and an OTLP
 * exporter, and create the engine without `instrumentation` (docs/observability.md; this
 * workspace's examples package does not depend on the OTLP exporter, hence the in-memory
 * version and the relative import below — in an app: `import … from '@ratchet/otel/testing'`).
 */
import { z } from 'zod';
import { defineAction, workflow } from '@ratchet/sdk';
import { createEngine } from '@ratchet/engine';
import { captureSpans } from '@ratchet/otel/testing';

const capture = captureSpans({ captureMessageContent: process.env.CAPTURE_CONTENT === '1' });

const saveNote = defineAction({
  name: 'notes.insert',
  input: z.object({ ticket: z.string(), team: z.string() }),
  run: async (tx, input) => {
    const { rows } = await tx.query(`INSERT INTO otel_example_notes (ticket, team) VALUES ($1, $2) RETURNING id`, [input.ticket, input.team]);
    return { noteId: rows[0].id as number };
  },
});

const triage = workflow({ name: 'otel-triage', version: '1', input: z.object({ ticket: z.string() }) }, async (ctx, { ticket }) => {
  const customer = await ctx.tool('lookup_customer', { input: { ticket }, execute: async () => ({ plan: 'pro' }) });
  const decision = await ctx.infer('classify', {
    model: 'gpt-4.1-mini',
    provider: 'openai',
    schema: z.object({ team: z.enum(['billing', 'support']) }),
    prompt: [{ role: 'user', content: ticket }],
    // A stand-in for a real model client: the first sample is malformed and is re-sampled.
    call: async ({ attempt }) => ({
      output: attempt === 1 ? { team: 'sales???' } : { team: ticket.includes('invoice') ? 'billing' : 'support' },
      usage: { inputTokens: 31, outputTokens: 7 },
      responseModel: 'gpt-4.1-mini-2025-04-14',
    }),
  });
  const contract = await ctx.seal('note', { agent: 'triage', operations: [{ action: 'notes.insert', input: { ticket, team: decision.team } }] });
  await ctx.sleep('cool-off', '2s');
  const committed = await ctx.commit(contract);
  return { plan: customer.plan, team: decision.team, hash: contract.hash, results: committed.results };
});

const engine = await createEngine({ workflows: [triage], actions: [saveNote], instrumentation: capture.instrumentation });
try {
  await engine.migrate();
  await engine.pool.query(`CREATE TABLE IF NOT EXISTS otel_example_notes (id serial PRIMARY KEY, ticket text NOT NULL, team text NOT NULL)`);

  // The caller's span: an HTTP handler, a CLI command. The run's row keeps its ids (the origin).
  const { started, request } = await capture.provider.getTracer('example-app').startActiveSpan('POST /tickets', async (span) => {
    try {
      return { started: await engine.run(triage, { ticket: 'my invoice is wrong' }), request: span };
    } finally {
      span.end();
    }
  });
  console.log(`run ${started.runId} is ${started.state} (the sleep suspended it); a worker resumes it`);

  const worker = engine.worker({ pollMs: 200 });
  await worker.start();
  console.log('output:', await engine.client.handle(started.runId).result({ timeout: '30s' }));
  await worker.stop();

  console.log('\nspans (trace/span ids in brackets; ↪ marks a link):\n');
  console.log(capture.tree());

  // From rows to spans: the same SQL as docs/observability.md.
  const { rows } = await engine.pool.query(
    `SELECT 'operation' AS row, o.kind || ' ' || o.step_key AS what, o.trace_id, o.span_id FROM ratchet.operations o WHERE o.task_id = $1
     UNION ALL
     SELECT 'event', e.event_type, e.trace_id, e.span_id FROM ratchet.events e WHERE e.task_id = $1
     ORDER BY 1, 2`,
    [started.runId],
  );
  console.log('\nrows → spans:');
  const names = new Map(capture.spans().map((s) => [s.spanContext().spanId, s.name]));
  names.set(request.spanContext().spanId, 'POST /tickets');
  for (const r of rows) console.log(`  ${r.row.padEnd(9)} ${String(r.what).padEnd(40)} ${r.trace_id}/${r.span_id}  ${names.get(r.span_id) ?? '?'}`);
} finally {
  await capture.shutdown();
  await engine.close();
}
