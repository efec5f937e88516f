/**
 * Scale: does Ratchet stay fast with a million finished runs, do sleeping runs cost a worker
 * memory, and where does PostgreSQL become the limit as worker processes are added?
 *
 *   pnpm --filter @ratchet/bench exec tsx scale.ts [--preload 1000000] [--sleepers 10000] [--out ../docs/scale.md]
 *     (from the repo root; --out is relative to bench/, or absolute)
 *   other options: [--runs 300] [--tenants 1000] [--drain 2000] [--workers 1,2,4] [--repeat 2]
 *   DATABASE_URL=postgres://… (a server with pg_stat_statements preloaded; Postgres CPU is then not measured)
 *
 * 1. Throughput with N finished runs: the queue path (client.start → worker, concurrency 8 →
 *    run.result()) and the direct path (engine.run), `--runs` runs × 5 trivial steps, 8 in flight,
 *    each measured `--repeat` (2) times on the empty database; then N finished runs are preloaded (each with 5
 *    operations and 2 events, over `--tenants` tenants, in bulk INSERT … SELECT generate_series
 *    with every constraint enforced), VACUUM ANALYZE, and both paths are measured again.
 *    Gate (issue 5): the better preloaded measurement within 10 % of the better empty one.
 * 2. Sleepers: a worker process (scale-worker.ts, concurrency 50) runs `--sleepers` runs that
 *    step once and sleep an hour; its heap and RSS after gc, before and after, are compared.
 *    Gate: no growth beyond the baseline (< 10 MB of heap).
 * 3. Worker processes: `--drain` queued runs drained by 1, 2 and 4 worker processes (concurrency 8
 *    each), with PostgreSQL's and the workers' CPU read from /proc.
 *
 * Every phase runs on the same database, one after the other; the machine is noisy, so each
 * throughput measurement is taken `--repeat` times, all are reported and the best one counts, and the
 * CPU that other processes used meanwhile is reported next to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, loadavg, release as kernelRelease, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { postgresCpuMs } from './proc.js';
import pg from 'pg';
import { createEngine, startEmbedded, stopEmbedded, DEFAULT_TENANT_ID, type Engine, type EmbeddedServer } from '@ratchet/engine';
import { sleeper, trivial, type Kind } from './scale-worker.js';

const { values: args } = parseArgs({
  options: {
    preload: { type: 'string', default: '1000000' },
    sleepers: { type: 'string', default: '10000' },
    out: { type: 'string' },
    runs: { type: 'string', default: '300' },
    tenants: { type: 'string', default: '1000' },
    drain: { type: 'string', default: '2000' },
    workers: { type: 'string', default: '1,2,4' },
    repeat: { type: 'string', default: '2' },
  },
});
const PRELOAD = positive(args.preload, 'preload');
const SLEEPERS = positive(args.sleepers, 'sleepers');
const RUNS = positive(args.runs, 'runs');
const TENANTS = positive(args.tenants, 'tenants');
const DRAIN = positive(args.drain, 'drain');
const WORKER_COUNTS = args.workers.split(',').map((w) => positive(w, 'workers'));
const REPEAT = positive(args.repeat, 'repeat');
const K = 5; // steps per run
const C = 8; // runs in flight, and each worker's concurrency
const SLEEPER_CONCURRENCY = 50;
const WARM_SLEEPERS = 200;
const PRELOAD_BATCH = 25_000;
const CONTROL_DB = 'ratchet_scale_control';
const BENCH_DIR = dirname(fileURLToPath(import.meta.url));
const COMMAND = `pnpm --filter @ratchet/bench exec tsx scale.ts ${process.argv.slice(2).join(' ')}`.trim();

const children = new Set<ChildProcess>();
/** Engine statements seen through the pool: their text, for EXPLAIN of exactly what the engine runs. */
const capturedSql = new Map<string, string>();
let server: EmbeddedServer | undefined;
let dataRoot: string | undefined;
let url = process.env.DATABASE_URL;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    for (const child of children) child.kill('SIGKILL');
    process.exit(130); // the embedded handle's exit hook stops the server this process started
  });
}

if (!url) {
  dataRoot = await mkdtemp(join(tmpdir(), 'ratchet-scale-'));
  await chmod(dataRoot, 0o755); // the server runs as `postgres` when we are root
  server = await startEmbedded({
    dataDir: join(dataRoot, 'data'),
    database: 'scale',
    settings: { shared_preload_libraries: 'pg_stat_statements', max_connections: '200' },
  });
  url = server.url;
}

const admin = new pg.Pool({ connectionString: url, max: 3 });
admin.on('error', () => {});
let report = '';
try {
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  // WAL record statistics per measurement (full-page images, B-tree splits); optional.
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect').catch((error: unknown) => log(`no pg_walinspect: ${(error as Error).message}`));
  const facts = await machineFacts();
  log(`PostgreSQL ${facts.postgres}; ${facts.cores} cores; load ${facts.load}`);
  const migrator = await createEngine({ database: url, workflows: [] });
  try {
    await migrator.migrate();
  } finally {
    await migrator.close();
  }

  const throughput = await partThroughput();
  const sleepers = await partSleepers();
  const processes = await partProcesses();
  report = render(facts, throughput, sleepers, processes);
} finally {
  await killChildren();
  await admin.end().catch(() => {});
  if (server) {
    await server.release().catch((error: unknown) => log(`release: ${String(error)}`));
    await stopEmbedded(server.dataDir).catch(() => false); // whatever a killed child's backend kept alive
  }
  if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
}

console.log(`\n${report}`);
if (args.out) {
  // pnpm exec runs inside bench/: a relative --out is relative to bench/.
  const out = resolve(BENCH_DIR, args.out);
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${report}\n`);
  console.log(`written to ${out}`);
}

// =============================================================================================
// 1. Throughput, empty and with N finished runs
// =============================================================================================

interface Phase {
  label: string;
  runsPerSec: number;
  p50: number;
  p99: number;
  /** Runs whose start → result took 900 ms or more (the result poll's safety net, not a notification). */
  slow: number;
  statementsPerRun: number;
  pgCpuMsPerRun: number;
  nodeCpuMsPerRun: number;
  otherCores: number;
  kernelCores: number;
  stealCores: number;
  otherTop: string;
  walBytesPerRun: number;
  wal: WalRecords | undefined;
  waits: Waits;
  statements: StatementDelta[];
}

interface Preload {
  seconds: number;
  vacuumSeconds: number;
  checkpointSeconds: number;
  walBytes: number;
  idFunction: string;
  tables: { name: string; rows: number; heap: number; indexes: number; total: number; pages: number }[];
  databaseBytes: number;
}

interface ThroughputPart {
  empty: { queue: Phase[]; direct: Phase[] };
  loaded: { queue: Phase[]; direct: Phase[] };
  /** An empty database on the same server, measured alternately with the preloaded one: the same moment's machine. */
  control: { queue: Phase[]; direct: Phase[] } | undefined;
  preload: Preload;
  plans: { label: string; empty: string; loaded: string }[];
  placement: Placement[];
}

/** Where the rows the measured runs wrote after the preload went in each heap. */
interface Placement {
  table: string;
  rows: number;
  pages: number;
  /** Rows placed in pages that existed when the preload ended (free space the preload left). */
  rowsInOldPages: number;
  oldPages: number;
  firstBlock: number;
  lastBlock: number;
  tablePages: number;
}

async function partThroughput(): Promise<ThroughputPart> {
  log('1. throughput on the empty database');
  // The process's first measurements run before its own code is optimised: one of each, discarded.
  await measurePath('queue', 'warm-up (discarded)');
  await measurePath('direct', 'warm-up (discarded)');
  const empty = { queue: [] as Phase[], direct: [] as Phase[] };
  for (let round = 1; round <= REPEAT; round += 1) {
    empty.queue.push(await measurePath('queue', `empty #${round}`));
    empty.direct.push(await measurePath('direct', `empty #${round}`));
  }
  const plansEmpty = await explainHotPath();

  log(`1. preloading ${PRELOAD.toLocaleString('en')} finished runs`);
  const preload = await preloadRuns();

  const loadedSince = (await admin.query('SELECT now() AS t')).rows[0].t as Date;
  const controlUrl = await createControlDatabase();
  log(`1. throughput with the preload${controlUrl ? `, alternating with an empty control database (${CONTROL_DB})` : ''}`);
  const loaded = { queue: [] as Phase[], direct: [] as Phase[] };
  const control = controlUrl ? { queue: [] as Phase[], direct: [] as Phase[] } : undefined;
  for (let round = 1; round <= REPEAT; round += 1) {
    for (const path of ['queue', 'direct'] as const) {
      // Alternating which goes first (preloaded, control; then control, preloaded; …): an order effect cancels out.
      const loadedFirst = round % 2 === 1;
      if (loadedFirst) loaded[path].push(await measurePath(path, `preloaded #${round}`));
      if (control) control[path].push(await measurePath(path, `empty control #${round}`, controlUrl));
      if (!loadedFirst) loaded[path].push(await measurePath(path, `preloaded #${round}`));
    }
  }
  if (controlUrl) await admin.query(`DROP DATABASE IF EXISTS ${CONTROL_DB} WITH (FORCE)`).catch(() => {});
  const placement: Placement[] = [];
  for (const table of ['tasks', 'operations', 'events']) {
    const preloadPages = preload.tables.find((x) => x.name === table)?.pages ?? 0;
    const { rows } = await admin.query(
      `WITH b AS (SELECT (ctid::text::point)[0]::int AS block FROM ratchet.${table} WHERE tenant_id = $1 AND created_at >= $2)
       SELECT count(*)::int AS rows, count(DISTINCT block)::int AS pages,
              count(*) FILTER (WHERE block < $3)::int AS "rowsInOldPages", count(DISTINCT block) FILTER (WHERE block < $3)::int AS "oldPages",
              coalesce(min(block), 0) AS "firstBlock", coalesce(max(block), 0) AS "lastBlock",
              (pg_relation_size('ratchet.${table}') / 8192)::int AS "tablePages"
         FROM b`,
      [DEFAULT_TENANT_ID, loadedSince, preloadPages],
    );
    placement.push({ table, ...(rows[0] as Omit<Placement, 'table'>) });
  }
  const plansLoaded = await explainHotPath();
  const plans = plansEmpty.map((p, i) => ({ label: p.label, empty: p.plan, loaded: plansLoaded[i]?.plan ?? '' }));
  return { empty, loaded, control, preload, plans, placement };
}

/** A second, empty, migrated database on the same server; undefined if this role may not create one. */
async function createControlDatabase(): Promise<string | undefined> {
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${CONTROL_DB} WITH (FORCE)`);
    await admin.query(`CREATE DATABASE ${CONTROL_DB}`);
  } catch (error) {
    log(`   no control database: ${(error as Error).message}`);
    return undefined;
  }
  const control = new URL(url!);
  control.pathname = `/${CONTROL_DB}`;
  const migrator = await createEngine({ database: control.toString(), workflows: [] });
  try {
    await migrator.migrate();
  } finally {
    await migrator.close();
  }
  return control.toString();
}

/** A pool for createEngine that records the text of the engine's named statements. */
function capturingPool(connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString, max, application_name: 'ratchet' });
  pool.on('error', () => {});
  const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
  Object.assign(pool, {
    query: (...a: unknown[]) => {
      const config = a[0] as { name?: unknown; text?: unknown } | undefined;
      if (config && typeof config === 'object' && typeof config.name === 'string' && typeof config.text === 'string' && !capturedSql.has(config.name)) {
        capturedSql.set(config.name, config.text);
      }
      return query(...a);
    },
  });
  return pool;
}

async function measurePath(path: 'queue' | 'direct', label: string, database: string = url!): Promise<Phase> {
  const pool = capturingPool(database, path === 'queue' ? C * 2 + 6 : C + 4);
  const engine = await createEngine({ database: pool, workflows: [trivial] });
  const worker = path === 'queue' ? engine.worker({ concurrency: C }) : undefined;
  try {
    await worker?.start();
    const once =
      path === 'queue'
        ? async () => {
            const run = await engine.client.start(trivial, { k: K });
            const output = await run.result({ timeout: '60s' });
            if (output !== K) throw new Error(`run ${run.runId} returned ${String(output)}`);
          }
        : async () => {
            const r = await engine.run(trivial, { k: K });
            if (r.state !== 'completed') throw new Error(`run ${r.runId} ended ${r.state}`);
          };
    // A checkpoint now, so none left over from earlier writes lands inside the measurement; then
    // the warm-up (connections, prepared statements, JIT) also pays the full-page images the
    // first writes after a checkpoint cost, and the measurement sees the steady state.
    await admin.query('CHECKPOINT');
    for (let i = 0; i < 20; i += 1) await once();
    const before = await snapshot();
    const waits = sampleWaits();
    const cpu0 = process.cpuUsage();
    const latencies: number[] = [];
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: C }, async () => {
        while (next < RUNS) {
          next += 1;
          const s = performance.now();
          await once();
          latencies.push(performance.now() - s);
        }
      }),
    );
    const elapsed = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const waited = await waits.stop();
    const after = await snapshot();
    latencies.sort((a, b) => a - b);
    const nodeMs = (cpu.user + cpu.system) / 1000;
    const pgMs = after.pgCpuMs - before.pgCpuMs;
    const statements = statementDelta(before.statements, after.statements);
    const phase: Phase = {
      label: `${path} ${label}`,
      runsPerSec: (RUNS / elapsed) * 1000,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      slow: latencies.filter((l) => l >= 900).length,
      statementsPerRun: statements.reduce((s, d) => s + d.calls, 0) / RUNS,
      pgCpuMsPerRun: pgMs / RUNS,
      nodeCpuMsPerRun: nodeMs / RUNS,
      ...otherLoad(before.cpu, after.cpu, [], elapsed),
      walBytesPerRun: (after.wal - before.wal) / RUNS,
      wal: await walRecords(before.walFlush, after.walFlush),
      waits: waited,
      statements,
    };
    log(`   ${phase.label}: ${phase.runsPerSec.toFixed(1)} runs/s, p50 ${phase.p50.toFixed(1)} ms, p99 ${phase.p99.toFixed(0)} ms (${phase.slow} ≥ 900 ms), ${noise(phase)}`);
    return phase;
  } finally {
    await worker?.stop();
    await engine.close();
    await pool.end();
  }
}

/** N finished runs, each a task (completed, state_version 2), 5 step operations and 2 events. */
async function preloadRuns(): Promise<Preload> {
  // PostgreSQL 18 makes time-ordered UUIDv7 ids (as the engine does), here dated at each run's creation.
  const hasV7 = (await admin.query(`SELECT to_regprocedure('uuidv7(interval)') IS NOT NULL AS ok`)).rows[0].ok as boolean;
  const id = (at: string) => (hasV7 ? `uuidv7(${at} - now())` : 'gen_random_uuid()');
  const sql = `
    WITH s AS (
      SELECT i,
             -- tenant 0 is the default tenant, where the measured runs go: it holds N/tenants runs too
             ('00000000-0000-0000-0000-' || lpad(to_hex(i % $4), 12, '0'))::uuid AS tenant_id,
             now() - interval '30 days' + (i::float8 / $3) * interval '30 days' AS created_at,
             jsonb_build_object('k', 5, 'order', i) AS input
        FROM generate_series($1::int, $2::int) AS i
    ), t AS (
      INSERT INTO ratchet.tasks (tenant_id, id, workflow_name, workflow_version, state, state_version, due_at, wake_at,
                                 lease_owner, lease_expires_at, claim_count, idempotency_key, input, input_hash, output,
                                 created_at, updated_at, completed_at)
      SELECT s.tenant_id, ${id('s.created_at')}, $5, $6, 'completed', 2, NULL, NULL, NULL, NULL, 0,
             CASE WHEN s.i % 10 = 0 THEN 'order-' || s.i END,
             s.input, encode(sha256(convert_to(s.input::text, 'UTF8')), 'hex'), '5'::jsonb,
             s.created_at, s.created_at + interval '9 ms', s.created_at + interval '9 ms'
        FROM s
      RETURNING tenant_id, id, input_hash, created_at
    ), o AS (
      INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state, attempt, result,
                                      created_at, completed_at)
      SELECT t.tenant_id, ${id(`t.created_at + n * interval '1 ms'`)}, t.id, 's', 's#' || n, n, 'step', 'succeeded', 1,
             to_jsonb(n), t.created_at + n * interval '1 ms', t.created_at + n * interval '1 ms'
        FROM t CROSS JOIN generate_series(1, ${K}) AS n
    ), e AS (
      INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type, actor_id, payload, created_at)
      SELECT t.tenant_id, t.id, v.seq, v.event_type, 'engine:preload',
             CASE v.seq WHEN 1 THEN jsonb_build_object('inputHash', t.input_hash, 'inputBytes', 20) END,
             t.created_at + (v.seq - 1) * interval '9 ms'
        FROM t CROSS JOIN (VALUES (1, 'started'), (2, 'completed')) AS v(seq, event_type)
    )
    SELECT count(*)::int AS n FROM t`;
  const wal0 = await walLsn();
  const t0 = performance.now();
  let done = 0;
  for (let lo = 1; lo <= PRELOAD; lo += PRELOAD_BATCH) {
    const hi = Math.min(PRELOAD, lo + PRELOAD_BATCH - 1);
    const { rows } = await admin.query(sql, [lo, hi, PRELOAD, TENANTS, trivial.name, trivial.version]);
    done += rows[0].n as number;
    if (done % 200_000 < PRELOAD_BATCH || done === PRELOAD) {
      log(`   ${done.toLocaleString('en')} runs in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  const walBytes = (await walLsn()) - wal0;
  let t = performance.now();
  await admin.query('VACUUM ANALYZE ratchet.tasks, ratchet.operations, ratchet.events');
  const vacuumSeconds = (performance.now() - t) / 1000;
  t = performance.now();
  await admin.query('CHECKPOINT');
  const checkpointSeconds = (performance.now() - t) / 1000;
  const { rows: tables } = await admin.query(`
    SELECT c.relname AS name, c.reltuples::float8 AS rows, pg_table_size(c.oid)::float8 AS heap,
           pg_indexes_size(c.oid)::float8 AS indexes, pg_total_relation_size(c.oid)::float8 AS total,
           (pg_relation_size(c.oid) / 8192)::float8 AS pages
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'ratchet' AND c.relkind = 'r' AND c.relname IN ('tasks', 'operations', 'events')
     ORDER BY total DESC`);
  const databaseBytes = Number((await admin.query('SELECT pg_database_size(current_database())::float8 AS b')).rows[0].b);
  log(`   preload ${seconds.toFixed(0)} s, VACUUM ANALYZE ${vacuumSeconds.toFixed(0)} s, database ${mb(databaseBytes)} MB`);
  return { seconds, vacuumSeconds, checkpointSeconds, walBytes, idFunction: hasV7 ? 'uuidv7(shift)' : 'gen_random_uuid()', tables, databaseBytes };
}

/**
 * EXPLAIN (ANALYZE, BUFFERS) of the engine's own start, claim and step-checkpoint statements (as
 * captured from its pool), as generic plans (what a prepared statement settles on), inside a
 * transaction that is rolled back.
 */
async function explainHotPath(): Promise<{ label: string; plan: string }[]> {
  const client = await admin.connect();
  const out: { label: string; plan: string }[] = [];
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    const taskId = randomUUID();
    const lit = (v: unknown): string =>
      v === null ? 'NULL' : Array.isArray(v) ? client.escapeLiteral(`{${v.map((x) => `"${String(x)}"`).join(',')}}`) : client.escapeLiteral(String(v));
    const explain = async (label: string, name: string, values: unknown[]) => {
      const text = capturedSql.get(name);
      if (!text) return void out.push({ label, plan: `(statement ${name} was not seen)` });
      await client.query(`PREPARE scale_explain AS ${text}`);
      const execute = `EXECUTE scale_explain(${values.map(lit).join(', ')})`;
      // Once first, undone: the session's plan and the foreign-key triggers' plans are then cached,
      // as they are on the engine's long-lived connections.
      await client.query('SAVEPOINT warm');
      await client.query(execute);
      await client.query('ROLLBACK TO SAVEPOINT warm');
      const { rows } = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${execute}`);
      await client.query('DEALLOCATE scale_explain');
      out.push({ label, plan: rows.map((r) => r['QUERY PLAN'] as string).join('\n') });
    };
    const input = JSON.stringify({ k: K });
    await explain('start (insert pending task + event + notify)', 'ratchet_insert_pending_task', [
      DEFAULT_TENANT_ID, taskId, trivial.name, trivial.version, null, null, 0, input, 'f'.repeat(64), null, null, null, null,
      'engine:explain', JSON.stringify({ inputBytes: input.length }), null, null,
      // awaited by, notify, eager owner and lease: a plain queued start
      null, true, null, null,
    ]);
    // The run just inserted is pending and due: the claim takes it.
    await client.query(`UPDATE ratchet.tasks SET due_at = ratchet.now() - interval '1 second' WHERE tenant_id = $1 AND id = $2`, [DEFAULT_TENANT_ID, taskId]);
    await explain('claim', 'ratchet_claim_tasks', [[trivial.name], [trivial.version], C, 'worker:explain', 30_000, 10, null]);
    const { rows } = await client.query(`SELECT state_version FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2 AND lease_owner = 'worker:explain'`, [
      DEFAULT_TENANT_ID,
      taskId,
    ]);
    const version = rows[0]?.state_version ?? 2;
    await explain('list operations (replay)', 'ratchet_list_operations', [DEFAULT_TENANT_ID, taskId]);
    await explain('step checkpoint (fenced operation insert)', 'ratchet_insert_operation', [
      DEFAULT_TENANT_ID, taskId, 'worker:explain', version, randomUUID(), 's', 's#1', 1, 'step', null, null, 'succeeded', 1, null, false, null, null,
      '1', null, null, null,
    ]);
    await explain('await result (register)', 'ratchet_await_task', [DEFAULT_TENANT_ID, taskId, 'engine:explain']);
    await explain('read outcome (a settled run awaited)', 'ratchet_get_outcome', [DEFAULT_TENANT_ID, taskId]);
    await explain('transition (complete)', 'ratchet_transition_task', [
      DEFAULT_TENANT_ID, taskId, 'worker:explain', version, 'completed', 'completed', null, String(K), null, null, null, null,
      null, null, null, null,
    ]);
  } catch (error) {
    out.push({ label: 'EXPLAIN failed', plan: String((error as Error)?.message ?? error) });
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    await client.query('DEALLOCATE ALL').catch(() => {});
    client.release();
  }
  return out;
}

// =============================================================================================
// 2. Sleepers and the worker's memory
// =============================================================================================

interface Memory {
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

interface SleepersPart {
  baseline: Memory;
  after: Memory;
  settled: Memory;
  peakRssBytes: number;
  startSeconds: number;
  toSleepingSeconds: number;
  stats: Record<string, number>;
  sleeping: number;
}

async function partSleepers(): Promise<SleepersPart> {
  log(`2. ${SLEEPERS.toLocaleString('en')} sleeping runs and the worker's memory`);
  const engine = await createEngine({ database: url!, workflows: [sleeper], poolSize: 20 });
  let child: WorkerHandle | undefined;
  try {
    child = await spawnWorker('sleeper', SLEEPER_CONCURRENCY);
    await child.request('go');
    // Warm-up: the worker executes and suspends some sleepers before the baseline is taken.
    await startMany(WARM_SLEEPERS, (n) => engine.client.start(sleeper, { n }));
    await waitSleeping(WARM_SLEEPERS, child.pid);
    await delay(1000);
    const baseline = (await child.request('mem')).memory as Memory;
    log(`   baseline: heap ${mb(baseline.heapUsed)} MB, RSS ${mb(baseline.rss)} MB`);

    const t0 = performance.now();
    let peakRss = 0;
    const pid = child.pid;
    const sampler = setInterval(() => void rssOf(pid).then((r) => (peakRss = Math.max(peakRss, r))), 100);
    let startSeconds = 0;
    let toSleepingSeconds = 0;
    try {
      await startMany(SLEEPERS, (n) => engine.client.start(sleeper, { n: WARM_SLEEPERS + n }));
      startSeconds = (performance.now() - t0) / 1000;
      await waitSleeping(WARM_SLEEPERS + SLEEPERS, child.pid);
      toSleepingSeconds = (performance.now() - t0) / 1000;
    } finally {
      clearInterval(sampler);
    }
    const sleeping = await countSleeping();
    const after = (await child.request('mem')).memory as Memory;
    await delay(3000);
    const settledReply = await child.request('mem');
    const settled = settledReply.memory as Memory;
    log(`   ${sleeping} sleeping after ${toSleepingSeconds.toFixed(1)} s; heap ${mb(after.heapUsed)} MB, RSS ${mb(after.rss)} MB`);
    return {
      baseline,
      after,
      settled,
      peakRssBytes: peakRss,
      startSeconds,
      toSleepingSeconds,
      stats: settledReply.stats as Record<string, number>,
      sleeping,
    };
  } finally {
    await child?.stop();
    await engine.close();
  }
}

async function countSleeping(): Promise<number> {
  const { rows } = await admin.query(
    `SELECT count(*)::int AS n FROM ratchet.tasks
      WHERE workflow_name = $1 AND workflow_version = $2 AND due_at IS NOT NULL AND state = 'sleeping'`,
    [sleeper.name, sleeper.version],
  );
  return rows[0].n as number;
}

async function waitSleeping(target: number, pid: number | undefined): Promise<void> {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    if ((await countSleeping()) >= target) return;
    if (Date.now() > deadline) throw new Error(`sleepers: fewer than ${target} runs sleeping after 15 minutes`);
    if (pid !== undefined && !isAlive(pid)) throw new Error('sleepers: the worker process exited');
    await delay(100);
  }
}

// =============================================================================================
// 3. 1, 2 and 4 worker processes
// =============================================================================================

interface Drain {
  workers: number;
  round: number;
  runsPerSec: number;
  seconds: number;
  pgCpuMsPerRun: number;
  pgCores: number;
  workerCpuMsPerRun: number;
  workerCores: number;
  otherCores: number;
  kernelCores: number;
  stealCores: number;
  otherTop: string;
  waits: Waits;
  statementsPerRun: number;
  claimsPerRun: number;
  perWorker: number[];
}

async function partProcesses(): Promise<Drain[]> {
  log(`3. ${DRAIN.toLocaleString('en')} queued runs drained by ${WORKER_COUNTS.join(', ')} worker processes`);
  const engine = await createEngine({ database: url!, workflows: [trivial], poolSize: 20 });
  const drains: Drain[] = [];
  try {
    for (let round = 1; round <= REPEAT; round += 1) {
      for (const workers of WORKER_COUNTS) drains.push(await drain(engine, workers, round));
    }
  } finally {
    await engine.close();
  }
  return drains;
}

async function drain(engine: Engine, workers: number, round: number): Promise<Drain> {
  const ids: string[] = [];
  await startMany(DRAIN, async () => void ids.push((await engine.client.start(trivial, { k: K })).runId));
  const spawned = await Promise.all(Array.from({ length: workers }, () => spawnWorker('trivial', C)));
  try {
    await admin.query('CHECKPOINT');
    const before = await snapshot();
    const childCpu0 = await Promise.all(spawned.map((c) => processCpuMs(c.pid)));
    const waits = sampleWaits();
    const t0 = performance.now();
    await Promise.all(spawned.map((c) => c.request('go')));
    const deadline = Date.now() + 10 * 60_000;
    for (;;) {
      // Runs not yet finished: pending ones (tasks_pending) and running ones (tasks_due), each
      // counted through its partial index. Asked every 20 ms, a count the indexes do not cover
      // scans the million preloaded runs of this workflow: `due_at IS NOT NULL` alone stopped
      // matching tasks_due when pending runs moved to their own index (f7ff4f3), and that scan
      // then cost a core, halving the drain measured here.
      const { rows } = await admin.query(
        `SELECT ((SELECT count(*) FROM ratchet.tasks WHERE workflow_name = $1 AND workflow_version = $2 AND state = 'pending')
              + (SELECT count(*) FROM ratchet.tasks WHERE workflow_name = $1 AND workflow_version = $2 AND due_at IS NOT NULL AND state <> 'pending')
              )::int AS n`,
        [trivial.name, trivial.version],
      );
      if (rows[0].n === 0) break;
      if (Date.now() > deadline) throw new Error(`drain: ${rows[0].n} runs left after 10 minutes`);
      if (spawned.some((c) => !isAlive(c.pid))) throw new Error('drain: a worker process exited');
      await delay(20);
    }
    const seconds = (performance.now() - t0) / 1000;
    const waited = await waits.stop();
    const childCpu1 = await Promise.all(spawned.map((c) => processCpuMs(c.pid)));
    const after = await snapshot();
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ratchet.tasks WHERE tenant_id = $1 AND id = ANY($2::uuid[]) AND state = 'completed'`, [
      DEFAULT_TENANT_ID,
      ids,
    ]);
    if (rows[0].n !== DRAIN) throw new Error(`drain: ${rows[0].n} of ${DRAIN} runs completed`);
    const perWorker = (await Promise.all(spawned.map((c) => c.request('stats')))).map((r) => Number((r.stats as Record<string, number>).completed));
    const pgMs = after.pgCpuMs - before.pgCpuMs;
    const workerMs = childCpu1.reduce((s, v, i) => s + v - childCpu0[i]!, 0);
    const statements = statementDelta(before.statements, after.statements);
    const d: Drain = {
      workers,
      round,
      seconds,
      runsPerSec: DRAIN / seconds,
      pgCpuMsPerRun: pgMs / DRAIN,
      pgCores: pgMs / (seconds * 1000),
      workerCpuMsPerRun: workerMs / DRAIN,
      workerCores: workerMs / (seconds * 1000),
      ...otherLoad(before.cpu, after.cpu, spawned.map((c) => c.pid), seconds * 1000),
      waits: waited,
      statementsPerRun: statements.reduce((s, x) => s + x.calls, 0) / DRAIN,
      claimsPerRun: statements.filter((x) => x.label === 'claim').reduce((s, x) => s + x.calls, 0) / DRAIN,
      perWorker,
    };
    log(
      `   ${workers} worker(s) #${round}: ${d.runsPerSec.toFixed(1)} runs/s; Postgres ${d.pgCores.toFixed(2)} cores, workers ${d.workerCores.toFixed(2)} cores, ${noise(d)}; ${renderWaits(d.waits)}`,
    );
    log(`     per run: ${statements.slice(0, 6).map((x) => `${x.label} ${(x.calls / DRAIN).toFixed(2)} × ${(x.totalMs / Math.max(1, x.calls)).toFixed(3)} ms`).join('; ')}`);
    return d;
  } finally {
    await Promise.all(spawned.map((c) => c.stop()));
  }
}

// =============================================================================================
// Worker processes
// =============================================================================================

interface WorkerHandle {
  pid: number;
  request(command: string): Promise<Record<string, unknown>>;
  stop(): Promise<void>;
}

/** Spawns scale-worker.ts (node --expose-gc --import tsx) and waits for its warm-up. */
async function spawnWorker(kind: Kind, concurrency: number): Promise<WorkerHandle> {
  const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', join(BENCH_DIR, 'scale-worker.ts')], {
    cwd: BENCH_DIR,
    env: { ...process.env, DATABASE_URL: url, SCALE_KIND: kind, SCALE_CONCURRENCY: String(concurrency) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  children.add(child);
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  child.once('exit', () => children.delete(child));
  const waiting: { command: string; resolve: (m: Record<string, unknown>) => void; reject: (e: Error) => void }[] = [];
  child.once('exit', (code, signal) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`scale-worker ${child.pid} exited (${code ?? signal}) before answering ${w.command}`));
  });
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line) as Record<string, unknown>;
    } catch {
      process.stderr.write(`[scale-worker ${child.pid}] ${line}\n`);
      return;
    }
    const i = waiting.findIndex((w) => w.command === message.reply);
    if (i >= 0) waiting.splice(i, 1)[0]!.resolve(message);
  });
  const expect = (command: string, timeoutMs: number) =>
    new Promise<Record<string, unknown>>((res, rej) => {
      const timer = setTimeout(() => rej(new Error(`scale-worker ${child.pid}: no answer to ${command} in ${timeoutMs} ms`)), timeoutMs);
      waiting.push({
        command,
        resolve: (m) => (clearTimeout(timer), res(m)),
        reject: (e) => (clearTimeout(timer), rej(e)),
      });
    });
  const request = (command: string) => {
    const answer = expect(command, 60_000);
    child.stdin!.write(`${command}\n`);
    return answer;
  };
  await expect('ready', 60_000);
  return {
    pid: child.pid!,
    request,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        await Promise.race([request('stop').catch(() => undefined), delay(15_000)]);
        await Promise.race([exited, delay(5_000)]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      await exited;
    },
  };
}

async function killChildren(): Promise<void> {
  const all = [...children];
  for (const child of all) child.kill('SIGKILL');
  await Promise.all(all.map((child) => (child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((r) => child.once('exit', r)))));
}

/** Starts `count` runs, 100 at a time. */
async function startMany(count: number, start: (n: number) => Promise<unknown>): Promise<void> {
  for (let lo = 0; lo < count; lo += 100) {
    await Promise.all(Array.from({ length: Math.min(100, count - lo) }, (_, i) => start(lo + i)));
  }
}

// =============================================================================================
// Counters: CPU from /proc, statements from pg_stat_statements, WAL
// =============================================================================================

interface StatementDelta {
  label: string;
  calls: number;
  totalMs: number;
}

interface Snapshot {
  pgCpuMs: number;
  cpu: CpuSnapshot;
  wal: number;
  /** pg_current_wal_flush_lsn(), for pg_walinspect. */
  walFlush: string;
  statements: Map<string, { label: string; calls: number; totalMs: number }>;
}

async function snapshot(): Promise<Snapshot> {
  // Measurement queries are excluded by their text (this one reads pg_stat_statements itself).
  const { rows } = await admin.query(`
    SELECT dbid::text || ':' || queryid::text AS id, query, calls::float8 AS calls, total_exec_time::float8 AS total
      FROM pg_stat_statements
     WHERE dbid IN (SELECT oid FROM pg_database WHERE datname IN (current_database(), '${CONTROL_DB}'))
       AND query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%pg_current_wal%' AND query NOT IN ('BEGIN', 'COMMIT', 'ROLLBACK')
       AND query NOT ILIKE '%due_at IS NOT NULL AND state = %' AND query NOT ILIKE 'SELECT count(*)::int AS n FROM ratchet.tasks%'
       AND query NOT ILIKE 'CHECKPOINT%'`);
  const statements = new Map<string, { label: string; calls: number; totalMs: number }>();
  for (const r of rows) statements.set(r.id as string, { label: labelOf(r.query as string), calls: r.calls as number, totalMs: r.total as number });
  const walFlush = (await admin.query('SELECT pg_current_wal_flush_lsn()::text AS l')).rows[0].l as string;
  return { pgCpuMs: await postgresCpuMs(server?.dataDir), cpu: await cpuSnapshot(), wal: await walLsn(), walFlush, statements };
}

function statementDelta(before: Snapshot['statements'], after: Snapshot['statements']): StatementDelta[] {
  const byLabel = new Map<string, StatementDelta>();
  for (const [id, a] of after) {
    const b = before.get(id);
    const calls = a.calls - (b?.calls ?? 0);
    if (calls <= 0) continue;
    const d = byLabel.get(a.label) ?? { label: a.label, calls: 0, totalMs: 0 };
    d.calls += calls;
    d.totalMs += a.totalMs - (b?.totalMs ?? 0);
    byLabel.set(a.label, d);
  }
  return [...byLabel.values()].sort((x, y) => y.totalMs - x.totalMs);
}

/** A short name for an engine statement, from its text. */
function labelOf(query: string): string {
  const q = query.replace(/\s+/g, ' ').trim();
  const known: [RegExp, string][] = [
    [/INSERT INTO ratchet\.operations AS o/, 'step checkpoint (write operation)'],
    [/c AS MATERIALIZED/, 'claim'],
    [/^WITH t AS \( UPDATE ratchet\.tasks t SET state = /, 'transition (complete / sleep)'],
    [/INSERT INTO ratchet\.tasks AS t .*pg_notify/, 'start (insert pending task + event + notify)'],
    [/INSERT INTO ratchet\.tasks AS t /, 'direct start (insert leased task + event)'],
    [/SET awaited_by = CASE/, 'await result (register)'],
    [/min\(d\.due_at\)/, 'next due'],
    [/FROM ratchet\.operations o WHERE o\.tenant_id = \$1 AND o\.task_id = \$2 ORDER BY o\.seq/, 'list operations (replay)'],
    [/SET lease_expires_at = ratchet\.now\(\)/, 'extend leases'],
    [/FROM ratchet\.tasks t WHERE t\.tenant_id = \$1 AND t\.id = \$2$/, 'get task'],
  ];
  for (const [pattern, label] of known) if (pattern.test(q)) return label;
  return q.length > 70 ? `${q.slice(0, 70)}…` : q;
}

interface Waits {
  /** Average number of client backends in a statement (not idle), per sample. */
  busyBackends: number;
  /** Share of busy-backend samples per state: 'CPU' (active, waiting on nothing) or the wait event. */
  shares: [string, number][];
  samples: number;
  /** Autovacuum work seen during the samples (what and where). */
  autovacuum: string[];
}

/**
 * Samples pg_stat_activity every 50 ms (on its own connection) until stop(): what the database's
 * busy backends are doing — running on CPU, or waiting (on the client, a lock, the WAL flush).
 */
function sampleWaits(): { stop(): Promise<Waits> } {
  const counts = new Map<string, number>();
  const autovacuum = new Set<string>();
  let samples = 0;
  let busy = 0;
  let stopped = false;
  const client = new pg.Client({ connectionString: url });
  const loop = (async () => {
    await client.connect();
    while (!stopped) {
      const { rows } = await client.query(`
        SELECT CASE WHEN wait_event IS NULL THEN 'CPU' ELSE wait_event_type || ':' || wait_event END
                 || CASE WHEN state LIKE 'idle in transaction%' THEN ' (in transaction)' ELSE '' END AS w,
               count(*)::int AS n
          FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND datname IN (current_database(), '${CONTROL_DB}') AND pid <> pg_backend_pid() AND state <> 'idle'
         GROUP BY 1`);
      const av = await client.query(`SELECT datname || ': ' || regexp_replace(query, '^autovacuum: ', '') AS q FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND query <> ''`);
      for (const r of av.rows) autovacuum.add(r.q as string);
      samples += 1;
      for (const r of rows) {
        counts.set(r.w as string, (counts.get(r.w as string) ?? 0) + (r.n as number));
        busy += r.n as number;
      }
      await delay(50);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop.catch(() => {});
      await client.end().catch(() => {});
      const shares = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([w, n]): [string, number] => [w, busy ? n / busy : 0]);
      return { busyBackends: samples ? busy / samples : 0, shares, samples, autovacuum: [...autovacuum] };
    },
  };
}

/** Other processes · kernel · steal, in cores. */
function noise(x: { otherCores: number; kernelCores: number; stealCores: number; otherTop: string }): string {
  return `${x.otherCores.toFixed(2)}${x.otherTop ? ` (${x.otherTop})` : ''} · ${x.kernelCores.toFixed(2)} · ${x.stealCores.toFixed(2)}`;
}

function renderWaits(w: Waits, top = 4): string {
  if (!w.samples) return 'n/a';
  return `${w.busyBackends.toFixed(1)} busy: ${w.shares
    .slice(0, top)
    .map(([name, share]) => `${name} ${Math.round(share * 100)} %`)
    .join(', ')}${w.autovacuum.length ? `; autovacuum: ${w.autovacuum.join(', ')}` : ''}`;
}

interface WalRecords {
  /** Bytes of full-page images (first change of a page after a checkpoint). */
  fpiBytes: number;
  /** B-tree page splits (Btree/SPLIT_L, SPLIT_R). */
  splits: number;
  /** Record types by bytes, with counts. */
  byType: { type: string; count: number; bytes: number }[];
}

/** What the WAL between two flush LSNs consists of (pg_walinspect); undefined when unavailable. */
async function walRecords(from: string, to: string): Promise<WalRecords | undefined> {
  try {
    const { rows } = await admin.query(
      `SELECT "resource_manager/record_type" AS type, count::float8 AS count, fpi_size::float8 AS fpi, combined_size::float8 AS bytes
         FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true) WHERE count > 0`,
      [from, to],
    );
    return {
      fpiBytes: rows.reduce((sum, r) => sum + (r.fpi as number), 0),
      splits: rows.filter((r) => /^Btree\/SPLIT/.test(r.type as string)).reduce((sum, r) => sum + (r.count as number), 0),
      byType: rows
        .map((r) => ({ type: r.type as string, count: r.count as number, bytes: r.bytes as number }))
        .sort((a, b) => b.bytes - a.bytes),
    };
  } catch {
    return undefined;
  }
}

async function walLsn(): Promise<number> {
  return Number((await admin.query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS w`)).rows[0].w);
}

/** utime + stime of one process (its threads included), in ms. */
async function processCpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / 100) * 1000;
}

interface ProcessCpu {
  ppid: number;
  comm: string;
  ms: number;
}

interface CpuSnapshot {
  processes: Map<number, ProcessCpu>;
  /** Interrupt and softirq time of all cores (loopback TCP, disk completions): no process's. */
  irqMs: number;
  /** Time the hypervisor ran something else while this VM wanted a core. */
  stealMs: number;
}

/** utime + stime of every process on the machine, and the cores' interrupt time. */
async function cpuSnapshot(): Promise<CpuSnapshot> {
  const processes = new Map<number, ProcessCpu>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    processes.set(Number(entry), { ppid: Number(fields[1]), comm, ms: ((Number(fields[11]) + Number(fields[12])) / 100) * 1000 });
  }
  const [, , , , , , irq, softirq, steal] = (await readFile('/proc/stat', 'utf8')).split('\n')[0]!.trim().split(/\s+/).map(Number);
  return { processes, irqMs: (((irq ?? 0) + (softirq ?? 0)) / 100) * 1000, stealMs: ((steal ?? 0) / 100) * 1000 };
}

/**
 * CPU used during a measurement by everything that is not this benchmark: other processes
 * (`otherCores`, with the busiest named), and the kernel's threads and interrupts (`kernelCores`,
 * much of it our own loopback traffic and fsyncs). Ours: this process and its parent (tsx),
 * their children, the worker processes `workers` and theirs, the postmaster and its children.
 */
function otherLoad(
  before: CpuSnapshot,
  after: CpuSnapshot,
  workers: number[],
  elapsedMs: number,
): { otherCores: number; kernelCores: number; stealCores: number; otherTop: string } {
  const postmaster = server ? readPostmasterPidSync() : -1;
  const roots = new Set([process.pid, process.ppid, postmaster, ...workers]);
  let others = 0;
  let kernel = after.irqMs - before.irqMs;
  const byName = new Map<string, number>();
  for (const [pid, p] of after.processes) {
    const used = p.ms - (before.processes.get(pid)?.ms ?? 0);
    if (used <= 0 || roots.has(pid) || roots.has(p.ppid)) continue;
    if (pid === 2 || p.ppid === 2) {
      kernel += used;
      continue;
    }
    others += used;
    byName.set(p.comm, (byName.get(p.comm) ?? 0) + used);
  }
  const top = [...byName.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 2)
    .filter(([, ms]) => ms / elapsedMs >= 0.02)
    .map(([name, ms]) => `${name} ${(ms / elapsedMs).toFixed(2)}`)
    .join(', ');
  return { otherCores: others / elapsedMs, kernelCores: kernel / elapsedMs, stealCores: (after.stealMs - before.stealMs) / elapsedMs, otherTop: top };
}

function readPostmasterPidSync(): number {
  return Number(readFileSync(join(server!.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  return kb ? Number(kb) * 1024 : 0;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// =============================================================================================
// Report
// =============================================================================================

interface Facts {
  postgres: string;
  settings: string;
  cores: number;
  cpu: string;
  memoryGiB: number;
  kernel: string;
  load: string;
  others: string;
}

async function machineFacts(): Promise<Facts> {
  const version = (await admin.query('SHOW server_version')).rows[0].server_version as string;
  const { rows } = await admin.query(
    `SELECT name, setting, unit FROM pg_settings
      WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'max_wal_size', 'max_connections') ORDER BY name`,
  );
  const settings = rows
    .map((r) => (r.name === 'shared_buffers' ? `shared_buffers=${mb(Number(r.setting) * 8192)} MB` : `${r.name}=${r.setting}${r.unit && r.unit !== '8kB' ? r.unit : ''}`))
    .join(', ');
  // Other PostgreSQL servers and node processes on the machine: this box is shared and noisy.
  const ours = server ? Number((await readFile(join(server.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]) : -1;
  let otherPostmasters = 0;
  let otherNodes = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid || Number(entry) === ours) continue;
    const cmd = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (/\/postgres\0-D\0/.test(cmd)) otherPostmasters += 1;
    else if (/^(\S*\/)?node\0/.test(cmd)) otherNodes += 1;
  }
  return {
    postgres: version,
    settings,
    cores: cpus().length,
    cpu: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: kernelRelease(),
    load: loadavg()
      .map((l) => l.toFixed(2))
      .join(' '),
    others: `${otherPostmasters} other PostgreSQL server(s) and ${otherNodes} other node process(es) running at the start`,
  };
}

function render(facts: Facts, t: ThroughputPart, s: SleepersPart, d: Drain[]): string {
  const f = (n: number, digits = 1) => (Number.isFinite(n) ? n.toFixed(digits) : 'n/a');
  const rounds = Array.from({ length: REPEAT }, (_, i) => `#${i + 1}`).join(', ');
  const best = (phases: Phase[]) => phases.reduce((a, b) => (b.runsPerSec > a.runsPerSec ? b : a));
  const lines: string[] = [];
  const push = (...l: string[]) => lines.push(...l);

  push(
    '# Scale: a million finished runs, sleeping runs, worker processes',
    '',
    `Command (from the repo root): \`${COMMAND}\``,
    '',
    `Machine: ${facts.cores} × ${facts.cpu}, ${facts.memoryGiB} GiB, Linux ${facts.kernel}, Node ${process.version}; ` +
      `PostgreSQL ${facts.postgres}${server ? ' (embedded, its own temporary data directory)' : ' (DATABASE_URL)'}: ${facts.settings}. ` +
      `Load average at the start ${facts.load}; ${facts.others}. ` +
      `This machine is shared and noisy: each throughput number is measured ${REPEAT === 2 ? 'twice' : `${REPEAT} times`}, all are shown and the best one counts; ` +
      '"other · kernel · steal" is the CPU, in cores, that processes other than this benchmark and its PostgreSQL used during the measurement (the busiest named), ' +
      'that kernel threads and interrupts used (much of it this benchmark\'s own loopback TCP and fsyncs, counted in no process), and that the hypervisor gave to someone else (steal).',
    '',
    `Workload: ${RUNS} runs × ${K} trivial steps, ${C} in flight, the queue path with one in-process worker of concurrency ${C}; ` +
      `all runs in the default tenant. Before each measurement: CHECKPOINT, then 20 warm-up runs; one measurement of each path is run first and discarded (the process warming up). ` +
      `Written ${new Date().toISOString()}.`,
    '',
  );

  // --- 1 ---
  const p = t.preload;
  const rowsTotal = PRELOAD * (1 + K + 2);
  push(
    `## 1. Throughput with ${PRELOAD.toLocaleString('en')} finished runs`,
    '',
    `Preload: ${PRELOAD.toLocaleString('en')} completed runs of the measured workflow (\`${trivial.name}\` v${trivial.version}), each with ${K} step operations and 2 events ` +
      `(\`started\`, \`completed\`): ${rowsTotal.toLocaleString('en')} rows over ${TENANTS.toLocaleString('en')} tenants (the default tenant, where the measured runs go, holds ${Math.round(PRELOAD / TENANTS).toLocaleString('en')} of them), ` +
      `ids by \`${p.idFunction}\`, every foreign key, CHECK and unique index enforced, inserted by INSERT … SELECT generate_series in batches of ${PRELOAD_BATCH.toLocaleString('en')} runs: ` +
      `**${f(p.seconds, 0)} s** (${Math.round(rowsTotal / p.seconds).toLocaleString('en')} rows/s, ${f(p.walBytes / 2 ** 30, 2)} GiB of WAL); VACUUM ANALYZE ${f(p.vacuumSeconds, 0)} s; CHECKPOINT ${f(p.checkpointSeconds, 0)} s. ` +
      `Database size ${mb(p.databaseBytes)} MB.`,
    '',
    '| table | rows | heap MB | indexes MB | total MB (pg_total_relation_size) |',
    '|---|---:|---:|---:|---:|',
    ...p.tables.map((r) => `| ratchet.${r.name} | ${Math.round(r.rows).toLocaleString('en')} | ${mb(r.heap)} | ${mb(r.indexes)} | ${mb(r.total)} |`),
    '',
  );
  const gate = (path: 'queue' | 'direct') => {
    const e = best(t.empty[path]);
    const l = best(t.loaded[path]);
    const c = t.control ? best(t.control[path]) : undefined;
    return { e, l, c, ratio: l.runsPerSec / e.runsPerSec, controlRatio: c ? l.runsPerSec / c.runsPerSec : Number.NaN };
  };
  const gates = { queue: gate('queue'), direct: gate('direct') };
  const pathName = (path: 'queue' | 'direct') => (path === 'queue' ? 'queue (start → worker → result)' : 'direct (engine.run)');
  const runsOf = (phases: Phase[] | undefined) => (phases ? phases.map((x) => f(x.runsPerSec)).join(', ') : 'n/a');
  push(
    `| path | empty, before the preload: runs/s (${rounds}) | preloaded: runs/s (${rounds}) | empty control, alternating with preloaded: runs/s (${rounds}) | best empty | best preloaded | best control | **preloaded ÷ empty** (gate ≥ 0.90) | preloaded ÷ control |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...(['queue', 'direct'] as const).map((path) => {
      const g = gates[path];
      return `| ${pathName(path)} | ${runsOf(t.empty[path])} | ${runsOf(t.loaded[path])} | ${runsOf(t.control?.[path])} | ${f(g.e.runsPerSec)} | ${f(g.l.runsPerSec)} | ${g.c ? f(g.c.runsPerSec) : 'n/a'} | **${f(g.ratio, 3)}** ${g.ratio >= 0.9 ? 'met' : 'MISSED'} | ${f(g.controlRatio, 3)} |`;
    }),
    '',
    'The gate compares with the empty database measured before the preload, as issue 5 asks. The control is a second, empty, migrated database on the same server ' +
      `(\`${CONTROL_DB}\`), measured next to each preloaded measurement (after it in odd rounds, before it in even ones): the same machine at the same moment, so "preloaded ÷ control" separates what the million rows cost ` +
      'from the machine drifting between the first and the last measurement.',
    '',
    'Every measurement:',
    '',
    '| phase | runs/s | p50 ms | p99 ms | runs ≥ 900 ms | statements/run | WAL bytes/run | of which full-page images | B-tree splits/100 runs | Postgres CPU ms/run | Node CPU ms/run | other · kernel · steal (cores) | Postgres backends (pg_stat_activity samples) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    ...[
      ...t.empty.queue,
      ...t.empty.direct,
      ...t.loaded.queue.flatMap((x, i) => [x, ...(t.control ? [t.control.queue[i]!] : [])]),
      ...t.loaded.direct.flatMap((x, i) => [x, ...(t.control ? [t.control.direct[i]!] : [])]),
    ].map(
      (x) =>
        `| ${x.label} | ${f(x.runsPerSec)} | ${f(x.p50, 2)} | ${f(x.p99, 2)} | ${x.slow} | ${f(x.statementsPerRun, 2)} | ${f(x.walBytesPerRun, 0)} | ${x.wal ? f(x.wal.fpiBytes / RUNS, 0) : 'n/a'} | ${x.wal ? f((x.wal.splits / RUNS) * 100, 1) : 'n/a'} | ${f(x.pgCpuMsPerRun, 2)} | ${f(x.nodeCpuMsPerRun, 2)} | ${noise(x)} | ${renderWaits(x.waits)} |`,
    ),
    '',
  );
  for (const path of ['queue', 'direct'] as const) {
    const { e, l, c } = gates[path];
    const labels = [...new Set([...e.statements, ...l.statements].sort((a, b) => b.totalMs - a.totalMs).map((x) => x.label))].slice(0, 8);
    const mean = (phase: Phase | undefined, label: string) => {
      const x = phase?.statements.find((st) => st.label === label);
      return x ? x.totalMs / x.calls : Number.NaN;
    };
    const calls = (phase: Phase, label: string) => (phase.statements.find((st) => st.label === label)?.calls ?? 0) / RUNS;
    push(
      `Statements of the ${path} path in the best measurement of each kind (pg_stat_statements; mean execution time inside Postgres, ms):`,
      '',
      '| statement | calls/run | empty | preloaded | control | preloaded ÷ empty | preloaded ÷ control |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...labels.map((label) => {
        const [me, ml, mc] = [mean(e, label), mean(l, label), mean(c, label)];
        return `| ${label.replace(/\|/g, '\\|')} | ${f(calls(l, label), 2)} | ${f(me, 3)} | ${f(ml, 3)} | ${f(mc, 3)} | ${f(ml / me, 2)} | ${f(ml / mc, 2)} |`;
      }),
      '',
    );
    if (l.wal && e.wal) {
      const types = [...new Set([...l.wal.byType, ...e.wal.byType].sort((a, b) => b.bytes - a.bytes).map((x) => x.type))].slice(0, 8);
      const per = (phase: Phase | undefined, type: string) => {
        const x = phase?.wal?.byType.find((r) => r.type === type);
        return x ? `${f(x.bytes / RUNS, 0)} (${f(x.count / RUNS, 2)})` : '–';
      };
      push(
        `WAL of the ${path} path by record type (pg_walinspect), bytes per run (records per run):`,
        '',
        '| record type | empty | preloaded | control |',
        '|---|---:|---:|---:|',
        ...types.map((type) => `| ${type} | ${per(e, type)} | ${per(l, type)} | ${per(c, type)} |`),
        '',
      );
    }
  }
  push(
    'Where the rows written by the measured runs after the preload went (heap block of each row, `ctid`):',
    '',
    '| table | rows written | on pages | of them in pages the preload left (free space) | on old pages | block range | table pages |',
    '|---|---:|---:|---:|---:|---|---:|',
    ...t.placement.map(
      (x) =>
        `| ratchet.${x.table} | ${x.rows.toLocaleString('en')} | ${x.pages.toLocaleString('en')} | ${x.rowsInOldPages.toLocaleString('en')} | ${x.oldPages.toLocaleString('en')} | ${x.firstBlock.toLocaleString('en')}–${x.lastBlock.toLocaleString('en')} | ${x.tablePages.toLocaleString('en')} |`,
    ),
    '',
  );
  push(
    '<details><summary>EXPLAIN (ANALYZE, BUFFERS) of the engine\'s queue-path statements, generic plans (as prepared statements settle on), each executed once before (undone), empty vs preloaded</summary>',
    '',
    ...t.plans.flatMap((plan) => [`**${plan.label}** — empty database:`, '', '```', plan.empty, '```', '', `**${plan.label}** — preloaded:`, '', '```', plan.loaded, '```', '']),
    '</details>',
    '',
  );

  // --- 2 ---
  const heapDelta = s.settled.heapUsed - s.baseline.heapUsed;
  const rssDelta = s.settled.rss - s.baseline.rss;
  push(
    `## 2. ${SLEEPERS.toLocaleString('en')} sleeping runs and the worker's memory`,
    '',
    `One worker process (\`scale-worker.ts\`, concurrency ${SLEEPER_CONCURRENCY}, \`node --expose-gc\`) runs \`${sleeper.name}\`: one step, then \`ctx.sleep('nap', '1h')\`. ` +
      `Baseline after ${WARM_SLEEPERS} warm-up runs went to sleep; then ${SLEEPERS.toLocaleString('en')} more were started (client.start, 100 at a time, from the benchmark process). ` +
      `Memory is \`process.memoryUsage()\` in the worker right after \`global.gc()\`.`,
    '',
    '| point | heapUsed MB | heapTotal MB | RSS MB | external MB |',
    '|---|---:|---:|---:|---:|',
    `| baseline (${WARM_SLEEPERS} sleeping) | ${mb(s.baseline.heapUsed, 1)} | ${mb(s.baseline.heapTotal, 1)} | ${mb(s.baseline.rss, 1)} | ${mb(s.baseline.external, 1)} |`,
    `| all ${(WARM_SLEEPERS + SLEEPERS).toLocaleString('en')} sleeping | ${mb(s.after.heapUsed, 1)} | ${mb(s.after.heapTotal, 1)} | ${mb(s.after.rss, 1)} | ${mb(s.after.external, 1)} |`,
    `| 3 s later | ${mb(s.settled.heapUsed, 1)} | ${mb(s.settled.heapTotal, 1)} | ${mb(s.settled.rss, 1)} | ${mb(s.settled.external, 1)} |`,
    `| **delta** (3 s later − baseline) | **${signedMb(heapDelta)}** | ${signedMb(s.settled.heapTotal - s.baseline.heapTotal)} | **${signedMb(rssDelta)}** | ${signedMb(s.settled.external - s.baseline.external)} |`,
    '',
    `Peak RSS while the runs executed: ${mb(s.peakRssBytes, 1)} MB. Runs sleeping at the end: ${s.sleeping.toLocaleString('en')}. ` +
      `Starting them took ${f(s.startSeconds)} s; all ${SLEEPERS.toLocaleString('en')} were sleeping ${f(s.toSleepingSeconds)} s after the first start ` +
      `(${f(SLEEPERS / s.toSleepingSeconds)} runs/s from start to suspended). Worker counters: ${Object.entries(s.stats).map(([k, v]) => `${k} ${v}`).join(', ')}.`,
    '',
    `Gate (no memory beyond the baseline; heap delta < 10 MB): **${Math.abs(heapDelta) < 10 * 2 ** 20 ? 'met' : 'MISSED'}** (heap ${signedMb(heapDelta)} MB, RSS ${signedMb(rssDelta)} MB).`,
    '',
  );

  // --- 3 ---
  const bestDrain = (w: number) => d.filter((x) => x.workers === w).reduce((a, b) => (b.runsPerSec > a.runsPerSec ? b : a));
  const one = bestDrain(WORKER_COUNTS[0]!);
  push(
    `## 3. ${WORKER_COUNTS.join(', ')} worker processes`,
    '',
    `${DRAIN.toLocaleString('en')} runs of \`${trivial.name}\` (${K} trivial steps) queued first, then drained by N worker processes (\`scale-worker.ts\`, concurrency ${C} each, warmed up by 20 direct runs) started together; ` +
      `time from "go" until no run is pending or running. CPU from /proc: Postgres = the postmaster and all its backends; workers = the worker processes. ` +
      `${REPEAT} rounds; the best counts` + ' (the "×" column compares best with best). ' +
      'The last column samples pg_stat_activity every 50 ms: how many client backends were inside a statement on average, and what they were doing ' +
      '(CPU = running; IO:WALSync / LWLock:WALWrite = waiting for the WAL flush of a commit; LWLock:… = an internal lock; Lock:… = a row lock; Client:ClientRead = waiting for the client).',
    '',
    `| workers | in flight | runs/s (${rounds}) | best runs/s | × 1 worker | Postgres CPU ms/run | Postgres cores busy | worker CPU ms/run | worker cores busy | other · kernel · steal (cores) | statements/run | claims/run | runs per worker | Postgres backends (pg_stat_activity samples) |`,
    '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|',
    ...WORKER_COUNTS.map((w) => {
      const b = bestDrain(w);
      return `| ${w} | ${w * C} | ${d
        .filter((x) => x.workers === w)
        .map((x) => f(x.runsPerSec))
        .join(', ')} | ${f(b.runsPerSec)} | ${f(b.runsPerSec / one.runsPerSec, 2)} | ${f(b.pgCpuMsPerRun, 2)} | ${f(b.pgCores, 2)} | ${f(b.workerCpuMsPerRun, 2)} | ${f(b.workerCores, 2)} | ${noise(b)} | ${f(b.statementsPerRun, 2)} | ${f(b.claimsPerRun, 2)} | ${b.perWorker.join(' / ')} | ${renderWaits(b.waits, 5)} |`;
    }),
    '',
    conclusion(facts.cores, WORKER_COUNTS.map(bestDrain)),
  );
  return lines.join('\n');
}

/** Where Postgres becomes the limit, read off the drains (the best of each worker count). */
function conclusion(cores: number, drains: Drain[]): string {
  const top = drains.reduce((a, b) => (b.runsPerSec > a.runsPerSec ? b : a));
  const limit = drains.find((d) => d.runsPerSec >= 0.9 * top.runsPerSec)!;
  const walWait = (d: Drain) => d.waits.shares.filter(([w]) => /WALWrite|WalSync|WalWrite|WALInsert/i.test(w)).reduce((sum, [, share]) => sum + share, 0);
  const used = (d: Drain) => d.pgCores + d.workerCores + d.kernelCores + d.otherCores;
  const first = drains[0]!;
  const last = drains[drains.length - 1]!;
  return [
    `Throughput peaks at ${top.workers} worker process(es) (${top.runsPerSec.toFixed(0)} runs/s); within 10 % of that already at ${limit.workers}. ` +
      `With ${first.workers}: Postgres ${first.pgCores.toFixed(2)} cores + worker(s) ${first.workerCores.toFixed(2)} + kernel ${first.kernelCores.toFixed(2)} = ${used(first).toFixed(2)} of ${cores} cores, ` +
      `and ${Math.round(walWait(first) * 100)} % of the busy backends' samples wait for the WAL (a commit's flush); with ${last.workers}: ${used(last).toFixed(2)} cores, ${Math.round(walWait(last) * 100)} % WAL waits, ` +
      `and Postgres spends ${last.pgCpuMsPerRun.toFixed(2)} ms of CPU per run instead of ${first.pgCpuMsPerRun.toFixed(2)} (${(last.pgCpuMsPerRun / first.pgCpuMsPerRun).toFixed(2)}×) for the same ${last.statementsPerRun.toFixed(1)} statements per run.`,
    '',
    walWait(limit) >= 0.5
      ? `So on this ${cores}-core machine Postgres is the limit from ${limit.workers} worker process(es) (${limit.workers * C} runs in flight): each step is a commit that waits for the WAL flush, ` +
        'and more processes add connections that wait in the same flush queue and cost Postgres more CPU per run (lock and wake-up traffic among more backends), ' +
        `while the worker processes themselves take CPU from Postgres on the same ${cores} cores. More throughput needs a faster WAL device or more cores for Postgres, not more workers.`
      : `So on this ${cores}-core machine the limit is reached at ${limit.workers} worker process(es) (${limit.workers * C} runs in flight), where Postgres, the workers and the kernel ` +
        `use ${used(limit).toFixed(2)} of the ${cores} cores.`,
  ].join('\n');
}

// =============================================================================================

function positive(value: string, name: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer; got ${JSON.stringify(value)}`);
  return n;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

function mb(bytes: number, digits = 0): string {
  return (bytes / 2 ** 20).toFixed(digits);
}

function signedMb(bytes: number): string {
  const v = bytes / 2 ** 20;
  return `${v >= 0 ? '+' : '−'}${Math.abs(v).toFixed(1)}`;
}

function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function log(message: string): void {
  console.error(`[scale ${new Date().toISOString().slice(11, 19)}] ${message}`);
}
