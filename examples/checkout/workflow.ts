/**
 * A checkout: reserve stock, charge the card (an effect with an idempotency key and a reconcile),
 * ship. The "payment provider" is a table in the same database, so the demo can show exactly how
 * many charges were made: `demo_payments` has one row per idempotency key, as a provider that
 * honours keys would.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import pg from 'pg';
import { workflow } from '@ratchet/sdk';

export const PAYMENTS_DDL = `CREATE TABLE IF NOT EXISTS demo_payments (
  idempotency_key text PRIMARY KEY, amount_cents int NOT NULL, charged_by_pid int NOT NULL, charged_at timestamptz NOT NULL DEFAULT now())`;

let pool: pg.Pool | undefined;
export function usePaymentsDatabase(url: string): void {
  pool = new pg.Pool({ connectionString: url, max: 2 });
  pool.on('error', () => {});
}

/** The provider: records the charge at once, then is slow to answer (1.5 s), like real payment APIs. */
async function chargeCard(idempotencyKey: string, cents: number, signal: AbortSignal): Promise<{ paymentId: string }> {
  await pool!.query(
    `INSERT INTO demo_payments (idempotency_key, amount_cents, charged_by_pid) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    [idempotencyKey, cents, process.pid],
  );
  process.stdout.write(`charging\n`); // the demo kills this worker right here
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 1500);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)));
  });
  return { paymentId: paymentIdOf(idempotencyKey) };
}

async function findCharge(idempotencyKey: string): Promise<{ found: true; result: { paymentId: string } } | { found: false }> {
  const { rows } = await pool!.query(`SELECT 1 FROM demo_payments WHERE idempotency_key = $1`, [idempotencyKey]);
  return rows.length > 0 ? { found: true, result: { paymentId: paymentIdOf(idempotencyKey) } } : { found: false };
}

function paymentIdOf(idempotencyKey: string): string {
  return `pay_${createHash('sha256').update(idempotencyKey).digest('hex').slice(0, 12)}`;
}

export const checkout = workflow(
  {
    name: 'checkout',
    version: '1',
    input: z.object({ orderId: z.string(), sku: z.string(), cents: z.number().int().positive() }),
  },
  async (ctx, { orderId, sku, cents }) => {
    const reservation = await ctx.step('reserve-stock', () => ({ sku, reservedBy: process.pid }));
    const payment = await ctx.effect('charge-card', {
      input: { orderId, cents },
      timeout: '3s',
      execute: ({ idempotencyKey, input, signal }) => chargeCard(idempotencyKey, input.cents, signal),
      reconcile: ({ idempotencyKey }) => findCharge(idempotencyKey),
    });
    const shipment = await ctx.step('ship', () => ({ trackingId: `trk_${orderId}`, shippedBy: process.pid }));
    return { orderId, reservation, payment, shipment };
  },
);
