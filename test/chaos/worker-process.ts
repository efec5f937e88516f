/**
 * A chaos worker process: a worker for the chaos workload and an outbox relay (recording every
 * delivery in chaos_published), on DATABASE_URL, until it is SIGKILLed by the harness or sent
 * SIGTERM. Prints "ready <workerId>" once both run. It must survive its database going away: an
 * exit on its own is a violation the harness reports, with this process's output.
 * RATCHET_FAULTS (faults.ts) applies, e.g. `duringLeaseRenewal:delay=300@*`.
 */
import { createEngine } from '@ratchet/engine';
import { faultsFromEnv } from '@ratchet/engine/testing';
import { appActions, appChecks, appTables } from '../fixtures/triage.js';
import { chaosWorkflows, EFFECT_TIMEOUT_MS } from './workload.js';

const concurrency = Number(process.env.CHAOS_CONCURRENCY ?? 8);
/** Longer than an order's worst case (20 effect attempts of 2 s are not reached; a restart costs seconds). */
const STUCK_MS = 60_000;
let errors = 0;
let lastError = '';
const engine = await createEngine({
  database: process.env.DATABASE_URL!,
  workflows: chaosWorkflows,
  actions: appActions,
  checks: appChecks,
  contractTables: appTables,
  poolSize: concurrency + 6,
  leaseMs: Number(process.env.LEASE_MS ?? 2_000),
  effectTimeout: EFFECT_TIMEOUT_MS,
  effectMargin: 300,
  maxClaims: 1_000, // SIGKILLs every second or so are the test, not a poison pill
  faults: faultsFromEnv(),
  onError: (error) => {
    errors += 1;
    lastError = error instanceof Error ? error.message : String(error);
  },
});
const worker = engine.worker({ concurrency, pollMs: 500, shutdownGraceMs: 0 });
const relay = engine.relay({
  pollMs: 500,
  publishTimeout: '5s',
  backoff: { initial: '100ms', max: '1s' },
  publish: async (messages, { pool }) => {
    await pool.query(
      `INSERT INTO chaos_published (message_id, key, attempt, pid) SELECT m.id, m.key, m.attempt, $4
         FROM unnest($1::uuid[], $2::text[], $3::int[]) AS m(id, key, attempt)`,
      [messages.map((m) => m.id), messages.map((m) => m.key), messages.map((m) => m.attempt), process.pid],
    );
  },
});

// Starting needs the database (schema check, LISTEN): a worker (re)started while Postgres
// restarts waits for it, as a deployed worker under a supervisor would.
for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
  try {
    await worker.start();
    await relay.start();
    break;
  } catch (error) {
    process.stdout.write(`start failed, retrying: ${error instanceof Error ? error.message : String(error)}\n`);
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}
process.stdout.write(`ready ${worker.workerId}\n`);
// What the harness shows for a worker when a run is stuck: its counters and the last error it survived.
setInterval(() => process.stdout.write(`stats ${JSON.stringify({ ...worker.stats, relay: relay.stats, errors, lastError })}\n`), 2_000).unref();
// A run in flight for far longer than any of the workload's steps takes is stuck: say where.
setInterval(() => {
  const stuck = worker.inFlight().filter((run) => run.forMs > STUCK_MS);
  if (stuck.length > 0) process.stdout.write(`stuck ${JSON.stringify(stuck.slice(0, 5))}\n`);
}, 2_000).unref();
process.on('SIGTERM', () => {
  void (async () => {
    await relay.stop().catch(() => {});
    await worker.stop().catch(() => {});
    await engine.close().catch(() => {});
    process.stdout.write(`stopped ${JSON.stringify({ ...worker.stats, errors })}\n`);
    process.exit(0);
  })();
});
