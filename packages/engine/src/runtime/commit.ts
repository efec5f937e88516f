/**
 * `ctx.commit`: applies a sealed contract in ONE SERIALIZABLE transaction (DESIGN §4). The model
 * is never called inside; agent output reaches SQL only as bound parameters.
 *
 *   1. the lease fence (task row FOR UPDATE at owner and state_version) — not ours: stop
 *   2. lock the contract row; committed already → its stored result (idempotent)
 *   3. re-hash the stored body; a mismatch with the stored or the caller's hash → ContractTamperedError
 *   4. every dependency: `exists` locks the rows it finds FOR SHARE, `notExists` takes an
 *      advisory lock on the key, `check` runs a registered predicate — so they hold against
 *      READ COMMITTED writers too; one unmet → ContractRejectedError
 *   5. every operation through its registered action
 *   6. contract `committed` with its results, the commit's step record, outbox rows, the run's
 *      `contract_committed` event — then COMMIT
 *
 * Serialization failures, deadlocks and dropped connections retry the whole transaction (fence
 * first) a bounded number of times; a lost lease leaves the contract `sealed` for the new owner.
 * Rejections are recorded (the contract `failed` with its reason, the step's error), so replay
 * rethrows them; exhausted retries are StepFailedError.
 */
import type pg from 'pg';
import {
  ContractConflictError,
  ContractRejectedError,
  ContractTamperedError,
  RatchetError,
  StepFailedError,
  ValidationError,
  canonicalJson,
  deserializeError,
  isRatchetError,
  parseWithSchema,
  serializeError,
  sha256Hex,
  type CommitResult,
  type ContractBody,
  type SealedContract,
  type SerializedError,
} from '@ratchet/sdk';
import { commitTx, type OutboxMessage } from '../contracts/tx.js';
import { uuidv7 } from '../ids.js';
import { lockContract, lockFence, ownedVersion, settleContract, type ContractRecord } from '../store/contracts.js';
import { getOperation } from '../store/operations.js';
import type { OperationRecord } from '../store/rows.js';
import { DEADLOCK_DETECTED, INTEGRITY_CONSTRAINT_CLASS, SERIALIZATION_FAILURE, isTransient, sqlState } from '../store/sqlstate.js';
import { delay } from './checkpoint.js';
import type { Execution } from './execution.js';
import { recordedValue } from './json.js';
import { dependencyHolds, describeDependency } from './dependencies.js';

/**
 * Attempts at the commit transaction. Serialization failures and deadlocks are the normal price
 * of SERIALIZABLE under concurrency (false positives included: predicate locks are taken on
 * whole index pages, and runs started together share them), so they get the larger budget
 * before StepFailedError. A lost connection gets the smaller one, then the segment stops.
 */
const MAX_ATTEMPTS = 6;
const MAX_CONFLICT_ATTEMPTS = 12;

function isConflict(cause: unknown): boolean {
  const state = sqlState(cause);
  return state === SERIALIZATION_FAILURE || state === DEADLOCK_DETECTED;
}

const NEVER = new Promise<never>(() => {});

/** A rejection decided inside the transaction: the contract is marked failed with it. */
class Rejection {
  constructor(
    readonly reason: string,
    readonly error: RatchetError,
    readonly detail: Record<string, unknown> = {},
  ) {}
}

/** An action or check failed (a constraint, a bug, a deliberate throw): rolled back, then recorded as a rejection. */
class ApplyFailure {
  constructor(
    readonly rejection: Rejection,
    readonly cause: unknown,
  ) {}
}

type Attempt =
  | { kind: 'committed'; result: CommitResult; version: number; at: Date; sealedAt: Date }
  | { kind: 'rejected'; rejection: Rejection; version: number; at: Date }
  | { kind: 'settled-before'; row: ContractRecord }
  | { kind: 'lost' }
  | { kind: 'retry'; cause: unknown };

export async function runCommit(run: Execution, name: string, key: string, recorded: OperationRecord | undefined, contract: SealedContract): Promise<CommitResult> {
  if (recorded) return run.replay<CommitResult>(key, recorded);
  return settleStep(run, name, key, contract, () => attemptCommit(run, name, key, contract));
}

/**
 * `ctx.abandon(contract, reason)`: settles a sealed contract as `failed` (reason `abandoned`)
 * without applying it — a human declined it, a deadline passed. Same step key as its commit
 * (`commit:<id>#n`), so a contract is either committed or abandoned, never both; a later
 * `ctx.commit` of it rethrows the recorded ContractRejectedError. Abandoning a contract that is
 * already committed is a ContractConflictError.
 */
export async function runAbandon(run: Execution, name: string, key: string, recorded: OperationRecord | undefined, contract: SealedContract, reason: string): Promise<void> {
  try {
    const result = recorded
      ? await run.replay<CommitResult>(key, recorded)
      : await settleStep(run, name, key, contract, () =>
          inTransaction(run, async (client) => {
            const row = await lockContract(client, run.tenantId, contract.id);
            if (!row) throw new ValidationError(`no contract ${contract.id} in this tenant: pass the value ctx.seal returned`, { path: ['contract'], runId: run.runId });
            if (row.status !== 'sealed') return { kind: 'settled-before', row };
            const error = new ContractRejectedError(`contract ${row.id} abandoned: ${reason}`, { reason: 'abandoned', contractId: row.id, runId: run.runId, step: key });
            return reject(run, client, name, key, row, new Rejection('abandoned', error, { note: reason }));
          }),
        );
    throw new ContractConflictError(`contract ${result.contractId} is already committed; it cannot be abandoned`, { hash: result.hash });
  } catch (error) {
    if (isRatchetError(error, 'CONTRACT_REJECTED')) return; // failed: abandoned now, or rejected before
    throw error;
  }
}

/** The commit step's attempts: retried on serialization failures and lost connections, fenced, recorded once. */
async function settleStep(run: Execution, name: string, key: string, contract: SealedContract, attemptOnce: () => Promise<Attempt>): Promise<CommitResult> {
  let lastCause: unknown;
  let attempt = 1;
  for (; ; attempt += 1) {
    if (attempt > 1) await run.hook('beforeCommitRetry', key, attempt);
    const agent = contract.body?.agent;
    const info = { kind: 'commit', name, stepKey: key, attempt, contractId: contract.id, contractHash: contract.hash, ...(agent ? { agent } : {}) } as const;
    const outcome = await run.instrument(info, async (facts) => {
      const tried = await attemptOnce();
      if (tried.kind === 'committed') Object.assign(facts, { contractStatus: 'committed', sealedAt: tried.sealedAt, settledAt: tried.at });
      else if (tried.kind === 'rejected') Object.assign(facts, { contractStatus: 'failed', settledAt: tried.at, rejection: tried.rejection.reason });
      else if (tried.kind === 'retry') facts.contractStatus = 'retry';
      return tried;
    });
    switch (outcome.kind) {
      case 'committed':
        run.advanceVersion(outcome.version);
        run.fact(key, outcome.at);
        return outcome.result;
      case 'rejected':
        run.advanceVersion(outcome.version);
        run.fact(key, outcome.at);
        throw outcome.rejection.error;
      case 'settled-before':
        return adoptSettled(run, name, key, outcome.row);
      case 'lost': {
        // After a connection lost at COMMIT, the fence fails because our own commit moved the
        // version: find our commit's record before concluding the run is someone else's.
        const mine = attempt > 1 ? await run.sql((pool) => getOperation(pool, run.tenantId, run.runId, key)) : null;
        const version = mine ? await run.sql((pool) => ownedVersion(pool, run.fence)) : null;
        if (mine && version !== null) {
          run.advanceVersion(version);
          return run.replay<CommitResult>(key, mine);
        }
        run.lose();
        return NEVER;
      }
      case 'retry':
        lastCause = outcome.cause;
    }
    if (attempt >= (isConflict(lastCause) ? MAX_CONFLICT_ATTEMPTS : MAX_ATTEMPTS)) break;
    await delay(Math.min(1_000, 20 * 2 ** attempt) * (0.5 + Math.random()));
  }
  // A database that stayed unreachable (a restart longer than the retries) is not the contract's
  // failure: stop the segment, as a lost checkpoint does; the lease expires and the run resumes.
  if (!isConflict(lastCause) && (isConnectionError(lastCause) || isTransient(lastCause))) {
    run.lose();
    return NEVER;
  }
  const failure = new StepFailedError(`commit of contract ${contract.id} did not get through after ${attempt} attempts (serialization failures or lost connections)`, {
    runId: run.runId,
    step: key,
    attempts: attempt,
    cause: lastCause,
  });
  const written = await run.write({
    stepName: name, stepKey: key, kind: 'commit', idempotencyKey: null, inputHash: null, state: 'failed',
    attempt, expectedAttempt: null, inFlight: false, deadlineInMs: null, error: serializeError(failure),
  });
  run.fact(key, written.completedAt);
  throw failure;
}

/** One try at the transaction; an action's failure is rolled back, then recorded as a rejection in a second transaction. */
async function attemptCommit(run: Execution, name: string, key: string, contract: SealedContract): Promise<Attempt> {
  try {
    return await inTransaction(run, (client) => apply(run, client, name, key, contract));
  } catch (error) {
    if (!(error instanceof ApplyFailure)) throw error;
    return inTransaction(run, async (client) => {
      const row = await lockContract(client, run.tenantId, contract.id);
      if (!row || row.status !== 'sealed') return row ? { kind: 'settled-before', row } : { kind: 'retry', cause: error.cause };
      return reject(run, client, name, key, row, error.rejection);
    });
  }
}

/** BEGIN SERIALIZABLE → fence → body → COMMIT; serialization failures, deadlocks and dropped connections come back as 'retry'. */
async function inTransaction(run: Execution, body: (client: pg.PoolClient) => Promise<Attempt>): Promise<Attempt> {
  let client: pg.PoolClient;
  try {
    client = await run.pool.connect();
  } catch (error) {
    run.onError?.(error);
    return { kind: 'retry', cause: error };
  }
  let broken = false;
  try {
    // Actions and checks run user SQL here: the database's plan_cache_mode, not the engine's (store/database.ts).
    await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL plan_cache_mode TO DEFAULT');
    if (!(await lockFence(client, run.fence))) {
      await client.query('ROLLBACK');
      return { kind: 'lost' };
    }
    const outcome = await body(client);
    await client.query('COMMIT');
    return outcome;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => (broken = true));
    if (error instanceof ApplyFailure || isRatchetError(error)) throw error;
    const state = sqlState(error);
    if (state === SERIALIZATION_FAILURE || state === DEADLOCK_DETECTED) return { kind: 'retry', cause: error };
    if (broken || isTransient(error) || isConnectionError(error)) {
      broken = true;
      run.onError?.(error);
      return { kind: 'retry', cause: error };
    }
    throw error;
  } finally {
    client.release(broken);
  }
}

async function apply(run: Execution, client: pg.PoolClient, name: string, key: string, contract: SealedContract): Promise<Attempt> {
  const row = await lockContract(client, run.tenantId, contract.id);
  if (!row) {
    throw new ValidationError(`no contract ${contract.id} in this tenant: pass the value ctx.seal returned`, { path: ['contract'], runId: run.runId });
  }
  if (row.status !== 'sealed') return { kind: 'settled-before', row };

  const actual = sha256Hex(canonicalJson(row.body, 'contract'));
  if (actual !== row.bodyHash || row.bodyHash !== contract.hash) {
    const error = new ContractTamperedError(
      `contract ${row.id} does not match its seal: stored hash ${row.bodyHash.slice(0, 12)}…, body hashes to ${actual.slice(0, 12)}…, caller holds ${contract.hash.slice(0, 12)}…; nothing was applied`,
      { contractId: row.id, expectedHash: row.bodyHash, actualHash: actual, runId: run.runId, step: key },
    );
    return reject(run, client, name, key, row, new Rejection('tampered', error, { expectedHash: row.bodyHash, actualHash: actual, callerHash: contract.hash }));
  }
  await run.hook('beforeCommit', key);

  const body = row.body as ContractBody;
  const outbox: OutboxMessage[] = [];
  const tx = commitTx(client, outbox);
  const registry = run.contracts;
  for (const [i, dependency] of body.dependencies.entries()) {
    let holds: boolean;
    try {
      holds = await dependencyHolds(client, tx, registry, dependency);
    } catch (error) {
      throw failure(error, `dependencies[${i}]`, run, row);
    }
    if (!holds) {
      const reason = `dependency ${i} does not hold: ${describeDependency(dependency)}`;
      const error = new ContractRejectedError(`contract ${row.id} rejected: ${reason}`, { reason, dependency, contractId: row.id, runId: run.runId, step: key });
      return reject(run, client, name, key, row, new Rejection('dependency', error, { index: i, dependency }));
    }
  }
  const results: unknown[] = [];
  for (const [i, operation] of body.operations.entries()) {
    const action = registry.action(operation.action);
    if (!action) {
      const reason = `operation ${i}: action ${operation.action} is not registered in this deployment`;
      return reject(run, client, name, key, row, new Rejection('unknown_action', new ContractRejectedError(reason, { reason, contractId: row.id, runId: run.runId, step: key })));
    }
    try {
      const input = parseWithSchema(action.input, operation.input, `operations[${i}].input`);
      results.push(recordedValue(await action.run(tx, input), `results[${i}]`) ?? null);
    } catch (error) {
      throw failure(error, `operations[${i}] (${operation.action})`, run, row);
    }
  }
  const result: CommitResult = { contractId: row.id, hash: row.bodyHash, status: 'committed', results };
  const ids = run.traceIds(key);
  const settled = await settleContract(client, run.fence, {
    contractId: row.id,
    status: 'committed',
    result: results,
    errorDetail: null,
    operation: { id: uuidv7(), stepName: name, stepKey: key, seq: run.takeSeq(), result, error: null, ...ids },
    // A message without an explicit key gets one that is the same on every delivery: consumers deduplicate on it.
    outbox: outbox.map((m, n) => ({ ...m, key: m.key ?? `${row.id}:${n}` })),
    event: 'contract_committed',
    eventPayload: { contractId: row.id, hash: row.bodyHash, operations: results.length, messages: outbox.length },
    actorId: run.fence.owner,
  });
  return { kind: 'committed', result, version: settled.stateVersion, at: settled.now, sealedAt: row.createdAt };
}

/** Marks the contract failed with the rejection, records the step's error and the event, in the open transaction. */
async function reject(run: Execution, client: pg.PoolClient, name: string, key: string, row: ContractRecord, rejection: Rejection): Promise<Attempt> {
  const error = run.options.redaction.error(serializeError(rejection.error), run.runId);
  const settled = await settleContract(client, run.fence, {
    contractId: row.id,
    status: 'failed',
    result: null,
    errorDetail: { reason: rejection.reason, error, ...rejection.detail },
    operation: { id: uuidv7(), stepName: name, stepKey: key, seq: run.takeSeq(), result: undefined, error, ...run.traceIds(key) },
    outbox: [],
    event: 'contract_failed',
    eventPayload: { contractId: row.id, reason: rejection.reason },
    actorId: run.fence.owner,
  });
  return { kind: 'rejected', rejection, version: settled.stateVersion, at: settled.now };
}

/**
 * The contract was settled before this step reached it: by another step or run, or by this very
 * step in an attempt whose COMMIT answer was lost. Record (or find) the step's outcome.
 */
async function adoptSettled(run: Execution, name: string, key: string, row: ContractRecord): Promise<CommitResult> {
  const mine = await run.sql((pool) => getOperation(pool, run.tenantId, run.runId, key));
  if (mine) {
    const version = await run.sql((pool) => ownedVersion(pool, run.fence));
    if (version === null) {
      run.lose();
      return NEVER;
    }
    run.advanceVersion(version);
    return run.replay<CommitResult>(key, mine);
  }
  if (row.status === 'committed') {
    const result: CommitResult = { contractId: row.id, hash: row.bodyHash, status: 'committed', results: row.result as unknown[] };
    const written = await run.write({
      stepName: name, stepKey: key, kind: 'commit', idempotencyKey: null, inputHash: null, state: 'succeeded',
      attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null, result,
    });
    run.fact(key, written.completedAt);
    return result;
  }
  const error: SerializedError = row.errorDetail?.error ?? { name: 'ContractRejectedError', code: 'CONTRACT_REJECTED', message: `contract ${row.id} failed` };
  const written = await run.write({
    stepName: name, stepKey: key, kind: 'commit', idempotencyKey: null, inputHash: null, state: 'failed',
    attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null, error,
  });
  run.fact(key, written.completedAt);
  throw deserializeError(error);
}

/** An error inside an action or check: retryable ones pass through; the rest reject the contract after a rollback. */
function failure(error: unknown, where: string, run: Execution, row: ContractRecord): unknown {
  const state = sqlState(error);
  if (state === SERIALIZATION_FAILURE || state === DEADLOCK_DETECTED || isConnectionError(error) || (state !== undefined && isTransient(error))) return error;
  if (isRatchetError(error, 'CONTRACT_REJECTED')) {
    return new ApplyFailure(new Rejection(String((error as ContractRejectedError).reason ?? 'rejected'), error as RatchetError), error);
  }
  const message = (error as Error)?.message ?? String(error);
  const reason = state?.startsWith(INTEGRITY_CONSTRAINT_CLASS)
    ? `${where} violated ${(error as { constraint?: string }).constraint ?? 'a constraint'} (SQLSTATE ${state})`
    : `${where} failed: ${message}`;
  const rejected = new ContractRejectedError(`contract ${row.id} rejected: ${reason}`, { reason, contractId: row.id, runId: run.runId, cause: error });
  return new ApplyFailure(new Rejection(state?.startsWith(INTEGRITY_CONSTRAINT_CLASS) ? 'constraint' : 'action_error', rejected, state ? { sqlstate: state } : {}), error);
}

function isConnectionError(error: unknown): boolean {
  for (let e = error, depth = 0; typeof e === 'object' && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth += 1) {
    const code = (e as { code?: unknown }).code;
    const message = String((e as Error).message ?? '');
    if ((typeof code === 'string' && /^E[A-Z]+$/.test(code)) || /Connection terminated|connection.*(closed|ended)|Client has encountered a connection error/i.test(message)) {
      return true;
    }
  }
  return false;
}
