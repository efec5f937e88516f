/**
 * SQL for `ratchet.schedules` (see the table's header in schema/schedules.ts for the mechanism).
 *
 * `next_at` is the slot a schedule waits for, NULL while paused. The tick claims due rows
 * `FOR UPDATE SKIP LOCKED`, so two tickers never hold the same schedule; the runs it starts and
 * the new `next_at` commit together. Statements that make a schedule fire earlier than a ticker
 * may expect (create, resume) NOTIFY `ratchet_schedules`, so idle tickers re-arm their timers.
 * `updated_at` tracks the schedule's definition (create, pause, resume), not its ticks.
 */
import type pg from 'pg';
import type { CatchUpPolicy } from '../schema/index.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

/** Channel a created or resumed schedule notifies, so tickers re-arm their timers. */
export const SCHEDULES_CHANNEL = 'ratchet_schedules';

export interface ScheduleRecord {
  tenantId: string;
  id: string;
  name: string;
  workflowName: string;
  workflowVersion: string;
  cron: string;
  timezone: string;
  input: unknown;
  inputHash: string;
  catchUp: CatchUpPolicy;
  maxCatchUp: number;
  nextAt: Date | null;
  lastSlotAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

/** The schedule columns under their ScheduleRecord names; `s` is the alias of ratchet.schedules. */
const SCHEDULE_COLUMNS = `
  s.tenant_id AS "tenantId", s.id, s.name, s.workflow_name AS "workflowName", s.workflow_version AS "workflowVersion",
  s.cron, s.timezone, s.input, s.input_hash AS "inputHash", s.catch_up AS "catchUp", s.max_catch_up AS "maxCatchUp",
  s.next_at AS "nextAt", s.last_slot_at AS "lastSlotAt", s.created_at AS "createdAt", s.updated_at AS "updatedAt"`;

export interface NewSchedule {
  tenantId: string;
  id: string;
  name: string;
  workflowName: string;
  workflowVersion: string;
  cron: string;
  timezone: string;
  input: unknown;
  inputHash: string;
  catchUp: CatchUpPolicy;
  maxCatchUp: number;
  /** The first slot after now under this cron and zone. */
  nextAt: Date;
}

/** `ratchet.now()`: the engine's clock (shifted by tests). */
export async function databaseNow(db: Queryable): Promise<Date> {
  const { rows } = await db.query<{ now: Date }>({ name: 'ratchet_now', text: `SELECT ratchet.now() AS now` });
  return rows[0]!.now;
}

/**
 * Inserts the schedule, or updates the one of that name in the tenant (keeping its id). An
 * update keeps `next_at` unless the cron or time zone changed — so an app that declares its
 * schedules at every boot neither loses the slots it missed while down nor resumes a paused one.
 */
export async function upsertSchedule(db: Queryable, s: NewSchedule): Promise<ScheduleRecord> {
  const { rows } = await db.query<ScheduleRecord>({
    name: 'ratchet_upsert_schedule',
    text: `
      WITH s AS (
        INSERT INTO ratchet.schedules AS s (tenant_id, id, name, workflow_name, workflow_version, cron, timezone, input, input_hash,
                                            catch_up, max_catch_up, next_at, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, ratchet.now(), ratchet.now())
        ON CONFLICT (name, tenant_id) DO UPDATE
           SET workflow_name = excluded.workflow_name,
               workflow_version = excluded.workflow_version,
               cron = excluded.cron,
               timezone = excluded.timezone,
               input = excluded.input,
               input_hash = excluded.input_hash,
               catch_up = excluded.catch_up,
               max_catch_up = excluded.max_catch_up,
               next_at = CASE WHEN s.next_at IS NULL THEN NULL
                              WHEN s.cron = excluded.cron AND s.timezone = excluded.timezone THEN s.next_at
                              ELSE excluded.next_at END,
               updated_at = ratchet.now()
        RETURNING ${SCHEDULE_COLUMNS}
      ), n AS (SELECT pg_notify('${SCHEDULES_CHANNEL}', '') FROM s WHERE s."nextAt" IS NOT NULL)
      SELECT s.*, (SELECT count(*) FROM n) AS notified FROM s`,
    values: [
      s.tenantId,
      s.id,
      s.name,
      s.workflowName,
      s.workflowVersion,
      s.cron,
      s.timezone,
      JSON.stringify(s.input ?? null),
      s.inputHash,
      s.catchUp,
      s.maxCatchUp,
      s.nextAt,
    ],
  });
  return withoutNotified(rows[0]!);
}

export async function getSchedule(db: Queryable, tenantId: string, name: string): Promise<ScheduleRecord | null> {
  const { rows } = await db.query<ScheduleRecord>({
    name: 'ratchet_get_schedule',
    text: `SELECT ${SCHEDULE_COLUMNS} FROM ratchet.schedules s WHERE s.name = $2 AND s.tenant_id = $1`,
    values: [tenantId, name],
  });
  return rows[0] ?? null;
}

/** A tenant's schedules by name. */
export async function listSchedules(db: Queryable, tenantId: string): Promise<ScheduleRecord[]> {
  const { rows } = await db.query<ScheduleRecord>({
    name: 'ratchet_list_schedules',
    text: `SELECT ${SCHEDULE_COLUMNS} FROM ratchet.schedules s WHERE s.tenant_id = $1 ORDER BY s.name`,
    values: [tenantId],
  });
  return rows;
}

/** Pauses (next_at NULL); null when no such schedule. Pausing a paused schedule changes nothing. */
export async function pauseSchedule(db: Queryable, tenantId: string, name: string): Promise<ScheduleRecord | null> {
  const { rows } = await db.query<ScheduleRecord>({
    name: 'ratchet_pause_schedule',
    text: `UPDATE ratchet.schedules s
              SET next_at = NULL, updated_at = CASE WHEN s.next_at IS NULL THEN s.updated_at ELSE ratchet.now() END
            WHERE s.name = $2 AND s.tenant_id = $1
           RETURNING ${SCHEDULE_COLUMNS}`,
    values: [tenantId, name],
  });
  return rows[0] ?? null;
}

/**
 * Resumes a paused schedule at `nextAt`, only if it is still paused with the timing `nextAt` was
 * computed from (a concurrent create may have changed it); null otherwise.
 */
export async function resumeSchedule(
  db: Queryable,
  args: { tenantId: string; name: string; cron: string; timezone: string; nextAt: Date },
): Promise<ScheduleRecord | null> {
  const { rows } = await db.query<ScheduleRecord>({
    name: 'ratchet_resume_schedule',
    text: `
      WITH s AS (
        UPDATE ratchet.schedules s SET next_at = $5, updated_at = ratchet.now()
         WHERE s.name = $2 AND s.tenant_id = $1 AND s.next_at IS NULL AND s.cron = $3 AND s.timezone = $4
        RETURNING ${SCHEDULE_COLUMNS}
      ), n AS (SELECT pg_notify('${SCHEDULES_CHANNEL}', '') FROM s)
      SELECT s.*, (SELECT count(*) FROM n) AS notified FROM s`,
    values: [args.tenantId, args.name, args.cron, args.timezone, args.nextAt],
  });
  return rows[0] ? withoutNotified(rows[0]) : null;
}

/** Deletes the schedule (its runs stay); false when there was none. */
export async function deleteSchedule(db: Queryable, tenantId: string, name: string): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'ratchet_delete_schedule',
    text: `DELETE FROM ratchet.schedules s WHERE s.name = $2 AND s.tenant_id = $1`,
    values: [tenantId, name],
  });
  return (rowCount ?? 0) > 0;
}

export interface DueSchedule extends ScheduleRecord {
  nextAt: Date;
  /** ratchet.now() when the claim ran. */
  now: Date;
}

/**
 * Locks up to `limit` due schedules of every tenant, earliest first, for the rest of the caller's
 * transaction; rows another ticker holds are skipped, not waited for.
 */
export async function claimDueSchedules(client: pg.PoolClient, limit: number): Promise<DueSchedule[]> {
  const { rows } = await client.query<DueSchedule>({
    name: 'ratchet_claim_due_schedules',
    text: `SELECT ${SCHEDULE_COLUMNS}, ratchet.now() AS now FROM ratchet.schedules s
            WHERE s.next_at <= ratchet.now()
            ORDER BY s.next_at
            LIMIT $1
              FOR UPDATE SKIP LOCKED`,
    values: [limit],
  });
  return rows;
}

export interface ScheduleMove {
  tenantId: string;
  id: string;
  /** The next slot to fire, or null to pause (a definition this code cannot read). */
  nextAt: Date | null;
  /** The last slot fired now, or null when none fired (last_slot_at is kept). */
  lastSlotAt: Date | null;
}

/** Moves the claimed schedules on, all in one statement (inside the tick's transaction). */
export async function moveSchedules(client: pg.PoolClient, moves: ScheduleMove[]): Promise<void> {
  await client.query({
    name: 'ratchet_move_schedules',
    text: `UPDATE ratchet.schedules s
              SET next_at = m.next_at, last_slot_at = coalesce(m.last_slot_at, s.last_slot_at)
             FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::timestamptz[]) AS m(tenant_id, id, next_at, last_slot_at)
            WHERE s.tenant_id = m.tenant_id AND s.id = m.id`,
    values: [moves.map((m) => m.tenantId), moves.map((m) => m.id), moves.map((m) => m.nextAt), moves.map((m) => m.lastSlotAt)],
  });
}

/** Milliseconds until the earliest active schedule is due (≤ 0: due now), or null when none is active. */
export async function nextScheduleDueIn(db: Queryable): Promise<number | null> {
  const { rows } = await db.query<{ ms: number | null }>({
    name: 'ratchet_next_schedule_due',
    text: `SELECT (extract(epoch FROM min(s.next_at) - ratchet.now()) * 1000)::float8 AS ms
             FROM ratchet.schedules s WHERE s.next_at IS NOT NULL`,
  });
  return rows[0]?.ms ?? null;
}

function withoutNotified(row: ScheduleRecord & { notified?: unknown }): ScheduleRecord {
  const { notified: _notified, ...record } = row;
  return record;
}
