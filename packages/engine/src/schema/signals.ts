/**
 * `ratchet.signals`: messages sent to a run (approvals, webhooks), stored before any wait sees
 * them, so a signal sent before the run reaches its wait is never lost. A wait consumes the
 * oldest unconsumed signal of its name (`consumed_at`, `consumed_by` = the wait's step key).
 */
import { sql } from 'drizzle-orm';
import { foreignKey, index, jsonb, primaryKey, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { createdAt, id, ratchetSchema, tenantId, ts } from './common.js';
import { tasks } from './tasks.js';

export const signals = ratchetSchema.table(
  'signals',
  {
    tenantId: tenantId(),
    id: id(),
    taskId: uuid('task_id').notNull(),
    name: text('name').notNull(),
    payload: jsonb('payload'),
    /** Optional sender key: a retried webhook delivers its signal once. */
    idempotencyKey: text('idempotency_key'),
    consumedAt: ts('consumed_at'),
    consumedBy: text('consumed_by'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ name: 'signals_pkey', columns: [t.tenantId, t.id] }),
    foreignKey({
      name: 'signals_task_same_tenant',
      columns: [t.tenantId, t.taskId],
      foreignColumns: [tasks.tenantId, tasks.id],
    }).onDelete('cascade'),
    // Full, not partial: it also serves the cascade from tasks (task_id leading).
    index('signals_task_name').on(t.taskId, t.name, t.tenantId),
    uniqueIndex('signals_idempotency_key_unique')
      .on(t.idempotencyKey, t.taskId, t.tenantId)
      .where(sql`${t.idempotencyKey} is not null`),
  ],
);

export type SignalRow = typeof signals.$inferSelect;
