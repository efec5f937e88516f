/**
 * SQL for `ratchet.outbox`.
 *
 * `ctx.emit` writes its step record and its message in ONE statement, fenced like every
 * checkpoint (the task row locked FOR SHARE must still show this worker at the state version it
 * claimed): no message exists without its step, and no emit step without its message. The
 * statement also notifies `ratchet_outbox`, so idle relays publish at once.
 */
import type pg from 'pg';
import type { Fence } from './rows.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Channel an emit (or a commit with messages) notifies so idle relays publish at once. */
export const OUTBOX_CHANNEL = 'ratchet_outbox';

export interface EmitWrite {
  operationId: string;
  messageId: string;
  stepName: string;
  stepKey: string;
  seq: number;
  topic: string;
  /** Stable per message: consumers deduplicate on it (at-least-once delivery). */
  messageKey: string;
  payload: unknown;
  traceId: string | null;
  spanId: string | null;
}

export interface WrittenEmit {
  id: string;
  createdAt: Date;
  completedAt: Date | null;
  now: Date;
}

const writeEmitSql = {
  name: 'ratchet_write_emit',
  text: `
    WITH o AS (
      INSERT INTO ratchet.operations AS o (tenant_id, id, task_id, step_name, step_key, seq, kind, state, attempt, result,
                                           trace_id, span_id, created_at, completed_at)
      SELECT $1, $5, $2, $7, $8, $9, 'emit', 'succeeded', 1, jsonb_build_object('topic', $10::text, 'messageKey', $11::text),
             $13, $14, ratchet.now(), ratchet.now()
        FROM ratchet.tasks t
       WHERE t.tenant_id = $1 AND t.id = $2 AND t.lease_owner = $3 AND t.state_version = $4
         FOR SHARE
      ON CONFLICT (task_id, step_key, tenant_id) DO NOTHING
      RETURNING o.id, o.created_at, o.completed_at
    ), m AS (
      INSERT INTO ratchet.outbox (tenant_id, id, task_id, topic, message_key, payload, available_at, created_at)
      SELECT $1, $6, $2, $10, $11, $12, ratchet.now(), ratchet.now() FROM o
    ), n AS (
      SELECT pg_notify('${OUTBOX_CHANNEL}', $10) FROM o
    )
    SELECT o.id, o.created_at AS "createdAt", o.completed_at AS "completedAt", ratchet.now() AS now,
           (SELECT count(*) FROM n) AS notified
      FROM o`,
};

/** Records an emit step with its outbox message, fenced. Null when nothing was written (see checkpoint.ts for why). */
export async function writeEmit(db: Queryable, fence: Fence, e: EmitWrite): Promise<WrittenEmit | null> {
  const { rows } = await db.query<WrittenEmit>({
    ...writeEmitSql,
    values: [
      fence.tenantId,
      fence.taskId,
      fence.owner,
      fence.stateVersion,
      e.operationId,
      e.messageId,
      e.stepName,
      e.stepKey,
      e.seq,
      e.topic,
      e.messageKey,
      JSON.stringify(e.payload ?? null),
      e.traceId,
      e.spanId,
    ],
  });
  return rows[0] ?? null;
}
