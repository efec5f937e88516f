/**
 * The chaos harness: several worker processes on one PostgreSQL of its own, a mixed workload
 * started at a steady rate, and, while it runs,
 *   - a random ready worker SIGKILLed every 0.5–2 s and started again at once,
 *   - Postgres restarted with fast and immediate shutdown (alternating) at random moments,
 *   - a random engine backend terminated (pg_terminate_backend) every 2–6 s;
 * then the chaos stops, every run is given time to finish, the workers are stopped, and the
 * invariants are checked from the database (invariants.ts).
 *
 *   const report = await runChaos({ durationMs: 60_000, workers: 3 });
 *   expect(report.violations).toEqual([]);
 *
 * The server is the harness's own (a temporary data dir, its own port), never the test suite's
 * shared one, whether or not DATABASE_URL is set: restarting it must not disturb other files.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createEngine, type Engine } from '@ratchet/engine';
import { startEmbedded } from '../../packages/engine/src/embedded/embedded.js';
import { pgCtlPath, postgresOsUser, run } from '../../packages/engine/src/embedded/binaries.js';
import { checkInvariants, VersionWatch, type InvariantReport } from './invariants.js';
import { CHAOS_DDL, chaosWorkflows, nap, order, parent, signalled, triage, USERS } from './workload.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

export interface ChaosOptions {
  /** How long the chaos lasts (runs are started and processes killed). */
  durationMs: number;
  /** Worker processes. Default 3. */
  workers?: number;
  /** Runs started per second. Default 4. */
  rate?: number;
  /** Postgres restarts during the chaos; default one per 60 s of it, at least 2. */
  restarts?: number;
  /** After the chaos, how long runs may take to finish before the unfinished count as violations. Default 120 s. */
  drainMs?: number;
  /** Progress lines. Default: none. */
  log?: (line: string) => void;
  /** Leave the server running with its data when there are violations (its URL is logged), to investigate. Default false. */
  keepOnViolation?: boolean;
  /** Seed-free randomness is deliberate; pass a RATCHET_FAULTS spec to add engine faults to every worker. */
  faults?: string;
}

export interface ChaosReport {
  readonly durationMs: number;
  readonly workers: number;
  readonly started: number;
  readonly kills: number;
  readonly workerStarts: number;
  readonly restarts: { fast: number; immediate: number };
  readonly backendsTerminated: number;
  readonly drainMs: number;
  readonly versionSamples: number;
  readonly counts: InvariantReport['counts'];
  readonly violations: string[];
  /** Runs a worker had in flight for over a minute when the drain ended (worker.inFlight()), per worker. */
  readonly stuckRuns: string[];
}

interface Slot {
  index: number;
  child?: ChildProcess;
  ready: boolean;
  /** Set just before the harness kills or stops it: any other exit is a crash. */
  expectedExit: boolean;
  output: string;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const workers = options.workers ?? 3;
  const rate = options.rate ?? 4;
  const restarts = options.restarts ?? Math.max(2, Math.round(options.durationMs / 60_000));
  const log = options.log ?? (() => {});
  const violations: string[] = [];
  const stuckRuns: string[] = [];
  const dataRoot = await mkdtemp(join(tmpdir(), 'ratchet-chaos-'));
  await chmod(dataRoot, 0o755); // the server runs as `postgres` when we are root
  const dataDir = join(dataRoot, 'data');
  const server = await startEmbedded({ dataDir, database: 'chaos', settings: { max_connections: '200' } });
  const monitor = new pg.Pool({ connectionString: server.url, max: 3, connectionTimeoutMillis: 5_000 });
  monitor.on('error', () => {});
  monitor.on('connect', (c) => c.on('error', () => {}));
  let engine: Engine | undefined;
  const slots: Slot[] = [];
  let stopping = false;
  let workerStarts = 0;
  let keep = false;
  try {
    engine = await createEngine({ database: server.url, workflows: chaosWorkflows, poolSize: 8 });
    await engine.migrate();
    await monitor.query(CHAOS_DDL);

    const spawnSlot = (slot: Slot): void => {
      workerStarts += 1;
      slot.ready = false;
      slot.expectedExit = false;
      slot.output = '';
      const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
        cwd: ROOT,
        env: { ...process.env, DATABASE_URL: server.url, PROVIDER_URL: server.url, RATCHET_FAULTS: options.faults ?? '' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      slot.child = child;
      const keep = (d: Buffer) => {
        slot.output = (slot.output + d.toString()).slice(-4_000);
        if (!slot.ready && slot.output.includes('ready ')) slot.ready = true;
      };
      child.stdout!.on('data', keep);
      child.stderr!.on('data', keep);
      child.on('exit', (code, signal) => {
        if (slot.child !== child) return;
        slot.child = undefined;
        slot.ready = false;
        if (slot.expectedExit) return;
        violations.push(`worker ${slot.index} (pid ${child.pid}) exited by itself (${signal ?? code}): ${slot.output.trim().split('\n').slice(-6).join(' | ')}`);
        if (!stopping) spawnSlot(slot);
      });
    };
    for (let i = 0; i < workers; i += 1) {
      const slot: Slot = { index: i, ready: false, expectedExit: false, output: '' };
      slots.push(slot);
      spawnSlot(slot);
    }

    const chaosEnds = Date.now() + options.durationMs;
    const during = () => Date.now() < chaosEnds;
    const watch = new VersionWatch();
    let kills = 0;
    let backendsTerminated = 0;
    const restarted = { fast: 0, immediate: 0 };
    const pending = new Set<Promise<void>>();
    const track = (p: Promise<void>) => {
      pending.add(p);
      void p.finally(() => pending.delete(p));
    };

    // Load: starts (retried with the same idempotency key through restarts) and signals.
    const started = { n: 0 };
    const load = (async () => {
      for (let i = 1; during(); i += 1) {
        track(startOne(engine!, i, started, violations));
        await sleep(1_000 / rate);
      }
    })();

    const killer = (async () => {
      while (during()) {
        await sleep(500 + Math.random() * 1_500);
        const ready = slots.filter((s) => s.ready && s.child);
        const slot = ready[Math.floor(Math.random() * ready.length)];
        if (!slot || !during()) continue;
        const child = slot.child!;
        slot.expectedExit = true;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
        kills += 1;
        spawnSlot(slot);
      }
    })();

    // Restarts at random moments in the middle 80 % of the chaos, alternating fast and immediate.
    const restartAt = Array.from({ length: restarts }, (_, k) => (options.durationMs * (0.1 + (0.8 * (k + Math.random())) / restarts)));
    const restarter = (async () => {
      const t0 = chaosEnds - options.durationMs;
      for (const [k, at] of restartAt.entries()) {
        await sleep(Math.max(0, t0 + at - Date.now()));
        const mode = k % 2 === 0 ? 'fast' : 'immediate';
        log(`restarting Postgres (${mode})`);
        await restartPostgres(dataDir, mode);
        restarted[mode] += 1;
      }
    })();

    const terminator = (async () => {
      while (during()) {
        await sleep(2_000 + Math.random() * 4_000);
        const { rows } = await monitor
          .query<{ n: number }>(
            `SELECT count(pg_terminate_backend(pid))::int AS n FROM (SELECT pid FROM pg_stat_activity
               WHERE datname = current_database() AND application_name = 'ratchet' AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1) s`,
          )
          .catch(() => ({ rows: [{ n: 0 }] }));
        backendsTerminated += rows[0]!.n;
      }
    })();

    const watcher = (async () => {
      while (!stopping) {
        await watch.sample(monitor).catch(() => {});
        if (watch.samples % 10 === 0) log(`${started.n} started, ${kills} kills, ${restarted.fast + restarted.immediate} restarts`);
        await sleep(1_000);
      }
    })();

    await Promise.all([load, killer, restarter, terminator]);
    log(`chaos over: ${started.n} started, ${kills} kills, ${restarted.fast}+${restarted.immediate} restarts; draining`);
    const drainStart = Date.now();
    const drainDeadline = drainStart + (options.drainMs ?? 120_000);
    while (pending.size > 0 && Date.now() < drainDeadline) await Promise.race([...pending, sleep(1_000)]);
    for (;;) {
      const { rows } = await monitor
        .query<{ open: number; undispatched: number }>(
          `SELECT (SELECT count(*)::int FROM ratchet.tasks WHERE state NOT IN ('completed', 'failed', 'cancelled', 'parked')) AS open,
                  (SELECT count(*)::int FROM ratchet.outbox WHERE dispatched_at IS NULL) AS undispatched`,
        )
        .catch(() => ({ rows: [{ open: -1, undispatched: -1 }] }));
      if (rows[0]!.open === 0 && rows[0]!.undispatched === 0) break;
      if (Date.now() > drainDeadline) {
        log(`drain timed out: ${rows[0]!.open} runs open, ${rows[0]!.undispatched} messages undispatched`);
        break;
      }
      await sleep(500);
    }
    const drainMs = Date.now() - drainStart;
    for (const slot of slots) {
      const lines = slot.output.trim().split('\n');
      const stats = lines.filter((l) => l.startsWith('stats ')).at(-1);
      log(`worker ${slot.index} (pid ${slot.child?.pid}, ${slot.ready ? 'ready' : 'not ready'}): ${stats ?? lines.at(-1) ?? ''}`);
      // What its stuck runs were doing (worker.inFlight()), when it has any.
      const stuck = lines.filter((l) => l.startsWith('stuck ')).at(-1);
      if (stuck) {
        log(`worker ${slot.index} ${stuck}`);
        stuckRuns.push(`worker ${slot.index}: ${stuck.slice('stuck '.length)}`);
      }
    }
    stopping = true;
    await watcher;
    await stopWorkers(slots, violations);
    await watch.sample(monitor).catch(() => {});
    violations.push(...watch.violations);

    const invariants = await checkInvariants(monitor);
    violations.push(...invariants.violations);
    const topLevel = invariants.counts.runs - (invariants.counts.byWorkflow['chaos-kid'] ?? 0);
    if (topLevel !== started.n) violations.push(`${started.n} runs started by the harness, ${topLevel} in the database (children aside)`);
    // What the stuck runs look like, to debug from the report alone (the database is gone after it).
    const stuck = await monitor.query(
      `SELECT t.id, t.workflow_name, t.state, t.lease_owner, t.due_at, t.claim_count, t.concurrency_key,
              (SELECT string_agg(e.event_type, ',' ORDER BY e.seq) FROM ratchet.events e WHERE e.task_id = t.id) AS events,
              (SELECT string_agg(o.step_key || ':' || o.state, ',' ORDER BY o.seq) FROM ratchet.operations o WHERE o.task_id = t.id) AS steps
         FROM ratchet.tasks t WHERE t.state NOT IN ('completed', 'failed', 'cancelled') LIMIT 5`,
    );
    for (const row of stuck.rows) log(`stuck: ${JSON.stringify(row)}`);
    if (violations.length > 0 && options.keepOnViolation) {
      keep = true;
      log(`kept for investigation: ${server.url} (data ${dataDir}; stop with pg_ctl stop -D ${dataDir})`);
    }
    return {
      durationMs: options.durationMs,
      workers,
      started: started.n,
      kills,
      workerStarts,
      restarts: restarted,
      backendsTerminated,
      drainMs,
      stuckRuns,
      versionSamples: watch.samples,
      counts: invariants.counts,
      violations,
    };
  } finally {
    stopping = true;
    for (const slot of slots) {
      slot.expectedExit = true;
      slot.child?.kill('SIGKILL');
    }
    await engine?.close().catch(() => {});
    await monitor.end().catch(() => {});
    if (!keep) {
      await stopPostgres(dataDir);
      await rm(dataRoot, { recursive: true, force: true });
    }
  }
}

/** Starts run `i` (its kind by i), retrying through restarts with the same key; a chaos-signal run then gets its signal. */
async function startOne(engine: Engine, i: number, started: { n: number }, violations: string[]): Promise<void> {
  const key = `chaos-${i}`;
  const kind = i % 5;
  const start = (): Promise<{ runId: string }> => {
    switch (kind) {
      case 0:
        return engine.client.start(order, { n: i, amount: 1 + (i % 97) }, { idempotencyKey: key, concurrencyKey: `account-${i % 7}` });
      case 1:
        return engine.client.start(triage, { ticket: `ticket ${i}: ${i % 3 === 0 ? 'printer jam' : 'login fails'}`, userId: 1 + (i % USERS), dedupeKey: key }, { idempotencyKey: key });
      case 2:
        return engine.client.start(nap, { ms: 100 + ((i * 37) % 1_400) }, { idempotencyKey: key });
      case 3:
        return engine.client.start(signalled, { n: i }, { idempotencyKey: key });
      default:
        return engine.client.start(parent, { n: i }, { idempotencyKey: key });
    }
  };
  const handle = await persist(start, `start ${key}`, violations);
  if (!handle) return;
  started.n += 1;
  if (kind === 3) {
    await sleep(Math.random() * 3_000);
    await persist(() => engine.client.signal(handle.runId, 'go', { token: key }, { idempotencyKey: `go-${i}` }), `signal ${key}`, violations);
  }
}

/** Repeats a call that is safe to repeat (an idempotent start or signal) until it succeeds; a minute of failures is a violation. */
async function persist<T>(call: () => Promise<T>, what: string, violations: string[]): Promise<T | undefined> {
  const deadline = Date.now() + 60_000;
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    try {
      return await call();
    } catch (error) {
      if (Date.now() > deadline) {
        violations.push(`${what} failed for a minute: ${error instanceof Error ? error.message : String(error)}`);
        return undefined;
      }
      await sleep(delay);
    }
  }
}

/** SIGTERM (a graceful stop), SIGKILL after 20 s; a worker that needed the SIGKILL is reported. */
async function stopWorkers(slots: Slot[], violations: string[]): Promise<void> {
  await Promise.all(
    slots.map(async (slot) => {
      const child = slot.child;
      if (!child) return;
      slot.expectedExit = true;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        violations.push(`worker ${slot.index} did not stop within 20 s of SIGTERM: ${slot.output.trim().split('\n').slice(-3).join(' | ')}`);
        child.kill('SIGKILL');
      }, 20_000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

/** `pg_ctl restart` on the harness's server; `--log` keeps the new postmaster off our pipes. */
async function restartPostgres(dataDir: string, mode: 'fast' | 'immediate'): Promise<void> {
  const { code, output } = await run(
    await pgCtlPath(),
    ['restart', '--wait', '--timeout=120', `--mode=${mode}`, `--pgdata=${dataDir}`, `--log=${dataDir}.log`],
    await postgresOsUser(),
    dataDir,
  );
  if (code !== 0) throw new Error(`pg_ctl restart -m ${mode} failed (${code}): ${output}`);
}

async function stopPostgres(dataDir: string): Promise<void> {
  await run(await pgCtlPath(), ['stop', '--wait', '--mode=immediate', `--pgdata=${dataDir}`], await postgresOsUser(), dataDir).catch(() => {});
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
