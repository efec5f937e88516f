/**
 * The two fenced writes of a segment, made robust to a connection lost mid-statement — even at
 * COMMIT, when the client cannot know whether the write landed.
 *
 * - `writeCheckpoint`: a step record (store/operations.ts). After a connection error the SAME
 *   statement (same row id) is sent again; if nothing is written the second time, the row found
 *   under the step key is compared: ours (same id, state and attempt, fence still held) means the
 *   first attempt committed. Anything else means the run is no longer ours: 'lost'.
 * - `transitionFenced`: a state change with its event (store/tasks.ts). A repeat that moves
 *   nothing checks whether the event our first attempt would have written exists.
 *
 * Errors about the statement (constraint, data) are the caller's; transient ones (see
 * `isTransient`: a dropped connection, a restarting server) are retried a few times with backoff,
 * then reported as 'lost' (the segment stops; its lease expires; the run is resumed).
 */
import type pg from 'pg';
import { getOperation, writeOperationBatched, type OperationWrite, type WrittenOperation } from '../store/operations.js';
import { fenceHolds, transitionTask, type Transition } from '../store/tasks.js';
import type { Fence } from '../store/rows.js';
import { isTransient } from '../store/sqlstate.js';

/** Attempts at a statement whose connection failed before the segment gives up on the database. */
const ATTEMPTS = 4;

export async function writeCheckpoint(
  pool: pg.Pool,
  fence: Fence,
  op: OperationWrite,
  onError: ((error: unknown) => void) | undefined,
  /**
   * The statement that writes `op`; default the generic step checkpoint (gathered with other
   * runs' records written in the same turn of the event loop). An emit writes its message with it.
   */
  statement: () => Promise<WrittenOperation | null> = () => writeOperationBatched(pool, fence, op),
): Promise<WrittenOperation | 'lost'> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const written = await statement();
      if (written) return written;
      const row = await getOperation(pool, fence.tenantId, fence.taskId, op.stepKey);
      // An insert is recognised by its row id; an update (expectedAttempt set) by what it set.
      const ours = row && (row.id === op.id || op.expectedAttempt !== null) && row.state === op.state && row.attempt === op.attempt;
      if (ours && (await fenceHolds(pool, fence))) {
        return { id: row!.id, createdAt: row!.createdAt, completedAt: row!.completedAt, deadlineAt: row!.deadlineAt, now: null };
      }
      return 'lost';
    } catch (error) {
      if (!isTransient(error)) throw error;
      onError?.(error);
      if (attempt >= ATTEMPTS) return 'lost';
      await delay(100 * 2 ** attempt);
    }
  }
}

/** Resolves to the new state_version, or null when the fence failed (the run is not ours). */
export async function transitionFenced(
  pool: pg.Pool,
  fence: Fence,
  transition: Transition,
  onError: ((error: unknown) => void) | undefined,
): Promise<number | null> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      const version = await transitionTask(pool, fence, transition);
      if (version !== null) return version;
      return attempt > 1 && (await movedByUs(pool, fence, transition)) ? fence.stateVersion + 1 : null;
    } catch (error) {
      if (!isTransient(error) || attempt >= ATTEMPTS) throw error;
      onError?.(error);
      await delay(100 * 2 ** attempt);
    }
  }
}

async function movedByUs(pool: pg.Pool, fence: Fence, transition: Transition): Promise<boolean> {
  const { rows } = await pool.query({
    name: 'ratchet_event_exists',
    text: `SELECT 1 FROM ratchet.events WHERE tenant_id = $1 AND task_id = $2 AND seq = $3 AND actor_id = $4 AND event_type = $5`,
    values: [fence.tenantId, fence.taskId, fence.stateVersion + 1, fence.owner, transition.event],
  });
  return rows.length > 0;
}

export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Runs `statement`, repeating it after connection errors (not SQL errors) with backoff; 'lost'
 * when the database stays unreachable. The statement must be safe to repeat.
 */
export async function withReconnects<T>(statement: () => Promise<T>, onError: ((error: unknown) => void) | undefined): Promise<T | 'lost'> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await statement();
    } catch (error) {
      if (!isTransient(error)) throw error;
      onError?.(error);
      if (attempt >= ATTEMPTS) return 'lost';
      await delay(100 * 2 ** attempt);
    }
  }
}
