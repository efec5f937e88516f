/**
 * The agent the OpenTelemetry tests trace: a tool call, a model call whose first sample fails
 * its schema (so two `chat` spans, one accepted), a sealed contract and its commit — against the
 * triage fixture's real `users` / `tickets` tables. Plus row readers for the ids the engine
 * writes, and a metric reader collected on demand.
 */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { MetricReader, MeterProvider, type MetricData } from '@opentelemetry/sdk-metrics';
import type { TestDatabase } from '../helpers/database.js';

const Decision = z.object({ priority: z.enum(['high', 'medium', 'low']), team: z.string().min(1) });

export const RESPONSE_MODEL = 'gpt-4.1-mini-2025-04-14';

/** Model calls made, by ticket (the stub model counts them here; replay must not add any). */
export const modelCalls = new Map<string, number>();

export const supportAgent = workflow(
  { name: 'support-agent', version: '1', input: z.object({ ticket: z.string(), userId: z.number().int() }) },
  async (ctx, input) => {
    const user = await ctx.tool('lookup_user', {
      input: { id: input.userId },
      execute: async ({ input }) => ({ id: input.id, plan: 'pro' }),
    });
    const decision = await ctx.infer('classify', {
      model: 'gpt-4.1-mini',
      provider: 'openai',
      schema: Decision,
      prompt: [
        { role: 'system', content: 'Classify the support ticket.' },
        { role: 'user', content: input.ticket },
      ],
      call: async ({ attempt }) => {
        modelCalls.set(input.ticket, (modelCalls.get(input.ticket) ?? 0) + 1);
        const output = attempt === 1 ? { priority: 'urgent!!', team: '' } : { priority: 'high', team: user.plan === 'pro' ? 'priority-support' : 'support' };
        return { output, usage: { inputTokens: 40, outputTokens: attempt === 1 ? 5 : 9 }, responseModel: RESPONSE_MODEL };
      },
    });
    const contract = await ctx.seal('ticket', {
      agent: 'support-agent',
      operations: [{ action: 'tickets.insert', input: { ...decision, summary: input.ticket, userId: input.userId } }],
      dependencies: [{ kind: 'exists', table: 'users', where: { id: input.userId } }],
    });
    const committed = await ctx.commit(contract);
    return { hash: contract.hash, ticketId: (committed.results[0] as { ticketId: number }).ticketId };
  },
);

export interface RowIds {
  kind: string;
  stepKey: string;
  traceId: string | null;
  spanId: string | null;
}

export async function operationIds(db: TestDatabase, runId: string): Promise<RowIds[]> {
  const { rows } = await db.pool.query(
    `SELECT kind, step_key AS "stepKey", trace_id AS "traceId", span_id AS "spanId" FROM ratchet.operations WHERE task_id = $1 ORDER BY seq`,
    [runId],
  );
  return rows;
}

export async function eventIds(db: TestDatabase, runId: string): Promise<{ type: string; traceId: string | null; spanId: string | null }[]> {
  const { rows } = await db.pool.query(
    `SELECT event_type AS type, trace_id AS "traceId", span_id AS "spanId" FROM ratchet.events WHERE task_id = $1 ORDER BY seq`,
    [runId],
  );
  return rows;
}

class CollectingReader extends MetricReader {
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** A meter provider whose metrics are read on demand: `metrics()` collects and returns them by name. */
export function collectMetrics(): { provider: MeterProvider; metrics(): Promise<Map<string, MetricData>> } {
  const reader = new CollectingReader();
  const provider = new MeterProvider({ readers: [reader] });
  return {
    provider,
    async metrics() {
      const { resourceMetrics } = await reader.collect();
      const all = new Map<string, MetricData>();
      for (const scope of resourceMetrics.scopeMetrics) for (const metric of scope.metrics) all.set(metric.descriptor.name, metric);
      return all;
    },
  };
}
