/**
 * SQL of a tenant purge (tenants/purge.ts). Each batch is one short transaction: it takes up to
 * `limit` of the tenant's runs that nobody has locked (`FOR UPDATE SKIP LOCKED`; a worker's
 * checkpoint holds its run's row for a moment), deletes their operations, events, outbox
 * messages, signals and contracts and then the runs themselves, and adds what it removed to the
 * purge's audit row — so the counts stay exact however often the purge is interrupted and
 * resumed. Events are append-only; the batch sets the transaction-local flag the trigger of
 * migration 0001 admits deletes under.
 */
import type pg from 'pg';
import { DELETED_COUNTS_SQL, deleteRunsCtes, RUN_DELETES_ALLOWED_SQL } from './run-rows.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

export interface PurgeRow {
  id: string;
  state: 'running' | 'done';
  removed: Record<string, number>;
  batches: number;
  startedAt: Date;
  finishedAt: Date | null;
}

const PURGE_COLUMNS = `id, state, removed, batches, started_at AS "startedAt", finished_at AS "finishedAt"`;

/** The tenant's purge in progress, or a new one: a second call resumes the first. */
export async function beginPurge(db: Queryable, tenantId: string, id: string, requestedBy: string, policy: unknown): Promise<PurgeRow> {
  for (;;) {
    const { rows } = await db.query<PurgeRow>(
      `WITH i AS (
         INSERT INTO ratchet.tenant_purges (tenant_id, id, state, requested_by, policy, started_at)
         VALUES ($1, $2, 'running', $3, $4, ratchet.now())
         ON CONFLICT (tenant_id) WHERE state = 'running' DO NOTHING
         RETURNING ${PURGE_COLUMNS}
       )
       SELECT * FROM i
       UNION ALL
       SELECT ${PURGE_COLUMNS} FROM ratchet.tenant_purges WHERE tenant_id = $1 AND state = 'running' AND NOT EXISTS (SELECT 1 FROM i)`,
      [tenantId, id, requestedBy, JSON.stringify(policy)],
    );
    // Empty only if a running purge finished between the insert's check and the select: start anew.
    if (rows[0]) return rows[0];
  }
}

export interface BatchCounts {
  tasks: number;
  operations: number;
  events: number;
  outbox: number;
  signals: number;
  contracts: number;
}

/** Deletes one batch of the tenant's runs with everything hanging off them; adds the counts to the audit row. */
export async function purgeTaskBatch(client: pg.PoolClient, tenantId: string, purgeId: string, limit: number): Promise<BatchCounts> {
  await client.query(RUN_DELETES_ALLOWED_SQL);
  const { rows } = await client.query<Omit<BatchCounts, 'tasks'> & { runs: number }>(
    `WITH v AS (
       SELECT t.tenant_id, t.id FROM ratchet.tasks t WHERE t.tenant_id = $1 ORDER BY t.id LIMIT $2 FOR UPDATE SKIP LOCKED
     ), ${deleteRunsCtes('v')}
     SELECT ${DELETED_COUNTS_SQL}`,
    [tenantId, limit],
  );
  const { runs, ...children } = rows[0]!;
  const counts: BatchCounts = { tasks: runs, ...children };
  await addRemoved(client, tenantId, purgeId, counts as unknown as Record<string, number>);
  return counts;
}

/** Rows of the tenant not hanging off a run: schedules, key tombstones, sessions. */
export async function purgeTenantRows(client: pg.PoolClient, tenantId: string, purgeId: string): Promise<Record<string, number>> {
  const { rows } = await client.query<Record<string, number>>(
    `WITH sc AS (DELETE FROM ratchet.schedules WHERE tenant_id = $1 RETURNING 1),
          k AS (DELETE FROM ratchet.idempotency_keys WHERE tenant_id = $1 RETURNING 1),
          se AS (DELETE FROM ratchet.tenant_sessions WHERE tenant_id = $1 RETURNING 1)
     SELECT (SELECT count(*) FROM sc)::int AS schedules, (SELECT count(*) FROM k)::int AS "idempotencyKeys",
            (SELECT count(*) FROM se)::int AS sessions`,
    [tenantId],
  );
  const counts = rows[0]!;
  await addRemoved(client, tenantId, purgeId, counts);
  return counts;
}

/** Adds `counts` to the audit row's `removed`, and one batch. */
export async function addRemoved(db: Queryable, tenantId: string, purgeId: string, counts: Record<string, number>): Promise<void> {
  await db.query(
    `UPDATE ratchet.tenant_purges p
        SET removed = (SELECT coalesce(jsonb_object_agg(k, coalesce((p.removed ->> k)::bigint, 0) + coalesce((n.counts ->> k)::bigint, 0)), '{}'::jsonb)
                         FROM (SELECT jsonb_object_keys(p.removed || n.counts) AS k) keys),
            batches = p.batches + 1
       FROM (SELECT $3::jsonb AS counts) n
      WHERE p.tenant_id = $1 AND p.id = $2`,
    [tenantId, purgeId, JSON.stringify(counts)],
  );
}

export async function tenantHasRuns(db: Queryable, tenantId: string): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM ratchet.tasks WHERE tenant_id = $1 LIMIT 1`, [tenantId]);
  return rows.length > 0;
}

export async function finishPurge(db: Queryable, tenantId: string, purgeId: string): Promise<PurgeRow> {
  const { rows } = await db.query<PurgeRow>(
    `UPDATE ratchet.tenant_purges SET state = 'done', finished_at = ratchet.now() WHERE tenant_id = $1 AND id = $2 RETURNING ${PURGE_COLUMNS}`,
    [tenantId, purgeId],
  );
  return rows[0]!;
}
