/**
 * `engine.tenants`: what the engine does for a tenant as a whole.
 *
 * - `purge(tenantId)`: removes everything Ratchet holds of a tenant, following the declared
 *   policy (`PURGE_POLICY`), in batches — each a short transaction that skips rows a worker has
 *   locked — so a tenant with millions of rows neither locks the tables nor times out. It is
 *   idempotent and resumable: the purge is an audit row (`ratchet.tenant_purges`) created first;
 *   a second call, or a call after a crash, continues it, and the row's per-table counts are
 *   updated in the same transaction as each batch, so they stay exact. The audit row is the one
 *   row about the tenant that survives. Runs started while a purge is in progress are removed
 *   too, until it finishes; stop the tenant's traffic first. Workers executing a purged run lose
 *   its lease (their next checkpoint finds no run) and stop; they never crash.
 * - `sessionProof(tenantId)`: the proof a connection of the least-privilege role `ratchet_app`
 *   presents to `ratchet.enter_tenant(tenant, proof)` (migration 0009) to read that tenant's rows.
 */
import type pg from 'pg';
import { ValidationError, isRatchetError } from '@ratchet/sdk';
import { createHash } from 'node:crypto';
import { tenantOf } from '../core.js';
import { uuidv7 } from '../ids.js';
import { beginPurge, finishPurge, purgeTaskBatch, purgeTenantRows, tenantHasRuns, addRemoved, type PurgeRow } from '../store/purge.js';
import { isTransient } from '../store/sqlstate.js';

/** What a purge deletes and keeps; stored with each purge's audit row. */
export const PURGE_POLICY = Object.freeze({
  version: 1,
  deleted: {
    tasks: 'every run of the tenant, whatever its state (a running run is taken from its worker, which stops)',
    operations: 'all step records, including recorded model answers and effect results',
    events: 'all events (the append-only trigger admits the purge under a transaction-local flag)',
    outbox: 'all messages, dispatched or not: pending messages are not published',
    signals: 'all signals, consumed or not',
    contracts: 'all contracts; rows a committed contract wrote to application tables are removed by the purge hooks, if any',
    schedules: 'all schedules (first, so no new run is started)',
    idempotencyKeys: 'all key tombstones: after a purge, a retried request with an old key starts anew',
    sessions: 'all sessions of ratchet_app connections entered into the tenant',
  },
  kept: {
    tenantPurges: 'the audit row: tenant id, who asked, when, the policy, and how many rows of each table were removed — no data of the tenant',
  },
});

/** An application table's share of a purge: delete up to `limit` of the tenant's rows, return how many. */
export interface PurgeHook {
  /** Reported in the audit row's counts, e.g. `app.tickets`. */
  readonly name: string;
  purge(db: pg.PoolClient, args: { tenantId: string; limit: number }): Promise<number>;
}

export interface PurgeOptions {
  /** Runs per batch. Default 500. */
  batchSize?: number;
  /** Called after each batch with the totals so far (for a progress bar). */
  onProgress?: (progress: { removed: Record<string, number>; batches: number }) => void;
}

export interface PurgeReport {
  purgeId: string;
  tenantId: string;
  removed: Record<string, number>;
  batches: number;
  startedAt: Date;
  finishedAt: Date;
}

export class Tenants {
  constructor(
    private readonly pool: pg.Pool,
    private readonly actorId: string,
    private readonly hooks: readonly PurgeHook[],
    private readonly onError: (error: unknown) => void,
  ) {}

  /** Removes everything of `tenantId` per `PURGE_POLICY`; resumes a purge already in progress. */
  async purge(tenantId: string, options: PurgeOptions = {}): Promise<PurgeReport> {
    if (tenantId === undefined) throw new ValidationError('a tenant id is required to purge', { path: ['tenantId'] });
    const tenant = tenantOf(tenantId);
    const batchSize = options.batchSize ?? 500;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000) throw new ValidationError('must be an integer from 1 to 10000', { path: ['batchSize'] });
    const row = await beginPurge(this.pool, tenant, uuidv7(), this.actorId, PURGE_POLICY);
    let progress = { removed: row.removed, batches: row.batches };
    const report = (counts: Record<string, number>) => {
      const removed = { ...progress.removed };
      for (const [k, n] of Object.entries(counts)) removed[k] = (removed[k] ?? 0) + n;
      progress = { removed, batches: progress.batches + 1 };
      options.onProgress?.(progress);
    };
    report(await this.#inTransaction((c) => purgeTenantRows(c, tenant, row.id)));
    for (let idle = 0; ; ) {
      const counts = await this.#inTransaction((c) => purgeTaskBatch(c, tenant, row.id, batchSize));
      if (counts.tasks > 0) {
        idle = 0;
        report(counts as unknown as Record<string, number>);
        continue;
      }
      if (!(await tenantHasRuns(this.pool, tenant))) break;
      // Every remaining run is locked for a moment (a checkpoint in flight): look again shortly.
      await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, 10 * 2 ** idle++)));
    }
    for (const hook of this.hooks) {
      for (;;) {
        const n = await this.#inTransaction(async (c) => {
          const deleted = await hook.purge(c, { tenantId: tenant, limit: batchSize });
          if (!Number.isInteger(deleted) || deleted < 0) throw new ValidationError(`purge hook ${hook.name} must return how many rows it deleted`, { path: ['purgeHooks', hook.name] });
          await addRemoved(c, tenant, row.id, { [hook.name]: deleted });
          return deleted;
        });
        report({ [hook.name]: n });
        if (n < batchSize) break;
      }
    }
    // Tombstones and sessions written while the runs were being removed.
    report(await this.#inTransaction((c) => purgeTenantRows(c, tenant, row.id)));
    const done: PurgeRow = await finishPurge(this.pool, tenant, row.id);
    return { purgeId: done.id, tenantId: tenant, removed: done.removed, batches: done.batches, startedAt: done.startedAt, finishedAt: done.finishedAt! };
  }

  /**
   * The proof that admits a `ratchet_app` session to `tenantId`:
   * `SELECT ratchet.enter_tenant($1, $2)` with `[tenantId, proof]`. Keep it on the server side.
   */
  async sessionProof(tenantId: string): Promise<string> {
    if (tenantId === undefined) throw new ValidationError('a tenant id is required', { path: ['tenantId'] });
    const tenant = tenantOf(tenantId);
    const { rows } = await this.pool.query<{ secret: string }>(`SELECT secret FROM ratchet.tenant_secret`);
    if (!rows[0]) throw new ValidationError('the database has no tenant secret; run engine.migrate()', { path: ['tenantId'] });
    return createHash('sha256').update(`${rows[0].secret}:${tenant}`, 'utf8').digest('hex');
  }

  /** One short transaction; repeated after a dropped connection (each body is safe to repeat: it only deletes). */
  async #inTransaction<T>(body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      let client: pg.PoolClient | undefined;
      let broken = false;
      try {
        client = await this.pool.connect();
        await client.query('BEGIN');
        const result = await body(client);
        await client.query('COMMIT');
        return result;
      } catch (error) {
        if (client) await client.query('ROLLBACK').catch(() => (broken = true));
        if (isRatchetError(error) || !isTransient(error) || attempt >= 5) throw error;
        this.onError(error);
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      } finally {
        client?.release(broken);
      }
    }
  }
}
