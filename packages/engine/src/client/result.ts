/**
 * Awaiting a run's outcome: `run.result()` and `client.execute()`.
 *
 * A caller subscribes first, then registers — `result()` with one statement that also reads the
 * state (`awaitTask`), `execute()` in the start's own INSERT — then waits. A run settled by a
 * worker of the caller's own engine is handed over in memory, outcome and all, with no NOTIFY
 * and no read (local.ts). A run settled elsewhere NOTIFYs `ratchet_done` with its id only (any
 * session may LISTEN, so outcomes never travel in payloads) and the caller reads it: one
 * statement. A poll every second is the safety net for a notification lost while the listener
 * reconnected.
 */
import { NotFoundError, TimeoutError, deserializeError } from '@ratchet/sdk';
import type { EngineCore } from '../core.js';
import type { TaskState } from '../schema/index.js';
import type { TaskRecord } from '../store/rows.js';
import { awaitTask, DONE_CHANNEL, getOutcome, type TaskOutcome } from '../store/tasks.js';

export const FINAL: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'cancelled']);
/** The safety net under NOTIFY while awaiting a result. */
const RESULT_POLL_MS = 1_000;
/** How soon a caller whose registration met a locked row tries again. */
const REGISTER_RETRY_MS = 10;

/** A subscription to one run's settlement, opened before the caller registers (so nothing is missed). */
export class ResultWaiter {
  #wake: (() => void) | undefined;
  /** A notification that arrived while no one was waiting (a query in flight): the next wait returns at once. */
  #notified = false;
  /** The outcome, when a local worker handed it over. */
  #carried: TaskOutcome | undefined;
  #unsubscribe: (() => void) | undefined;
  #unlisten: (() => void) | undefined;

  private constructor(
    private readonly core: EngineCore,
    readonly runId: string,
    readonly tenantId: string,
  ) {}

  static async open(core: EngineCore, runId: string, tenantId: string): Promise<ResultWaiter> {
    const waiter = new ResultWaiter(core, runId, tenantId);
    // A worker of this engine hands the outcome over in memory (local.ts); any other settler notifies.
    waiter.#unlisten = core.local.await(runId, (outcome) => waiter.#deliver(outcome));
    try {
      waiter.#unsubscribe = await core.listener.subscribe(DONE_CHANNEL, (payload) => waiter.#heard(payload));
    } catch (error) {
      waiter.close();
      throw error;
    }
    return waiter;
  }

  #heard(payload: string | undefined): void {
    // No payload: the listener reconnected and every subscriber looks again.
    if (payload === undefined || payload === this.runId) this.#poke();
  }

  #deliver(outcome: TaskOutcome): void {
    this.#carried ??= outcome;
    this.#poke();
  }

  #poke(): void {
    if (this.#wake) this.#wake();
    else this.#notified = true;
  }

  close(): void {
    this.#unlisten?.();
    this.#unsubscribe?.();
  }

  /**
   * Waits until the run settles: `task` is its state as the caller's registering statement read
   * it (null: no such run), `registered` whether that statement registered (a registration that
   * met a locked row is tried again shortly).
   */
  async settle<O>(task: TaskRecord | null, registered: boolean, timeoutMs: number | undefined): Promise<O> {
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    let current: TaskOutcome | null = task;
    for (;;) {
      if (!current) throw new NotFoundError(`no run ${this.runId}`, { resource: 'run', id: this.runId });
      if (FINAL.has(current.state)) return settledResult<O>(current);
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`run ${this.runId} did not finish within ${timeoutMs} ms (it is ${current.state})`, { runId: this.runId, timeoutMs: timeoutMs! });
      await this.#wait(Math.min(left, registered ? RESULT_POLL_MS : REGISTER_RETRY_MS));
      if (this.#carried) return settledResult<O>(this.#carried);
      if (registered) {
        current = await getOutcome(this.core.pool, this.tenantId, this.runId);
      } else {
        const again = await awaitTask(this.core.pool, this.tenantId, this.runId, this.core.local.id);
        registered = again?.registered ?? false;
        current = again;
      }
    }
  }

  #wait(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#notified) {
        this.#notified = false;
        return resolve();
      }
      const timer = setTimeout(done, ms);
      const self = this;
      function done(): void {
        clearTimeout(timer);
        self.#wake = undefined;
        resolve();
      }
      this.#wake = done;
    });
  }
}

/** `run.result()`: subscribe, register and read in one statement, then wait. */
export async function awaitResult<O>(core: EngineCore, runId: string, tenantId: string, timeoutMs: number | undefined): Promise<O> {
  const waiter = await ResultWaiter.open(core, runId, tenantId);
  try {
    const first = await awaitTask(core.pool, tenantId, runId, core.local.id);
    return await waiter.settle<O>(first, first?.registered ?? false, timeoutMs);
  } finally {
    waiter.close();
  }
}

export function settledResult<O>(task: TaskOutcome): O {
  if (task.state === 'completed') return task.output as O;
  throw deserializeError(task.error ?? { name: 'RatchetError', code: task.state.toUpperCase(), message: `the run ${task.state}` });
}
