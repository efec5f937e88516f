/**
 * The commit transaction: what user SQL in it sees, and its retry budget for conflicts: PostgreSQL itself reports `40001` (here from inside an
 * action, as a conflicting SERIALIZABLE transaction would), the whole transaction is retried —
 * up to 12 attempts — and only then does the commit step fail, having changed nothing.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAction, workflow } from '@ratchet/sdk';
import { engineOn, operations, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
/** Attempts that reached the action, and how many of them must fail with a serialization failure. */
const state = { attempts: 0, failFirst: 0 };

const record = defineAction({
  name: 'retries.record',
  input: z.object({ note: z.string() }),
  run: async (tx, { note }) => {
    state.attempts += 1;
    await tx.query(`INSERT INTO retry_notes (note) VALUES ($1)`, [note]);
    if (state.attempts <= state.failFirst) {
      // A real error from the server, with the SQLSTATE a conflicting SERIALIZABLE transaction gets.
      await tx.query(`DO $$ BEGIN RAISE EXCEPTION 'could not serialize access (test)' USING ERRCODE = 'serialization_failure'; END $$`);
    }
    return { note };
  },
});

/** What user SQL in a commit transaction sees of the planner's settings. */
const mode = defineAction({
  name: 'retries.plan_mode',
  input: z.object({}),
  run: async (tx) => ({ mode: (await tx.query(`SELECT current_setting('plan_cache_mode') AS mode`)).rows[0].mode as string }),
});

const asking = workflow({ name: 'asking', version: '1', input: z.object({}) }, async (ctx) => {
  const contract = await ctx.seal('ask', { operations: [{ action: 'retries.plan_mode', input: {} }] });
  return ctx.commit(contract);
});

const noting = workflow({ name: 'noting', version: '1', input: z.object({ note: z.string() }) }, async (ctx, { note }) => {
  const contract = await ctx.seal('note', { operations: [{ action: 'retries.record', input: { note } }] });
  return ctx.commit(contract);
});

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(`CREATE TABLE retry_notes (id bigserial PRIMARY KEY, note text NOT NULL)`);
});

describe('the commit transaction', () => {
  it('gives actions the database’s plan_cache_mode, not the generic plans of the engine’s own statements', async () => {
    const engine = await engineOn(db, { workflows: [asking], actions: [mode] });
    const result = await engine.run(asking, {});
    expect(result.output).toMatchObject({ status: 'committed', results: [{ mode: 'auto' }] });
  });
});

describe('commit retries on serialization failures', () => {
  it('retries the whole transaction past the budget for lost connections (6), and commits once', async () => {
    const engine = await engineOn(db, { workflows: [noting], actions: [record] });
    Object.assign(state, { attempts: 0, failFirst: 8 });
    const result = await engine.run(noting, { note: 'ninth time lucky' });
    expect(result.state).toBe('completed');
    expect(state.attempts).toBe(9);
    expect((await db.pool.query(`SELECT note FROM retry_notes WHERE note = 'ninth time lucky'`)).rows).toHaveLength(1);
  });

  it('after 12 conflicts the commit step fails with StepFailedError; nothing was applied, the contract stays sealed', async () => {
    const engine = await engineOn(db, { workflows: [noting], actions: [record] });
    Object.assign(state, { attempts: 0, failFirst: Number.POSITIVE_INFINITY });
    const result = await engine.run(noting, { note: 'never' });
    expect(result.state).toBe('failed');
    expect(result.error).toMatchObject({ code: 'STEP_FAILED', data: { attempts: 12 }, cause: { data: { code: '40001' } } });
    expect(state.attempts).toBe(12);
    expect((await db.pool.query(`SELECT count(*)::int AS n FROM retry_notes WHERE note = 'never'`)).rows[0].n).toBe(0);
    const contracts = await db.pool.query(`SELECT status FROM ratchet.contracts WHERE task_id = $1`, [result.runId]);
    expect(contracts.rows).toEqual([{ status: 'sealed' }]);
    const commit = (await operations(db, result.runId)).find((o) => o.kind === 'commit');
    expect(commit).toMatchObject({ state: 'failed', attempt: 12 });
  }, 30_000);
});
