ALTER TABLE "ratchet"."contracts" ADD COLUMN "step_key" text;--> statement-breakpoint
ALTER TABLE "ratchet"."contracts" ADD COLUMN "result" jsonb;