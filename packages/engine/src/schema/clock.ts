/**
 * `ratchet.clock`: the one row behind `ratchet.now()`, the only source of time in the engine's
 * SQL. `ratchet.now()` is `statement_timestamp() + shift`; tests move `shift` forward to make
 * sleeps, leases and timeouts come due without waiting in real time. Production leaves it at 0.
 * Engine-wide, not tenant data: it is the one table without a tenant.
 */
import { sql } from 'drizzle-orm';
import { boolean, check, interval, primaryKey } from 'drizzle-orm/pg-core';
import { ratchetSchema } from './common.js';

export const clock = ratchetSchema.table(
  'clock',
  {
    single: boolean('single').notNull().default(true),
    shift: interval('shift').notNull().default('0'),
  },
  (t) => [primaryKey({ name: 'clock_pkey', columns: [t.single] }), check('clock_is_single_row', sql`${t.single}`)],
);
