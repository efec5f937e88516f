/**
 * The tick: fires due cron slots. Every started worker runs a `Scheduler` (so does
 * `engine.schedules.tick()`, once); any number of them may tick at once, in any processes.
 *
 * One tick round is ONE short transaction, with nothing but the database inside it:
 *
 *   BEGIN
 *   claim due schedules   next_at <= ratchet.now(), FOR UPDATE SKIP LOCKED LIMIT n
 *   per schedule          slots to fire per its catch-up policy (slots.ts, pure JS)
 *                         one pending run per slot: createTask, idempotency key schedule:<id>:<slot ISO>
 *   move next_at          past every fired slot; last_slot_at = the last fired
 *   COMMIT                (the runs' NOTIFY reaches workers here)
 *
 * Exactly once per slot: the row lock makes one ticker at a time own a schedule, and the runs and
 * the new `next_at` commit together, so the next ticker starts past them. A crash anywhere before
 * COMMIT rolls back runs and move alike; a commit whose acknowledgement was lost leaves `next_at`
 * already moved. Should a slot ever be computed again anyway (a `next_at` rewound by hand), its
 * idempotency key is taken (unique per workflow and tenant): the insert is a no-op.
 *
 * The runs are pending runs like any other: a schedule whose workflow no live worker serves still
 * starts them, and they wait for a worker that registers that (name, version).
 *
 * Scheduler loop: tick (rounds until nothing due is left) → sleep until the earliest `next_at`,
 * capped by `pollMs`, woken early by NOTIFY `ratchet_schedules` (a schedule created or resumed
 * elsewhere) → tick … A failed tick (database gone) is reported through `onError` and retried
 * with backoff; the loop never throws.
 */
import type pg from 'pg';
import { RatchetError } from '@ratchet/sdk';
import type { EngineCore } from '../core.js';
import { uuidv7 } from '../ids.js';
import { sqlState } from '../store/sqlstate.js';
import { createTask, getTaskByKey, type NewTask } from '../store/tasks.js';
import { claimDueSchedules, moveSchedules, nextScheduleDueIn, SCHEDULES_CHANNEL, type DueSchedule, type ScheduleMove } from '../store/schedules.js';
import { parseTiming, slotsToFire, type SlotPlan } from './slots.js';

/** Schedules claimed per round. */
const CLAIM_LIMIT = 10;
/** Slots one schedule fires per round: a long `all` backlog continues in the next round, keeping transactions short. */
const SLOTS_PER_ROUND = 100;
/** Rounds per tick, so a tick always ends; a backlog left over is due at once for the next. */
const MAX_ROUNDS = 50;
/** Wait when due schedules remain that other tickers hold locked: they will move them. */
const LOCKED_WAIT_MS = 200;

/** A run a tick started (or found already started) for one slot. */
export interface ScheduledRun {
  scheduleId: string;
  /** The schedule's name. */
  schedule: string;
  tenantId: string;
  /** The slot, to the second. */
  slot: Date;
  runId: string;
  /** False when the slot's run already existed (its key was taken): nothing was started. */
  started: boolean;
}

export interface TickResult {
  /** Schedules this tick claimed (a schedule continued over several rounds counts each time). */
  schedules: number;
  runs: ScheduledRun[];
}

/** The idempotency key of a slot's run. */
export function slotKey(scheduleId: string, slot: Date): string {
  return `schedule:${scheduleId}:${slot.toISOString()}`;
}

const SLOT_KEY = /^schedule:([0-9a-f-]{36}):(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z)$/;

/**
 * The schedule and slot a run was started for, read from its idempotency key (also in its
 * `started` event's payload), or null for a run no schedule started.
 *
 * @example
 * ```ts
 * const { slot } = scheduledSlot(await engine.client.get(runId)) ?? {};
 * ```
 */
export function scheduledSlot(run: { idempotencyKey: string | null }): { scheduleId: string; slot: Date } | null {
  const match = run.idempotencyKey === null ? null : SLOT_KEY.exec(run.idempotencyKey);
  return match ? { scheduleId: match[1]!, slot: new Date(match[2]!) } : null;
}

/** Runs tick rounds until nothing due is left that this ticker can claim. */
export async function tick(core: EngineCore, actorId: string): Promise<TickResult> {
  const result: TickResult = { schedules: 0, runs: [] };
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    const { claimed, runs, more } = await tickRound(core, actorId);
    result.schedules += claimed;
    result.runs.push(...runs);
    if (!more) break;
  }
  return result;
}

/** One transaction: claim, start the slots' runs, move the schedules on. */
async function tickRound(core: EngineCore, actorId: string): Promise<{ claimed: number; runs: ScheduledRun[]; more: boolean }> {
  const client = await core.pool.connect();
  // A backend killed mid-transaction emits 'error' on the checked-out client as well as failing
  // the query; unheard, that event would crash the process. The failed query is what we act on.
  const ignore = () => {};
  client.on('error', ignore);
  let broken = false;
  try {
    await client.query('BEGIN');
    const due = await claimDueSchedules(client, CLAIM_LIMIT);
    const runs: ScheduledRun[] = [];
    const moves: ScheduleMove[] = [];
    const unreadable: unknown[] = [];
    let more = due.length === CLAIM_LIMIT;
    for (const schedule of due) {
      let plan: SlotPlan;
      try {
        plan = slotsToFire(parseTiming(schedule.cron, schedule.timezone), schedule.catchUp, schedule.nextAt, schedule.now, schedule.maxCatchUp, SLOTS_PER_ROUND);
      } catch (error) {
        // Validated at create, so only a row edited by hand gets here: pause it rather than claim it forever.
        unreadable.push(
          new RatchetError(`schedule "${schedule.name}" (${schedule.id}) has a cron or time zone this engine cannot read; it was paused`, {
            code: 'SCHEDULE_UNREADABLE',
            cause: error,
          }),
        );
        moves.push({ tenantId: schedule.tenantId, id: schedule.id, nextAt: null, lastSlotAt: null });
        continue;
      }
      for (const slot of plan.fire) runs.push(await startSlot(core, client, schedule, slot, actorId));
      moves.push({ tenantId: schedule.tenantId, id: schedule.id, nextAt: plan.nextAt, lastSlotAt: plan.fire.at(-1) ?? null });
      if (plan.nextAt <= schedule.now) more = true;
    }
    if (moves.length > 0) await moveSchedules(client, moves);
    await client.query('COMMIT');
    unreadable.forEach(core.onError);
    return { claimed: due.length, runs, more };
  } catch (error) {
    await client.query('ROLLBACK').catch(() => (broken = true));
    if (sqlState(error) === undefined) broken = true; // a dropped connection: do not return it to the pool
    throw error;
  } finally {
    client.off('error', ignore);
    client.release(broken);
  }
}

async function startSlot(core: EngineCore, client: pg.PoolClient, schedule: DueSchedule, slot: Date, actorId: string): Promise<ScheduledRun> {
  const key = slotKey(schedule.id, slot);
  const task: NewTask = {
    tenantId: schedule.tenantId,
    id: uuidv7(),
    workflowName: schedule.workflowName,
    workflowVersion: schedule.workflowVersion,
    idempotencyKey: key,
    concurrencyKey: null,
    concurrencyLimit: null,
    priority: 0,
    input: schedule.input,
    inputHash: schedule.inputHash,
    parentId: null,
    // The schedules table does not record the workflow's timeout: a ticker that has the
    // workflow registered applies it, one that does not starts the run without a deadline.
    timeoutMs: core.registry.get(schedule.workflowName, schedule.workflowVersion)?.timeout ?? null,
    traceId: null,
    spanId: null,
    actorId,
    policyVersion: core.runtime.policyVersion,
    eventPayload: { inputHash: schedule.inputHash, keyed: true, schedule: schedule.name, scheduleId: schedule.id, slot: slot.toISOString() },
  };
  const row = await createTask(client, task);
  const base = { scheduleId: schedule.id, schedule: schedule.name, tenantId: schedule.tenantId, slot };
  if (row) return { ...base, runId: row.id, started: true };
  const existing = await getTaskByKey(client, schedule.tenantId, schedule.workflowName, key);
  return { ...base, runId: existing?.id ?? task.id, started: false };
}

export interface SchedulerOptions {
  /** Written as the `started` events' actor. */
  actorId: string;
  /** Longest sleep between ticks when nothing notifies. */
  pollMs: number;
}

/** The ticking loop a worker runs while started. */
export class Scheduler {
  readonly #core: EngineCore;
  readonly #options: SchedulerOptions;
  #loop: Promise<void> | undefined;
  #stopping = false;
  #wake: (() => void) | undefined;
  #woken = false;
  #unsubscribe: (() => void) | undefined;

  constructor(core: EngineCore, options: SchedulerOptions) {
    this.#core = core;
    this.#options = options;
  }

  async start(): Promise<void> {
    if (this.#loop) return;
    this.#stopping = false;
    // A reconnect (payload undefined) also pokes: a create notified meanwhile is not lost.
    this.#unsubscribe = await this.#core.listener.subscribe(SCHEDULES_CHANNEL, () => this.#poke());
    this.#loop = this.#run();
  }

  /** Stops ticking; resolves once a tick in progress has committed or rolled back. */
  async stop(): Promise<void> {
    if (!this.#loop) return;
    this.#stopping = true;
    this.#poke();
    await this.#loop;
    this.#loop = undefined;
    this.#unsubscribe?.();
    this.#unsubscribe = undefined;
  }

  async #run(): Promise<void> {
    let backoff = 100;
    while (!this.#stopping) {
      let waitMs = this.#options.pollMs;
      try {
        await tick(this.#core, this.#options.actorId);
        const due = await nextScheduleDueIn(this.#core.pool);
        backoff = 100;
        // Still due after a tick: other tickers hold those rows (or a backlog continues); do not spin.
        if (due !== null) waitMs = Math.min(this.#options.pollMs, due <= 0 ? LOCKED_WAIT_MS : Math.ceil(due) + 1);
      } catch (error) {
        // The database went away (restart, terminated backend): report, back off, never crash.
        this.#core.onError(error);
        waitMs = backoff;
        backoff = Math.min(backoff * 2, 5_000);
      }
      await this.#idle(waitMs);
    }
  }

  #poke(): void {
    if (this.#wake) this.#wake();
    else this.#woken = true;
  }

  #idle(ms: number): Promise<void> {
    if (this.#stopping) return Promise.resolve();
    if (this.#woken) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }
}
