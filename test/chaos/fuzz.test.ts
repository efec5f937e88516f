/**
 * Bad input, fuzzed with fast-check: workflow inputs, signal payloads and names, contract
 * operations, durations and idempotency keys — empty, huge, unicode (lone surrogates too), NUL.
 * Each call either succeeds (and what it stored reads back identical) or throws a RatchetError
 * that names the field and writes nothing; a worker serving the same database all along still
 * completes a normal run at the end (DESIGN §6: bad input gets a clear, typed error and changes nothing).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { z } from 'zod';
import { isRatchetError, parseDuration, workflow, type Duration } from '@ratchet/sdk';
import type { Engine, Worker } from '@ratchet/engine';
import { engineOn, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { APP_DDL, appActions, appChecks, appTables } from '../fixtures/triage.js';

const echo = workflow({ name: 'fuzz-echo', version: '1', input: z.object({ text: z.string(), n: z.number().int() }) }, async (ctx, input) => {
  const stepped = await ctx.step('copy', () => input);
  return stepped;
});

const waiter = workflow({ name: 'fuzz-wait', version: '1', input: z.object({}) }, async (ctx) => ctx.waitFor('poke', { timeout: '1h' }));

const sealer = workflow({ name: 'fuzz-seal', version: '1', input: z.object({ operations: z.unknown(), key: z.unknown() }) }, async (ctx, input) => {
  const contract = await ctx.seal('c', { operations: input.operations as never, ...(input.key === undefined ? {} : { idempotencyKey: input.key as string }) });
  return { hash: contract.hash };
});

const sleeper = workflow({ name: 'fuzz-sleep', version: '1', input: z.object({ d: z.unknown() }) }, async (ctx, { d }) => {
  await ctx.sleep('s', d as Duration);
  return 'woke';
});

/** Strings that break naive code: empty, NUL, lone surrogates, astral, RTL, huge. */
const nasty = fc.oneof(
  fc.constantFrom('', '\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '💥🧨', '\u202e\u0301', ' ', '\\u0000', 'x'.repeat(70_000)),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
);
const nastyJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    nasty,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.constant(undefined),
    fc.bigInt(),
    fc.date({ noInvalidDate: false }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(nasty, tie('value'), { maxKeys: 4 }),
  ),
})).value;

let db: TestDatabase;
let engine: Engine;
let worker: Worker;

beforeAll(async () => {
  db = await testDatabase();
  await db.pool.query(APP_DDL);
  await db.pool.query(`INSERT INTO users (id, name) VALUES (1, 'ada')`);
  engine = await engineOn(db, { workflows: [echo, waiter, sealer, sleeper], actions: appActions, checks: appChecks, contractTables: appTables });
  worker = engine.worker({ concurrency: 2, pollMs: 200 });
  await worker.start();
});
afterAll(async () => {
  await worker?.stop();
});

/**
 * What a refused call could have written. (Events and operations are left out: the worker keeps
 * executing the runs earlier, accepted calls started, so they move on their own.)
 */
async function counts(): Promise<string> {
  const { rows } = await db.pool.query(
    `SELECT (SELECT count(*) FROM ratchet.tasks) AS tasks, (SELECT count(*) FROM ratchet.signals) AS signals,
            (SELECT count(*) FROM ratchet.contracts) AS contracts, (SELECT count(*) FROM ratchet.outbox) AS outbox,
            (SELECT count(*) FROM tickets) AS tickets`,
  );
  return JSON.stringify(rows[0]);
}

/** `call` succeeds (then `ok` checks it), or fails with a typed RatchetError naming a field and nothing changed. */
async function typedOrFine<T>(call: () => Promise<T>, ok: (value: T) => Promise<void> | void): Promise<'ok' | 'refused'> {
  const before = await counts();
  let value: T;
  try {
    value = await call();
  } catch (error) {
    if (!isRatchetError(error)) throw new Error(`not a RatchetError: ${String(error)}`, { cause: error });
    expect(error.message.length).toBeGreaterThan(0);
    expect(error.message.length).toBeLessThan(2_000); // names the field, does not echo a huge input
    expect(await counts()).toBe(before);
    return 'refused';
  }
  await ok(value);
  return 'ok';
}

describe('fuzzed bad input', () => {
  it('workflow inputs: stored and replayed identically, or a typed error and no run', async () => {
    const outcomes = { ok: 0, refused: 0 };
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.record({ text: nasty, n: fc.integer() }), fc.record({ text: nastyJson, n: nastyJson }), nastyJson), async (input) => {
        const outcome = await typedOrFine(
          () => engine.run(echo, input as never),
          async (result) => {
            expect(result.state).toBe('completed');
            expect(result.output).toEqual(input);
          },
        );
        outcomes[outcome] += 1;
      }),
      { numRuns: 150 },
    );
    expect(outcomes.ok).toBeGreaterThan(0);
    expect(outcomes.refused).toBeGreaterThan(0);
  });

  it('idempotency keys: the same run again for a usable key, a typed error and no run otherwise', async () => {
    await fc.assert(
      fc.asyncProperty(nasty, async (key) => {
        await typedOrFine(
          () => engine.client.start(echo, { text: 'k', n: 1 }, { idempotencyKey: key }),
          async (run) => {
            const again = await engine.client.start(echo, { text: 'k', n: 1 }, { idempotencyKey: key });
            expect(again.runId).toBe(run.runId);
            const { rows } = await db.pool.query(`SELECT idempotency_key FROM ratchet.tasks WHERE id = $1`, [run.runId]);
            expect(rows[0].idempotency_key).toBe(key);
          },
        );
      }),
      { numRuns: 60 },
    );
  });

  it('signal names and payloads: stored as sent, or a typed error and no signal', async () => {
    const run = await engine.client.start(waiter, {});
    await fc.assert(
      fc.asyncProperty(nasty, nastyJson, async (name, payload) => {
        await typedOrFine(
          () => engine.client.signal(run.runId, name, payload),
          async ({ signalId }) => {
            const { rows } = await db.pool.query(`SELECT name, payload FROM ratchet.signals WHERE id = $1`, [signalId]);
            expect(rows[0].name).toBe(name);
          },
        );
      }),
      { numRuns: 100 },
    );
    // A payload refused under a 100,000-character key: the message names the field, shortened.
    const refused = await typedOrFine(() => engine.client.signal(run.runId, 'x', { ['k'.repeat(100_000)]: { deep: 1n } }), () => {
      throw new Error('a BigInt payload was accepted');
    });
    expect(refused).toBe('refused');
    await typedOrFine(() => engine.client.signal('not-a-uuid', 'poke', {}), () => {
      throw new Error('a malformed run id was accepted');
    });
  });

  it('contract operations: sealed, or the run fails with a typed error and no contract row', async () => {
    const operation = fc.record(
      {
        action: fc.oneof(fc.constantFrom('tickets.insert', 'users.touch', 'nope', ''), nasty),
        input: fc.oneof(
          nastyJson,
          fc.record({ userId: fc.oneof(fc.integer(), nastyJson), priority: fc.constantFrom('high', 'low', 'urgent!!'), team: nasty, summary: nasty }),
        ),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.array(operation, { maxLength: 3 }), nastyJson), fc.option(nasty, { nil: undefined }), async (operations, key) => {
        // A value JSON cannot carry is refused with the input; plain JSON reaches the seal, which decides.
        await typedOrFine(
          () => engine.run(sealer, { operations, key } as never),
          async (result) => {
            const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.contracts WHERE task_id = $1`, [result.runId]);
            if (result.state === 'completed') expect(rows[0].n).toBe(1);
            else {
              expect(result.state).toBe('failed');
              const task = await db.pool.query(`SELECT error FROM ratchet.tasks WHERE id = $1`, [result.runId]);
              expect(task.rows[0].error.code).toBe('VALIDATION');
              expect(rows[0].n).toBe(0);
            }
          },
        );
      }),
      { numRuns: 100 },
    );
    const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM tickets`);
    expect(rows[0].n).toBe(0); // sealing never applies anything
  });

  it('durations: a number of ms, or a ValidationError naming the field', async () => {
    fc.assert(
      fc.property(fc.oneof(nasty, fc.double(), fc.integer(), nastyJson, fc.constantFrom('5s', '250ms', '1d', '-1s', '1e3ms', '1.5h', 'Infinity')), (d) => {
        try {
          const ms = parseDuration(d as Duration, 'timeout');
          expect(Number.isFinite(ms) && ms >= 0).toBe(true);
        } catch (error) {
          expect(isRatchetError(error, 'VALIDATION')).toBe(true);
          expect((error as Error).message).toContain('timeout');
        }
      }),
      { numRuns: 300 },
    );
    await fc.assert(
      fc.asyncProperty(fc.oneof(nasty, fc.double(), fc.integer({ min: -1_000, max: 1_000 })), async (d) => {
        await typedOrFine(
          () => engine.run(sleeper, { d } as never),
          async (result) => {
            const task = await db.pool.query(`SELECT state, error FROM ratchet.tasks WHERE id = $1`, [result.runId]);
            if (task.rows[0].state === 'failed') expect(task.rows[0].error.code).toBe('VALIDATION');
            else expect(['sleeping', 'completed']).toContain(task.rows[0].state);
            const ops = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.operations WHERE task_id = $1`, [result.runId]);
            expect(ops.rows[0].n).toBe(task.rows[0].state === 'failed' ? 0 : 1); // a refused duration records no sleep
          },
        );
      }),
      { numRuns: 60 },
    );
    expect(() => engine.worker({ leaseMs: -5 })).toThrow(/leaseMs/);
  });

  it('leaves the worker unharmed: it still completes a normal run', async () => {
    const run = await engine.client.start(echo, { text: 'after the fuzz', n: 7 });
    expect(await run.result({ timeout: '30s' })).toEqual({ text: 'after the fuzz', n: 7 });
    expect(worker.stats.completed).toBeGreaterThan(0);
  });
});
