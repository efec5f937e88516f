/**
 * Which `ratchet_work` notifications call for a claim (worker.ts). A start's notice names its run
 * (store/tasks.ts, `startNotice`), so a worker claims for a start only when it runs that
 * workflow version and has not already taken the run: the notice often arrives after the claim
 * that took it. Every other wake-up on the channel (a concurrency key freed, a signal, a retry,
 * the listener reconnecting) names no run and always calls for a claim.
 *
 * A start heard while a claim is in flight is remembered: that claim's snapshot may predate the
 * start's commit, so if it did not take the run, the worker claims again at once. A start heard
 * at any other time wakes the loop, and the claim that follows (begun after the commit, which
 * the NOTIFY follows) sees it.
 */
import { startNotice } from '../store/tasks.js';

/** Claims remembered, to recognise the late notices of their runs. */
const CLAIMED_REMEMBERED = 256;

export class StartNotices {
  readonly #heardWhileClaiming = new Set<string>();
  readonly #claimedLately = new RecentIds(CLAIMED_REMEMBERED);

  /** `runs(name, version)`: whether this worker runs that workflow version. */
  constructor(private readonly runs: (name: string, version: string) => boolean) {}

  /** Whether a notification (undefined: the listener reconnected) calls for a claim now; `claiming`: one is in flight. */
  heard(payload: string | undefined, claiming: boolean): boolean {
    const start = payload === undefined ? null : startNotice(payload);
    if (!start) return true;
    if (this.#claimedLately.has(start.runId) || !this.runs(start.workflowName, start.workflowVersion)) return false;
    if (!claiming) return true;
    this.#heardWhileClaiming.add(start.runId);
    return false;
  }

  /** A claim took these runs. Whether a start heard while it was in flight is still not taken: claim again at once. */
  claimed(runIds: readonly string[]): boolean {
    for (const id of runIds) {
      this.#claimedLately.add(id);
      this.#heardWhileClaiming.delete(id);
    }
    const again = this.#heardWhileClaiming.size > 0;
    this.#heardWhileClaiming.clear();
    return again;
  }

  /** A claim failed: the one after the backoff sees every start heard meanwhile. */
  claimFailed(): void {
    this.#heardWhileClaiming.clear();
  }
}

/** The last `size` ids added, for membership tests. */
class RecentIds {
  readonly #ring: (string | undefined)[];
  readonly #ids = new Set<string>();
  #next = 0;

  constructor(size: number) {
    this.#ring = new Array<string | undefined>(size);
  }

  add(id: string): void {
    const evicted = this.#ring[this.#next];
    if (evicted !== undefined) this.#ids.delete(evicted);
    this.#ring[this.#next] = id;
    this.#ids.add(id);
    this.#next = (this.#next + 1) % this.#ring.length;
  }

  has(id: string): boolean {
    return this.#ids.has(id);
  }
}
