/**
 * An operator settles a parked run's step (DESIGN §3.5: an at-most-once effect whose outcome was
 * lost). One statement: the parked run becomes pending (due now, with its `resolved` event and a
 * new state_version — nobody holds a parked run, so the operator may move it), and the step's
 * record becomes succeeded or failed. Neither changes unless both can.
 */
import type pg from 'pg';
import type { SerializedError } from '@ratchet/sdk';

export interface Resolution {
  tenantId: string;
  taskId: string;
  stepKey: string;
  state: 'succeeded' | 'failed';
  result: unknown;
  error: SerializedError | null;
  actorId: string;
}

export async function resolveOperation(db: Pick<pg.Pool, 'query'>, r: Resolution): Promise<boolean> {
  const { rows } = await db.query({
    name: 'ratchet_resolve_operation',
    text: `
      WITH t AS (
        UPDATE ratchet.tasks t
           SET state = 'pending', state_version = t.state_version + 1, due_at = ratchet.now(), error = NULL,
               claim_count = 0, updated_at = ratchet.now()
         WHERE t.tenant_id = $1 AND t.id = $2 AND t.state = 'parked'
           AND EXISTS (SELECT 1 FROM ratchet.operations o
                        WHERE o.task_id = $2 AND o.step_key = $3 AND o.tenant_id = $1 AND o.state IN ('unknown', 'reserved'))
        RETURNING t.tenant_id, t.id, t.state_version, t.trace_id, t.span_id
      ), o AS (
        UPDATE ratchet.operations o
           SET state = $4, result = $5, error = $6, reserved_at = NULL, deadline_at = NULL, completed_at = ratchet.now(),
               provider_reference = 'resolved by operator'
         WHERE o.task_id = $2 AND o.step_key = $3 AND o.tenant_id = $1 AND EXISTS (SELECT 1 FROM t)
        RETURNING o.id
      ), e AS (
        INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, trace_id, span_id, created_at)
        SELECT t.tenant_id, t.id, t.state_version, 'resolved', $7, jsonb_build_object('step', $3::text, 'state', $4::text),
               t.trace_id, t.span_id, ratchet.now()
          FROM t
      )
      SELECT (SELECT count(*) FROM o)::int AS operations FROM t`,
    values: [r.tenantId, r.taskId, r.stepKey, r.state, r.result === undefined ? null : JSON.stringify(r.result), r.error ? JSON.stringify(r.error) : null, r.actorId],
  });
  return rows.length > 0;
}
