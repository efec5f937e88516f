/**
 * `ctx.infer`: the stochastic step. The model is called with no transaction open; its answer is
 * validated by the zod schema and an invalid answer is re-sampled, up to `maxSamples` calls
 * (every sample counted). The accepted answer is recorded once, with the model id, provider,
 * response model, token usage, the number of samples and the SHA-256 of the prompt (the prompt
 * itself only when the engine was created with `recordPrompts: true`). Replay returns the
 * recorded answer and never calls the model.
 *
 * A call is aborted after the engine's `effectTimeout`. A call that throws (the provider is
 * down, a timeout) is retried under the step's retry policy
 * like any step; samples that answer but fail the schema are not errors of the provider and only
 * count against `maxSamples`.
 */
import {
  StepFailedError,
  TimeoutError,
  ValidationError,
  hashCanonical,
  isRatchetError,
  isZodSchema,
  retryDelay,
  serializeError,
  type InferCallResult,
  type InferOptions,
} from '@ratchet/sdk';
import type { OperationRecord } from '../store/rows.js';
import type { Execution } from './execution.js';
import { recordedValue } from './json.js';

/** What an infer step records as its result. Replay hands back `output` only. */
export interface InferRecord<T = unknown> {
  output: T;
  model: string;
  provider: string | null;
  responseModel: string | null;
  usage: { inputTokens?: number; outputTokens?: number } | null;
  promptHash: string | null;
  prompt?: unknown;
  samples: number;
}

export async function runInfer<T>(run: Execution, name: string, key: string, recorded: OperationRecord | undefined, opts: InferOptions<T>): Promise<T> {
  if (recorded && recorded.state !== 'reserved') {
    if (recorded.state === 'failed') return run.replay<T>(key, recorded);
    run.fact(key, recorded.completedAt ?? recorded.createdAt);
    return (recorded.result as InferRecord<T>).output;
  }
  const spec = readOptions(run, opts);
  const policy = run.retryPolicy(undefined, 'retry');
  let attempt = recorded ? recorded.attempt + 1 : 1;
  let expectedAttempt: number | null = recorded ? recorded.attempt : null;
  if (recorded?.deadlineAt) await run.waitUntil(key, recorded.deadlineAt);
  const base = { stepName: name, stepKey: key, kind: 'infer', idempotencyKey: null, inputHash: spec.promptHash } as const;

  for (;;) {
    let accepted: InferRecord<T> | undefined;
    let samples = 0;
    let lastIssue: unknown;
    try {
      while (!accepted && samples < spec.maxSamples) {
        samples += 1;
        const info = { kind: 'infer', name, stepKey: key, attempt: samples, model: spec.model, ...(spec.provider ? { provider: spec.provider } : {}), input: opts.prompt } as const;
        // One model call per span: its answer's model, usage and validity are reported on it.
        const { usage, responseModel, parsed } = await run.instrument(info, async (outcome) => {
          const answer = unwrap(opts.schema, await callWithTimeout(run, (signal) => opts.call({ signal, attempt: samples })));
          const parsed = opts.schema.safeParse(answer.output);
          outcome.responseModel = answer.responseModel;
          outcome.usage = answer.usage;
          outcome.output = answer.output;
          outcome.accepted = parsed.success;
          return { ...answer, parsed };
        });
        if (!parsed.success) {
          lastIssue = parsed.error;
          continue;
        }
        accepted = {
          output: recordedValue(parsed.data, 'output'),
          model: spec.model,
          provider: spec.provider,
          responseModel,
          usage,
          promptHash: spec.promptHash,
          ...(spec.recordPrompt ? { prompt: recordedValue(opts.prompt, 'prompt') } : {}),
          samples,
        };
      }
    } catch (error) {
      const final = attempt >= policy.maxAttempts || isRatchetError(error, 'NON_RETRYABLE') || isRatchetError(error, 'VALIDATION');
      if (final) return fail(run, base, key, attempt, expectedAttempt, error, `model call failed: ${(error as Error)?.message ?? String(error)}`);
      const wait = retryDelay(policy, attempt, Math.random);
      const written = await run.write({ ...base, state: 'reserved', attempt, expectedAttempt, inFlight: false, deadlineInMs: wait, error: serializeError(error) });
      expectedAttempt = attempt;
      attempt += 1;
      await run.waitUntil(key, written.deadlineAt ?? new Date(run.dbNow() + wait));
      continue;
    }
    if (!accepted) {
      const issue = new ValidationError(`${samples} sample(s) from ${spec.model} did not match the schema; the last: ${(lastIssue as Error)?.message ?? 'invalid'}`, {
        path: ['output'],
        cause: lastIssue,
      });
      return fail(run, base, key, attempt, expectedAttempt, issue, issue.message);
    }
    const written = await run.write({ ...base, state: 'succeeded', attempt, expectedAttempt, inFlight: false, deadlineInMs: null, result: accepted });
    run.fact(key, written.completedAt);
    return accepted.output;
  }
}

async function fail(
  run: Execution,
  base: { stepName: string; stepKey: string; kind: 'infer'; idempotencyKey: null; inputHash: string | null },
  key: string,
  attempt: number,
  expectedAttempt: number | null,
  cause: unknown,
  message: string,
): Promise<never> {
  const failure = new StepFailedError(`infer ${key}: ${message}`, { runId: run.runId, step: key, attempt, attempts: attempt, cause });
  const written = await run.write({ ...base, state: 'failed', attempt, expectedAttempt, inFlight: false, deadlineInMs: null, error: serializeError(failure) });
  run.fact(key, written.completedAt);
  throw failure;
}

function readOptions<T>(run: Execution, opts: InferOptions<T>) {
  if (typeof opts !== 'object' || opts === null) throw new ValidationError('infer options must be { model, schema, call }', { path: ['opts'] });
  if (typeof opts.model !== 'string' || opts.model.length === 0 || opts.model.length > 200) {
    throw new ValidationError('must be the model id, a non-empty string', { path: ['model'] });
  }
  if (opts.provider !== undefined && (typeof opts.provider !== 'string' || opts.provider.length > 200)) throw new ValidationError('must be a string', { path: ['provider'] });
  if (!isZodSchema(opts.schema)) throw new ValidationError('must be a zod schema for the answer', { path: ['schema'] });
  if (typeof opts.call !== 'function') throw new ValidationError('must be a function ({ signal, attempt }) => Promise<answer>', { path: ['call'] });
  const maxSamples = opts.maxSamples ?? run.options.maxSamples;
  if (!Number.isInteger(maxSamples) || maxSamples < 1 || maxSamples > 100) throw new ValidationError('must be an integer from 1 to 100', { path: ['maxSamples'] });
  return {
    model: opts.model,
    provider: opts.provider ?? null,
    maxSamples,
    promptHash: opts.prompt === undefined ? null : hashCanonical(opts.prompt, 'prompt').hash,
    recordPrompt: run.options.recordPrompts && opts.prompt !== undefined,
  };
}

/** The bare answer, or the `{ output, usage, responseModel }` wrapper (when the answer itself does not fit the schema). */
function unwrap(schema: InferOptions<unknown>['schema'], answer: unknown): { output: unknown; usage: InferRecord['usage']; responseModel: string | null } {
  if (typeof answer === 'object' && answer !== null && 'output' in answer && !schema.safeParse(answer).success) {
    const wrapper = answer as InferCallResult;
    const usage = wrapper.usage ? { ...wrapper.usage } : null;
    return { output: wrapper.output, usage, responseModel: typeof wrapper.responseModel === 'string' ? wrapper.responseModel : null };
  }
  return { output: answer, usage: null, responseModel: null };
}

/** A model call aborted (its signal fires, the call rejects) after the engine's effect timeout. */
async function callWithTimeout<R>(run: Execution, call: (signal: AbortSignal) => Promise<R>): Promise<R> {
  const timeoutMs = run.options.effectTimeoutMs;
  const timeout = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new TimeoutError(`the model call did not answer within ${timeoutMs} ms`, { timeoutMs, runId: run.runId });
      timeout.abort(error);
      reject(error);
    }, timeoutMs);
  });
  try {
    return await Promise.race([Promise.resolve().then(() => call(AbortSignal.any([run.signal, timeout.signal]))), expired]);
  } finally {
    clearTimeout(timer);
  }
}
