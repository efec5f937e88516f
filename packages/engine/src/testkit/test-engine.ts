/**
 * `createTestEngine()`: an engine on a fresh, migrated database with a virtual clock, and the
 * helpers a workflow test needs — run to completion, crash at a named fault point, replay.
 *
 * Database: a new database (`ratchet_test_<random>`, dropped by `close()`) on the server of
 * `adminUrl`, else of $DATABASE_URL, else on an embedded PostgreSQL in a temporary directory,
 * shared by the test engines of one process and stopped when the last one closes.
 *
 * Virtual clock: the engine's SQL time is `ratchet.now()` = statement time + `ratchet.clock.shift`
 * (schema/clock.ts). `clock.advance('1d')` moves the shift and wakes the workers and the cron
 * scheduler (NOTIFY), so sleeps, wait timeouts, retry backoffs, expired leases and cron slots come
 * due at once. Sleeps shorter than a second are waited in memory in real time, as in production.
 *
 * `runToCompletion` drives the whole database like an impatient operator: while no run is
 * pending or running, it advances the clock to the earliest `due_at` of a sleeping or waiting
 * run (or to the lease expiry of a run held by a crashed engine), until the run settles — or
 * returns the run as it is when nothing can move it (a wait without timeout, a parked run).
 *
 * `crashAt(point, …)` runs a workflow on a second engine whose fault hooks freeze it at the named
 * point for good — its execution never continues and its lease is never renewed, which is what
 * the database sees of a process killed there (the repo's chaos tests SIGKILL real
 * processes for the end-to-end proof). `runToCompletion`/`complete` then lets the lease expire on
 * the virtual clock and a worker of the test engine resumes the run.
 */
import { mkdtemp, chmod, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { parseDuration, RatchetError, type Duration, type SerializedError, type Workflow, type WorkflowOutput, type WorkflowRawInput } from '@ratchet/sdk';
import { createEngine, type Engine, type EngineOptions } from '../engine.js';
import { startEmbedded, type EmbeddedServer } from '../embedded/embedded.js';
import { migrateSchema } from '../store/migrate.js';
import type { Worker, WorkerOptions } from '../worker/worker.js';
import { FAULT_POINTS, type FaultHooks, type FaultPoint } from '../faults.js';
import type { StartOptions } from '../client/client.js';
import type { TaskState } from '../schema/index.js';
import { uuidv7 } from '../ids.js';
import { WORK_CHANNEL } from '../store/tasks.js';
import { SCHEDULES_CHANNEL } from '../store/schedules.js';
import { assertReplays, replayRun, type RecordedRun, type ReplayOptions, type ReplayReport } from './replay.js';
import type { RunDetail } from '../client/inspect.js';

export interface TestEngineOptions extends Omit<EngineOptions, 'database'> {
  /** A server URL on which to create the fresh database. Default: $DATABASE_URL, else an embedded PostgreSQL. */
  adminUrl?: string;
  /** Options of the worker the helpers start. Default: concurrency 10, pollMs 200, heartbeatMs 1000. */
  worker?: WorkerOptions;
}

export interface VirtualClock {
  /** `ratchet.now()`: the engine's current time. */
  now(): Promise<Date>;
  /** Moves time forward by `by` and wakes workers and schedulers. */
  advance(by: Duration): Promise<void>;
  /** Moves time forward to `at` (never backward). */
  advanceTo(at: Date): Promise<void>;
  /** Back to real time. */
  reset(): Promise<void>;
}

export interface SettledRun<O = unknown> {
  runId: string;
  state: TaskState;
  output?: O;
  error?: SerializedError;
}

export interface CrashedRun {
  runId: string;
  point: FaultPoint;
  stepKey?: string;
  /** The frozen engine's lease owner id (its lease expires on the virtual clock). */
  owner: string;
}

export interface TestEngine {
  readonly engine: Engine;
  /** The fresh database's URL (for a second process, or a CLI under test). */
  readonly url: string;
  readonly pool: pg.Pool;
  readonly clock: VirtualClock;
  /** The helpers' worker, started on first use. */
  worker(): Promise<Worker>;
  /** Starts a run and drives it until it settles (see the file comment). Default timeout 30 s of real time. */
  runToCompletion<W extends Workflow<any, any, any>>(wf: W, input: WorkflowRawInput<W>, options?: StartOptions & { timeout?: Duration }): Promise<SettledRun<WorkflowOutput<W>>>;
  /** Resolves when the run is in one of `states` (polling; real time), e.g. `waiting` before a test signals it. Default timeout 30 s. */
  waitForState(runId: string, states: TaskState | readonly TaskState[], options?: { tenantId?: string; timeout?: Duration }): Promise<void>;
  /** Drives an existing run until it settles, or until nothing can move it. */
  complete(runId: string, options?: { tenantId?: string; timeout?: Duration }): Promise<SettledRun>;
  /**
   * Starts `wf` on a second engine whose worker freezes for good at `point` (optionally only at
   * `stepKey`), advancing the virtual clock through its sleeps until it gets there. The test
   * engine's own worker is stopped meanwhile (so it cannot take the run) and starts again on
   * next use.
   */
  crashAt<W extends Workflow<any, any, any>>(point: FaultPoint, wf: W, input: WorkflowRawInput<W>, options?: Pick<StartOptions, 'tenantId' | 'idempotencyKey'> & { stepKey?: string }): Promise<CrashedRun>;
  /** The recorded history of a run (what `replay` reads; `ratchet show --json` prints the same). */
  history(runId: string, options?: { tenantId?: string }): Promise<RunDetail>;
  /** Replays recorded runs (histories, or ids of runs in this database) against `wf`: reports, never throws for a mismatch. */
  replay(wf: Workflow<any, any, any>, runs: readonly (string | RecordedRun | RunDetail)[], options?: ReplayOptions): Promise<ReplayReport[]>;
  /** Like `replay`, but throws NonDeterminismError naming every run the code does not replay. */
  assertReplays(wf: Workflow<any, any, any>, runs: readonly (string | RecordedRun | RunDetail)[], options?: ReplayOptions): Promise<ReplayReport[]>;
  /** Closes the engines and drops the database. */
  close(): Promise<void>;
}

let shared: { server: Promise<{ server: EmbeddedServer; root: string }>; users: number } | undefined;

async function sharedEmbedded(): Promise<{ adminUrl: string; release: () => Promise<void> }> {
  if (!shared) {
    shared = {
      users: 0,
      server: (async () => {
        const root = await mkdtemp(join(tmpdir(), 'ratchet-testkit-'));
        await chmod(root, 0o755); // PostgreSQL runs as its own user when we are root
        return { server: await startEmbedded({ dataDir: join(root, 'data') }), root };
      })(),
    };
  }
  const entry = shared;
  entry.users += 1;
  const { server } = await entry.server;
  return {
    adminUrl: server.adminUrl,
    release: async () => {
      entry.users -= 1;
      if (entry.users > 0) return;
      if (shared === entry) shared = undefined;
      const { server: s, root } = await entry.server;
      await s.release();
      await rm(root, { recursive: true, force: true });
    },
  };
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

async function admin<T>(adminUrl: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const FINAL = new Set<TaskState>(['completed', 'failed', 'cancelled']);

export async function createTestEngine(options: TestEngineOptions = {}): Promise<TestEngine> {
  const { adminUrl: givenAdmin, worker: workerOptions, ...engineOptions } = options;
  const embedded = givenAdmin ?? process.env.DATABASE_URL ? undefined : await sharedEmbedded();
  const adminUrl = givenAdmin ?? process.env.DATABASE_URL ?? embedded!.adminUrl;
  const name = `ratchet_test_${randomBytes(6).toString('hex')}`;
  await admin(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(adminUrl, name);
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  pool.on('error', () => {});
  await migrateSchema(pool);
  const engine = await createEngine({ poolSize: 20, ...engineOptions, database: url });
  let worker: Worker | undefined;
  const served = engineOptions.workflows ?? [];
  const crashedOwners = new Set<string>();
  const doomed: Engine[] = [];

  const notify = async () => {
    await pool.query(`SELECT pg_notify($1, ''), pg_notify($2, '')`, [WORK_CHANNEL, SCHEDULES_CHANNEL]);
  };
  // Virtual time passes for every process at once: the worker rows' last beats move with it, so
  // a live worker stays live (a frozen one has no row: crashAt removes it).
  const shift = async (ms: number) => {
    await pool.query(
      `WITH c AS (UPDATE ratchet.clock SET shift = shift + $1 * interval '1 millisecond' RETURNING 1)
       UPDATE ratchet.workers SET heartbeat_at = heartbeat_at + $1 * interval '1 millisecond' WHERE EXISTS (SELECT 1 FROM c)`,
      [ms],
    );
    await notify();
  };
  const clock: VirtualClock = {
    async now() {
      const { rows } = await pool.query<{ now: Date }>('SELECT ratchet.now() AS now');
      return rows[0]!.now;
    },
    async advance(by) {
      await shift(parseDuration(by, 'by'));
    },
    async advanceTo(at) {
      const { rows } = await pool.query<{ ms: number }>(`SELECT greatest(0, extract(epoch FROM $1::timestamptz - ratchet.now()) * 1000)::float8 AS ms`, [at]);
      await shift(Math.ceil(rows[0]!.ms));
    },
    async reset() {
      await pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
      await notify();
    },
  };

  const startWorker = async () => {
    if (!worker) {
      worker = engine.worker({ concurrency: 10, pollMs: 200, heartbeatMs: 1_000, ...workerOptions });
      await worker.start();
    }
    return worker;
  };

  const complete = async (runId: string, opts: { tenantId?: string; timeout?: Duration } = {}): Promise<SettledRun> => {
    await startWorker();
    const deadline = Date.now() + parseDuration(opts.timeout ?? '30s', 'timeout');
    let idleLooks = 0;
    for (;;) {
      const info = await engine.client.get(runId, opts.tenantId ? { tenantId: opts.tenantId } : {});
      if (FINAL.has(info.state)) return settledOf(info.runId, info.state, info.output, info.error);
      if (Date.now() > deadline) {
        throw new RatchetError(`run ${runId} did not settle within the test timeout (it is ${info.state})`, { code: 'TIMEOUT', runId });
      }
      const { rows } = await pool.query<{ busy: number; next: Date | null; expired: Date | null; now: Date }>(
        // Busy: a run our worker will move by itself (pending ones of workflows it serves, running
        // ones not held by a frozen engine). Pending runs of a version nobody serves never move.
        `SELECT count(*) FILTER (WHERE (state = 'pending' AND (workflow_name, workflow_version) IN (SELECT * FROM unnest($2::text[], $3::text[])))
                                   OR (state = 'running' AND NOT (lease_owner = ANY($1::text[]))))::int AS busy,
                min(due_at) FILTER (WHERE state IN ('sleeping', 'waiting')) AS next,
                min(lease_expires_at) FILTER (WHERE state = 'running' AND lease_owner = ANY($1::text[])) AS expired,
                ratchet.now() AS now
           FROM ratchet.tasks WHERE state NOT IN ('completed', 'failed', 'cancelled', 'parked')`,
        [[...crashedOwners], served.map((w) => w.name), served.map((w) => w.version)],
      );
      const r = rows[0]!;
      if (r.busy === 0) {
        const target = [r.next, r.expired].filter((d): d is Date => d !== null).sort((a, b) => a.getTime() - b.getTime())[0];
        if (target) {
          if (target.getTime() > r.now.getTime()) await clock.advanceTo(new Date(target.getTime() + 1));
          else await notify();
          idleLooks = 0;
        } else if (info.state === 'parked' || info.state === 'waiting' || ++idleLooks > 20) {
          // Nothing will move it: a wait without a timeout, a parked run. Return it as it is.
          return settledOf(info.runId, info.state, undefined, info.error);
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
  };

  const history = (runId: string, opts: { tenantId?: string } = {}) => engine.client.inspect(runId, opts);
  const histories = (runs: readonly (string | RecordedRun | RunDetail)[]) => Promise.all(runs.map((r) => (typeof r === 'string' ? history(r) : Promise.resolve(r))));

  return {
    engine,
    url,
    pool,
    clock,
    worker: startWorker,
    async runToCompletion(wf, input, opts = {}) {
      const { timeout, ...start } = opts;
      const run = await engine.client.start(wf, input, start);
      return complete(run.runId, { ...(start.tenantId ? { tenantId: start.tenantId } : {}), ...(timeout !== undefined ? { timeout } : {}) }) as never;
    },
    complete,
    async crashAt(point, wf, input, opts = {}) {
      if (!(FAULT_POINTS as readonly string[]).includes(point)) throw new RatchetError(`unknown fault point ${point}; one of ${FAULT_POINTS.join(', ')}`, { code: 'VALIDATION' });
      const { stepKey, ...startOptions } = opts;
      const runId = uuidv7();
      let frozen = false;
      let reached: (value: { stepKey?: string }) => void = () => {};
      const crashed = new Promise<{ stepKey?: string }>((resolve) => (reached = resolve));
      const freeze = () => new Promise<void>(() => {});
      const hooks: FaultHooks = {};
      for (const p of FAULT_POINTS) {
        hooks[p] = (context) => {
          if (frozen) return freeze();
          if (p !== point || context.runId !== runId || (stepKey !== undefined && context.stepKey !== stepKey)) return;
          frozen = true;
          reached(context.stepKey !== undefined ? { stepKey: context.stepKey } : {});
          return freeze();
        };
      }
      // Only the doomed worker may take the run: ours stops until the crash is done.
      if (worker) {
        await worker.stop();
        worker = undefined;
      }
      const other = await createEngine({ ...engineOptions, workflows: [wf], database: url, poolSize: 6, faults: hooks, instrumentation: false, onError: () => {} });
      doomed.push(other);
      // A grace period that never ends: stopping it later ends its claims but never hands the frozen run back.
      const doomedWorker = other.worker({ concurrency: 1, pollMs: 100, heartbeatMs: 2_147_483_647, shutdownGraceMs: 2_147_483_647 });
      await other.client.start(wf, input, { ...startOptions, runId });
      await doomedWorker.start();
      const deadline = Date.now() + 30_000;
      for (;;) {
        const outcome = await Promise.race([crashed, new Promise<null>((r) => setTimeout(() => r(null), 20))]);
        if (outcome) {
          void doomedWorker.stop();
          crashedOwners.add(doomedWorker.workerId);
          // A dead process beats no more: its row goes, as the sweep would remove it.
          await pool.query(`DELETE FROM ratchet.workers WHERE id = $1`, [doomedWorker.workerId]);
          return { runId, point, ...outcome, owner: doomedWorker.workerId };
        }
        const run = await other.client.get(runId, startOptions.tenantId ? { tenantId: startOptions.tenantId } : {});
        if (FINAL.has(run.state) || run.state === 'parked' || Date.now() > deadline) {
          void doomedWorker.stop();
          throw new RatchetError(`the run did not reach fault point ${point}${stepKey ? ` at ${stepKey}` : ''} (it is ${run.state})`, { code: 'FAULT_NOT_REACHED', runId });
        }
        const { rows } = await pool.query<{ dueAt: Date | null; now: Date }>(`SELECT due_at AS "dueAt", ratchet.now() AS now FROM ratchet.tasks WHERE id = $1 AND state IN ('sleeping', 'waiting')`, [runId]);
        const due = rows[0]?.dueAt;
        if (due && due.getTime() > rows[0]!.now.getTime()) await clock.advanceTo(new Date(due.getTime() + 1));
      }
    },
    async waitForState(runId, states, opts = {}) {
      const wanted = typeof states === 'string' ? [states] : states;
      const deadline = Date.now() + parseDuration(opts.timeout ?? '30s', 'timeout');
      for (;;) {
        const run = await engine.client.get(runId, opts.tenantId ? { tenantId: opts.tenantId } : {});
        if (wanted.includes(run.state)) return;
        if (Date.now() > deadline) throw new RatchetError(`run ${runId} is ${run.state}, not ${wanted.join(' or ')}, after the test timeout`, { code: 'TIMEOUT', runId });
        await new Promise((r) => setTimeout(r, 15));
      }
    },
    history,
    async replay(wf, runs, replayOptions) {
      const all = await histories(runs);
      const reports: ReplayReport[] = [];
      for (const h of all) reports.push(await replayRun(wf, h, replayOptions));
      return reports;
    },
    async assertReplays(wf, runs, replayOptions) {
      return assertReplays(wf, await histories(runs), replayOptions);
    },
    async close() {
      await engine.close();
      // A frozen engine never finishes its run: end what can be ended, without waiting for it.
      for (const d of doomed) void Promise.race([d.close(), new Promise((r) => setTimeout(r, 500))]).catch(() => {});
      await pool.end();
      await admin(adminUrl, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
      await embedded?.release();
    },
  };
}

function settledOf<O>(runId: string, state: TaskState, output: unknown, error: SerializedError | undefined): SettledRun<O> {
  return { runId, state, ...(state === 'completed' ? { output: output as O } : {}), ...(error ? { error } : {}) };
}
