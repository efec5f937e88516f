/**
 * SQL for `ratchet.contracts`.
 *
 * Sealing is ONE fenced statement: the contract row (`sealed`), the seal step's record, the
 * run's state_version bump and its `contract_sealed` event. Committing is a SERIALIZABLE
 * transaction (runtime/commit.ts) built from the statements below, whose first statement is the
 * lease fence.
 *
 * Contract states: sealed ──commit──▶ committed | failed (a trigger refuses anything else).
 */
import type pg from 'pg';
import type { SerializedError } from '@ratchet/sdk';
import type { EventType } from '../schema/index.js';
import type { Fence } from './rows.js';
import { OUTBOX_CHANNEL } from './outbox.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export interface ContractRecord {
  id: string;
  taskId: string;
  idempotencyKey: string;
  agentId: string | null;
  contractVersion: string;
  body: unknown;
  bodyHash: string;
  status: 'sealed' | 'committed' | 'failed';
  result: unknown;
  errorDetail: { reason: string; error: SerializedError; [key: string]: unknown } | null;
  createdAt: Date;
  committedAt: Date | null;
}

const CONTRACT_COLUMNS = `c.id, c.task_id AS "taskId", c.idempotency_key AS "idempotencyKey", c.agent_id AS "agentId",
  c.contract_version AS "contractVersion", c.body, c.body_hash AS "bodyHash", c.status, c.result,
  c.error_detail AS "errorDetail", c.created_at AS "createdAt", c.committed_at AS "committedAt"`;

export interface SealArgs {
  contractId: string;
  idempotencyKey: string;
  agentId: string | null;
  version: string;
  body: unknown;
  hash: string;
  operationId: string;
  stepName: string;
  stepKey: string;
  seq: number;
  /** The seal step's recorded result (the SealedContract). */
  result: unknown;
  traceId: string | null;
  spanId: string | null;
}

export type SealOutcome =
  | { status: 'sealed'; stateVersion: number; createdAt: Date }
  | { status: 'exists' }
  | { status: 'fenced' };

/** Seals in one statement; 'exists' when the key already holds a contract (or its tombstone), 'fenced' when the run is not ours. */
export async function sealContract(db: Queryable, fence: Fence, a: SealArgs): Promise<SealOutcome> {
  const { rows } = await db.query<{ fenced: number; stateVersion: number | null; createdAt: Date | null }>({
    name: 'ratchet_seal_contract',
    text: `
      WITH f AS (
        SELECT tenant_id, id FROM ratchet.tasks
         WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND state_version = $4
           FOR UPDATE
      ), c AS (
        INSERT INTO ratchet.contracts (tenant_id, id, task_id, idempotency_key, agent_id, contract_version, body, body_hash,
                                       status, step_key, created_at)
        SELECT f.tenant_id, $5, f.id, $6, $7, $8, $9, $10, 'sealed', $13, ratchet.now() FROM f
         -- A key whose contract retention removed lives on as a tombstone: refused like a taken key.
         WHERE NOT EXISTS (SELECT 1 FROM ratchet.idempotency_keys k
                            WHERE k.key = $6 AND k.scope = 'contract' AND k.tenant_id = $1 AND k.expires_at > ratchet.now())
        ON CONFLICT (idempotency_key, tenant_id) DO NOTHING
        RETURNING id, created_at
      ), o AS (
        INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state, attempt, result,
                                        trace_id, span_id, created_at, completed_at)
        SELECT $1, $11, $2, $12, $13, $14, 'seal', 'succeeded', 1, $15, $16, $17, ratchet.now(), ratchet.now() FROM c
      ), t AS (
        UPDATE ratchet.tasks t SET state_version = t.state_version + 1, updated_at = ratchet.now()
         WHERE t.tenant_id = $1 AND t.id = $2 AND EXISTS (SELECT 1 FROM c)
        RETURNING t.tenant_id, t.id, t.state_version, t.trace_id, t.span_id
      ), e AS (
        INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, trace_id, span_id, created_at)
        SELECT t.tenant_id, t.id, t.state_version, 'contract_sealed', $3,
               jsonb_build_object('contractId', $5::uuid, 'hash', $10::text, 'step', $13::text),
               coalesce($16::text, t.trace_id), coalesce($17::text, t.span_id), ratchet.now()
          FROM t
      )
      SELECT (SELECT count(*) FROM f)::int AS fenced, (SELECT state_version FROM t) AS "stateVersion",
             (SELECT created_at FROM c) AS "createdAt"`,
    values: [
      fence.tenantId,
      fence.taskId,
      fence.owner,
      fence.stateVersion,
      a.contractId,
      a.idempotencyKey,
      a.agentId,
      a.version,
      JSON.stringify(a.body),
      a.hash,
      a.operationId,
      a.stepName,
      a.stepKey,
      a.seq,
      JSON.stringify(a.result),
      a.traceId,
      a.spanId,
    ],
  });
  const row = rows[0]!;
  if (row.fenced === 0) return { status: 'fenced' };
  if (row.stateVersion === null) return { status: 'exists' };
  return { status: 'sealed', stateVersion: row.stateVersion, createdAt: row.createdAt! };
}

export async function getContractByKey(db: Queryable, tenantId: string, key: string): Promise<ContractRecord | null> {
  const { rows } = await db.query<ContractRecord>({
    name: 'ratchet_get_contract_by_key',
    text: `SELECT ${CONTRACT_COLUMNS} FROM ratchet.contracts c WHERE c.idempotency_key = $2 AND c.tenant_id = $1`,
    values: [tenantId, key],
  });
  return rows[0] ?? null;
}

// ------------------------------------------------------------- inside the commit transaction

/** The commit's first statement: the task row, locked, still ours at our version. */
export async function lockFence(tx: pg.PoolClient, fence: Fence): Promise<boolean> {
  const { rows } = await tx.query({
    name: 'ratchet_commit_fence',
    text: `SELECT 1 FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND state_version = $4 FOR UPDATE`,
    values: [fence.tenantId, fence.taskId, fence.owner, fence.stateVersion],
  });
  return rows.length > 0;
}

export async function lockContract(tx: pg.PoolClient, tenantId: string, id: string): Promise<ContractRecord | null> {
  const { rows } = await tx.query<ContractRecord>({
    name: 'ratchet_lock_contract',
    text: `SELECT ${CONTRACT_COLUMNS} FROM ratchet.contracts c WHERE c.tenant_id = $1 AND c.id = $2 FOR UPDATE`,
    values: [tenantId, id],
  });
  return rows[0] ?? null;
}

export interface Settlement {
  contractId: string;
  status: 'committed' | 'failed';
  result: unknown;
  errorDetail: unknown;
  /** The commit step's record. */
  operation: { id: string; stepName: string; stepKey: string; seq: number; result: unknown; error: SerializedError | null; traceId: string | null; spanId: string | null };
  outbox: { id: string; topic: string; key: string | null; payload: unknown }[];
  event: EventType;
  eventPayload: Record<string, unknown>;
  actorId: string;
}

/**
 * Settles the locked contract, records the commit step, writes the outbox rows, and bumps the
 * run's state_version with its event — one statement, inside the commit transaction. Resolves
 * to the new state_version and the time of the fact.
 */
export async function settleContract(tx: pg.PoolClient, fence: Fence, s: Settlement): Promise<{ stateVersion: number; now: Date }> {
  const { rows } = await tx.query<{ stateVersion: number; now: Date }>({
    name: 'ratchet_settle_contract',
    text: `
      WITH g AS (
        -- The contracts guard admits a status change only for the contract named here.
        SELECT set_config('ratchet.settling_contract', $4::text, true) AS settling
      ), c AS (
        UPDATE ratchet.contracts SET status = $5, result = $6, error_detail = $7,
               committed_at = CASE WHEN $5 = 'committed' THEN ratchet.now() END
         WHERE tenant_id = $1 AND id = $4::uuid AND (SELECT settling IS NOT NULL FROM g)
        RETURNING id
      ), o AS (
        INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state, attempt, result, error,
                                        trace_id, span_id, created_at, completed_at)
        VALUES ($1, $8, $2, $9, $10, $11, 'commit', CASE WHEN $5 = 'committed' THEN 'succeeded' ELSE 'failed' END, 1,
                $12, $13, $14, $15, ratchet.now(), ratchet.now())
      ), m AS (
        INSERT INTO ratchet.outbox (tenant_id, id, task_id, topic, message_key, payload, available_at, created_at)
        SELECT $1, m.id, $2, m.topic, m.key, m.payload, ratchet.now(), ratchet.now()
          FROM jsonb_to_recordset($16::jsonb) AS m(id uuid, topic text, key text, payload jsonb)
      ), t AS (
        UPDATE ratchet.tasks t SET state_version = t.state_version + 1, updated_at = ratchet.now()
         WHERE t.tenant_id = $1 AND t.id = $2 AND t.lease_owner = $3
        RETURNING t.tenant_id, t.id, t.state_version, t.trace_id, t.span_id
      ), e AS (
        INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, trace_id, span_id, created_at)
        SELECT t.tenant_id, t.id, t.state_version, $17, $3, $18, coalesce($14::text, t.trace_id), coalesce($15::text, t.span_id), ratchet.now() FROM t
      ), n AS (
        -- Wakes idle relays, delivered at COMMIT; only when there are messages (a NOTIFY takes a cluster-wide lock at commit).
        SELECT pg_notify('${OUTBOX_CHANNEL}', '') WHERE jsonb_array_length($16::jsonb) > 0
      )
      SELECT t.state_version AS "stateVersion", ratchet.now() AS now, (SELECT count(*) FROM n) AS notified FROM t`,
    values: [
      fence.tenantId,
      fence.taskId,
      fence.owner,
      s.contractId,
      s.status,
      s.result === undefined ? null : JSON.stringify(s.result),
      s.errorDetail === undefined || s.errorDetail === null ? null : JSON.stringify(s.errorDetail),
      s.operation.id,
      s.operation.stepName,
      s.operation.stepKey,
      s.operation.seq,
      s.operation.result === undefined ? null : JSON.stringify(s.operation.result),
      s.operation.error ? JSON.stringify(s.operation.error) : null,
      s.operation.traceId,
      s.operation.spanId,
      JSON.stringify(s.outbox),
      s.event,
      JSON.stringify(s.eventPayload),
    ],
  });
  return rows[0]!;
}

/** The run's state_version, when this owner still holds it (after a commit whose answer was lost). */
export async function ownedVersion(db: Queryable, fence: Fence): Promise<number | null> {
  const { rows } = await db.query<{ v: number }>({
    name: 'ratchet_owned_version',
    text: `SELECT state_version AS v FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3`,
    values: [fence.tenantId, fence.taskId, fence.owner],
  });
  return rows[0]?.v ?? null;
}
