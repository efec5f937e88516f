/**
 * Replay order: recorded results are handed back in the order they were first recorded, one at
 * a time, letting the code each one unblocks run before the next. Parallel branches therefore
 * interleave on replay exactly as they did the first time: every call gets the same step key,
 * and ctx.now(), random() and uuid() see the same facts in the same order.
 *
 * A recorded call the code no longer reaches stalls the cursor. If, meanwhile, the code made a
 * later recorded call or waits durably (`otherWaits`), then after `stallMs` the cursor reports
 * the stall (the run is parked as nondeterministic); if only the workflow's own code is busy, it
 * keeps waiting.
 */
import type { OperationRecord } from '../store/rows.js';

export class ReplayOrder {
  readonly #order: OperationRecord[];
  #cursor = 0;
  /** Calls made for recorded keys, waiting for the cursor to reach them. */
  readonly #queued = new Map<string, () => void>();
  #releasing = false;
  #stopped = false;
  #stall: { cursor: number; timer: NodeJS.Timeout } | undefined;

  constructor(
    recorded: readonly OperationRecord[],
    private readonly stallMs: number,
    /** Keys of durable waits in flight: evidence the code moved on past the cursor. */
    private readonly otherWaits: () => string[],
    private readonly onStall: (expected: OperationRecord, reached: string[]) => void,
  ) {
    this.#order = [...recorded].sort((a, b) => a.seq - b.seq);
  }

  /** Resolves when the cursor reaches the recorded call `key`. */
  turn(key: string): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#queued.set(key, resolve);
      this.#pump();
    });
  }

  /** The segment settled: release nothing more, watch nothing more. */
  stop(): void {
    this.#stopped = true;
    if (this.#stall) clearTimeout(this.#stall.timer);
  }

  #pump(): void {
    if (this.#releasing || this.#stopped) return;
    const op = this.#order[this.#cursor];
    if (!op) return;
    const release = this.#queued.get(op.stepKey);
    if (!release) {
      this.#watchStall(op);
      return;
    }
    this.#queued.delete(op.stepKey);
    this.#cursor += 1;
    this.#releasing = true;
    release();
    // A settled record resolves within microtasks: after them, the code it unblocked has made
    // its next calls, and the next record may be released.
    setImmediate(() => {
      this.#releasing = false;
      this.#pump();
    });
  }

  #watchStall(op: OperationRecord): void {
    if (this.#stall?.cursor === this.#cursor) return;
    if (this.#stall) clearTimeout(this.#stall.timer);
    const cursor = this.#cursor;
    const timer = setTimeout(() => {
      if (this.#stopped || this.#cursor !== cursor) return;
      this.#stall = undefined;
      const reached = [...this.#queued.keys(), ...this.otherWaits()];
      if (reached.length === 0) return this.#watchStall(op); // only the workflow's own code is busy
      this.onStall(op, reached);
    }, this.stallMs);
    timer.unref();
    this.#stall = { cursor, timer };
  }
}
