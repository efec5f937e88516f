/**
 * SQL for `ratchet.tasks`: every statement that changes a run's state writes its event in the
 * same statement (a data-modifying CTE), with `seq` = the new `state_version`. Hot-path
 * statements are named prepared statements (DESIGN §7: ×1.6 over re-planning each call).
 *
 * Fencing: a statement by the lease owner carries `lease_owner = $owner AND state_version =
 * $version`; zero rows back means another worker owns the run (LeaseLostError upstream).
 */
import type pg from 'pg';
import type { SerializedError } from '@ratchet/sdk';
import type { EventType, TaskState } from '../schema/index.js';
import { TASK_COLUMNS, type Fence, type TaskRecord } from './rows.js';
import type { OperationWrite } from './operations.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/**
 * Channel a start notifies so idle workers claim at once. A start's payload names its run
 * (`startNotice`); the other wake-ups on this channel (a concurrency key freed, a signal, a
 * retry) carry only a workflow name and make every listening worker look.
 */
export const WORK_CHANNEL = 'ratchet_work';

/** What a start's `ratchet_work` notification says: which run, of which workflow version. */
export interface StartNotice {
  runId: string;
  workflowName: string;
  workflowVersion: string;
}

/**
 * Reads a `ratchet_work` payload: `<run id> <workflow name> <version>` from a start (a name
 * never holds a space; a version may), null for any other wake-up.
 */
export function startNotice(payload: string): StartNotice | null {
  if (payload.length < 40 || payload[36] !== ' ') return null;
  const space = payload.indexOf(' ', 37);
  if (space < 0) return null;
  return { runId: payload.slice(0, 36), workflowName: payload.slice(37, space), workflowVersion: payload.slice(space + 1) };
}

/**
 * Channel a settled run notifies when a caller in another process awaits it (payload: the run
 * id). Never the outcome: any session of the database may LISTEN, whatever its tenant or role.
 */
export const DONE_CHANNEL = 'ratchet_done';

export interface NewTask {
  tenantId: string;
  id: string;
  workflowName: string;
  workflowVersion: string;
  idempotencyKey: string | null;
  concurrencyKey: string | null;
  /** Runs of `concurrencyKey` that may run at once; null without a key. */
  concurrencyLimit: number | null;
  priority: number;
  input: unknown;
  inputHash: string;
  parentId: string | null;
  /** Milliseconds from start to the run's deadline, or null. */
  timeoutMs: number | null;
  traceId: string | null;
  spanId: string | null;
  actorId: string;
  /** Redacted facts for the `started` event. */
  eventPayload: Record<string, unknown>;
  policyVersion: string | null;
}

const INSERT_COLUMNS = `tenant_id, id, workflow_name, workflow_version, state, due_at, lease_owner, lease_expires_at,
  claim_count, idempotency_key, concurrency_key, priority, input, input_hash, parent_id, deadline_at, trace_id, span_id,
  created_at, updated_at, concurrency_limit`;

const STARTED_EVENT = `
  e AS (
    INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, policy_version, trace_id, span_id, created_at)
    SELECT t."tenantId", t.id, t."stateVersion", 'started', $14, $15, $16, t."traceId", t."spanId", t."createdAt" FROM t
  )`;

// A key whose run retention removed lives on as a tombstone (store/tombstones.ts): the start is
// refused inside the INSERT, and the caller finds the tombstone instead of a run. A keyless start
// never evaluates the subquery (an InitPlan run only when the OR reaches it).
const NO_LIVE_TOMBSTONE = `($5::text IS NULL OR NOT EXISTS (
         SELECT 1 FROM ratchet.idempotency_keys k
          WHERE k.key = $5 AND k.scope = 'run:' || $3::text AND k.tenant_id = $1::uuid AND k.expires_at > ratchet.now()))`;

/**
 * Only a keyed start can meet a taken key: a keyless one is a plain INSERT. `ON CONFLICT` makes
 * every insert speculative (the arbiter index probed first, then one more WAL record to confirm
 * the row), whether or not the row has a key.
 */
const ON_TAKEN_KEY = `ON CONFLICT (idempotency_key, workflow_name, tenant_id) WHERE idempotency_key IS NOT NULL DO NOTHING`;

/** The keyed and the keyless form of an insert statement (`%ON_TAKEN_KEY%` marks the conflict clause). */
function keyedOrNot(name: string, text: string): { keyed: { name: string; text: string }; keyless: { name: string; text: string } } {
  return {
    keyed: { name: `${name}_keyed`, text: text.replace('%ON_TAKEN_KEY%', ON_TAKEN_KEY) },
    keyless: { name, text: text.replace('%ON_TAKEN_KEY%', '') },
  };
}

const insertPendingTask = keyedOrNot(
  'ratchet_insert_pending_task',
  `
    WITH g AS (
      -- Eager start ($20: a local worker with a free slot, local.ts): the run is claimed by the
      -- INSERT itself, leased to that worker. Not when a due pending run of the same workflow
      -- version at this priority or higher is waiting: the claim would take that one first.
      SELECT $20::text IS NOT NULL AND NOT EXISTS (
               SELECT 1 FROM ratchet.tasks p
                WHERE p.workflow_name = $3 AND p.workflow_version = $4 AND p.state = 'pending'
                  AND p.priority >= $7 AND p.due_at <= ratchet.now()) AS eager
    ), t AS (
      INSERT INTO ratchet.tasks AS t (${INSERT_COLUMNS}, awaited_by, state_version)
      SELECT $1, $2, $3, $4,
             CASE WHEN g.eager THEN 'running' ELSE 'pending' END,
             CASE WHEN g.eager THEN ratchet.now() + $21 * interval '1 millisecond' ELSE ratchet.now() END,
             CASE WHEN g.eager THEN $20 END,
             CASE WHEN g.eager THEN ratchet.now() + $21 * interval '1 millisecond' END,
             CASE WHEN g.eager THEN 1 ELSE 0 END, $5, $6, $7, $8, $9, $10,
             ratchet.now() + $11 * interval '1 millisecond', $12, $13, ratchet.now(), ratchet.now(), $17, $18,
             CASE WHEN g.eager THEN 2 ELSE 1 END
        FROM g
       WHERE ${NO_LIVE_TOMBSTONE}
      %ON_TAKEN_KEY%
      RETURNING ${TASK_COLUMNS}
    ), e AS (
      -- The same history as a run claimed by a worker: started, then claimed.
      INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, policy_version, trace_id, span_id, created_at)
      SELECT t."tenantId", t.id, 1, 'started', $14, $15, $16, t."traceId", t."spanId", t."createdAt" FROM t
      UNION ALL
      SELECT t."tenantId", t.id, 2, 'claimed', $20, '{"claims": 1, "from": "pending", "eager": true}'::jsonb, $16, t."traceId", t."spanId", t."createdAt"
        FROM t WHERE t.state = 'running'
    ),
    -- Skipped ($19 false) when a worker of the starting process takes it (local.ts). The payload
    -- names the run (startNotice): a worker whose claim already took it does not claim again.
    n AS (SELECT pg_notify('${WORK_CHANNEL}', t.id::text || ' ' || t."workflowName" || ' ' || t."workflowVersion") FROM t WHERE $19::bool)
    SELECT t.*, ratchet.now() AS "claimedAt", false AS "hasOperations", (SELECT count(*) FROM n) AS notified FROM t`,
);

/** Direct path (DESIGN §3.1): the run is born leased to the caller, so no notify and no claim. */
const insertLeasedTask = keyedOrNot(
  'ratchet_insert_leased_task',
  `
    WITH t AS (
      INSERT INTO ratchet.tasks AS t (${INSERT_COLUMNS})
      SELECT $1, $2, $3, $4, 'running', ratchet.now() + $18 * interval '1 millisecond', $19,
             ratchet.now() + $18 * interval '1 millisecond', 1, $5, $6, $7, $8, $9, $10,
             ratchet.now() + $11 * interval '1 millisecond', $12, $13, ratchet.now(), ratchet.now(), $17
       WHERE ${NO_LIVE_TOMBSTONE}
      %ON_TAKEN_KEY%
      RETURNING ${TASK_COLUMNS}
    ), ${STARTED_EVENT}
    SELECT t.* FROM t`,
);

function insertValues(task: NewTask): unknown[] {
  return [
    task.tenantId,
    task.id,
    task.workflowName,
    task.workflowVersion,
    task.idempotencyKey,
    task.concurrencyKey,
    task.priority,
    JSON.stringify(task.input ?? null),
    task.inputHash,
    task.parentId,
    task.timeoutMs,
    task.traceId,
    task.spanId,
    task.actorId,
    JSON.stringify(task.eventPayload),
    task.policyVersion,
    task.concurrencyLimit,
  ];
}

/**
 * Inserts a pending run with its `started` event and wakes workers (unless `notify: false`: a
 * local worker was poked instead); null when the idempotency key exists (as a run or a live
 * tombstone). `awaitedBy`: the engine instance of a caller awaiting the outcome, registered by
 * this INSERT (tasks.awaited_by). `eager`: a local worker with a free slot (local.ts); the run is
 * born `running`, leased to it, with its `claimed` event, unless an older due run of the same
 * workflow version waits — check the returned state.
 */
export async function createTask(
  db: Queryable,
  task: NewTask,
  options: { awaitedBy?: string | null; notify?: boolean; eager?: { owner: string; leaseMs: number } | null } = {},
): Promise<ClaimedTask | null> {
  const { rows } = await db.query<ClaimedTask>({
    ...(task.idempotencyKey === null ? insertPendingTask.keyless : insertPendingTask.keyed),
    values: [...insertValues(task), options.awaitedBy ?? null, options.notify ?? true, options.eager?.owner ?? null, options.eager?.leaseMs ?? null],
  });
  return rows[0] ?? null;
}

/** Inserts a run already leased to `owner` (the direct path); null when the idempotency key exists (as a run or a live tombstone). */
export async function createLeasedTask(db: Queryable, task: NewTask, owner: string, leaseMs: number): Promise<TaskRecord | null> {
  const statement = task.idempotencyKey === null ? insertLeasedTask.keyless : insertLeasedTask.keyed;
  const { rows } = await db.query<TaskRecord>({ ...statement, values: [...insertValues(task), leaseMs, owner] });
  return rows[0] ?? null;
}

/** The run holding an idempotency key for a workflow in a tenant. */
export async function getTaskByKey(db: Queryable, tenantId: string, workflowName: string, key: string): Promise<TaskRecord | null> {
  const { rows } = await db.query<TaskRecord>({
    name: 'ratchet_get_task_by_key',
    text: `SELECT ${TASK_COLUMNS} FROM ratchet.tasks t WHERE t.idempotency_key = $3 AND t.workflow_name = $2 AND t.tenant_id = $1`,
    values: [tenantId, workflowName, key],
  });
  return rows[0] ?? null;
}

export async function getTask(db: Queryable, tenantId: string, id: string): Promise<TaskRecord | null> {
  const { rows } = await db.query<TaskRecord>({
    name: 'ratchet_get_task',
    text: `SELECT ${TASK_COLUMNS} FROM ratchet.tasks t WHERE t.tenant_id = $1 AND t.id = $2`,
    values: [tenantId, id],
  });
  return rows[0] ?? null;
}

/** What a caller awaiting a run reads once it settles (run.result(), client.execute). */
export type TaskOutcome = Pick<TaskRecord, 'state' | 'output' | 'error'>;

/** A run's state and outcome only: what a caller reads when a run it awaits has settled. */
export async function getOutcome(db: Queryable, tenantId: string, id: string): Promise<TaskOutcome | null> {
  const { rows } = await db.query<TaskOutcome>({
    name: 'ratchet_get_outcome',
    text: `SELECT t.state, t.output, t.error FROM ratchet.tasks t WHERE t.tenant_id = $1 AND t.id = $2`,
    values: [tenantId, id],
  });
  return rows[0] ?? null;
}

export interface ClaimedTask extends TaskRecord {
  /** ratchet.now() when the claim ran. */
  claimedAt: Date;
  /** Whether the run has step records (a fresh run has none: its worker need not load them). */
  hasOperations: boolean;
}

export interface Transition {
  state: TaskState;
  event: EventType;
  /** For sleeping/waiting: when the run is due again (null: never by itself). */
  dueAt?: Date | null;
  output?: unknown;
  error?: SerializedError | null;
  payload?: Record<string, unknown>;
  /** For waiting: the signal counter the owner saw before it last looked for signals; if it moved, the run is due at once. */
  expectedSignalSeq?: number;
  policyVersion?: string | null;
  /** The span ids for the event (the segment that made the change); default the run's origin ids. */
  traceId?: string | null;
  spanId?: string | null;
  /** The settling engine instance: callers of its own that await the run get the outcome from it in memory, not by NOTIFY (local.ts). */
  localId?: string | null;
  /**
   * Steps that succeeded since the segment's last statement, recorded by this one (deferred
   * steps, runtime/recorder.ts): fresh records (no row under their key yet), fenced by the
   * task row's update.
   */
  steps?: readonly OperationWrite[];
}

/**
 * The lease owner moves its run to another state (suspended, settled, parked, released), with
 * its event, in one fenced statement; notifies `ratchet_done` when a caller awaits the result
 * of a run that settled. Resolves to the new state_version, or null when the fence failed.
 */
export async function transitionTask(db: Queryable, fence: Fence, to: Transition): Promise<number | null> {
  const { rows } = await db.query<{ stateVersion: number }>({
    name: 'ratchet_transition_task',
    text: `
      WITH t AS (
        UPDATE ratchet.tasks t
           SET state = $5,
               state_version = t.state_version + 1,
               -- A suspended run is due at its earliest target, or its deadline if sooner; a run
               -- moving to waiting whose signal counter moved since its owner looked is due now.
               due_at = CASE WHEN $5 = 'waiting' AND $11::int IS NOT NULL AND t.signal_seq <> $11 THEN ratchet.now()
                             WHEN $5 IN ('sleeping', 'waiting') THEN least($7::timestamptz, t.deadline_at)
                             WHEN $5 = 'pending' THEN ratchet.now() END,
               wake_at = CASE WHEN $5 IN ('sleeping', 'waiting') THEN $7::timestamptz END,
               lease_owner = NULL,
               lease_expires_at = NULL,
               claim_count = CASE WHEN $5 = 'pending' THEN t.claim_count ELSE 0 END,
               output = CASE WHEN $5 = 'completed' THEN $8::jsonb ELSE t.output END,
               error = CASE WHEN $5 IN ('failed', 'parked', 'cancelled') THEN $9::jsonb ELSE t.error END,
               completed_at = CASE WHEN $5 IN ('completed', 'failed', 'cancelled') THEN ratchet.now() END,
               updated_at = ratchet.now()
         WHERE t.tenant_id = $1 AND t.id = $2 AND t.lease_owner = $3 AND t.state_version = $4
        RETURNING t.tenant_id, t.id, t.state_version, t.awaited_by, t.trace_id, t.span_id, t.concurrency_key, t.workflow_name
      ), e AS (
        INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, policy_version, trace_id, span_id, created_at)
        SELECT t.tenant_id, t.id, t.state_version, $6, $3, $10, $12, coalesce($13::text, t.trace_id), coalesce($14::text, t.span_id), ratchet.now() FROM t
      ), s AS (
        INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state, attempt, result, trace_id, span_id, created_at, completed_at)
        SELECT t.tenant_id, x.id, t.id, x.name, x.key, x.seq, x.kind, x.state, x.attempt, x.result::jsonb, x.trace, x.span, x.at, x.at
          FROM t, jsonb_to_recordset($16::jsonb)
               AS x(id uuid, name text, key text, seq int, kind text, state text, attempt int, result text, trace text, span text, at timestamptz)
      ), n AS (
        -- Only the run id: any session may LISTEN, so an outcome must never travel in a payload.
        -- Not when every caller awaiting it is in the settling process ($15): it hands them the outcome itself.
        SELECT pg_notify('${DONE_CHANNEL}', t.id::text) FROM t
         WHERE t.awaited_by IS NOT NULL AND t.awaited_by IS DISTINCT FROM $15::text AND $5 IN ('completed', 'failed', 'cancelled')
        UNION ALL
        -- A run of a concurrency key stopped running: the next run of its key may be claimed now.
        SELECT pg_notify('${WORK_CHANNEL}', t.workflow_name) FROM t WHERE t.concurrency_key IS NOT NULL
      )
      SELECT t.state_version AS "stateVersion", (SELECT count(*) FROM n) AS notified FROM t`,
    values: [
      fence.tenantId,
      fence.taskId,
      fence.owner,
      fence.stateVersion,
      to.state,
      to.event,
      to.dueAt ?? null,
      to.output === undefined ? null : JSON.stringify(to.output),
      to.error == null ? null : JSON.stringify(to.error),
      to.payload === undefined ? null : JSON.stringify(to.payload),
      to.expectedSignalSeq ?? null,
      to.policyVersion ?? null,
      to.traceId ?? null,
      to.spanId ?? null,
      to.localId ?? null,
      to.steps?.length ? JSON.stringify(to.steps.map(deferredStep)) : null,
    ],
  });
  return rows[0]?.stateVersion ?? null;
}

/** A deferred step as the transition's jsonb_to_recordset reads it (result as JSON text: a step may return null or nothing). */
function deferredStep(op: OperationWrite) {
  return {
    id: op.id,
    name: op.stepName,
    key: op.stepKey,
    seq: op.seq,
    kind: op.kind,
    state: op.state,
    attempt: op.attempt,
    result: op.result === undefined ? undefined : JSON.stringify(op.result),
    trace: op.traceId,
    span: op.spanId,
    at: op.completedAt,
  };
}

/** Whether `fence` still holds (used after a write whose COMMIT outcome is unknown). */
export async function fenceHolds(db: Queryable, fence: Fence): Promise<boolean> {
  const { rows } = await db.query({
    name: 'ratchet_fence_holds',
    text: `SELECT 1 FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND state_version = $4`,
    values: [fence.tenantId, fence.taskId, fence.owner, fence.stateVersion],
  });
  return rows.length > 0;
}

/**
 * A caller of engine instance `me` registers as awaiting the run's result and reads its state in
 * the same statement: registering before checking means no completion is missed. `awaited_by`
 * becomes `me`, or '*' once callers of two instances await it (then every settlement notifies).
 * The registration takes the task row's lock, which conflicts with a step checkpoint's fence;
 * rather than wait behind it, a locked row is skipped and reported `registered: false`, and the
 * caller tries again a moment later.
 */
export async function awaitTask(db: Queryable, tenantId: string, id: string, me: string): Promise<(TaskRecord & { registered: boolean }) | null> {
  const { rows } = await db.query<TaskRecord & { registered: boolean }>({
    name: 'ratchet_await_task',
    text: `
      WITH l AS (
        SELECT tenant_id, id FROM ratchet.tasks
         WHERE tenant_id = $1 AND id = $2 AND (awaited_by IS NULL OR awaited_by NOT IN ($3, '*'))
           FOR NO KEY UPDATE SKIP LOCKED
      ), u AS (
        UPDATE ratchet.tasks t SET awaited_by = CASE WHEN t.awaited_by IS NULL THEN $3 ELSE '*' END
          FROM l WHERE t.tenant_id = l.tenant_id AND t.id = l.id RETURNING t.id
      )
      SELECT ${TASK_COLUMNS}, (coalesce(t.awaited_by IN ($3, '*'), false) OR EXISTS (SELECT 1 FROM u)) AS registered
        FROM ratchet.tasks t WHERE t.tenant_id = $1 AND t.id = $2`,
    values: [tenantId, id, me],
  });
  return rows[0] ?? null;
}
