/**
 * One execution segment of a run: from claim (or direct start) until the run settles or suspends.
 *
 * The workflow function is called from the top. Each `ctx.*` call gets its step key (`name#n`,
 * the n-th call of that name in the run); a recorded key returns its record without running
 * anything, a fresh one runs and is checkpointed in one fenced statement (store/operations.ts).
 *
 * Segment states:
 *
 *   running ──fn returns──▶ completed (output validated)        ──┐
 *      │    ──fn throws / deadline passes──▶ failed | cancelled   │
 *      │    ──only sleeps in flight──▶ sleeping (wake_at)         │ one fenced statement:
 *      │    ──only sleeps and waits (signal, child) in flight──▶  ├─ task row + its event
 *      │          waiting (wake_at = earliest timeout, or none)   │
 *      │    ──nondeterminism / unknown at-most-once──▶ parked   ──┘
 *      └────── lease lost (renewal or fence failed) ──▶ lost: stop writing, settle nothing
 *
 * Two parts of a segment live in modules of their own: how its step records are written, one
 * fenced statement each or deferred to the next (recorder.ts), and when it suspends, with the
 * sleeps and the waits for something outside the run, a signal or a child (suspension.ts).
 *
 * Suspending does not throw through user code: the calls still waiting simply never resolve in
 * this process, and the function's pending promise is dropped with the segment (no memory held).
 * Once a segment settles, every further `ctx` call returns a promise that never resolves, so
 * user code cannot act on a run it no longer owns.
 */
import type pg from 'pg';
import {
  CancelledError,
  LeaseLostError,
  NonDeterminismError,
  RatchetError,
  TimeoutError,
  ValidationError,
  deserializeError,
  isRatchetError,
  parseWorkflowInput,
  parseWorkflowOutput,
  resolveRetryPolicy,
  seededRandom,
  serializeError,
  type ResolvedRetryPolicy,
  type SerializedError,
  type Workflow,
} from '@ratchet/sdk';
import { activeTraceIds, resolveInstrumentation, type Instrumentation, type SegmentInfo, type StepInfo, type StepOutcome } from '../instrumentation.js';
import { getPreviousSegment } from '../store/segments.js';
import { fault, type FaultHooks, type FaultPoint } from '../faults.js';
import type { Transition } from '../store/tasks.js';
import type { OperationWrite, WrittenOperation } from '../store/operations.js';
import type { Fence, OperationRecord, TaskRecord } from '../store/rows.js';
import type { LeaseKeeper } from '../worker/lease.js';
import type { RunningExecutions } from '../worker/running.js';
import type { LocalHub } from '../local.js';
import type { OperationKind } from '../schema/index.js';
import type { ContractRegistry } from '../contracts/registry.js';
import { readSignalSeq } from '../store/signals.js';
import type { Redaction } from '../redact.js';
import { createContext } from './context.js';
import { recordedValue } from './json.js';
import { ReplayOrder } from './replay-order.js';
import { transitionFenced, withReconnects } from './checkpoint.js';
import { StepRecorder } from './recorder.js';
import { MAX_TIMER_MS, Suspension } from './suspension.js';

export interface RuntimeOptions {
  /** Default timeout of one effect attempt. */
  effectTimeoutMs: number;
  /** After an in-flight effect's deadline, how long before another attempt may start. */
  effectMarginMs: number;
  /** Waits up to this long are timers in memory; longer ones suspend the run durably. */
  inMemoryWaitMs: number;
  /**
   * During replay, how long the code may take to reach the next recorded call (in recording
   * order) while it already made a later one, before the run is parked as nondeterministic.
   */
  replayStallMs: number;
  /** Samples a model call may take when answers fail its schema. */
  maxSamples: number;
  /** Store prompts with infer records (otherwise only their SHA-256). */
  recordPrompts: boolean;
  /** Policy version recorded on events. */
  policyVersion: string | null;
  /** Applied to every stored error and event payload (redact.ts). */
  redaction: Redaction;
}

export type Outcome =
  | { state: 'completed'; output: unknown }
  | { state: 'failed'; error: SerializedError }
  | { state: 'cancelled'; error: SerializedError }
  | { state: 'parked'; error: SerializedError }
  | { state: 'sleeping'; wakeAt: Date }
  | { state: 'waiting'; wakeAt: Date | null; signalSeq: number }
  | { state: 'lost' };

export interface ExecutionDeps {
  pool: pg.Pool;
  workflow: Workflow;
  task: TaskRecord;
  owner: string;
  /** ratchet.now() when the run was claimed or inserted. */
  dbNow: Date;
  /** Date.now() when that statement returned: the lease counts from here, not from when execution starts. */
  claimedLocalAt?: number;
  leases: LeaseKeeper;
  options: RuntimeOptions;
  contracts: ContractRegistry;
  faults?: FaultHooks | undefined;
  /** The engine's hooks option (`false`: none; undefined: the process-wide registered ones). */
  instrumentation?: Instrumentation | false | undefined;
  onError?: ((error: unknown) => void) | undefined;
  /** This process's running executions, told of signals and cancel requests. */
  running?: RunningExecutions | undefined;
  /** This engine's callers awaiting results: a settled run is handed to them in memory (local.ts). */
  local?: LocalHub | undefined;
}

const NEVER: Promise<never> = new Promise(() => {});

/** One run a worker is executing, as `worker.inFlight()` describes it. */
export interface InFlightRun {
  runId: string;
  tenantId: string;
  /** `name@version`. */
  workflow: string;
  /** Since this segment began (claim or direct start). */
  forMs: number;
  /**
   * `starting` (claimed; loading its records), `running` (user code), `suspending` (checking for
   * signals before moving to waiting), `settling` (writing its outcome).
   */
  phase: 'starting' | 'running' | 'suspending' | 'settling';
  /** ctx calls not yet returned; `durable` marks sleeps and waits the run could suspend on. */
  calls: { stepKey: string; kind: OperationKind; forMs: number; durable: boolean }[];
  /** A fenced step write in flight (repeated through reconnects), or null. */
  writing: { stepKey: string; forMs: number } | null;
}

/** What a wait for something outside the run found: its value, or an error to throw into the workflow. */
export type Found<T> = { value: T } | { error: unknown };

export class Execution {
  readonly fence: Fence;
  readonly runId: string;
  readonly tenantId: string;
  readonly #deps: ExecutionDeps;
  readonly #recorded = new Map<string, OperationRecord>();
  /** Replay hands recorded results back in recording order (see replay-order.ts). */
  readonly #replay: ReplayOrder;
  readonly #visited = new Set<string>();
  readonly #occurrences = new Map<string, number>();
  /** ctx calls in flight by name: their kind, step key and when they began (Date.now()). */
  readonly #namesInFlight = new Map<string, { kind: OperationKind; key: string; since: number }>();
  readonly #startedAt = Date.now();
  /** Writes this segment's step records, and holds the deferred ones (recorder.ts). */
  readonly #recorder: StepRecorder;
  /** The calls working and waiting, and the move to sleeping or waiting (suspension.ts). */
  readonly #suspension: Suspension;
  /** The run's signal counter as this worker last saw it. */
  #signalSeq: number;
  readonly #timers = new Set<NodeJS.Timeout>();
  readonly #abort = new AbortController();
  #clockOffset: number;
  #lastFact: Date;
  #lastKey = '';
  /** ctx.random()'s generator, made on first use from `#randomSeed` (most steps never draw one: hashing a seed per step would be waste). */
  #random: (() => number) | undefined;
  #randomSeed: string;
  #settling = false;
  #cancelRequested = false;
  #cancelDelivered = false;
  #resolveOutcome!: (outcome: Outcome) => void;
  readonly #outcome = new Promise<Outcome>((resolve) => (this.#resolveOutcome = resolve));
  #lease: { progressed: boolean } | undefined;
  readonly #hooks: Instrumentation | undefined;
  /** The segment as its hook saw it (outcome filled at the end); undefined without a segment hook. */
  #segment: SegmentInfo | undefined;
  /** Ids of the span active when the segment began: written on its events and on rows of steps without a span. */
  #segmentIds: { traceId: string | null; spanId: string | null } = { traceId: null, spanId: null };
  /** Ids of each step's latest span (noted inside the step hook): written on that step's row. */
  readonly #stepIds = new Map<string, { traceId: string | null; spanId: string | null }>();
  readonly #hasRecords: boolean;

  constructor(deps: ExecutionDeps, operations: OperationRecord[]) {
    this.#deps = deps;
    this.#hooks = resolveInstrumentation(deps.instrumentation);
    this.#hasRecords = operations.length > 0;
    this.runId = deps.task.id;
    this.tenantId = deps.task.tenantId;
    this.fence = { tenantId: deps.task.tenantId, taskId: deps.task.id, owner: deps.owner, stateVersion: deps.task.stateVersion };
    for (const op of operations) this.#recorded.set(op.stepKey, op);
    this.#replay = new ReplayOrder(
      operations,
      deps.options.replayStallMs,
      () => this.#suspension.waitingKeys(),
      (op, reached) =>
        this.park(
          new NonDeterminismError(`replay waited for ${op.kind} ${op.stepKey}, recorded next, but the code reached ${reached.join(', ')} instead`, {
            runId: this.runId,
            step: op.stepKey,
            expected: `${op.kind} ${op.stepKey}`,
            actual: reached.join(', '),
          }),
        ),
    );
    this.#recorder = new StepRecorder(
      this,
      operations.reduce((max, op) => Math.max(max, op.seq), 0),
    );
    this.#suspension = new Suspension({
      settled: () => this.#settling,
      inMemoryWaitMs: deps.options.inMemoryWaitMs,
      dbNow: () => this.dbNow(),
      timer: (fn, ms) => this.#timer(fn, ms),
      clearTimer: (timer) => {
        clearTimeout(timer);
        this.#timers.delete(timer);
      },
      unreached: () => this.#unreached(),
      park: (error) => this.park(error),
      lose: () => this.#lose(),
      readSignalSeq: () => withReconnects(() => readSignalSeq(deps.pool, this.fence), deps.onError).then((seq) => (seq === 'lost' ? null : seq)),
      suspend: (outcome) => void this.#settle(outcome),
      onError: deps.onError,
    });
    this.#clockOffset = deps.dbNow.getTime() - (deps.claimedLocalAt ?? Date.now());
    this.#lastFact = deps.task.createdAt;
    this.#randomSeed = `${this.runId}:`;
    this.#cancelRequested = deps.task.cancelRequestedAt !== null;
    this.#signalSeq = deps.task.signalSeq;
  }

  /** Runs the segment to its outcome, writing the run's new state (unless the lease was lost). */
  async execute(): Promise<Outcome> {
    const { workflow, task, leases } = this.#deps;
    const lease = {
      fence: this.fence,
      progressed: false,
      onLost: () => this.#lose(),
      onCancelRequested: () => this.requestCancel(),
      onRenewed: (now: Date, signalSeq: number | null) => {
        this.sawDbTime(now);
        if (signalSeq !== null && signalSeq !== this.#signalSeq) {
          this.#signalSeq = signalSeq;
          void this.poke();
        }
      },
    };
    this.#lease = lease;
    leases.hold(lease, this.#deps.claimedLocalAt);
    this.#deps.running?.add(this);
    try {
      const body = async () => {
        this.#segmentIds = activeTraceIds();
        this.#start(workflow);
        return this.#outcome;
      };
      const hooks = this.#hooks;
      if (!hooks?.segment) return await body();
      // A run with records had an earlier segment: its last span is what this one links to
      // (one indexed read, only when a segment hook is installed; a first segment skips it).
      const previous = this.#hasRecords ? await getPreviousSegment(this.#deps.pool, this.tenantId, this.runId, task.spanId).catch(() => null) : null;
      const info: SegmentInfo = {
        runId: this.runId,
        tenantId: this.tenantId,
        workflowName: task.workflowName,
        workflowVersion: task.workflowVersion,
        attempt: task.claimCount,
        traceId: task.traceId,
        spanId: task.spanId,
        previous,
        outcome: { replayed: 0, fresh: 0 },
      };
      this.#segment = info;
      return await hooks.segment(info, () => body().then((outcome) => describeOutcome(info, outcome)));
    } finally {
      for (const timer of this.#timers) clearTimeout(timer);
      this.#timers.clear();
      leases.release(this.fence.taskId, lease);
      this.#deps.running?.delete(this);
    }
  }

  /** Cancellation was requested: the next `ctx` call throws CancelledError and in-flight work is aborted. */
  requestCancel(): void {
    if (this.#cancelRequested) return;
    this.#cancelRequested = true;
    this.#abort.abort(new CancelledError('the run was cancelled', { runId: this.runId }));
  }

  /**
   * Something the run may be waiting for happened (a signal arrived, a child settled): every wait
   * for something outside the run looks again.
   */
  poke(): Promise<void> {
    return this.#suspension.poke();
  }

  /** Stops the segment without writing (shutdown): the lease is left to expire or be released by the caller. */
  abandon(): void {
    this.#lose();
  }

  get settled(): boolean {
    return this.#settling;
  }

  /** What the segment is doing now, for operators (`worker.inFlight()`): its calls in flight, its waits, its statement. */
  describe(now = Date.now()): InFlightRun {
    return {
      runId: this.runId,
      tenantId: this.tenantId,
      workflow: `${this.#deps.workflow.name}@${this.#deps.workflow.version}`,
      forMs: now - this.#startedAt,
      phase: this.#settling ? 'settling' : this.#suspension.suspending ? 'suspending' : 'running',
      calls: [...this.#namesInFlight.values()].map(({ kind, key, since }) => ({
        stepKey: key,
        kind,
        forMs: now - since,
        durable: this.#suspension.isWaiting(key),
      })),
      writing: this.#recorder.writing ? { stepKey: this.#recorder.writing.stepKey, forMs: now - this.#recorder.writing.since } : null,
    };
  }

  #start(workflow: Workflow): void {
    let input: unknown;
    try {
      input = parseWorkflowInput(workflow, this.#deps.task.input);
    } catch (error) {
      void this.#settle({ state: 'failed', error: serializeError(error) });
      return;
    }
    if (!this.#armDeadline()) return;
    const ctx = createContext(this, Math.max(1, this.#deps.task.claimCount));
    Promise.resolve()
      .then(() => workflow.fn(ctx, input))
      .then(
        (output) => this.#onReturn(output),
        (error: unknown) => this.#onThrow(error),
      );
  }

  /** The workflow's `timeout`: past the run's deadline it fails with TimeoutError. False when it already has. */
  #armDeadline(): boolean {
    const deadline = this.#deps.task.deadlineAt;
    if (!deadline) return true;
    const expire = () => {
      const error = new TimeoutError(`the run did not finish by its deadline ${deadline.toISOString()} (workflow timeout ${this.#deps.workflow.timeout ?? '?'} ms)`, {
        runId: this.runId,
        timeoutMs: this.#deps.workflow.timeout ?? 0,
      });
      void this.#settle({ state: 'failed', error: serializeError(error) });
    };
    const remaining = deadline.getTime() - this.dbNow();
    if (remaining <= 0) {
      expire();
      return false;
    }
    if (remaining <= MAX_TIMER_MS) this.#timer(expire, remaining);
    return true;
  }

  #timer(fn: () => void, ms: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      fn();
    }, ms);
    this.#timers.add(timer);
    return timer;
  }

  /**
   * Every durable ctx call goes through here: step key, replay lookup, kind check, the
   * same-name-in-flight rule, and the bookkeeping that decides when the run can suspend.
   */
  call<T>(name: string, kind: OperationKind, body: (key: string, recorded: OperationRecord | undefined) => Promise<T>): Promise<T> {
    if (this.#settling) return NEVER;
    if (typeof name !== 'string' || name.length === 0 || name.length > 200) {
      return Promise.reject(new ValidationError('a step name must be a non-empty string of at most 200 characters', { path: ['name'] }));
    }
    if (this.#namesInFlight.has(name)) {
      return Promise.reject(
        new ValidationError(`two ctx calls named "${name}" are in flight at once; give parallel calls distinct names`, { path: ['name'], runId: this.runId }),
      );
    }
    const n = (this.#occurrences.get(name) ?? 0) + 1;
    this.#occurrences.set(name, n);
    const key = `${name}#${n}`;
    this.#visited.add(key);
    const recorded = this.#recorded.get(key);
    if (this.#segment) {
      if (recorded && recorded.state !== 'reserved') this.#segment.outcome.replayed += 1;
      else this.#segment.outcome.fresh += 1;
    }
    if (this.#cancelRequested && !this.#cancelDelivered && (!recorded || recorded.state === 'reserved')) {
      // Delivered once, at the first call that is not a replayed record (so replay delivers it at
      // the same place): cleanup code in `finally` may still run steps (compensation).
      this.#cancelDelivered = true;
      return Promise.reject(new CancelledError('the run was cancelled', { runId: this.runId }));
    }
    if (recorded && recorded.kind !== kind) {
      this.park(
        new NonDeterminismError(`replay reached ${kind} ${key}, but the run recorded ${recorded.kind} ${key} there; the code changed under a running version`, {
          runId: this.runId,
          step: key,
          expected: `${recorded.kind} ${key}`,
          actual: `${kind} ${key}`,
        }),
      );
      return NEVER;
    }
    this.#namesInFlight.set(name, { kind, key, since: Date.now() });
    this.#suspension.enter();
    const done = () => {
      this.#namesInFlight.delete(name);
      this.#suspension.leave();
    };
    // Nothing runs before the steps that succeeded before it are recorded (see `defer`).
    const run = (): T | Promise<T> => (this.#recorder.hasDeferred ? this.#recorder.flush().then(() => (this.#settling ? NEVER : body(key, recorded))) : body(key, recorded));
    // `new Promise(r => r(run()))` runs the body now and turns a synchronous throw into a rejection.
    const started = recorded ? this.#replay.turn(key).then(run) : new Promise<T>((resolve) => resolve(run()));
    return started.then(
      (value) => {
        done();
        return this.#settling ? NEVER : value;
      },
      (error: unknown) => {
        done();
        // A call that failed with the cancellation (its signal aborted) delivered it.
        if (this.#cancelRequested && isRatchetError(error, 'CANCELLED')) this.#cancelDelivered = true;
        return this.#settling ? NEVER : Promise.reject(error);
      },
    );
  }

  // ---------------------------------------------------------------- services for step kinds

  /** ctx.now(): the time of the latest durable fact. */
  now(): Date {
    return new Date(this.#lastFact.getTime());
  }

  /** ctx.random(): the generator seeded by the run id and the latest step key. */
  random(): number {
    this.#random ??= seededRandom(this.#randomSeed);
    return this.#random();
  }

  /** The database's time now, estimated from the offset seen at claim and at each lease renewal. */
  dbNow(): number {
    return Date.now() + this.#clockOffset;
  }

  /** A durable fact happened at `at` (a step recorded or replayed): ctx.now() and the seed move to it. */
  fact(key: string, at: Date | null): void {
    if (at && at.getTime() > this.#lastFact.getTime()) this.#lastFact = at;
    if (key !== this.#lastKey) {
      this.#lastKey = key;
      this.#randomSeed = `${this.runId}:${key}`;
      this.#random = undefined;
    }
  }

  /** The replayed outcome of a settled record: its result, or its error rethrown. */
  replay<T>(key: string, op: OperationRecord): Promise<T> {
    this.fact(key, op.completedAt ?? op.createdAt);
    if (op.state === 'failed') return Promise.reject(deserializeError(op.error ?? { name: 'Error', message: 'failed' }));
    return Promise.resolve((op.noResult ? undefined : op.result) as T);
  }

  /** Resolves at `at` (database time). Longer than the in-memory limit, it lets the run suspend (suspension.ts). */
  waitUntil(key: string, at: Date): Promise<void> {
    return this.#suspension.waitUntil(key, at);
  }

  /** Waits for something outside the run (a signal, a child run): see suspension.ts. */
  awaitExternal<T>(key: string, target: Date | null, look: () => Promise<Found<T> | undefined>, expire: () => Promise<T>): Promise<T> {
    return this.#suspension.awaitExternal(key, target, look, expire);
  }

  /** The signal handed to effects and model calls: aborts when the lease is lost or the run is cancelled. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get workflow(): Workflow {
    return this.#deps.workflow;
  }

  get options(): RuntimeOptions {
    return this.#deps.options;
  }

  get contracts(): ContractRegistry {
    return this.#deps.contracts;
  }

  get onError(): ((error: unknown) => void) | undefined {
    return this.#deps.onError;
  }

  /** The next recording order number, for statements that write a step record themselves. */
  takeSeq(): number {
    return this.#recorder.takeSeq();
  }

  /** The database's time as a statement of this segment read it: dbNow() follows it. */
  sawDbTime(now: Date): void {
    this.#clockOffset = now.getTime() - Date.now();
  }

  /** This run's state_version moved on by our own write (seal, commit): the fence follows it. */
  advanceVersion(version: number): void {
    if (version > this.fence.stateVersion) this.fence.stateVersion = version;
    if (this.#lease) this.#lease.progressed = true;
  }

  /** The run recorded progress by a statement of its own (a consumed signal): its poison-pill count restarts. */
  progressed(): void {
    if (this.#lease) this.#lease.progressed = true;
  }

  /** Who writes: the lease owner (recorded as the actor of runs this run starts). */
  get owner(): string {
    return this.#deps.owner;
  }

  /** The run is no longer ours: stop writing, settle nothing. */
  lose(): void {
    this.#lose();
  }

  get pool(): pg.Pool {
    return this.#deps.pool;
  }

  /**
   * One of the segment's own statements that is safe to repeat (a read, an idempotent insert):
   * repeated through dropped connections and a restarting server; when the database stays
   * unreachable the segment stops — the run resumes elsewhere — and the promise never resolves.
   * A connection error must never reach the workflow as if its code had failed.
   */
  async sql<T>(statement: (pool: pg.Pool) => Promise<T>): Promise<T> {
    if (this.#settling) return NEVER;
    const result = await withReconnects(() => statement(this.#deps.pool), this.#deps.onError);
    if (result === 'lost') {
      this.#lose();
      return NEVER;
    }
    return result;
  }

  /** The retry policy of a step: its own, else the workflow's, else the default. */
  retryPolicy(own: Parameters<typeof resolveRetryPolicy>[0], field: string): ResolvedRetryPolicy {
    return resolveRetryPolicy(own, this.#deps.workflow.retry, field);
  }

  async hook(point: FaultPoint, stepKey?: string, attempt?: number): Promise<void> {
    await fault(this.#deps.faults, { point, runId: this.runId, ...(stepKey ? { stepKey } : {}), ...(attempt ? { attempt } : {}) });
  }

  /**
   * Runs a fresh step's work inside the step hook (when there is one). `run` fills the outcome it
   * is given; the ids of the span active inside the hook are written on the step's row.
   */
  instrument<T>(info: Omit<StepInfo, 'runId' | 'tenantId' | 'segment' | 'outcome'>, run: (outcome: StepOutcome) => Promise<T>): Promise<T> {
    const hooks = this.#hooks;
    const outcome: StepOutcome = {};
    if (!hooks?.step) return run(outcome);
    // Object.assign rather than a spread followed by more properties (V8's slow path: see recorder.ts).
    const full: StepInfo = Object.assign({}, info, { runId: this.runId, tenantId: this.tenantId, segment: this.#segment, outcome });
    return hooks.step(full, () => {
      this.#stepIds.set(info.stepKey, activeTraceIds());
      return run(outcome);
    });
  }

  /** Trace and span ids for a row of `stepKey`: its step's span, else the segment's, else the active span's. */
  traceIds(stepKey?: string): { traceId: string | null; spanId: string | null } {
    const step = stepKey === undefined ? undefined : this.#stepIds.get(stepKey);
    if (step?.traceId) return step;
    return this.#segmentIds.traceId ? this.#segmentIds : activeTraceIds();
  }

  /**
   * Writes a step record in one fenced statement (see checkpoint.ts). Resolves to the written
   * row; if the run is no longer ours or the database stays unreachable, the segment stops and
   * the promise never resolves.
   */
  async write(op: NewOperation, statement?: (full: OperationWrite) => Promise<WrittenOperation | null>): Promise<WrittenOperation> {
    if (this.#settling) return NEVER;
    const written = await this.#recorder.write(op, statement);
    if (written === 'lost') {
      this.#lose();
      return NEVER;
    }
    return written;
  }

  /**
   * Records a fresh step that succeeded at its first attempt with the segment's next statement
   * rather than one of its own (recorder.ts).
   */
  defer(op: NewOperation): void {
    if (this.#settling) return;
    this.#recorder.defer(op);
  }

  // ---------------------------------------------------------------- settling

  /** A recorded step the code did not reach by the time it stopped: the code changed. */
  #unreached(): NonDeterminismError | undefined {
    for (const [key, op] of this.#recorded) {
      if (!this.#visited.has(key)) {
        return new NonDeterminismError(`the run recorded ${op.kind} ${key}, but the code no longer reaches it`, {
          runId: this.runId,
          step: key,
          expected: `${op.kind} ${key}`,
          actual: '(not reached)',
        });
      }
    }
    return undefined;
  }

  #onReturn(output: unknown): void {
    if (this.#settling) return;
    // A sleep, wait or child left pending is fine (the loser of a Promise.race); anything else is not.
    const unawaited = [...this.#namesInFlight].filter(([, { kind }]) => kind !== 'sleep' && kind !== 'wait' && kind !== 'child').map(([name]) => name);
    if (unawaited.length > 0) {
      const names = unawaited.join(', ');
      void this.#settle({
        state: 'failed',
        error: serializeError(
          new RatchetError(`the workflow returned while ctx calls were still in flight (${names}); await every ctx call`, {
            code: 'UNAWAITED_CALL',
            runId: this.runId,
          }),
        ),
      });
      return;
    }
    const unreached = this.#unreached();
    if (unreached) return this.park(unreached);
    let value: unknown;
    try {
      value = recordedOutput(this.#deps.workflow, output);
    } catch (error) {
      void this.#settle({ state: 'failed', error: serializeError(error) });
      return;
    }
    void this.#settle({ state: 'completed', output: value });
  }

  #onThrow(error: unknown): void {
    if (this.#settling) return;
    if (isRatchetError(error, 'NON_DETERMINISM')) return this.park(error);
    if (isRatchetError(error, 'LEASE_LOST')) return this.#lose();
    const unreached = this.#unreached();
    if (unreached) return this.park(unreached);
    if (this.#cancelRequested && isRatchetError(error, 'CANCELLED')) {
      void this.#settle({ state: 'cancelled', error: serializeError(error) });
      return;
    }
    void this.#settle({ state: 'failed', error: serializeError(error) });
  }

  /** Parks the run for an operator (nondeterminism, an unknown at-most-once effect). */
  park(error: unknown): void {
    if (this.#settling) return;
    void this.#settle({ state: 'parked', error: serializeError(error) });
  }

  #lose(): void {
    if (this.#settling) return;
    this.#settling = true;
    this.#replay.stop();
    this.#abort.abort(new LeaseLostError('this worker no longer holds the run’s lease; another worker resumes it', { runId: this.runId }));
    this.#resolveOutcome({ state: 'lost' });
  }

  async #settle(outcome: Exclude<Outcome, { state: 'lost' }>): Promise<void> {
    if (this.#settling) return;
    this.#settling = true;
    this.#replay.stop();
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
    const transition: Transition =
      outcome.state === 'completed'
        ? { state: 'completed', event: 'completed', output: outcome.output }
        : outcome.state === 'sleeping'
          ? { state: 'sleeping', event: 'sleeping', dueAt: outcome.wakeAt, payload: { wakeAt: outcome.wakeAt.toISOString() } }
          : outcome.state === 'waiting'
            ? {
                state: 'waiting',
                event: 'waiting',
                dueAt: outcome.wakeAt,
                expectedSignalSeq: outcome.signalSeq,
                payload: { wakeAt: outcome.wakeAt?.toISOString() ?? null, waits: this.#suspension.externalKeys() },
              }
            : { state: outcome.state, event: outcome.state, error: outcome.error, payload: { code: outcome.error.code ?? null, error: outcome.error.name } };
    transition.policyVersion = this.#deps.options.policyVersion;
    transition.localId = this.#deps.local?.id ?? null;
    const redaction = this.#deps.options.redaction;
    if (transition.error) transition.error = redaction.error(transition.error, this.runId);
    if (transition.payload) transition.payload = redaction.payload(transition.payload, this.runId);
    // The event carries this segment's span (a resumed segment links to it); none: the run's origin.
    if (this.#segmentIds.traceId) {
      transition.traceId = this.#segmentIds.traceId;
      transition.spanId = this.#segmentIds.spanId;
    }
    try {
      // A deferred step being written by itself lands first; the rest are written with the outcome.
      const steps = await this.#recorder.takeDeferred();
      if (steps.length > 0) transition.steps = steps;
      const version = await transitionFenced(this.#deps.pool, this.fence, transition, this.#deps.onError);
      if (version === null) {
        this.#abort.abort();
        this.#resolveOutcome({ state: 'lost' });
        return;
      }
      this.fence.stateVersion = version;
      if (outcome.state === 'completed' || outcome.state === 'failed' || outcome.state === 'cancelled') {
        this.#deps.local?.settled(this.runId, {
          state: outcome.state,
          output: outcome.state === 'completed' ? (transition.output ?? null) : null,
          error: transition.error ?? null,
        });
      }
      if (outcome.state !== 'completed') this.#abort.abort(new RatchetError(`the run is ${outcome.state}`, { code: 'SETTLED' }));
      this.#resolveOutcome(outcome);
    } catch (error) {
      // The database is unreachable: the lease will expire and another worker resumes the run.
      this.#deps.onError?.(error);
      this.#abort.abort();
      this.#resolveOutcome({ state: 'lost' });
    }
  }
}

/** A step record as step kinds hand it to `write`: ids, recording order and span ids are filled in. */
export type NewOperation = Omit<OperationWrite, 'id' | 'seq' | 'traceId' | 'spanId'> & { id?: string; seq?: number };

/** Fills the segment hook's outcome from the engine's. */
function describeOutcome(info: SegmentInfo, outcome: Outcome): Outcome {
  const target = info.outcome;
  target.state = outcome.state;
  if ('wakeAt' in outcome) target.wakeAt = outcome.wakeAt;
  if ('error' in outcome) target.error = { name: outcome.error.name, code: outcome.error.code, message: outcome.error.message };
  return outcome;
}

function recordedOutput(workflow: Workflow, output: unknown): unknown {
  return recordedValue(parseWorkflowOutput(workflow, output), 'output');
}

