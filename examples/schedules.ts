/**
 * A cron schedule on the default embedded PostgreSQL: a heartbeat every 2 seconds (six cron
 * fields: seconds first), executed by a worker, which also ticks the schedule. Each slot starts
 * exactly one run, whose idempotency key names the slot; the workflow reads its own slot in a step.
 * Any number of workers may tick the same schedules; the row lock and the slot's key keep each
 * slot to one run (docs/schedules.md).
 *
 *   cd /work/main && pnpm exec tsx examples/schedules.ts
 */
import { z } from 'zod';
import { workflow } from '@ratchet/sdk';
import { createEngine, scheduledSlot } from '@ratchet/engine';

const heartbeat = workflow(
  { name: 'heartbeat', version: '1', input: z.object({ service: z.string() }) },
  async (ctx, { service }) => {
    // The slot this run was started for, recorded once and replayed from the record.
    const slot = await ctx.step('slot', async () => {
      const run = await engine.client.get(ctx.runId, { tenantId: ctx.tenantId });
      return scheduledSlot(run)?.slot.toISOString() ?? null;
    });
    return { service, slot, ranAt: ctx.now().toISOString() };
  },
);

const engine = await createEngine({ workflows: [heartbeat] });
try {
  await engine.migrate();

  const schedule = await engine.schedules.create({
    workflow: heartbeat,
    name: 'heartbeat-example',
    cron: '*/2 * * * * *',
    timezone: 'Europe/Berlin',
    input: { service: 'billing' },
    catchUp: 'none', // a heartbeat that is late is worthless: skip slots missed while this was not running
  });
  console.log(`schedule ${schedule.name} (${schedule.id}): next slot ${schedule.nextAt?.toISOString()}`);

  const worker = engine.worker({ pollMs: 1_000 });
  await worker.start();
  const since = schedule.nextAt!.getTime();
  const seen = new Set<string>();
  while (seen.size < 3) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const runs = await engine.client.list({ workflow: 'heartbeat', state: 'completed', limit: 20 });
    for (const run of runs.reverse()) {
      const slot = scheduledSlot(run);
      if (!slot || slot.scheduleId !== schedule.id || slot.slot.getTime() < since || seen.has(run.runId)) continue;
      seen.add(run.runId);
      console.log(`slot ${slot.slot.toISOString()} → run ${run.runId}:`, run.output);
    }
  }

  const paused = await engine.schedules.pause('heartbeat-example');
  console.log(`paused: ${paused.paused}, last slot fired ${paused.lastSlotAt?.toISOString()}`);
  await worker.stop();
  await engine.schedules.delete('heartbeat-example'); // its runs stay
} finally {
  await engine.close(); // also stops the embedded server if this process started it
}
