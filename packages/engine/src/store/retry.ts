/**
 * `client.retry` in SQL: a failed run goes back to `pending` from its failure point, in ONE
 * statement — the task row (failed → pending, a new `state_version`, due now, error cleared, a
 * fresh deadline of the same length), the failure-point operations removed so replay runs them
 * again, and the `retried` event whose payload keeps what was removed (step key, kind, attempt,
 * the error's name, code and message). Nobody holds a failed run, so the operator may move it
 * (DESIGN §2: "anyone moving a run that no worker holds"); the statement is conditional on the
 * state and the version the caller read, so two operators retrying at once move it once.
 */
import type pg from 'pg';
import { WORK_CHANNEL } from './tasks.js';

export interface RetryArgs {
  tenantId: string;
  taskId: string;
  /** The version the caller read the failed run at. */
  stateVersion: number;
  /** Failed operations to run again (their step keys). */
  stepKeys: string[];
  actorId: string;
  policyVersion: string | null;
  /** The run's error before the retry (name, code, message), for the event. */
  previousError: Record<string, unknown> | null;
}

export interface RetriedRun {
  stateVersion: number;
  /** The removed records, as the event keeps them. */
  removed: { step: string; kind: string; attempt: number }[];
}

export async function retryTask(db: Pick<pg.Pool, 'query'>, r: RetryArgs): Promise<RetriedRun | null> {
  const { rows } = await db.query<RetriedRun>({
    name: 'ratchet_retry_task',
    text: `
      WITH t AS (
        UPDATE ratchet.tasks t
           SET state = 'pending', state_version = t.state_version + 1, due_at = ratchet.now(), wake_at = NULL,
               error = NULL, output = NULL, completed_at = NULL, claim_count = 0, cancel_requested_at = NULL,
               lease_owner = NULL, lease_expires_at = NULL,
               -- A run that failed at its deadline gets a deadline of the same length from now.
               deadline_at = CASE WHEN t.deadline_at IS NOT NULL THEN ratchet.now() + (t.deadline_at - t.created_at) END,
               updated_at = ratchet.now()
         WHERE t.tenant_id = $1 AND t.id = $2 AND t.state = 'failed' AND t.state_version = $3
        RETURNING t.tenant_id, t.id, t.state_version, t.trace_id, t.span_id, t.workflow_name
      ), o AS (
        DELETE FROM ratchet.operations o
         WHERE o.task_id = $2 AND o.tenant_id = $1 AND o.step_key = ANY($4::text[]) AND o.state = 'failed'
           AND EXISTS (SELECT 1 FROM t)
        RETURNING o.step_key, o.kind, o.attempt, o.seq, o.error
      ), removed AS (
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                 'step', o.step_key, 'kind', o.kind, 'attempt', o.attempt,
                 'error', jsonb_strip_nulls(jsonb_build_object('name', o.error->>'name', 'code', o.error->>'code', 'message', o.error->>'message')))
                 ORDER BY o.seq), '[]'::jsonb) AS list
          FROM o
      ), e AS (
        INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, policy_version, trace_id, span_id, created_at)
        SELECT t.tenant_id, t.id, t.state_version, 'retried', $5,
               jsonb_build_object('removed', removed.list, 'previousError', $6::jsonb), $7, t.trace_id, t.span_id, ratchet.now()
          FROM t, removed
      ), n AS (
        SELECT pg_notify('${WORK_CHANNEL}', t.workflow_name) FROM t
      )
      SELECT t.state_version AS "stateVersion", removed.list AS removed, (SELECT count(*) FROM n) AS notified FROM t, removed`,
    values: [r.tenantId, r.taskId, r.stateVersion, r.stepKeys, r.actorId, r.previousError ? JSON.stringify(r.previousError) : null, r.policyVersion],
  });
  const row = rows[0];
  return row ? { stateVersion: row.stateVersion, removed: row.removed } : null;
}
