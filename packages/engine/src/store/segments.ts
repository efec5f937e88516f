/**
 * Where a run's previous execution segment left its trace, for the span links of the next one
 * (see instrumentation.ts). Nothing extra is stored: a segment writes its own span ids on the
 * event that ends it (`sleeping`, `waiting`, `released`) and its steps' span ids on their rows,
 * so the newest of those two is the previous segment — its ending event when it suspended, its
 * last recorded step when it was cut short (a crash, a lost lease: its own span never ended, so
 * only its steps were exported). Rows carrying the run's origin ids (start, claim, signal
 * events) are not segments and are skipped.
 *
 * Read once per resumed segment, and only when a segment hook is installed; both halves are
 * probes of primary-key-ordered rows of one run (events by (tenant, task, seq), operations by
 * the task index), newest first.
 */
import type pg from 'pg';
import type { SegmentInfo } from '../instrumentation.js';

type Queryable = Pick<pg.Pool | pg.PoolClient, 'query'>;

const SUSPENSIONS = new Set(['sleeping', 'waiting', 'released']);

export async function getPreviousSegment(db: Queryable, tenantId: string, taskId: string, originSpanId: string | null): Promise<SegmentInfo['previous']> {
  const { rows } = await db.query<{ source: string; type: string; traceId: string; spanId: string }>({
    name: 'ratchet_previous_segment',
    text: `
      SELECT x.source, x.type, x.trace_id AS "traceId", x.span_id AS "spanId" FROM (
        (SELECT 'event' AS source, e.event_type AS type, e.trace_id, e.span_id, e.created_at AS at, e.seq
           FROM ratchet.events e
          WHERE e.tenant_id = $1 AND e.task_id = $2 AND e.span_id IS NOT NULL AND e.span_id IS DISTINCT FROM $3
          ORDER BY e.seq DESC LIMIT 1)
        UNION ALL
        (SELECT 'operation', o.kind, o.trace_id, o.span_id, coalesce(o.completed_at, o.created_at), o.seq
           FROM ratchet.operations o
          WHERE o.tenant_id = $1 AND o.task_id = $2 AND o.span_id IS NOT NULL AND o.span_id IS DISTINCT FROM $3
          ORDER BY o.seq DESC LIMIT 1)
      ) x
      -- An ending event and its segment's last step can share a timestamp: the event wins.
      ORDER BY x.at DESC, x.source = 'event' DESC
      LIMIT 1`,
    values: [tenantId, taskId, originSpanId],
  });
  const row = rows[0];
  if (!row) return null;
  const reason = row.source === 'event' && SUSPENSIONS.has(row.type) ? (row.type as 'sleeping' | 'waiting' | 'released') : 'interrupted';
  return { traceId: row.traceId, spanId: row.spanId, reason };
}
