CREATE TABLE "ratchet"."idempotency_keys" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"scope" text NOT NULL,
	"key" text NOT NULL,
	"input_hash" text,
	"run_id" uuid NOT NULL,
	"outcome" text NOT NULL,
	"finished_at" timestamp with time zone,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "idempotency_keys_outcome_is_known" CHECK ("ratchet"."idempotency_keys"."outcome" in ('completed', 'failed', 'cancelled', 'succeeded', 'unknown', 'committed'))
);
--> statement-breakpoint
CREATE TABLE "ratchet"."tenant_purges" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"state" text NOT NULL,
	"requested_by" text NOT NULL,
	"policy" jsonb NOT NULL,
	"removed" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"batches" integer DEFAULT 0 NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	CONSTRAINT "tenant_purges_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "tenant_purges_state_is_known" CHECK ("ratchet"."tenant_purges"."state" in ('running', 'done'))
);
--> statement-breakpoint
CREATE TABLE "ratchet"."tenant_secret" (
	"single" boolean DEFAULT true NOT NULL,
	"secret" text DEFAULT md5(random()::text || clock_timestamp()::text) || md5(random()::text) NOT NULL,
	CONSTRAINT "tenant_secret_pkey" PRIMARY KEY("single"),
	CONSTRAINT "tenant_secret_is_single_row" CHECK ("ratchet"."tenant_secret"."single")
);
--> statement-breakpoint
CREATE TABLE "ratchet"."tenant_sessions" (
	"pid" integer NOT NULL,
	"backend_start" timestamp with time zone NOT NULL,
	"tenant_id" uuid NOT NULL,
	CONSTRAINT "tenant_sessions_pkey" PRIMARY KEY("pid")
);
--> statement-breakpoint
CREATE UNIQUE INDEX "idempotency_keys_key_unique" ON "ratchet"."idempotency_keys" USING btree ("key","scope","tenant_id");--> statement-breakpoint
CREATE INDEX "idempotency_keys_expiry" ON "ratchet"."idempotency_keys" USING btree ("expires_at");--> statement-breakpoint
CREATE UNIQUE INDEX "tenant_purges_one_running" ON "ratchet"."tenant_purges" USING btree ("tenant_id") WHERE "ratchet"."tenant_purges"."state" = 'running';--> statement-breakpoint
CREATE INDEX "tasks_finished" ON "ratchet"."tasks" USING btree ("completed_at") WHERE "ratchet"."tasks"."state" in ('completed', 'failed', 'cancelled');