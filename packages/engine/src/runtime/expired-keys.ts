/**
 * Explicit effect and contract keys whose holder retention removed (docs/retention.md).
 *
 * While the run that used an explicit key exists, the key's unique index makes a second use
 * adopt its outcome (effects) or conflict (contracts). Once retention removed that run, the key
 * lives only as a tombstone, and the unique index no longer stops anything: these checks do.
 *
 * - Effects look right AFTER reserving the key (effect.ts). Reserving succeeded, so any removal
 *   of an earlier holder had committed — and its tombstone with it, in the same transaction —
 *   before the reservation finished: the look that follows cannot miss it. A tombstone found:
 *   the step is recorded failed (keeping the key, so a later retry finds this outcome on the
 *   live index), never executed. Same input → KeyExpiredError naming the key and how it ended;
 *   other input → IdempotencyConflictError, as while the holder lived.
 * - Contracts: the seal statement itself refuses a key with a live tombstone (store/contracts.ts);
 *   `contractKeyExpired` builds the error the seal then records.
 */
import { IdempotencyConflictError, KeyExpiredError, serializeError } from '@ratchet/sdk';
import { getTombstone, type TombstoneRecord } from '../store/tombstones.js';
import type { OperationKind } from '../schema/index.js';
import type { Execution } from './execution.js';

/** Fails the just-reserved effect step when its explicit key has a live tombstone; returns when it has none. */
export async function refuseExpiredEffectKey(
  run: Execution,
  step: { stepName: string; stepKey: string; kind: OperationKind; inputHash: string },
  idempotencyKey: string,
  attempt: number,
): Promise<void> {
  const tomb = await run.sql((pool) => getTombstone(pool, run.tenantId, 'effect', idempotencyKey));
  if (!tomb) return;
  const error =
    tomb.inputHash !== step.inputHash
      ? new IdempotencyConflictError(
          `idempotency key "${idempotencyKey}" was used by run ${tomb.runId} (removed by retention) with a different input`,
          { key: idempotencyKey, runId: run.runId, step: step.stepKey },
        )
      : new KeyExpiredError(
          `idempotency key "${idempotencyKey}" was used by run ${tomb.runId}, removed by retention, and its effect ${tomb.outcome}; ` +
            `it is not executed again (the key is remembered until ${tomb.expiresAt.toISOString()})`,
          expiredFields(run, step.stepKey, 'effect', idempotencyKey, tomb),
        );
  const written = await run.write({
    ...step, idempotencyKey, state: 'failed', attempt, expectedAttempt: attempt, inFlight: false, deadlineInMs: null,
    error: serializeError(error),
  });
  run.fact(step.stepKey, written.completedAt);
  throw error;
}

/** The error a seal records when its explicit key has a live tombstone (null: it has none). */
export async function contractKeyExpired(run: Execution, stepKey: string, idempotencyKey: string): Promise<KeyExpiredError | null> {
  const tomb = await run.sql((pool) => getTombstone(pool, run.tenantId, 'contract', idempotencyKey));
  if (!tomb) return null;
  return new KeyExpiredError(
    `contract key "${idempotencyKey}" was used by run ${tomb.runId}, removed by retention, and that contract was ${tomb.outcome}; ` +
      `it is not sealed again (the key is remembered until ${tomb.expiresAt.toISOString()})`,
    expiredFields(run, stepKey, 'contract', idempotencyKey, tomb),
  );
}

function expiredFields(run: Execution, stepKey: string, scope: string, key: string, tomb: TombstoneRecord) {
  return { runId: run.runId, step: stepKey, key, scope, outcome: tomb.outcome, heldByRunId: tomb.runId, expiresAt: tomb.expiresAt.toISOString() };
}
