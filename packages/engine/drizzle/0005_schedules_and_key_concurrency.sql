CREATE TABLE "ratchet"."schedules" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"name" text NOT NULL,
	"workflow_name" text NOT NULL,
	"workflow_version" text NOT NULL,
	"cron" text NOT NULL,
	"timezone" text DEFAULT 'UTC' NOT NULL,
	"input" jsonb,
	"input_hash" text NOT NULL,
	"catch_up" text DEFAULT 'latest' NOT NULL,
	"max_catch_up" integer DEFAULT 100 NOT NULL,
	"next_at" timestamp with time zone,
	"last_slot_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "schedules_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "schedules_catch_up_is_known" CHECK ("ratchet"."schedules"."catch_up" in ('all', 'latest', 'none')),
	CONSTRAINT "schedules_max_catch_up_positive" CHECK ("ratchet"."schedules"."max_catch_up" > 0)
);
--> statement-breakpoint
CREATE UNIQUE INDEX "schedules_name_unique" ON "ratchet"."schedules" USING btree ("name","tenant_id");--> statement-breakpoint
CREATE INDEX "schedules_due" ON "ratchet"."schedules" USING btree ("next_at") WHERE "ratchet"."schedules"."next_at" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_one_running_per_key" ON "ratchet"."tasks" USING btree ("concurrency_key","tenant_id") WHERE "ratchet"."tasks"."concurrency_key" is not null and "ratchet"."tasks"."state" = 'running';