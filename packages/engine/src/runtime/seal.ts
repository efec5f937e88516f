/**
 * `ctx.seal`: freezes an agent's decision into a contract (DESIGN §4).
 *
 * The body — contract version, agent, run id, `ctx.now()` at sealing, operations, dependencies —
 * is serialised canonically (sorted keys; Date → ISO string; undefined, NaN, ±Infinity,
 * functions, BigInt and class instances refused with their path) and hashed with SHA-256.
 * Every input is validated at seal time against its action's schema IN ITS CANONICAL FORM, the
 * form the action will receive at commit (a Date is an ISO string by then: use z.coerce.date()).
 * Unknown actions, tables, columns and checks are refused here, not at commit.
 *
 * One statement stores the contract `sealed` with the seal's record and its event. Same key and
 * same hash: the same contract. Same key, other hash: ContractConflictError (recorded, so
 * replay rethrows it). A key whose contract retention removed (a live tombstone): KeyExpiredError,
 * recorded the same way (expired-keys.ts).
 */
import {
  ContractConflictError,
  RatchetError,
  ValidationError,
  hashCanonical,
  parseWithSchema,
  serializeError,
  type ContractBody,
  type SealOptions,
  type SealedContract,
} from '@ratchet/sdk';
import { uuidv7 } from '../ids.js';
import { getContractByKey, ownedVersion, sealContract } from '../store/contracts.js';
import type { OperationRecord } from '../store/rows.js';
import { withReconnects } from './checkpoint.js';
import { contractKeyExpired } from './expired-keys.js';
import type { Execution } from './execution.js';

/** The contract format version written into every body. */
export const CONTRACT_VERSION = 1;
const MAX_KEY_LENGTH = 512;

export async function runSeal(run: Execution, name: string, key: string, recorded: OperationRecord | undefined, opts: SealOptions): Promise<SealedContract> {
  if (recorded) return run.replay<SealedContract>(key, recorded);
  if (typeof opts !== 'object' || opts === null) throw new ValidationError('seal options must be { operations, dependencies?, agent?, idempotencyKey? }', { path: ['opts'] });
  const registry = run.contracts;
  const operations = registry.validateOperations(opts.operations);
  const dependencies = registry.validateDependencies(opts.dependencies);
  if (opts.agent !== undefined && (typeof opts.agent !== 'string' || opts.agent.length === 0 || opts.agent.length > 200)) {
    throw new ValidationError('must be a non-empty string of at most 200 characters', { path: ['agent'] });
  }
  const explicit = opts.idempotencyKey;
  if (explicit !== undefined && (typeof explicit !== 'string' || explicit.length === 0 || explicit.length > MAX_KEY_LENGTH || explicit.includes('\u0000') || !explicit.isWellFormed())) {
    throw new ValidationError(`must be a non-empty string of at most ${MAX_KEY_LENGTH} characters, well-formed Unicode without NUL`, { path: ['idempotencyKey'] });
  }
  const body: ContractBody = {
    version: CONTRACT_VERSION,
    agent: opts.agent ?? null,
    runId: run.runId,
    sealedAt: run.now().toISOString(),
    operations,
    dependencies,
  };
  const { json, hash } = hashCanonical(body, 'contract');
  const frozen = JSON.parse(json) as ContractBody;
  // What the action receives at commit is the canonical form: validate that, now.
  frozen.operations.forEach((op, i) => parseWithSchema(registry.action(op.action)!.input, op.input, `operations[${i}].input`));
  frozen.dependencies.forEach((dep, i) => {
    if (dep.kind === 'check') parseWithSchema(registry.check(dep.check)!.input, dep.input, `dependencies[${i}].input`);
  });
  const sealed: SealedContract = { id: uuidv7(), idempotencyKey: explicit ?? `${run.runId}:${key}`, hash, version: CONTRACT_VERSION, body: frozen };

  const seq = run.takeSeq();
  const operationId = uuidv7();
  const info = { kind: 'seal', name, stepKey: key, attempt: 1, contractId: sealed.id, contractHash: hash, ...(body.agent ? { agent: body.agent } : {}) } as const;
  const outcome = await run.instrument(info, async (facts) => {
    const ids = run.traceIds(key);
    const stored = await withReconnects(() => sealContract(run.pool, run.fence, {
      contractId: sealed.id,
      idempotencyKey: sealed.idempotencyKey,
      agentId: body.agent,
      version: String(CONTRACT_VERSION),
      body: frozen,
      hash,
      operationId,
      stepName: name,
      stepKey: key,
      seq,
      result: sealed,
      traceId: ids.traceId,
      spanId: ids.spanId,
    }), run.onError);
    if (stored !== 'lost' && stored.status === 'sealed') {
      facts.contractStatus = 'sealed';
      facts.sealedAt = stored.createdAt;
    }
    return stored;
  });
  if (outcome === 'lost' || outcome.status === 'fenced') {
    run.lose();
    return new Promise<never>(() => {});
  }
  if (outcome.status === 'sealed') {
    run.advanceVersion(outcome.stateVersion);
    run.fact(key, outcome.createdAt);
    return sealed;
  }
  // The key already holds a contract: the same one (same hash), or a conflict.
  const existing = await run.sql((pool) => getContractByKey(pool, run.tenantId, sealed.idempotencyKey));
  if (!existing) {
    // Or its tombstone: retention removed the run whose contract held it (expired-keys.ts).
    const expired = await contractKeyExpired(run, key, sealed.idempotencyKey);
    if (!expired) throw new RatchetError('the contract key was taken and released concurrently; try again', { code: 'IDEMPOTENCY_RACE', runId: run.runId, step: key });
    const written = await run.write({
      stepName: name, stepKey: key, kind: 'seal', idempotencyKey: null, inputHash: null, state: 'failed',
      attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null, error: serializeError(expired),
    });
    run.fact(key, written.completedAt);
    throw expired;
  }
  if (existing.id === sealed.id) {
    // Our own statement, repeated after its answer was lost: it had landed (record and event too).
    const version = await run.sql((pool) => ownedVersion(pool, run.fence));
    if (version === null) {
      run.lose();
      return new Promise<never>(() => {});
    }
    run.advanceVersion(version);
    run.fact(key, existing.createdAt);
    return sealed;
  }
  if (existing.bodyHash === hash) {
    const adopted: SealedContract = { id: existing.id, idempotencyKey: existing.idempotencyKey, hash, version: CONTRACT_VERSION, body: existing.body as ContractBody };
    const written = await run.write({
      stepName: name, stepKey: key, kind: 'seal', idempotencyKey: null, inputHash: null, state: 'succeeded',
      attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null, result: adopted,
    });
    run.fact(key, written.completedAt);
    return adopted;
  }
  const conflict = new ContractConflictError(
    `contract key "${sealed.idempotencyKey}" already sealed another body (hash ${existing.bodyHash.slice(0, 12)}…, this one ${hash.slice(0, 12)}…)`,
    { idempotencyKey: sealed.idempotencyKey, existingHash: existing.bodyHash, hash, runId: run.runId, step: key },
  );
  const written = await run.write({
    stepName: name, stepKey: key, kind: 'seal', idempotencyKey: null, inputHash: null, state: 'failed',
    attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null, error: serializeError(conflict),
  });
  run.fact(key, written.completedAt);
  throw conflict;
}
