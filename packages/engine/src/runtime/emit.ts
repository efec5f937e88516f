/**
 * `ctx.emit(topic, payload)`: an `emit` step whose outbox message is written in the same fenced
 * statement as its step record (store/outbox.ts), so a message exists exactly when its step
 * does. The message key is `<run id>:<step key>`, stable across retries and replays: the relay
 * publishes at least once, and consumers deduplicate on the key. Replay writes nothing.
 */
import { ValidationError } from '@ratchet/sdk';
import { uuidv7 } from '../ids.js';
import { writeEmit } from '../store/outbox.js';
import type { OperationRecord } from '../store/rows.js';
import type { Execution } from './execution.js';
import { recordedValue } from './json.js';

const MAX_TOPIC_LENGTH = 200;

export async function runEmit(run: Execution, key: string, recorded: OperationRecord | undefined, topic: string, payload: unknown): Promise<void> {
  if (recorded) {
    await run.replay(key, recorded);
    return;
  }
  if (typeof topic !== 'string' || topic.length === 0 || topic.length > MAX_TOPIC_LENGTH || topic.includes('\u0000') || !topic.isWellFormed()) {
    throw new ValidationError(`must be a non-empty string of at most ${MAX_TOPIC_LENGTH} characters, well-formed Unicode without NUL`, { path: ['topic'] });
  }
  const body = recordedValue(payload, 'payload') ?? null;
  const messageKey = `${run.runId}:${key}`;
  const written = await run.instrument({ kind: 'emit', name: topic, stepKey: key, attempt: 1, topic }, () => run.write(
    {
      stepName: topic, stepKey: key, kind: 'emit', idempotencyKey: null, inputHash: null,
      state: 'succeeded', attempt: 1, expectedAttempt: null, inFlight: false, deadlineInMs: null,
    },
    async (op) => {
      const row = await writeEmit(run.pool, run.fence, {
        operationId: op.id, messageId: uuidv7(), stepName: op.stepName, stepKey: op.stepKey, seq: op.seq,
        topic, messageKey, payload: body, traceId: op.traceId, spanId: op.spanId,
      });
      return row && { ...row, deadlineAt: null };
    },
  ));
  run.fact(key, written.completedAt);
}
