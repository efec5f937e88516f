/**
 * Tables of the tenancy and data policy (docs/tenancy.md, docs/retention.md):
 *
 * - `ratchet.idempotency_keys`: tombstones. When retention removes a run (or the effect or
 *   contract that held an explicit key), its key is kept here — scope, key, input hash, the run,
 *   the outcome — with a retention of its own, so a late retry is still recognised after the
 *   run is gone. Scope: `run:<workflow name>` (the key of `client.start`), `effect`, `contract`.
 * - `ratchet.tenant_purges`: the audit row of each tenant purge: who, when, what was removed per
 *   table, the policy applied. It is the one row about a tenant that its purge keeps.
 * - `ratchet.tenant_sessions` and `ratchet.tenant_secret`: how the least-privilege application
 *   role is bound to one tenant (migration 0009: row-level security). A session enters a tenant
 *   through `ratchet.enter_tenant(tenant, proof)` with a proof only the engine can make from the
 *   secret; the role can read neither table, so it cannot pick another tenant. Engine-wide, not
 *   tenant data (like `clock`).
 */
import { sql } from 'drizzle-orm';
import { boolean, check, index, integer, jsonb, primaryKey, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { createdAt, id, oneOf, ratchetSchema, tenantId, ts } from './common.js';

export const TOMBSTONE_OUTCOMES = ['completed', 'failed', 'cancelled', 'succeeded', 'unknown', 'committed'] as const;

export const idempotencyKeys = ratchetSchema.table(
  'idempotency_keys',
  {
    tenantId: tenantId(),
    id: id(),
    /** `run:<workflow name>`, `effect` or `contract`: where the key was unique. */
    scope: text('scope').notNull(),
    key: text('key').notNull(),
    inputHash: text('input_hash'),
    /** The run that held the key (gone). */
    runId: uuid('run_id').notNull(),
    /** How it ended: a run's final state, an effect's or a contract's final status. */
    outcome: text('outcome').notNull(),
    /** When the run that held the key finished. */
    finishedAt: ts('finished_at'),
    /** After this the key is forgotten (the idempotency window). */
    expiresAt: ts('expires_at').notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    primaryKey({ name: 'idempotency_keys_pkey', columns: [t.tenantId, t.id] }),
    uniqueIndex('idempotency_keys_key_unique').on(t.key, t.scope, t.tenantId),
    index('idempotency_keys_expiry').on(t.expiresAt),
    check('idempotency_keys_outcome_is_known', oneOf(t.outcome, TOMBSTONE_OUTCOMES)),
  ],
);

export const PURGE_STATES = ['running', 'done'] as const;

export const tenantPurges = ratchetSchema.table(
  'tenant_purges',
  {
    tenantId: tenantId(),
    id: id(),
    state: text('state').notNull(),
    requestedBy: text('requested_by').notNull(),
    /** The declared policy applied (what was deleted, what kept), as a document. */
    policy: jsonb('policy').notNull(),
    /** Rows removed so far, by table; a resumed purge adds to them. */
    removed: jsonb('removed').notNull().default(sql`'{}'::jsonb`),
    batches: integer('batches').notNull().default(0),
    startedAt: ts('started_at').notNull().defaultNow(),
    finishedAt: ts('finished_at'),
  },
  (t) => [
    primaryKey({ name: 'tenant_purges_pkey', columns: [t.tenantId, t.id] }),
    check('tenant_purges_state_is_known', oneOf(t.state, PURGE_STATES)),
    // At most one purge of a tenant in progress: a second call resumes it.
    uniqueIndex('tenant_purges_one_running').on(t.tenantId).where(sql`${t.state} = 'running'`),
  ],
);

export const tenantSessions = ratchetSchema.table(
  'tenant_sessions',
  {
    pid: integer('pid').notNull(),
    /** The backend's start time: a reused pid does not inherit a session. */
    backendStart: ts('backend_start').notNull(),
    tenantId: uuid('tenant_id').notNull(),
  },
  (t) => [primaryKey({ name: 'tenant_sessions_pkey', columns: [t.pid] })],
);

export const tenantSecret = ratchetSchema.table(
  'tenant_secret',
  {
    single: boolean('single').notNull().default(true),
    secret: text('secret').notNull().default(sql`md5(random()::text || clock_timestamp()::text) || md5(random()::text)`),
  },
  (t) => [primaryKey({ name: 'tenant_secret_pkey', columns: [t.single] }), check('tenant_secret_is_single_row', sql`${t.single}`)],
);

export type IdempotencyKeyRow = typeof idempotencyKeys.$inferSelect;
export type TenantPurgeRow = typeof tenantPurges.$inferSelect;
