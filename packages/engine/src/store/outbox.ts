/**
 * SQL for `ratchet.outbox`.
 *
 * `ctx.emit` writes its step record and its message in ONE statement, fenced like every
 * checkpoint (the task row locked FOR SHARE must still show this worker at the state version it
 * claimed): no message exists without its step, and no emit step without its message. The
 * statement also notifies `ratchet_outbox`, so idle relays publish at once.
 *
 * The relay's statements (relay/relay.ts) lease messages instead of holding locks while it
 * publishes: the claim moves `available_at` to the end of the lease and bumps `attempts` in one
 * statement (FOR UPDATE SKIP LOCKED), so nothing stays locked during the network call; the
 * outcome is then written only if `attempts` still shows that claim, so a relay whose lease ran
 * out cannot overwrite the outcome of the claim that replaced it.
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

/** A claimed message, as the relay hands it to `publish`. */
export interface ClaimedMessage {
  id: string;
  tenantId: string;
  runId: string;
  topic: string;
  /** `message_key`, or the message id for rows written without one. */
  key: string;
  payload: unknown;
  /** This claim's attempt (1 the first time the message is handed out). */
  attempt: number;
  createdAt: Date;
}

const claimMessagesSql = {
  name: 'ratchet_claim_messages',
  // Oldest due first; `id` (time-ordered) keeps the messages of one statement in emit order.
  text: `
    WITH c AS MATERIALIZED (
      SELECT tenant_id, id, available_at FROM ratchet.outbox
       WHERE dispatched_at IS NULL AND available_at <= ratchet.now()
       ORDER BY available_at, id
       LIMIT $1
         FOR UPDATE SKIP LOCKED
    )
    UPDATE ratchet.outbox o
       SET available_at = ratchet.now() + $2 * interval '1 millisecond', attempts = o.attempts + 1
      FROM c
     WHERE o.tenant_id = c.tenant_id AND o.id = c.id
    RETURNING o.id, o.tenant_id AS "tenantId", o.task_id AS "runId", o.topic, coalesce(o.message_key, o.id::text) AS key,
              o.payload, o.attempts AS attempt, o.created_at AS "createdAt", c.available_at AS "dueAt"`,
};

/**
 * Leases up to `limit` due messages for `leaseMs`: ONE statement, so two relays never hold the
 * same message at once. Returned in claim order (oldest due first).
 */
export async function claimMessages(db: Queryable, limit: number, leaseMs: number): Promise<ClaimedMessage[]> {
  const { rows } = await db.query<ClaimedMessage & { dueAt: Date }>({ ...claimMessagesSql, values: [limit, leaseMs] });
  rows.sort((a, b) => a.dueAt.getTime() - b.dueAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return rows.map(({ dueAt: _dueAt, ...message }) => message);
}

/** Which claim of a message an outcome belongs to. */
export interface ClaimRef {
  tenantId: string;
  id: string;
  attempt: number;
}

/** Marks messages dispatched, each only if it still shows the claim that published it. Resolves to how many were marked. */
export async function completeMessages(db: Queryable, claims: readonly ClaimRef[]): Promise<number> {
  if (claims.length === 0) return 0;
  const { rowCount } = await db.query({
    name: 'ratchet_complete_messages',
    text: `
      UPDATE ratchet.outbox o SET dispatched_at = ratchet.now()
        FROM unnest($1::uuid[], $2::uuid[], $3::int[]) AS m(tenant_id, id, attempt)
       WHERE o.tenant_id = m.tenant_id AND o.id = m.id AND o.attempts = m.attempt AND o.dispatched_at IS NULL`,
    values: [claims.map((c) => c.tenantId), claims.map((c) => c.id), claims.map((c) => c.attempt)],
  });
  return rowCount ?? 0;
}

export interface FailedClaim extends ClaimRef {
  /** Stored in `last_error` (the caller bounds its length). */
  error: string;
  /** From now until the message is due again. */
  retryInMs: number;
}

/** Records failed publishes: `last_error`, and due again after the backoff; fenced like completeMessages. */
export async function failMessages(db: Queryable, failures: readonly FailedClaim[]): Promise<number> {
  if (failures.length === 0) return 0;
  const { rowCount } = await db.query({
    name: 'ratchet_fail_messages',
    text: `
      UPDATE ratchet.outbox o
         SET last_error = m.error, available_at = ratchet.now() + m.retry_ms * interval '1 millisecond'
        FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::text[], $5::float8[]) AS m(tenant_id, id, attempt, error, retry_ms)
       WHERE o.tenant_id = m.tenant_id AND o.id = m.id AND o.attempts = m.attempt AND o.dispatched_at IS NULL`,
    values: [
      failures.map((f) => f.tenantId),
      failures.map((f) => f.id),
      failures.map((f) => f.attempt),
      failures.map((f) => f.error),
      failures.map((f) => f.retryInMs),
    ],
  });
  return rowCount ?? 0;
}

/** Milliseconds until the earliest pending message is due (≤ 0: due now), or null when none is pending. */
export async function nextMessageDueIn(db: Queryable): Promise<number | null> {
  const { rows } = await db.query<{ ms: number | null }>({
    name: 'ratchet_next_message_due',
    // min() over the partial index outbox_pending: one index probe.
    text: `SELECT (extract(epoch FROM min(available_at) - ratchet.now()) * 1000)::float8 AS ms FROM ratchet.outbox WHERE dispatched_at IS NULL`,
    values: [],
  });
  return rows[0]?.ms ?? null;
}
