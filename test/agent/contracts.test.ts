/**
 * infer → seal → commit against real application tables, including the rows of the seed's FAQ:
 * reused keys, dependencies deleted by plain READ COMMITTED writers, tampering, frozen
 * timestamps, injection, write skew under SERIALIZABLE, crashes and lost leases.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { z } from 'zod';
import { ValidationError, workflow } from '@ratchet/sdk';
import type { Engine } from '@ratchet/engine';
import { engineOn, eventually, events, operations, shift, task, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { spawnWorker, type WorkerProcess } from '../helpers/processes.js';
import { PROVIDER_DDL } from '../fixtures/workflows.js';
import { APP_DDL, appActions, appChecks, appTables, recordModelCall, triage, triageWorkflow } from '../fixtures/triage.js';

let db: TestDatabase;
let engine: Engine;
const processes: WorkerProcess[] = [];
const engineOptions = { actions: appActions, checks: appChecks, contractTables: appTables };

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(PROVIDER_DDL + APP_DDL);
  process.env.PROVIDER_URL = db.url;
  engine = await engineOn(db, { workflows: [triage], ...engineOptions });
});
beforeEach(async () => {
  await db.pool.query(`INSERT INTO users (id, name) SELECT g, 'user ' || g FROM generate_series(1, 50) g ON CONFLICT DO NOTHING`);
});
afterEach(async () => {
  await Promise.all(processes.splice(0).map((p) => p.kill('SIGKILL')));
});

const count = async (sql: string, values: unknown[] = []) => Number((await db.pool.query(`SELECT count(*) AS n FROM (${sql}) q`, values)).rows[0].n);

describe('infer → seal → commit', () => {
  it('records the answer once, seals a canonical body, commits it in one transaction with its outbox message', async () => {
    const result = await engine.run(triage, { ticket: 'the printer is on fire', userId: 1 });
    expect(result.state).toBe('completed');
    const out = result.output as { status: string; hash: string; ticketId: number; decision: { team: string } };
    expect(out.status).toBe('committed');
    expect(out.decision.team).toBe('hardware');
    const ticket = (await db.pool.query(`SELECT * FROM tickets WHERE id = $1`, [out.ticketId])).rows[0];
    expect(ticket).toMatchObject({ user_id: 1, summary: 'the printer is on fire', team: 'hardware' });
    expect((await db.pool.query(`SELECT last_ticket_at FROM users WHERE id = 1`)).rows[0].last_ticket_at).not.toBeNull();

    const ops = await operations(db, result.runId);
    expect(ops.map((o) => [o.kind, o.state])).toEqual([
      ['infer', 'succeeded'],
      ['seal', 'succeeded'],
      ['commit', 'succeeded'],
    ]);
    const infer = ops[0]!.result as { model: string; provider: string; responseModel: string; usage: object; promptHash: string; samples: number; prompt?: unknown };
    expect(infer).toMatchObject({ model: 'stub-classifier', provider: 'stub', responseModel: 'stub-classifier-2026-11', usage: { outputTokens: 12 } });
    expect(infer.promptHash).toMatch(/^[0-9a-f]{64}$/);
    expect(infer.prompt).toBeUndefined(); // never stored unless the engine opts in
    const calls = await count(`SELECT 1 FROM model_calls WHERE ticket = 'the printer is on fire'`);
    expect(calls).toBe(infer.samples);

    const contract = (await db.pool.query(`SELECT * FROM ratchet.contracts WHERE task_id = $1`, [result.runId])).rows[0];
    expect(contract.status).toBe('committed');
    expect(contract.body_hash).toBe(out.hash);
    expect(contract.body).toMatchObject({ version: 1, agent: 'triage-agent', runId: result.runId });
    const outbox = (await db.pool.query(`SELECT topic, message_key, payload FROM ratchet.outbox WHERE task_id = $1`, [result.runId])).rows;
    expect(outbox).toEqual([{ topic: 'ticket.created', message_key: String(out.ticketId), payload: { ticketId: out.ticketId, team: 'hardware' } }]);
    expect((await events(db, result.runId)).map((e) => e.type)).toEqual(['started', 'contract_sealed', 'contract_committed', 'completed']);
  });

  it('stores agent output verbatim as data, never as SQL', async () => {
    const evil = `'; DROP TABLE tickets; --`;
    const result = await engine.run(triage, { ticket: evil, userId: 2 });
    const out = result.output as { ticketId: number };
    expect((await db.pool.query(`SELECT summary FROM tickets WHERE id = $1`, [out.ticketId])).rows[0].summary).toBe(evil);
    expect(await count(`SELECT 1 FROM tickets`)).toBeGreaterThan(0);
  });

  it('refuses an unknown action, table or column at seal time, writing nothing', async () => {
    const bad = (operations: unknown, dependencies: unknown = []) =>
      workflow({ name: `bad-seal-${Math.random()}`, version: '1', input: z.object({}) }, async (ctx) => {
        try {
          await ctx.seal('c', { operations: operations as never, dependencies: dependencies as never });
          return 'sealed';
        } catch (error) {
          return (error as ValidationError).message;
        }
      });
    const cases: [unknown, unknown, string][] = [
      [[{ action: 'tickets.drop', input: {} }], [], 'operations[0].action: unknown action "tickets.drop"'],
      [[{ action: 'tickets.insert', input: { userId: 'x' } }], [], 'operations[0].input.userId'],
      [[{ action: 'users.touch', input: { id: 1, at: new Date() } }], [{ kind: 'exists', table: 'pg_authid', where: { id: 1 } }], 'dependencies[0].table: unknown table'],
      [[{ action: 'users.touch', input: { id: 1, at: new Date() } }], [{ kind: 'exists', table: 'users', where: { 'id = 1 OR 1=1; --': 1 } }], 'has no column "id = 1 OR 1=1; --"'],
      [[{ action: 'users.touch', input: { id: 1, at: new Date(), extra: NaN } }], [], 'contract.operations[0].input.extra'],
    ];
    for (const [ops, deps, path] of cases) {
      const r = await engine.run(bad(ops, deps), {});
      expect(r.output).toContain(path);
      expect(await count(`SELECT 1 FROM ratchet.contracts WHERE task_id = $1`, [r.runId])).toBe(0);
    }
  });
});

describe('idempotency', () => {
  it('a reused contract key never writes business rows twice', async () => {
    const first = await engine.run(triage, { ticket: 'key reuse', userId: 3, contractKey: 'ticket-key-1' });
    expect((first.output as { status: string }).status).toBe('committed');
    const second = await engine.run(triage, { ticket: 'key reuse', userId: 3, contractKey: 'ticket-key-1' });
    expect(second.state).toBe('failed');
    expect(second.error).toMatchObject({ code: 'CONTRACT_CONFLICT' });
    expect(await count(`SELECT 1 FROM tickets WHERE summary = 'key reuse'`)).toBe(1);
    const stats = await engine.contracts.stats();
    expect(stats.idempotencyConflicts).toBeGreaterThanOrEqual(1);
  });

  it('concurrent runs under notExists on one key commit exactly one ticket', async () => {
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => engine.run(triage, { ticket: `dedupe ${i}`, userId: 4, dedupeKey: 'same-incident' })));
    const statuses = results.map((r) => (r.output as { status: string }).status).sort();
    expect(statuses).toEqual(['committed', 'rejected', 'rejected', 'rejected', 'rejected']);
    expect(await count(`SELECT 1 FROM tickets WHERE dedupe_key = 'same-incident'`)).toBe(1);
  });

  it('write skew is impossible: concurrent commits of a capacity rule leave one ticket', async () => {
    const team = 'support';
    await db.pool.query(`DELETE FROM tickets WHERE team = $1`, [team]);
    const results = await Promise.all(
      Array.from({ length: 4 }, (_, i) => engine.run(triage, { ticket: `capacity ${i} (support)`, userId: 5 + i, capacity: 1 })),
    );
    const byStatus = results.map((r) => (r.output as { status: string }).status);
    expect(byStatus.filter((s) => s === 'committed')).toHaveLength(1);
    expect(await count(`SELECT 1 FROM tickets WHERE team = $1`, [team])).toBe(1);
  });
});

describe('dependencies against plain READ COMMITTED writers', () => {
  it('a user deleted between seal and commit: rejected, nothing applied, reason recorded', async () => {
    const wf = triageWorkflow(recordModelCall, async () => {
      await db.pool.query(`DELETE FROM users WHERE id = 20`);
    });
    const other = await engineOn(db, { workflows: [wf], ...engineOptions });
    const result = await other.run(wf, { ticket: 'user vanishes', userId: 20 });
    expect(result.output).toMatchObject({ status: 'rejected' });
    expect((result.output as { reason: string }).reason).toMatch(/exists users/);
    expect(await count(`SELECT 1 FROM tickets WHERE user_id = 20`)).toBe(0);
    const contract = (await db.pool.query(`SELECT status, error_detail FROM ratchet.contracts WHERE task_id = $1`, [result.runId])).rows[0];
    expect(contract.status).toBe('failed');
    expect(contract.error_detail.reason).toBe('dependency');
    expect((await engine.contracts.stats()).failuresByReason.dependency).toBeGreaterThanOrEqual(1);
  });

  it('a user deleted while the commit runs: a serialization retry, then a rejection — never a ticket for a deleted user', async () => {
    const deleter = new pg.Client({ connectionString: db.url });
    await deleter.connect();
    let retries = 0;
    const racing = await engineOn(db, {
      workflows: [triage],
      ...engineOptions,
      faults: {
        // Inside the commit transaction, after the fence (our snapshot is taken): another
        // connection deletes the user and commits, as any application code might.
        beforeCommit: async () => {
          if (retries === 0) await deleter.query(`DELETE FROM users WHERE id = 21`);
        },
        beforeCommitRetry: () => {
          retries += 1;
        },
      },
    });
    try {
      const result = await racing.run(triage, { ticket: 'deleted mid-commit', userId: 21 });
      expect(retries).toBeGreaterThanOrEqual(1); // FOR SHARE on a row deleted after our snapshot: 40001
      expect(result.output).toMatchObject({ status: 'rejected' });
      expect(await count(`SELECT 1 FROM tickets WHERE user_id = 21`)).toBe(0);
    } finally {
      await deleter.end();
    }
  });
});

describe('tampering', () => {
  it('the database refuses to change a sealed body; a change that bypasses it is detected at commit and nothing is applied', async () => {
    const wf = triageWorkflow(recordModelCall, async ({ runId }) => {
      const refused = await db.pool
        .query(`UPDATE ratchet.contracts SET body = jsonb_set(body, '{operations,0,input,priority}', '"low"') WHERE task_id = $1`, [runId])
        .catch((e: { code: string }) => e.code);
      expect(refused).toBe('RT002');
      // A superuser replicating data bypasses triggers: exactly what tamper detection is for.
      const client = await db.pool.connect();
      try {
        await client.query(`SET session_replication_role = replica`);
        await client.query(`UPDATE ratchet.contracts SET body = jsonb_set(body, '{operations,0,input,team}', '"attackers"') WHERE task_id = $1`, [runId]);
        await client.query(`SET session_replication_role = origin`);
      } finally {
        client.release();
      }
    });
    const other = await engineOn(db, { workflows: [wf], ...engineOptions });
    const result = await other.run(wf, { ticket: 'tamper me', userId: 22 });
    expect(result.state).toBe('failed');
    expect(result.error).toMatchObject({ code: 'CONTRACT_TAMPERED' });
    expect(await count(`SELECT 1 FROM tickets WHERE summary = 'tamper me'`)).toBe(0);
    const contract = (await db.pool.query(`SELECT status, error_detail FROM ratchet.contracts WHERE task_id = $1`, [result.runId])).rows[0];
    expect([contract.status, contract.error_detail.reason]).toEqual(['failed', 'tampered']);
  });
});

describe('replays and crashes', () => {
  it('frozen timestamps: a seal redone after a day hashes identically', async () => {
    const sleepy = workflow({ name: 'sleepy-seal', version: '1', input: z.object({ userId: z.number() }) }, async (ctx, { userId }) => {
      await ctx.step('before', () => 1);
      const contract = await ctx.seal('c', { operations: [{ action: 'users.touch', input: { id: userId, at: ctx.now() } }] });
      await ctx.sleep('nap', '1h');
      return contract.hash;
    });
    const other = await engineOn(db, { workflows: [sleepy], ...engineOptions });
    const first = await other.run(sleepy, { userId: 23 });
    expect(first.state).toBe('sleeping');
    const sealed = (await db.pool.query(`SELECT body_hash FROM ratchet.contracts WHERE task_id = $1`, [first.runId])).rows[0].body_hash;
    // Forget the seal (as if it had never been recorded), move a day on, and let it run again.
    await db.pool.query(`DELETE FROM ratchet.operations WHERE task_id = $1 AND kind = 'seal'`, [first.runId]);
    await db.pool.query(`DELETE FROM ratchet.contracts WHERE task_id = $1`, [first.runId]);
    await shift(db, 86_400_000);
    const worker = other.worker({ pollMs: 50 });
    await worker.start();
    try {
      const hash = await other.client.handle(first.runId).result({ timeout: '20s' });
      expect(hash).toBe(sealed);
      expect((await db.pool.query(`SELECT body_hash FROM ratchet.contracts WHERE task_id = $1`, [first.runId])).rows[0].body_hash).toBe(sealed);
    } finally {
      await worker.stop();
      await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
    }
  });

  it('a worker killed between seal and commit: the same contract is committed once', async () => {
    const run = await engine.client.start(triage, { ticket: 'crash between seal and commit', userId: 24 });
    const doomed = spawnWorker({ DATABASE_URL: db.url, PROVIDER_URL: db.url, LEASE_MS: '1000', RATCHET_FAULTS: 'beforeCommit:kill' });
    processes.push(doomed);
    expect(await doomed.exited).toBe('SIGKILL');
    const sealed = (await db.pool.query(`SELECT id, status, body_hash FROM ratchet.contracts WHERE task_id = $1`, [run.runId])).rows;
    expect(sealed.map((c) => c.status)).toEqual(['sealed']);
    const modelCallsBefore = await count(`SELECT 1 FROM model_calls WHERE ticket = 'crash between seal and commit'`);

    processes.push(spawnWorker({ DATABASE_URL: db.url, PROVIDER_URL: db.url, LEASE_MS: '1000' }));
    const output = (await run.result({ timeout: '30s' })) as { status: string; hash: string };
    expect(output).toMatchObject({ status: 'committed', hash: sealed[0].body_hash });
    expect(await count(`SELECT 1 FROM tickets WHERE summary = 'crash between seal and commit'`)).toBe(1);
    const contracts = (await db.pool.query(`SELECT id, status FROM ratchet.contracts WHERE task_id = $1`, [run.runId])).rows;
    expect(contracts).toEqual([{ id: sealed[0].id, status: 'committed' }]);
    // Replay never called the model again.
    expect(await count(`SELECT 1 FROM model_calls WHERE ticket = 'crash between seal and commit'`)).toBe(modelCallsBefore);
  });

  it('a lease lost during a serialization retry: the old owner stops, the new owner commits once', async () => {
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    const engineB = await engineOn(db, { workflows: [triage], ...engineOptions, leaseMs: 1000 });
    const workerB = engineB.worker({ pollMs: 50 });
    let runId = '';
    const engineA = await engineOn(db, {
      workflows: [triage],
      ...engineOptions,
      leaseMs: 60_000,
      faults: {
        beforeCommit: async (f) => {
          if (f.runId !== runId || workerB.stats.claimed > 0) return;
          // Make this attempt fail to serialize: the user row changes after our snapshot.
          await blocker.query(`UPDATE users SET name = name || '!' WHERE id = 25`);
        },
        beforeCommitRetry: async (f) => {
          if (f.runId !== runId || workerB.stats.claimed > 0) return;
          // Between attempts, A's lease runs out and B claims the run.
          await blocker.query(`UPDATE ratchet.tasks SET lease_expires_at = ratchet.now(), due_at = ratchet.now() WHERE id = $1`, [runId]);
          await workerB.start();
          await eventually(async () => (await task(db, runId)).lease_owner === workerB.workerId);
        },
      },
    });
    try {
      const started = await engineA.client.start(triage, { ticket: 'lease lost in retry', userId: 25 });
      runId = started.runId;
      // A's worker wakes on NOTIFY only, so B (polling) is the one that claims the expired lease.
      const workerA = engineA.worker({ pollMs: 60_000 });
      await workerA.start();
      const output = await started.result({ timeout: '30s' });
      expect(output).toMatchObject({ status: 'committed' });
      // A learns it lost the run at its next fence or renewal: wait for it rather than race it.
      await eventually(async () => workerA.stats.lost === 1);
      expect(await count(`SELECT 1 FROM tickets WHERE summary = 'lease lost in retry'`)).toBe(1);
      const commits = (await operations(db, runId)).filter((o) => o.kind === 'commit');
      expect(commits).toHaveLength(1);
      const types = (await events(db, runId)).map((e) => [e.type, e.actor === workerB.workerId ? 'B' : 'A']);
      expect(types).toEqual([
        ['started', 'A'],
        ['claimed', 'A'],
        ['contract_sealed', 'A'],
        ['lease_reclaimed', 'B'],
        ['contract_committed', 'B'],
        ['completed', 'B'],
      ]);
      await workerA.stop();
    } finally {
      await workerB.stop();
      await blocker.end();
    }
  });
});

describe('human approval: seal → waitFor → commit or abandon', () => {
  const reviewed = workflow(
    {
      name: 'reviewed',
      version: '1',
      input: z.object({ userId: z.number(), summary: z.string() }),
      signals: { approval: z.object({ approve: z.boolean(), hash: z.string() }) },
    },
    async (ctx, { userId, summary }) => {
      const contract = await ctx.seal('ticket', { operations: [{ action: 'tickets.insert', input: { userId, priority: 'high', team: 'billing', summary } }] });
      const verdict = await ctx.waitFor<{ approve: boolean; hash: string }>('approval');
      if (!verdict.approve || verdict.hash !== contract.hash) {
        await ctx.abandon(contract, 'declined');
        // Committing an abandoned contract rethrows its recorded rejection.
        const again = await ctx.commit(contract).then(() => 'committed', (e: Error) => e.name);
        return { status: 'abandoned', again };
      }
      return { status: 'committed', result: await ctx.commit(contract) };
    },
  );

  it('waits holding no worker, then commits the approved contract or abandons the declined one', async () => {
    const approving = await engineOn(db, { workflows: [reviewed], ...engineOptions });
    const worker = approving.worker({ concurrency: 4, pollMs: 200 });
    await worker.start();
    try {
      const yes = await approving.client.start(reviewed, { userId: 3, summary: 'approved refund' });
      const no = await approving.client.start(reviewed, { userId: 3, summary: 'declined refund' });
      const hashOf = async (runId: string) =>
        eventually(async () => (await db.pool.query(`SELECT body_hash FROM ratchet.contracts WHERE task_id = $1 AND status = 'sealed'`, [runId])).rows[0]?.body_hash as string);
      await eventually(async () => (await task(db, yes.runId)).state === 'waiting' && (await task(db, no.runId)).state === 'waiting');
      await approving.client.signal(yes.runId, 'approval', { approve: true, hash: await hashOf(yes.runId) });
      await approving.client.signal(no.runId, 'approval', { approve: false, hash: await hashOf(no.runId) });
      expect(await yes.result({ timeout: '20s' })).toMatchObject({ status: 'committed' });
      expect(await no.result({ timeout: '20s' })).toEqual({ status: 'abandoned', again: 'ContractRejectedError' });
      expect(await count(`SELECT 1 FROM tickets WHERE summary = 'approved refund'`)).toBe(1);
      expect(await count(`SELECT 1 FROM tickets WHERE summary = 'declined refund'`)).toBe(0);
      const declined = (await db.pool.query(`SELECT status, error_detail FROM ratchet.contracts WHERE task_id = $1`, [no.runId])).rows[0];
      expect(declined).toMatchObject({ status: 'failed', error_detail: { reason: 'abandoned', note: 'declined' } });
      expect((await events(db, no.runId)).map((e) => e.type)).toEqual(['started', 'claimed', 'contract_sealed', 'waiting', 'signalled', 'contract_failed', 'completed']);
    } finally {
      await worker.stop();
    }
  });
});

describe('contract stats', () => {
  it('reports the backlog, latency and failures by reason', async () => {
    const stats = await engine.contracts.stats({ since: new Date(Date.now() - 3_600_000) });
    expect(stats.committed).toBeGreaterThan(0);
    expect(stats.failed).toBeGreaterThan(0);
    expect(stats.failureRatio).toBeGreaterThan(0);
    expect(stats.sealToCommitP50Ms).not.toBeNull();
    expect(Object.keys(stats.failuresByReason)).toEqual(expect.arrayContaining(['dependency']));
  });
});
