/**
 * SQL for `ratchet.idempotency_keys`: the tombstones retention leaves behind (docs/retention.md).
 *
 * A tombstone is written by retention in the transaction that removes the run holding the key
 * (store/retention.ts), and it lives until `expires_at`; a tombstone past `expires_at` is ignored
 * by every reader even before `purgeExpiredTombstones` deletes it, so the idempotency window
 * ends at one well-defined instant. Scopes: `run:<workflow name>` (a run's key, unique per
 * workflow like `tasks_idempotency_key_unique`), `effect` and `contract` (explicit keys, unique
 * per tenant like their tables).
 *
 * Who reads them: the start statements (store/tasks.ts) refuse to insert a run whose key has a
 * live tombstone, inside the INSERT itself; the caller then finds the tombstone here. An effect
 * with an explicit key looks here right after reserving it (runtime/expired-keys.ts); a seal's
 * statement refuses a key with a tombstone (store/contracts.ts).
 */
import type pg from 'pg';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export type TombstoneScope = `run:${string}` | 'effect' | 'contract';

export interface TombstoneRecord {
  tenantId: string;
  scope: string;
  key: string;
  inputHash: string | null;
  runId: string;
  outcome: string;
  finishedAt: Date | null;
  expiresAt: Date;
}

/** The scope of a run's key: keys are unique per workflow name, so are their tombstones. */
export function runScope(workflowName: string): TombstoneScope {
  return `run:${workflowName}`;
}

/** The live tombstone of `key` in `scope`, or null (none, or past its `expires_at`). */
export async function getTombstone(db: Queryable, tenantId: string, scope: TombstoneScope, key: string): Promise<TombstoneRecord | null> {
  const { rows } = await db.query<TombstoneRecord>({
    name: 'ratchet_get_tombstone',
    text: `SELECT k.tenant_id AS "tenantId", k.scope, k.key, k.input_hash AS "inputHash", k.run_id AS "runId", k.outcome,
                  k.finished_at AS "finishedAt", k.expires_at AS "expiresAt"
             FROM ratchet.idempotency_keys k
            WHERE k.key = $3 AND k.scope = $2 AND k.tenant_id = $1 AND k.expires_at > ratchet.now()`,
    values: [tenantId, scope, key],
  });
  return rows[0] ?? null;
}

/**
 * Deletes up to `limit` tombstones past `expires_at` (optionally of one tenant), oldest first,
 * skipping rows another purge holds. Resolves to how many were deleted.
 */
export async function purgeExpiredTombstones(db: Queryable, limit: number, tenantId: string | null): Promise<number> {
  const { rowCount } = await db.query({
    name: 'ratchet_purge_expired_tombstones',
    text: `DELETE FROM ratchet.idempotency_keys k
             USING (SELECT x.tenant_id, x.id FROM ratchet.idempotency_keys x
                     WHERE x.expires_at <= ratchet.now() AND ($2::uuid IS NULL OR x.tenant_id = $2)
                     ORDER BY x.expires_at LIMIT $1
                       FOR UPDATE SKIP LOCKED) d
            WHERE k.tenant_id = d.tenant_id AND k.id = d.id`,
    values: [limit, tenantId],
  });
  return rowCount ?? 0;
}
