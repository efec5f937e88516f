/**
 * `ctx.effect` and `ctx.tool`: a call to the outside world, as reserve → commit → execute →
 * reconcile (DESIGN §3.5). No transaction is open while the provider is called.
 *
 *   1. reserve   one fenced statement: the record `reserved` at attempt n, `reserved_at` now,
 *                `deadline_at` = now + timeout, the idempotency key and the input's SHA-256.
 *   2. execute   `execute({ idempotencyKey, input, signal })`; the signal aborts at the timeout,
 *                on cancellation and when the lease is lost.
 *   3. record    the outcome, only where the record is still `reserved` at attempt n (fenced).
 *
 * A `reserved` record found on replay whose attempt may still be in flight (another worker lost
 * its lease mid-call) is left alone until `deadline_at + margin`, waited durably, so the effect
 * never runs twice at the same time. Then: `reconcile()` if given; else, with `atMostOnce`, the
 * record becomes `unknown` and the run is parked for an operator (`client.resolve`); else the
 * effect is executed again with the same key (at-least-once where the provider ignores keys).
 *
 * An explicit idempotency key is unique per tenant: reused by another run, it returns that run's
 * outcome when the input hash matches and IdempotencyConflictError when it does not. Once
 * retention removed that run, its key's tombstone fails the step instead (KeyExpiredError;
 * expired-keys.ts).
 */
import {
  IdempotencyConflictError,
  NonDeterminismError,
  RatchetError,
  StepFailedError,
  TimeoutError,
  ValidationError,
  deserializeError,
  hashCanonical,
  isRatchetError,
  parseDuration,
  retryDelay,
  serializeError,
  type EffectOptions,
} from '@ratchet/sdk';
import { getOperationByKey } from '../store/operations.js';
import type { OperationRecord } from '../store/rows.js';
import { UNIQUE_VIOLATION, sqlState } from '../store/sqlstate.js';
import { delay } from './checkpoint.js';
import type { Execution } from './execution.js';
import { recordedValue } from './json.js';
import { refuseExpiredEffectKey } from './expired-keys.js';

export type EffectKind = 'effect' | 'tool';

const MAX_KEY_LENGTH = 512;
/** How often a step whose explicit key is held by another run's in-flight effect looks again. */
const FOREIGN_KEY_POLL_MS = 2_000;

export async function runEffect<T, I>(
  run: Execution,
  kind: EffectKind,
  name: string,
  key: string,
  recorded: OperationRecord | undefined,
  opts: EffectOptions<T, I>,
): Promise<T> {
  const spec = readOptions(run, key, opts);
  const base = { stepName: name, stepKey: key, kind, inputHash: spec.inputHash } as const;

  let attempt = 1;
  let expectedAttempt: number | null = null;
  if (recorded) {
    if (recorded.inputHash !== spec.inputHash) {
      run.park(
        new NonDeterminismError(`replay reached ${kind} ${key} with a different input than it recorded; the code changed under a running version`, {
          runId: run.runId,
          step: key,
          expected: `${kind} ${key} with input sha256 ${recorded.inputHash ?? '(none)'}`,
          actual: `${kind} ${key} with input sha256 ${spec.inputHash}`,
        }),
      );
      return new Promise<never>(() => {});
    }
    if (recorded.idempotencyKey !== null && recorded.idempotencyKey !== spec.idempotencyKey) {
      run.park(
        new NonDeterminismError(`replay reached ${kind} ${key} with idempotency key "${spec.idempotencyKey}", but it recorded "${recorded.idempotencyKey}"`, {
          runId: run.runId,
          step: key,
          expected: `${kind} ${key} key ${recorded.idempotencyKey}`,
          actual: `${kind} ${key} key ${spec.idempotencyKey}`,
        }),
      );
      return new Promise<never>(() => {});
    }
    if (recorded.state === 'succeeded' || recorded.state === 'failed') return run.replay<T>(key, recorded);
    if (recorded.state === 'unknown') {
      run.park(unknownOutcome(run, key, recorded.attempt));
      return new Promise<never>(() => {});
    }
    expectedAttempt = recorded.attempt;
    attempt = recorded.attempt + 1;
    if (recorded.reservedAt) {
      // Attempt n may still be running on a worker that lost its lease: wait out its deadline.
      const deadline = recorded.deadlineAt ?? new Date(recorded.reservedAt.getTime() + spec.timeoutMs);
      await run.waitUntil(key, new Date(deadline.getTime() + run.options.effectMarginMs));
      if (opts.reconcile) {
        const found = await reconcileWithRetries<T, I>(run, key, spec, opts.reconcile);
        if (found.found) {
          const value = recordedValue(found.result, 'result');
          const written = await run.write({
            ...base, idempotencyKey: spec.idempotencyKey, state: 'succeeded', attempt: recorded.attempt,
            expectedAttempt: recorded.attempt, inFlight: false, deadlineInMs: null, result: value, providerReference: 'reconciled',
          });
          run.fact(key, written.completedAt);
          return value;
        }
      } else if (spec.atMostOnce) {
        await run.write({
          ...base, idempotencyKey: spec.idempotencyKey, state: 'unknown', attempt: recorded.attempt,
          expectedAttempt: recorded.attempt, inFlight: false, deadlineInMs: null, error: serializeError(unknownOutcome(run, key, recorded.attempt)),
        });
        run.park(unknownOutcome(run, key, recorded.attempt));
        return new Promise<never>(() => {});
      }
    } else if (recorded.deadlineAt) {
      // The last attempt failed; the next one is due at deadline_at (retry backoff).
      await run.waitUntil(key, recorded.deadlineAt);
    }
  }

  for (;;) {
    // 1. reserve
    let deadline: Date;
    try {
      const reserved = await run.write({
        ...base, idempotencyKey: spec.idempotencyKey, state: 'reserved', attempt, expectedAttempt,
        inFlight: true, deadlineInMs: spec.timeoutMs,
      });
      deadline = reserved.deadlineAt ?? new Date(run.dbNow() + spec.timeoutMs);
    } catch (error) {
      if (sqlState(error) === UNIQUE_VIOLATION && expectedAttempt === null) return adoptForeignOutcome(run, base, key, spec);
      throw error;
    }
    // An explicit key used by a run retention removed lives on only as a tombstone: never run again.
    if (opts.idempotencyKey !== undefined) await refuseExpiredEffectKey(run, base, spec.idempotencyKey, attempt);
    await run.hook('afterReserveBeforeExecute', key, attempt);
    // Past its deadline, or no longer ours (a stall after reserving), the attempt belongs to
    // whoever resumes the run: they wait out the deadline, then reconcile. Never start it late.
    if (run.settled || run.dbNow() >= deadline.getTime()) {
      if (!run.settled) run.lose();
      return new Promise<never>(() => {});
    }

    // 2. execute, with no transaction open
    let value: T;
    try {
      value = await run.instrument({ kind, name, stepKey: key, attempt, idempotencyKey: spec.idempotencyKey, input: spec.input }, async (outcome) => {
        const result = await executeWithTimeout(run, spec, opts, Math.max(1, deadline.getTime() - run.dbNow()));
        outcome.output = result;
        return result;
      });
    } catch (error) {
      if (run.settled) return new Promise<never>(() => {});
      if (spec.atMostOnce && isRatchetError(error, 'TIMEOUT')) {
        // A timed-out attempt may have happened: never try again by ourselves. An operator decides.
        await run.write({
          ...base, idempotencyKey: spec.idempotencyKey, state: 'unknown', attempt, expectedAttempt: attempt,
          inFlight: false, deadlineInMs: null, error: serializeError(unknownOutcome(run, key, attempt)),
        });
        run.park(unknownOutcome(run, key, attempt));
        return new Promise<never>(() => {});
      }
      if (isRatchetError(error, 'CANCELLED')) {
        // The run was cancelled while the attempt ran: its signal aborted it. Recorded as failed
        // with the CancelledError, which the workflow sees (and may compensate for).
        const written = await run.write({
          ...base, idempotencyKey: spec.idempotencyKey, state: 'failed', attempt, expectedAttempt: attempt,
          inFlight: false, deadlineInMs: null, error: serializeError(error),
        });
        run.fact(key, written.completedAt);
        throw error;
      }
      // An at-most-once effect is never attempted twice, even after a plain error.
      const final =
        spec.atMostOnce || attempt >= spec.policy.maxAttempts || isRatchetError(error, 'NON_RETRYABLE') || isRatchetError(error, 'VALIDATION');
      if (final) {
        const failure = new StepFailedError(`${kind} ${key} failed after ${attempt} attempt(s): ${(error as Error)?.message ?? String(error)}`, {
          runId: run.runId, step: key, attempt, attempts: attempt, cause: error,
        });
        const written = await run.write({
          ...base, idempotencyKey: spec.idempotencyKey, state: 'failed', attempt, expectedAttempt: attempt,
          inFlight: false, deadlineInMs: null, error: serializeError(failure),
        });
        run.fact(key, written.completedAt);
        throw failure;
      }
      const wait = retryDelay(spec.policy, attempt, Math.random);
      const written = await run.write({
        ...base, idempotencyKey: spec.idempotencyKey, state: 'reserved', attempt, expectedAttempt: attempt,
        inFlight: false, deadlineInMs: wait, error: serializeError(error),
      });
      expectedAttempt = attempt;
      attempt += 1;
      await run.waitUntil(key, written.deadlineAt ?? new Date(run.dbNow() + wait));
      continue;
    }
    await run.hook('afterExecuteBeforeRecord', key, attempt);

    // 3. record, only where still reserved at this attempt
    const written = await run.write({
      ...base, idempotencyKey: spec.idempotencyKey, state: 'succeeded', attempt, expectedAttempt: attempt,
      inFlight: false, deadlineInMs: null, result: value,
    });
    run.fact(key, written.completedAt);
    await run.hook('afterRecord', key, attempt);
    return value;
  }
}

interface EffectSpec<I> {
  input: I;
  inputHash: string;
  idempotencyKey: string;
  timeoutMs: number;
  atMostOnce: boolean;
  policy: ReturnType<Execution['retryPolicy']>;
}

function readOptions<T, I>(run: Execution, key: string, opts: EffectOptions<T, I>): EffectSpec<I> {
  if (typeof opts !== 'object' || opts === null) throw new ValidationError('effect options must be an object { input, execute }', { path: ['opts'] });
  if (typeof opts.execute !== 'function') throw new ValidationError('must be a function ({ idempotencyKey, input, signal }) => Promise', { path: ['execute'] });
  if (opts.reconcile !== undefined && typeof opts.reconcile !== 'function') throw new ValidationError('must be a function when given', { path: ['reconcile'] });
  const explicit = opts.idempotencyKey;
  if (explicit !== undefined && (typeof explicit !== 'string' || explicit.length === 0 || explicit.length > MAX_KEY_LENGTH || explicit.includes('\u0000') || !explicit.isWellFormed())) {
    throw new ValidationError(`must be a non-empty string of at most ${MAX_KEY_LENGTH} characters, well-formed Unicode without NUL`, { path: ['idempotencyKey'] });
  }
  const input = recordedValue(opts.input, 'input');
  const timeoutMs = opts.timeout === undefined ? run.options.effectTimeoutMs : parseDuration(opts.timeout, 'timeout');
  if (timeoutMs <= 0) throw new ValidationError('must be longer than 0 ms', { path: ['timeout'] });
  return {
    input,
    inputHash: hashCanonical(input ?? null, 'input').hash,
    idempotencyKey: explicit ?? `${run.runId}:${key}`,
    timeoutMs,
    atMostOnce: opts.atMostOnce === true,
    policy: run.retryPolicy(opts.retry, 'retry'),
  };
}

/** Runs `execute`, aborting it at the reservation's deadline (`remainingMs` from now, in database time). */
async function executeWithTimeout<T, I>(run: Execution, spec: EffectSpec<I>, opts: EffectOptions<T, I>, remainingMs: number): Promise<T> {
  const timeout = new AbortController();
  const signal = AbortSignal.any([run.signal, timeout.signal]);
  let timer: NodeJS.Timeout | undefined;
  const call = Promise.resolve().then(() => opts.execute({ idempotencyKey: spec.idempotencyKey, input: spec.input, signal }));
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new TimeoutError(`the attempt did not finish within ${spec.timeoutMs} ms`, { timeoutMs: spec.timeoutMs, runId: run.runId });
      timeout.abort(error);
      reject(error);
    }, remainingMs);
  });
  try {
    return recordedValue(await Promise.race([call, expired]), 'result');
  } catch (error) {
    if (timeout.signal.aborted) {
      // An execute that ignores its signal may still be running: give it the margin to stop
      // before another attempt starts, so attempts never overlap in this process.
      await Promise.race([call.catch(() => {}), delay(run.options.effectMarginMs)]);
    }
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The explicit key is held by another record of the tenant: adopt its outcome for this step when
 * the input matches (recorded without a key: the key belongs to the first record), refuse when it
 * does not, and look again later while that record is still in flight.
 */
async function adoptForeignOutcome<T, I>(
  run: Execution,
  base: { stepName: string; stepKey: string; kind: EffectKind; inputHash: string },
  key: string,
  spec: EffectSpec<I>,
): Promise<T> {
  for (;;) {
    const other = await run.sql((pool) => getOperationByKey(pool, run.tenantId, spec.idempotencyKey));
    if (!other) throw new RatchetError('the idempotency key was taken and released; try again', { code: 'IDEMPOTENCY_RACE', runId: run.runId, step: key });
    if (other.inputHash !== spec.inputHash) {
      const conflict = new IdempotencyConflictError(
        `idempotency key "${spec.idempotencyKey}" was already used by ${other.taskId === run.runId ? 'this run' : 'another run'} with a different input`,
        { key: spec.idempotencyKey, runId: run.runId, step: key },
      );
      const written = await run.write({
        ...base, idempotencyKey: null, state: 'failed', attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null,
        error: serializeError(conflict),
      });
      run.fact(key, written.completedAt);
      throw conflict;
    }
    if (other.state === 'unknown') {
      // That outcome is for an operator to establish on the other run; this step cannot wait on it forever.
      const unknown = new RatchetError(
        `idempotency key "${spec.idempotencyKey}" belongs to an effect of run ${other.taskId} whose outcome is unknown; resolve that run, then retry with a new step`,
        { code: 'UNKNOWN_OUTCOME', runId: run.runId, step: key },
      );
      const written = await run.write({
        ...base, idempotencyKey: null, state: 'failed', attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null,
        error: serializeError(unknown),
      });
      run.fact(key, written.completedAt);
      throw unknown;
    }
    if (other.state === 'succeeded' || other.state === 'failed') {
      const written = await run.write({
        ...base, idempotencyKey: null, state: other.state, attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null,
        result: other.noResult ? undefined : other.result, error: other.error, providerReference: `idempotency-key-of:${other.taskId}/${other.stepKey}`,
      });
      run.fact(key, written.completedAt);
      if (other.state === 'failed') throw deserializeError(other.error ?? { name: 'Error', message: 'failed' });
      return (other.noResult ? undefined : other.result) as T;
    }
    await run.waitUntil(key, new Date(run.dbNow() + FOREIGN_KEY_POLL_MS));
  }
}

function unknownOutcome(run: Execution, key: string, attempt: number): RatchetError {
  return new RatchetError(
    `at-most-once effect ${key}: attempt ${attempt} was reserved but its outcome was never recorded; ` +
      'find out whether it happened, then settle it with client.resolve(runId, stepKey, { result } | { error })',
    { code: 'UNKNOWN_OUTCOME', runId: run.runId, step: key, attempt },
  );
}

/** reconcile() under the effect's retry policy: a provider briefly down during recovery must not fail the run. */
async function reconcileWithRetries<T, I>(
  run: Execution,
  key: string,
  spec: EffectSpec<I>,
  reconcile: NonNullable<EffectOptions<T, I>['reconcile']>,
): Promise<{ found: true; result: T } | { found: false }> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await reconcile({ idempotencyKey: spec.idempotencyKey, input: spec.input });
    } catch (error) {
      if (attempt >= spec.policy.maxAttempts || isRatchetError(error, 'NON_RETRYABLE')) {
        throw new StepFailedError(`reconcile of ${key} failed after ${attempt} attempt(s): ${(error as Error)?.message ?? String(error)}`, {
          runId: run.runId, step: key, attempts: attempt, cause: error,
        });
      }
      await run.waitUntil(key, new Date(run.dbNow() + retryDelay(spec.policy, attempt, Math.random)));
    }
  }
}
