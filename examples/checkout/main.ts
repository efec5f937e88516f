/**
 * `pnpm demo:checkout`: a durable checkout on an embedded PostgreSQL, with its worker process SIGKILLed
 * in the middle of charging the card. A second worker resumes the run where it stopped: the
 * steps already recorded are not run again, the interrupted charge is reconciled with the
 * provider instead of repeated, and the card is charged once.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createEngine } from '@ratchet/engine';
import { checkout, PAYMENTS_DDL } from './workflow.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

const engine = await createEngine({ workflows: [checkout] });
const children: ChildProcess[] = [];
try {
  await engine.migrate();
  await engine.pool.query(PAYMENTS_DDL);
  const paymentsUrl = engine.pool.options.connectionString!;

  const orderId = `order-${Date.now().toString(36)}`;
  const run = await engine.client.start(checkout, { orderId, sku: 'ratchet-mug', cents: 1_500 });
  console.log(`started run ${run.runId} (${orderId})`);

  const first = startWorker(paymentsUrl);
  await first.charging;
  first.child.kill('SIGKILL');
  await first.exited;
  console.log(`worker ${first.child.pid} SIGKILLed while the card was being charged`);

  const second = startWorker(paymentsUrl);
  console.log(`worker ${second.child.pid} started; waiting for the run to finish…`);
  const output = await run.result({ timeout: '60s' });
  second.child.kill('SIGTERM');
  await second.exited;

  await printTimeline(run.runId, output);
} finally {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await engine.close();
}

function startWorker(paymentsUrl: string) {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
    env: { ...process.env, PAYMENTS_URL: paymentsUrl },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  const charging = new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('charging') && resolve()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { child, charging, exited };
}

async function printTimeline(runId: string, output: unknown): Promise<void> {
  const { rows: events } = await engine.pool.query(
    `SELECT created_at AS at, 'event ' || event_type AS what, actor_id AS who FROM ratchet.events WHERE task_id = $1`,
    [runId],
  );
  const { rows: ops } = await engine.pool.query(
    `SELECT coalesce(completed_at, created_at) AS at,
            format('%s %s: %s (attempt %s)%s', kind, step_key, state, attempt,
                   CASE WHEN provider_reference IS NOT NULL THEN ' via ' || provider_reference ELSE '' END) AS what,
            NULL AS who
       FROM ratchet.operations WHERE task_id = $1
     UNION ALL
     SELECT reserved_at, format('%s %s: reserved (attempt %s)', kind, step_key, attempt), NULL
       FROM ratchet.operations WHERE task_id = $1 AND reserved_at IS NOT NULL`,
    [runId],
  );
  const { rows: payments } = await engine.pool.query(
    `SELECT charged_at AS at, format('provider charged %s cents', amount_cents) AS what, 'pid ' || charged_by_pid AS who
       FROM demo_payments WHERE idempotency_key LIKE $1`,
    [`${runId}:%`],
  );
  const all = [...events, ...ops, ...payments].sort((a, b) => a.at - b.at);
  const t0 = all[0].at.getTime();
  console.log('\ntimeline');
  for (const row of all) console.log(`  +${String(row.at.getTime() - t0).padStart(5)} ms  ${row.what}${row.who ? `  [${row.who}]` : ''}`);
  console.log(`\noutput: ${JSON.stringify(output)}`);
  console.log(`card charged ${payments.length} time(s) for ${payments.length} idempotency key(s).`);
}
