/**
 * Row shapes the store returns, in the engine's camelCase vocabulary (`tasks` → `TaskRecord`).
 * Statements select columns under these exact aliases, so rows need no mapping code.
 */
import type { OperationKind, OperationState, TaskState } from '../schema/index.js';
import type { SerializedError } from '@ratchet/sdk';

export interface TaskRecord {
  tenantId: string;
  id: string;
  workflowName: string;
  workflowVersion: string;
  state: TaskState;
  stateVersion: number;
  dueAt: Date | null;
  wakeAt: Date | null;
  deadlineAt: Date | null;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  claimCount: number;
  cancelRequestedAt: Date | null;
  signalSeq: number;
  idempotencyKey: string | null;
  input: unknown;
  inputHash: string;
  output: unknown;
  error: SerializedError | null;
  parentId: string | null;
  traceId: string | null;
  spanId: string | null;
  createdAt: Date;
  updatedAt: Date;
  completedAt: Date | null;
}

/** The task columns under their TaskRecord names; `t` is the alias of ratchet.tasks. */
export const TASK_COLUMNS = `
  t.tenant_id AS "tenantId", t.id, t.workflow_name AS "workflowName", t.workflow_version AS "workflowVersion",
  t.state, t.state_version AS "stateVersion", t.due_at AS "dueAt", t.wake_at AS "wakeAt",
  t.deadline_at AS "deadlineAt", t.lease_owner AS "leaseOwner", t.lease_expires_at AS "leaseExpiresAt",
  t.claim_count AS "claimCount", t.cancel_requested_at AS "cancelRequestedAt", t.signal_seq AS "signalSeq",
  t.idempotency_key AS "idempotencyKey", t.input, t.input_hash AS "inputHash", t.output, t.error,
  t.parent_id AS "parentId", t.trace_id AS "traceId", t.span_id AS "spanId", t.created_at AS "createdAt",
  t.updated_at AS "updatedAt", t.completed_at AS "completedAt"`;

export interface OperationRecord {
  id: string;
  stepName: string;
  stepKey: string;
  seq: number;
  kind: OperationKind;
  idempotencyKey: string | null;
  inputHash: string | null;
  state: OperationState;
  attempt: number;
  reservedAt: Date | null;
  deadlineAt: Date | null;
  providerReference: string | null;
  result: unknown;
  /** SQL NULL result: the step returned undefined (a JSON null result is `null` here with this false). */
  noResult: boolean;
  error: SerializedError | null;
  createdAt: Date;
  completedAt: Date | null;
}

/** The operation columns under their OperationRecord names; `o` is the alias of ratchet.operations. */
export const OPERATION_COLUMNS = `
  o.id, o.step_name AS "stepName", o.step_key AS "stepKey", o.seq, o.kind, o.idempotency_key AS "idempotencyKey",
  o.input_hash AS "inputHash", o.state, o.attempt, o.reserved_at AS "reservedAt", o.deadline_at AS "deadlineAt",
  o.provider_reference AS "providerReference", o.result, o.result IS NULL AS "noResult", o.error, o.created_at AS "createdAt",
  o.completed_at AS "completedAt"`;

/** Who may write a run: the lease owner at the state version it holds (DESIGN §3.4). */
export interface Fence {
  readonly tenantId: string;
  readonly taskId: string;
  readonly owner: string;
  stateVersion: number;
}
