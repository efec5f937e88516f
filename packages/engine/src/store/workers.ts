/**
 * SQL for `ratchet.workers` (schema/workers.ts): a worker's row, its heartbeat, and the question
 * an operator asks at 3 a.m. — which `(workflow, version)` pairs have runs that no live worker
 * serves. A row is live while `heartbeat_at + 3 × heartbeat_ms > ratchet.now()`: two missed beats
 * are tolerated (a GC pause, a slow statement), the third is a dead process.
 */
import type pg from 'pg';
import type { ServedWorkflow } from '../schema/workers.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Beats a worker may miss before it counts as gone. */
export const MISSED_BEATS = 3;

export interface WorkerRegistration {
  id: string;
  host: string;
  pid: number;
  workflows: ServedWorkflow[];
  concurrency: number;
  heartbeatMs: number;
}

export interface WorkerRecord extends WorkerRegistration {
  startedAt: Date;
  heartbeatAt: Date;
  /** Its heartbeat is recent enough (see the file comment). */
  live: boolean;
}

// Interval arithmetic, not integer: heartbeat_ms may be as large as an int (a worker that never beats).
const LIVE = `w.heartbeat_at + w.heartbeat_ms * interval '1 millisecond' * ${MISSED_BEATS} > ratchet.now()`;

/** Inserts (or refreshes) the worker's row, and sweeps rows whose process stopped beating long ago. */
export async function registerWorker(db: Queryable, w: WorkerRegistration): Promise<void> {
  await db.query(
    `WITH sweep AS (
       DELETE FROM ratchet.workers w
        WHERE w.heartbeat_at + w.heartbeat_ms * interval '1 millisecond' * ${10 * MISSED_BEATS} < ratchet.now() AND w.id <> $1
     )
     INSERT INTO ratchet.workers (id, host, pid, workflows, concurrency, heartbeat_ms, started_at, heartbeat_at)
     VALUES ($1, $2, $3, $4, $5, $6, ratchet.now(), ratchet.now())
     ON CONFLICT (id) DO UPDATE SET workflows = EXCLUDED.workflows, concurrency = EXCLUDED.concurrency,
       heartbeat_ms = EXCLUDED.heartbeat_ms, heartbeat_at = EXCLUDED.heartbeat_at`,
    [w.id, w.host, w.pid, JSON.stringify(w.workflows), w.concurrency, w.heartbeatMs],
  );
}

/**
 * One beat: a named prepared statement, the only write a worker makes while idle. A row swept
 * while this process was paused comes back (the worker is plainly alive): false asks the caller
 * to register again.
 */
export async function beatWorker(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'ratchet_worker_heartbeat',
    text: `UPDATE ratchet.workers SET heartbeat_at = ratchet.now() WHERE id = $1`,
    values: [id],
  });
  return rowCount === 1;
}

export async function removeWorker(db: Queryable, id: string): Promise<void> {
  await db.query(`DELETE FROM ratchet.workers WHERE id = $1`, [id]);
}

/** Every worker row, live ones first, newest first. */
export async function listWorkers(db: Queryable): Promise<WorkerRecord[]> {
  const { rows } = await db.query<WorkerRecord>(
    `SELECT w.id, w.host, w.pid, w.workflows, w.concurrency, w.heartbeat_ms AS "heartbeatMs",
            w.started_at AS "startedAt", w.heartbeat_at AS "heartbeatAt", ${LIVE} AS live
       FROM ratchet.workers w
      ORDER BY ${LIVE} DESC, w.started_at DESC`,
  );
  return rows;
}

export interface RunsByVersion {
  workflow: string;
  version: string;
  state: string;
  runs: number;
}

/** The tenant's runs counted by (workflow, version, state). */
export async function countRuns(db: Queryable, tenantId: string): Promise<RunsByVersion[]> {
  const { rows } = await db.query<RunsByVersion>(
    `SELECT workflow_name AS workflow, workflow_version AS version, state, count(*)::int AS runs
       FROM ratchet.tasks WHERE tenant_id = $1
      GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
    [tenantId],
  );
  return rows;
}

export interface UnservedPair {
  workflow: string;
  version: string;
  /** Runs of the pair a worker must move on: pending, running, sleeping, waiting. */
  runs: number;
  /** The oldest of those runs' creation. */
  oldestAt: Date;
}

/**
 * `(workflow, version)` pairs of the tenant with runs a worker must move on (pending, running,
 * sleeping, waiting — not parked, which waits for an operator, nor finished) that no live
 * worker serves. A run started by `engine.run` executes inline but is resumed by workers, so it
 * counts too.
 */
export async function unservedPairs(db: Queryable, tenantId: string): Promise<UnservedPair[]> {
  const { rows } = await db.query<UnservedPair>(
    `SELECT t.workflow_name AS workflow, t.workflow_version AS version, count(*)::int AS runs, min(t.created_at) AS "oldestAt"
       FROM ratchet.tasks t
      WHERE t.tenant_id = $1 AND t.state IN ('pending', 'running', 'sleeping', 'waiting')
      GROUP BY 1, 2
     HAVING NOT EXISTS (
       SELECT 1 FROM ratchet.workers w
        WHERE ${LIVE}
          AND w.workflows @> jsonb_build_array(jsonb_build_object('name', t.workflow_name, 'version', t.workflow_version)))
      ORDER BY 1, 2`,
    [tenantId],
  );
  return rows;
}
