/**
 * `ctx.step`: a memoized computation. Fresh: run `fn`, record its JSON-decoded result in one
 * fenced statement — the segment's next one when the first attempt succeeds (`Execution.defer`:
 * the run's settlement, or the next ctx call's) — and hand back exactly what replay will read.
 * Recorded: return it (or rethrow its error) without running anything.
 *
 * Retries: each failed attempt is recorded (`reserved`, attempt n, its error, the next attempt
 * due at `deadline_at`), so attempt counts survive a crash; waits longer than a second suspend
 * the run durably instead of holding a worker. `NonRetryableError`, a value JSON cannot carry,
 * or the last attempt failing settles the step as failed with `StepFailedError`.
 */
import { StepFailedError, TimeoutError, isRatchetError, parseDuration, retryDelay, serializeError, type StepOptions } from '@ratchet/sdk';
import type { OperationRecord } from '../store/rows.js';
import type { Execution } from './execution.js';
import { recordedValue } from './json.js';

export async function runStep<T>(
  run: Execution,
  key: string,
  recorded: OperationRecord | undefined,
  fn: (args: { signal: AbortSignal }) => T | Promise<T>,
  opts: StepOptions | undefined,
): Promise<T> {
  const timeoutMs = opts?.timeout === undefined ? undefined : parseDuration(opts.timeout, 'timeout');
  if (recorded && recorded.state !== 'reserved') return run.replay<T>(key, recorded);
  const name = key.slice(0, key.lastIndexOf('#'));
  const policy = run.retryPolicy(opts?.retry, 'retry');
  let attempt = 1;
  let expectedAttempt: number | null = null;
  if (recorded) {
    // A failed attempt was recorded before a crash or a durable backoff: continue after it.
    attempt = recorded.attempt + 1;
    expectedAttempt = recorded.attempt;
    if (recorded.deadlineAt) await run.waitUntil(key, recorded.deadlineAt);
  }
  for (;;) {
    let value: T;
    try {
      value = await run.instrument({ kind: 'step', name, stepKey: key, attempt }, async () => recordedValue(await attemptOnce(run, key, fn, timeoutMs), 'result'));
    } catch (error) {
      if (isRatchetError(error, 'CANCELLED')) {
        // The run was cancelled while the attempt ran (its signal aborted): recorded and rethrown as is.
        const written = await run.write({
          stepName: name, stepKey: key, kind: 'step', idempotencyKey: null, inputHash: null,
          state: 'failed', attempt, expectedAttempt, inFlight: false, deadlineInMs: null, error: serializeError(error),
        });
        run.fact(key, written.completedAt);
        throw error;
      }
      const final = attempt >= policy.maxAttempts || isRatchetError(error, 'NON_RETRYABLE') || isRatchetError(error, 'VALIDATION');
      if (final) {
        const failure = new StepFailedError(`step ${key} failed after ${attempt} attempt(s): ${(error as Error)?.message ?? String(error)}`, {
          runId: run.runId,
          step: key,
          attempt,
          attempts: attempt,
          cause: error,
        });
        const written = await run.write({
          stepName: name, stepKey: key, kind: 'step', idempotencyKey: null, inputHash: null,
          state: 'failed', attempt, expectedAttempt, inFlight: false, deadlineInMs: null, error: serializeError(failure),
        });
        run.fact(key, written.completedAt);
        throw failure;
      }
      const wait = retryDelay(policy, attempt, Math.random);
      const written = await run.write({
        stepName: name, stepKey: key, kind: 'step', idempotencyKey: null, inputHash: null,
        state: 'reserved', attempt, expectedAttempt, inFlight: false, deadlineInMs: wait, error: serializeError(error),
      });
      expectedAttempt = attempt;
      attempt += 1;
      await run.waitUntil(key, written.deadlineAt ?? new Date(run.dbNow() + wait));
      continue;
    }
    await run.hook('beforeStepRecord', key, attempt);
    const record = {
      stepName: name, stepKey: key, kind: 'step', idempotencyKey: null, inputHash: null,
      state: 'succeeded', attempt, expectedAttempt, inFlight: false, deadlineInMs: null, result: value,
    } as const;
    if (expectedAttempt === null) {
      // The first attempt, with no record under the key: written with the segment's next statement.
      run.defer(record);
      return value;
    }
    const written = await run.write(record);
    run.fact(key, written.completedAt);
    return value;
  }
}

/** One attempt of `fn`, given a signal that aborts when the run is cancelled or loses its lease, or at the step's timeout. */
async function attemptOnce<T>(run: Execution, key: string, fn: (args: { signal: AbortSignal }) => T | Promise<T>, timeoutMs: number | undefined): Promise<T> {
  if (timeoutMs === undefined) return fn({ signal: run.signal });
  const timeout = new AbortController();
  const signal = AbortSignal.any([run.signal, timeout.signal]);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new TimeoutError(`step ${key} took longer than its timeout of ${timeoutMs} ms`, { runId: run.runId, step: key, timeoutMs });
      timeout.abort(error);
      reject(error);
    }, timeoutMs);
  });
  try {
    return await Promise.race([Promise.resolve().then(() => fn({ signal })), expired]);
  } finally {
    clearTimeout(timer);
  }
}
