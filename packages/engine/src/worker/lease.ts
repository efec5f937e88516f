/**
 * The lease keeper: one per worker (and one for the engine's direct runs), renewing the leases of
 * every run its owner executes in a single statement, well before they expire (every lease/3). Renewal never bumps
 * `state_version`.
 *
 * A run no longer held (re-claimed after we stalled, or moved by an operator) is lost: its
 * `onLost` fires, which aborts its AbortSignal and stops its writes. When no renewal has
 * succeeded for three quarters of a lease (the database unreachable, a renewal hanging), a
 * watchdog treats every run as lost before its lease can expire: the stale worker stops before
 * another may claim.
 */
import type pg from 'pg';
import { fault, type FaultHooks } from '../faults.js';
import { extendLeases } from '../store/leases.js';
import type { Fence } from '../store/rows.js';

export interface HeldLease {
  readonly fence: Fence;
  /** Set by the execution when it records progress; cleared by each renewal. */
  progressed: boolean;
  onLost(): void;
  onCancelRequested(): void;
  /** Renewed at database time `now`; `signalSeq` is the run's signal counter (it moves when a signal arrives or a child settles). */
  onRenewed(now: Date, signalSeq: number | null): void;
}

export class LeaseKeeper {
  readonly #held = new Map<string, HeldLease>();
  #timer: NodeJS.Timeout | undefined;
  /** Fires at 3/4 of a lease after the last successful renewal, whether or not a renewal hangs. */
  #watchdog: NodeJS.Timeout | undefined;
  #lastSuccess = Date.now();
  #renewing: Promise<void> | undefined;

  constructor(
    private readonly pool: pg.Pool,
    private readonly owner: string,
    readonly leaseMs: number,
    private readonly onError: (error: unknown) => void = () => {},
    private readonly faults?: FaultHooks,
  ) {}

  /** Starts renewing `lease`, which was taken (claimed or inserted) at `takenAt` (Date.now() time). */
  hold(lease: HeldLease, takenAt = Date.now()): void {
    this.#held.set(lease.fence.taskId, lease);
    // The watchdog must count from the oldest lease it guards, not from when renewing began.
    if (this.#timer && takenAt < this.#lastSuccess) this.#succeeded(takenAt);
    if (!this.#timer) {
      this.#succeeded(takenAt);
      this.#timer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
      this.#timer.unref();
    }
  }

  #succeeded(at: number): void {
    this.#lastSuccess = at;
    clearTimeout(this.#watchdog);
    // Stop before the lease can expire in the database (where another worker may then claim the
    // run), not after: a quarter of the lease is left as margin for clock and timer drift.
    this.#watchdog = setTimeout(() => this.#giveUp(), Math.max(1, at + this.leaseMs * 0.75 - Date.now()));
    this.#watchdog.unref();
  }

  #giveUp(): void {
    if (Date.now() - this.#lastSuccess < this.leaseMs * 0.75) return;
    for (const lease of [...this.#held.values()]) {
      this.release(lease.fence.taskId, lease);
      lease.onLost();
    }
  }

  /** Stops renewing `lease` — only if it is still the one held for its run (a re-claim may have replaced it). */
  release(taskId: string, lease?: HeldLease): void {
    if (lease && this.#held.get(taskId) !== lease) return;
    this.#held.delete(taskId);
    if (this.#held.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      clearTimeout(this.#watchdog);
      this.#timer = undefined;
    }
  }

  /** Renews every held lease now (the timer calls this; tests may too). */
  renew(): Promise<void> {
    this.#renewing ??= this.#renewOnce().finally(() => (this.#renewing = undefined));
    return this.#renewing;
  }

  async #renewOnce(): Promise<void> {
    const held = [...this.#held.values()];
    if (held.length === 0) return;
    const startedAt = Date.now();
    // Progress made while this renewal is in flight counts for the next one.
    const progressed = held.map((h) => h.progressed);
    for (const h of held) h.progressed = false;
    try {
      await fault(this.faults, { point: 'duringLeaseRenewal', runId: held.map((h) => h.fence.taskId).join(',') });
      // A renewal that hangs (a half-open connection) must not hold off the decision below.
      let timer: NodeJS.Timeout | undefined;
      const rows = await Promise.race([
        extendLeases(
          this.pool,
          this.owner,
          this.leaseMs,
          held.map((h, i) => ({ tenantId: h.fence.tenantId, id: h.fence.taskId, progressed: progressed[i]! })),
        ),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`lease renewal took longer than ${Math.floor(this.leaseMs / 3)} ms`)), Math.floor(this.leaseMs / 3));
        }),
      ]).finally(() => clearTimeout(timer));
      const byId = new Map(rows.map((r) => [r.id, r]));
      let skipped = false;
      for (const lease of held) {
        if (this.#held.get(lease.fence.taskId) !== lease) continue; // released meanwhile
        const row = byId.get(lease.fence.taskId);
        if (!row || !row.held) {
          this.release(lease.fence.taskId, lease);
          lease.onLost();
          continue;
        }
        if (!row.renewed) {
          skipped = true; // locked by a transaction in progress (our own commit): not lost, try again soon
          continue;
        }
        lease.onRenewed(row.now, row.signalSeq);
        if (row.cancelRequestedAt) lease.onCancelRequested();
      }
      this.#succeeded(startedAt);
      if (skipped) setTimeout(() => void this.renew(), Math.max(20, Math.floor(this.leaseMs / 10))).unref();
    } catch (error) {
      held.forEach((h, i) => (h.progressed ||= progressed[i]!));
      this.onError(error);
      // Try again sooner than the regular beat; the watchdog gives up at 3/4 of the lease.
      setTimeout(() => void this.renew(), Math.max(20, Math.floor(this.leaseMs / 10))).unref();
    }
  }

  get size(): number {
    return this.#held.size;
  }
}
