/**
 * A saga with a human in the loop: book a flight, then a hotel, then wait for the traveller to
 * confirm. Two trips run on one worker:
 *
 *   - the first is confirmed (`client.signal`): it completes with both bookings;
 *   - the second is cancelled while the hotel booking is in flight (`client.cancel`): the
 *     booking's AbortSignal fires, the workflow sees CancelledError, and its `finally` undoes the
 *     flight it had booked — durable compensation steps — before the run ends `cancelled`.
 *
 * The "providers" are an in-memory ledger, printed at the end: every booking of the cancelled
 * trip is undone.
 *
 *   cd /work/main && pnpm exec tsx examples/saga.ts
 */
import { z } from 'zod';
import { CancelledError, workflow } from '@ratchet/sdk';
import { createEngine } from '@ratchet/engine';

const ledger = new Map<string, 'booked' | 'undone'>();
const slowHotel = new Set<string>();

const book = (what: string) => async ({ idempotencyKey, input, signal }: { idempotencyKey: string; input: { trip: string }; signal: AbortSignal }) => {
  // The provider honours the key: a retried booking is the same booking.
  const delay = slowHotel.has(input.trip) && what === 'hotel' ? 60_000 : 50;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, delay);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)));
  });
  ledger.set(idempotencyKey, 'booked');
  return `${what}:${idempotencyKey.slice(-12)}`;
};

const trip = workflow(
  {
    name: 'trip',
    version: '1',
    input: z.object({ trip: z.string() }),
    signals: { confirm: z.object({ ok: z.boolean() }) },
  },
  async (ctx, { trip }) => {
    const done: { step: string; ref: string }[] = [];
    let finished = false;
    try {
      done.push({ step: 'flight', ref: await ctx.effect('flight', { input: { trip }, execute: book('flight') }) });
      done.push({ step: 'hotel', ref: await ctx.effect('hotel', { input: { trip }, execute: book('hotel') }) });
      const { ok } = await ctx.waitFor<{ ok: boolean }>('confirm', { timeout: '1d' });
      finished = ok;
      return { trip, booked: done.map((d) => d.ref), confirmed: ok };
    } finally {
      if (!finished) {
        // Cancelled, failed or declined half-way: undo what was booked, newest first, durably.
        for (const { step, ref } of done.reverse()) {
          await ctx.effect(`undo-${step}`, {
            input: { ref },
            execute: async ({ input }) => {
              for (const [key, state] of ledger) if (state === 'booked' && input.ref.endsWith(key.slice(-12))) ledger.set(key, 'undone');
              return `undone ${input.ref}`;
            },
          });
        }
      }
    }
  },
);

const engine = await createEngine({ workflows: [trip] });
try {
  await engine.migrate();
  const worker = engine.worker({ concurrency: 4, pollMs: 250 });
  await worker.start();

  const confirmed = await engine.client.start(trip, { trip: `lisbon-${Date.now()}` });
  const cancelledTrip = `oslo-${Date.now()}`;
  slowHotel.add(cancelledTrip);
  const cancelled = await engine.client.start(trip, { trip: cancelledTrip });

  // The first trip waits for the traveller: it holds no worker while it does.
  while ((await confirmed.status()).state !== 'waiting') await new Promise((r) => setTimeout(r, 50));
  await engine.client.signal(confirmed.runId, 'confirm', { ok: true });
  console.log('confirmed:', await confirmed.result({ timeout: '30s' }));

  // The second is cancelled while its hotel booking is in flight.
  await new Promise((r) => setTimeout(r, 500));
  console.log('cancel:', await engine.client.cancel(cancelled.runId));
  const outcome = await cancelled.result({ timeout: '30s' }).catch((error: unknown) => error);
  console.log('cancelled run:', outcome instanceof CancelledError ? 'CancelledError' : outcome);
  const { rows } = await engine.pool.query(`SELECT step_key, state FROM ratchet.operations WHERE task_id = $1 ORDER BY seq`, [cancelled.runId]);
  console.log('its steps:', rows.map((r) => `${r.step_key} ${r.state}`).join(', '));
  console.log('ledger:', Object.fromEntries(ledger));
  await worker.stop();
} finally {
  await engine.close();
}
