/**
 * When a segment suspends. It counts the ctx calls that are working (in flight and not waiting
 * durably), keeps the durable waits — sleeps past the in-memory limit (`waitUntil`) and waits for
 * something outside the run (`awaitExternal`: a signal, a child run) — and, once nothing works
 * and something waits, moves the run to `sleeping` (only sleeps) or `waiting`.
 *
 * Waits for something outside the run each have a `look` that checks and, when the thing is
 * there, records it. Looks run one at a time: when the worker is told (`poke`: NOTIFY on
 * ratchet_signal, or a renewal that sees the signal counter move), at a wait's timeout, and just
 * before the run suspends. Suspending reads the signal counter first, looks, and moves to
 * `waiting` carrying that counter: a signal that lands after the read makes the run due at once.
 */
import type { NonDeterminismError } from '@ratchet/sdk';
import type { Found } from './execution.js';

/** setTimeout's limit (2^31 − 1 ms, about 24.8 days); a longer timer fires at once. Longer waits are durable anyway. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** What the suspension needs from its segment. */
export interface SuspensionHost {
  /** Whether the segment is settling or lost: then nothing may start or resolve any more. */
  settled(): boolean;
  /** Waits shorter than this stay in memory; longer ones let the run suspend. */
  readonly inMemoryWaitMs: number;
  /** The database's time now, as the segment estimates it. */
  dbNow(): number;
  /** A timer the segment clears when it settles. */
  timer(fn: () => void, ms: number): NodeJS.Timeout;
  clearTimer(timer: NodeJS.Timeout): void;
  /** A recorded step the code did not reach (then the run parks instead of suspending). */
  unreached(): NonDeterminismError | undefined;
  park(error: unknown): void;
  /** The database stayed unreachable: the segment stops, its lease expires. */
  lose(): void;
  /** Reads the run's signal counter (null: the database stayed unreachable). */
  readSignalSeq(): Promise<number | null>;
  suspend(outcome: { state: 'sleeping'; wakeAt: Date } | { state: 'waiting'; wakeAt: Date | null; signalSeq: number }): void;
  onError: ((error: unknown) => void) | undefined;
}

interface ExternalWait {
  /** When it expires (a wait's timeout), or null. */
  readonly target: Date | null;
  /** Looks once; resolves the wait if what it waits for is there. */
  look(): Promise<void>;
}

export class Suspension {
  readonly #durableWaits = new Map<string, Date>();
  readonly #external = new Map<string, ExternalWait>();
  /** Looks and suspension checks, one at a time. */
  #looks: Promise<void> = Promise.resolve();
  #suspending = false;
  /** ctx calls in flight that are not waiting durably. */
  #working = 0;

  constructor(private readonly host: SuspensionHost) {}

  /** A ctx call began. */
  enter(): void {
    this.#working += 1;
  }

  /** A ctx call ended: the run may be able to suspend now. */
  leave(): void {
    this.#working -= 1;
    this.#scheduleCheck();
  }

  get suspending(): boolean {
    return this.#suspending;
  }

  /** Whether the call under `key` waits durably (a sleep past the in-memory limit, a signal, a child). */
  isWaiting(key: string): boolean {
    return this.#durableWaits.has(key) || this.#external.has(key);
  }

  /** Keys of every durable wait. */
  waitingKeys(): string[] {
    return [...this.#durableWaits.keys(), ...this.#external.keys()];
  }

  /** Keys of the waits for something outside the run (a moving-to-waiting event lists them). */
  externalKeys(): string[] {
    return [...this.#external.keys()];
  }

  /** Resolves at `at` (database time). Longer than the in-memory limit, it lets the run suspend. */
  waitUntil(key: string, at: Date): Promise<void> {
    return new Promise((resolve) => {
      if (this.host.settled()) return;
      const remaining = at.getTime() - this.host.dbNow();
      if (remaining <= 0) return resolve();
      const durable = remaining > this.host.inMemoryWaitMs;
      if (durable) {
        this.#working -= 1;
        this.#durableWaits.set(key, at);
        this.#scheduleCheck();
      }
      if (remaining > MAX_TIMER_MS) return; // the run suspends long before; a claim resumes it
      this.host.timer(() => {
        if (durable) {
          this.#durableWaits.delete(key);
          this.#working += 1;
        }
        if (!this.host.settled()) resolve();
      }, remaining);
    });
  }

  /**
   * Waits for something outside the run (a signal, a child run). `look` checks once and, when the
   * thing is there, records it and returns what the call resolves to (or throws); `expire` runs at
   * `target` (after a last look) and records the timeout. Waits longer than the in-memory limit
   * let the run suspend (state waiting).
   */
  awaitExternal<T>(key: string, target: Date | null, look: () => Promise<Found<T> | undefined>, expire: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.host.settled()) return;
      const remaining = target ? target.getTime() - this.host.dbNow() : Infinity;
      const durable = remaining > this.host.inMemoryWaitMs;
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      const close = () => {
        done = true;
        this.#external.delete(key);
        if (timer) this.host.clearTimer(timer);
        if (durable) this.#working += 1;
      };
      const deliver = (found: Found<T>) => {
        close();
        if ('value' in found) resolve(found.value);
        else reject(found.error);
      };
      this.#external.set(key, {
        target,
        look: async () => {
          if (done || this.host.settled()) return;
          const found = await look();
          if (found && !done) deliver(found);
        },
      });
      if (durable) {
        this.#working -= 1;
        this.#scheduleCheck();
      }
      if (target && remaining <= MAX_TIMER_MS) {
        timer = this.host.timer(
          () =>
            void this.#serial(async () => {
              if (done || this.host.settled()) return;
              const found = await look();
              if (done) return;
              if (found) return deliver(found);
              close();
              await expire().then(resolve, reject);
            }),
          Math.max(0, remaining),
        );
      }
    });
  }

  /** Something the run may be waiting for happened (a signal arrived, a child settled): every wait looks again. */
  poke(): Promise<void> {
    return this.#serial(async () => {
      for (const wait of [...this.#external.values()]) await wait.look();
    });
  }

  #serial(fn: () => Promise<void>): Promise<void> {
    const next = this.#looks.then(fn);
    this.#looks = next.catch((error: unknown) => this.host.onError?.(error));
    return next;
  }

  #scheduleCheck(): void {
    // After the current macrotask: every continuation the last change unblocked has run, so a
    // call made right after another settles is already counted.
    setImmediate(() => this.#check());
  }

  #check(): void {
    if (this.host.settled() || this.#suspending || this.#working > 0 || this.#durableWaits.size + this.#external.size === 0) return;
    const unreached = this.host.unreached();
    if (unreached) return this.host.park(unreached);
    if (this.#external.size === 0) return this.host.suspend({ state: 'sleeping', wakeAt: this.#earliestTarget()! });
    // Read the counter, then look: a signal after the read moves the counter, and the move to
    // waiting below then makes the run due at once instead of waiting for it.
    this.#suspending = true;
    let seen: number | null = null;
    this.#serial(async () => {
      seen = await this.host.readSignalSeq();
      if (seen === null) return;
      for (const wait of [...this.#external.values()]) await wait.look();
    }).then(
      () => {
        this.#suspending = false;
        if (seen === null) return this.host.lose();
        if (this.host.settled() || this.#working > 0 || this.#external.size === 0) return this.#scheduleCheck();
        this.host.suspend({ state: 'waiting', wakeAt: this.#earliestTarget(), signalSeq: seen });
      },
      () => {
        this.#suspending = false;
        this.host.lose(); // the database is unreachable: the lease expires and the run is resumed elsewhere
      },
    );
  }

  #earliestTarget(): Date | null {
    let earliest: Date | null = null;
    for (const at of this.#durableWaits.values()) if (!earliest || at < earliest) earliest = at;
    for (const { target } of this.#external.values()) if (target && (!earliest || target < earliest)) earliest = target;
    return earliest;
  }
}
