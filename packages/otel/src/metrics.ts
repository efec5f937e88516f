/**
 * Ratchet's metrics. Two sources:
 *
 * - Recorded by the hooks in this process, as work happens: GenAI client operation duration and
 *   token usage per model call (the conventions' histograms and buckets), segment duration by
 *   outcome, runs settled by state, and seal → commit latency per committed contract.
 * - Observed from the database at each collection (`observe`), because they are facts of the
 *   whole cluster, not of one process: runs by state (the states a run can still leave:
 *   pending, running, sleeping, waiting, parked) and the sealed-contract backlog with the age of
 *   its oldest contract. One statement per collection; call `observe` in ONE process per
 *   database (a monitor, or the scheduler's process), or the gauges are reported once per process.
 */
import type { Attributes, BatchObservableResult, Counter, Histogram, Meter, ObservableGauge } from '@opentelemetry/api';
import {
  GEN_AI_DURATION_BUCKETS,
  GEN_AI_TOKEN_BUCKETS,
  METRIC_GEN_AI_CLIENT_OPERATION_DURATION,
  METRIC_GEN_AI_CLIENT_TOKEN_USAGE,
  METRIC_RATCHET_CONTRACTS_SEALED,
  METRIC_RATCHET_CONTRACTS_SEALED_OLDEST_AGE,
  METRIC_RATCHET_CONTRACT_SEAL_TO_COMMIT,
  METRIC_RATCHET_RUNS,
  METRIC_RATCHET_RUNS_SETTLED,
  METRIC_RATCHET_SEGMENT_DURATION,
  ATTR_RATCHET_RUN_STATE,
  ATTR_RATCHET_WORKFLOW_NAME,
} from './attributes.js';

/** What `observe` needs of an engine: its pool (a `pg.Pool` fits). */
export interface Queryable {
  query(text: string): Promise<{ rows: unknown[] }>;
}

export interface Instruments {
  readonly genAiDuration: Histogram;
  readonly genAiTokens: Histogram;
  readonly segmentDuration: Histogram;
  readonly runsSettled: Counter;
  readonly sealToCommit: Histogram;
  readonly runs: ObservableGauge;
  readonly sealedBacklog: ObservableGauge;
  readonly sealedOldestAge: ObservableGauge;
}

export function createInstruments(meter: Meter): Instruments {
  return {
    genAiDuration: meter.createHistogram(METRIC_GEN_AI_CLIENT_OPERATION_DURATION, {
      description: 'GenAI operation duration',
      unit: 's',
      advice: { explicitBucketBoundaries: GEN_AI_DURATION_BUCKETS },
    }),
    genAiTokens: meter.createHistogram(METRIC_GEN_AI_CLIENT_TOKEN_USAGE, {
      description: 'Number of input and output tokens used',
      unit: '{token}',
      advice: { explicitBucketBoundaries: GEN_AI_TOKEN_BUCKETS },
    }),
    segmentDuration: meter.createHistogram(METRIC_RATCHET_SEGMENT_DURATION, {
      description: 'Duration of one execution segment of a run (claim to suspension or settlement)',
      unit: 's',
    }),
    runsSettled: meter.createCounter(METRIC_RATCHET_RUNS_SETTLED, {
      description: 'Runs this process moved to a final or parked state',
      unit: '{run}',
    }),
    sealToCommit: meter.createHistogram(METRIC_RATCHET_CONTRACT_SEAL_TO_COMMIT, {
      description: 'Time from sealing a contract to committing it (includes waits for approval)',
      unit: 's',
    }),
    runs: meter.createObservableGauge(METRIC_RATCHET_RUNS, { description: 'Runs by state (states a run can still leave)', unit: '{run}' }),
    sealedBacklog: meter.createObservableGauge(METRIC_RATCHET_CONTRACTS_SEALED, { description: 'Contracts sealed and not yet committed or failed', unit: '{contract}' }),
    sealedOldestAge: meter.createObservableGauge(METRIC_RATCHET_CONTRACTS_SEALED_OLDEST_AGE, { description: 'Age of the oldest sealed contract', unit: 's' }),
  };
}

const OBSERVE_SQL = `
  SELECT 'runs' AS kind, workflow_name AS workflow, state, count(*)::float8 AS value
    FROM ratchet.tasks WHERE state IN ('pending', 'running', 'sleeping', 'waiting', 'parked')
   GROUP BY workflow_name, state
  UNION ALL
  SELECT 'backlog', NULL, NULL, count(*)::float8 FROM ratchet.contracts WHERE status = 'sealed'
  UNION ALL
  SELECT 'oldest', NULL, NULL, coalesce(extract(epoch FROM ratchet.now() - min(created_at)), 0)::float8
    FROM ratchet.contracts WHERE status = 'sealed'`;

/**
 * Registers the database gauges on `instruments`' meter; resolves each collection with one
 * statement on `db`. Returns a function that stops observing. A failed query reports nothing
 * for that collection (and is passed to `onError`).
 */
export function observeDatabase(meter: Meter, instruments: Instruments, db: Queryable, onError: (error: unknown) => void): () => void {
  const observables = [instruments.runs, instruments.sealedBacklog, instruments.sealedOldestAge];
  const seen = new Set<string>();
  const callback = async (result: BatchObservableResult) => {
    let rows: { kind: string; workflow: string | null; state: string | null; value: number }[];
    try {
      rows = (await db.query(OBSERVE_SQL)).rows as typeof rows;
    } catch (error) {
      onError(error);
      return;
    }
    const now = new Set<string>();
    for (const row of rows) {
      if (row.kind === 'runs') {
        const key = JSON.stringify([row.workflow, row.state]);
        now.add(key);
        seen.add(key);
        const attributes: Attributes = { [ATTR_RATCHET_WORKFLOW_NAME]: row.workflow!, [ATTR_RATCHET_RUN_STATE]: row.state! };
        result.observe(instruments.runs, row.value, attributes);
      } else if (row.kind === 'backlog') {
        result.observe(instruments.sealedBacklog, row.value);
      } else {
        result.observe(instruments.sealedOldestAge, row.value);
      }
    }
    // A state that emptied reports 0 rather than vanishing (a vanished series reads as "no data").
    for (const key of seen) {
      if (now.has(key)) continue;
      const [workflow, state] = JSON.parse(key) as [string, string];
      result.observe(instruments.runs, 0, { [ATTR_RATCHET_WORKFLOW_NAME]: workflow, [ATTR_RATCHET_RUN_STATE]: state });
    }
  };
  meter.addBatchObservableCallback(callback, observables);
  return () => meter.removeBatchObservableCallback(callback, observables);
}
