/**
 * Shared column builders for the `ratchet` Postgres schema.
 *
 * Every table is owned by a tenant: its primary key is `(tenant_id, id)` and children reference
 * their parent through `(tenant_id, parent_id)`, so no row can point into another tenant and the
 * schema distributes by `tenant_id` unchanged. Ids are UUIDv7 made by the engine (see `ids.ts`).
 */
import { sql, type SQL } from 'drizzle-orm';
import { pgSchema, text, timestamp, uuid } from 'drizzle-orm/pg-core';

export const ratchetSchema = pgSchema('ratchet');

export const tenantId = () => uuid('tenant_id').notNull();
export const id = () => uuid('id').notNull();
export const createdAt = () => timestamp('created_at', { withTimezone: true }).notNull().defaultNow();
export const ts = (name: string) => timestamp(name, { withTimezone: true });
/** W3C trace-context ids (hex) of the span that wrote the row; the telemetry itself lives in OpenTelemetry. */
export const traceColumns = () => ({
  traceId: text('trace_id'),
  spanId: text('span_id'),
});

/** `column IN ('a', 'b', …)` for a CHECK constraint over a closed set of strings. */
export function oneOf(column: SQL.Aliased | unknown, values: readonly string[]): SQL {
  return sql`${column} in (${sql.raw(values.map((v) => `'${v}'`).join(', '))})`;
}
