CREATE SCHEMA "ratchet";
--> statement-breakpoint
CREATE TABLE "ratchet"."clock" (
	"single" boolean DEFAULT true NOT NULL,
	"shift" interval DEFAULT '0' NOT NULL,
	CONSTRAINT "clock_pkey" PRIMARY KEY("single"),
	CONSTRAINT "clock_is_single_row" CHECK ("ratchet"."clock"."single")
);
--> statement-breakpoint
CREATE TABLE "ratchet"."contracts" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"task_id" uuid NOT NULL,
	"idempotency_key" text NOT NULL,
	"agent_id" text,
	"contract_version" text NOT NULL,
	"body" jsonb NOT NULL,
	"body_hash" text NOT NULL,
	"status" text NOT NULL,
	"error_detail" jsonb,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"committed_at" timestamp with time zone,
	CONSTRAINT "contracts_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "contracts_status_is_known" CHECK ("ratchet"."contracts"."status" in ('sealed', 'committed', 'failed')),
	CONSTRAINT "contracts_hash_is_sha256" CHECK ("ratchet"."contracts"."body_hash" ~ '^[0-9a-f]{64}$')
);
--> statement-breakpoint
CREATE TABLE "ratchet"."events" (
	"tenant_id" uuid NOT NULL,
	"task_id" uuid NOT NULL,
	"seq" integer NOT NULL,
	"event_type" text NOT NULL,
	"actor_id" text,
	"policy_version" text,
	"payload" jsonb,
	"trace_id" text,
	"span_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "events_pkey" PRIMARY KEY("tenant_id","task_id","seq"),
	CONSTRAINT "events_type_is_known" CHECK ("ratchet"."events"."event_type" in ('started', 'claimed', 'released', 'lease_reclaimed', 'sleeping', 'woke', 'waiting', 'signalled', 'parked', 'resolved', 'contract_sealed', 'contract_committed', 'contract_failed', 'completed', 'failed', 'cancelled'))
);
--> statement-breakpoint
CREATE TABLE "ratchet"."operations" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"task_id" uuid NOT NULL,
	"step_name" text NOT NULL,
	"step_key" text NOT NULL,
	"seq" integer NOT NULL,
	"kind" text NOT NULL,
	"idempotency_key" text,
	"input_hash" text,
	"state" text NOT NULL,
	"attempt" integer DEFAULT 1 NOT NULL,
	"reserved_at" timestamp with time zone,
	"deadline_at" timestamp with time zone,
	"provider_reference" text,
	"result" jsonb,
	"error" jsonb,
	"trace_id" text,
	"span_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	CONSTRAINT "operations_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "operations_state_is_known" CHECK ("ratchet"."operations"."state" in ('reserved', 'succeeded', 'failed', 'unknown')),
	CONSTRAINT "operations_kind_is_known" CHECK ("ratchet"."operations"."kind" in ('step', 'effect', 'tool', 'infer', 'sleep', 'wait', 'emit', 'seal', 'commit', 'child')),
	CONSTRAINT "operations_attempt_positive" CHECK ("ratchet"."operations"."attempt" > 0),
	CONSTRAINT "operations_key_only_on_effects" CHECK ("ratchet"."operations"."idempotency_key" is null or "ratchet"."operations"."kind" in ('effect', 'tool', 'child'))
);
--> statement-breakpoint
CREATE TABLE "ratchet"."outbox" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"task_id" uuid NOT NULL,
	"topic" text NOT NULL,
	"message_key" text,
	"payload" jsonb,
	"available_at" timestamp with time zone DEFAULT now() NOT NULL,
	"dispatched_at" timestamp with time zone,
	"attempts" integer DEFAULT 0 NOT NULL,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "outbox_pkey" PRIMARY KEY("tenant_id","id")
);
--> statement-breakpoint
CREATE TABLE "ratchet"."signals" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"task_id" uuid NOT NULL,
	"name" text NOT NULL,
	"payload" jsonb,
	"idempotency_key" text,
	"consumed_at" timestamp with time zone,
	"consumed_by" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "signals_pkey" PRIMARY KEY("tenant_id","id")
);
--> statement-breakpoint
CREATE TABLE "ratchet"."tasks" (
	"tenant_id" uuid NOT NULL,
	"id" uuid NOT NULL,
	"workflow_name" text NOT NULL,
	"workflow_version" text NOT NULL,
	"state" text NOT NULL,
	"state_version" integer DEFAULT 1 NOT NULL,
	"due_at" timestamp with time zone,
	"wake_at" timestamp with time zone,
	"deadline_at" timestamp with time zone,
	"lease_owner" text,
	"lease_expires_at" timestamp with time zone,
	"claim_count" integer DEFAULT 0 NOT NULL,
	"cancel_requested_at" timestamp with time zone,
	"signal_seq" integer DEFAULT 0 NOT NULL,
	"result_awaited" boolean DEFAULT false NOT NULL,
	"idempotency_key" text,
	"concurrency_key" text,
	"priority" integer DEFAULT 0 NOT NULL,
	"input" jsonb,
	"input_hash" text NOT NULL,
	"output" jsonb,
	"error" jsonb,
	"parent_id" uuid,
	"trace_id" text,
	"span_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	"completed_at" timestamp with time zone,
	CONSTRAINT "tasks_pkey" PRIMARY KEY("tenant_id","id"),
	CONSTRAINT "tasks_state_is_known" CHECK ("ratchet"."tasks"."state" in ('pending', 'running', 'sleeping', 'waiting', 'completed', 'failed', 'cancelled', 'parked')),
	CONSTRAINT "tasks_running_has_lease" CHECK ("ratchet"."tasks"."state" <> 'running' or ("ratchet"."tasks"."lease_owner" is not null and "ratchet"."tasks"."lease_expires_at" is not null)),
	CONSTRAINT "tasks_settled_is_not_due" CHECK ("ratchet"."tasks"."state" not in ('completed', 'failed', 'cancelled', 'parked') or "ratchet"."tasks"."due_at" is null),
	CONSTRAINT "tasks_state_version_positive" CHECK ("ratchet"."tasks"."state_version" > 0)
);
--> statement-breakpoint
ALTER TABLE "ratchet"."contracts" ADD CONSTRAINT "contracts_task_same_tenant" FOREIGN KEY ("tenant_id","task_id") REFERENCES "ratchet"."tasks"("tenant_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratchet"."events" ADD CONSTRAINT "events_task_same_tenant" FOREIGN KEY ("tenant_id","task_id") REFERENCES "ratchet"."tasks"("tenant_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratchet"."operations" ADD CONSTRAINT "operations_task_same_tenant" FOREIGN KEY ("tenant_id","task_id") REFERENCES "ratchet"."tasks"("tenant_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratchet"."outbox" ADD CONSTRAINT "outbox_task_same_tenant" FOREIGN KEY ("tenant_id","task_id") REFERENCES "ratchet"."tasks"("tenant_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratchet"."signals" ADD CONSTRAINT "signals_task_same_tenant" FOREIGN KEY ("tenant_id","task_id") REFERENCES "ratchet"."tasks"("tenant_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "ratchet"."tasks" ADD CONSTRAINT "tasks_parent_same_tenant" FOREIGN KEY ("tenant_id","parent_id") REFERENCES "ratchet"."tasks"("tenant_id","id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "contracts_idempotency_key_unique" ON "ratchet"."contracts" USING btree ("idempotency_key","tenant_id");--> statement-breakpoint
CREATE INDEX "contracts_by_status" ON "ratchet"."contracts" USING btree ("status","created_at");--> statement-breakpoint
CREATE INDEX "contracts_task" ON "ratchet"."contracts" USING btree ("task_id","tenant_id");--> statement-breakpoint
CREATE UNIQUE INDEX "operations_step_key_unique" ON "ratchet"."operations" USING btree ("task_id","step_key","tenant_id");--> statement-breakpoint
CREATE UNIQUE INDEX "operations_idempotency_key_unique" ON "ratchet"."operations" USING btree ("idempotency_key","tenant_id") WHERE "ratchet"."operations"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "outbox_pending" ON "ratchet"."outbox" USING btree ("available_at") WHERE "ratchet"."outbox"."dispatched_at" is null;--> statement-breakpoint
CREATE INDEX "outbox_task" ON "ratchet"."outbox" USING btree ("task_id","tenant_id");--> statement-breakpoint
CREATE INDEX "signals_task_name" ON "ratchet"."signals" USING btree ("task_id","name","tenant_id");--> statement-breakpoint
CREATE UNIQUE INDEX "signals_idempotency_key_unique" ON "ratchet"."signals" USING btree ("idempotency_key","task_id","tenant_id") WHERE "ratchet"."signals"."idempotency_key" is not null;--> statement-breakpoint
CREATE UNIQUE INDEX "tasks_idempotency_key_unique" ON "ratchet"."tasks" USING btree ("idempotency_key","workflow_name","tenant_id") WHERE "ratchet"."tasks"."idempotency_key" is not null;--> statement-breakpoint
CREATE INDEX "tasks_due" ON "ratchet"."tasks" USING btree ("due_at") WHERE "ratchet"."tasks"."due_at" is not null;--> statement-breakpoint
CREATE INDEX "tasks_parent" ON "ratchet"."tasks" USING btree ("parent_id","tenant_id") WHERE "ratchet"."tasks"."parent_id" is not null;