/**
 * Partitioning: does range-partitioning `operations` and `events` by time pay off at 10M rows?
 *
 *   pnpm bench:partitioning [--rows 10000000] [--days 60] [--every day|month] [--samples 2000] [--out FILE]
 *   DATABASE_URL=postgres://…   (default: an embedded PostgreSQL in a temporary directory)
 *
 * Two layouts on the same server, loaded with the same data and measured one after the other:
 *
 *   current      the real schema (`ratchet.tasks`, `ratchet.operations`, `ratchet.events`, every
 *                migration applied): `--rows` operations and as many events, 5 of each per run,
 *                the runs' starts spread over `--days` days, finished a minute after they started.
 *   partitioned  `bench_part.*`: a copy of `tasks`, and `operations`/`events` range-partitioned
 *                by the RUN's start (`run_created_at`, copied into each row), one partition per
 *                `--every` (day or month). Every unique constraint must include the partition key,
 *                so: operations (tenant_id, id, run_created_at), (task_id, step_key, tenant_id,
 *                run_created_at), (idempotency_key, tenant_id, run_created_at); events (tenant_id,
 *                task_id, seq, run_created_at); the foreign keys to tasks carry run_created_at too
 *                (tasks gets a unique (tenant_id, id, created_at) for them). Partitioning by the
 *                run's start rather than the row's own time is what keeps the step key unique per
 *                run (a run's rows share one partition); by the row's time, ON CONFLICT on the step
 *                key — the checkpoint's retry safety — would stop working.
 *
 * Measured (each layout in turn, `--rounds` alternations, best round kept):
 *   1. the hot checkpoint: the fenced step insert of store/operations.ts (task row FOR SHARE on
 *      owner + state_version, INSERT … ON CONFLICT on the step key), one connection, fresh runs;
 *   2. replay's load of a run's operations (store/operations.ts listOperations) for random old
 *      runs: current; partitioned without the partition key (every partition probed); and with
 *      it (pruned to one) — the engine has the run's created_at when it loads, so it could pass it;
 *   3. retention of the oldest day: current = engine.retention.run (batches of 500 runs, DELETE
 *      with cascade, one transaction each); partitioned = DETACH + DROP of that day's partitions
 *      of operations and events, then the day's task rows deleted in batches of 500. Time and WAL.
 */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createEngine, startEmbedded, stopEmbedded, type EmbeddedServer } from '@ratchet/engine';

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000000' },
    days: { type: 'string', default: '60' },
    every: { type: 'string', default: 'day' },
    samples: { type: 'string', default: '2000' },
    checkpoints: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    tenants: { type: 'string', default: '100' },
    out: { type: 'string' },
  },
});
const ROWS = positive(args.rows, 'rows');
const DAYS = positive(args.days, 'days');
const EVERY = args.every === 'month' ? 'month' : args.every === 'day' ? 'day' : fail(`--every must be day or month, not ${args.every}`);
const SAMPLES = positive(args.samples, 'samples');
const CHECKPOINTS = positive(args.checkpoints, 'checkpoints');
const ROUNDS = positive(args.rounds, 'rounds');
const TENANTS = positive(args.tenants, 'tenants');
const STEPS = 5;
const RUNS = Math.floor(ROWS / STEPS);

function positive(value: string, name: string): number {
  const n = Number(value);
  return Number.isInteger(n) && n > 0 ? n : fail(`--${name} must be a positive integer`);
}
function fail(message: string): never {
  console.error(message);
  process.exit(2);
}
const log = (message: string) => console.error(`[partitioning ${new Date().toISOString().slice(11, 19)}] ${message}`);

// The checkpoint statement of store/operations.ts (WRITE_OPERATION_SQL), for the current layout.
const CHECKPOINT_SQL = `
    INSERT INTO ratchet.operations AS o (tenant_id, id, task_id, step_name, step_key, seq, kind, idempotency_key, input_hash,
                                         state, attempt, reserved_at, deadline_at, provider_reference, result, error,
                                         trace_id, span_id, created_at, completed_at)
    SELECT $1, $5, $2, $6, $7, $8, $9, $10, $11, $12, $13,
           CASE WHEN $15 THEN ratchet.now() END,
           ratchet.now() + $16 * interval '1 millisecond',
           $17, $18, $19, $20, $21, ratchet.now(),
           CASE WHEN $12 IN ('succeeded', 'failed', 'unknown') THEN ratchet.now() END
      FROM ratchet.tasks t
     WHERE t.tenant_id = $1 AND t.id = $2 AND t.lease_owner = $3 AND t.state_version = $4
       FOR SHARE
    ON CONFLICT (task_id, step_key, tenant_id) DO UPDATE
       SET state = EXCLUDED.state, seq = EXCLUDED.seq, attempt = EXCLUDED.attempt,
           reserved_at = CASE WHEN EXCLUDED.state = 'reserved' THEN EXCLUDED.reserved_at ELSE o.reserved_at END,
           deadline_at = CASE WHEN EXCLUDED.state = 'reserved' THEN EXCLUDED.deadline_at ELSE o.deadline_at END,
           provider_reference = coalesce(EXCLUDED.provider_reference, o.provider_reference),
           result = EXCLUDED.result, error = EXCLUDED.error, trace_id = EXCLUDED.trace_id, span_id = EXCLUDED.span_id,
           completed_at = EXCLUDED.completed_at
     WHERE o.state = 'reserved' AND o.attempt = $14
    RETURNING o.id, o.created_at AS "createdAt", o.completed_at AS "completedAt", o.deadline_at AS "deadlineAt", ratchet.now() AS now`;

/** The same statement on the partitioned copy: the partition key comes from the fenced task row. */
const PART_CHECKPOINT_SQL = [
  ['INSERT INTO ratchet.operations AS o (tenant_id,', 'INSERT INTO bench_part.operations AS o (run_created_at, tenant_id,'],
  ['SELECT $1, $5,', 'SELECT t.created_at, $1, $5,'],
  ['FROM ratchet.tasks t', 'FROM bench_part.tasks t'],
  ['ON CONFLICT (task_id, step_key, tenant_id)', 'ON CONFLICT (task_id, step_key, tenant_id, run_created_at)'],
].reduce((sql, [from, to]) => {
  if (!sql.includes(from!)) throw new Error(`checkpoint statement changed: ${from}`);
  return sql.replace(from!, to!);
}, CHECKPOINT_SQL);

const LOAD_SQL = (schema: string, pruned: boolean) => `
  SELECT o.id, o.step_key, o.kind, o.state, o.attempt, o.result, o.error, o.seq, o.created_at, o.completed_at
    FROM ${schema}.operations o WHERE o.tenant_id = $1 AND o.task_id = $2 ${pruned ? 'AND o.run_created_at = $3' : ''} ORDER BY o.seq`;

const TENANT_SQL = (i: string) => `('0190a5f8-0000-7000-8000-' || lpad(to_hex((${i}) % ${TENANTS}), 12, '0'))::uuid`;
// UUIDv7 from a timestamp expression (the engine makes v7 ids; time-ordered keys matter for B-tree locality).
const UUID7_SQL = (ts: string) =>
  `encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing substring(int8send(floor(extract(epoch FROM ${ts}) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid`;

let server: EmbeddedServer | undefined;
let dataRoot: string | undefined;
let url = process.env.DATABASE_URL;
if (!url) {
  dataRoot = await mkdtemp(join(tmpdir(), 'ratchet-partitioning-'));
  await chmod(dataRoot, 0o755);
  server = await startEmbedded({
    dataDir: join(dataRoot, 'data'),
    database: 'partitioning',
    settings: { max_wal_size: '8GB', checkpoint_timeout: '30min', shared_buffers: '1GB', maintenance_work_mem: '512MB' },
  });
  url = server.url;
}
const pool = new pg.Pool({ connectionString: url, max: 4 });
pool.on('error', () => {});

try {
  const engine = await createEngine({ database: url, workflows: [] });
  await engine.migrate();
  const version = (await pool.query(`SHOW server_version`)).rows[0].server_version as string;
  log(`PostgreSQL ${version}; ${RUNS} runs × ${STEPS} operations and ${STEPS} events per layout over ${DAYS} days; partitions per ${EVERY}`);

  const t0 = (await pool.query(`SELECT date_trunc('day', now() - $1 * interval '1 day') AS t0`, [DAYS])).rows[0].t0 as Date;
  const load = await loadData(t0);
  const sizes = await tableSizes();
  const checkpoint = await measureCheckpoints();
  const lookups = await measureLookups();
  const retention = await measureRetention(engine, t0);
  await engine.close();
  const report = render(version, load, sizes, checkpoint, lookups, retention);
  console.log(report);
  if (args.out) {
    await writeFile(resolve(args.out), report);
    log(`written to ${resolve(args.out)}`);
  }
} finally {
  await pool.end().catch(() => {});
  if (server) {
    await server.release().catch(() => {});
    await stopEmbedded(server.dataDir).catch(() => false);
  }
  if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
}

async function timed<T>(label: string, work: () => Promise<T>): Promise<number> {
  const started = performance.now();
  await work();
  const ms = performance.now() - started;
  log(`${label}: ${(ms / 1000).toFixed(1)} s`);
  return ms;
}

async function loadData(t0: Date): Promise<Record<string, number>> {
  const q = (sql: string, values: unknown[] = []) => pool.query(sql, values);
  await q(`DROP SCHEMA IF EXISTS bench_part CASCADE`);
  await q(`CREATE SCHEMA bench_part`);
  await q(`CREATE TABLE bench_part.tasks (LIKE ratchet.tasks INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`);
  await q(`ALTER TABLE bench_part.tasks ADD CONSTRAINT tasks_created_unique UNIQUE (tenant_id, id, created_at)`);
  for (const table of ['operations', 'events']) {
    await q(`CREATE TABLE bench_part.${table} (LIKE ratchet.${table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS, run_created_at timestamptz NOT NULL)
               PARTITION BY RANGE (run_created_at)`);
  }
  await q(`ALTER TABLE bench_part.operations ADD PRIMARY KEY (tenant_id, id, run_created_at)`);
  await q(`CREATE UNIQUE INDEX ON bench_part.operations (task_id, step_key, tenant_id, run_created_at)`);
  await q(`CREATE UNIQUE INDEX ON bench_part.operations (idempotency_key, tenant_id, run_created_at) WHERE idempotency_key IS NOT NULL`);
  await q(`ALTER TABLE bench_part.events ADD PRIMARY KEY (tenant_id, task_id, seq, run_created_at)`);
  // Foreign keys are added after the load (below), one validating pass each, in both layouts.
  const foreignKeys: [string, string][] = [];
  for (const table of ['operations', 'events']) {
    const { rows } = await q(
      `SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'f'`,
      [`ratchet.${table}`],
    );
    for (const fk of rows) {
      await q(`ALTER TABLE ratchet.${table} DROP CONSTRAINT ${fk.conname}`);
      foreignKeys.push([`ratchet.${table}`, `ADD CONSTRAINT ${fk.conname} ${fk.def}`]);
    }
    foreignKeys.push([`bench_part.${table}`, `ADD FOREIGN KEY (tenant_id, task_id, run_created_at) REFERENCES bench_part.tasks (tenant_id, id, created_at) ON DELETE CASCADE`]);
  }
  // Partitions from t0 to two periods past now (fresh runs of the checkpoint measurement land there).
  const { rows: bounds } = await q(
    `SELECT b AS lo, b + interval '1 ${EVERY}' AS hi FROM generate_series(date_trunc('${EVERY}', $1::timestamptz), now() + interval '2 ${EVERY}', interval '1 ${EVERY}') b`,
    [t0],
  );
  for (const [i, { lo, hi }] of bounds.entries()) {
    for (const table of ['operations', 'events']) {
      await q(`CREATE TABLE bench_part.${table}_p${i} PARTITION OF bench_part.${table} FOR VALUES FROM ('${lo.toISOString()}') TO ('${hi.toISOString()}')`);
    }
  }
  log(`${bounds.length} partitions per table`);

  await q(`DROP TABLE IF EXISTS bench_runs`);
  await q(`CREATE UNLOGGED TABLE bench_runs AS
             SELECT i, ${TENANT_SQL('i')} AS tenant_id, c AS created_at, ${UUID7_SQL('c')} AS id
               FROM generate_series(1, $1::int) i, LATERAL (SELECT $2::timestamptz + (i::float8 / $1) * ($3 * interval '1 day') AS c) x`,
    [RUNS, t0, DAYS]);
  await q(`CREATE INDEX ON bench_runs (i)`);
  const taskCols = `tenant_id, id, workflow_name, workflow_version, state, state_version, input, input_hash, output, created_at, updated_at, completed_at`;
  const taskSel = `tenant_id, id, 'bench', '1', 'completed', 6, '{"n":1}'::jsonb, 'h', '{"ok":true}'::jsonb, created_at, created_at + interval '1 minute', created_at + interval '1 minute'`;
  const opCols = `tenant_id, id, task_id, step_name, step_key, seq, kind, input_hash, state, attempt, result, created_at, completed_at`;
  const opSel = `r.tenant_id, ${UUID7_SQL('r.created_at')}, r.id, 'step-' || s, 'step-' || s || '#1', s, 'step', 'h', 'succeeded', 1, jsonb_build_object('value', s, 'at', r.created_at), r.created_at + s * interval '1 second', r.created_at + s * interval '1 second'`;
  const evCols = `tenant_id, task_id, seq, event_type, actor_id, payload, created_at`;
  const evSel = `r.tenant_id, r.id, s, (ARRAY['started', 'claimed', 'sleeping', 'woke', 'completed'])[s], 'bench', jsonb_build_object('inputHash', 'h'), r.created_at + s * interval '1 second'`;
  const chunk = 200_000; // runs per INSERT: bounded transactions, visible progress
  const load: Record<string, number> = {};
  for (const [layout, schema, extra, extraSel] of [
    ['current', 'ratchet', '', ''],
    ['partitioned', 'bench_part', ', run_created_at', ', r.created_at'],
  ] as const) {
    load[layout] = await timed(`load ${layout}`, async () => {
      for (let lo = 1; lo <= RUNS; lo += chunk) {
        const hi = Math.min(RUNS, lo + chunk - 1);
        await q(`INSERT INTO ${schema}.tasks (${taskCols}) SELECT ${taskSel} FROM bench_runs WHERE i BETWEEN $1 AND $2`, [lo, hi]);
        await q(`INSERT INTO ${schema}.operations (${opCols}${extra}) SELECT ${opSel}${extraSel} FROM bench_runs r, generate_series(1, ${STEPS}) s WHERE r.i BETWEEN $1 AND $2`, [lo, hi]);
        await q(`INSERT INTO ${schema}.events (${evCols}${extra}) SELECT ${evSel}${extraSel} FROM bench_runs r, generate_series(1, ${STEPS}) s WHERE r.i BETWEEN $1 AND $2`, [lo, hi]);
        log(`  ${layout}: ${hi}/${RUNS} runs`);
      }
    });
  }
  for (const [table, clause] of foreignKeys) load[`fk ${table}`] = await timed(`foreign key on ${table}`, () => q(`ALTER TABLE ${table} ${clause}`));
  await timed('VACUUM ANALYZE', () => q(`VACUUM ANALYZE`));
  return load;
}

async function tableSizes(): Promise<Record<string, Record<string, number>>> {
  const out: Record<string, Record<string, number>> = {};
  for (const [layout, schema] of [['current', 'ratchet'], ['partitioned', 'bench_part']] as const) {
    out[layout] = {};
    for (const table of ['tasks', 'operations', 'events']) {
      const { rows } = await pool.query(
        `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8 AS bytes
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = $1 AND (c.relname = $2 OR c.relname LIKE $2 || '\\_p%') AND c.relkind IN ('r', 'p')`,
        [schema, table],
      );
      out[layout]![table] = rows[0].bytes;
    }
  }
  return out;
}

interface Latency {
  meanUs: number;
  p50Us: number;
  p95Us: number;
}

function latency(samples: number[]): Latency {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! * 1000;
  return { meanUs: (samples.reduce((a, b) => a + b, 0) / samples.length) * 1000, p50Us: at(0.5), p95Us: at(0.95) };
}

function best(rounds: Latency[]): Latency {
  return rounds.reduce((a, b) => (b.meanUs < a.meanUs ? b : a));
}

async function measureCheckpoints(): Promise<Record<string, Latency>> {
  const client = await pool.connect();
  const rounds: Record<string, Latency[]> = { current: [], partitioned: [] };
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const [layout, schema, sql] of [['current', 'ratchet', CHECKPOINT_SQL], ['partitioned', 'bench_part', PART_CHECKPOINT_SQL]] as const) {
        // Fresh running runs leased to 'bench', as a claim leaves them.
        const { rows: runs } = await client.query<{ tenant_id: string; id: string }>(
          `INSERT INTO ${schema}.tasks (tenant_id, id, workflow_name, workflow_version, state, state_version, lease_owner, lease_expires_at, due_at, input_hash, created_at, updated_at)
           SELECT ${TENANT_SQL('i')}, ${UUID7_SQL('clock_timestamp()')}, 'bench', '1', 'running', 2, 'bench', now() + interval '1 hour', now() + interval '1 hour', 'h', now(), now()
             FROM generate_series(1, $1::int) i RETURNING tenant_id, id`,
          [CHECKPOINTS],
        );
        const samples: number[] = [];
        for (const [i, run] of runs.entries()) {
          const values = [run.tenant_id, run.id, 'bench', 2, randomUuid(), 'step', 'step#1', 1, 'step', null, 'h', 'succeeded', 1, 0, false, null, null, JSON.stringify({ i }), null, null, null];
          const started = performance.now();
          const { rowCount } = await client.query({ name: `checkpoint_${layout}`, text: sql, values });
          if (i >= 50) samples.push(performance.now() - started); // the first ones warm the plan cache
          if (rowCount !== 1) throw new Error(`checkpoint on ${layout} wrote ${rowCount} rows`);
        }
        rounds[layout]!.push(latency(samples));
        log(`checkpoint ${layout} round ${round + 1}: ${rounds[layout]!.at(-1)!.meanUs.toFixed(0)} µs mean`);
      }
    }
  } finally {
    client.release();
  }
  return { current: best(rounds.current!), partitioned: best(rounds.partitioned!) };
}

function randomUuid(): string {
  return crypto.randomUUID();
}

async function measureLookups(): Promise<Record<string, Latency>> {
  const wanted = Array.from({ length: SAMPLES }, () => 1 + Math.floor(Math.random() * RUNS));
  const { rows: picks } = await pool.query<{ tenant_id: string; id: string; created_at: Date }>(
    `SELECT r.tenant_id, r.id, r.created_at FROM unnest($1::int[]) w(i) JOIN bench_runs r ON r.i = w.i`,
    [wanted],
  );
  const client = await pool.connect();
  const rounds: Record<string, Latency[]> = { current: [], partitionedUnpruned: [], partitionedPruned: [] };
  try {
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const [name, sql, pruned] of [
        ['current', LOAD_SQL('ratchet', false), false],
        ['partitionedUnpruned', LOAD_SQL('bench_part', false), false],
        ['partitionedPruned', LOAD_SQL('bench_part', true), true],
      ] as const) {
        const samples: number[] = [];
        for (const [i, run] of picks.entries()) {
          const values = pruned ? [run.tenant_id, run.id, run.created_at] : [run.tenant_id, run.id];
          const started = performance.now();
          const { rows } = await client.query({ name: `load_${name}`, text: sql, values });
          if (i >= 50) samples.push(performance.now() - started);
          if (rows.length !== STEPS) throw new Error(`load ${name} found ${rows.length} operations`);
        }
        rounds[name]!.push(latency(samples));
        log(`load ${name} round ${round + 1}: ${rounds[name]!.at(-1)!.meanUs.toFixed(0)} µs mean`);
      }
    }
  } finally {
    client.release();
  }
  return Object.fromEntries(Object.entries(rounds).map(([k, v]) => [k, best(v)]));
}

interface RetentionCost {
  ms: number;
  walBytes: number;
  runs: number;
}

async function wal(): Promise<string> {
  return (await pool.query(`SELECT pg_current_wal_lsn()::text AS lsn`)).rows[0].lsn;
}

async function walSince(lsn: string): Promise<number> {
  return Number((await pool.query(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8 AS d`, [lsn])).rows[0].d);
}

async function measureRetention(engine: Awaited<ReturnType<typeof createEngine>>, t0: Date): Promise<Record<string, RetentionCost>> {
  // The oldest period: a day (or month) of runs, as retention would remove at each pass.
  const lo = (await pool.query(`SELECT date_trunc('${EVERY}', $1::timestamptz) AS lo`, [t0])).rows[0].lo as Date;
  const hi = (await pool.query(`SELECT $1::timestamptz + interval '1 ${EVERY}' AS hi`, [lo])).rows[0].hi as Date;
  const out: Record<string, RetentionCost> = {};

  let lsn = await wal();
  let started = performance.now();
  // completed_at = created_at + 1 min: finishedBefore hi + 1 min takes exactly the period's runs.
  const report = await engine.retention.run({ finishedBefore: new Date(hi.getTime() + 60_000), keepKeysFor: '3650d', batchSize: 500, purgeExpiredKeys: false });
  out.current = { ms: performance.now() - started, walBytes: await walSince(lsn), runs: report.removed.runs };
  log(`retention current: ${report.removed.runs} runs in ${(out.current.ms / 1000).toFixed(1)} s`);

  lsn = await wal();
  started = performance.now();
  // The oldest period is partition p0 of each table (partitions were made from date_trunc(every, t0)).
  const parts = [{ parent: 'operations', name: 'operations_p0' }, { parent: 'events', name: 'events_p0' }];
  for (const part of parts) {
    await pool.query(`ALTER TABLE bench_part.${part.parent} DETACH PARTITION bench_part.${part.name}`);
    await pool.query(`DROP TABLE bench_part.${part.name}`);
  }
  let runs = 0;
  for (;;) {
    const { rowCount } = await pool.query(
      `DELETE FROM bench_part.tasks t USING (SELECT tenant_id, id FROM bench_part.tasks
          WHERE state IN ('completed', 'failed', 'cancelled') AND completed_at < $1 ORDER BY completed_at LIMIT 500 FOR UPDATE SKIP LOCKED) b
        WHERE t.tenant_id = b.tenant_id AND t.id = b.id`,
      [new Date(hi.getTime() + 60_000)],
    );
    runs += rowCount ?? 0;
    if (!rowCount) break;
  }
  out.partitioned = { ms: performance.now() - started, walBytes: await walSince(lsn), runs };
  log(`retention partitioned: dropped ${parts.length} partitions, ${runs} task rows in ${(out.partitioned.ms / 1000).toFixed(1)} s`);
  return out;
}

function render(
  version: string,
  load: Record<string, number>,
  sizes: Record<string, Record<string, number>>,
  checkpoint: Record<string, Latency>,
  lookups: Record<string, Latency>,
  retention: Record<string, RetentionCost>,
): string {
  const us = (l: Latency) => `${l.meanUs.toFixed(0)} / ${l.p50Us.toFixed(0)} / ${l.p95Us.toFixed(0)}`;
  const gb = (b: number) => (b >= 1024 ** 3 ? `${(b / 1024 ** 3).toFixed(2)} GB` : `${(b / 1024 ** 2).toFixed(1)} MB`);
  const fk = (layout: string) => Object.entries(load).filter(([k]) => k.startsWith(`fk ${layout}`)).reduce((a, [, v]) => a + v, 0);
  const ratio = (a: number, b: number) => `×${(a / b).toFixed(2)}`;
  const lines = [
    `PostgreSQL ${version}, ${RUNS.toLocaleString('en')} runs: ${(RUNS * STEPS).toLocaleString('en')} operations and as many events per layout, over ${DAYS} days, partitions per ${EVERY}.`,
    '',
    '| measure | current | partitioned | partitioned vs current |',
    '|---|---|---|---|',
    `| bulk load (tasks + operations + events), then foreign keys | ${(load.current! / 1000).toFixed(0)} s + ${(fk('ratchet') / 1000).toFixed(0)} s | ${(load.partitioned! / 1000).toFixed(0)} s + ${(fk('bench_part') / 1000).toFixed(0)} s | ${ratio(load.partitioned! + fk('bench_part'), load.current! + fk('ratchet'))} |`,
    ...['tasks', 'operations', 'events'].map(
      (t) => `| size of ${t} (with indexes) | ${gb(sizes.current![t]!)} | ${gb(sizes.partitioned![t]!)} | ${ratio(sizes.partitioned![t]!, sizes.current![t]!)} |`,
    ),
    `| checkpoint insert, µs mean / p50 / p95 | ${us(checkpoint.current!)} | ${us(checkpoint.partitioned!)} | ${ratio(checkpoint.partitioned!.meanUs, checkpoint.current!.meanUs)} |`,
    `| load a run's operations, µs (no partition key) | ${us(lookups.current!)} | ${us(lookups.partitionedUnpruned!)} | ${ratio(lookups.partitionedUnpruned!.meanUs, lookups.current!.meanUs)} |`,
    `| load a run's operations, µs (partition key given) | ${us(lookups.current!)} | ${us(lookups.partitionedPruned!)} | ${ratio(lookups.partitionedPruned!.meanUs, lookups.current!.meanUs)} |`,
    `| retention of the oldest ${EVERY} (${retention.current!.runs.toLocaleString('en')} runs): time | ${(retention.current!.ms / 1000).toFixed(1)} s | ${(retention.partitioned!.ms / 1000).toFixed(1)} s | ${ratio(retention.partitioned!.ms, retention.current!.ms)} |`,
    `| retention of the oldest ${EVERY}: WAL | ${gb(retention.current!.walBytes)} | ${gb(retention.partitioned!.walBytes)} | ${ratio(retention.partitioned!.walBytes, retention.current!.walBytes)} |`,
  ];
  return `${lines.join('\n')}\n`;
}
