/**
 * `ratchet.tasks`: one workflow run.
 *
 * Run states (the CHECK `tasks_state_is_known`):
 *
 *   pending ──claim──▶ running ──▶ completed | failed | cancelled
 *      ▲                │  ▲
 *      │      sleep/wait│  │claim (wake_at / timeout reached, or signal)
 *      │                ▼  │
 *      │          sleeping | waiting
 *      └── resolve ── parked ◀── (unknown at-most-once effect, nondeterminism, poison pill)
 *
 * `due_at` is the one column the claim path ranges over: when a pending run becomes available,
 * when a sleeper wakes, when a wait times out, when a running run's lease expires. It is NULL
 * for runs nothing will claim (final, parked, waiting without a timeout).
 *
 * `state_version` changes only with the run's state, each time with its event (seq = the new
 * version). Cancel and signal requests against a running run set `cancel_requested_at` /
 * bump `signal_seq` instead, which the lease owner observes at its next checkpoint.
 */
import { sql } from 'drizzle-orm';
import { check, foreignKey, index, integer, jsonb, primaryKey, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { createdAt, id, oneOf, ratchetSchema, tenantId, traceColumns, ts } from './common.js';

export const TASK_STATES = ['pending', 'running', 'sleeping', 'waiting', 'completed', 'failed', 'cancelled', 'parked'] as const;
export type TaskState = (typeof TASK_STATES)[number];
export const FINAL_TASK_STATES = ['completed', 'failed', 'cancelled'] as const;

export const tasks = ratchetSchema.table(
  'tasks',
  {
    tenantId: tenantId(),
    id: id(),
    workflowName: text('workflow_name').notNull(),
    workflowVersion: text('workflow_version').notNull(),
    state: text('state').$type<TaskState>().notNull(),
    stateVersion: integer('state_version').notNull().default(1),
    /** When the claim path next considers this run (see the file comment). */
    dueAt: ts('due_at'),
    /** Target of the sleep (or wait timeout) the run is suspended on. */
    wakeAt: ts('wake_at'),
    /** Absolute deadline of the whole run (workflow `timeout`). */
    deadlineAt: ts('deadline_at'),
    leaseOwner: text('lease_owner'),
    leaseExpiresAt: ts('lease_expires_at'),
    /** Claims since the run last made progress; past a limit the run is parked (poison pill). */
    claimCount: integer('claim_count').notNull().default(0),
    cancelRequestedAt: ts('cancel_requested_at'),
    /** Bumped by every signal sent to the run; a move to `waiting` is conditional on it. */
    signalSeq: integer('signal_seq').notNull().default(0),
    /**
     * Who awaits the run's outcome (`run.result()`, `client.execute`): null nobody; an engine
     * instance id when every caller is in that one process (its own workers hand them the outcome
     * in memory; any other settler NOTIFYs); '*' callers in several processes (always NOTIFY).
     */
    awaitedBy: text('awaited_by'),
    idempotencyKey: text('idempotency_key'),
    concurrencyKey: text('concurrency_key'),
    /** How many runs of `concurrency_key` may run at once (resolved at start from the engine's limits). */
    concurrencyLimit: integer('concurrency_limit'),
    /** Which of the key's `concurrency_limit` slots the run holds while running (1-based). */
    concurrencySlot: integer('concurrency_slot'),
    /** Among due pending runs, higher first. */
    priority: integer('priority').notNull().default(0),
    input: jsonb('input'),
    inputHash: text('input_hash').notNull(),
    output: jsonb('output'),
    error: jsonb('error'),
    parentId: uuid('parent_id'),
    ...traceColumns(),
    createdAt: createdAt(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
    completedAt: ts('completed_at'),
  },
  (t) => [
    primaryKey({ name: 'tasks_pkey', columns: [t.tenantId, t.id] }),
    foreignKey({
      name: 'tasks_parent_same_tenant',
      columns: [t.tenantId, t.parentId],
      foreignColumns: [t.tenantId, t.id],
    }).onDelete('cascade'),
    check('tasks_state_is_known', oneOf(t.state, TASK_STATES)),
    check('tasks_running_has_lease', sql`${t.state} <> 'running' or (${t.leaseOwner} is not null and ${t.leaseExpiresAt} is not null)`),
    check('tasks_settled_is_not_due', sql`${t.state} not in ('completed', 'failed', 'cancelled', 'parked') or ${t.dueAt} is null`),
    check('tasks_state_version_positive', sql`${t.stateVersion} > 0`),
    check('tasks_keyed_has_limit', sql`${t.concurrencyKey} is null or ${t.concurrencyLimit} >= 1`),
    check('tasks_running_keyed_has_slot', sql`${t.state} <> 'running' or ${t.concurrencyKey} is null or (${t.concurrencySlot} is not null and ${t.concurrencySlot} between 1 and ${t.concurrencyLimit})`),
    // Key column first, never tenant_id alone in front: a leading tenant_id index is picked by
    // generic plans for (tenant_id, id) lookups and filters the whole tenant (DESIGN §7).
    uniqueIndex('tasks_idempotency_key_unique')
      .on(t.idempotencyKey, t.workflowName, t.tenantId)
      .where(sql`${t.idempotencyKey} is not null`),
    // The claim walks due runs per registered (workflow, version): a worker never wades through
    // the runs of workflows it does not serve. Pending runs (always due) by priority, then age;
    // every other due run (a sleeper waking, a wait timing out, an expired lease) by due time.
    index('tasks_pending').on(t.workflowName, t.workflowVersion, t.priority.desc(), t.dueAt).where(sql`${t.state} = 'pending'`),
    index('tasks_due').on(t.workflowName, t.workflowVersion, t.dueAt).where(sql`${t.dueAt} is not null and ${t.state} <> 'pending'`),
    // Per-key concurrency: a running run of a key holds one of its `concurrency_limit` slots, and
    // no two running runs hold the same slot, so at most `limit` run at once. The claim picks free
    // slots; this index is what holds under racing claims.
    uniqueIndex('tasks_running_key_slots')
      .on(t.concurrencyKey, t.tenantId, t.concurrencySlot)
      .where(sql`${t.concurrencyKey} is not null and ${t.state} = 'running'`),
    // Retention walks finished runs oldest first.
    index('tasks_finished').on(t.completedAt).where(sql`${t.state} in ('completed', 'failed', 'cancelled')`),
    index('tasks_parent').on(t.parentId, t.tenantId).where(sql`${t.parentId} is not null`),
  ],
);

export type TaskRow = typeof tasks.$inferSelect;
