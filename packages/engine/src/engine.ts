/**
 * `createEngine`: the durable runtime's entry point.
 *
 * @example
 * ```ts
 * import { createEngine, embedded } from '@ratchet/engine';
 * const engine = await createEngine({ database: embedded({ dataDir: '.ratchet/postgres' }), workflows: [greet] });
 * await engine.migrate();
 * const { runId, state, output } = await engine.run(greet, { name: 'Ada' });   // inline, durable
 * const worker = engine.worker({ concurrency: 8 });
 * await worker.start();
 * const run = await engine.client.start(greet, { name: 'Grace' });
 * console.log(await run.result());
 * await worker.stop();
 * await engine.close();
 * ```
 */
import type pg from 'pg';
import { parseDuration, ValidationError, type Duration, type SerializedError, type Workflow, type WorkflowOutput, type WorkflowRawInput } from '@ratchet/sdk';
import { openDatabase, type Database, type DatabaseOption } from './store/database.js';
import { checkSchema, migrateSchema, type MigrationStatus } from './store/migrate.js';
import { createLeasedTask, getTask } from './store/tasks.js';
import type { TaskState } from './schema/index.js';
import { Client, type StartOptions } from './client/client.js';
import { existingRun, newTaskFor } from './client/start.js';
import { newOwnerId, Registry, type EngineCore } from './core.js';
import { LocalHub } from './local.js';
import { Execution } from './runtime/execution.js';
import { LeaseKeeper } from './worker/lease.js';
import { Listener } from './worker/listener.js';
import { RunningExecutions } from './worker/running.js';
import { ConcurrencyLimits } from './concurrency.js';
import { Tenants, type PurgeHook } from './tenants/tenants.js';
import { makeRedaction, type Redactor } from './redact.js';
import { Worker, type WorkerOptions } from './worker/worker.js';
import { Relay, type RelayOptions } from './relay/relay.js';
import type { FaultHooks } from './faults.js';
import type { PgTable } from 'drizzle-orm/pg-core';
import type { Action, Check } from '@ratchet/sdk';
import { ContractRegistry } from './contracts/registry.js';
import { ContractStats, type ContractStatsReport } from './contracts/stats.js';
import { Schedules } from './schedules/schedules.js';
import { Retention } from './retention/retention.js';
import type { Instrumentation } from './instrumentation.js';
import { engineStats, type EngineStatsReport } from './client/inspect.js';

export interface EngineOptions {
  /** A Postgres URL, a `pg.Pool` (left open on close), or `embedded({ dataDir })`. Default: `embedded()`. */
  database?: DatabaseOption;
  /** The workflows this process can execute (workers claim only these name/version pairs). */
  workflows?: readonly Workflow<any, any, any>[];
  /** Connections in the engine's pool (ignored for a caller's pool). Default 10; give workers concurrency + 3. */
  poolSize?: number;
  /** Lease length of runs this process executes. Default 30 s; renewed every third of it. */
  leaseMs?: number;
  /** Default timeout of one effect attempt. Default 5 min. */
  effectTimeout?: Duration;
  /** After an in-flight effect's deadline, the wait before it may be attempted again. Default 5 s. */
  effectMargin?: Duration;
  /** The commit whitelist: actions contract operations may name. */
  actions?: readonly Action<any, any, any>[];
  /** Custom dependency predicates (`{ kind: 'check' }`). */
  checks?: readonly Check<any, any>[];
  /** Application tables (drizzle) that `exists` / `notExists` dependencies may name. */
  contractTables?: readonly PgTable[];
  /** Samples `ctx.infer` takes at most when answers fail the schema. Default 3. */
  maxSamples?: number;
  /** Store prompts with infer records. Default false: only their SHA-256 is stored. */
  recordPrompts?: boolean;
  /**
   * How many runs of a concurrency key may run at once, by key pattern: an exact key, or a
   * pattern with `*` (the longest matching pattern wins). Default 1 for every key. Resolved when
   * a run starts and stored with it.
   */
  concurrencyLimits?: Readonly<Record<string, number>>;
  /** Application tables' share of `engine.tenants.purge`: each deletes a batch of the tenant's rows (docs/tenancy.md). */
  purgeHooks?: readonly PurgeHook[];
  /**
   * Runs after the default redaction of every stored error and event payload (secret-named
   * fields, bearer tokens and key-shaped strings replaced, sizes capped; redact.ts); returns what
   * to store. Default: the defaults only.
   */
  redact?: Redactor;
  /** Claims without progress before a run is parked as a poison pill. Default 10. */
  maxClaims?: number;
  /**
   * During replay, how long code may take to reach the next recorded call while it already made
   * a later one, before the run is parked as nondeterministic. Default 5 s. Workflow code should
   * await only ctx calls; do other I/O inside steps.
   */
  replayStallMs?: number;
  /** Recorded on events, for audits of which policy moved a run. */
  policyVersion?: string;
  /**
   * Hooks around segments and steps (see @ratchet/otel). Default: the hooks registered
   * process-wide (`ratchetInstrumentation()` registers itself when enabled); `false`: none.
   */
  instrumentation?: Instrumentation | false;
  /** Called with errors the engine survives (a dropped connection, a failed renewal). Default: ignored. */
  onError?: (error: unknown) => void;
  /** Named fault-injection points, for tests (see `faults.ts`). */
  faults?: FaultHooks;
}

export interface RunResult<O = unknown> {
  runId: string;
  state: TaskState;
  output?: O;
  error?: SerializedError;
}

export interface Engine {
  /** Applies pending migrations under an advisory lock; safe to race. Resolves to how many were applied. */
  migrate(): Promise<number>;
  /** Verifies the database has every migration this code needs (what a worker does at start). */
  checkSchema(): Promise<MigrationStatus>;
  /**
   * The direct path: inserts the run already leased to this process and executes it inline
   * until it completes or suspends. A run that already holds the idempotency key is returned,
   * not executed. If this process dies, the lease expires and any worker resumes the run.
   * A key whose run retention removed (its tombstone still lives) throws RunExpiredError with
   * the run's id and outcome.
   */
  run<W extends Workflow<any, any, any>>(wf: W, input: WorkflowRawInput<W>, options?: Pick<StartOptions, 'tenantId' | 'idempotencyKey' | 'runId'>): Promise<RunResult<WorkflowOutput<W>>>;
  readonly client: Client;
  /**
   * What an operator watches (`ratchet stats`): the tenant's runs by state and version, the
   * (workflow, version) pairs with runs but no live worker, the workers, the failure ratio of runs
   * finished since `since` (default: the last hour) and contract health.
   */
  stats(options?: { tenantId?: string; since?: Date }): Promise<EngineStatsReport>;
  /** Operator metrics of sealed contracts. */
  readonly contracts: { stats(options?: { since?: Date; tenantId?: string }): Promise<ContractStatsReport> };
  /** Cron schedules that start runs, each slot exactly once (every started worker ticks them). */
  readonly schedules: Schedules;
  /** Removes finished runs after a while, keeping their keys as tombstones: `run(…)`, `schedule(…)` (docs/retention.md). */
  readonly retention: Retention;
  /** Tenant-wide operations: `purge(tenantId)`, `sessionProof(tenantId)` for the row-level-security role. */
  readonly tenants: Tenants;
  /** A worker for the engine's workflows; `start()` it. */
  worker(options?: WorkerOptions): Worker;
  /** An outbox relay that publishes `ctx.emit` and contract messages at least once; `start()` it. */
  relay(options: RelayOptions): Relay;
  /** The pool the engine uses (for the application's own queries in the same database). */
  readonly pool: pg.Pool;
  /** Stops the engine's workers and relays, ends its connections, and stops an embedded server this process started. */
  close(): Promise<void>;
}

export async function createEngine(options: EngineOptions = {}): Promise<Engine> {
  const registry = new Registry(options.workflows ?? []);
  const leaseMs = options.leaseMs ?? 30_000;
  if (!Number.isInteger(leaseMs) || leaseMs < 100) throw new ValidationError('must be an integer of at least 100 ms', { path: ['leaseMs'] });
  const maxClaims = options.maxClaims ?? 10;
  if (!Number.isInteger(maxClaims) || maxClaims < 1) throw new ValidationError('must be a positive integer', { path: ['maxClaims'] });
  const runtime = {
    effectTimeoutMs: parseDuration(options.effectTimeout ?? '5m', 'effectTimeout'),
    effectMarginMs: parseDuration(options.effectMargin ?? '5s', 'effectMargin'),
    inMemoryWaitMs: 1_000,
    replayStallMs: options.replayStallMs ?? 5_000,
    maxSamples: options.maxSamples ?? 3,
    recordPrompts: options.recordPrompts === true,
    policyVersion: options.policyVersion ?? null,
    redaction: makeRedaction(options.redact),
  };
  if (!Number.isInteger(runtime.maxSamples) || runtime.maxSamples < 1 || runtime.maxSamples > 100) {
    throw new ValidationError('must be an integer from 1 to 100', { path: ['maxSamples'] });
  }
  const contracts = new ContractRegistry({
    ...(options.actions ? { actions: options.actions } : {}),
    ...(options.checks ? { checks: options.checks } : {}),
    ...(options.contractTables ? { contractTables: options.contractTables } : {}),
  });
  const limits = new ConcurrencyLimits(options.concurrencyLimits);
  const database: Database = await openDatabase(options.database, options.poolSize);
  const onError = options.onError ?? (() => {});
  const listener = new Listener(database.pool, onError);
  const owner = newOwnerId('engine');
  const core: EngineCore = {
    pool: database.pool,
    registry,
    contracts,
    runtime,
    leaseMs,
    maxClaims,
    listener,
    running: new RunningExecutions(listener),
    local: new LocalHub(owner),
    limits,
    faults: options.faults,
    instrumentation: options.instrumentation,
    onError,
  };
  const leases = new LeaseKeeper(core.pool, owner, leaseMs, onError, core.faults);
  const client = new Client(core, owner);
  const workers = new Set<Worker>();
  const relays = new Set<Relay>();
  let closed: Promise<void> | undefined;
  const retention = new Retention(core.pool, { faults: core.faults, onError });

  return {
    pool: core.pool,
    client,
    contracts: new ContractStats(core.pool),
    stats: (statsOptions) => engineStats(core, statsOptions),
    schedules: new Schedules(core, owner),
    retention,
    tenants: new Tenants(core.pool, owner, options.purgeHooks ?? [], onError),
    migrate: () => migrateSchema(core.pool),
    checkSchema: () => checkSchema(core.pool),
    worker(workerOptions) {
      const worker = new Worker(core, workerOptions);
      workers.add(worker);
      return worker;
    },
    relay(relayOptions) {
      const relay = new Relay(core, relayOptions);
      relays.add(relay);
      return relay;
    },
    async run(wf, input, runOptions = {}) {
      const task = newTaskFor(wf, input, runOptions, owner, runtime.policyVersion);
      registry.add(wf);
      // Signals and cancel requests reach the run while it executes here (subscribed once).
      await core.running.listen().catch(onError);
      const row = await createLeasedTask(core.pool, task, owner, leaseMs);
      const claimedLocalAt = Date.now();
      if (!row) {
        const holder = await existingRun(core, task);
        // Retention removed that run: its outcome is known, its output is not (docs/retention.md).
        if ('expired' in holder) throw holder.expired;
        const existing = holder.task;
        return resultOf(existing.id, existing.state, existing.output, existing.error);
      }
      const execution = new Execution(
        { pool: core.pool, workflow: wf, task: row, owner, dbNow: row.createdAt, claimedLocalAt, leases, options: runtime, contracts, faults: core.faults, instrumentation: core.instrumentation, onError, running: core.running },
        [],
      );
      const outcome = await execution.execute();
      if (outcome.state === 'lost') {
        const now = await getTask(core.pool, task.tenantId, task.id);
        return resultOf(task.id, now?.state ?? 'running', now?.output, now?.error ?? null);
      }
      return resultOf(task.id, outcome.state, 'output' in outcome ? outcome.output : undefined, 'error' in outcome ? outcome.error : null);
    },
    close: () =>
      (closed ??= (async () => {
        await Promise.all([...workers].map((w) => w.stop()));
        await Promise.all([...relays].map((r) => r.stop()));
        await retention.stopAll();
        await core.listener.close();
        await database.close();
      })()),
  };
}

function resultOf<O>(runId: string, state: TaskState, output: unknown, error: SerializedError | null): RunResult<O> {
  return {
    runId,
    state,
    ...(state === 'completed' ? { output: output as O } : {}),
    ...(error ? { error } : {}),
  };
}
