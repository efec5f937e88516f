/**
 * A started worker's row in `ratchet.workers` (schema/workers.ts): registered at start, beaten
 * every `heartbeatMs`, removed at stop. It is what lets `engine.stats()` (and `ratchet stats`)
 * name the `(workflow, version)` pairs that have runs but no live worker — the stuck-deploy case
 * where old runs are pinned to a version no process serves any more.
 *
 * A beat that fails (database restarting) is reported to `onError` and tried at the next tick;
 * a beat that finds its row swept registers again. The timer is unref'd: it never keeps a
 * process alive by itself.
 */
import { hostname } from 'node:os';
import type pg from 'pg';
import type { ServedWorkflow } from '../schema/workers.js';
import { beatWorker, registerWorker, removeWorker, type WorkerRegistration } from '../store/workers.js';

export class Heartbeat {
  readonly #pool: pg.Pool;
  readonly #registration: WorkerRegistration;
  readonly #onError: (error: unknown) => void;
  #timer: NodeJS.Timeout | undefined;
  #beating: Promise<void> = Promise.resolve();

  constructor(pool: pg.Pool, worker: { id: string; workflows: ServedWorkflow[]; concurrency: number; heartbeatMs: number }, onError: (error: unknown) => void) {
    this.#pool = pool;
    this.#registration = { ...worker, host: hostname(), pid: process.pid };
    this.#onError = onError;
  }

  async start(): Promise<void> {
    await registerWorker(this.#pool, this.#registration);
    this.#timer = setInterval(() => {
      this.#beating = this.#beating.then(() => this.#beat());
    }, this.#registration.heartbeatMs);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#beating;
    await removeWorker(this.#pool, this.#registration.id).catch(this.#onError);
  }

  async #beat(): Promise<void> {
    try {
      if (!(await beatWorker(this.#pool, this.#registration.id))) await registerWorker(this.#pool, this.#registration);
    } catch (error) {
      this.#onError(error);
    }
  }
}
