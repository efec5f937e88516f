/**
 * `engine.retention`: removing finished runs after a while, while their idempotency keys live on
 * as tombstones (docs/retention.md).
 *
 * @example
 * ```ts
 * // Once: runs that finished more than 30 days ago go; their keys are remembered 90 days more.
 * const report = await engine.retention.run({ olderThan: '30d', keepKeysFor: '90d', onProgress: (p) => bar.update(p.removed.runs, p.total) });
 * // Periodically, in this process (any number of processes may do it at once):
 * const job = engine.retention.schedule({ every: '1h', olderThan: '30d', keepKeysFor: '90d' });
 * await job.stop();
 * ```
 *
 * The job (one `run`):
 *   1. fixes the cutoff once, from the database clock (`ratchet.now() - olderThan`, or
 *      `finishedBefore`), so a long job ends instead of chasing runs that age meanwhile;
 *   2. removes batches of `batchSize` finished runs, oldest first, each batch ONE statement in its
 *      own short transaction with the tombstones of the keys its runs held (store/retention.ts),
 *      until a batch finds nothing left; rows locked elsewhere are skipped, not waited for;
 *   3. deletes expired tombstones, in batches too.
 * Nothing is remembered between batches but the database itself: a job that crashed, was
 * stopped or lost its connection is resumed by running retention again. Progress is reported
 * after each batch (`onProgress`, or iterate `batches()`), with the job's size counted at start.
 */
import type pg from 'pg';
import { parseDuration, ValidationError, type Duration } from '@ratchet/sdk';
import { tenantOf } from '../core.js';
import { fault, type FaultHooks } from '../faults.js';
import { countFinishedBefore, databaseNow, removeRetentionBatch, type RetentionBatchCounts } from '../store/retention.js';
import { purgeExpiredTombstones } from '../store/tombstones.js';

/** Default age of finished runs that retention removes. */
export const DEFAULT_RUN_RETENTION: Duration = '30d';
/** Default life of a removed run's key tombstones, from the run's removal. */
export const DEFAULT_KEY_RETENTION: Duration = '90d';

export interface RetentionOptions {
  /** Remove runs that finished at least this long ago (database time). Default 30 days. Not with `finishedBefore`. */
  olderThan?: Duration;
  /** Remove runs that finished before this instant. Not with `olderThan`. */
  finishedBefore?: Date;
  /**
   * How long the keys of a removed run are still recognised, counted from its removal. Default
   * 90 days, or the run retention if that is longer; never shorter than the run retention.
   */
  keepKeysFor?: Duration;
  /** Runs per batch (one transaction each). Default 500, at most 10 000. */
  batchSize?: number;
  /** Only this tenant's runs and tombstones. Default: every tenant. */
  tenantId?: string;
  /** Also delete tombstones past their expiry. Default true. */
  purgeExpiredKeys?: boolean;
  /** Called after each batch with the totals so far (for a progress bar). */
  onProgress?: (progress: RetentionProgress) => void;
  /** Stops the job between batches; what was removed stays removed (run again to continue). */
  signal?: AbortSignal;
}

/** Rows removed (tombstones: written or extended). */
export interface RetentionCounts {
  runs: number;
  operations: number;
  events: number;
  outbox: number;
  signals: number;
  contracts: number;
  /** Tombstones written (or extended) for the keys of removed runs. */
  tombstones: number;
  /** Tombstones deleted because they expired. */
  expiredKeys: number;
}

export interface RetentionProgress {
  /** `runs` while runs are removed, `keys` while expired tombstones are. */
  phase: 'runs' | 'keys';
  /** Batches done in this job, this one included. */
  batch: number;
  /** What this batch removed. */
  batchRemoved: RetentionCounts;
  /** What the job removed so far. */
  removed: RetentionCounts;
  /** Finished runs older than the cutoff when the job started (an estimate of its size). */
  total: number;
  cutoff: Date;
  /** Finish time of the newest run removed so far: how far through the backlog the job is. */
  finishedUpTo: Date | null;
}

export interface RetentionReport {
  removed: RetentionCounts;
  batches: number;
  cutoff: Date;
  /** How long the tombstones written by this job live, in ms from their writing. */
  keepKeysMs: number;
  startedAt: Date;
  finishedAt: Date;
  /** True when `signal` stopped the job before it was done. */
  stopped: boolean;
}

export interface RetentionScheduleOptions extends Omit<RetentionOptions, 'finishedBefore' | 'signal'> {
  /** Pause between the end of one job and the start of the next. Default 1 hour. */
  every?: Duration;
  /** Called with each job's report. */
  onReport?: (report: RetentionReport) => void;
  /** Called when a job fails (the schedule goes on). Default: the engine's `onError`. */
  onError?: (error: unknown) => void;
}

export interface RetentionSchedule {
  /** Stops the schedule: a job in progress stops after its current batch. */
  stop(): Promise<void>;
}

const MAX_BATCH = 10_000;

function zero(): RetentionCounts {
  return { runs: 0, operations: 0, events: 0, outbox: 0, signals: 0, contracts: 0, tombstones: 0, expiredKeys: 0 };
}

function add(into: RetentionCounts, batch: Partial<RetentionCounts>): void {
  for (const key of Object.keys(into) as (keyof RetentionCounts)[]) into[key] += batch[key] ?? 0;
}

interface Plan {
  cutoff: Date;
  keepKeysMs: number;
  batchSize: number;
  tenantId: string | null;
  purgeExpiredKeys: boolean;
}

export class Retention {
  readonly #pool: pg.Pool;
  readonly #faults: FaultHooks | undefined;
  readonly #onError: (error: unknown) => void;
  readonly #schedules = new Set<RetentionSchedule>();

  constructor(pool: pg.Pool, options: { faults?: FaultHooks | undefined; onError: (error: unknown) => void }) {
    this.#pool = pool;
    this.#faults = options.faults;
    this.#onError = options.onError;
  }

  /** Runs one retention job to its end (or until `signal` aborts) and reports what it removed. */
  async run(options: RetentionOptions = {}): Promise<RetentionReport> {
    const job = this.batches(options);
    for (;;) {
      const next = await job.next();
      if (next.done) return next.value;
      options.onProgress?.(next.value);
    }
  }

  /** The same job as an async iterator: one progress value per batch; its return value is the report. */
  async *batches(options: RetentionOptions = {}): AsyncGenerator<RetentionProgress, RetentionReport, undefined> {
    const startedAt = new Date();
    const plan = await this.#plan(options);
    const total = await countFinishedBefore(this.#pool, plan.cutoff, plan.tenantId);
    const removed = zero();
    let batch = 0;
    let finishedUpTo: Date | null = null;
    const report = (stopped: boolean): RetentionReport => ({
      removed, batches: batch, cutoff: plan.cutoff, keepKeysMs: plan.keepKeysMs, startedAt, finishedAt: new Date(), stopped,
    });

    for (;;) {
      if (options.signal?.aborted) return report(true);
      const counts = await this.#batch(plan, batch + 1);
      if (counts.runs === 0) break;
      batch += 1;
      if (counts.finishedUpTo) finishedUpTo = counts.finishedUpTo;
      const batchRemoved = { ...zero(), ...countsOf(counts) };
      add(removed, batchRemoved);
      yield { phase: 'runs', batch, batchRemoved, removed: { ...removed }, total, cutoff: plan.cutoff, finishedUpTo };
    }
    if (plan.purgeExpiredKeys) {
      for (;;) {
        if (options.signal?.aborted) return report(true);
        const expiredKeys = await purgeExpiredTombstones(this.#pool, plan.batchSize, plan.tenantId);
        if (expiredKeys === 0) break;
        batch += 1;
        const batchRemoved = { ...zero(), expiredKeys };
        add(removed, batchRemoved);
        yield { phase: 'keys', batch, batchRemoved, removed: { ...removed }, total, cutoff: plan.cutoff, finishedUpTo };
      }
    }
    return report(false);
  }

  /** Deletes tombstones past their expiry (of a tenant), in batches; resolves to how many. */
  async purgeExpiredKeys(options: { batchSize?: number; tenantId?: string } = {}): Promise<number> {
    const batchSize = batchSizeOf(options.batchSize);
    const tenantId = options.tenantId === undefined ? null : tenantOf(options.tenantId);
    let total = 0;
    for (;;) {
      const n = await purgeExpiredTombstones(this.#pool, batchSize, tenantId);
      total += n;
      if (n === 0) return total;
    }
  }

  /**
   * Runs a retention job now and then again `every` (default 1 h) after each one ends, in this
   * process, until `stop()` or `engine.close()`. Safe in many processes at once: their batches
   * skip each other's rows. The cutoff moves with each job (`olderThan` before its start).
   */
  schedule(options: RetentionScheduleOptions = {}): RetentionSchedule {
    const everyMs = parseDuration(options.every ?? '1h', 'every');
    if (everyMs < 1) throw new ValidationError('must be at least 1 ms', { path: ['every'] });
    const { every: _every, onReport, onError, ...jobOptions } = options;
    // Checked now, so a bad option throws here rather than in the background.
    checkOptions(jobOptions);
    const stopping = new AbortController();
    let wake: (() => void) | undefined;
    const loop = (async () => {
      while (!stopping.signal.aborted) {
        try {
          const report = await this.run({ ...jobOptions, signal: stopping.signal });
          onReport?.(report);
        } catch (error) {
          (onError ?? this.#onError)(error);
        }
        if (stopping.signal.aborted) break;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, everyMs);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    })();
    const schedule: RetentionSchedule = {
      stop: async () => {
        stopping.abort();
        wake?.();
        await loop;
        this.#schedules.delete(schedule);
      },
    };
    this.#schedules.add(schedule);
    return schedule;
  }

  /** Stops every schedule (engine.close()). */
  async stopAll(): Promise<void> {
    await Promise.all([...this.#schedules].map((s) => s.stop()));
  }

  async #plan(options: RetentionOptions): Promise<Plan> {
    const checked = checkOptions(options);
    const now = await databaseNow(this.#pool);
    const cutoff = options.finishedBefore ?? new Date(now.getTime() - checked.olderThanMs!);
    const ageMs = Math.max(0, now.getTime() - cutoff.getTime());
    const keepKeysMs = checked.keepKeysMs ?? Math.max(parseDuration(DEFAULT_KEY_RETENTION), ageMs);
    if (keepKeysMs < ageMs) {
      throw new ValidationError(
        `keys must be kept at least as long as runs (${ageMs} ms here): a key must not be forgotten sooner than its run would have been`,
        { path: ['keepKeysFor'] },
      );
    }
    return { cutoff, keepKeysMs, batchSize: checked.batchSize, tenantId: checked.tenantId, purgeExpiredKeys: options.purgeExpiredKeys !== false };
  }

  async #batch(plan: Plan, batch: number): Promise<RetentionBatchCounts> {
    const client = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      return await removeRetentionBatch(
        client,
        { cutoff: plan.cutoff, limit: plan.batchSize, tenantId: plan.tenantId, keepKeysMs: plan.keepKeysMs },
        this.#faults?.retentionBeforeCommit && (() => fault(this.#faults, { point: 'retentionBeforeCommit', runId: 'retention', attempt: batch })),
      );
    } catch (error) {
      broken = error as Error;
      throw error;
    } finally {
      // A connection that failed mid-transaction is not reused.
      client.release(broken);
    }
  }
}

function countsOf(c: RetentionBatchCounts): Partial<RetentionCounts> {
  return { runs: c.runs, operations: c.operations, events: c.events, outbox: c.outbox, signals: c.signals, contracts: c.contracts, tombstones: c.tombstones };
}

function batchSizeOf(size: number | undefined): number {
  const batchSize = size ?? 500;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_BATCH) {
    throw new ValidationError(`must be an integer from 1 to ${MAX_BATCH}`, { path: ['batchSize'] });
  }
  return batchSize;
}

function checkOptions(options: RetentionOptions): { olderThanMs: number | null; keepKeysMs: number | null; batchSize: number; tenantId: string | null } {
  if (typeof options !== 'object' || options === null) throw new ValidationError('options must be an object', { path: ['options'] });
  if (options.olderThan !== undefined && options.finishedBefore !== undefined) {
    throw new ValidationError('give olderThan or finishedBefore, not both', { path: ['finishedBefore'] });
  }
  if (options.finishedBefore !== undefined && (!(options.finishedBefore instanceof Date) || Number.isNaN(options.finishedBefore.getTime()))) {
    throw new ValidationError('must be a valid Date', { path: ['finishedBefore'] });
  }
  const olderThanMs = options.finishedBefore === undefined ? parseDuration(options.olderThan ?? DEFAULT_RUN_RETENTION, 'olderThan') : null;
  const keepKeysMs = options.keepKeysFor === undefined ? null : parseDuration(options.keepKeysFor, 'keepKeysFor');
  if (olderThanMs !== null && keepKeysMs !== null && keepKeysMs < olderThanMs) {
    throw new ValidationError(`must be at least olderThan (${olderThanMs} ms): a key must not be forgotten sooner than its run would have been`, {
      path: ['keepKeysFor'],
    });
  }
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') throw new ValidationError('must be a function', { path: ['onProgress'] });
  return { olderThanMs, keepKeysMs, batchSize: batchSizeOf(options.batchSize), tenantId: options.tenantId === undefined ? null : tenantOf(options.tenantId) };
}
