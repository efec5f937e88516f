/**
 * The outbox: `ctx.emit` writes its step and its message in one statement, and the relay
 * publishes every message at least once with a stable key — through racing relays, a relay
 * SIGKILLed mid-publish, failing publishers, a lost database connection — woken by NOTIFY.
 * Each test gets its own database: a relay claims every due message of its database.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { z } from 'zod';
import { NotifyPayloadTooLargeError, defineAction, workflow } from '@ratchet/sdk';
import { notifyPublisher, type Engine, type OutboxMessage, type RelayOptions } from '@ratchet/engine';
import { engineOn, eventually, operations, shift, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';

const burst = workflow(
  { name: 'burst', version: '1', input: z.object({ n: z.number().int(), topic: z.string().default('order.paid'), size: z.number().int().default(0) }) },
  async (ctx, { n, topic, size }) => {
    for (let i = 0; i < n; i += 1) await ctx.emit(topic, { i, pad: 'x'.repeat(size) });
    return n;
  },
);

const paced = workflow({ name: 'paced', version: '1', input: z.object({ order: z.string() }) }, async (ctx, { order }) => {
  const total = await ctx.step('total', () => 42);
  await ctx.emit('order.paid', { order, total });
  await ctx.sleep('cool-off', '1h');
  await ctx.emit('order.paid', { order, total, late: true });
  return total;
});

const addNote = defineAction({
  name: 'notes.add',
  input: z.object({ text: z.string() }),
  run: async (tx, { text }) => {
    await tx.emit('note.added', { text });
    await tx.emit('note.indexed', { text });
    await tx.emit('note.audited', { text }, { key: `audit:${text}` });
    return { ok: true };
  },
});

const noter = workflow({ name: 'noter', version: '1', input: z.object({ text: z.string() }) }, async (ctx, { text }) => {
  const contract = await ctx.seal('note', { operations: [{ action: 'notes.add', input: { text } }] });
  return ctx.commit(contract);
});

const DELIVERIES_DDL = `
  CREATE TABLE relay_deliveries (
    n bigserial PRIMARY KEY, message_id uuid NOT NULL, key text NOT NULL, attempt int NOT NULL, pid int NOT NULL, relay text NOT NULL)`;

interface World {
  db: TestDatabase;
  engine: Engine;
}

async function world(): Promise<World> {
  const db = await testDatabase();
  const engine = await engineOn(db, { workflows: [burst, paced, noter], actions: [addNote] });
  return { db, engine };
}

interface OutboxRow {
  id: string;
  key: string;
  topic: string;
  attempts: number;
  dispatched: boolean;
  lastError: { name: string; code?: string; message: string } | null;
  /** Seconds from ratchet.now() until the message is due. */
  dueIn: number;
}

async function outbox(db: TestDatabase): Promise<OutboxRow[]> {
  const { rows } = await db.pool.query(
    `SELECT id, message_key AS key, topic, attempts, dispatched_at IS NOT NULL AS dispatched, last_error::jsonb AS "lastError",
            extract(epoch FROM available_at - ratchet.now())::float8 AS "dueIn"
       FROM ratchet.outbox ORDER BY id`,
  );
  return rows;
}

const pending = async (db: TestDatabase) => (await outbox(db)).filter((r) => !r.dispatched).length;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A publisher that records what it is handed; `fn` decides the outcome. */
function recorder(fn: (messages: readonly OutboxMessage[], call: number) => ReturnType<RelayOptions['publish']> | void = () => {}) {
  const calls: (readonly OutboxMessage[])[] = [];
  const publish: RelayOptions['publish'] = async (messages) => {
    calls.push(messages);
    return (await fn(messages, calls.length)) ?? undefined;
  };
  return { calls, publish, messages: () => calls.flat() };
}

describe('ctx.emit', () => {
  it('writes the emit step and its message in one statement, and replay writes neither again', async () => {
    const { db, engine } = await world();
    const first = await engine.run(paced, { order: 'A-1' });
    expect(first.state).toBe('sleeping');
    const emitted = await db.pool.query(
      `SELECT o.step_key AS "stepKey", o.kind, o.result, o.created_at = m.created_at AS "sameStatement", m.message_key AS key, m.topic, m.payload, m.task_id AS "taskId"
         FROM ratchet.operations o JOIN ratchet.outbox m ON m.task_id = o.task_id AND m.message_key = o.task_id::text || ':' || o.step_key
        WHERE o.task_id = $1 AND o.kind = 'emit'`,
      [first.runId],
    );
    expect(emitted.rows).toEqual([
      {
        stepKey: 'order.paid#1', kind: 'emit', result: { topic: 'order.paid', messageKey: `${first.runId}:order.paid#1` },
        // statement_timestamp() differs between statements: equal times mean one statement wrote both.
        sameStatement: true, key: `${first.runId}:order.paid#1`, topic: 'order.paid', payload: { order: 'A-1', total: 42 }, taskId: first.runId,
      },
    ]);

    // The run wakes on another worker: it replays total and order.paid#1, then emits order.paid#2.
    await shift(db, 2 * 3_600_000);
    const worker = engine.worker({ pollMs: 100 });
    await worker.start();
    expect(await engine.client.handle(first.runId).result({ timeout: '20s' })).toBe(42);
    await worker.stop();
    const rows = await outbox(db);
    expect(rows.map((r) => r.key)).toEqual([`${first.runId}:order.paid#1`, `${first.runId}:order.paid#2`]);
    expect((await operations(db, first.runId)).map((o) => `${o.kind} ${o.stepKey}`)).toEqual([
      'step total#1', 'emit order.paid#1', 'sleep cool-off#1', 'emit order.paid#2',
    ]);
  });

  it("a contract's messages get <contractId>:<n> unless they name a key", async () => {
    const { db, engine } = await world();
    const result = await engine.run(noter, { text: 'hello' });
    expect(result.state).toBe('completed');
    const contractId = (result.output as { contractId: string }).contractId;
    expect((await outbox(db)).map((r) => [r.topic, r.key])).toEqual([
      ['note.added', `${contractId}:0`],
      ['note.indexed', `${contractId}:1`],
      ['note.audited', 'audit:hello'],
    ]);
  });
});

describe('the relay', () => {
  it('publishes every message once, in batches, with its stable key, and marks it dispatched', async () => {
    const { db, engine } = await world();
    const runs = await Promise.all(Array.from({ length: 10 }, () => engine.run(burst, { n: 4 })));
    const sink = recorder();
    const relay = engine.relay({ publish: sink.publish, batchSize: 7, pollMs: 100 });
    await relay.start();
    await eventually(async () => (await pending(db)) === 0);
    await relay.stop();

    const rows = await outbox(db);
    expect(rows).toHaveLength(40);
    expect(rows.every((r) => r.dispatched && r.attempts === 1 && r.lastError === null)).toBe(true);
    const published = sink.messages();
    expect(published).toHaveLength(40);
    expect(new Set(published.map((m) => m.id))).toEqual(new Set(rows.map((r) => r.id)));
    const runIds = new Set(runs.map((r) => r.runId));
    for (const m of published) {
      expect(m.key).toBe(rows.find((r) => r.id === m.id)!.key);
      expect(m.key).toMatch(new RegExp(`^${m.runId}:order\\.paid#[1-4]$`));
      expect(runIds.has(m.runId)).toBe(true);
      expect(m).toMatchObject({ topic: 'order.paid', attempt: 1, tenantId: '00000000-0000-0000-0000-000000000000' });
      expect(m.createdAt).toBeInstanceOf(Date);
    }
    // A run's messages arrive in emit order.
    for (const runId of runIds) {
      expect(published.filter((m) => m.runId === runId).map((m) => (m.payload as { i: number }).i)).toEqual([0, 1, 2, 3]);
    }
    expect(sink.calls.every((c) => c.length <= 7)).toBe(true);
    expect(relay.stats).toEqual({ claimed: 40, published: 40, failed: 0, superseded: 0, batches: sink.calls.length });
  });

  it('a second relay never takes messages another relay is publishing (they are leased)', async () => {
    const { db, engine } = await world();
    await engine.run(burst, { n: 20 });
    let releaseA!: () => void;
    let entered!: () => void;
    const aPublishing = new Promise<void>((resolve) => (entered = resolve));
    const a = recorder(async () => {
      entered();
      await new Promise<void>((resolve) => (releaseA = resolve));
    });
    const relayA = engine.relay({ publish: a.publish, batchSize: 10, pollMs: 50 });
    await relayA.start();
    await aPublishing;
    const other = await engineOn(db, {});
    const b = recorder();
    const relayB = other.relay({ publish: b.publish, batchSize: 10, pollMs: 50 });
    await relayB.start();
    await eventually(async () => (await pending(db)) <= 10); // B published the other ten…
    await sleep(300); // …and keeps polling while A still holds its ten
    releaseA();
    await eventually(async () => (await pending(db)) === 0);
    await Promise.all([relayA.stop(), relayB.stop()]);
    const aIds = a.messages().map((m) => m.id);
    const bIds = b.messages().map((m) => m.id);
    expect(aIds).toHaveLength(10);
    expect(bIds).toHaveLength(10);
    expect(bIds.filter((id) => aIds.includes(id))).toEqual([]);
    expect((await outbox(db)).every((r) => r.dispatched && r.attempts === 1)).toBe(true);
  });

  it('two relays racing on the same rows publish every message exactly once', async () => {
    const { db, engine } = await world();
    await Promise.all(Array.from({ length: 20 }, () => engine.run(burst, { n: 10 })));
    const other = await engineOn(db, {}); // another process, in effect: its own pool and LISTEN connection
    const byRelay: Record<string, string[]> = { a: [], b: [] };
    const slowly = (name: 'a' | 'b') =>
      recorder(async (messages) => {
        byRelay[name]!.push(...messages.map((m) => m.id));
        await sleep(20); // a publish that takes a while: the other relay claims meanwhile
      });
    const a = engine.relay({ publish: slowly('a').publish, batchSize: 10, pollMs: 50 });
    const b = other.relay({ publish: slowly('b').publish, batchSize: 10, pollMs: 50 });
    await Promise.all([a.start(), b.start()]);
    await eventually(async () => (await pending(db)) === 0);
    await Promise.all([a.stop(), b.stop()]);

    const all = [...byRelay.a!, ...byRelay.b!];
    expect(all).toHaveLength(200);
    expect(new Set(all).size).toBe(200);
    expect(byRelay.a!.length).toBeGreaterThan(0);
    expect(byRelay.b!.length).toBeGreaterThan(0);
    expect((await outbox(db)).every((r) => r.dispatched && r.attempts === 1)).toBe(true);
  });

  it('a relay whose lease ran out cannot overwrite the outcome of the claim that replaced it', async () => {
    const { db, engine } = await world();
    await engine.run(burst, { n: 1 });
    let releaseA!: () => void;
    let entered!: () => void;
    const aPublishing = new Promise<void>((resolve) => (entered = resolve));
    const a = engine.relay({
      pollMs: 50,
      publish: async () => {
        entered();
        await new Promise<void>((resolve) => (releaseA = resolve)); // paused, as in a long GC pause
      },
    });
    await a.start();
    await aPublishing;
    await shift(db, 31_000); // past A's 30 s lease
    const b = engine.relay({ pollMs: 50, backoff: { initial: '1h' }, publish: async () => Promise.reject(new Error('B: broker down')) });
    await b.start();
    await eventually(async () => (await outbox(db))[0]?.lastError);
    releaseA(); // A's publish returns now: its "dispatched" belongs to a claim that no longer exists
    await eventually(async () => a.stats.superseded === 1);
    await Promise.all([a.stop(), b.stop()]);
    expect((await outbox(db))[0]).toMatchObject({ attempts: 2, dispatched: false, lastError: { message: 'B: broker down' } });
    expect(a.stats).toMatchObject({ claimed: 1, published: 0, superseded: 1 });
    expect(b.stats).toMatchObject({ claimed: 1, failed: 1 });
  });

  it('records a failure, backs off exponentially up to the cap, and retries until published; publish may fail single messages', async () => {
    const { db, engine } = await world();
    const run = await engine.run(burst, { n: 3 });
    const sink = recorder((messages, call) => {
      if (call === 1) throw new Error('broker down');
      if (call === 2) return Promise.resolve({ failed: [{ id: messages[1]!.id, error: new Error('broker rejected this one') }] });
    });
    const relay = engine.relay({ publish: sink.publish, pollMs: 50, backoff: { initial: '1h', factor: 2, max: '90m', jitter: 0 } });
    await relay.start();

    let rows = await eventually(async () => {
      const r = await outbox(db);
      return r.every((x) => x.lastError !== null) && r;
    });
    for (const row of rows) {
      expect(row).toMatchObject({ attempts: 1, dispatched: false, lastError: { name: 'Error', message: 'broker down' } });
      expect(row.dueIn).toBeGreaterThan(3_590);
      expect(row.dueIn).toBeLessThanOrEqual(3_600);
    }

    await shift(db, 3_600_000);
    rows = await eventually(async () => {
      const r = await outbox(db);
      return r.filter((x) => x.dispatched).length === 2 && r;
    });
    const [m1, m2, m3] = rows;
    expect(m1).toMatchObject({ attempts: 2, dispatched: true });
    expect(m3).toMatchObject({ attempts: 2, dispatched: true });
    expect(m2).toMatchObject({ attempts: 2, dispatched: false, lastError: { name: 'Error', message: 'broker rejected this one' } });
    // 1 h × 2 = 2 h, capped at 90 min.
    expect(m2!.dueIn).toBeGreaterThan(90 * 60 - 10);
    expect(m2!.dueIn).toBeLessThanOrEqual(90 * 60);

    await shift(db, 90 * 60_000);
    await eventually(async () => (await pending(db)) === 0);
    await relay.stop();
    expect((await outbox(db))[1]).toMatchObject({ attempts: 3, dispatched: true });
    expect(sink.calls.map((c) => c.map((m) => `${m.key}@${m.attempt}`))).toEqual([
      [1, 2, 3].map((i) => `${run.runId}:order.paid#${i}@1`),
      [1, 2, 3].map((i) => `${run.runId}:order.paid#${i}@2`),
      [`${run.runId}:order.paid#2@3`],
    ]);
    expect(relay.stats).toEqual({ claimed: 7, published: 3, failed: 4, superseded: 0, batches: 3 });
  });

  it('a publish that outlives publishTimeout is aborted and recorded as a TimeoutError', async () => {
    const { db, engine } = await world();
    await engine.run(burst, { n: 1 });
    let signal: AbortSignal | undefined;
    const relay = engine.relay({
      publishTimeout: '200ms',
      pollMs: 50,
      backoff: { initial: '1h' },
      publish: (_messages, context) => {
        signal = context.signal;
        return new Promise(() => {}); // never settles
      },
    });
    await relay.start();
    const [row] = await eventually(async () => {
      const r = await outbox(db);
      return r[0]?.lastError && r;
    });
    await relay.stop();
    expect(row).toMatchObject({ attempts: 1, dispatched: false, lastError: { name: 'TimeoutError', code: 'TIMEOUT' } });
    expect(signal?.aborted).toBe(true);
  });

  it('NOTIFY wakes an idle relay: emits and contract commits are published without waiting for the poll', async () => {
    const { db, engine } = await world();
    const sink = recorder();
    const relay = engine.relay({ publish: sink.publish, pollMs: 60_000 });
    await relay.start();
    await sleep(300); // idle: the next poll is a minute away

    const latencies: number[] = [];
    const emitted = Date.now();
    await engine.run(burst, { n: 1 });
    await eventually(async () => sink.messages().length === 1, 10_000, 5);
    latencies.push(Date.now() - emitted);

    await sleep(300);
    const committed = Date.now();
    const result = await engine.run(noter, { text: 'ping' });
    await eventually(async () => sink.messages().length === 4, 10_000, 5);
    latencies.push(Date.now() - committed);
    await relay.stop();

    const contractId = (result.output as { contractId: string }).contractId;
    expect(sink.messages().slice(1).map((m) => m.key)).toEqual([`${contractId}:0`, `${contractId}:1`, 'audit:ping']);
    expect(await pending(db)).toBe(0);
    console.log(`outbox relay wake-up latency (emit → publish, commit → publish): ${latencies.join(' ms, ')} ms`);
  });

  it('keeps publishing after its connections are terminated (a database restart), reporting through onError', async () => {
    const db = await testDatabase();
    const writer = await engineOn(db, { workflows: [burst] });
    const errors: unknown[] = [];
    const url = new URL(db.url);
    url.searchParams.set('application_name', 'relay_under_test');
    const relayEngine = await engineOn({ ...db, url: url.toString() }, { onError: (e) => errors.push(e) });
    const sink = recorder();
    const relay = relayEngine.relay({ publish: sink.publish, pollMs: 200 });
    await relay.start();
    await writer.run(burst, { n: 2 });
    await eventually(async () => sink.messages().length === 2);

    const { rows } = await db.pool.query(
      `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'relay_under_test'`,
    );
    expect(rows[0].n).toBeGreaterThan(0);
    await writer.run(burst, { n: 3 });
    await eventually(async () => (await pending(db)) === 0);
    await relay.stop();
    expect(sink.messages()).toHaveLength(5);
    expect(errors.length).toBeGreaterThan(0); // the LISTEN connection, at least, reported its loss
  });
});

describe('a relay process SIGKILLed', () => {
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  it.each([
    ['in the middle of publish', undefined, 'published 6'],
    ['after its claim, before publishing', 'afterCommitBeforePublish:kill', undefined],
  ])('%s: another relay publishes its messages after the lease, with the same keys', async (_phase, faults, killAfter) => {
    const { db, engine } = await world();
    await db.pool.query(DELIVERIES_DDL);
    const run = await engine.run(burst, { n: 6 });
    const keys = (await outbox(db)).map((r) => r.key);

    const child = spawnRelay({ DATABASE_URL: db.url, PUBLISH_TIMEOUT_MS: '60000', ...(faults ? { RATCHET_FAULTS: faults } : {}) });
    children.push(child.process);
    if (killAfter) {
      await child.waitFor(killAfter);
      child.process.kill('SIGKILL');
    }
    expect(await child.exited).toBe('SIGKILL');
    const childSaw = await deliveries(db);
    expect(childSaw).toEqual(killAfter ? keys.map((key) => ({ key, attempt: 1, relay: 'child' })) : []);

    // Leased for a minute: a relay started now leaves them alone…
    const rows = await outbox(db);
    expect(rows.every((r) => !r.dispatched && r.attempts === 1 && r.dueIn > 50)).toBe(true);
    const relay = engine.relay({
      pollMs: 50,
      publish: async (messages, { pool }) => {
        await pool.query(
          `INSERT INTO relay_deliveries (message_id, key, attempt, pid, relay) SELECT m.id, m.key, m.attempt, $4, 'survivor'
             FROM unnest($1::uuid[], $2::text[], $3::int[]) AS m(id, key, attempt)`,
          [messages.map((m) => m.id), messages.map((m) => m.key), messages.map((m) => m.attempt), process.pid],
        );
      },
    });
    await relay.start();
    await sleep(300);
    expect(relay.stats.claimed).toBe(0);

    // …until the lease has passed.
    await shift(db, 61_000);
    await eventually(async () => (await pending(db)) === 0);
    await relay.stop();
    const survivorSaw = (await deliveries(db)).filter((d) => d.relay === 'survivor');
    expect(survivorSaw).toEqual(keys.map((key) => ({ key, attempt: 2, relay: 'survivor' })));
    expect(keys.every((k) => k.startsWith(`${run.runId}:order.paid#`))).toBe(true);
    expect((await outbox(db)).every((r) => r.dispatched && r.attempts === 2)).toBe(true);
  });
});

describe('the notify publisher', () => {
  it('delivers each message as JSON on its topic; a payload over 8000 bytes fails with a typed error and stays pending', async () => {
    const { db, engine } = await world();
    const listener = new pg.Client({ connectionString: db.url });
    await listener.connect();
    const received: { channel: string; payload: string }[] = [];
    listener.on('notification', (n) => received.push({ channel: n.channel, payload: n.payload ?? '' }));
    await listener.query('LISTEN "order.paid"');
    try {
      const small = await engine.run(burst, { n: 2 });
      const large = await engine.run(burst, { n: 1, size: 9_000 });
      const relay = engine.relay({ publish: notifyPublisher(), pollMs: 50, backoff: { initial: '1h' } });
      await relay.start();
      await eventually(async () => received.length === 2 && (await outbox(db)).some((r) => r.lastError));
      await relay.stop();

      expect(received.map((r) => r.channel)).toEqual(['order.paid', 'order.paid']);
      const bodies = received.map((r) => JSON.parse(r.payload));
      expect(bodies.map((b) => b.key)).toEqual([`${small.runId}:order.paid#1`, `${small.runId}:order.paid#2`]);
      expect(bodies[0]).toMatchObject({ topic: 'order.paid', runId: small.runId, attempt: 1, payload: { i: 0, pad: '' } });
      expect(new Date(bodies[0].createdAt).getTime()).not.toBeNaN();
      const stuck = (await outbox(db)).find((r) => r.key === `${large.runId}:order.paid#1`)!;
      expect(stuck).toMatchObject({ dispatched: false, attempts: 1, lastError: { name: 'NotifyPayloadTooLargeError', code: 'NOTIFY_PAYLOAD_TOO_LARGE' } });
      expect(stuck.lastError!.message).toContain('8000');
    } finally {
      await listener.end();
    }
  });

  it('reports an oversized message as failed without failing the rest of the batch', async () => {
    const { engine } = await world();
    const message = (id: string, size: number): OutboxMessage => ({
      id, tenantId: '00000000-0000-0000-0000-000000000000', runId: id, topic: 't', key: `k-${id}`, payload: 'y'.repeat(size), attempt: 1, createdAt: new Date(),
    });
    const big = message('00000000-0000-7000-8000-000000000001', 8_000);
    const result = await notifyPublisher({ channel: 'app_events' })([big, message('00000000-0000-7000-8000-000000000002', 10)], {
      pool: engine.pool,
      signal: new AbortController().signal,
    });
    expect(result).toEqual({ failed: [{ id: big.id, error: expect.any(NotifyPayloadTooLargeError) }] });
    const error = (result as unknown as { failed: { error: NotifyPayloadTooLargeError }[] }).failed[0]!.error;
    expect(error).toMatchObject({ code: 'NOTIFY_PAYLOAD_TOO_LARGE', messageId: big.id, limit: 8000 });
    expect(error.bytes).toBeGreaterThan(8000);
  });
});

describe('bad options', () => {
  const publish = async () => {};
  it.each<[string, unknown, (string | number)[]]>([
    ['no publish', {}, ['publish']],
    ['publish not a function', { publish: 'kafka' }, ['publish']],
    ['batchSize 0', { publish, batchSize: 0 }, ['batchSize']],
    ['batchSize 1001', { publish, batchSize: 1001 }, ['batchSize']],
    ['batchSize 2.5', { publish, batchSize: 2.5 }, ['batchSize']],
    ['pollMs 0', { publish, pollMs: 0 }, ['pollMs']],
    ['publishTimeout unreadable', { publish, publishTimeout: 'soon' }, ['publishTimeout']],
    ['publishTimeout too short', { publish, publishTimeout: 10 }, ['publishTimeout']],
    ['backoff.initial unreadable', { publish, backoff: { initial: 'x' } }, ['backoff', 'initial']],
    ['backoff.jitter above 1', { publish, backoff: { jitter: 2 } }, ['backoff', 'jitter']],
    ['backoff.max below initial', { publish, backoff: { initial: '1m', max: '1s' } }, ['backoff', 'max']],
    ['backoff.maxAttempts', { publish, backoff: { maxAttempts: 3 } }, ['backoff', 'maxAttempts']],
    ['a misspelt option', { publish, batchsize: 5 }, ['batchsize']],
  ])('%s → ValidationError naming the field', async (_name, options, path) => {
    const { engine } = await sharedEngine();
    let thrown: unknown;
    try {
      engine.relay(options as RelayOptions);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ name: 'ValidationError', code: 'VALIDATION', path });
  });

  it('notifyPublisher refuses a channel Postgres would refuse', async () => {
    expect(() => notifyPublisher({ channel: 'c'.repeat(64) })).toThrow(expect.objectContaining({ code: 'VALIDATION', path: ['channel'] }));
    expect(() => notifyPublisher({ channel: '' })).toThrow(expect.objectContaining({ code: 'VALIDATION', path: ['channel'] }));
  });
});

let shared: Promise<World> | undefined;
function sharedEngine(): Promise<World> {
  return (shared ??= world());
}

async function deliveries(db: TestDatabase): Promise<{ key: string; attempt: number; relay: string }[]> {
  const { rows } = await db.pool.query(`SELECT key, attempt, relay FROM relay_deliveries ORDER BY n`);
  return rows;
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RELAY_PROCESS = fileURLToPath(new URL('../fixtures/relay-process.ts', import.meta.url));

/** The relay fixture in its own process (node --import tsx, so SIGKILL reaches the relay itself). */
function spawnRelay(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', RELAY_PROCESS], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const waiters: (() => void)[] = [];
  const onData = (d: Buffer) => {
    output += d;
    for (const w of waiters.splice(0)) w();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
  return {
    process: child,
    exited,
    /** Resolves once the process printed `text`; rejects if it exits first. */
    async waitFor(text: string): Promise<void> {
      while (!output.includes(text)) {
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`relay process exited before printing "${text}":\n${output}`);
        await Promise.race([new Promise<void>((resolve) => waiters.push(resolve)), exited.then(() => undefined)]);
      }
    },
  };
}
