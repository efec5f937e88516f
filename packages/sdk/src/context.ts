// The workflow context: what a workflow function can do, as the `ctx` it receives (DESIGN §5).
// Types only; the engine implements this interface.
//
// Every `ctx.*` call that takes a `name` is a durable step identified by its step key: the name
// plus the occurrence of that name in the run (`charge#1`, `charge#2`, …). A recorded key
// returns its recorded result (or rethrows its recorded error) on replay without running
// anything, so code between steps must be deterministic: use `ctx.now()`, `ctx.random()` and
// `ctx.uuid()` rather than `Date.now()`, `Math.random()` or `crypto.randomUUID()`. Two calls with
// the same name in flight at once are refused: name parallel branches apart.
//
// Results and inputs cross a JSON boundary (see `toJsonValue`): a value JSON cannot carry
// faithfully is a ValidationError naming its path; Dates come back as ISO strings.

import type { z } from 'zod';
import type { CommitResult, ContractOperation, Dependency, SealedContract } from './contract.js';
import type { Duration } from './duration.js';
import type { RetryPolicy } from './retry.js';

/** Options of `ctx.step`. */
export interface StepOptions {
  /** Retries of the step's function. Default: the workflow's `retry`, else `DEFAULT_RETRY`. */
  retry?: Partial<RetryPolicy>;
  /** How long one attempt may take: its `signal` aborts and the attempt fails with `TimeoutError`. Default: no limit. */
  timeout?: Duration;
}

/** Options of `ctx.effect` and `ctx.tool`: a call to the outside world, made with an idempotency key. */
export interface EffectOptions<T, I = unknown> {
  /** The effect's input: recorded, hashed (canonical JSON), and passed to `execute` and `reconcile`. */
  input: I;
  /**
   * The key the provider should deduplicate on. Default: derived from the run id and the step
   * key. An explicit key reused by another run of the tenant returns the first outcome when the
   * input matches, and `IdempotencyConflictError` when it does not.
   */
  idempotencyKey?: string;
  /** Performs the effect, with no transaction open. Pass `idempotencyKey` to the provider and honour `signal`. */
  execute(args: { idempotencyKey: string; input: I; signal: AbortSignal }): Promise<T>;
  /**
   * Asks the provider whether an attempt whose outcome was never recorded (its worker died)
   * happened. Without it, such an effect is executed again with the same key (at-least-once), or,
   * with `atMostOnce`, marked unknown and its run parked.
   */
  reconcile?(args: { idempotencyKey: string; input: I }): Promise<{ found: true; result: NoInfer<T> } | { found: false }>;
  /** Retries of `execute`. Default: the workflow's `retry`, else `DEFAULT_RETRY`. */
  retry?: Partial<RetryPolicy>;
  /** How long one `execute` may take before its signal aborts and the attempt fails. Default: the engine's effect timeout. */
  timeout?: Duration;
  /**
   * Never execute twice: an attempt with an unknown outcome and no `reconcile` parks the run
   * for an operator (`client.resolve`) instead of running again. Default: false.
   */
  atMostOnce?: boolean;
}

/** Token usage a model call reports. */
export interface InferUsage {
  inputTokens?: number;
  outputTokens?: number;
}

/** What `InferOptions.call` may return instead of the bare answer: the raw output plus metadata. */
export interface InferCallResult {
  /** The model's answer, validated by `schema` (e.g. parsed JSON from the response). */
  output: unknown;
  usage?: InferUsage;
  /** The model that actually answered, when the provider reports it (e.g. a dated snapshot). */
  responseModel?: string;
}

/** Options of `ctx.infer`: a stochastic model call whose validated answer is recorded once. */
export interface InferOptions<T> {
  /** The model id asked, e.g. `gpt-4.1-mini`. */
  model: string;
  /** The provider, e.g. `openai`; recorded and traced. */
  provider?: string;
  /** Validates the answer; an invalid answer is re-sampled, up to `maxSamples` calls. */
  schema: z.ZodType<T>;
  /** The prompt, for its hash (canonical JSON + SHA-256). Stored itself only when the engine sets `recordPrompts: true`. */
  prompt?: unknown;
  /** Calls made at most when answers fail `schema`. Default: the engine's limit. */
  maxSamples?: number;
  /**
   * Calls the model; `attempt` counts samples from 1. Returns the answer itself, or an
   * `InferCallResult` wrapper with usage (a value `schema` accepts is taken as the answer,
   * otherwise an object with an `output` key is read as the wrapper).
   */
  call(args: { signal: AbortSignal; attempt: number }): Promise<NoInfer<T> | InferCallResult>;
}

/** Options of `ctx.waitFor`. */
export interface WaitForOptions<T> {
  /**
   * Validates the signal's payload when the wait consumes it (a `ValidationError` thrown into the
   * workflow). Default: the schema the workflow declares for this signal in `signals`, if any.
   */
  schema?: z.ZodType<T>;
  /** How long to wait before `TimeoutError` is thrown into the workflow. Default: forever. */
  timeout?: Duration;
}

/** Options of `ctx.waitForAny`: the first of several signals. */
export interface WaitForAnyOptions<T> extends WaitForOptions<T> {
  /** The signal names to wait for; the oldest signal of any of them is taken. */
  signals: readonly string[];
}

/** What `ctx.waitForAny` resolves to: which signal arrived, and its payload. */
export interface ReceivedSignal<T> {
  signal: string;
  payload: T;
}

/** Options of `ctx.seal`. */
export interface SealOptions {
  /** Which agent decided, recorded with the contract. */
  agent?: string;
  /** Applied in order, each through its registered action, in one transaction. */
  operations: ContractOperation[];
  /** Checked before any operation runs. Default: none. */
  dependencies?: Dependency[];
  /** The contract's key, unique per tenant. Default: derived from the run id and the step key. */
  idempotencyKey?: string;
}

/** Options of `ctx.child`. */
export interface ChildOptions {
  /** The child run's idempotency key. Default: derived from the parent run id and the step key. */
  idempotencyKey?: string;
  /** The child run's tenant. Default: the parent's tenant. */
  tenantId?: string;
}

/** A workflow function: ordinary async code whose `ctx` calls are durable steps. */
export type WorkflowFn<I, O> = (ctx: WorkflowContext, input: I) => Promise<O>;

/**
 * What `ctx.child` needs of a workflow (every `Workflow` is one): its identity, its input schema
 * (`In` is what callers pass, `I` what the function receives after parsing) and its function.
 */
export interface WorkflowRef<I, O, In = I> {
  readonly kind: 'ratchet.workflow';
  readonly name: string;
  readonly version: string;
  readonly input: z.ZodType<I, In>;
  // Method syntax on purpose: it makes `Workflow<X>` assignable to `Workflow` (= `Workflow<unknown>`),
  // so registries can hold workflows of any input type without `any`.
  fn(ctx: WorkflowContext, input: I): Promise<O>;
}

/** The `ctx` a workflow function receives. */
export interface WorkflowContext {
  readonly runId: string;
  readonly tenantId: string;
  /** Which execution of the run this is: 1 first, higher once the run is resumed after a crash or lost lease. */
  readonly attempt: number;

  /** Runs `fn` once and records its result (retried per `opts.retry`); replay returns the record. */
  step<T>(name: string, fn: (args: { signal: AbortSignal }) => T | Promise<T>, opts?: StepOptions): Promise<T>;
  /** A side effect: reserve → execute with an idempotency key → record, reconciled after a crash. */
  effect<T, I = unknown>(name: string, opts: EffectOptions<T, I>): Promise<T>;
  /** An effect traced as an agent tool call (`execute_tool`). */
  tool<T, I = unknown>(name: string, opts: EffectOptions<T, I>): Promise<T>;
  /** A model call whose validated answer is recorded once; replay never calls the model again. */
  infer<T>(name: string, opts: InferOptions<T>): Promise<T>;
  /** Sleeps durably; the run holds no worker while it sleeps. */
  sleep(name: string, duration: Duration): Promise<void>;
  /** Sleeps durably until `at`. */
  sleepUntil(name: string, at: Date): Promise<void>;
  /**
   * Waits durably for the signal `name` (sent with `client.signal`, stored first, so one sent
   * before the run gets here is not lost) and returns its payload; `TimeoutError` when
   * `opts.timeout` passes first. The run holds no worker while it waits.
   */
  waitFor<T = unknown>(name: string, opts?: WaitForOptions<T>): Promise<T>;
  /** Waits durably for the first of several signals; the step is `name`, the signals `opts.signals`. */
  waitForAny<T = unknown>(name: string, opts: WaitForAnyOptions<T>): Promise<ReceivedSignal<T>>;
  /** Freezes operations and dependencies into a contract (canonical JSON + SHA-256). */
  seal(name: string, opts: SealOptions): Promise<SealedContract>;
  /** Applies a sealed contract in one transaction; `ContractRejectedError` if a dependency fails. */
  commit(contract: SealedContract): Promise<CommitResult>;
  /**
   * Settles a sealed contract as failed (reason `abandoned`) without applying it: a reviewer
   * declined it, a deadline passed. A contract is committed or abandoned, never both.
   */
  abandon(contract: SealedContract, reason: string): Promise<void>;
  /** Starts a child run and waits for its output. */
  child<I, O, In = I>(name: string, workflow: WorkflowRef<I, O, In>, input: NoInfer<In>, opts?: ChildOptions): Promise<O>;
  /** An `emit` step: the outbox message is written in the same statement that records the step. */
  emit(topic: string, payload: unknown): Promise<void>;
  /** The time of the latest durable fact before this call, frozen between checkpoints; the same on replay. */
  now(): Date;
  /** A number in [0, 1) from a generator seeded by the run and step; the same on replay. */
  random(): number;
  /** A v4-shaped UUID from the same seeded generator; the same on replay. */
  uuid(): string;
}
