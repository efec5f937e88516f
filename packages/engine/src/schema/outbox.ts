/**
 * `ratchet.outbox`: messages to publish, each written in the statement that records its `emit`
 * step (or its contract commit), so no message is lost and none exists without its cause.
 *
 * Lifecycle: pending (dispatched_at IS NULL, claimable from available_at) ──publish──▶
 * dispatched; a failed publish bumps `attempts`, stores `last_error` and moves `available_at`.
 */
import { sql } from 'drizzle-orm';
import { foreignKey, index, integer, jsonb, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { createdAt, id, ratchetSchema, tenantId, ts } from './common.js';
import { tasks } from './tasks.js';

export const outbox = ratchetSchema.table(
  'outbox',
  {
    tenantId: tenantId(),
    id: id(),
    taskId: uuid('task_id').notNull(),
    topic: text('topic').notNull(),
    messageKey: text('message_key'),
    payload: jsonb('payload'),
    availableAt: ts('available_at').notNull().defaultNow(),
    dispatchedAt: ts('dispatched_at'),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ name: 'outbox_pkey', columns: [t.tenantId, t.id] }),
    foreignKey({
      name: 'outbox_task_same_tenant',
      columns: [t.tenantId, t.taskId],
      foreignColumns: [tasks.tenantId, tasks.id],
    }).onDelete('cascade'),
    index('outbox_pending').on(t.availableAt).where(sql`${t.dispatchedAt} is null`),
    index('outbox_task').on(t.taskId, t.tenantId),
  ],
);

export type OutboxRow = typeof outbox.$inferSelect;
