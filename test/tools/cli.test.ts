/**
 * Every `ratchet` command against a real database, output checked (tables and --json): the
 * commands run in-process through `runCli` (the whole program, minus process globals) on a
 * fresh database that a test engine's worker serves; the bin itself is spawned for exit codes,
 * the one-line error, and a worker process stopped gracefully by SIGTERM.
 */
import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { COMMANDS, runCli } from '../../packages/engine/src/cli/main.js';
import { createTestEngine, type TestEngine } from '@ratchet/engine/testing';
import { actions, approval, charge, flaky, flakyFlow, reminder } from './fixtures/workflows.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../packages/engine/bin/ratchet.mjs', import.meta.url));
const MODULE = 'test/tools/fixtures/workflows.ts';
const TENANT = '5b1f4a8e-3c2d-4e6f-8a9b-0c1d2e3f4a5b';

let t: TestEngine;

function sink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  return {
    stream: new Writable({
      write(chunk, _enc, done) {
        chunks.push(String(chunk));
        done();
      },
    }),
    text: () => chunks.join(''),
  };
}

async function ratchet(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out = sink();
  const err = sink();
  const code = await runCli(args, { stdout: out.stream, stderr: err.stream, env: { ...process.env, DATABASE_URL: t.url }, cwd: ROOT });
  return { code, out: out.text(), err: err.text() };
}

async function ok(...args: string[]): Promise<string> {
  const r = await ratchet(...args);
  expect(r.err, `ratchet ${args.join(' ')}`).not.toMatch(/^ratchet: /m);
  expect(r.code, `ratchet ${args.join(' ')}: ${r.err}`).toBe(0);
  return r.out;
}

function spawnBin(args: string[], env: NodeJS.ProcessEnv = {}): { done: Promise<{ code: number | null; out: string; err: string }>; child: ReturnType<typeof spawn>; out: () => string } {
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...process.env, DATABASE_URL: t.url, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  return { child, out: () => out, done: new Promise((resolve) => child.on('exit', (code) => resolve({ code, out, err }))) };
}

async function until<T>(check: () => Promise<T | undefined | false>, what: string, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

beforeAll(async () => {
  t = await createTestEngine({ adminUrl: inject('adminUrl'), workflows: [reminder, approval, charge, flakyFlow], actions, effectMargin: '1s' });
  await t.worker();
});
afterAll(async () => {
  await t?.close();
});

describe('help and errors', () => {
  it('prints an overview and --help for every command', async () => {
    const overview = await ok('--help');
    for (const c of COMMANDS) expect(overview).toContain(c.name);
    for (const c of COMMANDS) {
      const help = await ok(c.name, '--help');
      expect(help).toContain(`Usage: ratchet ${c.name}`);
      expect(help).toContain('--database <url>');
      if (c.json) expect(help).toContain('--json');
    }
  });

  it('fails with one line and a non-zero exit', async () => {
    const unknown = await ratchet('frobnicate');
    expect(unknown).toMatchObject({ code: 2, out: '' });
    expect(unknown.err).toBe(`ratchet: CLI_USAGE: unknown command "frobnicate"; run 'ratchet --help' for the list\n`);
    const badFlag = await ratchet('list', '--colour');
    expect(badFlag.code).toBe(2);
    expect(badFlag.err.trim().split('\n')).toHaveLength(1);
    const badId = await ratchet('show', 'not-a-uuid');
    expect(badId).toMatchObject({ code: 1, err: 'ratchet: VALIDATION: runId: must be a UUID\n' });
    const missing = await ratchet('show', '0190f5c2-0000-7000-8000-000000000000');
    expect(missing).toMatchObject({ code: 1, err: 'ratchet: NOT_FOUND: no run 0190f5c2-0000-7000-8000-000000000000\n' });
    const badState = await ratchet('list', '--state', 'snoozing');
    expect(badState.code).toBe(2);
    expect(badState.err).toContain('unknown state "snoozing"');
  });

  it('the bin exits non-zero with the one line (spawned)', async () => {
    const r = await spawnBin(['cancel', 'nope']).done;
    expect(r.code).toBe(1);
    expect(r.err).toBe('ratchet: VALIDATION: runId: must be a UUID\n');
    const usage = await spawnBin(['start']).done;
    expect(usage.code).toBe(2);
    expect(usage.err).toBe('ratchet: CLI_USAGE: missing <workflow>\n');
  });
});

describe('runs', () => {
  it('migrate: up to date', async () => {
    expect(await ok('migrate')).toMatch(/^schema up to date \(\d+ migrations\)\n$/);
    expect(JSON.parse(await ok('migrate', '--json'))).toMatchObject({ applied: 0, pending: 0 });
  });

  it('start (validated by the module), list, show: a timeline of steps, the sleep target, events, a trace link', async () => {
    const runId = (await ok('start', 'reminder', '--module', MODULE, '--input', '{"to":"ada"}')).trim();
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);
    const invalid = await ratchet('start', 'reminder', '--module', MODULE, '--input', '{"to":7}');
    expect(invalid.code).toBe(1);
    expect(invalid.err).toMatch(/^ratchet: VALIDATION: input\.to: /);
    await until(async () => (await t.engine.client.get(runId)).state === 'sleeping', 'the reminder to sleep');

    const table = await ok('list', '--workflow', 'reminder');
    expect(table.split('\n')[0]).toMatch(/^RUN\s+WORKFLOW\s+STATE\s+CREATED\s+UPDATED\s+DETAIL$/);
    expect(table).toMatch(new RegExp(`${runId}\\s+reminder@1\\s+sleeping\\s+.*wakes in (1d|23h59m)`));
    const listed = JSON.parse(await ok('list', '--json', '--state', 'sleeping,waiting', '--version', '1'));
    expect(listed.map((r: { runId: string }) => r.runId)).toContain(runId);
    expect(listed.find((r: { runId: string }) => r.runId === runId)).toMatchObject({ workflow: 'reminder', version: '1', state: 'sleeping' });
    expect(JSON.parse(await ok('list', '--json', '--version', '7'))).toEqual([]);
    expect(JSON.parse(await ok('list', '--json', '--workflow', 'reminder', '--older-than', '1h'))).toEqual([]);
    expect(await ok('list', '--state', 'cancelled', '--workflow', 'reminder')).toBe('no runs match\n');

    await t.pool.query(`UPDATE ratchet.tasks SET trace_id = '4bf92f3577b34da6a3ce929d0e0e4736' WHERE id = $1`, [runId]);
    const show = await ok('show', runId, '--trace-url', 'http://localhost:16686/trace/{traceId}');
    expect(show).toContain(`run ${runId}  reminder@1  SLEEPING`);
    expect(show).toContain('trace     4bf92f3577b34da6a3ce929d0e0e4736  http://localhost:16686/trace/4bf92f3577b34da6a3ce929d0e0e4736');
    expect(show).toMatch(/STEPS \(2\)\n\s+SEQ\s+STEP\s+KIND\s+STATE\s+ATTEMPT\s+AT\s+DURATION\s+DETAIL/);
    expect(show).toMatch(/1\s+compose#1\s+step\s+succeeded\s+1\s+\+\S+\s+\S+\s+→ "hello ada"/);
    expect(show).toMatch(/2\s+wait-a-day#1\s+sleep\s+succeeded\s+1\s+.*until \d{4}-\d\d-\d\dT/);
    expect(show).toMatch(/EVENTS \(\d+\)[\s\S]*1\s+started[\s\S]*claimed[\s\S]*sleeping/);
    const detail = JSON.parse(await ok('show', runId, '--json'));
    expect(detail.run).toMatchObject({ runId, workflow: 'reminder', state: 'sleeping', input: { to: 'ada' } });
    expect(detail.steps.map((s: { stepKey: string }) => s.stepKey)).toEqual(['compose#1', 'wait-a-day#1']);
    expect(detail.events[0]).toMatchObject({ seq: 1, type: 'started' });

    const done = await t.complete(runId);
    expect(done).toMatchObject({ state: 'completed', output: 'hello ada (sent)' });
    expect(await ok('show', runId)).toContain('output    "hello ada (sent)"');
  });

  it('start without a module (by name and --version), with an idempotency key', async () => {
    const a = JSON.parse(await ok('start', 'reminder', '--version', '1', '--input', '{"to":"key"}', '--key', 'k-1', '--json'));
    const b = JSON.parse(await ok('start', 'reminder', '--version', '1', '--input', '{"to":"key"}', '--key', 'k-1', '--json'));
    expect(b.runId).toBe(a.runId);
    const conflict = await ratchet('start', 'reminder', '--version', '1', '--input', '{"to":"other"}', '--key', 'k-1');
    expect(conflict.code).toBe(1);
    expect(conflict.err).toMatch(/^ratchet: IDEMPOTENCY_CONFLICT: /);
    expect((await ratchet('start', 'reminder')).err).toContain('give --version');
    expect((await ratchet('start', 'reminder', '--version', '1', '--input', '{oops')).err).toMatch(/^ratchet: CLI_USAGE: --input is not valid JSON/);
  });

  it('signal: the approval commits its sealed contract; show prints the contract hash and status', async () => {
    const runId = (await ok('start', 'approval', '--module', MODULE, '--input', '{"note":"ship it"}')).trim();
    await until(async () => (await t.engine.client.get(runId)).state === 'waiting', 'the approval to wait');
    const waiting = await ok('show', runId);
    expect(waiting).toMatch(/approve#1\s+wait\s+reserved/);
    expect(waiting).toMatch(/CONTRACTS \(1\)[\s\S]*note#1\s+sealed\s+[0-9a-f]{64}/);
    expect(await ok('signal', runId, 'approve', '--payload', '{"ok":true}')).toMatch(new RegExp(`^signal approve sent to ${runId} \\([0-9a-f-]{36}\\)\\n$`));
    const done = await t.complete(runId);
    expect(done).toMatchObject({ state: 'completed', output: { status: 'committed', results: [{ added: 'ship it' }] } });
    const shown = await ok('show', runId);
    const hash = (await t.pool.query(`SELECT body_hash FROM ratchet.contracts WHERE task_id = $1`, [runId])).rows[0].body_hash;
    expect(shown).toMatch(new RegExp(`note#1\\s+committed\\s+${hash}`));
    expect(shown).toMatch(/SIGNALS \(1\)[\s\S]*approve\s+\S+\s+approve#1 at/);
    expect(shown).toMatch(/contract_committed/);
    expect((await ratchet('signal', runId, 'approve')).err).toMatch(/^ratchet: RUN_FINISHED: /);
  });

  it('cancel: a waiting run is cancelled at once; again, nothing to cancel', async () => {
    const runId = (await ok('start', 'approval', '--module', MODULE, '--input', '{"note":"maybe"}')).trim();
    await until(async () => (await t.engine.client.get(runId)).state === 'waiting', 'the approval to wait');
    expect(JSON.parse(await ok('cancel', runId, '--json'))).toEqual({ runId, cancelled: [runId], requested: [] });
    expect((await t.engine.client.get(runId)).state).toBe('cancelled');
    expect(await ok('cancel', runId)).toBe(`${runId} had already finished: nothing to cancel\n`);
  });

  it('resolve: settles the at-most-once effect of a parked run, which then completes with it', async () => {
    const crashed = await t.crashAt('afterReserveBeforeExecute', charge, { order: 'o-9' });
    const parked = await t.complete(crashed.runId);
    expect(parked.state).toBe('parked');
    const shown = await ok('show', crashed.runId);
    expect(shown).toMatch(/charge#1\s+effect\s+unknown\s+1\s+.*key \S+:charge#1.*outcome unknown: resolve it/);
    expect(shown).toContain(`settle with: ratchet resolve ${crashed.runId} charge#1`);
    expect((await ratchet('resolve', crashed.runId, 'charge#1')).code).toBe(2);
    expect(await ok('resolve', crashed.runId, 'charge#1', '--result', '{"receipt":"checked-by-hand"}')).toBe(`charge#1 of ${crashed.runId} settled as succeeded; the run resumes\n`);
    expect(await t.complete(crashed.runId)).toMatchObject({ state: 'completed', output: { receipt: 'checked-by-hand' } });
    expect((await ratchet('resolve', crashed.runId, 'charge#1', '--error', 'x')).err).toMatch(/^ratchet: NOT_PARKED: /);
  });

  it('retry: a failed run runs again from its failure point, recorded steps kept', async () => {
    flaky.failing = true;
    flaky.composed = 0;
    const runId = (await ok('start', 'flaky', '--module', MODULE, '--input', '{"n":20}')).trim();
    const failed = await t.complete(runId);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'STEP_FAILED', data: { step: 'check#1' } });
    expect(await ok('show', runId)).toContain(`re-run from the failure point: ratchet retry ${runId}`);
    expect((await ratchet('retry', '0190f5c2-0000-7000-8000-000000000000')).err).toMatch(/^ratchet: NOT_FOUND: /);

    flaky.failing = false; // the fix is deployed
    expect(await ok('retry', runId)).toBe(`${runId} is pending again; runs again from check#1\n`);
    expect(await t.complete(runId)).toMatchObject({ state: 'completed', output: { checked: 41 } });
    expect(flaky.composed).toBe(1); // the recorded step was not run again
    const { rows } = await t.pool.query(`SELECT event_type, payload FROM ratchet.events WHERE task_id = $1 AND event_type = 'retried'`, [runId]);
    expect(rows).toHaveLength(1);
    expect(rows[0].payload).toMatchObject({ removed: [{ step: 'check#1', kind: 'step', attempt: 1, error: { code: 'STEP_FAILED' } }], previousError: { code: 'STEP_FAILED' } });
    const again = await ratchet('retry', runId, '--json');
    expect(again).toMatchObject({ code: 1 });
    expect(again.err).toBe(`ratchet: NOT_FAILED: run ${runId} is completed, not failed; only a failed run can be retried\n`);
  });

  it('stats and workers: runs by version, and the (workflow, version) pairs with runs but no live worker', async () => {
    const orphan = JSON.parse(await ok('start', 'reminder', '--version', '9', '--input', '{"to":"nobody"}', '--json'));
    // The virtual clock moved days forward in the tests above: a 30-day window holds them all.
    const text = await ok('stats', '--since', '30d');
    expect(text).toMatch(/RUNS BY VERSION\n\s+WORKFLOW\s+PENDING\s+RUNNING\s+SLEEPING/);
    expect(text).toMatch(/reminder@9\s+1\s+0/);
    expect(text).toMatch(/FINISHED IN THE LAST 30d: \d+ completed, \d+ failed, \d+ cancelled; failure ratio/);
    // One committed (the approval), one sealed and never committed (the approval cancelled while it waited).
    expect(text).toMatch(/CONTRACTS: sealed backlog 1 \(oldest \S+\); 1 committed, 0 failed \(ratio 0\.0%\); seal→commit p50 \S+, p99 \S+/);
    expect(text).toMatch(/WORKERS: 1 live/);
    expect(text).toMatch(/NO LIVE WORKER FOR:\n\s+WORKFLOW\s+RUNS\s+OLDEST\n\s+reminder@9\s+1\s+/);
    const json = JSON.parse(await ok('stats', '--json', '--since', '30d'));
    expect(json.unserved).toEqual([expect.objectContaining({ workflow: 'reminder', version: '9', runs: 1 })]);
    expect(json.workers).toEqual([expect.objectContaining({ live: true, workflows: expect.arrayContaining([{ name: 'reminder', version: '1' }]) })]);
    expect(json.contracts.sealToCommitP99Ms).toEqual(expect.any(Number));
    const workers = await ok('workers');
    expect(workers).toMatch(/WORKER\s+LIVE\s+STARTED\s+LAST BEAT\s+CONCURRENCY\s+WORKFLOWS\nworker:\S+\s+yes\s+.*reminder@1/);
    expect(JSON.parse(await ok('workers', '--json'))).toHaveLength(1);
    await t.engine.client.cancel(orphan.runId);
    expect(JSON.parse(await ok('stats', '--json')).unserved).toEqual([]);
  });

  it('worker <module>: a process that serves the module and stops gracefully on SIGTERM', async () => {
    const w = spawnBin(['worker', MODULE, '--concurrency', '2', '--heartbeat-ms', '200', '--tenant', TENANT]);
    await until(async () => w.out().includes('serving'), 'the worker to start', 60_000);
    expect(w.out(), w.out()).toMatch(/^worker worker:\S+ serving (reminder@1|approval@2|charge@1|flaky@1)(, (reminder@1|approval@2|charge@1|flaky@1)){3} \(concurrency 2\)\n/);
    const id = /^worker (\S+) /.exec(w.out())![1]!;
    const workers = JSON.parse(await ok('workers', '--json'));
    expect(workers.map((x: { id: string }) => x.id)).toContain(id);
    w.child.kill('SIGTERM');
    const exit = await w.done;
    expect(exit.err).toContain('SIGTERM: stopping');
    expect(exit.out).toMatch(/worker stopped: \d+ claimed/);
    expect(exit.code).toBe(0);
    // Its heartbeat row went with it.
    expect(JSON.parse(await ok('workers', '--json')).map((x: { id: string }) => x.id)).not.toContain(id);
  });
});

describe('tenants', () => {
  it('purge-tenant asks for --yes, then removes the tenant with a progress bar', async () => {
    for (let i = 0; i < 3; i += 1) await ok('start', 'reminder', '--version', '1', '--input', `{"to":"t${i}"}`, '--tenant', TENANT);
    expect(JSON.parse(await ok('list', '--json', '--tenant', TENANT))).toHaveLength(3);
    const refused = await ratchet('purge-tenant', TENANT);
    expect(refused.code).toBe(2);
    expect(refused.err).toContain('add --yes');
    const r = await ratchet('purge-tenant', TENANT, '--yes', '--batch-size', '2');
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/purging \[#+\.*\] \d+\/3/);
    expect(r.err).toContain(`purged tenant ${TENANT}`);
    expect(r.out).toMatch(/^removed 3 tasks, .*\(purge [0-9a-f-]{36}\)\n$/);
    expect(JSON.parse(await ok('list', '--json', '--tenant', TENANT))).toEqual([]);
  });

  it('retention removes finished runs past the cutoff, with a progress bar', async () => {
    const tenant = 'a1f4a8e5-3c2d-4e6f-8a9b-0c1d2e3f4a5b';
    const run = await t.runToCompletion(reminder, { to: 'old' }, { tenantId: tenant });
    expect(run.state).toBe('completed');
    await t.clock.advance('31d');
    const r = await ratchet('retention', '--tenant', tenant, '--older-than', '30d', '--json');
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/removing \[#+\] 1\/1/);
    expect(JSON.parse(r.out).removed).toMatchObject({ runs: 1 });
    expect(JSON.parse(await ok('list', '--json', '--tenant', tenant))).toEqual([]);
    expect(await ok('retention', '--tenant', tenant)).toMatch(/^removed 0 run\(s\) finished before /);
  });
});
