/**
 * SQL for the leases workers hold on runs: the claim that takes them (due runs of the registered
 * workflow versions, in one statement with their events) and the renewal that extends them.
 * Every other change of a run's state is in tasks.ts.
 */
import type pg from 'pg';
import { TASK_COLUMNS } from './rows.js';
import { UNIQUE_VIOLATION, sqlState } from './sqlstate.js';
import type { ClaimedTask } from './tasks.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** A query config with node-pg's per-query read timeout (a field its type declarations omit). */
function timed<I extends unknown[]>(config: pg.QueryConfig<I>, ms: number): pg.QueryConfig<I> {
  return Object.assign(config, { query_timeout: ms });
}

export interface Claim {
  readonly tasks: ClaimedTask[];
  /**
   * Milliseconds until the next run of these pairs is due, leaving out the runs this claim took
   * (≤ 0: one is due now: left behind by a full claim, locked by another claim, or waiting for
   * its concurrency key); null when none is due at all.
   */
  readonly nextDueMs: number | null;
}

/**
 * Claims up to `limit` due runs of the registered `(name, version)` pairs in ONE statement:
 * pending runs, sleepers past `wake_at`, waits past their timeout, running runs whose lease
 * expired. Each claim bumps `state_version` and `claim_count` and writes its event (claimed, woke,
 * lease_reclaimed); a run claimed more than `maxClaims` times without progress is parked instead
 * (a poison pill must not crash workers forever) and is returned with state `parked`. The same
 * statement says whether each run has records, and when the next run it did not take is due: the
 * worker's idle wait needs no statement of its own, and a full claim tells whether it left due
 * runs behind.
 */
export async function claimTasks(
  db: Queryable,
  args: { names: string[]; versions: string[]; limit: number; owner: string; leaseMs: number; maxClaims: number; policyVersion?: string | null },
): Promise<Claim> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      // The claim loop must never hang on one statement (it would stop claiming while the process
      // looks alive): a claim takes milliseconds; after CLAIM_TIMEOUT_MS its connection is discarded.
      const { rows } = await db.query<ClaimedTask & { nextDueMs: number | null }>(
        timed(
          {
            name: 'ratchet_claim_tasks',
            text: CLAIM_TASKS_SQL,
            values: [args.names, args.versions, args.limit, args.owner, args.leaseMs, args.maxClaims, args.policyVersion ?? null],
          },
          CLAIM_TIMEOUT_MS,
        ),
      );
      // One row even when nothing was claimed (the next-due side of the outer join).
      return { tasks: rows.filter((row) => row.id !== null), nextDueMs: rows[0]?.nextDueMs ?? null };
    } catch (error) {
      // Another claim took a run of the same concurrency key at the same moment; the claim changed
      // nothing. Its repeat sees that run running and skips the key.
      if (sqlState(error) !== UNIQUE_VIOLATION || attempt >= 3) throw error;
    }
  }
}

/** A claim unanswered this long fails (node-pg's query_timeout) and is retried by the loop's backoff. */
const CLAIM_TIMEOUT_MS = 30_000;

export const CLAIM_TASKS_SQL = `
  WITH d AS (
    -- Per registered (workflow, version): pending runs by priority then age (tasks_pending), and
    -- every other due run — a sleeper waking, a wait timing out, an expired lease — by due time
    -- (tasks_due). A run of a concurrency key whose slots are all taken is passed over. Rows
    -- locked here but not claimed below unlock when this statement ends.
    SELECT p.* FROM unnest($1::text[], $2::text[]) AS w(name, version)
     CROSS JOIN LATERAL (
       SELECT t.tenant_id, t.id, t.state, t.lease_owner, t.due_at, t.wake_at, t.priority, t.concurrency_key, t.concurrency_limit, t.concurrency_slot
         FROM ratchet.tasks t
        WHERE t.workflow_name = w.name AND t.workflow_version = w.version AND t.state = 'pending' AND t.due_at <= ratchet.now()
          AND (t.concurrency_key IS NULL
               OR (SELECT count(*) FROM ratchet.tasks r
                    WHERE r.concurrency_key = t.concurrency_key AND r.tenant_id = t.tenant_id
                      AND r.state = 'running' AND r.concurrency_key IS NOT NULL) < t.concurrency_limit)
        -- NULLS LAST as in tasks_pending (priority is never null): the index gives the order, so
        -- a claim reads the runs it takes, not the whole backlog sorted.
        ORDER BY t.priority DESC NULLS LAST, t.due_at
        LIMIT $3
          FOR UPDATE SKIP LOCKED
     ) p
    UNION ALL
    SELECT q.* FROM unnest($1::text[], $2::text[]) AS w(name, version)
     CROSS JOIN LATERAL (
       SELECT t.tenant_id, t.id, t.state, t.lease_owner, t.due_at, t.wake_at, t.priority, t.concurrency_key, t.concurrency_limit, t.concurrency_slot
         FROM ratchet.tasks t
        WHERE t.workflow_name = w.name AND t.workflow_version = w.version AND t.state <> 'pending' AND t.due_at <= ratchet.now()
          AND (t.concurrency_key IS NULL OR t.state = 'running'
               OR (SELECT count(*) FROM ratchet.tasks r
                    WHERE r.concurrency_key = t.concurrency_key AND r.tenant_id = t.tenant_id
                      AND r.state = 'running' AND r.concurrency_key IS NOT NULL) < t.concurrency_limit)
        ORDER BY t.due_at
        LIMIT $3
          FOR UPDATE SKIP LOCKED
     ) q
  ), c AS MATERIALIZED (
    -- The n-th candidate of a key takes the key's n-th free slot (a run whose lease expired keeps
    -- its own); one without a free slot waits. Racing claims are settled by the unique index
    -- tasks_running_key_slots: the loser's statement fails, changes nothing and is repeated.
    SELECT x.tenant_id, x.id, x.state AS prior_state, x.lease_owner AS prior_owner, x.wake_at AS prior_wake_at, k.slot
      FROM (
        SELECT d.*, row_number() OVER (PARTITION BY d.tenant_id, d.concurrency_key ORDER BY d.priority DESC, d.due_at) AS nth_of_key
          FROM d
      ) x
     CROSS JOIN LATERAL (
       SELECT CASE WHEN x.concurrency_key IS NULL THEN NULL
                   WHEN x.state = 'running' THEN x.concurrency_slot
                   ELSE (SELECT s FROM generate_series(1, x.concurrency_limit) s
                          WHERE NOT EXISTS (SELECT 1 FROM ratchet.tasks r
                                             WHERE r.concurrency_key = x.concurrency_key AND r.tenant_id = x.tenant_id
                                               AND r.state = 'running' AND r.concurrency_key IS NOT NULL AND r.concurrency_slot = s)
                          ORDER BY s OFFSET x.nth_of_key - 1 LIMIT 1) END AS slot
     ) k
     WHERE x.concurrency_key IS NULL OR k.slot IS NOT NULL
     ORDER BY x.priority DESC, x.due_at
     LIMIT $3
  ), u AS (
    UPDATE ratchet.tasks t
       SET state = CASE WHEN t.claim_count >= $6 THEN 'parked' ELSE 'running' END,
           state_version = t.state_version + 1,
           claim_count = t.claim_count + 1,
           lease_owner = CASE WHEN t.claim_count >= $6 THEN NULL ELSE $4 END,
           lease_expires_at = CASE WHEN t.claim_count >= $6 THEN NULL ELSE ratchet.now() + $5 * interval '1 millisecond' END,
           due_at = CASE WHEN t.claim_count >= $6 THEN NULL ELSE ratchet.now() + $5 * interval '1 millisecond' END,
           wake_at = NULL,
           concurrency_slot = CASE WHEN t.claim_count >= $6 THEN NULL ELSE c.slot END,
           error = CASE WHEN t.claim_count >= $6
                        THEN jsonb_build_object('name', 'RatchetError', 'code', 'POISON_PILL',
                               'message', format('parked after %s claims without progress: the run keeps losing its worker', t.claim_count))
                        ELSE t.error END,
           updated_at = ratchet.now()
      FROM c
     WHERE t.tenant_id = c.tenant_id AND t.id = c.id
       -- The same rows, said so the generic plan looks them up by primary key: joined with c
       -- alone, it estimates c at a tenth of the backlog (LIMIT $3 is unknown) and hashes the
       -- whole table at every claim (3,000 runs: 1.4 ms instead of 0.5 ms; a million: a scan).
       AND t.tenant_id = ANY (ARRAY(SELECT c.tenant_id FROM c)) AND t.id = ANY (ARRAY(SELECT c.id FROM c))
    RETURNING ${TASK_COLUMNS}, c.prior_state, c.prior_owner, c.prior_wake_at
  ), e AS (
    INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, policy_version, trace_id, span_id, created_at)
    SELECT u."tenantId", u.id, u."stateVersion",
           CASE WHEN u.state = 'parked' THEN 'parked'
                WHEN u.prior_state = 'pending' THEN 'claimed'
                WHEN u.prior_state = 'running' THEN 'lease_reclaimed'
                -- Woken before its target: a signal or a settled child woke it.
                WHEN u.prior_state = 'waiting' AND (u.prior_wake_at IS NULL OR u.prior_wake_at > ratchet.now()) THEN 'signalled'
                ELSE 'woke' END,
           $4,
           jsonb_strip_nulls(jsonb_build_object('claims', u."claimCount", 'from', u.prior_state, 'previousOwner', u.prior_owner,
                             'reason', CASE WHEN u.state = 'parked' THEN 'poison_pill' END)),
           $7, u."traceId", u."spanId", ratchet.now()
      FROM u
  ), n AS (
    -- The earliest due_at among the other runs of these pairs (one index probe each on
    -- tasks_pending and tasks_due): the idle wait, or, after a full claim, whether due runs
    -- were left behind. An aggregate: always exactly one row.
    SELECT (extract(epoch FROM min(x.due_at) - ratchet.now()) * 1000)::float8 AS ms
      FROM unnest($1::text[], $2::text[]) AS w(name, version)
     CROSS JOIN LATERAL (
       (SELECT t.due_at FROM ratchet.tasks t
         WHERE t.workflow_name = w.name AND t.workflow_version = w.version AND t.state = 'pending'
           AND NOT EXISTS (SELECT 1 FROM c WHERE c.tenant_id = t.tenant_id AND c.id = t.id)
         ORDER BY t.priority DESC NULLS LAST, t.due_at LIMIT 1)
       UNION ALL
       (SELECT t.due_at FROM ratchet.tasks t
         WHERE t.workflow_name = w.name AND t.workflow_version = w.version AND t.due_at IS NOT NULL AND t.state <> 'pending'
           AND NOT EXISTS (SELECT 1 FROM c WHERE c.tenant_id = t.tenant_id AND c.id = t.id)
         ORDER BY t.due_at LIMIT 1)
     ) x
  )
  SELECT u.*, ratchet.now() AS "claimedAt",
         EXISTS (SELECT 1 FROM ratchet.operations o WHERE o.tenant_id = u."tenantId" AND o.task_id = u.id) AS "hasOperations",
         n.ms AS "nextDueMs"
    FROM n LEFT JOIN u ON true`;

export interface LeaseRenewal {
  tenantId: string;
  id: string;
  /** The run recorded progress since the last renewal: its poison-pill count restarts. */
  progressed: boolean;
}

export interface RenewedLease {
  tenantId: string;
  id: string;
  /** Extended now. False for a run whose row another transaction holds locked (often our own commit): try again soon. */
  renewed: boolean;
  /** Still this owner's running run. False: the run was re-claimed or moved; its execution must stop. */
  held: boolean;
  cancelRequestedAt: Date | null;
  signalSeq: number | null;
  now: Date;
}

/**
 * Extends the leases this owner holds, all in one statement. Never bumps `state_version`, and is
 * keyed by owner, not version: a seal or commit of our own moves the version without moving the
 * lease. Rows locked by another transaction (our own commit holds its run's row) are skipped,
 * not waited for, and reported `renewed: false, held: true`; a run whose owner changed is
 * reported `held: false`.
 */
export async function extendLeases(db: Queryable, owner: string, leaseMs: number, runs: LeaseRenewal[]): Promise<RenewedLease[]> {
  // A renewal that never returns (a half-open connection) gives its connection up after a lease
  // (pool.query then discards it) instead of holding it for ever; the keeper stops waiting sooner.
  const { rows } = await db.query<RenewedLease>(timed({
    name: 'ratchet_extend_leases',
    text: `
      WITH r AS (
        SELECT * FROM unnest($3::uuid[], $4::uuid[], $5::bool[]) AS r(tenant_id, id, progressed)
      ), l AS (
        SELECT t.tenant_id, t.id FROM ratchet.tasks t JOIN r ON t.tenant_id = r.tenant_id AND t.id = r.id
         WHERE t.lease_owner = $1 AND t.state = 'running'
           FOR NO KEY UPDATE OF t SKIP LOCKED
      ), u AS (
        UPDATE ratchet.tasks t
           SET lease_expires_at = ratchet.now() + $2 * interval '1 millisecond',
               due_at = ratchet.now() + $2 * interval '1 millisecond',
               claim_count = CASE WHEN r.progressed THEN 0 ELSE t.claim_count END
          FROM l JOIN r ON r.tenant_id = l.tenant_id AND r.id = l.id
         WHERE t.tenant_id = l.tenant_id AND t.id = l.id
        RETURNING t.id, t.cancel_requested_at, t.signal_seq
      )
      SELECT r.tenant_id AS "tenantId", r.id, u.id IS NOT NULL AS renewed,
             (u.id IS NOT NULL OR EXISTS (SELECT 1 FROM ratchet.tasks t WHERE t.tenant_id = r.tenant_id AND t.id = r.id
                                                                         AND t.lease_owner = $1 AND t.state = 'running')) AS held,
             u.cancel_requested_at AS "cancelRequestedAt", u.signal_seq AS "signalSeq", ratchet.now() AS now
        FROM r LEFT JOIN u ON u.id = r.id`,
    values: [owner, leaseMs, runs.map((r) => r.tenantId), runs.map((r) => r.id), runs.map((r) => r.progressed)],
  }, leaseMs));
  return rows;
}
