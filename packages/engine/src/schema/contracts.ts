/**
 * `ratchet.contracts`: sealed agent decisions.
 *
 * Contract states (the CHECK `contracts_status_is_known`):
 *
 *   sealed ──commit──▶ committed
 *      └─────────────▶ failed (a dependency did not hold; `error_detail` says which)
 *
 * `body` is the canonical body whose SHA-256 is `body_hash`; commit re-hashes it and refuses a
 * mismatch. The idempotency key is unique per tenant. A trigger (migration 0003) refuses any
 * change of body, hash or identity, any status change but sealed → committed | failed, and any
 * change at all once settled: status moves only through the engine.
 */
import { sql } from 'drizzle-orm';
import { check, foreignKey, index, jsonb, primaryKey, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { createdAt, id, oneOf, ratchetSchema, tenantId, ts } from './common.js';
import { tasks } from './tasks.js';

export const CONTRACT_STATUSES = ['sealed', 'committed', 'failed'] as const;
export type ContractStatus = (typeof CONTRACT_STATUSES)[number];

export const contracts = ratchetSchema.table(
  'contracts',
  {
    tenantId: tenantId(),
    id: id(),
    taskId: uuid('task_id').notNull(),
    idempotencyKey: text('idempotency_key').notNull(),
    agentId: text('agent_id'),
    contractVersion: text('contract_version').notNull(),
    body: jsonb('body').notNull(),
    bodyHash: text('body_hash').notNull(),
    status: text('status').$type<ContractStatus>().notNull(),
    /** Step key of the `ctx.seal` that sealed it. */
    stepKey: text('step_key'),
    /** What commit returned (each action's result); set once committed. */
    result: jsonb('result'),
    errorDetail: jsonb('error_detail'),
    createdAt: createdAt(),
    committedAt: ts('committed_at'),
  },
  (t) => [
    primaryKey({ name: 'contracts_pkey', columns: [t.tenantId, t.id] }),
    foreignKey({
      name: 'contracts_task_same_tenant',
      columns: [t.tenantId, t.taskId],
      foreignColumns: [tasks.tenantId, tasks.id],
    }).onDelete('cascade'),
    check('contracts_status_is_known', oneOf(t.status, CONTRACT_STATUSES)),
    check('contracts_hash_is_sha256', sql`${t.bodyHash} ~ '^[0-9a-f]{64}$'`),
    uniqueIndex('contracts_idempotency_key_unique').on(t.idempotencyKey, t.tenantId),
    index('contracts_by_status').on(t.status, t.createdAt),
    index('contracts_task').on(t.taskId, t.tenantId),
  ],
);

export type ContractRow = typeof contracts.$inferSelect;
