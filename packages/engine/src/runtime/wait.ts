/**
 * `ctx.waitFor` / `ctx.waitForAny`: a durable wait for a signal (DESIGN §3.6).
 *
 * Fresh: the oldest unconsumed signal of the wait's names is consumed and recorded as the wait's
 * result in one fenced statement (store/signals.ts), so a signal sent before the run got here is
 * taken at once. Otherwise the wait is recorded `reserved` with its timeout as `deadline_at` (so
 * every replay waits for the same moment) and the run waits: in memory for a short timeout, else
 * suspended as `waiting` until a signal or the timeout makes it due. At the timeout a last look
 * is taken, then `TimeoutError` is recorded and thrown into the workflow (catchable).
 *
 * Replay returns the recorded signal (or rethrows the timeout). The payload is validated with the
 * wait's schema each time it is handed back, so a payload that fails it fails the same way on
 * every replay.
 */
import { TimeoutError, parseDuration, parseWithSchema, serializeError, ValidationError, type ReceivedSignal } from '@ratchet/sdk';
import type { z } from 'zod';
import { uuidv7 } from '../ids.js';
import { consumeSignal, type ConsumedSignal } from '../store/signals.js';
import type { OperationRecord } from '../store/rows.js';
import type { Execution } from './execution.js';

const MAX_NAME_LENGTH = 200;

interface WaitSpec {
  names: readonly string[];
  schema: z.ZodType | undefined;
  timeout: unknown;
}

/** The validated names of a wait: non-empty strings of at most 200 characters, no duplicates. */
export function signalNames(names: unknown, field: string): string[] {
  if (!Array.isArray(names) || names.length === 0 || names.length > 100) {
    throw new ValidationError('must be a non-empty array of signal names (at most 100)', { path: [field] });
  }
  names.forEach((n, i) => {
    if (typeof n !== 'string' || n.length === 0 || n.length > MAX_NAME_LENGTH || n.includes('\u0000') || !n.isWellFormed()) {
      throw new ValidationError(`must be a non-empty string of at most ${MAX_NAME_LENGTH} characters`, { path: [field, i] });
    }
  });
  return [...new Set(names as string[])];
}

export async function runWait<T>(run: Execution, stepName: string, key: string, recorded: OperationRecord | undefined, spec: WaitSpec): Promise<ReceivedSignal<T>> {
  const received = await receive(run, stepName, key, recorded, spec);
  const schema = spec.schema ?? run.workflow.signals?.[received.signal];
  const payload = schema ? (parseWithSchema(schema, received.payload, 'payload') as T) : (received.payload as T);
  return { signal: received.signal, payload };
}

async function receive(run: Execution, stepName: string, key: string, recorded: OperationRecord | undefined, spec: WaitSpec): Promise<ReceivedSignal<unknown>> {
  if (recorded && recorded.state !== 'reserved') return run.replay<ReceivedSignal<unknown>>(key, recorded).then(signalOf);
  const names = [...spec.names];
  let target: Date | null;
  if (recorded) {
    target = recorded.deadlineAt;
  } else {
    const timeoutMs = spec.timeout === undefined ? null : parseDuration(spec.timeout as never, 'timeout');
    const info = { kind: 'wait', name: stepName, stepKey: key, attempt: 1, signals: names, until: timeoutMs === null ? null : new Date(run.dbNow() + timeoutMs) } as const;
    const first = await run.instrument(info, async (facts) => {
      const found = await consume(run, stepName, key, names);
      if (found) {
        facts.output = found.result;
        return { found } as const;
      }
      const written = await run.write({
        stepName, stepKey: key, kind: 'wait', idempotencyKey: null, inputHash: null,
        state: 'reserved', attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: timeoutMs, result: { signals: names },
      });
      return { written } as const;
    });
    if (first.found) return settled(run, key, first.found);
    target = timeoutMs === null ? null : first.written.deadlineAt;
  }
  return run.awaitExternal<ReceivedSignal<unknown>>(
    key,
    target,
    async () => {
      const found = await consume(run, stepName, key, names);
      return found ? { value: settled(run, key, found) } : undefined;
    },
    async () => {
      const error = new TimeoutError(`no signal ${names.join(' or ')} arrived by ${target!.toISOString()}`, { runId: run.runId, step: key });
      const written = await run.write({
        stepName, stepKey: key, kind: 'wait', idempotencyKey: null, inputHash: null,
        state: 'failed', attempt: 1, expectedAttempt: 1, inFlight: false, deadlineInMs: null, error: serializeError(error),
      });
      run.fact(key, written.completedAt);
      throw error;
    },
  );
}

async function consume(run: Execution, stepName: string, key: string, names: string[]): Promise<ConsumedSignal | null> {
  const ids = run.traceIds(key);
  return run.sql((pool) =>
    consumeSignal(pool, run.fence, { operationId: uuidv7(), names, stepName, stepKey: key, seq: run.takeSeq(), traceId: ids.traceId, spanId: ids.spanId }),
  );
}

function settled(run: Execution, key: string, found: ConsumedSignal): ReceivedSignal<unknown> {
  run.fact(key, found.completedAt);
  run.progressed();
  return signalOf(found.result);
}

function signalOf(result: unknown): ReceivedSignal<unknown> {
  const r = result as { signal: string; payload: unknown };
  return { signal: r.signal, payload: r.payload };
}
