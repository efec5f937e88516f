/**
 * SQL for `ratchet.operations`: the step checkpoint.
 *
 * One statement writes (or advances) a step's record, fenced by the lease: the row is inserted
 * only if the task row, locked FOR SHARE, still shows this worker as lease owner at the
 * state_version it claimed. A re-claim's UPDATE conflicts with that lock, and READ COMMITTED
 * re-checks the condition against the new owner, so a stale worker can never slip a row in.
 * No event and no task-row rewrite per step (DESIGN §3.4, §7).
 *
 * The same statement advances an existing record (`ON CONFLICT` on the step key) only where it
 * is still `reserved` at the attempt the writer expects, so it is also the effect's
 * "record outcome WHERE state = 'reserved' AND attempt = $a" and the re-reservation of a retry.
 * Repeating it after a connection lost at COMMIT is safe: the caller compares the row it finds.
 *
 * Operation record lifecycle (see schema/operations.ts):
 *   reserved, reserved_at set        an attempt may be in flight until deadline_at
 *   reserved, reserved_at NULL       the last attempt failed (error); the next is due at deadline_at
 *   succeeded | failed               settled; replay returns result / rethrows error
 *   unknown                          an at-most-once effect's outcome was lost; an operator decides
 */
import type pg from 'pg';
import type { SerializedError } from '@ratchet/sdk';
import type { OperationKind, OperationState } from '../schema/index.js';
import { OPERATION_COLUMNS, type Fence, type OperationRecord } from './rows.js';
import { sqlState, UNIQUE_VIOLATION } from './sqlstate.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export async function listOperations(db: Queryable, tenantId: string, taskId: string): Promise<OperationRecord[]> {
  const { rows } = await db.query<OperationRecord>({
    name: 'ratchet_list_operations',
    text: `SELECT ${OPERATION_COLUMNS} FROM ratchet.operations o WHERE o.tenant_id = $1 AND o.task_id = $2 ORDER BY o.seq`,
    values: [tenantId, taskId],
  });
  return rows;
}

export interface OperationWrite {
  id: string;
  stepName: string;
  stepKey: string;
  seq: number;
  kind: OperationKind;
  idempotencyKey: string | null;
  inputHash: string | null;
  state: OperationState;
  attempt: number;
  /** The attempt the existing record must be at (reserved) for an update to apply. */
  expectedAttempt: number | null;
  /** Marks an attempt in flight from now (reserved_at = now). */
  inFlight: boolean;
  /** deadline_at = now + this many ms (in flight: the timeout; failed attempt: the retry delay). */
  deadlineInMs: number | null;
  result?: unknown;
  error?: SerializedError | null;
  providerReference?: string | null;
  traceId: string | null;
  spanId: string | null;
  /**
   * When the step completed (created_at and completed_at), for a record written after the fact
   * (a deferred step, runtime/recorder.ts); default ratchet.now() at the write.
   */
  completedAt?: Date | null;
}

export interface WrittenOperation {
  id: string;
  createdAt: Date;
  completedAt: Date | null;
  deadlineAt: Date | null;
  /** ratchet.now() when written; null when the row was found rather than written. */
  now: Date | null;
}

// The fenced insert both statements share: the row is written only while the run's lease and
// state_version are the writer's, and the task row is held (FOR SHARE) until the write commits.
// $22, the attempt an update expects, is the last parameter, so the insert alone takes $1–$21.
const FENCED_INSERT = `
    INSERT INTO ratchet.operations AS o (tenant_id, id, task_id, step_name, step_key, seq, kind, idempotency_key, input_hash,
                                         state, attempt, reserved_at, deadline_at, provider_reference, result, error,
                                         trace_id, span_id, created_at, completed_at)
    SELECT $1, $5, $2, $6, $7, $8, $9, $10, $11, $12, $13,
           CASE WHEN $15 THEN ratchet.now() END,
           ratchet.now() + $16 * interval '1 millisecond',
           $17, $18, $19, $20, $21, coalesce($14::timestamptz, ratchet.now()),
           CASE WHEN $12 IN ('succeeded', 'failed', 'unknown') THEN coalesce($14::timestamptz, ratchet.now()) END
      FROM ratchet.tasks t
     WHERE t.tenant_id = $1 AND t.id = $2 AND t.lease_owner = $3 AND t.state_version = $4
       FOR SHARE`;

const RETURNING = `
    RETURNING o.id, o.created_at AS "createdAt", o.completed_at AS "completedAt", o.deadline_at AS "deadlineAt",
              ratchet.now() AS now`;

/** A record's next attempt or outcome over the reserved row of `expectedAttempt` ($22). */
export const WRITE_OPERATION_SQL = `${FENCED_INSERT}
    ON CONFLICT (task_id, step_key, tenant_id) DO UPDATE
       SET state = EXCLUDED.state,
           -- seq follows the last write, so recording order is the order results became final.
           seq = EXCLUDED.seq,
           attempt = EXCLUDED.attempt,
           -- A settled record keeps when its last attempt was reserved and due, for audits.
           reserved_at = CASE WHEN EXCLUDED.state = 'reserved' THEN EXCLUDED.reserved_at ELSE o.reserved_at END,
           deadline_at = CASE WHEN EXCLUDED.state = 'reserved' THEN EXCLUDED.deadline_at ELSE o.deadline_at END,
           provider_reference = coalesce(EXCLUDED.provider_reference, o.provider_reference),
           result = EXCLUDED.result,
           error = EXCLUDED.error,
           trace_id = EXCLUDED.trace_id,
           span_id = EXCLUDED.span_id,
           completed_at = EXCLUDED.completed_at
     WHERE o.state = 'reserved' AND o.attempt = $22${RETURNING}`;

/**
 * A fresh record (no `expectedAttempt`): a plain insert. `ON CONFLICT` would cost a speculative
 * insertion (one more WAL record, ≈ 15 % of the statement) at every step for a conflict that
 * happens only when a COMMIT's outcome was lost and the same row is sent again.
 */
export const INSERT_OPERATION_SQL = `${FENCED_INSERT}${RETURNING}`;

/**
 * Fresh records of several runs in one statement (CheckpointBatch): each row fenced like
 * FENCED_INSERT, through a lookup of its own run's task row by primary key (LATERAL, so the plan
 * cannot hash the table), held FOR SHARE. A row whose fence fails is not written; the others are.
 */
export const INSERT_OPERATIONS_SQL = `
    INSERT INTO ratchet.operations AS o (tenant_id, id, task_id, step_name, step_key, seq, kind, idempotency_key, input_hash,
                                         state, attempt, reserved_at, deadline_at, provider_reference, result, error,
                                         trace_id, span_id, created_at, completed_at)
    SELECT t.tenant_id, x.id, t.id, x.name, x.key, x.seq, x.kind, x.idempotency_key, x.input_hash, x.state, x.attempt,
           CASE WHEN x.in_flight THEN ratchet.now() END,
           ratchet.now() + x.deadline_ms * interval '1 millisecond',
           x.provider_reference, x.result::jsonb, x.error::jsonb, x.trace, x.span, coalesce(x.at, ratchet.now()),
           CASE WHEN x.state IN ('succeeded', 'failed', 'unknown') THEN coalesce(x.at, ratchet.now()) END
      FROM jsonb_to_recordset($1::jsonb)
           AS x(tenant uuid, task uuid, owner text, version int, id uuid, name text, key text, seq int, kind text,
                idempotency_key text, input_hash text, state text, attempt int, at timestamptz, in_flight bool,
                deadline_ms float8, provider_reference text, result text, error text, trace text, span text)
     CROSS JOIN LATERAL (
       SELECT t.tenant_id, t.id FROM ratchet.tasks t
        WHERE t.tenant_id = x.tenant AND t.id = x.task AND t.lease_owner = x.owner AND t.state_version = x.version
          FOR SHARE
     ) t${RETURNING}`;

const writeOperationSql = { name: 'ratchet_write_operation', text: WRITE_OPERATION_SQL };
const insertOperationSql = { name: 'ratchet_insert_operation', text: INSERT_OPERATION_SQL };
const insertOperationsSql = { name: 'ratchet_insert_operations', text: INSERT_OPERATIONS_SQL };

/**
 * Writes a step's record, fenced. Resolves to the row written, or null when nothing was written:
 * the fence failed (another worker owns the run), or the record is no longer reserved at
 * `expectedAttempt` (already settled, e.g. by this very statement before a lost COMMIT), or a
 * fresh record's step already has a row (the same, when its COMMIT's outcome was lost).
 * A fresh record whose idempotency key another run holds still fails with the unique violation.
 */
export async function writeOperation(db: Queryable, fence: Fence, op: OperationWrite): Promise<WrittenOperation | null> {
  const values: unknown[] = [
    fence.tenantId,
    fence.taskId,
    fence.owner,
    fence.stateVersion,
    op.id,
    op.stepName,
    op.stepKey,
    op.seq,
    op.kind,
    op.idempotencyKey,
    op.inputHash,
    op.state,
    op.attempt,
    op.completedAt ?? null,
    op.inFlight,
    op.deadlineInMs,
    op.providerReference ?? null,
    op.result === undefined ? null : JSON.stringify(op.result),
    op.error == null ? null : JSON.stringify(op.error),
    op.traceId,
    op.spanId,
  ];
  if (op.expectedAttempt != null) {
    const { rows } = await db.query<WrittenOperation>({ ...writeOperationSql, values: [...values, op.expectedAttempt] });
    return rows[0] ?? null;
  }
  try {
    const { rows } = await db.query<WrittenOperation>({ ...insertOperationSql, values });
    return rows[0] ?? null;
  } catch (error) {
    if (sqlState(error) === UNIQUE_VIOLATION && STEP_ROW_KEYS.has((error as { constraint?: string }).constraint ?? '')) return null;
    throw error;
  }
}

/**
 * `writeOperation`, with the fresh records of all runs on `pool` that are written in the same
 * turn of the event loop gathered into one statement (CheckpointBatch). An attempt over a
 * reserved record is written alone.
 */
export function writeOperationBatched(pool: pg.Pool, fence: Fence, op: OperationWrite): Promise<WrittenOperation | null> {
  if (op.expectedAttempt != null) return writeOperation(pool, fence, op);
  let batch = batches.get(pool);
  if (!batch) batches.set(pool, (batch = new CheckpointBatch(pool)));
  return batch.write(fence, op);
}

const batches = new WeakMap<pg.Pool, CheckpointBatch>();

interface Waiting {
  fence: Fence;
  op: OperationWrite;
  resolve: (written: WrittenOperation | null) => void;
  reject: (error: unknown) => void;
}

/**
 * The step records of every run on one pool, gathered while the event loop turns once and
 * written by ONE statement: a worker running many runs finishes several steps between two
 * looks at its sockets (8 runs in flight: 1.8 records per statement between processes, 2.2 on
 * the direct path). Each row is fenced by its own run's lease, so a run that lost its lease has
 * nothing written while the others do. Should the statement fail as a whole (one row's key taken,
 * or the repeat of a row whose COMMIT's outcome was lost; a deadlock; a lost connection), each
 * record is written on its own instead, exactly as if it had never been gathered: the single
 * statement's rules (and writeCheckpoint's recovery) then decide for each. Nothing waits on a
 * timer: the batch goes out at the end of the current turn of the event loop.
 */
class CheckpointBatch {
  #waiting: Waiting[] = [];

  constructor(private readonly pool: pg.Pool) {}

  write(fence: Fence, op: OperationWrite): Promise<WrittenOperation | null> {
    return new Promise((resolve, reject) => {
      if (this.#waiting.push({ fence, op, resolve, reject }) === 1) setImmediate(() => void this.#flush());
    });
  }

  async #flush(): Promise<void> {
    const batch = this.#waiting;
    this.#waiting = [];
    if (batch.length === 1) return this.#alone(batch[0]!);
    let rows: WrittenOperation[];
    try {
      ({ rows } = await this.pool.query<WrittenOperation>({ ...insertOperationsSql, values: [JSON.stringify(batch.map(batchRow))] }));
    } catch {
      for (const waiting of batch) void this.#alone(waiting);
      return;
    }
    const byId = new Map(rows.map((row) => [row.id, row]));
    for (const { op, resolve } of batch) resolve(byId.get(op.id) ?? null);
  }

  async #alone({ fence, op, resolve, reject }: Waiting): Promise<void> {
    try {
      resolve(await writeOperation(this.pool, fence, op));
    } catch (error) {
      reject(error);
    }
  }
}

/** One record as INSERT_OPERATIONS_SQL's jsonb_to_recordset reads it (result and error as JSON text). */
function batchRow({ fence, op }: Waiting) {
  return {
    tenant: fence.tenantId,
    task: fence.taskId,
    owner: fence.owner,
    version: fence.stateVersion,
    id: op.id,
    name: op.stepName,
    key: op.stepKey,
    seq: op.seq,
    kind: op.kind,
    idempotency_key: op.idempotencyKey,
    input_hash: op.inputHash,
    state: op.state,
    attempt: op.attempt,
    at: op.completedAt ?? null,
    in_flight: op.inFlight,
    deadline_ms: op.deadlineInMs,
    provider_reference: op.providerReference ?? null,
    result: op.result === undefined ? null : JSON.stringify(op.result),
    error: op.error == null ? null : JSON.stringify(op.error),
    trace: op.traceId,
    span: op.spanId,
  };
}

/** The unique indexes a step's own row hits when it is written twice (see writeOperation). */
const STEP_ROW_KEYS = new Set(['operations_step_key_unique', 'operations_pkey']);

export async function getOperation(db: Queryable, tenantId: string, taskId: string, stepKey: string): Promise<OperationRecord | null> {
  const { rows } = await db.query<OperationRecord>({
    name: 'ratchet_get_operation',
    text: `SELECT ${OPERATION_COLUMNS} FROM ratchet.operations o WHERE o.task_id = $2 AND o.step_key = $3 AND o.tenant_id = $1`,
    values: [tenantId, taskId, stepKey],
  });
  return rows[0] ?? null;
}

/** The effect holding an idempotency key in a tenant (possibly another run's). */
export async function getOperationByKey(db: Queryable, tenantId: string, key: string): Promise<(OperationRecord & { taskId: string }) | null> {
  const { rows } = await db.query<OperationRecord & { taskId: string }>({
    name: 'ratchet_get_operation_by_key',
    text: `SELECT ${OPERATION_COLUMNS}, o.task_id AS "taskId" FROM ratchet.operations o WHERE o.idempotency_key = $2 AND o.tenant_id = $1`,
    values: [tenantId, key],
  });
  return rows[0] ?? null;
}
