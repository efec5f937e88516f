/**
 * `pnpm bench`: Ratchet against the floor, in ONE run on ONE PostgreSQL (only ratios measured
 * in the same run count on these noisy machines).
 *
 *   raw        K+2 unrelated single-row INSERT commits: what the disk and Postgres allow at all
 *   baseline   a hand-rolled durable run: K+2 single-statement commits (insert run, K step rows,
 *              complete), named prepared statements, no fencing — the floor a durable run can reach
 *   DBOS       DBOS Transact 5.3.0 on the same database: a direct workflow call, and its queue
 *   direct     Ratchet engine.run: inserted leased, executed inline (K+2 commits)
 *   queue      Ratchet client.start → worker → run.result() (K+3 commits: start, claim, K, complete)
 *
 * Each phase runs N runs of K trivial steps with C in flight. Reported per phase: runs/s, p50/p99
 * latency, statements per run and per step (pg_stat_statements), write transactions and WAL bytes per run,
 * Node and Postgres CPU per run, and the ratio to the baseline.
 *
 *   pnpm bench [--runs 500] [--steps 5] [--concurrency 8] [--out docs/benchmarks.md] [--statements]
 *   DATABASE_URL=postgres://… pnpm bench     (the server needs pg_stat_statements preloaded)
 */
import { readFile, readdir, writeFile, mkdtemp, chmod, rm } from 'node:fs/promises';
import { tmpdir, cpus, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, startEmbedded, type EmbeddedServer } from '@ratchet/engine';
import { DBOS } from '@dbos-inc/dbos-sdk';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '500' },
    steps: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '8' },
    out: { type: 'string' },
    statements: { type: 'boolean', default: false },
  },
});
const N = Number(args.runs);
const K = Number(args.steps);
const C = Number(args.concurrency);

const trivial = workflow({ name: 'bench-trivial', version: '1', input: z.object({ k: z.number().int() }) }, async (ctx, { k }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) last = await ctx.step('s', () => i);
  return last;
});

interface PhaseResult {
  name: string;
  runsPerSec: number;
  p50: number;
  p99: number;
  statementsPerRun: number;
  commitsPerRun: number;
  walBytesPerRun: number;
  nodeCpuMsPerRun: number;
  pgCpuMsPerRun: number;
}

let server: EmbeddedServer | undefined;
let dataRoot: string | undefined;
let url = process.env.DATABASE_URL;
if (!url) {
  dataRoot = await mkdtemp(join(tmpdir(), 'ratchet-bench-'));
  await chmod(dataRoot, 0o755);
  server = await startEmbedded({
    dataDir: join(dataRoot, 'data'),
    database: 'bench',
    settings: { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track': 'top', max_connections: '100' },
  });
  url = server.url;
}

const admin = new pg.Pool({ connectionString: url, max: 2 });
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
const serverVersion = (await admin.query('SHOW server_version')).rows[0].server_version as string;
const settings = (await admin.query(`SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')`)).rows;

const results: PhaseResult[] = [];
try {
  results.push(await phase('raw single-INSERT commits (limit)', rawInserts()));
  results.push(await phase('baseline (K+2 commits)', baseline()));
  const dbos = await startDbos();
  results.push(await phase('DBOS Transact 5.3.0 direct', dbos.direct));
  results.push(await phase('DBOS Transact 5.3.0 queue', dbos.queue));
  await DBOS.shutdown();
  results.push(await phase('ratchet direct (engine.run)', await ratchetDirect()));
  results.push(await phase('ratchet queue (start → worker → result)', await ratchetQueue()));
  if (args.statements) {
    const { rows } = await admin.query(
      `SELECT calls, round(mean_exec_time::numeric, 3) AS mean_ms, round(total_exec_time::numeric) AS total_ms,
              left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query
         FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_exec_time DESC LIMIT 15`,
    );
    console.table(rows);
  }
} finally {
  await admin.end();
  await server?.release();
  if (dataRoot) await rm(dataRoot, { recursive: true, force: true });
}

const report = render(results);
console.log(report);
if (args.out) {
  // pnpm runs the script inside bench/; a relative path means relative to where it was invoked.
  const out = resolve(process.env.INIT_CWD ?? process.cwd(), args.out);
  const previous = await readFile(out, 'utf8').catch(() => '');
  const marker = '<!-- bench:results -->';
  const [head] = previous.split(marker);
  await writeFile(out, `${(head ?? '').trimEnd() || '# Benchmarks'}\n\n${marker}\n\n${report}\n`);
  console.log(`written to ${out}`);
}

// ---------------------------------------------------------------------------------------------

/** A phase: `prepare` sets up, returns the per-run function and its cleanup. */
type Workload = () => Promise<{ once: () => Promise<void>; close: () => Promise<void> }>;

async function phase(name: string, workload: Workload | Awaited<ReturnType<Workload>>): Promise<PhaseResult> {
  const w = typeof workload === 'function' ? await workload() : workload;
  for (let i = 0; i < Math.min(20, N); i += 1) await w.once(); // warm up: connections, prepared statements
  const before = await counters();
  const cpu0 = process.cpuUsage();
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < N) {
        next += 1;
        const s = performance.now();
        await w.once();
        latencies.push(performance.now() - s);
      }
    }),
  );
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const after = await counters();
  await w.close();
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;
  return {
    name,
    runsPerSec: (N / elapsed) * 1000,
    p50: pct(50),
    p99: pct(99),
    statementsPerRun: (after.statements - before.statements) / N,
    commitsPerRun: (after.commits - before.commits) / N,
    walBytesPerRun: (after.wal - before.wal) / N,
    nodeCpuMsPerRun: (cpu.user + cpu.system) / 1000 / N,
    pgCpuMsPerRun: (after.pgCpuMs - before.pgCpuMs) / N,
  };
}

async function counters(): Promise<{ statements: number; commits: number; wal: number; pgCpuMs: number }> {
  // Measurement queries themselves are excluded from the statement count by their text.
  const { rows } = await admin.query(`
    SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
             WHERE query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%pg_current_wal%' AND query NOT IN ('BEGIN', 'COMMIT')
               AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))::float8 AS statements,
           -- The next transaction id: its growth counts write transactions (read-only ones get no id).
           pg_snapshot_xmax(pg_current_snapshot())::text::float8 AS commits,
           pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal`);
  await admin.query('SELECT pg_stat_clear_snapshot()');
  return { ...rows[0], pgCpuMs: await postgresCpuMs() };
}

/** CPU of the postmaster and all its children (live ones, plus exited ones via cutime/cstime). */
async function postgresCpuMs(): Promise<number> {
  const pidFile = server ? join(server.dataDir, 'postmaster.pid') : undefined;
  if (!pidFile) return Number.NaN; // an external server: its processes are not ours to read
  const postmaster = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  const ticks = 100; // USER_HZ on Linux
  let total = 0;
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    const pid = Number(entry);
    if (pid !== postmaster && ppid !== postmaster) continue;
    total += Number(fields[11]) + Number(fields[12]); // utime + stime
    if (pid === postmaster) total += Number(fields[13]) + Number(fields[14]); // + exited children
  }
  return (total / ticks) * 1000;
}

/** The limit: one single-row INSERT commit per "run" (K+2 of them, like the baseline, but unrelated rows). */
function rawInserts(): Workload {
  return async () => {
    const pool = new pg.Pool({ connectionString: url, max: C });
    await pool.query(`CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, v int NOT NULL)`);
    return {
      once: async () => {
        for (let i = 0; i < K + 2; i += 1) await pool.query({ name: 'r_ins', text: `INSERT INTO bench_raw (v) VALUES ($1)`, values: [i] });
      },
      close: () => pool.end(),
    };
  };
}

/** DBOS Transact on the same database: its system tables in the schema `dbos`. */
async function startDbos(): Promise<{ direct: Awaited<ReturnType<Workload>>; queue: Awaited<ReturnType<Workload>> }> {
  const dbosTrivial = DBOS.registerWorkflow(
    async (k: number) => {
      let last = 0;
      for (let i = 1; i <= k; i += 1) last = await DBOS.runStep(async () => i, { name: `s${i}` });
      return last;
    },
    { name: 'bench-trivial' },
  );
  DBOS.setConfig({ name: 'ratchet-bench', applicationVersion: '1', systemDatabaseUrl: url!, systemDatabasePoolSize: C + 4, logLevel: 'error' });
  await DBOS.launch();
  const queue = await DBOS.registerQueue('bench', { workerConcurrency: C });
  return {
    direct: { once: async () => void (await dbosTrivial(K)), close: async () => {} },
    queue: {
      once: async () => {
        const handle = await DBOS.startWorkflow(dbosTrivial, { queueName: queue.name })(K);
        await handle.getResult();
      },
      close: async () => {},
    },
  };
}

function baseline(): Workload {
  return async () => {
    const pool = new pg.Pool({ connectionString: url, max: C });
    await pool.query(`CREATE TABLE IF NOT EXISTS bench_runs (id uuid PRIMARY KEY, state text NOT NULL, output jsonb, created_at timestamptz DEFAULT now())`);
    await pool.query(`CREATE TABLE IF NOT EXISTS bench_steps (run_id uuid NOT NULL REFERENCES bench_runs, n int NOT NULL, result jsonb, PRIMARY KEY (run_id, n))`);
    return {
      once: async () => {
        const id = crypto.randomUUID();
        await pool.query({ name: 'b_ins', text: `INSERT INTO bench_runs (id, state) VALUES ($1, 'running')`, values: [id] });
        for (let i = 1; i <= K; i += 1) {
          await pool.query({ name: 'b_step', text: `INSERT INTO bench_steps (run_id, n, result) VALUES ($1, $2, $3)`, values: [id, i, JSON.stringify(i)] });
        }
        await pool.query({ name: 'b_done', text: `UPDATE bench_runs SET state = 'completed', output = $2 WHERE id = $1`, values: [id, JSON.stringify(K)] });
      },
      close: () => pool.end(),
    };
  };
}


async function ratchetDirect(): Promise<Awaited<ReturnType<Workload>>> {
  const engine = await createEngine({ database: url!, workflows: [trivial], poolSize: C + 4 });
  await engine.migrate();
  return {
    once: async () => {
      const r = await engine.run(trivial, { k: K });
      if (r.state !== 'completed') throw new Error(`run ${r.runId} ended ${r.state}`);
    },
    close: () => engine.close(),
  };
}

async function ratchetQueue(): Promise<Awaited<ReturnType<Workload>>> {
  const engine = await createEngine({ database: url!, workflows: [trivial], poolSize: C * 2 + 6 });
  await engine.migrate();
  const worker = engine.worker({ concurrency: C });
  await worker.start();
  return {
    once: async () => {
      const run = await engine.client.start(trivial, { k: K });
      await run.result({ timeout: '60s' });
    },
    close: async () => {
      await worker.stop();
      await engine.close();
    },
  };
}

function render(rows: PhaseResult[]): string {
  const base = rows.find((r) => r.name.startsWith('baseline')) ?? rows[0]!;
  const dbos = rows.find((r) => r.name.includes('DBOS') && r.name.includes('direct'));
  const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
  const lines = [
    `Command: \`pnpm bench --runs ${N} --steps ${K} --concurrency ${C}\` — ${N} runs × ${K} trivial steps, ${C} in flight.`,
    `PostgreSQL ${serverVersion} (${settings.map((s) => `${s.name}=${s.setting}`).join(', ')}), Node ${process.version}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB.`,
    '',
    '| phase | runs/s | × baseline | × DBOS direct | p50 ms | p99 ms | statements/run | statements/step | write txns/run | WAL bytes/run | Node CPU ms/run | Postgres CPU ms/run |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${f(r.runsPerSec)} | ${f(r.runsPerSec / base.runsPerSec, 2)} | ${dbos ? f(r.runsPerSec / dbos.runsPerSec, 2) : 'n/a'} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.statementsPerRun)} | ${f(r.statementsPerRun / K, 2)} | ${f(r.commitsPerRun)} | ${f(r.walBytesPerRun, 0)} | ${f(r.nodeCpuMsPerRun, 2)} | ${f(r.pgCpuMsPerRun, 2)} |`,
    ),
  ];
  return lines.join('\n');
}
