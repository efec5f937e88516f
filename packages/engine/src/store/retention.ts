/**
 * SQL for retention: removing finished runs, one batch per short transaction (docs/retention.md).
 *
 * A batch is ONE statement inside a transaction that first sets the transaction-local flag the
 * `events` append-only trigger admits (migration 0001). The statement:
 *
 *   b    picks up to `limit` finished runs (completed, failed, cancelled) that finished before the
 *        cutoff, oldest first, walking the partial index `tasks_finished`, and locks them
 *        FOR UPDATE SKIP LOCKED: two retention runs take disjoint batches and never wait on each
 *        other, and a row a live transaction holds (a caller registering for a result, a late
 *        signal) is left for the next pass rather than waited for. A run is taken only when no
 *        child run of it remains (children go first: deleting a parent would cascade to them)
 *        and, for a child, only when its parent has finished too (a live parent may still need
 *        to read its child).
 *   k    writes the tombstones of the keys the batch's runs held: the run's own key (scope
 *        `run:<workflow>`), each explicit effect key and each explicit contract key of a
 *        committed or failed contract. Default keys (`<run id>:<step key>`) name the run itself
 *        and die with it. A key already tombstoned keeps its first holder; a tombstone already
 *        expired is replaced.
 *   o…t  deletes the runs' operations, events, outbox messages, signals and contracts, then the
 *        runs, counting each (the foreign keys' ON DELETE CASCADE would find nothing left).
 *
 * Everything of a run goes in the same transaction as its tombstones, so a crash leaves either
 * the whole run or its tombstones, never half of it; a retention run that died is resumed by
 * running retention again.
 */
import type pg from 'pg';
import { DELETED_COUNTS_SQL, deleteRunsCtes, RUN_DELETES_ALLOWED_SQL } from './run-rows.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Rows one batch removed (or wrote, for tombstones). */
export interface RetentionBatchCounts {
  runs: number;
  operations: number;
  events: number;
  outbox: number;
  signals: number;
  contracts: number;
  tombstones: number;
  /** completed_at of the newest run the batch removed. */
  finishedUpTo: Date | null;
}

/** A time-ordered UUID (version 7) from the transaction's clock, for tombstone ids made in SQL. */
const UUIDV7_SQL = `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
  placing substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid`;

const FINAL = `('completed', 'failed', 'cancelled')`;

export const RETENTION_BATCH_SQL = `
  WITH b AS MATERIALIZED (
    SELECT t.tenant_id, t.id, t.workflow_name, t.idempotency_key, t.input_hash, t.state, t.completed_at
      FROM ratchet.tasks t
     WHERE t.state IN ${FINAL} AND t.completed_at < $1
       AND ($3::uuid IS NULL OR t.tenant_id = $3)
       AND NOT EXISTS (SELECT 1 FROM ratchet.tasks c WHERE c.parent_id = t.id AND c.tenant_id = t.tenant_id)
       AND (t.parent_id IS NULL
            OR EXISTS (SELECT 1 FROM ratchet.tasks p WHERE p.tenant_id = t.tenant_id AND p.id = t.parent_id AND p.state IN ${FINAL}))
     ORDER BY t.completed_at
     LIMIT $2
       FOR UPDATE OF t SKIP LOCKED
  ), keys AS (
    SELECT b.tenant_id, 'run:' || b.workflow_name AS scope, b.idempotency_key AS key, b.input_hash, b.id AS run_id,
           b.state AS outcome, b.completed_at AS finished_at
      FROM b WHERE b.idempotency_key IS NOT NULL
    UNION ALL
    -- An effect still reserved when its run ended may have happened: its outcome is unknown.
    SELECT o.tenant_id, 'effect', o.idempotency_key, o.input_hash, o.task_id,
           CASE WHEN o.state = 'reserved' THEN 'unknown' ELSE o.state END, b.completed_at
      FROM b JOIN ratchet.operations o ON o.task_id = b.id AND o.tenant_id = b.tenant_id
     WHERE o.idempotency_key IS NOT NULL AND o.kind IN ('effect', 'tool')
       AND o.idempotency_key <> (o.task_id::text || ':' || o.step_key)
    UNION ALL
    -- A contract only sealed never reached the database: nothing to protect.
    SELECT c.tenant_id, 'contract', c.idempotency_key, c.body_hash, c.task_id, c.status, b.completed_at
      FROM b JOIN ratchet.contracts c ON c.task_id = b.id AND c.tenant_id = b.tenant_id
     WHERE c.status IN ('committed', 'failed')
       AND c.idempotency_key IS DISTINCT FROM (c.task_id::text || ':' || c.step_key)
  ), k AS (
    INSERT INTO ratchet.idempotency_keys AS x (tenant_id, id, scope, key, input_hash, run_id, outcome, finished_at, expires_at, created_at)
    SELECT keys.tenant_id, ${UUIDV7_SQL}, keys.scope, keys.key, keys.input_hash, keys.run_id, keys.outcome, keys.finished_at,
           ratchet.now() + $4 * interval '1 millisecond', ratchet.now()
      FROM keys
     -- One lock order for every batch: tombstone rows are taken by key.
     ORDER BY keys.key, keys.scope
    ON CONFLICT (key, scope, tenant_id) DO UPDATE
       SET input_hash = CASE WHEN x.expires_at <= ratchet.now() THEN EXCLUDED.input_hash ELSE x.input_hash END,
           run_id = CASE WHEN x.expires_at <= ratchet.now() THEN EXCLUDED.run_id ELSE x.run_id END,
           outcome = CASE WHEN x.expires_at <= ratchet.now() THEN EXCLUDED.outcome ELSE x.outcome END,
           finished_at = CASE WHEN x.expires_at <= ratchet.now() THEN EXCLUDED.finished_at ELSE x.finished_at END,
           expires_at = greatest(x.expires_at, EXCLUDED.expires_at)
    RETURNING 1
  ), ${deleteRunsCtes('b')}
  SELECT ${DELETED_COUNTS_SQL},
         (SELECT count(*) FROM k)::int AS tombstones, (SELECT max(completed_at) FROM t) AS "finishedUpTo"`;

export interface RetentionBatchArgs {
  /** Runs that finished before this are removed. */
  cutoff: Date;
  limit: number;
  tenantId: string | null;
  /** Tombstones written now expire this many ms from now. */
  keepKeysMs: number;
}

/**
 * Removes one batch in its own transaction on `client` (a dedicated connection). `beforeCommit`
 * runs with the batch done but not committed (a fault point for tests).
 */
export async function removeRetentionBatch(
  client: pg.PoolClient,
  args: RetentionBatchArgs,
  beforeCommit?: (counts: RetentionBatchCounts) => Promise<void>,
): Promise<RetentionBatchCounts> {
  await client.query('BEGIN');
  try {
    // Transaction-local: the events trigger admits these deletes and no others (migration 0001).
    await client.query(RUN_DELETES_ALLOWED_SQL);
    const { rows } = await client.query<RetentionBatchCounts>({
      name: 'ratchet_retention_batch',
      text: RETENTION_BATCH_SQL,
      values: [args.cutoff, args.limit, args.tenantId, args.keepKeysMs],
    });
    const counts = rows[0]!;
    if (beforeCommit) await beforeCommit(counts);
    await client.query('COMMIT');
    return counts;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  }
}

/** Finished runs that finished before `cutoff` (of a tenant): the size of the job, for progress. */
export async function countFinishedBefore(db: Queryable, cutoff: Date, tenantId: string | null): Promise<number> {
  const { rows } = await db.query<{ n: number }>({
    name: 'ratchet_retention_count',
    text: `SELECT count(*)::int AS n FROM ratchet.tasks t
            WHERE t.state IN ${FINAL} AND t.completed_at < $1 AND ($2::uuid IS NULL OR t.tenant_id = $2)`,
    values: [cutoff, tenantId],
  });
  return rows[0]?.n ?? 0;
}

/** The database's time (ratchet.now()). */
export async function databaseNow(db: Queryable): Promise<Date> {
  const { rows } = await db.query<{ now: Date }>({ name: 'ratchet_now', text: 'SELECT ratchet.now() AS now' });
  return rows[0]!.now;
}
