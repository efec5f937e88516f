/**
 * Cron schedules: each slot fires exactly once however many engines and processes tick, missed
 * slots follow the declared catch-up policy, slots follow the time zone across DST, and bad
 * definitions change nothing. Time is `ratchet.now()`, moved with shiftClock — never waited for.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { NotFoundError, ValidationError, isRatchetError, workflow } from '@ratchet/sdk';
import { scheduledSlot, type Engine, type TickResult } from '@ratchet/engine';
import { shiftClock } from '@ratchet/engine/testing';
import { engineOn, eventually, events, testDatabase } from '../helpers/engine.js';
import type { TestDatabase } from '../helpers/database.js';
import { spawnWorker, type WorkerProcess } from '../helpers/processes.js';

let db: TestDatabase;
let engine: Engine;

const HOUR = 3_600_000;
const TENANT_A = '0190a3b0-0000-7000-8000-00000000000a';
const TENANT_B = '0190a3b0-0000-7000-8000-00000000000b';

const report = workflow(
  { name: 'schedule-report', version: '1', input: z.object({ team: z.string() }) },
  async (ctx, { team }) => ctx.step('compose', () => `report for ${team}`),
);
/** Registered by no engine or process: its runs are started and wait for a worker. */
const unserved = workflow({ name: 'schedule-unserved', version: '3', input: z.object({ n: z.number() }), timeout: '1h' }, async () => 'never');

beforeAll(async () => {
  db = await testDatabase();
  engine = await engineOn(db, { workflows: [report] });
});

afterEach(async () => {
  // Every tick fires every tenant's due schedules: leave none behind for the next test.
  await db.pool.query(`DELETE FROM ratchet.schedules`);
});

async function dbNow(): Promise<Date> {
  const { rows } = await db.pool.query(`SELECT ratchet.now() AS now`);
  return rows[0].now;
}

/** Moves ratchet.now() forward to `target` (never back). */
async function clockTo(target: Date): Promise<void> {
  const ms = target.getTime() - (await dbNow()).getTime();
  if (ms > 0) await shiftClock(db.pool, ms);
}

async function runsOf(scheduleId: string): Promise<{ id: string; key: string; state: string; input: unknown; tenant: string; deadline: Date | null }[]> {
  const { rows } = await db.pool.query(
    `SELECT id, idempotency_key AS key, state, input, tenant_id AS tenant, deadline_at AS deadline FROM ratchet.tasks
      WHERE idempotency_key LIKE $1 ORDER BY idempotency_key`,
    [`schedule:${scheduleId}:%`],
  );
  return rows;
}

const slotsOf = (runs: { key: string }[]) => runs.map((r) => r.key.slice('schedule:'.length + 37));
const iso = (ms: number) => new Date(ms).toISOString();
const started = (result: TickResult, scheduleId: string) => result.runs.filter((r) => r.scheduleId === scheduleId && r.started);

async function count(table: 'schedules' | 'tasks'): Promise<number> {
  const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ratchet.${table}`);
  return rows[0].n;
}

describe('create and fire', () => {
  it('creates a schedule waiting for its first slot and fires it once when due, as a pending run with the slot recorded', async () => {
    const before = await dbNow();
    const info = await engine.schedules.create({ workflow: report, cron: '0 * * * *', input: { team: 'ops' } });
    expect(info).toMatchObject({ name: 'schedule-report', workflow: 'schedule-report', version: '1', cron: '0 * * * *', timezone: 'UTC', catchUp: 'latest', maxCatchUp: 100, paused: false, lastSlotAt: null, input: { team: 'ops' } });
    const hour = info.nextAt!.getTime();
    expect(hour % HOUR).toBe(0);
    expect(hour).toBeGreaterThan(before.getTime());
    expect(hour - before.getTime()).toBeLessThanOrEqual(HOUR);

    expect((await engine.schedules.tick()).runs).toEqual([]); // not due yet
    await clockTo(new Date(hour + 1_000));
    const first = await engine.schedules.tick();
    expect(first.runs).toEqual([{ scheduleId: info.id, schedule: 'schedule-report', tenantId: info.tenantId, slot: new Date(hour), runId: expect.any(String), started: true }]);
    expect((await engine.schedules.tick()).runs).toEqual([]); // fired: the next slot is an hour on

    const runs = await runsOf(info.id);
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({ id: first.runs[0]!.runId, key: `schedule:${info.id}:${iso(hour)}`, state: 'pending', input: { team: 'ops' } });
    const { rows } = await db.pool.query(`SELECT event_type, payload, actor_id FROM ratchet.events WHERE task_id = $1`, [runs[0]!.id]);
    expect(rows).toEqual([{ event_type: 'started', payload: expect.objectContaining({ schedule: 'schedule-report', scheduleId: info.id, slot: iso(hour) }), actor_id: expect.stringMatching(/^engine:/) }]);
    const run = await engine.client.get(runs[0]!.id);
    expect(scheduledSlot(run)).toEqual({ scheduleId: info.id, slot: new Date(hour) });
    expect(scheduledSlot({ idempotencyKey: 'order-7' })).toBeNull();

    const after = await engine.schedules.get('schedule-report');
    expect(after.lastSlotAt).toEqual(new Date(hour));
    expect(after.nextAt).toEqual(new Date(hour + HOUR));
  });

  it('starts the runs of a workflow no process serves; they wait, pending, for a worker', async () => {
    const info = await engine.schedules.create({ workflow: unserved, cron: '*/15 * * * *', input: { n: 1 } });
    await clockTo(new Date(info.nextAt!.getTime() + 1_000));
    await engine.schedules.tick();
    const runs = await runsOf(info.id);
    expect(runs).toMatchObject([{ state: 'pending', input: { n: 1 } }]);
    // This engine does not have the workflow: it cannot know its timeout, so the run has no deadline.
    expect(runs[0]!.deadline).toBeNull();
    const { rows } = await db.pool.query(`SELECT workflow_name, workflow_version FROM ratchet.tasks WHERE id = $1`, [runs[0]!.id]);
    expect(rows[0]).toEqual({ workflow_name: 'schedule-unserved', workflow_version: '3' });
  });
});

describe('exactly once', () => {
  it('fires each slot once with four engines on separate pools ticking concurrently, and no ticker ever recomputes a fired slot', async () => {
    const engines = [engine, ...(await Promise.all([1, 2, 3].map(() => engineOn(db, { workflows: [report] }))))];
    const schedules = await Promise.all(
      [0, 1, 2, 3, 4].map((i) => engine.schedules.create({ workflow: report, name: `race-${i}`, cron: '0 * * * *', catchUp: 'all', input: { team: `t${i}` } })),
    );
    const first = schedules[0]!.nextAt!.getTime();
    const results: TickResult[] = [];
    const rounds = 4;
    for (let round = 0; round < rounds; round += 1) {
      await clockTo(new Date(first + round * HOUR + 60_000));
      // Three concurrent ticks per engine, twelve in all, racing for the same five due rows.
      results.push(...(await Promise.all(engines.flatMap((e) => [e.schedules.tick(), e.schedules.tick(), e.schedules.tick()]))));
    }
    for (const s of schedules) {
      const runs = await runsOf(s.id);
      expect(slotsOf(runs)).toEqual([0, 1, 2, 3].map((i) => iso(first + i * HOUR)));
      // The row lock alone kept the tickers apart: nobody even attempted a slot already started.
      expect(results.flatMap((r) => r.runs).filter((r) => r.scheduleId === s.id)).toHaveLength(rounds);
      expect(results.flatMap((r) => r.runs).every((r) => r.started)).toBe(true);
    }
    const { rows } = await db.pool.query(
      `SELECT count(*)::int AS n FROM ratchet.events e JOIN ratchet.tasks t ON t.tenant_id = e.tenant_id AND t.id = e.task_id
        WHERE t.idempotency_key LIKE 'schedule:%' AND t.workflow_name = 'schedule-report' AND e.event_type = 'started'
          AND t.idempotency_key LIKE ANY ($1)`,
      [schedules.map((s) => `schedule:${s.id}:%`)],
    );
    expect(rows[0].n).toBe(schedules.length * rounds);
  });

  it('fires each slot once with three worker processes ticking at the same time', async () => {
    const workers: WorkerProcess[] = [0, 1, 2].map(() => spawnWorker({ DATABASE_URL: db.url }));
    try {
      await eventually(async () => workers.every((w) => w.output().includes('ready')), 60_000);
      const schedules = await Promise.all(
        [0, 1, 2].map((i) => engine.schedules.create({ workflow: report, name: `proc-${i}`, cron: '0 * * * *', catchUp: 'all', input: { team: `p${i}` } })),
      );
      const first = schedules[0]!.nextAt!.getTime();
      for (let round = 0; round < 3; round += 1) {
        await clockTo(new Date(first + round * HOUR + 60_000));
        // The processes' schedulers (pollMs 200) find the slots due and race for them.
        await eventually(async () => {
          const all = await Promise.all(schedules.map((s) => runsOf(s.id)));
          return all.every((runs) => runs.length === round + 1);
        }, 20_000);
      }
      await new Promise((r) => setTimeout(r, 800)); // several more polls of every process: nothing more may appear
      const actors = new Set<string>();
      for (const s of schedules) {
        const runs = await runsOf(s.id);
        expect(slotsOf(runs)).toEqual([0, 1, 2].map((i) => iso(first + i * HOUR)));
        for (const run of runs) actors.add(String((await events(db, run.id))[0]!.actor));
      }
      expect([...actors].every((a) => /^worker:/.test(a))).toBe(true);
      const ticked = await engine.schedules.tick();
      expect(ticked.runs).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => w.kill('SIGTERM')));
    }
  });

  it('a slot computed again (next_at rewound, as after a crash between starting runs and moving on) starts nothing new', async () => {
    const info = await engine.schedules.create({ workflow: report, name: 'rewound', cron: '0 * * * *', input: { team: 'r' } });
    const slot = info.nextAt!;
    await clockTo(new Date(slot.getTime() + 1_000));
    const first = await engine.schedules.tick();
    expect(started(first, info.id)).toHaveLength(1);
    await db.pool.query(`UPDATE ratchet.schedules SET next_at = last_slot_at WHERE id = $1`, [info.id]);
    const again = await engine.schedules.tick();
    expect(again.runs).toEqual([{ ...first.runs[0], started: false }]);
    expect(await runsOf(info.id)).toHaveLength(1);
    expect((await engine.schedules.get('rewound')).nextAt).toEqual(new Date(slot.getTime() + HOUR));
  });

  it('a tick whose connection dies mid-transaction writes nothing; the next tick fires every slot once', async () => {
    const ok = await engine.schedules.create({ workflow: report, name: 'survivor', cron: '0 * * * *', input: { team: 'ok' } });
    const slow = await engine.schedules.create({ workflow: report, name: 'victim', cron: '0 * * * *', input: { team: 'slow' } });
    // Real fault injection in the real database: inserting the 'slow' run stalls, so the tick's
    // transaction is open (with the other schedule's run possibly inserted) when its backend is killed.
    await db.pool.query(`
      CREATE FUNCTION test_stall() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.input->>'team' = 'slow' THEN PERFORM pg_sleep(30); END IF; RETURN NEW; END $$;
      CREATE TRIGGER stall BEFORE INSERT ON ratchet.tasks FOR EACH ROW EXECUTE FUNCTION test_stall();`);
    try {
      await clockTo(new Date(ok.nextAt!.getTime() + 1_000));
      const ticking = engine.schedules.tick().then(
        () => 'committed',
        (error: unknown) => error,
      );
      const pid = await eventually(async () => {
        const { rows } = await db.pool.query(`SELECT pid FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()`);
        return rows[0]?.pid as number | undefined;
      });
      await db.pool.query(`SELECT pg_terminate_backend($1)`, [pid]);
      expect(await ticking).toBeInstanceOf(Error);
      expect(await runsOf(ok.id)).toEqual([]);
      expect(await runsOf(slow.id)).toEqual([]);
      expect((await engine.schedules.get('survivor')).nextAt).toEqual(ok.nextAt);
    } finally {
      await db.pool.query(`DROP TRIGGER stall ON ratchet.tasks; DROP FUNCTION test_stall()`);
    }
    await engine.schedules.tick();
    expect(slotsOf(await runsOf(ok.id))).toEqual([iso(ok.nextAt!.getTime())]);
    expect(slotsOf(await runsOf(slow.id))).toEqual([iso(slow.nextAt!.getTime())]);
  });
});

describe('catch-up after downtime', () => {
  it('all fires each missed slot oldest first; latest only the most recent; none skips to the next slot', async () => {
    const make = (name: string, catchUp: 'all' | 'latest' | 'none', maxCatchUp?: number) =>
      engine.schedules.create({ workflow: report, name, cron: '0 * * * *', input: { team: name }, catchUp, ...(maxCatchUp ? { maxCatchUp } : {}) });
    const all = await make('all', 'all');
    const capped = await make('capped', 'all', 3);
    const latest = await make('latest', 'latest');
    const none = await make('none', 'none');
    const h1 = all.nextAt!.getTime();
    // Down for hours: slots h1 … h1+4h passed unfired.
    await clockTo(new Date(h1 + 4 * HOUR + 30 * 60_000));
    const result = await engine.schedules.tick();
    const missed = [0, 1, 2, 3, 4].map((i) => iso(h1 + i * HOUR));
    expect(started(result, all.id).map((r) => r.slot.toISOString())).toEqual(missed); // oldest first
    expect(slotsOf(await runsOf(all.id))).toEqual(missed);
    expect(slotsOf(await runsOf(capped.id))).toEqual(missed.slice(2)); // the most recent 3
    expect(slotsOf(await runsOf(latest.id))).toEqual([missed[4]]);
    expect(await runsOf(none.id)).toEqual([]);
    for (const name of ['all', 'capped', 'latest', 'none']) {
      const info = await engine.schedules.get(name);
      expect(info.nextAt).toEqual(new Date(h1 + 5 * HOUR));
      expect(info.lastSlotAt).toEqual(name === 'none' ? null : new Date(h1 + 4 * HOUR));
    }
    // Back up: the next slot is on time (within ON_TIME_TOLERANCE_MS), so even `none` fires it.
    await clockTo(new Date(h1 + 5 * HOUR + 5_000));
    await engine.schedules.tick();
    expect(slotsOf(await runsOf(none.id))).toEqual([iso(h1 + 5 * HOUR)]);
    expect(slotsOf(await runsOf(latest.id))).toEqual([missed[4], iso(h1 + 5 * HOUR)]);
  });

  it('a backlog longer than one transaction holds fires in rounds, the most recent maxCatchUp slots each exactly once', async () => {
    const info = await engine.schedules.create({ workflow: report, name: 'minutely', cron: '* * * * *', input: { team: 'm' }, catchUp: 'all', maxCatchUp: 250 });
    const m1 = info.nextAt!.getTime();
    await clockTo(new Date(m1 + 299 * 60_000 + 30_000)); // 300 slots missed
    const result = await engine.schedules.tick();
    const expected = Array.from({ length: 250 }, (_, i) => iso(m1 + (50 + i) * 60_000));
    expect(started(result, info.id).map((r) => r.slot.toISOString())).toEqual(expected);
    expect(slotsOf(await runsOf(info.id))).toEqual(expected);
    expect((await engine.schedules.get('minutely')).nextAt).toEqual(new Date(m1 + 300 * 60_000));
  });
});

describe('time zones', () => {
  /** The last Sunday of a month (EU DST changes on the last Sundays of March and October). */
  const lastSunday = (year: number, month: number) => {
    const last = new Date(Date.UTC(year, month + 1, 0));
    return new Date(Date.UTC(year, month, last.getUTCDate() - last.getUTCDay()));
  };
  const berlinHour = (d: Date) => new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit' }).format(d);

  it('a daily 09:00 Europe/Berlin slot stays at 09:00 local across both DST changes', async () => {
    const year = (await dbNow()).getUTCFullYear() + 1;
    const spring = lastSunday(year, 2);
    await clockTo(new Date(spring.getTime() - 2 * 86_400_000 + 12 * HOUR)); // Friday noon before the change
    const info = await engine.schedules.create({ workflow: report, name: 'berlin', cron: '0 9 * * *', timezone: 'Europe/Berlin', input: { team: 'b' }, catchUp: 'all' });
    await clockTo(new Date(spring.getTime() + 86_400_000 + 12 * HOUR)); // Monday noon
    await engine.schedules.tick();
    const day = (offset: number, utcHour: number) => new Date(spring.getTime() + offset * 86_400_000 + utcHour * HOUR).toISOString();
    // Saturday 09:00 CET = 08:00 UTC; Sunday and Monday 09:00 CEST = 07:00 UTC.
    expect(slotsOf(await runsOf(info.id))).toEqual([day(-1, 8), day(0, 7), day(1, 7)]);

    const autumn = lastSunday(year, 9);
    await clockTo(new Date(autumn.getTime() - 86_400_000 + 12 * HOUR)); // `all` catches up the summer: 100 at most
    await engine.schedules.tick();
    await clockTo(new Date(autumn.getTime() + 86_400_000 + 12 * HOUR));
    await engine.schedules.tick();
    const runs = await runsOf(info.id);
    const lastThree = slotsOf(runs).slice(-3);
    expect(lastThree).toEqual([
      new Date(autumn.getTime() - 86_400_000 + 7 * HOUR).toISOString(), // Saturday, CEST
      new Date(autumn.getTime() + 8 * HOUR).toISOString(), // Sunday, CET again
      new Date(autumn.getTime() + 86_400_000 + 8 * HOUR).toISOString(),
    ]);
    expect(slotsOf(runs).every((slot) => berlinHour(new Date(slot)) === '09:00')).toBe(true);
  });

  it('a local time DST skips fires once, at the first valid instant after it', async () => {
    const year = (await dbNow()).getUTCFullYear() + 1;
    const spring = lastSunday(year, 2);
    await clockTo(new Date(spring.getTime() - 86_400_000 + 12 * HOUR));
    const info = await engine.schedules.create({ workflow: report, name: 'gap', cron: '30 2 * * *', timezone: 'Europe/Berlin', input: { team: 'g' }, catchUp: 'all' });
    expect(info.nextAt).toEqual(new Date(spring.getTime() + 1 * HOUR)); // 02:30 does not exist that night: 03:00 CEST
    await clockTo(new Date(spring.getTime() + 86_400_000 + 12 * HOUR));
    await engine.schedules.tick();
    expect(slotsOf(await runsOf(info.id))).toEqual([iso(spring.getTime() + HOUR), iso(spring.getTime() + 86_400_000 + 30 * 60_000)]);
  });
});

describe('managing schedules', () => {
  it('creating a name again updates that schedule: same id, new input, next_at kept unless the timing changed', async () => {
    const first = await engine.schedules.create({ workflow: report, name: 'upsert', cron: '0 * * * *', input: { team: 'a' } });
    const second = await engine.schedules.create({ workflow: report, name: 'upsert', cron: '0 * * * *', input: { team: 'b' }, catchUp: 'all' });
    expect(second).toMatchObject({ id: first.id, input: { team: 'b' }, catchUp: 'all', nextAt: first.nextAt, createdAt: first.createdAt });
    expect((await engine.schedules.list()).map((s) => s.name)).toEqual(['upsert']);

    // An app that declares its schedules at boot, after downtime: the missed slots still fire.
    await clockTo(new Date(first.nextAt!.getTime() + HOUR + 60_000));
    const reboot = await engine.schedules.create({ workflow: report, name: 'upsert', cron: '0 * * * *', input: { team: 'c' }, catchUp: 'all' });
    expect(reboot.nextAt).toEqual(first.nextAt);
    await engine.schedules.tick();
    const runs = await runsOf(first.id);
    expect(slotsOf(runs)).toEqual([iso(first.nextAt!.getTime()), iso(first.nextAt!.getTime() + HOUR)]);
    expect(runs.map((r) => r.input)).toEqual([{ team: 'c' }, { team: 'c' }]);

    // A new cron starts its timing from now.
    const now = await dbNow();
    const retimed = await engine.schedules.create({ workflow: report, name: 'upsert', cron: '30 * * * *', input: { team: 'c' } });
    expect(retimed.id).toBe(first.id);
    expect(retimed.nextAt!.getTime()).toBeGreaterThan(now.getTime());
    expect(retimed.nextAt!.getUTCMinutes()).toBe(30);
    expect(retimed.nextAt!.getTime() - now.getTime()).toBeLessThanOrEqual(HOUR);

    // A paused schedule stays paused when declared again.
    await engine.schedules.pause('upsert');
    const redeclared = await engine.schedules.create({ workflow: report, name: 'upsert', cron: '15 * * * *', input: { team: 'd' } });
    expect(redeclared).toMatchObject({ paused: true, nextAt: null, cron: '15 * * * *', input: { team: 'd' } });
  });

  it('pause stops firing (slots passing meanwhile never fire); resume fires from the next slot after now', async () => {
    const info = await engine.schedules.create({ workflow: report, name: 'pausable', cron: '0 * * * *', input: { team: 'p' }, catchUp: 'all' });
    const paused = await engine.schedules.pause('pausable');
    expect(paused).toMatchObject({ paused: true, nextAt: null });
    expect(await engine.schedules.pause('pausable')).toMatchObject({ paused: true });
    await clockTo(new Date(info.nextAt!.getTime() + 2 * HOUR + 60_000));
    expect(started(await engine.schedules.tick(), info.id)).toEqual([]);
    const resumed = await engine.schedules.resume('pausable');
    const next = info.nextAt!.getTime() + 3 * HOUR;
    expect(resumed).toMatchObject({ paused: false, nextAt: new Date(next) });
    expect(await engine.schedules.resume('pausable')).toMatchObject({ nextAt: new Date(next) }); // already active: unchanged
    expect(started(await engine.schedules.tick(), info.id)).toEqual([]);
    await clockTo(new Date(next + 1_000));
    await engine.schedules.tick();
    expect(slotsOf(await runsOf(info.id))).toEqual([iso(next)]);

    await engine.schedules.delete('pausable');
    await expect(engine.schedules.get('pausable')).rejects.toBeInstanceOf(NotFoundError);
    await expect(engine.schedules.delete('pausable')).rejects.toBeInstanceOf(NotFoundError);
    await expect(engine.schedules.resume('pausable')).rejects.toBeInstanceOf(NotFoundError);
    expect(await runsOf(info.id)).toHaveLength(1); // its runs stay
  });

  it('is tenant-scoped: another tenant sees "not found" and may use the same name for its own schedule', async () => {
    const a = await engine.schedules.create({ workflow: report, name: 'nightly', cron: '0 * * * *', input: { team: 'a' }, tenantId: TENANT_A });
    expect(a.tenantId).toBe(TENANT_A);
    for (const call of [
      () => engine.schedules.get('nightly', { tenantId: TENANT_B }),
      () => engine.schedules.get('nightly'),
      () => engine.schedules.pause('nightly', { tenantId: TENANT_B }),
      () => engine.schedules.resume('nightly', { tenantId: TENANT_B }),
      () => engine.schedules.delete('nightly', { tenantId: TENANT_B }),
    ]) {
      const error = await call().catch((e: unknown) => e);
      expect(isRatchetError(error, 'NOT_FOUND')).toBe(true);
    }
    expect(await engine.schedules.list({ tenantId: TENANT_B })).toEqual([]);
    expect((await engine.schedules.get('nightly', { tenantId: TENANT_A })).paused).toBe(false);

    const b = await engine.schedules.create({ workflow: report, name: 'nightly', cron: '0 * * * *', input: { team: 'b' }, tenantId: TENANT_B });
    expect(b.id).not.toBe(a.id);
    expect((await engine.schedules.list({ tenantId: TENANT_A })).map((s) => s.input)).toEqual([{ team: 'a' }]);
    await clockTo(new Date(a.nextAt!.getTime() + 1_000));
    await engine.schedules.tick();
    expect((await runsOf(a.id)).map((r) => [r.tenant, r.input])).toEqual([[TENANT_A, { team: 'a' }]]);
    expect((await runsOf(b.id)).map((r) => [r.tenant, r.input])).toEqual([[TENANT_B, { team: 'b' }]]);
  });

  it('refuses bad definitions with a ValidationError naming the field, writing nothing', async () => {
    const existing = await engine.schedules.create({ workflow: report, name: 'keep', cron: '0 * * * *', input: { team: 'k' } });
    const good = { workflow: report, name: 'keep', cron: '5 * * * *', input: { team: 'x' } };
    const cases: [Record<string, unknown>, (string | number)[]][] = [
      [{ cron: 'every day' }, ['cron']],
      [{ cron: '61 * * * *' }, ['cron']],
      [{ cron: '* * *' }, ['cron']],
      [{ cron: '0 0 31 2 *' }, ['cron']], // never matches
      [{ cron: 5 }, ['cron']],
      [{ timezone: 'Mars/Olympus' }, ['timezone']],
      [{ timezone: '' }, ['timezone']],
      [{ input: { team: 5 } }, ['input', 'team']],
      [{ input: undefined }, ['input']],
      [{ catchUp: 'some' }, ['catchUp']],
      [{ maxCatchUp: 0 }, ['maxCatchUp']],
      [{ maxCatchUp: 2.5 }, ['maxCatchUp']],
      [{ maxCatchUp: 5000 }, ['maxCatchUp']],
      [{ tenantId: 'tenant-a' }, ['tenantId']],
      [{ name: '' }, ['name']],
      [{ workflow: { name: 'fake' } }, ['workflow']],
      [{ catchup: 'all' }, ['catchup']],
    ];
    const schedulesBefore = await count('schedules');
    const tasksBefore = await count('tasks');
    for (const [change, path] of cases) {
      const error = await engine.schedules.create({ ...good, ...change } as never).catch((e: unknown) => e);
      expect(error, JSON.stringify(change)).toBeInstanceOf(ValidationError);
      expect((error as ValidationError).path, JSON.stringify(change)).toEqual(path);
    }
    expect(await count('schedules')).toBe(schedulesBefore);
    expect(await count('tasks')).toBe(tasksBefore);
    expect(await engine.schedules.get('keep')).toEqual(existing);
  });
});

describe('who ticks', () => {
  it('a started worker ticks: the slot fires and the worker runs it; a failing tick is reported through onError and retried', async () => {
    const errors: unknown[] = [];
    const own = await engineOn(db, { workflows: [report], onError: (e) => errors.push(e) });
    const info = await engine.schedules.create({ workflow: report, name: 'worked', cron: '0 * * * *', input: { team: 'w' } });
    const worker = own.worker({ pollMs: 100 });
    await worker.start();
    try {
      await clockTo(new Date(info.nextAt!.getTime() + 1_000));
      const run = await eventually(async () => (await runsOf(info.id)).find((r) => r.state === 'completed'));
      expect((await own.client.get(run.id)).output).toBe('report for w');

      // The database refuses the next slot's run: the scheduler reports, backs off, and fires it once allowed.
      await db.pool.query(`
        CREATE FUNCTION test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.input->>'team' = 'w' THEN RAISE EXCEPTION 'refused by test'; END IF; RETURN NEW; END $$;
        CREATE TRIGGER refuse BEFORE INSERT ON ratchet.tasks FOR EACH ROW EXECUTE FUNCTION test_refuse();`);
      try {
        await clockTo(new Date(info.nextAt!.getTime() + HOUR + 1_000));
        await eventually(async () => errors.some((e) => String((e as Error).message).includes('refused by test')));
        expect(await runsOf(info.id)).toHaveLength(1);
      } finally {
        await db.pool.query(`DROP TRIGGER refuse ON ratchet.tasks; DROP FUNCTION test_refuse()`);
      }
      await eventually(async () => (await runsOf(info.id)).length === 2);
      expect(slotsOf(await runsOf(info.id))).toEqual([iso(info.nextAt!.getTime()), iso(info.nextAt!.getTime() + HOUR)]);
    } finally {
      await worker.stop();
    }
  });
});
