-- Who awaits a run's outcome, replacing the boolean result_awaited (dropped by 0012): an engine
-- instance id lets that engine's own workers hand its callers the outcome in memory, without a
-- NOTIFY (whose commit-time database lock serializes every notifying commit). Callers registered
-- before this migration are kept as '*': always notified.
ALTER TABLE "ratchet"."tasks" ADD COLUMN "awaited_by" text;--> statement-breakpoint
UPDATE "ratchet"."tasks" SET "awaited_by" = '*' WHERE "result_awaited";
