/**
 * `RatchetInstrumentation`: the engine's hooks (segment, step) implemented with OpenTelemetry,
 * packaged as an OpenTelemetry instrumentation so `@opentelemetry/sdk-node` hands it its tracer
 * and meter providers.
 *
 * How it reaches engines: when enabled (at construction, unless `enabled: false`) it registers
 * itself process-wide with `registerInstrumentation`, and every engine created without its own
 * `instrumentation` option uses it — listing it in NodeSDK's `instrumentations` is all an app
 * does. Passing it as `createEngine({ instrumentation })` instead scopes it to that engine
 * (`register: false` keeps it off the process-wide slot).
 *
 * Trace shape of one run:
 *
 *   caller span (client.start / engine.run)
 *     └─ invoke_workflow {name}           segment 1: child of the origin
 *          ├─ chat {model}                 one per model call (sample)
 *          ├─ execute_tool {name}          one per tool attempt
 *          ├─ step|effect|sleep|wait|child|emit {name}
 *          └─ seal {name} / commit {name}  with the contract's hash
 *   invoke_workflow {name}                 segment 2 (after a sleep, wait, crash): a new trace,
 *        links → origin, → previous segment   linked to the origin and to the previous segment
 *
 * Resumed segments start new traces by default (a run that sleeps a day would otherwise be one
 * day-long trace, which backends window badly); `resumedSegments: 'origin-trace'` keeps every
 * segment under the origin instead (still linked to the previous one). Replayed steps emit no
 * span: the engine never calls the step hook for them. Every fresh step's span ids are written on
 * its row by the engine, and a segment's on the events it writes.
 */
import {
  context,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Meter,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';
import { InstrumentationBase, type InstrumentationConfig } from '@opentelemetry/instrumentation';
import { registerInstrumentation, type Instrumentation, type SegmentInfo, type StepInfo } from '@ratchet/engine';
import * as A from './attributes.js';
import { captureFromEnvironment, inputMessages, jsonContent, outputMessages } from './content.js';
import { createInstruments, observeDatabase, type Instruments, type Queryable } from './metrics.js';

export interface RatchetInstrumentationConfig extends InstrumentationConfig {
  /**
   * Record prompts, answers, tool arguments and results on spans (GenAI content attributes).
   * Default: the `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` environment switch, else off.
   */
  captureMessageContent?: boolean;
  /** Longest content attribute, in characters. Default 16,384. */
  maxContentLength?: number;
  /** Where a resumed segment's span goes: a new trace linked to the origin (default), or under the origin. */
  resumedSegments?: 'new-trace' | 'origin-trace';
  /** Register process-wide when enabled, for engines created without `instrumentation`. Default true. */
  register?: boolean;
  /** Errors of the database gauges' query (see `observe`). Default: OpenTelemetry's diag logger. */
  onError?: (error: unknown) => void;
}

export class RatchetInstrumentation extends InstrumentationBase<RatchetInstrumentationConfig> implements Instrumentation {
  // Assigned from the base constructor (through _updateMetricInstruments and enable), before
  // field initializers would run: declared, never initialised here.
  declare private instruments: Instruments;
  declare private unregister: (() => void) | undefined;
  declare private observed: { db: Queryable; stop: () => void }[] | undefined;
  declare private segments: WeakMap<SegmentInfo, Context> | undefined;

  constructor(config: RatchetInstrumentationConfig = {}) {
    super(A.INSTRUMENTATION_NAME, A.INSTRUMENTATION_VERSION, config);
  }

  protected override init(): [] {
    return [];
  }

  override enable(): void {
    if (this.unregister || this.getConfig().register === false) return;
    this.unregister = registerInstrumentation(this);
  }

  override disable(): void {
    this.unregister?.();
    this.unregister = undefined;
  }

  override isEnabled(): boolean {
    return this.unregister !== undefined;
  }

  protected override _updateMetricInstruments(): void {
    this.instruments = createInstruments(this.meter);
    // Gauges observed on the previous meter move to the new one.
    for (const entry of this.observed ?? []) {
      entry.stop();
      entry.stop = observeDatabase(this.meter, this.instruments, entry.db, (e) => this.reportError(e));
    }
  }

  /**
   * Reports the database gauges — runs by state, the sealed-contract backlog and its oldest
   * age — from `engine.pool` at each metric collection. Call it in one process per database.
   * Returns a function that stops.
   */
  observe(engine: { pool: Queryable } | Queryable): () => void {
    const db = 'pool' in engine ? engine.pool : engine;
    const entry = { db, stop: observeDatabase(this.meter, this.instruments, db, (e) => this.reportError(e)) };
    (this.observed ??= []).push(entry);
    return () => {
      entry.stop();
      this.observed = this.observed?.filter((e) => e !== entry);
    };
  }

  private reportError(error: unknown): void {
    const onError = this.getConfig().onError;
    if (onError) onError(error);
    else this._diag.warn('database gauges not collected', error);
  }

  private get capture(): boolean {
    return this.getConfig().captureMessageContent ?? captureFromEnvironment();
  }

  private get maxContentLength(): number {
    return this.getConfig().maxContentLength ?? 16_384;
  }

  // ---------------------------------------------------------------- segment

  async segment<T>(info: SegmentInfo, run: () => Promise<T>): Promise<T> {
    const origin = spanContextOf(info.traceId, info.spanId);
    const previous = info.previous ? spanContextOf(info.previous.traceId, info.previous.spanId) : undefined;
    const attributes: Attributes = {
      [A.ATTR_GEN_AI_OPERATION_NAME]: A.GEN_AI_OPERATION_INVOKE_WORKFLOW,
      [A.ATTR_GEN_AI_WORKFLOW_NAME]: info.workflowName,
      [A.ATTR_RATCHET_RUN_ID]: info.runId,
      [A.ATTR_RATCHET_TENANT_ID]: info.tenantId,
      [A.ATTR_RATCHET_WORKFLOW_NAME]: info.workflowName,
      [A.ATTR_RATCHET_WORKFLOW_VERSION]: info.workflowVersion,
      [A.ATTR_RATCHET_RUN_ATTEMPT]: info.attempt,
    };
    if (info.previous) attributes[A.ATTR_RATCHET_SEGMENT_RESUMED_AFTER] = info.previous.reason;

    const links: Link[] = [];
    let parent = context.active();
    let root = false;
    if (!previous) {
      // The first segment continues the starter's trace (on the direct path it is the active span already).
      if (origin && trace.getSpanContext(parent)?.spanId !== origin.spanId) parent = trace.setSpanContext(parent, origin);
    } else if (this.getConfig().resumedSegments === 'origin-trace' && origin) {
      parent = trace.setSpanContext(parent, origin);
      links.push({ context: previous, attributes: { [A.ATTR_RATCHET_LINK_TYPE]: A.LINK_TYPE_PREVIOUS_SEGMENT } });
    } else {
      root = true;
      if (origin) links.push({ context: origin, attributes: { [A.ATTR_RATCHET_LINK_TYPE]: A.LINK_TYPE_ORIGIN } });
      links.push({ context: previous, attributes: { [A.ATTR_RATCHET_LINK_TYPE]: A.LINK_TYPE_PREVIOUS_SEGMENT } });
    }

    const span = this.tracer.startSpan(`${A.SPAN_INVOKE_WORKFLOW} ${info.workflowName}`, { kind: SpanKind.INTERNAL, attributes, links, root }, parent);
    const active = trace.setSpan(parent, span);
    (this.segments ??= new WeakMap()).set(info, active);
    const started = performance.now();
    try {
      return await context.with(active, run);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      const outcome = info.outcome;
      const state = outcome.state ?? 'lost';
      span.setAttribute(A.ATTR_RATCHET_SEGMENT_OUTCOME, state);
      span.setAttribute(A.ATTR_RATCHET_SEGMENT_REPLAYED_STEPS, outcome.replayed);
      span.setAttribute(A.ATTR_RATCHET_SEGMENT_FRESH_STEPS, outcome.fresh);
      if (outcome.wakeAt) span.setAttribute(A.ATTR_RATCHET_RUN_WAKE_AT, outcome.wakeAt.toISOString());
      if (state === 'failed' || state === 'parked' || state === 'lost') {
        const type = state === 'lost' ? 'LEASE_LOST' : (outcome.error?.code ?? outcome.error?.name ?? A.ERROR_TYPE_OTHER);
        span.setAttribute(A.ATTR_ERROR_TYPE, type);
        span.setStatus({ code: SpanStatusCode.ERROR, message: outcome.error?.message ?? `the segment ended ${state}` });
      }
      span.end();
      const metricAttributes = { [A.ATTR_RATCHET_WORKFLOW_NAME]: info.workflowName, [A.ATTR_RATCHET_SEGMENT_OUTCOME]: state };
      this.instruments.segmentDuration.record((performance.now() - started) / 1000, metricAttributes);
      if (state === 'completed' || state === 'failed' || state === 'cancelled' || state === 'parked') {
        this.instruments.runsSettled.add(1, { [A.ATTR_RATCHET_WORKFLOW_NAME]: info.workflowName, [A.ATTR_RATCHET_RUN_STATE]: state });
      }
    }
  }

  // ---------------------------------------------------------------- steps

  async step<T>(info: StepInfo, run: () => Promise<T>): Promise<T> {
    // Parent: the segment's span, even when the step starts from a callback outside its async
    // context (a signal's NOTIFY, a lease renewal).
    const parent = (info.segment && this.segments?.get(info.segment)) ?? context.active();
    const { name, kind, attributes } = describeStep(info, this.capture, this.maxContentLength);
    const span = this.tracer.startSpan(name, { kind, attributes }, parent);
    const started = performance.now();
    let error: unknown;
    try {
      return await context.with(trace.setSpan(parent, span), run);
    } catch (thrown) {
      error = thrown;
      failSpan(span, thrown);
      throw thrown;
    } finally {
      finishStep(span, info, this.capture, this.maxContentLength);
      span.end();
      if (info.kind === 'infer') this.recordModelCall(info, (performance.now() - started) / 1000, error);
      if (info.kind === 'commit' && info.outcome.contractStatus === 'committed' && info.outcome.sealedAt && info.outcome.settledAt) {
        const seconds = (info.outcome.settledAt.getTime() - info.outcome.sealedAt.getTime()) / 1000;
        this.instruments.sealToCommit.record(Math.max(0, seconds), info.segment ? { [A.ATTR_RATCHET_WORKFLOW_NAME]: info.segment.workflowName } : {});
      }
    }
  }

  private recordModelCall(info: StepInfo, seconds: number, error: unknown): void {
    const attributes: Attributes = { [A.ATTR_GEN_AI_OPERATION_NAME]: A.GEN_AI_OPERATION_CHAT, [A.ATTR_GEN_AI_REQUEST_MODEL]: info.model };
    if (info.provider) attributes[A.ATTR_GEN_AI_PROVIDER_NAME] = info.provider;
    if (info.outcome.responseModel) attributes[A.ATTR_GEN_AI_RESPONSE_MODEL] = info.outcome.responseModel;
    if (error !== undefined) attributes[A.ATTR_ERROR_TYPE] = errorType(error);
    this.instruments.genAiDuration.record(seconds, attributes);
    const usage = info.outcome.usage;
    if (usage?.inputTokens !== undefined) this.instruments.genAiTokens.record(usage.inputTokens, { ...attributes, [A.ATTR_GEN_AI_TOKEN_TYPE]: A.GEN_AI_TOKEN_TYPE_INPUT });
    if (usage?.outputTokens !== undefined) this.instruments.genAiTokens.record(usage.outputTokens, { ...attributes, [A.ATTR_GEN_AI_TOKEN_TYPE]: A.GEN_AI_TOKEN_TYPE_OUTPUT });
  }

  /** The meter in use (for tests and for apps adding their own instruments beside Ratchet's). */
  get ratchetMeter(): Meter {
    return this.meter;
  }
}

/** Ratchet's OpenTelemetry instrumentation, for `new NodeSDK({ instrumentations: [ratchetInstrumentation()] })`. */
export function ratchetInstrumentation(config: RatchetInstrumentationConfig = {}): RatchetInstrumentation {
  return new RatchetInstrumentation(config);
}

function spanContextOf(traceId: string | null, spanId: string | null): SpanContext | undefined {
  if (!traceId || !spanId) return undefined;
  // Sampling flags are not stored with the run: a stored origin was recorded, so it is treated as sampled.
  const spanContext: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: true };
  return trace.isSpanContextValid(spanContext) ? spanContext : undefined;
}

/** `error.type`: a Ratchet error's stable code, else the error's class name, else `_OTHER`. */
export function errorType(error: unknown): string {
  if (typeof error === 'object' && error !== null) {
    const code = (error as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(code)) return code;
    const name = (error as { name?: unknown }).name;
    if (typeof name === 'string' && name.length > 0) return name;
  }
  return A.ERROR_TYPE_OTHER;
}

function failSpan(span: Span, error: unknown): void {
  span.setAttribute(A.ATTR_ERROR_TYPE, errorType(error));
  if (error instanceof Error) span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

function describeStep(info: StepInfo, capture: boolean, maxLength: number): { name: string; kind: SpanKind; attributes: Attributes } {
  const attributes: Attributes = {
    [A.ATTR_RATCHET_RUN_ID]: info.runId,
    [A.ATTR_RATCHET_STEP_NAME]: info.name,
    [A.ATTR_RATCHET_STEP_KEY]: info.stepKey,
    [A.ATTR_RATCHET_STEP_KIND]: info.kind,
    [A.ATTR_RATCHET_STEP_ATTEMPT]: info.attempt,
  };
  if (info.segment) attributes[A.ATTR_RATCHET_WORKFLOW_NAME] = info.segment.workflowName;
  switch (info.kind) {
    case 'infer':
      attributes[A.ATTR_GEN_AI_OPERATION_NAME] = A.GEN_AI_OPERATION_CHAT;
      attributes[A.ATTR_GEN_AI_REQUEST_MODEL] = info.model;
      if (info.provider) attributes[A.ATTR_GEN_AI_PROVIDER_NAME] = info.provider;
      attributes[A.ATTR_RATCHET_INFER_SAMPLE] = info.attempt;
      if (capture && info.input !== undefined) attributes[A.ATTR_GEN_AI_INPUT_MESSAGES] = inputMessages(info.input, maxLength);
      return { name: `${A.SPAN_CHAT} ${info.model}`, kind: SpanKind.CLIENT, attributes };
    case 'tool':
      attributes[A.ATTR_GEN_AI_OPERATION_NAME] = A.GEN_AI_OPERATION_EXECUTE_TOOL;
      attributes[A.ATTR_GEN_AI_TOOL_NAME] = info.name;
      attributes[A.ATTR_GEN_AI_TOOL_TYPE] = A.GEN_AI_TOOL_TYPE_FUNCTION;
      if (info.idempotencyKey) attributes[A.ATTR_GEN_AI_TOOL_CALL_ID] = info.idempotencyKey;
      if (capture) attributes[A.ATTR_GEN_AI_TOOL_CALL_ARGUMENTS] = jsonContent(info.input, maxLength);
      return { name: `${A.SPAN_EXECUTE_TOOL} ${info.name}`, kind: SpanKind.INTERNAL, attributes };
    case 'effect':
      if (info.idempotencyKey) attributes[A.ATTR_RATCHET_IDEMPOTENCY_KEY] = info.idempotencyKey;
      return { name: `effect ${info.name}`, kind: SpanKind.CLIENT, attributes };
    case 'seal':
    case 'commit':
      if (info.contractId) attributes[A.ATTR_RATCHET_CONTRACT_ID] = info.contractId;
      if (info.contractHash) attributes[A.ATTR_RATCHET_CONTRACT_HASH] = info.contractHash;
      if (info.agent) attributes[A.ATTR_RATCHET_CONTRACT_AGENT] = info.agent;
      // A commit's step name holds the contract id: the span is named after its agent instead (span names stay low-cardinality).
      if (info.kind === 'commit') return { name: info.agent ? `commit ${info.agent}` : 'commit', kind: SpanKind.INTERNAL, attributes };
      return { name: `seal ${info.name}`, kind: SpanKind.INTERNAL, attributes };
    case 'sleep':
      if (info.until) attributes[A.ATTR_RATCHET_SLEEP_UNTIL] = info.until.toISOString();
      return { name: `sleep ${info.name}`, kind: SpanKind.INTERNAL, attributes };
    case 'wait':
      if (info.signals) attributes[A.ATTR_RATCHET_WAIT_SIGNALS] = [...info.signals];
      if (info.until) attributes[A.ATTR_RATCHET_WAIT_TIMEOUT_AT] = info.until.toISOString();
      return { name: `wait ${info.name}`, kind: SpanKind.INTERNAL, attributes };
    case 'child':
      if (info.childWorkflow) attributes[A.ATTR_RATCHET_CHILD_WORKFLOW] = info.childWorkflow;
      return { name: `child ${info.name}`, kind: SpanKind.INTERNAL, attributes };
    case 'emit':
      if (info.topic) attributes[A.ATTR_RATCHET_EMIT_TOPIC] = info.topic;
      return { name: `emit ${info.topic ?? info.name}`, kind: SpanKind.PRODUCER, attributes };
    default:
      return { name: `step ${info.name}`, kind: SpanKind.INTERNAL, attributes };
  }
}

/** What the step learned while it ran (the engine filled `info.outcome`). */
function finishStep(span: Span, info: StepInfo, capture: boolean, maxLength: number): void {
  const o = info.outcome;
  if (info.kind === 'infer') {
    if (o.responseModel) span.setAttribute(A.ATTR_GEN_AI_RESPONSE_MODEL, o.responseModel);
    if (o.usage?.inputTokens !== undefined) span.setAttribute(A.ATTR_GEN_AI_USAGE_INPUT_TOKENS, o.usage.inputTokens);
    if (o.usage?.outputTokens !== undefined) span.setAttribute(A.ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, o.usage.outputTokens);
    if (o.accepted !== undefined) span.setAttribute(A.ATTR_RATCHET_INFER_ACCEPTED, o.accepted);
    if (capture && 'output' in o) span.setAttribute(A.ATTR_GEN_AI_OUTPUT_MESSAGES, outputMessages(o.output, maxLength));
  } else if (info.kind === 'tool') {
    if (capture && 'output' in o) span.setAttribute(A.ATTR_GEN_AI_TOOL_CALL_RESULT, jsonContent(o.output, maxLength));
  } else if (info.kind === 'seal' || info.kind === 'commit') {
    if (o.contractStatus) span.setAttribute(A.ATTR_RATCHET_CONTRACT_STATUS, o.contractStatus);
    if (o.rejection) span.setAttribute(A.ATTR_RATCHET_CONTRACT_REJECTION, o.rejection);
    // A rejection is recorded, not thrown, inside the commit's transaction: the span still shows it.
    if (o.contractStatus === 'failed') {
      span.setAttribute(A.ATTR_ERROR_TYPE, 'CONTRACT_REJECTED');
      span.setStatus({ code: SpanStatusCode.ERROR, message: `contract rejected: ${o.rejection ?? 'rejected'}` });
    }
  } else if (info.kind === 'wait') {
    span.setAttribute(A.ATTR_RATCHET_WAIT_RECEIVED, 'output' in o);
  } else if (info.kind === 'child') {
    if (o.childRunId) span.setAttribute(A.ATTR_RATCHET_CHILD_RUN_ID, o.childRunId);
  }
}
