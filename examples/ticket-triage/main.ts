/**
 * `pnpm demo`: the ticket-triage agent on an embedded PostgreSQL.
 *
 * A batch of support tickets is started. A worker process classifies them with a stochastic
 * model, seals each decision into a contract and commits it — and is SIGKILLed between sealing a
 * contract and committing it. A second worker resumes every unfinished run from its records:
 * the model is not asked again, the sealed contract is committed once. Two tickets fail on
 * purpose: one names a user who does not exist, one reports an incident already ticketed.
 * Billing decisions wait for a person: the first is approved from the command line
 * (`pnpm demo:approve <runId>`), the second declined from code (its contract is abandoned), the
 * rest approved from code — while they wait, no worker holds them.
 * The table at the end is read from the database, not from memory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { canonicalJson, sha256Hex } from '@ratchet/sdk';
import { createEngine } from '@ratchet/engine';
import { APP_DDL } from './app.js';
import { engineOptions } from './engine.js';
import { triage } from './workflow.js';

const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));
const APPROVE = fileURLToPath(new URL('./approve.ts', import.meta.url));

const TICKETS: { ticket: string; userId: number; incident?: string }[] = [
  { ticket: 'The office printer is on fire', userId: 1, incident: 'printer-3f' },
  { ticket: 'I was charged twice for my invoice', userId: 2 },
  { ticket: 'Locked out after 2fa reset', userId: 3 },
  { ticket: 'Laptop screen flickers', userId: 4 },
  { ticket: 'Refund for the duplicate card charge, please', userId: 5 },
  { ticket: 'Cannot login since this morning', userId: 6 },
  { ticket: 'How do I export my data?', userId: 7 },
  { ticket: "Printer on floor 3 is smoking'; DROP TABLE triage_demo.tickets; --", userId: 8, incident: 'printer-3f' },
  { ticket: 'Password reset mail never arrives', userId: 9 },
  { ticket: 'Please close my account', userId: 404 }, // no such user: the contract is rejected
];

const demoStart = new Date();
const engine = await createEngine(engineOptions);
const children: ChildProcess[] = [];
try {
  await engine.migrate();
  await engine.pool.query(APP_DDL);
  await engine.pool.query(`INSERT INTO triage_demo.users (id, name) SELECT g, 'user ' || g FROM generate_series(1, 9) g`);
  const url = engine.pool.options.connectionString!;

  const runs = await Promise.all(TICKETS.map((t) => engine.client.start(triage, t)));
  console.log(`started ${runs.length} triage runs`);
  const reviews = review(runs.map((r) => r.runId));

  const first = startWorker(url, { PAUSE_BEFORE_COMMIT: '4' });
  const paused = await first.line(/about to commit (\S+)/);
  first.child.kill('SIGKILL');
  await first.exited;
  console.log(`worker ${first.child.pid} SIGKILLed between sealing and committing run ${paused[1]}`);

  const second = startWorker(url, {});
  console.log(`worker ${second.child.pid} resumes the rest`);
  await Promise.all(runs.map((r) => r.result({ timeout: '60s' }).catch(() => undefined)));
  await reviews;
  second.child.kill('SIGTERM');
  await second.exited;

  await report(runs.map((r) => r.runId), first.child.pid!);
} finally {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await engine.close();
}

/** The reviewer: a verdict for each run that waits for approval, until every run has finished. */
async function review(runIds: string[]): Promise<void> {
  const done = new Set<string>();
  for (;;) {
    const { rows } = await engine.pool.query<{ id: string; state: string; hash: string | null }>(
      `SELECT t.id, t.state, c.body_hash AS hash FROM ratchet.tasks t LEFT JOIN ratchet.contracts c ON c.task_id = t.id AND c.status = 'sealed'
        WHERE t.id = ANY($1) ORDER BY t.id`,
      [runIds],
    );
    if (rows.every((r) => ['completed', 'failed', 'cancelled'].includes(r.state))) return;
    for (const r of rows) {
      if (r.state !== 'waiting' || !r.hash || done.has(r.id)) continue;
      done.add(r.id);
      if (done.size === 1) {
        const cli = spawn(process.execPath, ['--import', 'tsx', APPROVE, r.id, '--by', 'ops-on-call'], { stdio: ['ignore', 'pipe', 'inherit'] });
        await new Promise((resolve) => cli.on('exit', resolve));
        console.log(`approved run ${r.id} from the command line: pnpm demo:approve ${r.id}`);
      } else {
        const approve = done.size !== 2;
        await engine.client.signal(r.id, 'approval', { approve, hash: r.hash, by: 'billing-lead' });
        console.log(`${approve ? 'approved' : 'declined'} run ${r.id} from code: client.signal(runId, 'approval', { approve: ${approve}, hash })`);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function startWorker(url: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER], { env: { ...process.env, MODEL_URL: url, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const line = (pattern: RegExp) =>
    new Promise<RegExpMatchArray>((resolve) => {
      const check = () => {
        const match = out.match(pattern);
        if (match) resolve(match);
        else setTimeout(check, 20);
      };
      check();
    });
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  return { child, line, exited };
}

async function report(runIds: string[], killedPid: number): Promise<void> {
  const { rows } = await engine.pool.query(
    `SELECT t.id AS run, t.state, t.output, t.input->>'ticket' AS ticket,
            (SELECT count(DISTINCT actor_id) FROM ratchet.events e WHERE e.task_id = t.id AND e.event_type IN ('claimed', 'lease_reclaimed')) AS workers,
            c.body, c.body_hash, c.status AS contract, c.error_detail->>'reason' AS reason,
            (SELECT o.result->'hash' FROM ratchet.operations o WHERE o.task_id = t.id AND o.kind = 'seal') #>> '{}' AS sealed_hash,
            (SELECT (o.result->>'samples')::int FROM ratchet.operations o WHERE o.task_id = t.id AND o.kind = 'infer') AS samples,
            (SELECT count(*) FROM triage_demo.model_calls m WHERE m.ticket = t.input->>'ticket')::int AS model_calls,
            -- Calls the killed worker made (its answers may never have been recorded).
            (SELECT count(*) FROM triage_demo.model_calls m WHERE m.ticket = t.input->>'ticket' AND m.pid = $2)::int AS killed_calls,
            -- Calls after the answer was recorded: there must be none (replay never asks the model).
            (SELECT count(*) FROM triage_demo.model_calls m, ratchet.operations o
              WHERE m.ticket = t.input->>'ticket' AND o.task_id = t.id AND o.kind = 'infer' AND m.at > o.completed_at)::int AS late_calls,
            (SELECT count(*) FROM triage_demo.tickets k WHERE k.summary = t.input->>'ticket')::int AS rows
       FROM ratchet.tasks t LEFT JOIN ratchet.contracts c ON c.task_id = t.id
      WHERE t.id = ANY($1) ORDER BY t.id`,
    [runIds, killedPid],
  );
  console.log('\n   # | ticket                                   | decision          | contract  | hash ok | model calls / samples | rows | workers');
  console.log('  ---+------------------------------------------+-------------------+-----------+---------+-----------------------+------+--------');
  let allOnce = true;
  let allHashes = true;
  let allCalls = true;
  let lostCalls = 0;
  rows.forEach((r, i) => {
    const out = r.output ?? {};
    const hashOk = r.body_hash === sha256Hex(canonicalJson(r.body)) && r.body_hash === r.sealed_hash && r.body_hash === out.hash;
    const expectedRows = r.contract === 'committed' ? 1 : 0;
    allOnce &&= r.rows === expectedRows;
    allHashes &&= hashOk;
    // Every call is a recorded sample, or an answer the killed worker never got to record.
    const lost = r.model_calls - r.samples;
    allCalls &&= r.late_calls === 0 && lost >= 0 && lost <= r.killed_calls;
    lostCalls += lost;
    console.log(
      `  ${String(i + 1).padStart(2)} | ${truncate(r.ticket, 40).padEnd(40)} | ${`${out.priority ?? '?'} / ${out.team ?? '?'}`.padEnd(17)} | ${String(r.contract).padEnd(9)} | ${hashOk ? 'yes' : 'NO '}     | ${`${r.model_calls} / ${r.samples}`.padEnd(21)} | ${String(r.rows).padEnd(4)} | ${r.workers}`,
    );
  });
  const rejected = rows.filter((r) => r.contract === 'failed');
  console.log('\nrejected or abandoned:');
  for (const r of rejected) console.log(`  - "${truncate(r.ticket, 50)}": ${r.reason} — ${r.output?.reason ?? ''}`);
  const stats = await engine.contracts.stats({ since: demoStart });
  console.log(`\ncontracts: ${stats.committed} committed, ${stats.failed} failed, backlog ${stats.sealedBacklog}, seal→commit p50 ${Math.round(stats.sealToCommitP50Ms ?? 0)} ms`);
  console.log(`tickets written exactly once per committed contract: ${allOnce ? 'yes' : 'NO'}`);
  console.log(`contract hashes identical (stored = recomputed = sealed = returned): ${allHashes ? 'yes' : 'NO'}`);
  console.log(
    `model never asked again once an answer was recorded: ${allCalls ? 'yes' : 'NO'} ` +
      `(${lostCalls} call(s) lost with the killed worker before their answers were recorded)`,
  );
  if (!allOnce || !allHashes || !allCalls) process.exitCode = 1;
}

function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
