DROP INDEX "ratchet"."tasks_one_running_per_key";--> statement-breakpoint
DROP INDEX "ratchet"."tasks_due";--> statement-breakpoint
ALTER TABLE "ratchet"."tasks" ADD COLUMN "concurrency_limit" integer;--> statement-breakpoint
ALTER TABLE "ratchet"."tasks" ADD COLUMN "concurrency_slot" integer;--> statement-breakpoint
-- Hand-added: runs keyed before limits existed had a limit of one, and a running one holds slot 1.
UPDATE "ratchet"."tasks" SET "concurrency_limit" = 1,
       "concurrency_slot" = CASE WHEN "state" = 'running' THEN 1 END
 WHERE "concurrency_key" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "tasks_pending" ON "ratchet"."tasks" USING btree ("workflow_name","workflow_version","priority" DESC NULLS LAST,"due_at") WHERE "ratchet"."tasks"."state" = 'pending';--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_running_key_slots" ON "ratchet"."tasks" USING btree ("concurrency_key","tenant_id","concurrency_slot") WHERE "ratchet"."tasks"."concurrency_key" is not null and "ratchet"."tasks"."state" = 'running';--> statement-breakpoint
CREATE INDEX "tasks_due" ON "ratchet"."tasks" USING btree ("workflow_name","workflow_version","due_at") WHERE "ratchet"."tasks"."due_at" is not null and "ratchet"."tasks"."state" <> 'pending';--> statement-breakpoint
ALTER TABLE "ratchet"."tasks" ADD CONSTRAINT "tasks_keyed_has_limit" CHECK ("ratchet"."tasks"."concurrency_key" is null or "ratchet"."tasks"."concurrency_limit" >= 1);--> statement-breakpoint
ALTER TABLE "ratchet"."tasks" ADD CONSTRAINT "tasks_running_keyed_has_slot" CHECK ("ratchet"."tasks"."state" <> 'running' or "ratchet"."tasks"."concurrency_key" is null or ("ratchet"."tasks"."concurrency_slot" is not null and "ratchet"."tasks"."concurrency_slot" between 1 and "ratchet"."tasks"."concurrency_limit"));