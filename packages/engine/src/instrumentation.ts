/**
 * Instrumentation hooks: how @ratchet/otel (or anything else) wraps the engine's work in spans
 * without the engine depending on an OpenTelemetry SDK. Each hook receives what is about to run
 * and a function to run inside it (so a span can be active while the step executes and before
 * its row is written); the trace and span ids written on rows are those of the active
 * OpenTelemetry context (`@opentelemetry/api` only).
 */
import { trace } from '@opentelemetry/api';

export interface SegmentInfo {
  readonly runId: string;
  readonly tenantId: string;
  readonly workflowName: string;
  readonly workflowVersion: string;
  readonly attempt: number;
  /** Trace context of the run's origin, as stored on its row. */
  readonly traceId: string | null;
  readonly spanId: string | null;
}

export interface StepInfo {
  readonly runId: string;
  readonly tenantId: string;
  readonly kind: 'step' | 'effect' | 'tool' | 'infer' | 'seal' | 'commit' | 'child';
  readonly name: string;
  readonly stepKey: string;
  readonly attempt: number;
  /** effects and tools: the idempotency key; infer: the model. */
  readonly idempotencyKey?: string;
  readonly model?: string;
  readonly provider?: string;
}

export interface Instrumentation {
  /** Wraps one execution segment of a run (from claim to suspension or settlement). */
  segment?<T>(info: SegmentInfo, run: () => Promise<T>): Promise<T>;
  /** Wraps a fresh step, effect attempt, tool call or model call (never a replayed one). */
  step?<T>(info: StepInfo, run: () => Promise<T>): Promise<T>;
}

/** Trace and span ids of the active OpenTelemetry span, for the row being written. */
export function activeTraceIds(): { traceId: string | null; spanId: string | null } {
  const context = trace.getActiveSpan()?.spanContext();
  if (!context || context.traceId === '00000000000000000000000000000000') return { traceId: null, spanId: null };
  return { traceId: context.traceId, spanId: context.spanId };
}
