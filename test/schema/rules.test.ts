/** The rules the database itself enforces (DESIGN §2), each shown rejecting what it should. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { uuidv7 } from '../../packages/engine/src/ids.js';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await freshDatabase();
});
afterAll(async () => {
  await db?.drop();
});

const tenantA = uuidv7();
const tenantB = uuidv7();

async function insertTask(tenant: string, fields: Record<string, unknown> = {}): Promise<string> {
  const id = uuidv7();
  const row: Record<string, unknown> = {
    tenant_id: tenant,
    id,
    workflow_name: 'wf',
    workflow_version: '1',
    state: 'pending',
    input_hash: 'h',
    due_at: new Date(),
    ...fields,
  };
  const cols = Object.keys(row);
  await db.pool.query(
    `INSERT INTO ratchet.tasks (${cols.join(', ')}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(', ')})`,
    Object.values(row),
  );
  return id;
}

async function sqlStateOf(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
    return undefined;
  } catch (error) {
    return (error as { code?: string }).code;
  }
}

async function count(sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM (${sql}) q`, values);
  return Number(rows[0]!.n);
}

describe('tenant-scoped foreign keys', () => {
  it.each(['operations', 'outbox', 'contracts', 'signals', 'events'])(
    'a %s row cannot point into another tenant',
    async (table) => {
      const task = await insertTask(tenantA);
      const values: Record<string, string> = {
        operations: `($1, '${uuidv7()}', $2, 's', 's#1', 1, 'step', 'succeeded')`,
        outbox: `($1, '${uuidv7()}', $2, 'topic')`,
        contracts: `($1, '${uuidv7()}', $2, 'k-${uuidv7()}', '1', '{}', '${'a'.repeat(64)}', 'sealed')`,
        signals: `($1, '${uuidv7()}', $2, 'approval')`,
        events: `($1, $2, 1, 'started')`,
      };
      const columns: Record<string, string> = {
        operations: '(tenant_id, id, task_id, step_name, step_key, seq, kind, state)',
        outbox: '(tenant_id, id, task_id, topic)',
        contracts: '(tenant_id, id, task_id, idempotency_key, contract_version, body, body_hash, status)',
        signals: '(tenant_id, id, task_id, name)',
        events: '(tenant_id, task_id, seq, event_type)',
      };
      const insert = `INSERT INTO ratchet.${table} ${columns[table]} VALUES ${values[table]}`;
      expect(await sqlStateOf(db.pool.query(insert, [tenantB, task]))).toBe('23503');
      // The same row in its own tenant is accepted: the rule, not the statement, rejected it.
      await db.pool.query(insert, [tenantA, task]);
    },
  );

  it('a child run cannot name a parent of another tenant', async () => {
    const parent = await insertTask(tenantA);
    expect(await sqlStateOf(insertTask(tenantB, { parent_id: parent }))).toBe('23503');
    await insertTask(tenantA, { parent_id: parent });
  });
});

describe('state enums', () => {
  it('rejects an unknown task state', async () => {
    expect(await sqlStateOf(insertTask(tenantA, { state: 'exploded' }))).toBe('23514');
  });

  it('rejects a running task without a lease, and a settled task that is still due', async () => {
    expect(await sqlStateOf(insertTask(tenantA, { state: 'running' }))).toBe('23514');
    expect(await sqlStateOf(insertTask(tenantA, { state: 'completed' }))).toBe('23514');
    await insertTask(tenantA, { state: 'completed', due_at: null });
  });

  it('rejects unknown operation states and kinds, contract statuses, event types', async () => {
    const task = await insertTask(tenantA);
    const op = (state: string, kind: string) =>
      db.pool.query(
        `INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state)
         VALUES ($1, $2, $3, 'x', $4, 1, $5, $6)`,
        [tenantA, uuidv7(), task, `x#${uuidv7()}`, kind, state],
      );
    expect(await sqlStateOf(op('maybe', 'step'))).toBe('23514');
    expect(await sqlStateOf(op('succeeded', 'teleport'))).toBe('23514');
    await op('succeeded', 'step');
    expect(
      await sqlStateOf(
        db.pool.query(
          `INSERT INTO ratchet.contracts (tenant_id, id, task_id, idempotency_key, contract_version, body, body_hash, status)
           VALUES ($1, $2, $3, 'c', '1', '{}', $4, 'pending')`,
          [tenantA, uuidv7(), task, 'b'.repeat(64)],
        ),
      ),
    ).toBe('23514');
    expect(
      await sqlStateOf(
        db.pool.query(`INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type) VALUES ($1, $2, 1, 'rebooted')`, [
          tenantA,
          task,
        ]),
      ),
    ).toBe('23514');
  });
});

describe('idempotency keys', () => {
  it('a run key is unique per tenant and workflow', async () => {
    await insertTask(tenantA, { idempotency_key: 'order-1' });
    expect(await sqlStateOf(insertTask(tenantA, { idempotency_key: 'order-1' }))).toBe('23505');
    await insertTask(tenantB, { idempotency_key: 'order-1' }); // another tenant
    await insertTask(tenantA, { idempotency_key: 'order-1', workflow_name: 'other' }); // another workflow
  });

  it('an effect key is unique per tenant; memoized steps carry none', async () => {
    const task = await insertTask(tenantA);
    const op = (tenant: string, kind: string, key: string | null, t = task) =>
      db.pool.query(
        `INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state, idempotency_key)
         VALUES ($1, $2, $3, 'x', $4, 1, $5, 'reserved', $6)`,
        [tenant, uuidv7(), t, `x#${uuidv7()}`, kind, key],
      );
    await op(tenantA, 'effect', 'charge-1');
    expect(await sqlStateOf(op(tenantA, 'tool', 'charge-1'))).toBe('23505');
    const otherTask = await insertTask(tenantB);
    await op(tenantB, 'effect', 'charge-1', otherTask);
    expect(await sqlStateOf(op(tenantA, 'step', 'charge-2'))).toBe('23514');
    await op(tenantA, 'step', null);
    await op(tenantA, 'step', null);
  });

  it('a step key is unique per run', async () => {
    const task = await insertTask(tenantA);
    const op = () =>
      db.pool.query(
        `INSERT INTO ratchet.operations (tenant_id, id, task_id, step_name, step_key, seq, kind, state)
         VALUES ($1, $2, $3, 'charge', 'charge#1', 1, 'step', 'succeeded')`,
        [tenantA, uuidv7(), task],
      );
    await op();
    expect(await sqlStateOf(op())).toBe('23505');
  });

  it('a contract key is unique per tenant', async () => {
    const task = await insertTask(tenantA);
    const insert = (tenant: string, t: string) =>
      db.pool.query(
        `INSERT INTO ratchet.contracts (tenant_id, id, task_id, idempotency_key, contract_version, body, body_hash, status)
         VALUES ($1, $2, $3, 'ticket-7', '1', '{}', $4, 'sealed')`,
        [tenant, uuidv7(), t, 'c'.repeat(64)],
      );
    await insert(tenantA, task);
    expect(await sqlStateOf(insert(tenantA, task))).toBe('23505');
    await insert(tenantB, await insertTask(tenantB));
  });
});

describe('events are append-only', () => {
  let task: string;
  beforeAll(async () => {
    task = await insertTask(tenantA);
    await db.pool.query(
      `INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type) VALUES ($1, $2, 1, 'started'), ($1, $2, 2, 'claimed')`,
      [tenantA, task],
    );
  });

  it('refuses UPDATE, DELETE and TRUNCATE', async () => {
    expect(await sqlStateOf(db.pool.query(`UPDATE ratchet.events SET event_type = 'failed' WHERE task_id = $1`, [task]))).toBe('RT001');
    expect(await sqlStateOf(db.pool.query(`DELETE FROM ratchet.events WHERE task_id = $1`, [task]))).toBe('RT001');
    expect(await sqlStateOf(db.pool.query(`TRUNCATE ratchet.events`))).toBe('RT001');
    expect(await sqlStateOf(db.pool.query(`TRUNCATE ratchet.tasks CASCADE`))).toBe('RT001');
    // Deleting the run cascades into its events, which the trigger refuses as well.
    expect(await sqlStateOf(db.pool.query(`DELETE FROM ratchet.tasks WHERE id = $1`, [task]))).toBe('RT001');
    expect(await count(`SELECT 1 FROM ratchet.events WHERE task_id = $1`, [task])).toBe(2);
  });

  it('allows DELETE only inside a transaction that set the purge flag', async () => {
    const client: pg.PoolClient = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('ratchet.allow_event_delete', 'on', true)`);
      await client.query(`DELETE FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2`, [tenantA, task]);
      await client.query('COMMIT');
      // The flag was transaction-local: the same session is refused again.
      const other = await insertTask(tenantA);
      await client.query(`INSERT INTO ratchet.events (tenant_id, task_id, seq, event_type) VALUES ($1, $2, 1, 'started')`, [tenantA, other]);
      expect(await sqlStateOf(client.query(`DELETE FROM ratchet.events WHERE task_id = $1`, [other]))).toBe('RT001');
    } finally {
      client.release();
    }
    expect(await count(`SELECT 1 FROM ratchet.events WHERE task_id = $1`, [task])).toBe(0);
  });
});

describe('ratchet.now()', () => {
  it('is the statement time shifted by ratchet.clock', async () => {
    const drift = async () => {
      const { rows } = await db.pool.query<{ s: number }>(`SELECT extract(epoch FROM ratchet.now() - statement_timestamp())::float8 AS s`);
      return rows[0]!.s;
    };
    expect(await drift()).toBe(0);
    await db.pool.query(`UPDATE ratchet.clock SET shift = interval '2 hours'`);
    expect(await drift()).toBe(7200);
    await db.pool.query(`UPDATE ratchet.clock SET shift = interval '0'`);
  });
});

describe('contracts: status moves only sealed → committed | failed; the sealed body never changes', () => {
  async function sealed(): Promise<string> {
    const task = await insertTask(tenantA);
    const id = uuidv7();
    await db.pool.query(
      `INSERT INTO ratchet.contracts (tenant_id, id, task_id, idempotency_key, contract_version, body, body_hash, status)
       VALUES ($1, $2, $3, $4, '1', '{"a":1}', $5, 'sealed')`,
      [tenantA, id, task, `guard-${id}`, 'd'.repeat(64)],
    );
    return id;
  }
  const update = (id: string, set: string) => sqlStateOf(db.pool.query(`UPDATE ratchet.contracts SET ${set} WHERE id = $1`, [id]));
  /** As the engine's commit does: inside a transaction that names the contract it settles. */
  const settle = async (id: string, set: string) => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT set_config('ratchet.settling_contract', $1, true)`, [id]);
      const state = await sqlStateOf(client.query(`UPDATE ratchet.contracts SET ${set} WHERE id = $1`, [id]));
      await client.query(state ? 'ROLLBACK' : 'COMMIT');
      return state;
    } finally {
      client.release();
    }
  };

  it('refuses a change of body, hash or key, and a status other than committed or failed', async () => {
    const id = await sealed();
    expect(await update(id, `body = '{"a":2}'`)).toBe('RT002');
    expect(await update(id, `body_hash = '${'e'.repeat(64)}'`)).toBe('RT002');
    expect(await update(id, `idempotency_key = 'other'`)).toBe('RT002');
    expect(await settle(id, `status = 'sealed', error_detail = '{}'`)).toBe('RT002');
    expect(await update(id, `status = 'committed', committed_at = now()`)).toBe('RT002'); // not by hand
    expect(await settle(id, `status = 'committed', committed_at = now()`)).toBeUndefined();
  });

  it('refuses any change once committed or failed', async () => {
    const committed = await sealed();
    expect(await settle(committed, `status = 'committed'`)).toBeUndefined();
    expect(await settle(committed, `status = 'failed'`)).toBe('RT002');
    expect(await settle(committed, `result = '[1]'`)).toBe('RT002');
    const failed = await sealed();
    expect(await settle(failed, `status = 'failed', error_detail = '{"reason":"dependency"}'`)).toBeUndefined();
    expect(await settle(failed, `status = 'committed'`)).toBe('RT002');
    const { rows } = await db.pool.query(`SELECT status FROM ratchet.contracts WHERE id = ANY($1) ORDER BY status`, [[committed, failed]]);
    expect(rows.map((r) => r.status)).toEqual(['committed', 'failed']);
  });
});
