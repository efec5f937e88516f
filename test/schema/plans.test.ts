/**
 * Plans of the lookups every run makes, on EMPTY tables with GENERIC plans — the conditions under
 * which DESIGN §7 measured Postgres picking an index led by tenant_id alone for a (tenant_id, id)
 * lookup and then filtering every row of the tenant. A plan that scans a table, or uses an index
 * whose condition pins nothing but the tenant, fails here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { freshDatabase, type TestDatabase } from '../helpers/database.js';
import { CLAIM_TASKS_SQL } from '../../packages/engine/src/store/leases.js';
import { INSERT_OPERATION_SQL, INSERT_OPERATIONS_SQL, WRITE_OPERATION_SQL } from '../../packages/engine/src/store/operations.js';
import { openDatabase } from '../../packages/engine/src/store/database.js';

let db: TestDatabase;
let client: pg.PoolClient;
beforeAll(async () => {
  db = await freshDatabase();
  client = await db.pool.connect();
  await client.query(`SET plan_cache_mode = force_generic_plan`);
  // On empty tables a sequential scan costs nothing, which would hide the question asked here:
  // WHICH index the planner reaches for. Scans stay visible (and fail) if no index qualifies.
  await client.query(`SET enable_seqscan = off`);
});
afterAll(async () => {
  client?.release();
  await db?.drop();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  Filter?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

let statementNo = 0;
/** The generic plan of `sql` with parameters of `types`, as a flat list of nodes. */
async function genericPlan(sql: string, types: string[]): Promise<PlanNode[]> {
  const name = `plan_${++statementNo}`;
  await client.query(`PREPARE ${name}(${types.join(', ')}) AS ${sql}`);
  const args = types.map((t) => (t === 'uuid' ? `'00000000-0000-0000-0000-000000000001'` : t === 'text[]' ? `'{}'` : t === 'integer' ? '1' : `'x'`));
  const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE ${name}(${args.join(', ')})`);
  await client.query(`DEALLOCATE ${name}`);
  const plan = (rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan;
  return nodes(plan);
}

/** The generic plan of an engine statement, parameter types inferred by Postgres. */
async function inferredPlan(sql: string): Promise<PlanNode[]> {
  const params = Math.max(...[...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])));
  const name = `plan_${++statementNo}`;
  await client.query(`PREPARE ${name} AS ${sql}`);
  const { rows } = await client.query(`EXPLAIN (FORMAT JSON) EXECUTE ${name}(${Array(params).fill('NULL').join(', ')})`);
  await client.query(`DEALLOCATE ${name}`);
  return nodes((rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
}

/** Asserts the plan reaches `table` through `index` with a condition on more than the tenant. */
function expectIndexed(plan: PlanNode[], table: string, index: string, mustPin: string[]): void {
  const scans = plan.filter((n) => n['Relation Name'] === table || n['Index Name'] === index);
  expect(scans.map((n) => n['Node Type'])).not.toContain('Seq Scan');
  const scan = scans.find((n) => n['Index Name'] === index);
  expect(scan, `expected ${index} in ${JSON.stringify(plan.map((n) => [n['Node Type'], n['Index Name']]))}`).toBeDefined();
  const cond = scan!['Index Cond'] ?? '';
  for (const column of mustPin) expect(cond).toContain(column);
  const pinned = [...cond.matchAll(/\((\w+) (?:=|<=|>=|<|>)/g)].map((m) => m[1]);
  expect(pinned.some((c) => c !== 'tenant_id'), `index condition pins only the tenant: ${cond}`).toBe(true);
}

describe('generic plans on empty tables', () => {
  it('the foreign-key check into tasks uses the primary key on both columns', async () => {
    // The statement Postgres's RI trigger runs for every child insert.
    const plan = await genericPlan(
      `SELECT 1 FROM ONLY ratchet.tasks x WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND id OPERATOR(pg_catalog.=) $2 FOR KEY SHARE OF x`,
      ['uuid', 'uuid'],
    );
    expectIndexed(plan, 'tasks', 'tasks_pkey', ['tenant_id', 'id']);
  });

  it('the lease fence locks the task through its primary key', async () => {
    const plan = await genericPlan(
      `SELECT 1 FROM ratchet.tasks WHERE tenant_id = $1 AND id = $2 AND lease_owner = $3 AND state_version = $4 FOR SHARE`,
      ['uuid', 'uuid', 'text', 'integer'],
    );
    expectIndexed(plan, 'tasks', 'tasks_pkey', ['tenant_id', 'id']);
  });

  it('loading a run’s operations ranges over its task, not its tenant', async () => {
    const plan = await genericPlan(
      `SELECT * FROM ratchet.operations WHERE tenant_id = $1 AND task_id = $2 ORDER BY seq`,
      ['uuid', 'uuid'],
    );
    expectIndexed(plan, 'operations', 'operations_step_key_unique', ['task_id']);
  });

  it.each([
    ['operations', 'operations_step_key_unique'],
    ['events', 'events_pkey'],
    ['outbox', 'outbox_task'],
    ['contracts', 'contracts_task'],
    ['signals', 'signals_task_name'],
    ['tasks', 'tasks_parent'],
  ])('deleting a run cascades into %s through %s', async (table, index) => {
    const column = table === 'tasks' ? 'parent_id' : 'task_id';
    const plan = await genericPlan(
      `DELETE FROM ONLY ratchet.${table} WHERE tenant_id OPERATOR(pg_catalog.=) $1 AND ${column} OPERATOR(pg_catalog.=) $2`,
      ['uuid', 'uuid'],
    );
    expectIndexed(plan, table, index, [column]);
  });

  it('an idempotent start finds the run by its key', async () => {
    const plan = await genericPlan(
      `SELECT id FROM ratchet.tasks WHERE tenant_id = $1 AND workflow_name = $2 AND idempotency_key = $3`,
      ['uuid', 'text', 'text'],
    );
    expectIndexed(plan, 'tasks', 'tasks_idempotency_key_unique', ['idempotency_key']);
  });

  it('the engine’s claim statement ranges over due_at per registered workflow', async () => {
    const plan = await inferredPlan(CLAIM_TASKS_SQL);
    expectIndexed(plan, 'tasks', 'tasks_due', ['workflow_name', 'workflow_version', 'due_at']);
    // Pending runs come from their own index, in priority order.
    expectIndexed(plan, 'tasks', 'tasks_pending', ['workflow_name', 'workflow_version']);
    // ... in the index's order, with no sort above it: a sort reads the whole backlog of due
    // pending runs at every claim (3,000 of them: 2.3 ms instead of 0.04 ms for the 8 it takes).
    const sorted = plan.filter((n) => n['Node Type'] === 'Sort' && (n.Plans ?? []).some((child) => child['Index Name'] === 'tasks_pending'));
    expect(sorted).toEqual([]);
  });

  it.each([
    ['a fresh record', INSERT_OPERATION_SQL],
    ['an attempt over a reserved record', WRITE_OPERATION_SQL],
    ['fresh records of several runs in one statement', INSERT_OPERATIONS_SQL],
  ])('the engine’s checkpoint statement (%s) fences through the task’s primary key', async (_, sql) => {
    const plan = await inferredPlan(sql);
    expectIndexed(plan, 'tasks', 'tasks_pkey', ['tenant_id', 'id']);
  });
});

describe('the engine’s connections use generic plans', () => {
  const modes = async (pool: pg.Pool) => (await pool.query(`SELECT current_setting('plan_cache_mode') AS mode`)).rows[0].mode as string;

  it('on a pool the engine opens (the claim is planned once per connection); a caller’s pool keeps its own setting', async () => {
    const opened = await openDatabase(db.url, 2);
    try {
      // Both connections, however the pool hands them out.
      const [a, b] = await Promise.all([opened.pool.connect(), opened.pool.connect()]);
      for (const c of [a, b]) expect((await c.query(`SELECT current_setting('plan_cache_mode') AS mode`)).rows[0].mode).toBe('force_generic_plan');
      a.release();
      b.release();
      // The claim is planned once per connection, not at every call: with `auto` it was planned every time.
      const c = await opened.pool.connect();
      try {
        await c.query({ name: 'claim', text: CLAIM_TASKS_SQL, values: [['wf'], ['1'], 1, 'w', 1000, 10, null] });
        const before = (await c.query(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'claim'`)).rows[0];
        for (let i = 0; i < 6; i += 1) await c.query({ name: 'claim', text: CLAIM_TASKS_SQL, values: [['wf'], ['1'], 1, 'w', 1000, 10, null] });
        const after = (await c.query(`SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'claim'`)).rows[0];
        expect(Number(after.custom_plans)).toBe(Number(before.custom_plans));
        expect(Number(after.generic_plans) - Number(before.generic_plans)).toBe(6);
      } finally {
        c.release();
      }
    } finally {
      await opened.close();
    }
    const theirs = await openDatabase(db.pool);
    expect(await modes(theirs.pool)).toBe('auto');
  });
});

// 100,000 runs, not 3,000: on a table that small PostgreSQL 15 prices a sequential scan and the
// primary-key lookup (ten-by-ten array probes) within a few percent of each other, and takes either
// from one ANALYZE to the next. Here the scan costs several times the lookup, and the join alone
// (estimated at a tenth of a tenth of the backlog) would still hash the whole table.
describe('the claim with a backlog (100,000 due pending runs, analyzed, sequential scans allowed)', () => {
  it('takes runs in index order and updates them through the primary key: its cost does not grow with the backlog', async () => {
    // In one transaction rolled back at the end: the rows and their statistics go with it.
    await client.query(`BEGIN`);
    try {
      await client.query(`SET LOCAL enable_seqscan = on`);
      await client.query(
        `INSERT INTO ratchet.tasks (tenant_id, id, workflow_name, workflow_version, state, due_at, input_hash)
         SELECT '00000000-0000-0000-0000-000000000001', gen_random_uuid(), 'backlog', '1', 'pending', now() - interval '1 minute', 'x'
           FROM generate_series(1, 100000)`,
      );
      await client.query(`ANALYZE ratchet.tasks`);
      const plan = await inferredPlan(CLAIM_TASKS_SQL);
      expect(plan.filter((n) => n['Node Type'] === 'Sort' && (n.Plans ?? []).some((child) => child['Index Name'] === 'tasks_pending'))).toEqual([]);
      const update = plan.find((n) => n['Node Type'] === 'ModifyTable' && n['Relation Name'] === 'tasks');
      expectIndexed(nodes(update!), 'tasks', 'tasks_pkey', ['tenant_id', 'id']);
    } finally {
      await client.query(`ROLLBACK`);
    }
  });
});
