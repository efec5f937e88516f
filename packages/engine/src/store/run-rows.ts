/**
 * Deleting runs with everything that hangs off them, shared by retention (store/retention.ts) and
 * tenant purges (store/purge.ts): one list of a run's child tables, so a table added later is
 * removed by both.
 *
 * `deleteRunsCtes(source)` is the chain of CTEs `o, e, m, s, c, t` deleting the operations,
 * events, outbox messages, signals and contracts of the runs in CTE `source` (columns
 * `tenant_id`, `id`), then the runs (`t` returns their `completed_at`). Children go first: the
 * foreign keys' ON DELETE CASCADE then finds nothing left, and each table's count is its own.
 * Events are append-only: the transaction must first set the flag the trigger of migration 0001
 * admits deletes under (`RUN_DELETES_ALLOWED_SQL`).
 */

export const RUN_DELETES_ALLOWED_SQL = `SELECT set_config('ratchet.allow_event_delete', 'on', true)`;

/** The tables under a run, by the CTE that deletes from each. */
const CHILD_TABLES = { o: 'operations', e: 'events', m: 'outbox', s: 'signals', c: 'contracts' } as const;

export function deleteRunsCtes(source: string): string {
  const children = Object.entries(CHILD_TABLES).map(
    ([cte, table]) => `${cte} AS (DELETE FROM ratchet.${table} x USING ${source} WHERE x.tenant_id = ${source}.tenant_id AND x.task_id = ${source}.id RETURNING 1)`,
  );
  return [...children, `t AS (DELETE FROM ratchet.tasks x USING ${source} WHERE x.tenant_id = ${source}.tenant_id AND x.id = ${source}.id RETURNING x.completed_at)`].join(',\n  ');
}

/** The counts of `deleteRunsCtes`, as select-list items: `runs`, `operations`, `events`, `outbox`, `signals`, `contracts`. */
export const DELETED_COUNTS_SQL = [
  `(SELECT count(*) FROM t)::int AS runs`,
  ...Object.entries(CHILD_TABLES).map(([cte, table]) => `(SELECT count(*) FROM ${cte})::int AS ${table}`),
].join(', ');
