/**
 * `ratchet.workers`: one row per started worker, kept fresh by its heartbeat, so an operator can
 * see which `(workflow, version)` pairs have runs but no live worker (DESIGN §3.2: "a run whose
 * (name, version) no live worker serves is visible as such").
 *
 * Life of a row: `worker.start()` upserts it, a timer bumps `heartbeat_at` (ratchet.now()) every
 * `heartbeat_ms`, `worker.stop()` deletes it. A process that dies leaves its row behind: a row
 * counts as live while `heartbeat_at + 3 × heartbeat_ms` is in the future, and a stale row is
 * swept by the next worker that starts. Time is `ratchet.now()`, so a shifted test clock ages rows
 * as it ages leases.
 *
 * Engine-wide, not tenant data: a worker serves every tenant, so this is, with `clock`, a table
 * without a tenant. The row-level-security role gets no privilege on it.
 */
import { sql } from 'drizzle-orm';
import { check, index, integer, jsonb, primaryKey, text } from 'drizzle-orm/pg-core';
import { ratchetSchema, ts } from './common.js';

/** A `(workflow, version)` pair a worker serves, as stored in `workers.workflows`. */
export interface ServedWorkflow {
  name: string;
  version: string;
}

export const workers = ratchetSchema.table(
  'workers',
  {
    /** The worker's id: what it writes as `lease_owner` and on events. */
    id: text('id').notNull(),
    host: text('host').notNull(),
    pid: integer('pid').notNull(),
    /** The pairs the worker claims: `[{ name, version }]`. */
    workflows: jsonb('workflows').$type<ServedWorkflow[]>().notNull(),
    concurrency: integer('concurrency').notNull(),
    heartbeatMs: integer('heartbeat_ms').notNull(),
    startedAt: ts('started_at').notNull().defaultNow(),
    heartbeatAt: ts('heartbeat_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ name: 'workers_pkey', columns: [t.id] }),
    check('workers_heartbeat_positive', sql`${t.heartbeatMs} > 0`),
    check('workers_workflows_is_array', sql`jsonb_typeof(${t.workflows}) = 'array'`),
    index('workers_heartbeat').on(t.heartbeatAt),
  ],
);

export type WorkerRow = typeof workers.$inferSelect;
