CREATE TABLE "ratchet"."workers" (
	"id" text NOT NULL,
	"host" text NOT NULL,
	"pid" integer NOT NULL,
	"workflows" jsonb NOT NULL,
	"concurrency" integer NOT NULL,
	"heartbeat_ms" integer NOT NULL,
	"started_at" timestamp with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "workers_pkey" PRIMARY KEY("id"),
	CONSTRAINT "workers_heartbeat_positive" CHECK ("ratchet"."workers"."heartbeat_ms" > 0),
	CONSTRAINT "workers_workflows_is_array" CHECK (jsonb_typeof("ratchet"."workers"."workflows") = 'array')
);
--> statement-breakpoint
ALTER TABLE "ratchet"."events" DROP CONSTRAINT "events_type_is_known";--> statement-breakpoint
CREATE INDEX "workers_heartbeat" ON "ratchet"."workers" USING btree ("heartbeat_at");--> statement-breakpoint
ALTER TABLE "ratchet"."events" ADD CONSTRAINT "events_type_is_known" CHECK ("ratchet"."events"."event_type" in ('started', 'claimed', 'released', 'lease_reclaimed', 'sleeping', 'woke', 'waiting', 'signalled', 'parked', 'resolved', 'retried', 'contract_sealed', 'contract_committed', 'contract_failed', 'completed', 'failed', 'cancelled'));