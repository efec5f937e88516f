/**
 * What a start needs before its statement: the arguments validated into the row to insert
 * (`newTaskFor`, shared by `client.start`, `engine.run`, child runs and schedules), and, when the
 * idempotency key was taken, the run or tombstone that holds it (`existingRun`).
 */
import {
  IdempotencyConflictError,
  RatchetError,
  RunExpiredError,
  ValidationError,
  hashCanonical,
  parseWorkflowInput,
  isWorkflow,
  type Workflow,
} from '@ratchet/sdk';
import { activeTraceIds } from '../instrumentation.js';
import { isUuid, uuidv7 } from '../ids.js';
import { idempotencyKeyOf, tenantOf, type EngineCore } from '../core.js';
import type { TaskRecord } from '../store/rows.js';
import { getTaskByKey, type NewTask } from '../store/tasks.js';
import { DEFAULT_CONCURRENCY_LIMIT, type ConcurrencyLimits } from '../concurrency.js';
import { recordedValue } from '../runtime/json.js';
import { getTombstone, runScope } from '../store/tombstones.js';
import type { StartOptions } from './client.js';

/** Validated start arguments → the row to insert. Shared with the direct path (engine.run). */
export function newTaskFor(
  wf: Workflow,
  input: unknown,
  options: StartOptions,
  actorId: string,
  policyVersion: string | null = null,
  limits?: ConcurrencyLimits,
): NewTask {
  if (!isWorkflow(wf)) throw new ValidationError('must be a workflow made by workflow()', { path: ['workflow'] });
  if (typeof options !== 'object' || options === null) throw new ValidationError('options must be an object', { path: ['options'] });
  const tenantId = tenantOf(options.tenantId);
  const idempotencyKey = idempotencyKeyOf(options.idempotencyKey);
  if (options.runId !== undefined && !isUuid(options.runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
  if (options.priority !== undefined && !Number.isInteger(options.priority)) throw new ValidationError('must be an integer', { path: ['priority'] });
  const concurrencyKey = idempotencyKeyOf(options.concurrencyKey, 'concurrencyKey');
  parseWorkflowInput(wf, input); // ValidationError naming the path; nothing written
  const stored = recordedValue(input, 'input');
  // The run receives its input back from JSON: a schema that rejects that form (z.date() given a
  // Date, which JSON turns into a string) would fail every execution. Refuse it now instead.
  try {
    parseWorkflowInput(wf, stored);
  } catch (error) {
    throw new ValidationError(
      `the input does not survive JSON (the form the run receives): ${(error as Error).message}; use z.coerce.date() for dates`,
      { path: (error as ValidationError).path ?? ['input'], cause: error },
    );
  }
  const { hash } = hashCanonical(stored ?? null, 'input');
  const ids = activeTraceIds();
  return {
    tenantId,
    id: options.runId?.toLowerCase() ?? uuidv7(),
    workflowName: wf.name,
    workflowVersion: wf.version,
    idempotencyKey,
    concurrencyKey,
    concurrencyLimit: concurrencyKey === null ? null : (limits?.limitFor(concurrencyKey) ?? DEFAULT_CONCURRENCY_LIMIT),
    priority: options.priority ?? 0,
    input: stored,
    inputHash: hash,
    parentId: null,
    timeoutMs: wf.timeout ?? null,
    traceId: ids.traceId,
    spanId: ids.spanId,
    actorId,
    policyVersion,
    eventPayload: { inputHash: hash, inputBytes: Buffer.byteLength(JSON.stringify(stored ?? null)), ...(idempotencyKey ? { keyed: true } : {}) },
  };
}

/** Who holds a start's idempotency key: a run, or (retention removed it) the run's tombstone. */
export type KeyHolder = { task: TaskRecord } | { expired: RunExpiredError };

/**
 * The run already holding `task`'s idempotency key, checked against its input; when retention
 * removed that run but its key's tombstone lives, a RunExpiredError saying how it ended. (The
 * start statement found one of the two; retention removes a run and writes its tombstone in one
 * transaction, so the second look finds the other when the first is gone.)
 */
export async function existingRun(core: EngineCore, task: NewTask): Promise<KeyHolder> {
  const key = task.idempotencyKey!;
  const existing = await getTaskByKey(core.pool, task.tenantId, task.workflowName, key);
  const holder = existing ?? (await getTombstone(core.pool, task.tenantId, runScope(task.workflowName), key));
  if (!holder) throw new RatchetError('the idempotency key was taken and released concurrently; try again', { code: 'IDEMPOTENCY_RACE' });
  const holderId = 'runId' in holder ? holder.runId : holder.id;
  if (holder.inputHash !== task.inputHash) {
    throw new IdempotencyConflictError(
      `idempotency key "${key}" already started run ${holderId} of ${task.workflowName} with a different input`,
      { key, runId: holderId },
    );
  }
  if (existing) return { task: existing };
  const tomb = holder as Exclude<typeof holder, TaskRecord>;
  return {
    expired: new RunExpiredError(
      `run ${tomb.runId} of ${task.workflowName} (idempotency key "${key}") ${tomb.outcome} and was removed by retention; ` +
        `its output is gone, and the key is remembered until ${tomb.expiresAt.toISOString()}`,
      {
        runId: tomb.runId,
        key,
        outcome: tomb.outcome,
        expiresAt: tomb.expiresAt.toISOString(),
        ...(tomb.finishedAt ? { finishedAt: tomb.finishedAt.toISOString() } : {}),
      },
    ),
  };
}
