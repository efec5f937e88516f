/**
 * `ratchet.schedules`: cron schedules that start runs.
 *
 * Each due slot starts one run whose idempotency key is `schedule:<id>:<slot>` (unique per
 * workflow and tenant), so a slot fires exactly once however many workers tick at once. `next_at`
 * is the next slot to fire (NULL while paused); the tick claims due rows `FOR UPDATE SKIP LOCKED`,
 * starts their runs and moves `next_at` on in one short transaction. Slots missed while nothing
 * ticked (downtime) follow `catch_up`: `all` (each missed slot, at most `max_catch_up`),
 * `latest` (only the most recent), `none` (skip to the next future slot).
 */
import { sql } from 'drizzle-orm';
import { check, index, integer, jsonb, primaryKey, text, uniqueIndex } from 'drizzle-orm/pg-core';
import { createdAt, id, oneOf, ratchetSchema, tenantId, ts } from './common.js';

export const CATCH_UP_POLICIES = ['all', 'latest', 'none'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

export const schedules = ratchetSchema.table(
  'schedules',
  {
    tenantId: tenantId(),
    id: id(),
    /** Unique per tenant: creating a schedule of the same name again updates it. */
    name: text('name').notNull(),
    workflowName: text('workflow_name').notNull(),
    workflowVersion: text('workflow_version').notNull(),
    cron: text('cron').notNull(),
    timezone: text('timezone').notNull().default('UTC'),
    input: jsonb('input'),
    inputHash: text('input_hash').notNull(),
    catchUp: text('catch_up').$type<CatchUpPolicy>().notNull().default('latest'),
    maxCatchUp: integer('max_catch_up').notNull().default(100),
    /** The next slot to fire; NULL while paused. */
    nextAt: ts('next_at'),
    /** The last slot that fired. */
    lastSlotAt: ts('last_slot_at'),
    createdAt: createdAt(),
    updatedAt: ts('updated_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'schedules_pkey', columns: [t.tenantId, t.id] }),
    uniqueIndex('schedules_name_unique').on(t.name, t.tenantId),
    check('schedules_catch_up_is_known', oneOf(t.catchUp, CATCH_UP_POLICIES)),
    check('schedules_max_catch_up_positive', sql`${t.maxCatchUp} > 0`),
    index('schedules_due').on(t.nextAt).where(sql`${t.nextAt} is not null`),
  ],
);

export type ScheduleRow = typeof schedules.$inferSelect;
