/**
 * Awaiting a run's outcome: `run.result()` and `client.execute()`.
 *
 * A settled run NOTIFYs `ratchet_done` only when a caller registered for its result
 * (`tasks.awaited_by`), and the notification carries the outcome when it fits
 * (store/tasks.ts DONE_CHANNEL); a run settled by a worker of the caller's own engine is handed
 * over in memory instead, with no NOTIFY at all (local.ts). So a caller subscribes first, then
 * registers — `result()` with one statement that also reads the state (`awaitTask`),
 * `execute()` in the start's own INSERT — and then normally waits without another statement:
 * the outcome arrives with the wake-up. A poll every second is the safety net for a
 * notification lost while the listener reconnected.
 */
import { NotFoundError, TimeoutError, deserializeError, type SerializedError } from '@ratchet/sdk';
import type { EngineCore } from '../core.js';
import type { TaskState } from '../schema/index.js';
import type { TaskRecord } from '../store/rows.js';
import { awaitTask, DONE_CHANNEL, getTask } from '../store/tasks.js';

export const FINAL: ReadonlySet<TaskState> = new Set(['completed', 'failed', 'cancelled']);
/** The safety net under NOTIFY while awaiting a result. */
const RESULT_POLL_MS = 1_000;
/** How soon a caller whose registration met a locked row tries again. */
const REGISTER_RETRY_MS = 10;

type Outcome = Pick<TaskRecord, 'state' | 'output' | 'error'>;

/** A subscription to one run's settlement, opened before the caller registers (so nothing is missed). */
export class ResultWaiter {
  #wake: (() => void) | undefined;
  /** A notification that arrived while no one was waiting (a query in flight): the next wait returns at once. */
  #notified = false;
  /** The outcome, when the notification carried it. */
  #carried: Outcome | undefined;
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
    if (payload !== undefined) {
      const outcome = doneOutcome(payload);
      if ((outcome?.id ?? payload) !== this.runId) return;
      if (outcome) return this.#deliver(outcome);
    }
    this.#poke();
  }

  #deliver(outcome: Outcome): void {
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
    let current: Outcome | null = task;
    for (;;) {
      if (!current) throw new NotFoundError(`no run ${this.runId}`, { resource: 'run', id: this.runId });
      if (FINAL.has(current.state)) return settledResult<O>(current);
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`run ${this.runId} did not finish within ${timeoutMs} ms (it is ${current.state})`, { runId: this.runId, timeoutMs: timeoutMs! });
      await this.#wait(Math.min(left, registered ? RESULT_POLL_MS : REGISTER_RETRY_MS));
      if (this.#carried) return settledResult<O>(this.#carried);
      if (registered) {
        current = await getTask(this.core.pool, this.tenantId, this.runId);
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

/** A `ratchet_done` payload that carries the outcome (JSON), or undefined for a bare run id. */
function doneOutcome(payload: string): (Outcome & { id: string }) | undefined {
  if (!payload.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(payload) as { id?: unknown; state?: unknown; output?: unknown; error?: unknown };
    if (typeof parsed.id !== 'string' || typeof parsed.state !== 'string' || !FINAL.has(parsed.state as TaskState)) return undefined;
    return { id: parsed.id, state: parsed.state as TaskState, output: parsed.output ?? null, error: (parsed.error ?? null) as SerializedError | null };
  } catch {
    return undefined;
  }
}

export function settledResult<O>(task: Outcome): O {
  if (task.state === 'completed') return task.output as O;
  throw deserializeError(task.error ?? { name: 'RatchetError', code: task.state.toUpperCase(), message: `the run ${task.state}` });
}
