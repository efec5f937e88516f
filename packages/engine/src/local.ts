/**
 * In-process shortcuts between an engine's clients and its own workers.
 *
 * NOTIFY is how processes wake each other, but a notifying transaction takes a database-wide lock
 * at commit and holds it through the WAL flush, so notifying commits are serialized: measured
 * here, a single-row INSERT commits 2.5× slower with a `pg_notify` than without. When both ends
 * are in this process, memory does the job instead:
 *
 * - a start whose workflow a local worker serves, with a free slot, is an eager start (as in
 *   Temporal): the slot is reserved, the start's INSERT leases the run to that worker with its
 *   `claimed` event, and the worker runs it — no `ratchet_work`, no claim statement. The INSERT
 *   leaves the run pending when a due pending run of the same workflow version at its priority
 *   or higher waits (the claim takes that one first), and a run with a concurrency key is never
 *   eager (only the claim assigns its key's slots): then the worker is poked to claim. A busy
 *   worker claims again the moment a slot frees; other processes' workers find pending runs by
 *   their poll;
 * - a caller awaiting a result registers this engine's id (`tasks.awaited_by`); a run settled by
 *   this engine's workers is handed to its local waiters, and NOTIFYs only when a caller in
 *   another process awaits it too (`awaited_by = '*'`) — or when another process settles it.
 */
import type { TaskState } from './schema/index.js';
import type { SerializedError } from '@ratchet/sdk';
import type { ClaimedTask } from './store/tasks.js';

/** A settled run's outcome, as a waiter needs it. */
export interface SettledOutcome {
  state: TaskState;
  output: unknown;
  error: SerializedError | null;
}

/** What the hub needs from a worker. */
export interface LocalWorker {
  /** Holds a free slot for one eager start, if the worker is started, not stopping, and has one. */
  reserve(): SlotReservation | undefined;
}

/** A worker's slot held while a start's INSERT runs; exactly one of `take` or `release` ends it. */
export interface SlotReservation {
  /** The worker's lease owner id and lease length, for the INSERT. */
  readonly owner: string;
  readonly leaseMs: number;
  /** The INSERT leased the run to this worker: run it, as if claimed. */
  take(task: ClaimedTask): void;
  /** The slot is free again; `poke`: a pending run was inserted, claim now. */
  release(poke: boolean): void;
}

export class LocalHub {
  readonly #workers = new Set<LocalWorker>();
  readonly #waiters = new Map<string, Set<(outcome: SettledOutcome) => void>>();

  /** `id`: this engine instance's id, written as `awaited_by` by its callers. */
  constructor(readonly id: string) {}

  addWorker(worker: LocalWorker): void {
    this.#workers.add(worker);
  }

  removeWorker(worker: LocalWorker): void {
    this.#workers.delete(worker);
  }

  /** A free slot of a local worker, held for an eager start, if any worker has one. */
  reserve(): SlotReservation | undefined {
    for (const worker of this.#workers) {
      const slot = worker.reserve();
      if (slot) return slot;
    }
    return undefined;
  }

  /** Hands `runId`'s outcome to `deliver` when a local worker settles it; returns the unsubscribe. */
  await(runId: string, deliver: (outcome: SettledOutcome) => void): () => void {
    let set = this.#waiters.get(runId);
    if (!set) this.#waiters.set(runId, (set = new Set()));
    set.add(deliver);
    return () => {
      set.delete(deliver);
      if (set.size === 0 && this.#waiters.get(runId) === set) this.#waiters.delete(runId);
    };
  }

  /** A local worker settled `runId` (its transition committed). */
  settled(runId: string, outcome: SettledOutcome): void {
    const set = this.#waiters.get(runId);
    if (!set) return;
    for (const deliver of [...set]) deliver(outcome);
  }
}
