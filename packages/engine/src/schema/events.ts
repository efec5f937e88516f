/**
 * `ratchet.events`: append-only facts about a run's state changes.
 *
 * `seq` is the run's `state_version` after the change, so a run's events are contiguous and
 * replay to its current state. A trigger (migration 0001) rejects UPDATE and TRUNCATE always, and
 * DELETE unless the engine's purge or retention code set the transaction-local flag
 * `ratchet.allow_event_delete`.
 *
 * The foreign key to `tasks` stays: it is what makes "no event without its run" a database rule,
 * and deleting a run (tenant purge, retention) deletes its events with it through ON DELETE
 * CASCADE, which the trigger admits only under the flag.
 *
 * Payloads are redacted facts (sizes, hashes, references), never raw inputs, prompts or secrets.
 */
import { check, foreignKey, integer, jsonb, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { createdAt, oneOf, ratchetSchema, tenantId, traceColumns } from './common.js';
import { tasks } from './tasks.js';

export const EVENT_TYPES = [
  'started',
  'claimed',
  'released',
  'lease_reclaimed',
  'sleeping',
  'woke',
  'waiting',
  'signalled',
  'parked',
  'resolved',
  // An operator re-ran a failed run from its failure point (client.retry).
  'retried',
  'contract_sealed',
  'contract_committed',
  'contract_failed',
  'completed',
  'failed',
  'cancelled',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const events = ratchetSchema.table(
  'events',
  {
    tenantId: tenantId(),
    taskId: uuid('task_id').notNull(),
    seq: integer('seq').notNull(),
    eventType: text('event_type').$type<EventType>().notNull(),
    actorId: text('actor_id'),
    policyVersion: text('policy_version'),
    payload: jsonb('payload'),
    ...traceColumns(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ name: 'events_pkey', columns: [t.tenantId, t.taskId, t.seq] }),
    foreignKey({
      name: 'events_task_same_tenant',
      columns: [t.tenantId, t.taskId],
      foreignColumns: [tasks.tenantId, tasks.id],
    }).onDelete('cascade'),
    check('events_type_is_known', oneOf(t.eventType, EVENT_TYPES)),
  ],
);

export type EventRow = typeof events.$inferSelect;
