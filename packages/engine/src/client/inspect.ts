/**
 * What an operator reads about runs: `client.inspect(runId)` (everything recorded about one
 * run — the history the CLI's `show`, the web view and the replay helper read) and
 * `engine.stats()` (runs by state and version, the pairs no live worker serves, the workers,
 * contract health). Read-only and tenant-scoped, like the queries under them (store/inspect.ts).
 */
import { NotFoundError, ValidationError, type SerializedError } from '@ratchet/sdk';
import { isUuid } from '../ids.js';
import { tenantOf, type EngineCore } from '../core.js';
import type { TaskState } from '../schema/index.js';
import { getRun, runChildren, runContracts, runEvents, runSignals, runSteps, type ChildInfo, type ContractInfo, type EventInfo, type SignalInfo, type StepRow } from '../store/inspect.js';
import { countRuns, listWorkers, unservedPairs, type RunsByVersion, type UnservedPair, type WorkerRecord } from '../store/workers.js';
import { ContractStats, type ContractStatsReport } from '../contracts/stats.js';

/** One recorded step, as `inspect` shows it. */
export interface StepInfo extends StepRow {
  /** completedAt − createdAt (for an effect, reservedAt is the start), or null while in flight. */
  durationMs: number | null;
}

/** Everything recorded about one run: also the history format the replay helper reads. */
export interface RunDetail {
  run: {
    runId: string;
    tenantId: string;
    workflow: string;
    version: string;
    state: TaskState;
    stateVersion: number;
    input: unknown;
    output?: unknown;
    error?: SerializedError;
    idempotencyKey: string | null;
    concurrencyKey: string | null;
    priority: number;
    parentId: string | null;
    wakeAt: Date | null;
    deadlineAt: Date | null;
    leaseOwner: string | null;
    leaseExpiresAt: Date | null;
    claimCount: number;
    cancelRequestedAt: Date | null;
    traceId: string | null;
    spanId: string | null;
    createdAt: Date;
    updatedAt: Date;
    completedAt: Date | null;
  };
  steps: StepInfo[];
  events: EventInfo[];
  contracts: ContractInfo[];
  signals: SignalInfo[];
  children: ChildInfo[];
}

export async function inspectRun(core: EngineCore, runId: string, options: { tenantId?: string } = {}): Promise<RunDetail> {
  const tenantId = tenantOf(options.tenantId);
  if (!isUuid(runId)) throw new ValidationError('must be a UUID', { path: ['runId'] });
  const id = runId.toLowerCase();
  const t = await getRun(core.pool, tenantId, id);
  if (!t) throw new NotFoundError(`no run ${runId}`, { resource: 'run', id: runId });
  const [steps, events, contracts, signals, children] = await Promise.all([
    runSteps(core.pool, tenantId, id),
    runEvents(core.pool, tenantId, id),
    runContracts(core.pool, tenantId, id),
    runSignals(core.pool, tenantId, id),
    runChildren(core.pool, tenantId, id),
  ]);
  return {
    run: {
      runId: t.id,
      tenantId: t.tenantId,
      workflow: t.workflowName,
      version: t.workflowVersion,
      state: t.state,
      stateVersion: t.stateVersion,
      input: t.input,
      ...(t.state === 'completed' ? { output: t.output } : {}),
      ...(t.error ? { error: t.error } : {}),
      idempotencyKey: t.idempotencyKey,
      concurrencyKey: t.concurrencyKey,
      priority: t.priority,
      parentId: t.parentId,
      wakeAt: t.wakeAt,
      deadlineAt: t.deadlineAt,
      leaseOwner: t.leaseOwner,
      leaseExpiresAt: t.leaseExpiresAt,
      claimCount: t.claimCount,
      cancelRequestedAt: t.cancelRequestedAt,
      traceId: t.traceId,
      spanId: t.spanId,
      createdAt: t.createdAt,
      updatedAt: t.updatedAt,
      completedAt: t.completedAt,
    },
    steps: steps.map((s) => ({ ...s, durationMs: s.completedAt ? s.completedAt.getTime() - (s.reservedAt ?? s.createdAt).getTime() : null })),
    events,
    contracts,
    signals,
    children,
  };
}

export interface EngineStatsReport {
  tenantId: string;
  /** The tenant's runs by (workflow, version, state). */
  runs: RunsByVersion[];
  /** (workflow, version) pairs with runs a worker must move on, served by no live worker. */
  unserved: UnservedPair[];
  /** Worker rows (engine-wide: a worker serves every tenant), live ones first. */
  workers: WorkerRecord[];
  /** Runs that finished since `since`: failed / (completed + failed), or null when none did. */
  failureRatio: number | null;
  finished: { completed: number; failed: number; cancelled: number };
  contracts: ContractStatsReport;
  since: Date;
}

export async function engineStats(core: EngineCore, options: { tenantId?: string; since?: Date } = {}): Promise<EngineStatsReport> {
  const tenantId = tenantOf(options.tenantId);
  const since = options.since ?? new Date(Date.now() - 3_600_000);
  if (!(since instanceof Date) || Number.isNaN(since.getTime())) throw new ValidationError('must be a valid Date', { path: ['since'] });
  const [runs, unserved, workers, contracts, finished] = await Promise.all([
    countRuns(core.pool, tenantId),
    unservedPairs(core.pool, tenantId),
    listWorkers(core.pool),
    new ContractStats(core.pool).stats({ since, tenantId }),
    core.pool
      .query<{ completed: number; failed: number; cancelled: number }>(
        `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed, count(*) FILTER (WHERE state = 'failed')::int AS failed,
                count(*) FILTER (WHERE state = 'cancelled')::int AS cancelled
           FROM ratchet.tasks WHERE tenant_id = $1 AND state IN ('completed', 'failed', 'cancelled') AND completed_at >= $2`,
        [tenantId, since],
      )
      .then((r) => r.rows[0]!),
  ]);
  const settled = finished.completed + finished.failed;
  return { tenantId, runs, unserved, workers, failureRatio: settled === 0 ? null : finished.failed / settled, finished, contracts, since };
}
