/**
 * Read-only SQL for operators (the CLI, the web view, `client.inspect`): runs listed with
 * filters, and everything recorded about one run — its steps, events, contracts, signals and
 * children. Every statement is scoped by tenant; none takes a lock or writes.
 */
import type pg from 'pg';
import type { SerializedError } from '@ratchet/sdk';
import type { ContractStatus, OperationKind, OperationState, TaskState } from '../schema/index.js';
import { TASK_COLUMNS, type TaskRecord } from './rows.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export interface RunFilter {
  tenantId: string;
  states?: readonly TaskState[] | undefined;
  workflow?: string | undefined;
  version?: string | undefined;
  /** Created at or after. */
  createdAfter?: Date | undefined;
  /** Created before. */
  createdBefore?: Date | undefined;
  limit: number;
}

export interface RunRow extends TaskRecord {
  concurrencyKey: string | null;
  priority: number;
}

/** Runs of a tenant matching the filter, newest first (ids are UUIDv7: time-ordered). */
export async function listRuns(db: Queryable, f: RunFilter): Promise<RunRow[]> {
  const { rows } = await db.query<RunRow>({
    name: 'ratchet_inspect_list_runs',
    text: `SELECT ${TASK_COLUMNS}, t.concurrency_key AS "concurrencyKey", t.priority FROM ratchet.tasks t
            WHERE t.tenant_id = $1
              AND ($2::text[] IS NULL OR t.state = ANY($2::text[]))
              AND ($3::text IS NULL OR t.workflow_name = $3)
              AND ($4::text IS NULL OR t.workflow_version = $4)
              AND ($5::timestamptz IS NULL OR t.created_at >= $5)
              AND ($6::timestamptz IS NULL OR t.created_at < $6)
            ORDER BY t.id DESC LIMIT $7`,
    values: [f.tenantId, f.states && f.states.length > 0 ? f.states : null, f.workflow ?? null, f.version ?? null, f.createdAfter ?? null, f.createdBefore ?? null, f.limit],
  });
  return rows;
}

export async function getRun(db: Queryable, tenantId: string, id: string): Promise<RunRow | null> {
  const { rows } = await db.query<RunRow>(
    `SELECT ${TASK_COLUMNS}, t.concurrency_key AS "concurrencyKey", t.priority FROM ratchet.tasks t WHERE t.tenant_id = $1 AND t.id = $2`,
    [tenantId, id],
  );
  return rows[0] ?? null;
}

export interface StepRow {
  stepKey: string;
  stepName: string;
  seq: number;
  kind: OperationKind;
  state: OperationState;
  attempt: number;
  idempotencyKey: string | null;
  inputHash: string | null;
  providerReference: string | null;
  reservedAt: Date | null;
  deadlineAt: Date | null;
  result: unknown;
  error: SerializedError | null;
  traceId: string | null;
  spanId: string | null;
  createdAt: Date;
  completedAt: Date | null;
}

export async function runSteps(db: Queryable, tenantId: string, id: string): Promise<StepRow[]> {
  const { rows } = await db.query<StepRow>(
    `SELECT o.step_key AS "stepKey", o.step_name AS "stepName", o.seq, o.kind, o.state, o.attempt,
            o.idempotency_key AS "idempotencyKey", o.input_hash AS "inputHash", o.provider_reference AS "providerReference",
            o.reserved_at AS "reservedAt", o.deadline_at AS "deadlineAt", o.result, o.error,
            o.trace_id AS "traceId", o.span_id AS "spanId", o.created_at AS "createdAt", o.completed_at AS "completedAt"
       FROM ratchet.operations o WHERE o.task_id = $2 AND o.tenant_id = $1 ORDER BY o.seq`,
    [tenantId, id],
  );
  return rows;
}

export interface EventInfo {
  seq: number;
  type: string;
  actor: string | null;
  payload: unknown;
  policyVersion: string | null;
  traceId: string | null;
  spanId: string | null;
  createdAt: Date;
}

export async function runEvents(db: Queryable, tenantId: string, id: string): Promise<EventInfo[]> {
  const { rows } = await db.query<EventInfo>(
    `SELECT e.seq, e.event_type AS type, e.actor_id AS actor, e.payload, e.policy_version AS "policyVersion",
            e.trace_id AS "traceId", e.span_id AS "spanId", e.created_at AS "createdAt"
       FROM ratchet.events e WHERE e.tenant_id = $1 AND e.task_id = $2 ORDER BY e.seq`,
    [tenantId, id],
  );
  return rows;
}

export interface ContractInfo {
  id: string;
  idempotencyKey: string;
  stepKey: string | null;
  agentId: string | null;
  contractVersion: string;
  status: ContractStatus;
  bodyHash: string;
  body: unknown;
  result: unknown;
  errorDetail: unknown;
  createdAt: Date;
  committedAt: Date | null;
}

export async function runContracts(db: Queryable, tenantId: string, id: string): Promise<ContractInfo[]> {
  const { rows } = await db.query<ContractInfo>(
    `SELECT c.id, c.idempotency_key AS "idempotencyKey", c.step_key AS "stepKey", c.agent_id AS "agentId",
            c.contract_version AS "contractVersion", c.status, c.body_hash AS "bodyHash", c.body, c.result,
            c.error_detail AS "errorDetail", c.created_at AS "createdAt", c.committed_at AS "committedAt"
       FROM ratchet.contracts c WHERE c.task_id = $2 AND c.tenant_id = $1 ORDER BY c.created_at, c.id`,
    [tenantId, id],
  );
  return rows;
}

export interface SignalInfo {
  id: string;
  name: string;
  payload: unknown;
  consumedAt: Date | null;
  consumedBy: string | null;
  createdAt: Date;
}

export async function runSignals(db: Queryable, tenantId: string, id: string): Promise<SignalInfo[]> {
  const { rows } = await db.query<SignalInfo>(
    `SELECT s.id, s.name, s.payload, s.consumed_at AS "consumedAt", s.consumed_by AS "consumedBy", s.created_at AS "createdAt"
       FROM ratchet.signals s WHERE s.task_id = $2 AND s.tenant_id = $1 ORDER BY s.created_at, s.id`,
    [tenantId, id],
  );
  return rows;
}

export interface ChildInfo {
  runId: string;
  workflow: string;
  version: string;
  state: TaskState;
  createdAt: Date;
}

export async function runChildren(db: Queryable, tenantId: string, id: string): Promise<ChildInfo[]> {
  const { rows } = await db.query<ChildInfo>(
    `SELECT t.id AS "runId", t.workflow_name AS workflow, t.workflow_version AS version, t.state, t.created_at AS "createdAt"
       FROM ratchet.tasks t WHERE t.parent_id = $2 AND t.tenant_id = $1 ORDER BY t.created_at, t.id`,
    [tenantId, id],
  );
  return rows;
}
