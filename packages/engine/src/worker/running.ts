/**
 * The runs this process is executing, by id, and the two notifications that concern them: a
 * signal (or a settled child) for a run on `ratchet_signal`, which makes its waits look again,
 * and a cancel request on `ratchet_cancel`, which delivers `CancelledError` and aborts its
 * in-flight work. Both ride the engine's one LISTEN connection; every worker process hears every
 * notification and acts only on runs it holds. After a reconnect every run looks again (a
 * notification may have been missed); lease renewal is the slower safety net for both.
 */
import type { Execution } from '../runtime/execution.js';
import { CANCEL_CHANNEL, SIGNAL_CHANNEL } from '../store/signals.js';
import type { Listener } from './listener.js';

export class RunningExecutions {
  readonly #byId = new Map<string, Execution>();
  #subscribed: Promise<void> | undefined;

  constructor(private readonly listener: Listener) {}

  /** Subscribes once per engine; later calls return the same promise. */
  listen(): Promise<void> {
    this.#subscribed ??= Promise.all([
      this.listener.subscribe(SIGNAL_CHANNEL, (id) => {
        if (id === undefined) for (const execution of this.#byId.values()) void execution.poke().catch(() => {});
        else void this.#byId.get(id)?.poke().catch(() => {});
      }),
      this.listener.subscribe(CANCEL_CHANNEL, (id) => {
        if (id !== undefined) this.#byId.get(id)?.requestCancel();
      }),
    ]).then(
      () => undefined,
      (error: unknown) => {
        this.#subscribed = undefined; // try again next time; renewal covers meanwhile
        throw error;
      },
    );
    return this.#subscribed;
  }

  add(execution: Execution): void {
    this.#byId.set(execution.runId, execution);
  }

  delete(execution: Execution): void {
    if (this.#byId.get(execution.runId) === execution) this.#byId.delete(execution.runId);
  }
}
