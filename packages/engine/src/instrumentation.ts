/**
 * Instrumentation hooks: how @ratchet/otel (or anything else) wraps the engine's work in spans
 * without the engine depending on an OpenTelemetry SDK (it imports `@opentelemetry/api` only).
 *
 * Each hook receives what is about to run and a function to run inside it, so a span can be
 * active while the work executes (the user's own HTTP calls nest under it). The engine fills the
 * info's `outcome` before that function settles (the answer's model and token usage, the
 * contract's status, the segment's end state), so a hook reads it after awaiting.
 *
 * Ids on rows: inside `step`, the engine notes the active span's ids and writes them on that
 * step's row; a segment's own ids go on the events it writes (its suspension or settlement) and
 * on rows of steps that have no hook of their own. So `trace_id`/`span_id` on operations and
 * events are the ids of exported spans, and a resumed segment can link to the previous one by
 * reading them back (`SegmentInfo.previous`).
 *
 * Absent hooks cost one property read per step. Where the engine finds its hooks: the
 * `instrumentation` option of `createEngine`, else the one registered process-wide with
 * `registerInstrumentation` (what `ratchetInstrumentation()` does when the OpenTelemetry SDK
 * enables it), else none; `instrumentation: false` opts an engine out.
 */
import { trace } from '@opentelemetry/api';

export interface TraceIds {
  readonly traceId: string;
  readonly spanId: string;
}

export interface SegmentInfo {
  readonly runId: string;
  readonly tenantId: string;
  readonly workflowName: string;
  readonly workflowVersion: string;
  /** Claims of the run since its last progress-making settle (1 on a first claim; 0 on the direct path). */
  readonly attempt: number;
  /** Trace context of the run's origin (the caller of start / run), as stored on its row. */
  readonly traceId: string | null;
  readonly spanId: string | null;
  /**
   * The span that ended the run's previous segment (its `sleeping`/`waiting` event), or — when
   * that segment was cut short (crash, lost lease) — the span of the last step it recorded.
   * Null for the run's first segment.
   */
  readonly previous: (TraceIds & { readonly reason: 'sleeping' | 'waiting' | 'released' | 'interrupted' }) | null;
  /** Filled by the engine before the segment's function settles. */
  readonly outcome: SegmentOutcome;
}

export interface SegmentOutcome {
  state?: 'completed' | 'failed' | 'cancelled' | 'parked' | 'sleeping' | 'waiting' | 'lost';
  /** sleeping / waiting: when the run is due again (null: only a signal wakes it). */
  wakeAt?: Date | null;
  /** failed / cancelled / parked: the stored error. */
  error?: { name: string; code?: string | undefined; message: string };
  /** Steps handed back from records in this segment, and steps that ran fresh. */
  replayed: number;
  fresh: number;
}

export type StepKind = 'step' | 'effect' | 'tool' | 'infer' | 'seal' | 'commit' | 'child' | 'sleep' | 'wait' | 'emit';

export interface StepInfo {
  readonly runId: string;
  readonly tenantId: string;
  readonly kind: StepKind;
  readonly name: string;
  readonly stepKey: string;
  /** Attempt of the step (infer: the sample number; commit: the transaction attempt). */
  readonly attempt: number;
  /** The segment this step runs in (the same object the `segment` hook received), when it had a hook. */
  readonly segment?: SegmentInfo | undefined;
  /** effects and tools: the idempotency key (a tool's call id). */
  readonly idempotencyKey?: string;
  /** infer: the requested model and provider. */
  readonly model?: string;
  readonly provider?: string;
  /** Content, handed over by reference for hooks that capture it on opt-in: infer's prompt, an effect's or tool's input. */
  readonly input?: unknown;
  /** seal / commit: the contract. */
  readonly contractId?: string;
  readonly contractHash?: string;
  /** seal / commit: the contract's agent id, when it names one. */
  readonly agent?: string;
  /** sleep: the target; wait: its timeout (null: none). */
  readonly until?: Date | null;
  /** wait: the signal names; emit: the topic; child: the child's workflow name. */
  readonly signals?: readonly string[];
  readonly topic?: string;
  readonly childWorkflow?: string;
  /** Filled by the engine before the step's function settles. */
  readonly outcome: StepOutcome;
}

export interface StepOutcome {
  /** infer: what the provider reported. */
  responseModel?: string | null;
  usage?: { inputTokens?: number | undefined; outputTokens?: number | undefined } | null;
  /** infer: whether this sample's answer matched the schema (a rejected one is re-sampled). */
  accepted?: boolean;
  /** Content, by reference, for hooks that capture it on opt-in: the model's answer, an effect's or tool's result. */
  output?: unknown;
  /** seal / commit: what became of the contract, when it was sealed, and why a commit was refused. */
  contractStatus?: 'sealed' | 'committed' | 'failed' | 'retry';
  sealedAt?: Date;
  settledAt?: Date;
  rejection?: string;
  /** child: the child run. */
  childRunId?: string;
}

export interface Instrumentation {
  /** Wraps one execution segment of a run (from claim to suspension or settlement). */
  segment?<T>(info: SegmentInfo, run: () => Promise<T>): Promise<T>;
  /** Wraps a fresh step, effect attempt, tool call, model call, seal, commit attempt, sleep, wait, child start or emit (never a replayed one). */
  step?<T>(info: StepInfo, run: () => Promise<T>): Promise<T>;
}

const NO_IDS = { traceId: null, spanId: null } as const;
const INVALID_TRACE = '00000000000000000000000000000000';

/** Trace and span ids of the active OpenTelemetry span, for the row being written. */
export function activeTraceIds(): { traceId: string | null; spanId: string | null } {
  const context = trace.getActiveSpan()?.spanContext();
  if (!context || context.traceId === INVALID_TRACE) return NO_IDS;
  return { traceId: context.traceId, spanId: context.spanId };
}

const REGISTERED = Symbol.for('@ratchet/engine.instrumentation');
type Registry = { [REGISTERED]?: Instrumentation };

/**
 * Registers process-wide hooks, used by every engine created without an `instrumentation`
 * option (across duplicate copies of this package). Returns a function that unregisters them.
 */
export function registerInstrumentation(hooks: Instrumentation): () => void {
  (globalThis as Registry)[REGISTERED] = hooks;
  return () => {
    if ((globalThis as Registry)[REGISTERED] === hooks) delete (globalThis as Registry)[REGISTERED];
  };
}

/** The hooks an engine uses: its own option, else the registered ones; `false` opts out. */
export function resolveInstrumentation(option: Instrumentation | false | undefined): Instrumentation | undefined {
  if (option === false) return undefined;
  return option ?? (globalThis as Registry)[REGISTERED];
}
