/**
 * How a segment writes its step records: one fenced statement each (checkpoint.ts), or, for a
 * fresh step that succeeded at its first attempt, deferred to the segment's next statement.
 *
 * Deferring: the next ctx call writes the deferred steps before doing anything (Execution.call),
 * the run's settlement writes them in its own statement (a workflow that returns after its last
 * step settles in one statement, not two), and after the current macrotask they are written by
 * themselves (the workflow awaits something that is not a ctx call). So nothing that follows a
 * step — another step, an effect, a commit, a message, the run's outcome — becomes visible or
 * runs before the step is recorded, and a crash before then loses only what a crash between the
 * step's work and its checkpoint always loses: the step runs again on replay.
 */
import { uuidv7 } from '../ids.js';
import type { OperationWrite, WrittenOperation } from '../store/operations.js';
import { writeCheckpoint } from './checkpoint.js';
import type { Execution, NewOperation } from './execution.js';

export class StepRecorder {
  /** Fresh steps that succeeded, not written yet (see `defer`). */
  #deferred: OperationWrite[] = [];
  /** Writing deferred steps by themselves (before a call's work, or after the macrotask that deferred them). */
  #flushing: Promise<void> | undefined;
  /** The fenced statement in flight, if any (what a stuck segment is waiting for). */
  #writing: { stepKey: string; since: number } | undefined;
  #nextSeq: number;

  constructor(
    private readonly run: Execution,
    /** The recording order number of the run's latest record (0: none). */
    lastSeq: number,
  ) {
    this.#nextSeq = lastSeq + 1;
  }

  /** The next recording order number, for statements that write a step record themselves. */
  takeSeq(): number {
    return this.#nextSeq++;
  }

  /** The statement in flight: its step and since when (Date.now()). */
  get writing(): { stepKey: string; since: number } | undefined {
    return this.#writing;
  }

  get hasDeferred(): boolean {
    return this.#deferred.length > 0;
  }

  /**
   * Writes a step record in one fenced statement (see checkpoint.ts); 'lost' when the run is no
   * longer ours or the database stays unreachable.
   */
  write(op: NewOperation, statement?: (full: OperationWrite) => Promise<WrittenOperation | null>): Promise<WrittenOperation | 'lost'> {
    const full = this.#complete(op);
    return this.#checkpoint(full, statement && (() => statement(full)));
  }

  /**
   * Records a fresh step that succeeded at its first attempt with the segment's next statement
   * (see the top of this file). Its time (ctx.now() after it, and created_at/completed_at on its
   * row) is the database's time as this worker estimates it when the step succeeded — the same
   * value replay will read.
   */
  defer(op: NewOperation): void {
    const full = this.#complete(op);
    full.completedAt = new Date(Math.max(this.run.dbNow(), this.run.now().getTime()));
    this.run.fact(full.stepKey, full.completedAt);
    this.#deferred.push(full);
    if (this.#deferred.length === 1) {
      setImmediate(() => {
        if (this.#deferred.length > 0 && !this.run.settled) this.flush().catch((error: unknown) => this.run.onError?.(error));
      });
    }
  }

  /** Writes the deferred steps one statement each, oldest first; stops when the segment starts settling (it writes the rest). */
  flush(): Promise<void> {
    this.#flushing ??= (async () => {
      try {
        while (this.#deferred.length > 0 && !this.run.settled) {
          const written = await this.#checkpoint(this.#deferred[0]!);
          if (written === 'lost') return this.run.lose();
          this.#deferred.shift();
        }
      } finally {
        this.#flushing = undefined;
      }
    })();
    return this.#flushing;
  }

  /** For the settlement's statement: the deferred steps not written yet, once any write of them in flight has landed. */
  async takeDeferred(): Promise<OperationWrite[]> {
    await this.#flushing;
    return this.#deferred.splice(0);
  }

  #complete(op: NewOperation): OperationWrite {
    const ids = this.run.traceIds(op.stepKey);
    // Object.assign, not `{ ...op, id, … }`: on Node 20 a spread followed by more properties
    // takes V8's slow path, ≈ 8 µs against 0.5 µs, once per step.
    const full: OperationWrite = Object.assign({}, op, { id: op.id ?? uuidv7(), seq: op.seq ?? this.#nextSeq++, traceId: ids.traceId, spanId: ids.spanId });
    if (full.error) full.error = this.run.options.redaction.error(full.error, this.run.runId);
    return full;
  }

  async #checkpoint(full: OperationWrite, statement?: () => Promise<WrittenOperation | null>): Promise<WrittenOperation | 'lost'> {
    const writing = { stepKey: full.stepKey, since: Date.now() };
    this.#writing = writing;
    let written: WrittenOperation | 'lost';
    try {
      written = await writeCheckpoint(this.run.pool, this.run.fence, full, this.run.onError, statement);
    } finally {
      if (this.#writing === writing) this.#writing = undefined;
    }
    if (written === 'lost') return written;
    if (written.now) this.run.sawDbTime(written.now);
    this.run.progressed();
    return written;
  }
}
