// Internal: the engine's suspension throwable.
//
// When every `ctx` call in flight is a sleep or a wait, the engine unwinds the workflow
// function by throwing a `Suspension` through it; the run is then stored as sleeping/waiting and
// re-entered by replay later. Suspensions are control flow, not failures:
//   - they must never be swallowed. User code that catches everything must rethrow them
//     (`if (isSuspension(e)) throw e`); the engine also detects a swallowed suspension (the
//     workflow keeps going or returns while it is suspending) and treats it as an error.
//   - they are never serialized, stored, retried, or shown to users as a run's error.
// This is engine API, exported for the engine only.

/** The brand of the engine's internal suspension throwable (internal: engine use only). */
export const SUSPEND: unique symbol = Symbol.for('ratchet.suspend');

/**
 * Internal: thrown by the engine to unwind a run that is suspending (sleep/wait). Never catch it
 * without rethrowing.
 */
export class Suspension extends Error {
  declare readonly [SUSPEND]: true;
  /** Why the run suspends, for logs: e.g. `sleep`, `wait`. */
  readonly reason: string;

  constructor(reason: string) {
    super(`Ratchet internal: the run is suspending (${reason}). Rethrow this; do not catch it (check with isSuspension(e)).`);
    this.reason = reason;
  }
}
Object.defineProperty(Suspension.prototype, 'name', { value: 'RatchetSuspension', enumerable: false, writable: true, configurable: true });
Object.defineProperty(Suspension.prototype, SUSPEND, { value: true, enumerable: false });

/** Internal: true when `e` is the engine's suspension throwable (from any copy of this package); rethrow it. */
export function isSuspension(e: unknown): e is Suspension {
  return typeof e === 'object' && e !== null && (e as { [SUSPEND]?: unknown })[SUSPEND] === true;
}
