/**
 * The invariants a chaos run must leave behind, checked from the database itself (DESIGN §6).
 * Each check returns violations as sentences naming the run or key; `checkInvariants` also
 * counts what it looked at, for the report.
 */
import type pg from 'pg';
import { outputProblem } from './workload.js';
import { EFFECT_TIMEOUT_MS } from './workload.js';

export interface InvariantReport {
  readonly violations: string[];
  readonly counts: {
    runs: number;
    byWorkflow: Record<string, number>;
    events: number;
    effects: number;
    contracts: number;
    outbox: number;
    /** Triage runs failed by a commit that exhausted its retries on serialization failures or deadlocks (StepFailedError, DESIGN §4). */
    commitsExhausted: number;
    /** Triage runs failed because every sample of the stub model was invalid (ctx.infer's maxSamples). */
    inferExhausted: number;
    /** Outbox deliveries beyond the first (at-least-once redeliveries). */
    redeliveries: number;
    /** Calls to the key-honouring provider beyond one per key (a retry after a lost outcome; the provider deduplicated them). */
    honouringExtraCalls: number;
    /** Calls to the provider that ignores keys beyond one per key: what at-least-once costs without keys. */
    rawDuplicates: number;
    rawKeysCalledTwice: number;
    /** Honouring-provider calls that outlived the effect timeout (the engine may then retry; not a violation). */
    overtimeCalls: number;
  };
}

const FINAL = new Set(['completed', 'failed', 'cancelled']);

/** The state each event moves a run to; contract events leave it running. */
const EVENT_STATE: Record<string, string> = {
  started: 'pending',
  claimed: 'running',
  released: 'pending',
  lease_reclaimed: 'running',
  sleeping: 'sleeping',
  woke: 'running',
  waiting: 'waiting',
  signalled: 'running',
  parked: 'parked',
  resolved: 'running',
  contract_sealed: 'running',
  contract_committed: 'running',
  contract_failed: 'running',
  completed: 'completed',
  failed: 'failed',
  cancelled: 'cancelled',
};

/** Which state an event may follow (undefined: any). */
const EVENT_FROM: Record<string, readonly string[]> = {
  claimed: ['pending'],
  lease_reclaimed: ['running'],
  woke: ['sleeping', 'waiting'],
  signalled: ['waiting'],
  contract_committed: ['running'],
  contract_failed: ['running'],
  completed: ['running'],
};

export async function checkInvariants(pool: pg.Pool): Promise<InvariantReport> {
  const violations: string[] = [];
  const add = (message: string) => {
    if (violations.length < 200) violations.push(message);
    else if (violations.length === 200) violations.push('… more violations left out');
  };

  // 1. Every run reached its final state, completed, with the output its workflow must give; no lease left.
  const tasks = await pool.query<{ id: string; workflow: string; state: string; stateVersion: number; output: unknown; leaseOwner: string | null; error: unknown }>(
    `SELECT id, workflow_name AS workflow, state, state_version AS "stateVersion", output, lease_owner AS "leaseOwner", error FROM ratchet.tasks`,
  );
  const byWorkflow: Record<string, number> = {};
  /** Triage runs whose commit exhausted its retries on serialization conflicts: DESIGN §4's StepFailedError, a final outcome. */
  const exhausted = new Set<string>();
  /** Triage runs whose stub model gave maxSamples invalid answers (it does 15 % of the time): a final outcome by design (DESIGN §4). */
  const unsampled = new Set<string>();
  for (const t of tasks.rows) {
    byWorkflow[t.workflow] = (byWorkflow[t.workflow] ?? 0) + 1;
    if (!FINAL.has(t.state)) add(`run ${t.id} (${t.workflow}) is ${t.state}, not final`);
    else if (isCommitExhausted(t)) exhausted.add(t.id);
    else if (isInferExhausted(t)) unsampled.add(t.id);
    else if (t.state !== 'completed') add(`run ${t.id} (${t.workflow}) ended ${t.state}: ${JSON.stringify(t.error)}`);
    else {
      const problem = outputProblem(t.workflow, t.output);
      if (problem) add(`run ${t.id}: ${problem}`);
    }
    if (t.leaseOwner !== null) add(`run ${t.id} (${t.state}) still leased to ${t.leaseOwner} after every worker stopped`);
  }

  // 2. Events contiguous (seq 1..state_version) and replaying, event by event, to the run's state.
  const events = await pool.query<{ taskId: string; seq: number; type: string }>(
    `SELECT task_id AS "taskId", seq, event_type AS type FROM ratchet.events ORDER BY task_id, seq`,
  );
  const eventsByTask = new Map<string, { seq: number; type: string }[]>();
  for (const e of events.rows) {
    let list = eventsByTask.get(e.taskId);
    if (!list) eventsByTask.set(e.taskId, (list = []));
    list.push(e);
  }
  for (const t of tasks.rows) {
    const list = eventsByTask.get(t.id) ?? [];
    eventsByTask.delete(t.id);
    if (list.length !== t.stateVersion || list.some((e, i) => e.seq !== i + 1)) {
      add(`run ${t.id}: events ${list.map((e) => e.seq).join(',')} are not 1..${t.stateVersion}`);
      continue;
    }
    let state: string | undefined;
    for (const e of list) {
      const from = EVENT_FROM[e.type];
      if (state === undefined ? e.type !== 'started' : from !== undefined && !from.includes(state)) {
        add(`run ${t.id}: event ${e.seq} ${e.type} cannot follow state ${state ?? '(none)'}`);
      }
      state = EVENT_STATE[e.type] ?? state;
    }
    if (state !== t.state) add(`run ${t.id}: events replay to ${state}, the run is ${t.state}`);
  }
  for (const taskId of eventsByTask.keys()) add(`events of run ${taskId}, which does not exist`);

  // 3. Effects at the honouring provider: one charge per key of every succeeded effect, none
  //    for a key no effect has, the recorded result is the charge; calls never overlapped.
  const effects = await pool.query<{ taskId: string; stepKey: string; key: string; state: string; result: { chargeId?: string } | null }>(
    `SELECT task_id AS "taskId", step_key AS "stepKey", idempotency_key AS key, state, result
       FROM ratchet.operations WHERE kind = 'effect'`,
  );
  const charges = new Map((await pool.query<{ key: string }>(`SELECT key FROM chaos_charges`)).rows.map((r) => [r.key, true]));
  const rawCalls = new Map((await pool.query<{ key: string; n: number }>(`SELECT key, count(*)::int AS n FROM chaos_raw_calls GROUP BY key`)).rows.map((r) => [r.key, r.n]));
  const effectKeys = new Set<string>();
  for (const op of effects.rows) {
    effectKeys.add(op.key);
    if (op.state !== 'succeeded') add(`effect ${op.stepKey} of run ${op.taskId} is ${op.state}`);
    if (op.stepKey.startsWith('charge#')) {
      if (!charges.has(op.key)) add(`effect ${op.key} succeeded without a charge at the provider`);
      if (op.result?.chargeId !== `ch_${op.key}`) add(`effect ${op.key} recorded ${JSON.stringify(op.result)}, not its charge`);
    } else if (op.stepKey.startsWith('notify#') && !rawCalls.has(op.key)) {
      add(`effect ${op.key} succeeded without a call at the provider that ignores keys`);
    }
  }
  for (const key of charges.keys()) if (!effectKeys.has(key)) add(`charge ${key} made for no effect`);
  for (const key of rawCalls.keys()) if (!effectKeys.has(key)) add(`raw call ${key} made for no effect`);
  const attempts = await pool.query<{ a: string; b: string; key: string }>(
    `SELECT a.id AS a, b.id AS b, a.key FROM chaos_attempts a JOIN chaos_attempts b
        ON b.key = a.key AND b.id <> a.id AND b.started_at >= a.started_at AND b.started_at < a.finished_at
     WHERE a.finished_at - a.started_at < $1 * interval '1 millisecond'`,
    [EFFECT_TIMEOUT_MS],
  );
  for (const r of attempts.rows) add(`effect ${r.key} executed concurrently (provider calls ${r.a} and ${r.b} overlap)`);
  const attemptStats = await pool.query<{ extra: number; overtime: number }>(
    `SELECT (count(*) - count(DISTINCT key))::int AS extra,
            count(*) FILTER (WHERE finished_at IS NULL OR finished_at - started_at >= $1 * interval '1 millisecond')::int AS overtime
       FROM chaos_attempts`,
    [EFFECT_TIMEOUT_MS],
  );

  // 4. Contracts: each committed once, its business row (a ticket, keyed by the run's dedupe key) exactly once.
  const contracts = await pool.query<{ taskId: string; status: string; dedupeKey: string | null; tickets: number }>(
    `SELECT c.task_id AS "taskId", c.status, t.input->>'dedupeKey' AS "dedupeKey",
            (SELECT count(*)::int FROM tickets k WHERE k.dedupe_key = t.input->>'dedupeKey') AS tickets
       FROM ratchet.contracts c JOIN ratchet.tasks t ON t.tenant_id = c.tenant_id AND t.id = c.task_id`,
  );
  for (const c of contracts.rows) {
    // A commit that exhausted its retries applied nothing: its contract stays sealed, with no row.
    const expected = exhausted.has(c.taskId) ? { status: 'sealed', tickets: 0 } : { status: 'committed', tickets: 1 };
    if (c.status !== expected.status) add(`contract of run ${c.taskId} is ${c.status}, expected ${expected.status}`);
    if (c.tickets !== expected.tickets) add(`contract of run ${c.taskId} (${c.dedupeKey}) has ${c.tickets} ticket rows, not ${expected.tickets}`);
  }
  const orphanTickets = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM tickets k WHERE NOT EXISTS
       (SELECT 1 FROM ratchet.tasks t WHERE t.workflow_name = 'triage' AND t.input->>'dedupeKey' = k.dedupe_key)`,
  );
  if (orphanTickets.rows[0]!.n > 0) add(`${orphanTickets.rows[0]!.n} ticket rows belong to no triage run`);
  const triageRuns = (byWorkflow.triage ?? 0) - unsampled.size;
  if (contracts.rows.length !== triageRuns) add(`${contracts.rows.length} contracts for ${triageRuns} triage runs that got a valid answer`);

  // 5. Outbox: every message dispatched and delivered at least once; every emit step has its message.
  const outbox = await pool.query<{ id: string; dispatched: boolean; deliveries: number }>(
    `SELECT o.id, o.dispatched_at IS NOT NULL AS dispatched, (SELECT count(*)::int FROM chaos_published p WHERE p.message_id = o.id) AS deliveries
       FROM ratchet.outbox o`,
  );
  let redeliveries = 0;
  for (const m of outbox.rows) {
    if (!m.dispatched) add(`outbox message ${m.id} was never dispatched`);
    if (m.deliveries === 0) add(`outbox message ${m.id} was never published`);
    redeliveries += Math.max(0, m.deliveries - 1);
  }
  const emits = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM ratchet.operations op WHERE op.kind = 'emit'
        AND NOT EXISTS (SELECT 1 FROM ratchet.outbox o WHERE o.tenant_id = op.tenant_id AND o.task_id = op.task_id AND o.message_key = op.task_id || ':' || op.step_key)`,
  );
  if (emits.rows[0]!.n > 0) add(`${emits.rows[0]!.n} emit steps have no outbox message`);
  const expectedMessages = tasks.rows.filter((t) => t.workflow !== 'chaos-kid' && !exhausted.has(t.id) && !unsampled.has(t.id)).length;
  if (outbox.rows.length !== expectedMessages) {
    add(`${outbox.rows.length} outbox messages, expected one per run but chaos-kid and the triage runs that did not commit (${expectedMessages})`);
  }

  let rawDuplicates = 0;
  let rawKeysCalledTwice = 0;
  for (const n of rawCalls.values()) {
    rawDuplicates += n - 1;
    if (n > 1) rawKeysCalledTwice += 1;
  }
  return {
    violations,
    counts: {
      runs: tasks.rows.length,
      byWorkflow,
      events: events.rows.length,
      effects: effects.rows.length,
      contracts: contracts.rows.length,
      outbox: outbox.rows.length,
      redeliveries,
      commitsExhausted: exhausted.size,
      inferExhausted: unsampled.size,
      honouringExtraCalls: attemptStats.rows[0]!.extra,
      rawDuplicates,
      rawKeysCalledTwice,
      overtimeCalls: attemptStats.rows[0]!.overtime,
    },
  };
}

/** Failed with StepFailedError at a commit step, every attempt lost to a serialization failure or deadlock. */
function isCommitExhausted(t: { workflow: string; state: string; error: unknown }): boolean {
  const error = t.error as { code?: string; data?: { step?: string }; cause?: unknown } | null;
  if (t.workflow !== 'triage' || t.state !== 'failed' || error?.code !== 'STEP_FAILED' || !error.data?.step?.startsWith('commit:')) return false;
  const text = JSON.stringify(error.cause ?? null);
  return text.includes('"40001"') || text.includes('"40P01"');
}

/** Failed with StepFailedError at the infer step because no sample matched the schema. */
function isInferExhausted(t: { workflow: string; state: string; error: unknown }): boolean {
  const error = t.error as { code?: string; data?: { step?: string }; message?: string } | null;
  return t.workflow === 'triage' && t.state === 'failed' && error?.code === 'STEP_FAILED' && error.data?.step === 'classify#1' && /did not match the schema/.test(JSON.stringify(error));
}

/**
 * Watches `state_version` while the chaos runs: a run whose version is lower than when last seen
 * is a stale write that overwrote a newer state.
 */
export class VersionWatch {
  readonly #seen = new Map<string, number>();
  readonly violations: string[] = [];
  samples = 0;

  async sample(pool: pg.Pool): Promise<void> {
    const { rows } = await pool.query<{ id: string; v: number }>(`SELECT id, state_version AS v FROM ratchet.tasks`);
    this.samples += 1;
    for (const { id, v } of rows) {
      const before = this.#seen.get(id);
      if (before !== undefined && v < before && this.violations.length < 50) this.violations.push(`run ${id}: state_version went from ${before} back to ${v}`);
      if (before === undefined || v > before) this.#seen.set(id, v);
    }
  }
}
