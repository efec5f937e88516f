/**
 * `engine.contracts.stats()`: what an operator watches (the seed's monitoring list) — the sealed
 * backlog, seal → commit latency, failures by reason, and contract-key conflicts.
 */
import type pg from 'pg';
import { ValidationError } from '@ratchet/sdk';
import { tenantOf } from '../core.js';

export interface ContractStatsReport {
  /** Contracts sealed and not yet committed or failed (all time). */
  sealedBacklog: number;
  /** Age of the oldest sealed contract in ms, or null. */
  oldestSealedMs: number | null;
  /** Settled since `since`. */
  committed: number;
  failed: number;
  /** failed / (committed + failed), or null when none settled. */
  failureRatio: number | null;
  /** Failures by reason (dependency, tampered, constraint, action_error, …). */
  failuresByReason: Record<string, number>;
  /** Seal → commit latency of contracts committed since `since`, in ms. */
  sealToCommitP50Ms: number | null;
  sealToCommitP99Ms: number | null;
  /** Seals refused since `since` because their key already held another body. */
  idempotencyConflicts: number;
}

export class ContractStats {
  constructor(private readonly pool: pg.Pool) {}

  /** Since `since` (default: the last hour), for one tenant or (tenantId omitted) the default tenant. */
  async stats(options: { since?: Date; tenantId?: string } = {}): Promise<ContractStatsReport> {
    const since = options.since ?? new Date(Date.now() - 3_600_000);
    if (!(since instanceof Date) || Number.isNaN(since.getTime())) throw new ValidationError('must be a valid Date', { path: ['since'] });
    const tenantId = tenantOf(options.tenantId);
    const { rows } = await this.pool.query(
      `SELECT
         (SELECT count(*) FROM ratchet.contracts WHERE tenant_id = $1 AND status = 'sealed')::int AS backlog,
         (SELECT (extract(epoch FROM ratchet.now() - min(created_at)) * 1000)::float8 FROM ratchet.contracts
           WHERE tenant_id = $1 AND status = 'sealed') AS oldest,
         count(*) FILTER (WHERE status = 'committed')::int AS committed,
         count(*) FILTER (WHERE status = 'failed')::int AS failed,
         (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM committed_at - created_at) * 1000)
            FILTER (WHERE status = 'committed'))::float8 AS p50,
         (percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM committed_at - created_at) * 1000)
            FILTER (WHERE status = 'committed'))::float8 AS p99,
         coalesce((SELECT jsonb_object_agg(reason, n) FROM (
            SELECT error_detail->>'reason' AS reason, count(*)::int AS n FROM ratchet.contracts
             WHERE tenant_id = $1 AND status = 'failed' AND created_at >= $2 GROUP BY 1) r), '{}') AS reasons,
         (SELECT count(*) FROM ratchet.operations
           WHERE tenant_id = $1 AND kind = 'seal' AND state = 'failed' AND error->>'code' = 'CONTRACT_CONFLICT' AND created_at >= $2)::int AS conflicts
       FROM ratchet.contracts WHERE tenant_id = $1 AND created_at >= $2 AND status <> 'sealed'`,
      [tenantId, since],
    );
    const r = rows[0];
    const settled = r.committed + r.failed;
    return {
      sealedBacklog: r.backlog,
      oldestSealedMs: r.oldest,
      committed: r.committed,
      failed: r.failed,
      failureRatio: settled === 0 ? null : r.failed / settled,
      failuresByReason: r.reasons,
      sealToCommitP50Ms: r.p50,
      sealToCommitP99Ms: r.p99,
      idempotencyConflicts: r.conflicts,
    };
  }
}
