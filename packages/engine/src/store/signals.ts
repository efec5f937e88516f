/**
 * SQL for `ratchet.signals` and the requests others make of a run: signal and cancel.
 *
 * Signal (DESIGN §3.6). The sender stores the signal row first and bumps the run's
 * `signal_seq` in the same statement; it never changes `state_version`. A `waiting` run becomes
 * due now (a worker claims it and its wait consumes the signal); a `running` run's worker is
 * notified on `ratchet_signal`. The worker's move to `waiting` carries the counter it last saw,
 * and a run whose counter moved meanwhile is made due at once (store/tasks.ts), so a signal that
 * lands during that move is not lost either.
 *
 * Consume. A wait takes the oldest unconsumed signal of its names and records it as its result
 * in ONE fenced statement: the signal is marked consumed only together with the wait's record.
 *
 * Cancel. One statement over the run and its descendants (children, grandchildren…): a run no
 * worker holds (pending, sleeping, waiting, parked) is cancelled at once with its event; a
 * running one gets `cancel_requested_at` (no version bump) and its worker is notified on
 * `ratchet_cancel`: the workflow sees `CancelledError` at its next `ctx` call.
 */
import type pg from 'pg';
import type { Fence } from './rows.js';
import { WORK_CHANNEL } from './tasks.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Channel a signal (or a settled child) notifies with the run id, for a worker holding that run. */
export const SIGNAL_CHANNEL = 'ratchet_signal';
/** Channel a cancel request notifies with the run id, for a worker holding that run. */
export const CANCEL_CHANNEL = 'ratchet_cancel';

export interface SignalSend {
  tenantId: string;
  taskId: string;
  id: string;
  name: string;
  payload: unknown;
  idempotencyKey: string | null;
}

export interface SentSignal {
  /** The run's state when the signal was stored; null: no such run, or it has finished. */
  state: string | null;
  signalId: string | null;
}

const sendSignalSql = {
  name: 'ratchet_send_signal',
  text: `
    WITH t AS (
      UPDATE ratchet.tasks t
         SET signal_seq = t.signal_seq + 1,
             due_at = CASE WHEN t.state = 'waiting' THEN ratchet.now() ELSE t.due_at END,
             updated_at = ratchet.now()
       WHERE t.tenant_id = $1 AND t.id = $2 AND t.state NOT IN ('completed', 'failed', 'cancelled')
      RETURNING t.tenant_id, t.id, t.state, t.workflow_name
    ), s AS (
      INSERT INTO ratchet.signals (tenant_id, id, task_id, name, payload, idempotency_key, created_at)
      SELECT t.tenant_id, $3, t.id, $4, $5, $6, clock_timestamp() FROM t
      ON CONFLICT (idempotency_key, task_id, tenant_id) WHERE idempotency_key IS NOT NULL DO NOTHING
      RETURNING id
    ), n AS (
      SELECT pg_notify('${SIGNAL_CHANNEL}', t.id::text) FROM t WHERE t.state = 'running'
      UNION ALL
      SELECT pg_notify('${WORK_CHANNEL}', t.workflow_name) FROM t WHERE t.state = 'waiting'
    )
    SELECT t.state, coalesce((SELECT id FROM s), (SELECT x.id FROM ratchet.signals x
                                                     WHERE x.idempotency_key = $6 AND x.task_id = $2 AND x.tenant_id = $1)) AS "signalId",
           (SELECT count(*) FROM n) AS notified
      FROM t`,
};

/** Stores a signal for a run that has not finished, bumps its counter and wakes it. */
export async function sendSignal(db: Queryable, s: SignalSend): Promise<SentSignal> {
  const { rows } = await db.query<SentSignal>({
    ...sendSignalSql,
    values: [s.tenantId, s.taskId, s.id, s.name, JSON.stringify(s.payload ?? null), s.idempotencyKey],
  });
  return rows[0] ?? { state: null, signalId: null };
}

export interface ConsumedSignal {
  id: string;
  /** `{ signal, signalId, payload }`, the wait's recorded result. */
  result: { signal: string; signalId: string; payload: unknown };
  completedAt: Date;
  now: Date;
}

const consumeSignalSql = {
  name: 'ratchet_consume_signal',
  text: `
    WITH f AS (
      SELECT t.tenant_id, t.id FROM ratchet.tasks t
       WHERE t.tenant_id = $1 AND t.id = $2 AND t.lease_owner = $3 AND t.state_version = $4
         FOR SHARE
    ), s AS (
      SELECT x.tenant_id, x.id FROM ratchet.signals x JOIN f ON x.tenant_id = f.tenant_id AND x.task_id = f.id
       WHERE x.name = ANY($6::text[]) AND x.consumed_at IS NULL
         -- Never consume for a wait that is already settled (timed out): the signal stays for the next wait.
         AND NOT EXISTS (SELECT 1 FROM ratchet.operations o
                          WHERE o.task_id = $2 AND o.step_key = $8 AND o.tenant_id = $1 AND o.state <> 'reserved')
       ORDER BY x.created_at, x.id
       LIMIT 1
         FOR UPDATE OF x
    ), u AS (
      UPDATE ratchet.signals x SET consumed_at = ratchet.now(), consumed_by = $8
        FROM s WHERE x.tenant_id = s.tenant_id AND x.id = s.id
      RETURNING x.id, x.name, x.payload
    ), o AS (
      INSERT INTO ratchet.operations AS o (tenant_id, id, task_id, step_name, step_key, seq, kind, state, attempt, result,
                                           trace_id, span_id, created_at, completed_at)
      SELECT $1, $5, $2, $7, $8, $9, 'wait', 'succeeded', 1,
             jsonb_build_object('signal', u.name, 'signalId', u.id, 'payload', u.payload), $10, $11, ratchet.now(), ratchet.now()
        FROM u
      ON CONFLICT (task_id, step_key, tenant_id) DO UPDATE
         SET state = 'succeeded', seq = EXCLUDED.seq, result = EXCLUDED.result, error = NULL,
             trace_id = EXCLUDED.trace_id, span_id = EXCLUDED.span_id, completed_at = EXCLUDED.completed_at
       WHERE o.state = 'reserved'
      RETURNING o.id, o.result, o.completed_at
    )
    SELECT o.id, o.result, o.completed_at AS "completedAt", ratchet.now() AS now FROM o`,
};

export interface ConsumeArgs {
  operationId: string;
  names: string[];
  stepName: string;
  stepKey: string;
  seq: number;
  traceId: string | null;
  spanId: string | null;
}

/** The oldest unconsumed signal of `names`, consumed and recorded as the wait's result; null when none is there. */
export async function consumeSignal(db: Queryable, fence: Fence, c: ConsumeArgs): Promise<ConsumedSignal | null> {
  const { rows } = await db.query<ConsumedSignal>({
    ...consumeSignalSql,
    values: [fence.tenantId, fence.taskId, fence.owner, fence.stateVersion, c.operationId, c.names, c.stepName, c.stepKey, c.seq, c.traceId, c.spanId],
  });
  return rows[0] ?? null;
}

/** The run's signal counter, read before a wait looks for its signals (see the file comment); null when the fence failed. */
export async function readSignalSeq(db: Queryable, fence: Fence): Promise<number | null> {
  const { rows } = await db.query<{ signalSeq: number }>({
    name: 'ratchet_read_signal_seq',
    text: `SELECT signal_seq AS "signalSeq" FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND state_version = $4`,
    values: [fence.tenantId, fence.taskId, fence.owner, fence.stateVersion],
  });
  return rows[0]?.signalSeq ?? null;
}

export interface CancelResult {
  /** Runs of the tree cancelled at once. */
  cancelled: string[];
  /** Running runs of the tree asked to stop (their workers deliver CancelledError). */
  requested: string[];
}

/**
 * Cancels a run and its descendants in one statement (see the file comment). `error` is the
 * serialized CancelledError stored on runs cancelled at once.
 */
export async function cancelTree(db: Queryable, args: { tenantId: string; taskId: string; actorId: string; error: unknown; policyVersion: string | null }): Promise<CancelResult | null> {
  const { rows } = await db.query<{ id: string; action: 'cancelled' | 'requested' | 'none' }>({
    name: 'ratchet_cancel_tree',
    text: `
      WITH RECURSIVE tree AS (
        SELECT t.tenant_id, t.id, 0 AS depth FROM ratchet.tasks t WHERE t.tenant_id = $1 AND t.id = $2
        UNION ALL
        SELECT c.tenant_id, c.id, tree.depth + 1 FROM ratchet.tasks c
          JOIN tree ON c.parent_id = tree.id AND c.tenant_id = tree.tenant_id
         WHERE tree.depth < 100
      ), l AS (
        SELECT t.tenant_id, t.id, t.state FROM ratchet.tasks t JOIN tree ON t.tenant_id = tree.tenant_id AND t.id = tree.id
         WHERE t.state NOT IN ('completed', 'failed', 'cancelled')
         ORDER BY t.id
           FOR NO KEY UPDATE OF t
      ), idle AS (
        UPDATE ratchet.tasks t
           SET state = 'cancelled', state_version = t.state_version + 1, due_at = NULL, wake_at = NULL,
               lease_owner = NULL, lease_expires_at = NULL, cancel_requested_at = coalesce(t.cancel_requested_at, ratchet.now()),
               error = $4::jsonb, completed_at = ratchet.now(), updated_at = ratchet.now()
          FROM l WHERE t.tenant_id = l.tenant_id AND t.id = l.id AND l.state <> 'running'
        RETURNING t.tenant_id, t.id, t.state_version, t.awaited_by, t.trace_id, t.span_id, l.state AS prior_state
      ), held AS (
        UPDATE ratchet.tasks t SET cancel_requested_at = coalesce(t.cancel_requested_at, ratchet.now()), updated_at = ratchet.now()
          FROM l WHERE t.tenant_id = l.tenant_id AND t.id = l.id AND l.state = 'running'
        RETURNING t.id
      ), e AS (
        INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, policy_version, trace_id, span_id, created_at)
        SELECT i.tenant_id, i.id, i.state_version, 'cancelled', $3,
               jsonb_build_object('from', i.prior_state, 'requestedFor', $2::text), $5, i.trace_id, i.span_id, ratchet.now()
          FROM idle i
      ), n AS (
        SELECT pg_notify('ratchet_done', i.id::text) FROM idle i WHERE i.awaited_by IS NOT NULL
        UNION ALL
        SELECT pg_notify('${CANCEL_CHANNEL}', h.id::text) FROM held h
      )
      SELECT i.id, 'cancelled' AS action FROM idle i
      UNION ALL SELECT h.id, 'requested' FROM held h
      UNION ALL SELECT t.id, 'none' FROM ratchet.tasks t WHERE t.tenant_id = $1 AND t.id = $2 AND (SELECT count(*) FROM n) >= 0`,
    values: [args.tenantId, args.taskId, args.actorId, JSON.stringify(args.error), args.policyVersion],
  });
  if (rows.length === 0) return null;
  return {
    cancelled: rows.filter((r) => r.action === 'cancelled').map((r) => r.id),
    requested: rows.filter((r) => r.action === 'requested').map((r) => r.id),
  };
}
