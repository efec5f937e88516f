/**
 * `pnpm bench`: Ratchet against DBOS Transact and against the floor, in ONE process sequence on
 * ONE PostgreSQL with the same settings (only ratios measured in the same run count on these
 * noisy machines). Each system runs in a fresh Node process of its own (see SYSTEMS).
 *
 * Workloads (each N runs with C in flight):
 *   trivial   K trivial steps
 *   effects   K side effects (an in-process provider that answers at once)
 *   agent     the agent path: infer (a stub model) → seal → commit (one ticket insert)
 *
 * Phases per workload, where they apply:
 *   raw        K+2 unrelated single-row INSERT commits: what the disk and Postgres allow at all
 *   baseline   the same durable shape hand-rolled in plain pg: named prepared statements, no fence,
 *              no events — the floor a durable run can reach (trivial: K+2 commits; effects:
 *              reserve and record per effect; agent: run, answer, contract, SERIALIZABLE commit, done)
 *   DBOS       DBOS Transact 5.3.0 on the same database: a direct workflow call, and its queue
 *   direct     Ratchet engine.run (inline; born leased)
 *   queue      Ratchet client.execute → worker (the start registers the caller; a local worker
 *              with a free slot takes the run in the start's INSERT: an eager start), and
 *              client.start → worker → run.result(); and across engines, as between processes:
 *              the start NOTIFYs, the worker's engine claims, the completion NOTIFYs
 *
 * Reported per phase: runs/s, steps/s, p50/p99 start→result latency, p50 start→first-step
 * latency, statements per run and per step (pg_stat_statements), write transactions and WAL bytes
 * per run, Node and Postgres CPU per run, ratios to the baseline and to DBOS direct.
 *
 *   pnpm bench [--runs 500] [--warmup runs/2] [--steps 5] [--concurrency 8] [--workloads trivial,effects,agent]
 *              [--phases <regexp>] [--out docs/benchmarks.md] [--statements]
 *   DATABASE_URL=postgres://… pnpm bench     (the server needs pg_stat_statements preloaded)
 * With --out, the results also go to <out>.json and a chart to <out>.svg.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { postgresCpuMs } from './proc.js';
import pg from 'pg';
import { z } from 'zod';
import { defineAction, workflow, type Workflow } from '@ratchet/sdk';
import { createEngine, startEmbedded, type EmbeddedServer, type Engine } from '@ratchet/engine';
import { DBOS } from '@dbos-inc/dbos-sdk';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '500' },
    steps: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '8' },
    workloads: { type: 'string', default: 'trivial,effects,agent' },
    out: { type: 'string' },
    statements: { type: 'boolean', default: false },
    warmup: { type: 'string' },
    phases: { type: 'string' },
    rounds: { type: 'string', default: '1' },
    // Internal: run one system's phases in this (child) process and write its results here.
    system: { type: 'string' },
    results: { type: 'string' },
  },
});
const N = Number(args.runs);
const K = Number(args.steps);
const C = Number(args.concurrency);
const WORKLOADS = args.workloads!.split(',').map((w) => w.trim());
/** Runs per phase before measuring, C in flight: connections, prepared statements and the JIT reach steady state (default: half of --runs). */
const WARMUP = args.warmup === undefined ? Math.ceil(N / 2) : Number(args.warmup);
/** Only the phases whose name matches (a regular expression); the rest are skipped. */
const PHASES = args.phases === undefined ? undefined : new RegExp(args.phases, 'i');
/**
 * Every system's phases this many times over, alternating the order of the systems; each ratio is
 * taken within its round, and the table gives the median round (ratios as median and range).
 * The machine drifts by a third within minutes: one round can land a system on a fast minute and
 * its peer on a slow one, and several alternating rounds put that drift on both sides.
 */
const ROUNDS = Number(args.rounds);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');

// ------------------------------------------------------------------------------ the workflows

let tokens = 0;
/** First-step times by token: the first step of a run notes when it started. */
const firstStep = new Map<string, number>();
const noteFirst = (token: string) => {
  if (!firstStep.has(token)) firstStep.set(token, performance.now());
};

const Input = z.object({ k: z.number().int(), token: z.string() });

const trivial = workflow({ name: 'bench-trivial', version: '1', input: Input }, async (ctx, { k, token }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) {
    last = await ctx.step('s', () => {
      if (i === 1) noteFirst(token);
      return i;
    });
  }
  return last;
});

/** The provider behind every effect: answers at once, honours nothing (the engine's cost only). */
const provider = async (key: string) => ({ ok: true, key: key.length });

const effects = workflow({ name: 'bench-effects', version: '1', input: Input }, async (ctx, { k, token }) => {
  let last = 0;
  for (let i = 1; i <= k; i += 1) {
    const r = await ctx.effect('call', {
      input: { i },
      execute: ({ idempotencyKey }) => {
        if (i === 1) noteFirst(token);
        return provider(idempotencyKey);
      },
    });
    last = r.key;
  }
  return last;
});

const insertTicket = defineAction({
  name: 'bench.tickets.insert',
  input: z.object({ token: z.string(), priority: z.enum(['high', 'low']) }),
  run: async (tx, input) => {
    const { rows } = await tx.query(`INSERT INTO bench_tickets (token, priority) VALUES ($1, $2) RETURNING id`, [input.token, input.priority]);
    return { id: rows[0].id as number };
  },
});

const agent = workflow({ name: 'bench-agent', version: '1', input: Input }, async (ctx, { token }) => {
  const decision = await ctx.infer('classify', {
    model: 'stub',
    schema: z.object({ priority: z.enum(['high', 'low']) }),
    call: async () => {
      noteFirst(token);
      return { priority: token.length % 2 === 0 ? ('high' as const) : ('low' as const) };
    },
  });
  const contract = await ctx.seal('ticket', { operations: [{ action: 'bench.tickets.insert', input: { token, ...decision } }] });
  const committed = await ctx.commit(contract);
  return committed.results[0];
});

// ------------------------------------------------------------------------------ the server

interface PhaseResult {
  workload: string;
  name: string;
  runsPerSec: number;
  stepsPerSec: number;
  p50: number;
  p99: number;
  firstStepP50: number;
  statementsPerRun: number;
  writeTxnsPerRun: number;
  walBytesPerRun: number;
  nodeCpuMsPerRun: number;
  pgCpuMsPerRun: number;
}

/**
 * Each system is measured in a fresh Node process of its own, one after the other, on the same
 * server: a system's heap, timers and process-wide hooks (a context manager, async hooks) must
 * not tax the next one (docs/benchmarks.md: whether they did is not settled; a benchmark should
 * not have to answer it).
 */
const SYSTEMS = ['plain', 'dbos', 'ratchet'] as const;
type System = (typeof SYSTEMS)[number];
const CHILD = args.system as System | undefined;

let server: EmbeddedServer | undefined;
let dataRoot: string | undefined;
let url = process.env.DATABASE_URL;
if (!url && CHILD) throw new Error('--system runs with DATABASE_URL, given by the parent process');
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
if (CHILD) {
  // A child: this system's phases, results to the parent's file, nothing else.
  try {
    await writeFile(args.results!, JSON.stringify(await runSystem(CHILD)));
  } finally {
    await admin.end();
  }
  process.exit();
}
await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
await admin.query(`
  CREATE TABLE IF NOT EXISTS bench_raw (id bigserial PRIMARY KEY, v int NOT NULL);
  CREATE TABLE IF NOT EXISTS bench_runs (id uuid PRIMARY KEY, state text NOT NULL, output jsonb, created_at timestamptz DEFAULT now());
  CREATE TABLE IF NOT EXISTS bench_steps (run_id uuid NOT NULL REFERENCES bench_runs, n int NOT NULL, state text NOT NULL DEFAULT 'done', result jsonb, PRIMARY KEY (run_id, n));
  CREATE TABLE IF NOT EXISTS bench_contracts (id uuid PRIMARY KEY, run_id uuid NOT NULL REFERENCES bench_runs, body jsonb NOT NULL, hash text NOT NULL, status text NOT NULL);
  CREATE TABLE IF NOT EXISTS bench_tickets (id bigserial PRIMARY KEY, token text NOT NULL, priority text NOT NULL);`);
const serverVersion = (await admin.query('SHOW server_version')).rows[0].server_version as string;
const settings = (await admin.query(`SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit')`)).rows;

const rounds: PhaseResult[][] = [];
try {
  for (let round = 0; round < ROUNDS; round += 1) {
    const results: PhaseResult[] = [];
    for (const system of round % 2 === 0 ? SYSTEMS : [...SYSTEMS].reverse()) {
      results.push(...(await inChild(system)));
      if (system !== 'dbos') continue;
      // Its queue phases leave its tables full of dead rows; vacuumed now rather than by
      // autovacuum in the middle of the next system's phases.
      const { rows } = await admin.query(`SELECT format('%I.%I', schemaname, relname) AS t FROM pg_stat_user_tables WHERE schemaname = 'dbos'`);
      for (const { t } of rows) await admin.query(`VACUUM ANALYZE ${t}`);
    }
    rounds.push(results);
  }
  if (args.statements) await printTopStatements();
} catch (error) {
  // Reported before the cleanup below, whose own failure would otherwise replace it.
  console.error(error);
  process.exitCode = 1;
} finally {
  await admin.end();
  await server?.release();
  if (dataRoot) await rm(dataRoot, { recursive: true, force: true }).catch((error) => console.error(`could not remove ${dataRoot}: ${error}`));
}
if (process.exitCode) process.exit();

const results = medianRound(rounds);
const report = render(results);
console.log(report);
if (args.out) {
  // pnpm runs the script inside bench/; a relative path means relative to where it was invoked.
  const out = resolve(process.env.INIT_CWD ?? process.cwd(), args.out);
  const previous = await readFile(out, 'utf8').catch(() => '');
  const marker = '<!-- bench:results -->';
  const [head] = previous.split(marker);
  const svg = out.replace(/\.md$/, '') + '.svg';
  const chartLink = `![runs per second by phase and workload](${svg.split('/').pop()})`;
  await writeFile(out, `${(head ?? '').trimEnd() || '# Benchmarks'}\n\n${marker}\n\n${report}\n\n${chartLink}\n`);
  await writeFile(out.replace(/\.md$/, '') + '.json', JSON.stringify({ command: commandLine(), serverVersion, settings, results, rounds }, null, 2) + '\n');
  await writeFile(svg, chart(results));
  console.log(`written to ${out} (+ .json, .svg)`);
}

// ------------------------------------------------------------------------------ the systems

/** Runs `system`'s phases in a fresh Node process (this script, with --system) and returns its results. */
async function inChild(system: System): Promise<PhaseResult[]> {
  const file = join(await mkdtemp(join(tmpdir(), 'ratchet-bench-results-')), `${system}.json`);
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, ...process.argv.slice(2), '--system', system, '--results', file], {
    env: { ...process.env, DATABASE_URL: url, ...(server ? { RATCHET_BENCH_PGDATA: server.dataDir } : {}) },
    stdio: 'inherit',
  });
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  if (code !== 0) throw new Error(`the ${system} phases failed (exit ${code ?? signal})`);
  const results = JSON.parse(await readFile(file, 'utf8')) as PhaseResult[];
  await rm(file, { force: true });
  return results;
}

/** One system's phases, for every workload (in a child process: see SYSTEMS). */
async function runSystem(system: System): Promise<PhaseResult[]> {
  const results: PhaseResult[] = [];
  const run = async (workload: string, name: string, w: Workload | (() => Workload | Promise<Workload>)) => {
    if (PHASES && !PHASES.test(name)) return;
    const workload_ = typeof w === 'function' ? await w() : w;
    results.push(await phase(workload, name, workload === 'agent' ? 3 : K, workload_));
  };
  if (system === 'plain') {
    for (const workload of WORKLOADS) {
      if (workload === 'trivial') await run(workload, 'raw single-INSERT commits (limit)', rawInserts);
      await run(workload, 'baseline (hand-rolled)', workload === 'trivial' ? baseline : workload === 'effects' ? baselineEffects : baselineAgent);
    }
  }
  if (system === 'dbos' && (!PHASES || PHASES.test('DBOS Transact 5.3.0 direct') || PHASES.test('DBOS Transact 5.3.0 queue'))) {
    const dbos = await startDbos();
    for (const workload of WORKLOADS.filter((w) => w !== 'agent')) {
      await run(workload, 'DBOS Transact 5.3.0 direct', () => dbos.direct(workload));
      await run(workload, 'DBOS Transact 5.3.0 queue', () => dbos.queue(workload));
    }
    await DBOS.shutdown();
  }
  if (system === 'ratchet') {
    for (const workload of WORKLOADS) {
      const wf = workload === 'trivial' ? trivial : workload === 'effects' ? effects : agent;
      const engine = await createEngine({ database: url, workflows: [wf], actions: [insertTicket], poolSize: C * 2 + 6 });
      await engine.migrate();
      await run(workload, 'ratchet direct (engine.run)', () => ratchetDirect(engine, wf));
      await run(workload, 'ratchet queue (client.execute → worker)', () => ratchetQueue(engine, wf, 'execute'));
      await run(workload, 'ratchet queue (start → worker → result())', () => ratchetQueue(engine, wf, 'start'));
      await run(workload, 'ratchet queue across engines (NOTIFY → claim)', () => ratchetQueueAcross(engine, wf));
      await engine.close();
    }
  }
  return results;
}

// ------------------------------------------------------------------------------ measuring

/** One run of a workload: resolves when it is done. `token` identifies it for first-step timing. */
type Workload = { once: (token: string) => Promise<void>; close: () => Promise<void> };

async function phase(workload: string, name: string, stepsPerRun: number, w: Workload): Promise<PhaseResult> {
  // Every phase starts with no dirty pages left by the phase before to be written back during it.
  // (Not VACUUM ANALYZE: fresh statistics of near-empty tables turn index lookups into sequential
  // scans, and SERIALIZABLE transactions then conflict on whole tables.)
  await admin.query('CHECKPOINT');
  let warm = 0;
  await Promise.all(Array.from({ length: C }, async () => {
    while (warm < WARMUP) {
      warm += 1;
      await w.once(`warm-${tokens++}`);
    }
  }));
  const before = await counters();
  const cpu0 = process.cpuUsage();
  const latencies: number[] = [];
  const firsts: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next < N) {
        next += 1;
        const token = `t${tokens++}`;
        const s = performance.now();
        await w.once(token);
        latencies.push(performance.now() - s);
        const f = firstStep.get(token);
        if (f !== undefined) firsts.push(f - s);
        firstStep.delete(token);
      }
    }),
  );
  const elapsed = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const after = await counters();
  await w.close();
  const pct = (xs: number[], p: number) => {
    if (xs.length === 0) return Number.NaN;
    const sorted = [...xs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  };
  const runsPerSec = (N / elapsed) * 1000;
  return {
    workload,
    name,
    runsPerSec,
    stepsPerSec: runsPerSec * stepsPerRun,
    p50: pct(latencies, 50),
    p99: pct(latencies, 99),
    firstStepP50: pct(firsts, 50),
    statementsPerRun: (after.statements - before.statements) / N,
    writeTxnsPerRun: (after.xids - before.xids) / N,
    walBytesPerRun: (after.wal - before.wal) / N,
    nodeCpuMsPerRun: (cpu.user + cpu.system) / 1000 / N,
    pgCpuMsPerRun: (after.pgCpuMs - before.pgCpuMs) / N,
  };
}

async function counters(): Promise<{ statements: number; xids: number; wal: number; pgCpuMs: number }> {
  // Measurement queries themselves are excluded from the statement count by their text.
  const { rows } = await admin.query(`
    SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
             WHERE query NOT ILIKE '%pg_stat%' AND query NOT ILIKE '%pg_current_wal%' AND query NOT IN ('BEGIN', 'COMMIT')
               AND dbid = (SELECT oid FROM pg_database WHERE datname = current_database()))::float8 AS statements,
           -- The next transaction id: its growth counts write transactions (read-only ones get no id).
           pg_snapshot_xmax(pg_current_snapshot())::text::float8 AS xids,
           pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8 AS wal`);
  return { ...rows[0], pgCpuMs: await postgresCpuMs(server?.dataDir ?? process.env.RATCHET_BENCH_PGDATA) };
}

async function printTopStatements(): Promise<void> {
  const { rows } = await admin.query(
    `SELECT calls, round(mean_exec_time::numeric, 3) AS mean_ms, round(total_exec_time::numeric) AS total_ms,
            left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query
       FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY total_exec_time DESC LIMIT 15`,
  );
  console.table(rows);
}

// ------------------------------------------------------------------------------ the phases

/** The limit: K+2 unrelated single-row INSERT commits per "run". */
function rawInserts(): Workload {
  const pool = new pg.Pool({ connectionString: url, max: C });
  return {
    once: async () => {
      for (let i = 0; i < K + 2; i += 1) await pool.query({ name: 'r_ins', text: `INSERT INTO bench_raw (v) VALUES ($1)`, values: [i] });
    },
    close: () => pool.end(),
  };
}

/** Hand-rolled trivial run: insert, K step rows, complete — K+2 commits. */
function baseline(): Workload {
  const pool = new pg.Pool({ connectionString: url, max: C });
  return {
    once: async (token) => {
      const id = crypto.randomUUID();
      await pool.query({ name: 'b_ins', text: `INSERT INTO bench_runs (id, state) VALUES ($1, 'running')`, values: [id] });
      for (let i = 1; i <= K; i += 1) {
        if (i === 1) noteFirst(token);
        await pool.query({ name: 'b_step', text: `INSERT INTO bench_steps (run_id, n, result) VALUES ($1, $2, $3)`, values: [id, i, JSON.stringify(i)] });
      }
      await pool.query({ name: 'b_done', text: `UPDATE bench_runs SET state = 'completed', output = $2 WHERE id = $1`, values: [id, JSON.stringify(K)] });
    },
    close: () => pool.end(),
  };
}

/** Hand-rolled effects: per effect, reserve (insert) then record (update) around the call — 2K+2 commits. */
function baselineEffects(): Workload {
  const pool = new pg.Pool({ connectionString: url, max: C });
  return {
    once: async (token) => {
      const id = crypto.randomUUID();
      await pool.query({ name: 'be_ins', text: `INSERT INTO bench_runs (id, state) VALUES ($1, 'running')`, values: [id] });
      for (let i = 1; i <= K; i += 1) {
        await pool.query({ name: 'be_res', text: `INSERT INTO bench_steps (run_id, n, state) VALUES ($1, $2, 'reserved')`, values: [id, i] });
        if (i === 1) noteFirst(token);
        const r = await provider(`${id}:${i}`);
        await pool.query({ name: 'be_rec', text: `UPDATE bench_steps SET state = 'done', result = $3 WHERE run_id = $1 AND n = $2 AND state = 'reserved'`, values: [id, i, JSON.stringify(r)] });
      }
      await pool.query({ name: 'be_done', text: `UPDATE bench_runs SET state = 'completed' WHERE id = $1`, values: [id] });
    },
    close: () => pool.end(),
  };
}

/** Hand-rolled agent path: run, recorded answer, sealed contract, one SERIALIZABLE commit, done. */
function baselineAgent(): Workload {
  const pool = new pg.Pool({ connectionString: url, max: C });
  return {
    once: async (token) => {
      const id = crypto.randomUUID();
      await pool.query({ name: 'ba_ins', text: `INSERT INTO bench_runs (id, state) VALUES ($1, 'running')`, values: [id] });
      noteFirst(token);
      const decision = { priority: token.length % 2 === 0 ? 'high' : 'low' };
      await pool.query({ name: 'ba_ans', text: `INSERT INTO bench_steps (run_id, n, result) VALUES ($1, 1, $2)`, values: [id, JSON.stringify(decision)] });
      const body = JSON.stringify({ operations: [{ action: 'tickets.insert', input: { token, ...decision } }] });
      const contractId = crypto.randomUUID();
      await pool.query({ name: 'ba_seal', text: `INSERT INTO bench_contracts (id, run_id, body, hash, status) VALUES ($1, $2, $3::jsonb, md5($3::text), 'sealed')`, values: [contractId, id, body] });
      // SERIALIZABLE needs retries here too (SSI reports false positives on small tables).
      for (let attempt = 1; ; attempt += 1) {
        const client = await pool.connect();
        try {
          await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
          await client.query({ name: 'ba_lock', text: `SELECT body FROM bench_contracts WHERE id = $1 FOR UPDATE`, values: [contractId] });
          await client.query({ name: 'ba_tkt', text: `INSERT INTO bench_tickets (token, priority) VALUES ($1, $2)`, values: [token, decision.priority] });
          await client.query({ name: 'ba_done_c', text: `UPDATE bench_contracts SET status = 'committed' WHERE id = $1`, values: [contractId] });
          await client.query('COMMIT');
          break;
        } catch (error) {
          await client.query('ROLLBACK');
          // The engine's budget for conflicts, and its backoff (runtime/commit.ts).
          if ((error as { code?: string }).code !== '40001' || attempt >= 12) throw error;
          await new Promise((r) => setTimeout(r, Math.min(1_000, 20 * 2 ** attempt) * (0.5 + Math.random())));
        } finally {
          client.release();
        }
      }
      await pool.query({ name: 'ba_done', text: `UPDATE bench_runs SET state = 'completed' WHERE id = $1`, values: [id] });
    },
    close: () => pool.end(),
  };
}

/** DBOS Transact on the same database: its system tables in the schema `dbos`. */
async function startDbos(): Promise<{ direct: (w: string) => Workload; queue: (w: string) => Workload }> {
  const dbosTrivial = DBOS.registerWorkflow(
    async (k: number, token: string) => {
      let last = 0;
      for (let i = 1; i <= k; i += 1) {
        last = await DBOS.runStep(async () => {
          if (i === 1) noteFirst(token);
          return i;
        }, { name: `s${i}` });
      }
      return last;
    },
    { name: 'bench-trivial' },
  );
  // A DBOS step is checkpointed after it runs (no reservation before the call).
  const dbosEffects = DBOS.registerWorkflow(
    async (k: number, token: string) => {
      let last = 0;
      for (let i = 1; i <= k; i += 1) {
        const r = await DBOS.runStep(async () => {
          if (i === 1) noteFirst(token);
          return provider(`${DBOS.workflowID}:${i}`);
        }, { name: `call${i}` });
        last = r.key;
      }
      return last;
    },
    { name: 'bench-effects' },
  );
  DBOS.setConfig({ name: 'ratchet-bench', applicationVersion: '1', systemDatabaseUrl: url!, systemDatabasePoolSize: C + 4, logLevel: 'error' });
  await DBOS.launch();
  const queue = await DBOS.registerQueue('bench', { workerConcurrency: C });
  const fn = (w: string) => (w === 'effects' ? dbosEffects : dbosTrivial);
  return {
    direct: (w) => ({ once: async (token) => void (await fn(w)(K, token)), close: async () => {} }),
    queue: (w) => ({
      once: async (token) => {
        const handle = await DBOS.startWorkflow(fn(w), { queueName: queue.name })(K, token);
        await handle.getResult();
      },
      close: async () => {},
    }),
  };
}

function ratchetDirect(engine: Engine, wf: Workflow<any, any, any>): Workload {
  return {
    once: async (token) => {
      const r = await engine.run(wf, { k: K, token });
      if (r.state !== 'completed') throw new Error(`run ${r.runId} ended ${r.state}: ${JSON.stringify(r.error)}`);
    },
    close: async () => {},
  };
}

/**
 * The queue path: `client.execute` (the start registers the caller: the outcome comes with the
 * completion's NOTIFY), or `client.start` then `run.result()` (one more statement to register).
 */
async function ratchetQueue(engine: Engine, wf: Workflow<any, any, any>, how: 'execute' | 'start'): Promise<Workload> {
  const worker = engine.worker({ concurrency: C });
  await worker.start();
  return {
    once: async (token) => {
      if (how === 'execute') {
        await engine.client.execute(wf, { k: K, token }, { timeout: '60s' });
      } else {
        const run = await engine.client.start(wf, { k: K, token });
        await run.result({ timeout: '60s' });
      }
    },
    close: () => worker.stop(),
  };
}

/**
 * The queue path between processes: the caller's engine has no worker, so nothing is eager or
 * in memory — its start NOTIFYs `ratchet_work`, the worker's engine claims (one statement), and
 * the completion NOTIFYs `ratchet_done`, after which the caller reads the outcome. Two engines in
 * this process behave as two processes would (each has its own pool, listener and local hub).
 */
async function ratchetQueueAcross(workers: Engine, wf: Workflow<any, any, any>): Promise<Workload> {
  const caller = await createEngine({ database: url, workflows: [wf], actions: [insertTicket], poolSize: C + 4 });
  const worker = workers.worker({ concurrency: C });
  await worker.start();
  return {
    once: async (token) => void (await caller.client.execute(wf, { k: K, token }, { timeout: '60s' })),
    close: async () => {
      await worker.stop();
      await caller.close();
    },
  };
}

// ------------------------------------------------------------------------------ reporting

function commandLine(): string {
  return `pnpm bench --runs ${N} --warmup ${WARMUP} --steps ${K} --concurrency ${C} --workloads ${WORKLOADS.join(',')}${args.phases ? ` --phases '${args.phases}'` : ''}${ROUNDS > 1 ? ` --rounds ${ROUNDS}` : ''}`;
}

/** A phase of the report: its median round, and its ratios in every round. */
interface ReportRow extends PhaseResult {
  /** Runs/s ÷ the baseline's of the same workload, one per round. */
  toBaseline: number[];
  /** Runs/s ÷ DBOS direct's of the same workload, one per round (empty without DBOS). */
  toDbos: number[];
}

function baselineOf(rows: PhaseResult[], workload: string): PhaseResult | undefined {
  return rows.find((r) => r.workload === workload && r.name.startsWith('baseline'));
}
function dbosOf(rows: PhaseResult[], workload: string): PhaseResult | undefined {
  return rows.find((r) => r.workload === workload && r.name.includes('DBOS') && r.name.includes('direct'));
}

/** Each phase's median round by runs/s, with its ratios computed within each round. */
function medianRound(rounds: PhaseResult[][]): ReportRow[] {
  return (rounds[0] ?? []).map((first) => {
    const same = rounds.map((rows) => rows.find((r) => r.workload === first.workload && r.name === first.name)!);
    const ratios = (peerOf: (rows: PhaseResult[], workload: string) => PhaseResult | undefined) =>
      rounds.flatMap((rows, i) => {
        const peer = peerOf(rows, first.workload);
        return peer ? [same[i]!.runsPerSec / peer.runsPerSec] : [];
      });
    const byRate = [...same].sort((a, b) => a.runsPerSec - b.runsPerSec);
    return { ...byRate[Math.floor((byRate.length - 1) / 2)]!, toBaseline: ratios(baselineOf), toDbos: ratios(dbosOf) };
  });
}

function median(values: number[]): number {
  const v = [...values].sort((a, b) => a - b);
  const mid = Math.floor(v.length / 2);
  return v.length === 0 ? NaN : v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

function render(rows: ReportRow[]): string {
  const f = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : 'n/a');
  const ratio = (values: number[]) =>
    values.length === 0 ? 'n/a' : values.length === 1 ? f(values[0]!, 2) : `${f(median(values), 2)} (${f(Math.min(...values), 2)}–${f(Math.max(...values), 2)})`;
  const out = [
    `Command: \`${commandLine()}\` — ${N} runs per phase, ${C} in flight${
      ROUNDS > 1 ? `, ${ROUNDS} rounds: each phase's median round, and its ratios as the median (range) of the ratios within each round` : ''
    }.`,
    `PostgreSQL ${serverVersion} (${settings.map((s) => `${s.name}=${s.setting}`).join(', ')}), Node ${process.version}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB.`,
  ];
  for (const workload of WORKLOADS) {
    const group = rows.filter((r) => r.workload === workload);
    const steps = workload === 'agent' ? 'infer → seal → commit' : `${K} ${workload === 'effects' ? 'effects' : 'trivial steps'}`;
    out.push(
      '',
      `### ${workload}: ${steps} per run`,
      '',
      '| phase | runs/s | steps/s | × baseline | × DBOS direct | p50 ms | p99 ms | first step p50 ms | statements/run | statements/step | write txns/run | WAL bytes/run | Node CPU ms/run | Postgres CPU ms/run |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
      ...group.map(
        (r) =>
          `| ${r.name} | ${f(r.runsPerSec)} | ${f(r.stepsPerSec, 0)} | ${ratio(r.toBaseline)} | ${ratio(r.toDbos)} | ${f(r.p50)} | ${f(r.p99)} | ${f(r.firstStepP50, 2)} | ${f(r.statementsPerRun)} | ${f(r.statementsPerRun / (r.workload === 'agent' ? 3 : K), 2)} | ${f(r.writeTxnsPerRun)} | ${f(r.walBytesPerRun, 0)} | ${f(r.nodeCpuMsPerRun, 2)} | ${f(r.pgCpuMsPerRun, 2)} |`,
      ),
    );
  }
  return out.join('\n');
}

/** A grouped horizontal bar chart of runs/s, as SVG (no chart library needed). */
function chart(rows: PhaseResult[]): string {
  const rowH = 18;
  const labelW = 330;
  const barW = 420;
  const max = Math.max(...rows.map((r) => r.runsPerSec));
  let y = 30;
  const parts: string[] = [];
  for (const workload of WORKLOADS) {
    parts.push(`<text x="10" y="${y}" font-weight="bold">${workload}</text>`);
    y += 8;
    for (const r of rows.filter((x) => x.workload === workload)) {
      const w = Math.max(1, (r.runsPerSec / max) * barW);
      const color = r.name.startsWith('ratchet') ? '#2b6cb0' : r.name.startsWith('DBOS') ? '#c05621' : '#718096';
      parts.push(
        `<text x="${labelW - 6}" y="${y + 13}" text-anchor="end">${escapeXml(r.name)}</text>`,
        `<rect x="${labelW}" y="${y + 2}" width="${w.toFixed(1)}" height="${rowH - 4}" fill="${color}"/>`,
        `<text x="${labelW + w + 4}" y="${y + 13}">${r.runsPerSec.toFixed(0)} runs/s</text>`,
      );
      y += rowH;
    }
    y += 14;
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${labelW + barW + 110}" height="${y + 10}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="16" font-size="13">Runs per second, ${escapeXml(commandLine())} (higher is better)</text>
${parts.join('\n')}
</svg>
`;
}

function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}
