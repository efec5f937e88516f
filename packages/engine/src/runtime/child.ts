/**
 * `ctx.child(name, workflow, input)`: starts a child run and waits for its output.
 *
 * Start: the child run is inserted idempotently — its key defaults to `<parent run id>:<step
 * key>`, so a parent that crashes before recording the step starts the same child again, not a
 * second one — with `parent_id` set, then the step is recorded `reserved` with the child's id.
 * Wait: the parent holds no worker slot; it suspends as `waiting`, and when the child settles
 * (whatever settles it: its worker, a cancel, an operator) a trigger (migration 0006) bumps the
 * parent's signal counter, makes it due and notifies, so the parent resumes and records the
 * child's outcome: its output, or `StepFailedError` (cause: the child's error) when it failed or
 * was cancelled. Cancelling the parent cancels its children (store/signals.ts).
 */
import {
  IdempotencyConflictError,
  StepFailedError,
  TenantMismatchError,
  ValidationError,
  deserializeError,
  isWorkflow,
  serializeError,
  type ChildOptions,
  type Workflow,
  type WorkflowRef,
} from '@ratchet/sdk';
import { newTaskFor } from '../client/start.js';
import { tenantOf } from '../core.js';
import { createTask, getTask, getTaskByKey } from '../store/tasks.js';
import type { OperationRecord, TaskRecord } from '../store/rows.js';
import type { Execution, Found } from './execution.js';
import { FINAL } from '../client/result.js';

export async function runChild<O>(
  run: Execution,
  name: string,
  key: string,
  recorded: OperationRecord | undefined,
  wf: WorkflowRef<unknown, O, unknown>,
  input: unknown,
  opts: ChildOptions | undefined,
): Promise<O> {
  if (recorded && recorded.state !== 'reserved') return run.replay<O>(key, recorded);
  const childId = recorded
    ? (recorded.result as { runId: string }).runId
    : await run.instrument({ kind: 'child', name, stepKey: key, attempt: 1, childWorkflow: String((wf as { name?: unknown })?.name) }, async (facts) => {
        // Started inside the span, so the child run's origin (its first segment's parent) is this step.
        facts.childRunId = await start(run, name, key, wf, input, opts);
        return facts.childRunId;
      });
  const look = async (): Promise<Found<O> | undefined> => {
    const child = await run.sql((pool) => getTask(pool, run.tenantId, childId));
    if (child && !FINAL.has(child.state)) return undefined;
    return record<O>(run, name, key, childId, child);
  };
  const now = await look();
  if (now) return 'value' in now ? now.value : Promise.reject(now.error);
  return run.awaitExternal<O>(key, null, look, () => Promise.reject(new Error('unreachable: a child wait has no timeout')));
}

async function start(run: Execution, name: string, key: string, wf: WorkflowRef<unknown, unknown, unknown>, input: unknown, opts: ChildOptions | undefined): Promise<string> {
  if (!isWorkflow(wf)) throw new ValidationError('must be a workflow made by workflow()', { path: ['workflow'] });
  if (opts !== undefined && (typeof opts !== 'object' || opts === null)) throw new ValidationError('must be an object', { path: ['opts'] });
  if (opts?.tenantId !== undefined && tenantOf(opts.tenantId, 'tenantId') !== run.tenantId) {
    throw new TenantMismatchError('a child run belongs to its parent’s tenant', { tenantId: opts.tenantId, runId: run.runId });
  }
  const idempotencyKey = opts?.idempotencyKey ?? `${run.runId}:${key}`;
  const task = { ...newTaskFor(wf as Workflow, input, { tenantId: run.tenantId, idempotencyKey }, run.owner, run.options.policyVersion), parentId: run.runId };
  // Repeatable: after a lost COMMIT the repeat finds the key taken, and the lookup below finds our child.
  await run.hook('beforeChildStart', key);
  const row = await run.sql((pool) => createTask(pool, task));
  let childId = row?.id;
  if (!childId) {
    const existing = await run.sql((pool) => getTaskByKey(pool, task.tenantId, task.workflowName, idempotencyKey));
    if (!existing || existing.parentId !== run.runId || existing.inputHash !== task.inputHash) {
      throw new IdempotencyConflictError(
        `idempotency key "${idempotencyKey}" of child ${key} belongs to ${existing ? `run ${existing.id}` : 'a run that is gone'}, not to a child of this run with this input`,
        { key: idempotencyKey, ...(existing ? { runId: existing.id } : {}) },
      );
    }
    childId = existing.id;
  }
  await run.write({
    stepName: name, stepKey: key, kind: 'child', idempotencyKey: null, inputHash: task.inputHash,
    state: 'reserved', attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null,
    result: { runId: childId, workflow: wf.name, version: wf.version },
  });
  return childId;
}

/** Records the settled child's outcome as the step's result. */
async function record<O>(run: Execution, name: string, key: string, childId: string, child: TaskRecord | null): Promise<Found<O>> {
  const base = { stepName: name, stepKey: key, kind: 'child' as const, idempotencyKey: null, inputHash: null, attempt: 1, expectedAttempt: 1, inFlight: false, deadlineInMs: null };
  if (child?.state === 'completed') {
    const written = await run.write({ ...base, state: 'succeeded', result: child.output ?? null });
    run.fact(key, written.completedAt);
    return { value: (child.output ?? null) as O };
  }
  const cause = child ? deserializeError(child.error ?? { name: 'RatchetError', code: child.state.toUpperCase(), message: `the child run ${child.state}` }) : undefined;
  const failure = new StepFailedError(`child run ${childId} (${key}) ${child ? child.state : 'is gone'}${cause ? `: ${cause.message}` : ''}`, {
    runId: run.runId,
    step: key,
    ...(cause ? { cause } : {}),
  });
  const written = await run.write({ ...base, state: 'failed', error: serializeError(failure) });
  run.fact(key, written.completedAt);
  return { error: failure };
}
