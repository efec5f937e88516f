/**
 * `ratchet.operations`: one step of a run, and the step's own append-only record.
 *
 * Operation states (the CHECK `operations_state_is_known`):
 *
 *   (memoized step, sleep, emit, …)   inserted as succeeded | failed
 *   (effect, tool, child)             reserved ──▶ succeeded | failed
 *                                          └────▶ unknown (at-most-once, outcome lost) ──resolve──▶ succeeded | failed
 *
 * The step key (`name#n`) is unique per run: it is what replay looks calls up by. Only effects,
 * tools and children carry an idempotency key, unique per tenant (a partial index).
 */
import { sql } from 'drizzle-orm';
import { check, foreignKey, integer, jsonb, primaryKey, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { createdAt, id, oneOf, ratchetSchema, tenantId, traceColumns, ts } from './common.js';
import { tasks } from './tasks.js';

export const OPERATION_STATES = ['reserved', 'succeeded', 'failed', 'unknown'] as const;
export type OperationState = (typeof OPERATION_STATES)[number];
export const OPERATION_KINDS = ['step', 'effect', 'tool', 'infer', 'sleep', 'wait', 'emit', 'seal', 'commit', 'child'] as const;
export type OperationKind = (typeof OPERATION_KINDS)[number];

export const operations = ratchetSchema.table(
  'operations',
  {
    tenantId: tenantId(),
    id: id(),
    taskId: uuid('task_id').notNull(),
    stepName: text('step_name').notNull(),
    stepKey: text('step_key').notNull(),
    /** Recording order within the run. */
    seq: integer('seq').notNull(),
    kind: text('kind').$type<OperationKind>().notNull(),
    idempotencyKey: text('idempotency_key'),
    inputHash: text('input_hash'),
    state: text('state').$type<OperationState>().notNull(),
    attempt: integer('attempt').notNull().default(1),
    reservedAt: ts('reserved_at'),
    /** reserved_at + the effect's timeout: before it, a reservation is presumed in flight. */
    deadlineAt: ts('deadline_at'),
    providerReference: text('provider_reference'),
    result: jsonb('result'),
    error: jsonb('error'),
    ...traceColumns(),
    createdAt: createdAt(),
    completedAt: ts('completed_at'),
  },
  (t) => [
    primaryKey({ name: 'operations_pkey', columns: [t.tenantId, t.id] }),
    foreignKey({
      name: 'operations_task_same_tenant',
      columns: [t.tenantId, t.taskId],
      foreignColumns: [tasks.tenantId, tasks.id],
    }).onDelete('cascade'),
    check('operations_state_is_known', oneOf(t.state, OPERATION_STATES)),
    check('operations_kind_is_known', oneOf(t.kind, OPERATION_KINDS)),
    check('operations_attempt_positive', sql`${t.attempt} > 0`),
    check(
      'operations_key_only_on_effects',
      sql`${t.idempotencyKey} is null or ${t.kind} in ('effect', 'tool', 'child')`,
    ),
    // Task first: it serves "load the run's operations" and the cascade from tasks.
    uniqueIndex('operations_step_key_unique').on(t.taskId, t.stepKey, t.tenantId),
    uniqueIndex('operations_idempotency_key_unique')
      .on(t.idempotencyKey, t.tenantId)
      .where(sql`${t.idempotencyKey} is not null`),
  ],
);

export type OperationRow = typeof operations.$inferSelect;
