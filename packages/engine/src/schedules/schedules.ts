/**
 * `engine.schedules`: cron schedules that start runs — each slot exactly once, however many
 * workers tick (see scheduler.ts for why, slots.ts for catch-up and time zones).
 *
 * @example
 * ```ts
 * await engine.schedules.create({ workflow: report, cron: '0 9 * * MON-FRI', timezone: 'Europe/Berlin', input: { team: 'ops' } });
 * const worker = engine.worker();   // every started worker also ticks the schedules
 * await worker.start();
 * ```
 */
import { NotFoundError, RatchetError, ValidationError, type Workflow, type WorkflowRawInput } from '@ratchet/sdk';
import { idempotencyKeyOf, tenantOf, type EngineCore } from '../core.js';
import { uuidv7 } from '../ids.js';
import { newTaskFor } from '../client/start.js';
import { CATCH_UP_POLICIES, type CatchUpPolicy } from '../schema/index.js';
import {
  databaseNow,
  deleteSchedule,
  getSchedule,
  listSchedules,
  pauseSchedule,
  resumeSchedule,
  upsertSchedule,
  type ScheduleRecord,
} from '../store/schedules.js';
import { parseTiming } from './slots.js';
import { tick, type TickResult } from './scheduler.js';

export interface ScheduleOptions<W extends Workflow<any, any, any> = Workflow<any, any, any>> {
  /** The workflow each slot starts (its name and version are recorded). */
  workflow: W;
  /** 5 fields (`m h dom mon dow`), or 6 with seconds first; `@hourly`, `@daily`, `@weekly`… too. */
  cron: string;
  /** The input of every run, validated now with the workflow's schema. */
  input: WorkflowRawInput<W>;
  /** The schedule's tenant (a UUID). Default: the default tenant. */
  tenantId?: string;
  /** Unique per tenant; creating a schedule of an existing name updates it. Default: the workflow's name. */
  name?: string;
  /** IANA time zone the cron is read in. Default `UTC`. */
  timezone?: string;
  /** Slots missed while nothing ticked: `all` (each, oldest first), `latest` (the most recent), `none`. Default `latest`. */
  catchUp?: CatchUpPolicy;
  /** Under `all`, at most this many missed slots fire (the most recent ones). Default 100, at most 1000. */
  maxCatchUp?: number;
}

/** What `schedules.create`, `get` and `list` return. */
export interface ScheduleInfo {
  id: string;
  name: string;
  tenantId: string;
  workflow: string;
  version: string;
  cron: string;
  timezone: string;
  input: unknown;
  catchUp: CatchUpPolicy;
  maxCatchUp: number;
  paused: boolean;
  /** The next slot to fire (null while paused); a past time means it is due and a tick will fire it. */
  nextAt: Date | null;
  /** The last slot that fired, or null. */
  lastSlotAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

const OPTION_KEYS = new Set(['workflow', 'cron', 'input', 'tenantId', 'name', 'timezone', 'catchUp', 'maxCatchUp']);
const MAX_CATCH_UP = 1000;

export class Schedules {
  readonly #core: EngineCore;
  readonly #actorId: string;

  constructor(core: EngineCore, actorId: string) {
    this.#core = core;
    this.#actorId = actorId;
  }

  /**
   * Creates the schedule, or updates the tenant's schedule of that name. An update keeps the
   * slot the schedule waits for unless the cron or time zone changed (then the new timing starts
   * from now), and keeps a paused schedule paused. Bad options are a ValidationError naming the
   * field; nothing is written.
   */
  async create<W extends Workflow<any, any, any>>(options: ScheduleOptions<W>): Promise<ScheduleInfo> {
    if (typeof options !== 'object' || options === null) throw new ValidationError('options must be an object', { path: ['options'] });
    for (const key of Object.keys(options)) {
      if (!OPTION_KEYS.has(key)) throw new ValidationError(`unknown option; expected one of ${[...OPTION_KEYS].join(', ')}`, { path: [key] });
    }
    // The same validation and stored form as client.start: workflow, tenant, input (schema and JSON).
    const template = newTaskFor(options.workflow, options.input, { tenantId: options.tenantId }, this.#actorId);
    const name = idempotencyKeyOf(options.name ?? template.workflowName, 'name')!;
    const timing = parseTiming(options.cron, options.timezone ?? 'UTC');
    const catchUp = options.catchUp ?? 'latest';
    if (!(CATCH_UP_POLICIES as readonly unknown[]).includes(catchUp)) {
      throw new ValidationError(`must be one of ${CATCH_UP_POLICIES.join(', ')}`, { path: ['catchUp'] });
    }
    const maxCatchUp = options.maxCatchUp ?? 100;
    if (!Number.isInteger(maxCatchUp) || maxCatchUp < 1 || maxCatchUp > MAX_CATCH_UP) {
      throw new ValidationError(`must be an integer from 1 to ${MAX_CATCH_UP}`, { path: ['maxCatchUp'] });
    }
    const now = await databaseNow(this.#core.pool);
    const nextAt = timing.next(now);
    if (!nextAt) throw new ValidationError(`"${timing.cron}" never matches a future date`, { path: ['cron'] });
    const row = await upsertSchedule(this.#core.pool, {
      tenantId: template.tenantId,
      id: uuidv7(),
      name,
      workflowName: template.workflowName,
      workflowVersion: template.workflowVersion,
      cron: timing.cron,
      timezone: timing.timezone,
      input: template.input,
      inputHash: template.inputHash,
      catchUp,
      maxCatchUp,
      nextAt,
    });
    return scheduleInfo(row);
  }

  /** The tenant's schedule of that name, or NotFoundError (also for another tenant's). */
  async get(name: string, options: { tenantId?: string } = {}): Promise<ScheduleInfo> {
    const tenantId = tenantOf(options.tenantId);
    const row = await getSchedule(this.#core.pool, tenantId, nameOf(name));
    if (!row) throw notFound(name);
    return scheduleInfo(row);
  }

  /** The tenant's schedules, by name. */
  async list(options: { tenantId?: string } = {}): Promise<ScheduleInfo[]> {
    const rows = await listSchedules(this.#core.pool, tenantOf(options.tenantId));
    return rows.map(scheduleInfo);
  }

  /** Stops firing until `resume`; slots that pass meanwhile never fire. */
  async pause(name: string, options: { tenantId?: string } = {}): Promise<ScheduleInfo> {
    const row = await pauseSchedule(this.#core.pool, tenantOf(options.tenantId), nameOf(name));
    if (!row) throw notFound(name);
    return scheduleInfo(row);
  }

  /** Fires again from the first slot after now. Resuming an active schedule changes nothing. */
  async resume(name: string, options: { tenantId?: string } = {}): Promise<ScheduleInfo> {
    const tenantId = tenantOf(options.tenantId);
    const key = nameOf(name);
    for (let attempt = 1; ; attempt += 1) {
      const row = await getSchedule(this.#core.pool, tenantId, key);
      if (!row) throw notFound(name);
      if (row.nextAt !== null) return scheduleInfo(row);
      const timing = parseTiming(row.cron, row.timezone);
      const nextAt = timing.next(await databaseNow(this.#core.pool));
      if (!nextAt) throw new ValidationError(`"${row.cron}" never matches a future date`, { path: ['cron'] });
      const resumed = await resumeSchedule(this.#core.pool, { tenantId, name: key, cron: row.cron, timezone: row.timezone, nextAt });
      if (resumed) return scheduleInfo(resumed);
      // Changed between the read and the update (resumed, re-timed or deleted): look again.
      if (attempt === 10) throw new RatchetError(`schedule "${name}" keeps changing while it is resumed; try again`, { code: 'SCHEDULE_BUSY' });
    }
  }

  /** Deletes the schedule; runs it started are not touched. NotFoundError when there is none. */
  async delete(name: string, options: { tenantId?: string } = {}): Promise<void> {
    if (!(await deleteSchedule(this.#core.pool, tenantOf(options.tenantId), nameOf(name)))) throw notFound(name);
  }

  /**
   * Fires every due slot of every tenant now, as a worker's scheduler does — for tests, and for
   * apps that run no worker (call it from your own timer). Safe to call from many processes at once.
   */
  tick(): Promise<TickResult> {
    return tick(this.#core, this.#actorId);
  }
}

function nameOf(name: unknown): string {
  return idempotencyKeyOf(name as string, 'name')!;
}

function notFound(name: string): NotFoundError {
  return new NotFoundError(`no schedule "${name}"`, { resource: 'schedule', id: name });
}

function scheduleInfo(row: ScheduleRecord): ScheduleInfo {
  return {
    id: row.id,
    name: row.name,
    tenantId: row.tenantId,
    workflow: row.workflowName,
    version: row.workflowVersion,
    cron: row.cron,
    timezone: row.timezone,
    input: row.input,
    catchUp: row.catchUp,
    maxCatchUp: row.maxCatchUp,
    paused: row.nextAt === null,
    nextAt: row.nextAt,
    lastSlotAt: row.lastSlotAt,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
  };
}
