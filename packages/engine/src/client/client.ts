/**
 * The client: start runs, read them, await their results, settle parked steps.
 *
 * @example
 * ```ts
 * const run = await engine.client.start(triage, { ticket: 'Printer on fire', userId: 7 }, { idempotencyKey: 'ticket-7' });
 * const output = await run.result({ timeout: '5m' });
 * ```
 */
import {
  CancelledError,
  NotFoundError,
  RatchetError,
  RunExpiredError,
  ValidationError,
  serializeError,
  parseDuration,
  parseWithSchema,
  type Duration,
  type SerializedError,
  type Workflow,
  type WorkflowOutput,
  type WorkflowRawInput,
} from '@ratchet/sdk';
import { TASK_STATES, type TaskState } from '../schema/index.js';
import { isUuid, uuidv7 } from '../ids.js';
import { idempotencyKeyOf, tenantOf, type EngineCore } from '../core.js';
import type { TaskRecord } from '../store/rows.js';
import { createTask, getTask, type ClaimedTask, type NewTask } from '../store/tasks.js';
import { awaitResult, ResultWaiter } from './result.js';
import { existingRun, newTaskFor } from './start.js';
import { resolveOperation } from '../store/resolve.js';
import { cancelTree, sendSignal } from '../store/signals.js';
import { DEADLOCK_DETECTED, sqlState } from '../store/sqlstate.js';
import { recordedValue } from '../runtime/json.js';
import { listRuns } from '../store/inspect.js';
import { inspectRun, type RunDetail } from './inspect.js';
import { retryRun, type RetryResult } from './retry.js';

export interface StartOptions {
  /** The run's tenant (a UUID). Default: the default tenant. */
  tenantId?: string;
  /**
   * Starting again with the same key returns the same run; with other input, IdempotencyConflictError.
   * After retention removed the run, while its key's tombstone lives: a handle whose result() and
   * status() reject with RunExpiredError (docs/retention.md).
   */
  idempotencyKey?: string;
  /** The run's id (a UUID). Default: a new UUIDv7. */
  runId?: string;
  /** Runs sharing a concurrency key (per tenant) execute at most `concurrencyLimits[key]` at a time (default 1). */
  concurrencyKey?: string;
  /** Among due pending runs of a worker's workflows, higher is claimed first. An integer; default 0. */
  priority?: number;
}

/** What `client.get` and `client.list` return about a run. */
export interface RunInfo {
  runId: string;
  tenantId: string;
  workflow: string;
  version: string;
  state: TaskState;
  output?: unknown;
  error?: SerializedError;
  idempotencyKey: string | null;
  parentId: string | null;
  /** Sleep target or wait timeout while suspended. */
  wakeAt: Date | null;
  /** Claims since the run last made progress. */
  claimCount: number;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
}

export interface RunHandle<O = unknown> {
  readonly runId: string;
  readonly tenantId: string;
  /** Resolves to the output once the run completes; rejects with its error if it fails or is cancelled. */
  result(options?: { timeout?: Duration }): Promise<O>;
  status(): Promise<RunInfo>;
}

export function runInfo(task: TaskRecord): RunInfo {
  return {
    runId: task.id,
    tenantId: task.tenantId,
    workflow: task.workflowName,
    version: task.workflowVersion,
    state: task.state,
    ...(task.state === 'completed' ? { output: task.output } : {}),
    ...(task.error ? { error: task.error } : {}),
    idempotencyKey: task.idempotencyKey,
    parentId: task.parentId,
    wakeAt: task.wakeAt,
    claimCount: task.claimCount,
    createdAt: task.createdAt,
    updatedAt: task.updatedAt,
    completedAt: task.completedAt,
  };
}

export class Client {
  readonly #core: EngineCore;
  readonly #actorId: string;

  constructor(core: EngineCore, actorId: string) {
    this.#core = core;
    this.#actorId = actorId;
  }

  /** Validates the input, inserts the run with its `started` event and wakes workers — one statement. */
  async start<W extends Workflow<any, any, any>>(wf: W, input: WorkflowRawInput<W>, options: StartOptions = {}): Promise<RunHandle<WorkflowOutput<W>>> {
    const task = newTaskFor(wf, input, options, this.#actorId, this.#core.runtime.policyVersion, this.#core.limits);
    const row = await this.#insert(task, null);
    if (row) return this.handle<WorkflowOutput<W>>(row.id, task.tenantId);
    const holder = await existingRun(this.#core, task);
    if ('expired' in holder) return expiredHandle<WorkflowOutput<W>>(holder.expired, task.tenantId);
    return this.handle<WorkflowOutput<W>>(holder.task.id, task.tenantId);
  }

  /**
   * Starts a run and awaits its outcome: `start` then `result()`, but the start's own INSERT
   * registers the caller, so a run settled by this engine's own worker costs the caller one
   * statement in all (two when another process settles it: the read after its NOTIFY). Resolves to the output; rejects with the run's error, or TimeoutError
   * after `timeout` (the run goes on). A key that already started a run awaits that run.
   */
  async execute<W extends Workflow<any, any, any>>(
    wf: W,
    input: WorkflowRawInput<W>,
    options: StartOptions & { timeout?: Duration } = {},
  ): Promise<WorkflowOutput<W>> {
    if (typeof options !== 'object' || options === null) throw new ValidationError('options must be an object', { path: ['options'] });
    const { timeout, ...start } = options;
    const timeoutMs = timeoutOf(timeout);
    const task = newTaskFor(wf, input, start, this.#actorId, this.#core.runtime.policyVersion, this.#core.limits);
    // Subscribed before the run exists: its completion cannot come before we listen.
    const waiter = await ResultWaiter.open(this.#core, task.id, task.tenantId);
    try {
      const row = await this.#insert(task, this.#core.local.id);
      if (row) return await waiter.settle<WorkflowOutput<W>>(row, true, timeoutMs);
    } finally {
      waiter.close();
    }
    const holder = await existingRun(this.#core, task);
    if ('expired' in holder) throw holder.expired;
    return awaitResult<WorkflowOutput<W>>(this.#core, holder.task.id, task.tenantId, timeoutMs);
  }

  /**
   * The start statement. When a worker of this engine serves the workflow and has a free slot, the
   * start is eager: the INSERT leases the run to that worker, which runs it at once — no NOTIFY and
   * no claim (local.ts). Should the INSERT leave the run pending, the worker is poked to claim.
   */
  async #insert(task: NewTask, awaitedBy: string | null): Promise<TaskRecord | null> {
    const slot = this.#core.registry.get(task.workflowName, task.workflowVersion) ? this.#core.local.reserve() : undefined;
    // A keyed run takes a slot of its key, which only the claim assigns: never eager.
    const eager = slot && task.concurrencyKey === null ? { owner: slot.owner, leaseMs: slot.leaseMs } : null;
    let row: ClaimedTask | null;
    try {
      row = await createTask(this.#core.pool, task, { awaitedBy, notify: slot === undefined, eager });
    } catch (error) {
      slot?.release(false);
      throw error;
    }
    if (slot && row?.state === 'running') slot.take(row);
    else slot?.release(row !== null);
    return row;
  }

  /** A handle on an existing run. */
  handle<O = unknown>(runId: string, tenantId?: string): RunHandle<O> {
    const tenant = tenantOf(tenantId);
    return {
      runId,
      tenantId: tenant,
      result: async (options) => awaitResult<O>(this.#core, runId, tenant, timeoutOf(options?.timeout)),
      status: () => this.get(runId, { tenantId: tenant }),
    };
  }

  /** The run, or NotFoundError (also for a run of another tenant). */
  async get(runId: string, options: { tenantId?: string } = {}): Promise<RunInfo> {
    const tenantId = tenantOf(options.tenantId);
    if (!isUuid(runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
    const task = await getTask(this.#core.pool, tenantId, runId.toLowerCase());
    if (!task) throw new NotFoundError(`no run ${runId}`, { resource: 'run', id: runId });
    return runInfo(task);
  }

  /**
   * Runs of a tenant, newest first. Default limit 100 (at most 1000). `state` may list several;
   * `version` and `createdAfter` / `createdBefore` narrow further (what `ratchet list` filters by).
   */
  async list(
    options: { tenantId?: string; state?: TaskState | readonly TaskState[]; workflow?: string; version?: string; createdAfter?: Date; createdBefore?: Date; limit?: number } = {},
  ): Promise<RunInfo[]> {
    const tenantId = tenantOf(options.tenantId);
    const states = options.state === undefined ? undefined : typeof options.state === 'string' ? [options.state] : options.state;
    for (const state of states ?? []) {
      if (!(TASK_STATES as readonly string[]).includes(state)) throw new ValidationError(`must be one of ${TASK_STATES.join(', ')}`, { path: ['state'] });
    }
    for (const field of ['createdAfter', 'createdBefore'] as const) {
      const at = options[field];
      if (at !== undefined && (!(at instanceof Date) || Number.isNaN(at.getTime()))) throw new ValidationError('must be a valid Date', { path: [field] });
    }
    const limit = options.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new ValidationError('must be an integer from 1 to 1000', { path: ['limit'] });
    const rows = await listRuns(this.#core.pool, {
      tenantId,
      states,
      workflow: options.workflow,
      version: options.version,
      createdAfter: options.createdAfter,
      createdBefore: options.createdBefore,
      limit,
    });
    return rows.map(runInfo);
  }

  /** Everything recorded about a run — steps, events, contracts, signals, children (client/inspect.ts). NotFoundError for a run of another tenant. */
  inspect(runId: string, options: { tenantId?: string } = {}): Promise<RunDetail> {
    return inspectRun(this.#core, runId, options);
  }

  /**
   * Re-runs a failed run from its failure point: the failed step's record is removed (kept in
   * the `retried` event), every other record stays, and the run becomes pending; replay returns
   * the recorded steps and runs the failed one again (client/retry.ts, docs/cli.md). A run that
   * is not failed is a RatchetError with code NOT_FAILED.
   */
  retry(runId: string, options: { tenantId?: string } = {}): Promise<RetryResult> {
    return retryRun(this.#core, this.#actorId, runId, options);
  }

  /**
   * An operator settles a parked run's step — an at-most-once effect whose outcome was lost —
   * with the outcome they established; the run becomes pending and resumes with it.
   */
  async resolve(runId: string, stepKey: string, outcome: { result: unknown } | { error: unknown }, options: { tenantId?: string } = {}): Promise<void> {
    const tenantId = tenantOf(options.tenantId);
    if (!isUuid(runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
    if (typeof stepKey !== 'string' || !/#\d+$/.test(stepKey)) throw new ValidationError('must be a step key such as "charge#1"', { path: ['stepKey'] });
    if (typeof outcome !== 'object' || outcome === null || ('result' in outcome) === ('error' in outcome)) {
      throw new ValidationError('must be { result } or { error }', { path: ['outcome'] });
    }
    const settled =
      'result' in outcome
        ? { state: 'succeeded' as const, result: recordedValue(outcome.result, 'result'), error: null }
        : { state: 'failed' as const, result: undefined, error: this.#core.runtime.redaction.error(errorOf(outcome.error), runId) };
    const moved = await resolveOperation(this.#core.pool, { tenantId, taskId: runId.toLowerCase(), stepKey, ...settled, actorId: this.#actorId });
    if (!moved) {
      throw new RatchetError(`run ${runId} is not parked on step ${stepKey} (or does not exist)`, { code: 'NOT_PARKED', runId, step: stepKey });
    }
  }

  /**
   * Sends the signal `name` to a run: stored before anything else, so a run that has not reached
   * its `ctx.waitFor(name)` yet receives it when it does. A payload is validated against the
   * schema the run's workflow declares for `name` (`signals` in `workflow()`), when this process
   * has that workflow, before anything is written. With `idempotencyKey`, a retried send is
   * stored once. Sending to a run that has finished is a `RatchetError` with code `RUN_FINISHED`.
   */
  async signal(runId: string, name: string, payload?: unknown, options: { tenantId?: string; idempotencyKey?: string } = {}): Promise<{ signalId: string }> {
    const tenantId = tenantOf(options.tenantId);
    if (!isUuid(runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
    if (typeof name !== 'string' || name.length === 0 || name.length > 200 || name.includes('\u0000') || !name.isWellFormed()) {
      throw new ValidationError('must be a non-empty string of at most 200 characters', { path: ['name'] });
    }
    const idempotencyKey = idempotencyKeyOf(options.idempotencyKey);
    const stored = recordedValue(payload ?? null, 'payload');
    const id = runId.toLowerCase();
    const task = await getTask(this.#core.pool, tenantId, id);
    if (!task) throw new NotFoundError(`no run ${runId}`, { resource: 'run', id: runId });
    const schema = this.#core.registry.get(task.workflowName, task.workflowVersion)?.signals?.[name];
    if (schema) parseWithSchema(schema, stored, 'payload');
    const sent = await sendSignal(this.#core.pool, { tenantId, taskId: id, id: uuidv7(), name, payload: stored, idempotencyKey });
    if (sent.state === null || sent.signalId === null) {
      throw new RatchetError(`run ${runId} has finished; it takes no more signals`, { code: 'RUN_FINISHED', runId });
    }
    return { signalId: sent.signalId };
  }

  /**
   * Cancels a run and its children. A run no worker holds (pending, sleeping, waiting, parked)
   * is cancelled at once; a running run is asked to stop: its workflow sees `CancelledError` at
   * its next `ctx` call and its in-flight effect's signal aborts, and code in `finally` may still
   * run steps (compensation). Cancelling a finished run changes nothing.
   */
  async cancel(runId: string, options: { tenantId?: string } = {}): Promise<{ cancelled: string[]; requested: string[] }> {
    const tenantId = tenantOf(options.tenantId);
    if (!isUuid(runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
    const id = runId.toLowerCase();
    const error = serializeError(new CancelledError('the run was cancelled', { runId: id }));
    for (let attempt = 1; ; attempt += 1) {
      try {
        const result = await cancelTree(this.#core.pool, { tenantId, taskId: id, actorId: this.#actorId, error, policyVersion: this.#core.runtime.policyVersion });
        if (!result) throw new NotFoundError(`no run ${runId}`, { resource: 'run', id: runId });
        return result;
      } catch (e) {
        // A child settling at this moment locks parent then child in the other order: try again.
        if (sqlState(e) !== DEADLOCK_DETECTED || attempt >= 5) throw e;
      }
    }
  }

}

/** A handle on a run retention removed: its id, and RunExpiredError (with the outcome) from result() and status(). */
function expiredHandle<O>(expired: RunExpiredError, tenantId: string): RunHandle<O> {
  return {
    runId: expired.runId!,
    tenantId,
    result: () => Promise.reject(expired),
    status: () => Promise.reject(expired),
  };
}

function errorOf(error: unknown): SerializedError {
  if (typeof error === 'string') return { name: 'Error', message: error };
  if (error instanceof Error) return serializeError(error);
  if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') {
    return { name: String((error as { name?: unknown }).name ?? 'Error'), message: (error as { message: string }).message };
  }
  throw new ValidationError('must be an Error, a message string, or { name?, message }', { path: ['outcome', 'error'] });
}

function timeoutOf(timeout: Duration | undefined): number | undefined {
  return timeout === undefined ? undefined : parseDuration(timeout, 'timeout');
}
