/**
 * `client.retry(runId)`: re-runs a failed run from its failure point.
 *
 * A run's record is its operations; replay returns every recorded result without running
 * anything. "From its failure point" therefore means: keep every record the run made, except
 * the failed step that failed the run, and make the run claimable again. On the next claim the
 * workflow replays from the top — recorded steps return their results, effects are not called
 * again, the model is not asked again — and the failed step, having no record, runs afresh (with
 * a fresh retry budget; an effect keeps its idempotency key, by default run id + step key, so a
 * provider that honours keys sees the same key).
 *
 * The failure point is the step the run's error names (`StepFailedError.step`, found in the
 * error or its causes) when that step's record is `failed`; without one (the code threw outside
 * any step, output validation, a wrapped error), the trailing failed records — failed steps
 * after which nothing else was recorded; with none, nothing is removed and the code simply runs
 * again over its records (the fix is the new code). A failed child step first retries the failed
 * child runs of this run (depth first), so the replayed `ctx.child` finds its child running again
 * under the same key. A workflow `timeout` starts over from the retry. A rejected contract stays
 * rejected: its commit step runs again and meets the same `failed` contract.
 *
 * Every record stays except the failure point's, whose facts are kept in the `retried` event.
 * One statement moves the run (store/retry.ts); it is conditional on the state and version read,
 * so a concurrent retry or purge makes this one a clear error rather than a double move.
 */
import { NotFoundError, RatchetError, ValidationError, type SerializedError } from '@ratchet/sdk';
import { isUuid } from '../ids.js';
import { tenantOf, type EngineCore } from '../core.js';
import { getTask } from '../store/tasks.js';
import { listOperations } from '../store/operations.js';
import type { OperationRecord } from '../store/rows.js';
import { retryTask } from '../store/retry.js';

export interface RetryResult {
  runId: string;
  /** Step keys whose failed records were removed: they run again. */
  rerun: string[];
  /** Failed child runs retried first (ids). */
  children: string[];
}

const MAX_DEPTH = 20;

export async function retryRun(core: EngineCore, actorId: string, runId: string, options: { tenantId?: string } = {}, depth = 0): Promise<RetryResult> {
  const tenantId = tenantOf(options.tenantId);
  if (!isUuid(runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
  const id = runId.toLowerCase();
  const task = await getTask(core.pool, tenantId, id);
  if (!task) throw new NotFoundError(`no run ${runId}`, { resource: 'run', id: runId });
  if (task.state !== 'failed') {
    throw new RatchetError(
      `run ${runId} is ${task.state}, not failed; only a failed run can be retried${task.state === 'parked' ? ' (a parked run is settled with resolve)' : ''}`,
      { code: 'NOT_FAILED', runId: id },
    );
  }
  const operations = await listOperations(core.pool, tenantId, id);
  const rerun = failurePoint(task.error, operations);
  const children: string[] = [];
  if (rerun.some((key) => operations.find((o) => o.stepKey === key)?.kind === 'child')) {
    if (depth >= MAX_DEPTH) throw new RatchetError(`run ${runId}: failed children nested deeper than ${MAX_DEPTH}`, { code: 'RETRY_TOO_DEEP', runId: id });
    const { rows } = await core.pool.query<{ id: string }>(
      `SELECT id FROM ratchet.tasks WHERE parent_id = $1 AND tenant_id = $2 AND state = 'failed' ORDER BY created_at`,
      [id, tenantId],
    );
    for (const child of rows) {
      const done = await retryRun(core, actorId, child.id, { tenantId }, depth + 1);
      children.push(child.id, ...done.children);
    }
  }
  const moved = await retryTask(core.pool, {
    tenantId,
    taskId: id,
    stateVersion: task.stateVersion,
    stepKeys: rerun,
    actorId,
    policyVersion: core.runtime.policyVersion,
    previousError: task.error ? { name: task.error.name, ...(task.error.code ? { code: task.error.code } : {}), message: task.error.message } : null,
  });
  if (!moved) {
    throw new RatchetError(`run ${runId} changed while it was being retried (another operator, or retention); look at it again`, {
      code: 'RETRY_RACE',
      runId: id,
    });
  }
  return { runId: id, rerun: moved.removed.map((r) => r.step), children };
}

/** The failed records to run again (see the file comment). Exported for tests. */
export function failurePoint(error: SerializedError | null, operations: readonly OperationRecord[]): string[] {
  const failed = new Map(operations.filter((o) => o.state === 'failed').map((o) => [o.stepKey, o]));
  for (let e: SerializedError | undefined = error ?? undefined; e; e = e.cause) {
    const step = e.data?.step;
    if (typeof step === 'string' && failed.has(step)) return [step];
  }
  const ordered = [...operations].sort((a, b) => a.seq - b.seq);
  const trailing: string[] = [];
  for (let i = ordered.length - 1; i >= 0 && ordered[i]!.state === 'failed'; i -= 1) trailing.unshift(ordered[i]!.stepKey);
  return trailing;
}
