-- Normalized dump of schema "ratchet". Regenerate: UPDATE_SCHEMA_SNAPSHOT=1 pnpm test test/schema/snapshot.test.ts

-- columns
clock.single boolean NOT NULL DEFAULT true
clock.shift interval NOT NULL DEFAULT '00:00:00'::interval
contracts.tenant_id uuid NOT NULL
contracts.id uuid NOT NULL
contracts.task_id uuid NOT NULL
contracts.idempotency_key text NOT NULL
contracts.agent_id text
contracts.contract_version text NOT NULL
contracts.body jsonb NOT NULL
contracts.body_hash text NOT NULL
contracts.status text NOT NULL
contracts.error_detail jsonb
contracts.created_at timestamp with time zone NOT NULL DEFAULT now()
contracts.committed_at timestamp with time zone
contracts.step_key text
contracts.result jsonb
events.tenant_id uuid NOT NULL
events.task_id uuid NOT NULL
events.seq integer NOT NULL
events.event_type text NOT NULL
events.actor_id text
events.policy_version text
events.payload jsonb
events.trace_id text
events.span_id text
events.created_at timestamp with time zone NOT NULL DEFAULT now()
idempotency_keys.tenant_id uuid NOT NULL
idempotency_keys.id uuid NOT NULL
idempotency_keys.scope text NOT NULL
idempotency_keys.key text NOT NULL
idempotency_keys.input_hash text
idempotency_keys.run_id uuid NOT NULL
idempotency_keys.outcome text NOT NULL
idempotency_keys.finished_at timestamp with time zone
idempotency_keys.expires_at timestamp with time zone NOT NULL
idempotency_keys.created_at timestamp with time zone NOT NULL DEFAULT now()
operations.tenant_id uuid NOT NULL
operations.id uuid NOT NULL
operations.task_id uuid NOT NULL
operations.step_name text NOT NULL
operations.step_key text NOT NULL
operations.seq integer NOT NULL
operations.kind text NOT NULL
operations.idempotency_key text
operations.input_hash text
operations.state text NOT NULL
operations.attempt integer NOT NULL DEFAULT 1
operations.reserved_at timestamp with time zone
operations.deadline_at timestamp with time zone
operations.provider_reference text
operations.result jsonb
operations.error jsonb
operations.trace_id text
operations.span_id text
operations.created_at timestamp with time zone NOT NULL DEFAULT now()
operations.completed_at timestamp with time zone
outbox.tenant_id uuid NOT NULL
outbox.id uuid NOT NULL
outbox.task_id uuid NOT NULL
outbox.topic text NOT NULL
outbox.message_key text
outbox.payload jsonb
outbox.available_at timestamp with time zone NOT NULL DEFAULT now()
outbox.dispatched_at timestamp with time zone
outbox.attempts integer NOT NULL DEFAULT 0
outbox.last_error text
outbox.created_at timestamp with time zone NOT NULL DEFAULT now()
schedules.tenant_id uuid NOT NULL
schedules.id uuid NOT NULL
schedules.name text NOT NULL
schedules.workflow_name text NOT NULL
schedules.workflow_version text NOT NULL
schedules.cron text NOT NULL
schedules.timezone text NOT NULL DEFAULT 'UTC'::text
schedules.input jsonb
schedules.input_hash text NOT NULL
schedules.catch_up text NOT NULL DEFAULT 'latest'::text
schedules.max_catch_up integer NOT NULL DEFAULT 100
schedules.next_at timestamp with time zone
schedules.last_slot_at timestamp with time zone
schedules.created_at timestamp with time zone NOT NULL DEFAULT now()
schedules.updated_at timestamp with time zone NOT NULL DEFAULT now()
signals.tenant_id uuid NOT NULL
signals.id uuid NOT NULL
signals.task_id uuid NOT NULL
signals.name text NOT NULL
signals.payload jsonb
signals.idempotency_key text
signals.consumed_at timestamp with time zone
signals.consumed_by text
signals.created_at timestamp with time zone NOT NULL DEFAULT now()
tasks.tenant_id uuid NOT NULL
tasks.id uuid NOT NULL
tasks.workflow_name text NOT NULL
tasks.workflow_version text NOT NULL
tasks.state text NOT NULL
tasks.state_version integer NOT NULL DEFAULT 1
tasks.due_at timestamp with time zone
tasks.wake_at timestamp with time zone
tasks.deadline_at timestamp with time zone
tasks.lease_owner text
tasks.lease_expires_at timestamp with time zone
tasks.claim_count integer NOT NULL DEFAULT 0
tasks.cancel_requested_at timestamp with time zone
tasks.signal_seq integer NOT NULL DEFAULT 0
tasks.idempotency_key text
tasks.concurrency_key text
tasks.priority integer NOT NULL DEFAULT 0
tasks.input jsonb
tasks.input_hash text NOT NULL
tasks.output jsonb
tasks.error jsonb
tasks.parent_id uuid
tasks.trace_id text
tasks.span_id text
tasks.created_at timestamp with time zone NOT NULL DEFAULT now()
tasks.updated_at timestamp with time zone NOT NULL DEFAULT now()
tasks.completed_at timestamp with time zone
tasks.concurrency_limit integer
tasks.concurrency_slot integer
tasks.awaited_by text
tenant_purges.tenant_id uuid NOT NULL
tenant_purges.id uuid NOT NULL
tenant_purges.state text NOT NULL
tenant_purges.requested_by text NOT NULL
tenant_purges.policy jsonb NOT NULL
tenant_purges.removed jsonb NOT NULL DEFAULT '{}'::jsonb
tenant_purges.batches integer NOT NULL DEFAULT 0
tenant_purges.started_at timestamp with time zone NOT NULL DEFAULT now()
tenant_purges.finished_at timestamp with time zone
tenant_secret.single boolean NOT NULL DEFAULT true
tenant_secret.secret text NOT NULL DEFAULT (md5(((random())::text || (clock_timestamp())::text)) || md5((random())::text))
tenant_sessions.pid integer NOT NULL
tenant_sessions.backend_start timestamp with time zone NOT NULL
tenant_sessions.tenant_id uuid NOT NULL
workers.id text NOT NULL
workers.host text NOT NULL
workers.pid integer NOT NULL
workers.workflows jsonb NOT NULL
workers.concurrency integer NOT NULL
workers.heartbeat_ms integer NOT NULL
workers.started_at timestamp with time zone NOT NULL DEFAULT now()
workers.heartbeat_at timestamp with time zone NOT NULL DEFAULT now()

-- constraints
clock CONSTRAINT clock_is_single_row CHECK (single)
clock CONSTRAINT clock_pkey PRIMARY KEY (single)
contracts CONSTRAINT contracts_hash_is_sha256 CHECK ((body_hash ~ '^[0-9a-f]{64}$'::text))
contracts CONSTRAINT contracts_pkey PRIMARY KEY (tenant_id, id)
contracts CONSTRAINT contracts_status_is_known CHECK ((status = ANY (ARRAY['sealed'::text, 'committed'::text, 'failed'::text])))
contracts CONSTRAINT contracts_task_same_tenant FOREIGN KEY (tenant_id, task_id) REFERENCES ratchet.tasks(tenant_id, id) ON DELETE CASCADE
events CONSTRAINT events_pkey PRIMARY KEY (tenant_id, task_id, seq)
events CONSTRAINT events_task_same_tenant FOREIGN KEY (tenant_id, task_id) REFERENCES ratchet.tasks(tenant_id, id) ON DELETE CASCADE
events CONSTRAINT events_type_is_known CHECK ((event_type = ANY (ARRAY['started'::text, 'claimed'::text, 'released'::text, 'lease_reclaimed'::text, 'sleeping'::text, 'woke'::text, 'waiting'::text, 'signalled'::text, 'parked'::text, 'resolved'::text, 'retried'::text, 'contract_sealed'::text, 'contract_committed'::text, 'contract_failed'::text, 'completed'::text, 'failed'::text, 'cancelled'::text])))
idempotency_keys CONSTRAINT idempotency_keys_outcome_is_known CHECK ((outcome = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text, 'succeeded'::text, 'unknown'::text, 'committed'::text])))
idempotency_keys CONSTRAINT idempotency_keys_pkey PRIMARY KEY (tenant_id, id)
operations CONSTRAINT operations_attempt_positive CHECK ((attempt > 0))
operations CONSTRAINT operations_key_only_on_effects CHECK (((idempotency_key IS NULL) OR (kind = ANY (ARRAY['effect'::text, 'tool'::text, 'child'::text]))))
operations CONSTRAINT operations_kind_is_known CHECK ((kind = ANY (ARRAY['step'::text, 'effect'::text, 'tool'::text, 'infer'::text, 'sleep'::text, 'wait'::text, 'emit'::text, 'seal'::text, 'commit'::text, 'child'::text])))
operations CONSTRAINT operations_pkey PRIMARY KEY (tenant_id, id)
operations CONSTRAINT operations_state_is_known CHECK ((state = ANY (ARRAY['reserved'::text, 'succeeded'::text, 'failed'::text, 'unknown'::text])))
operations CONSTRAINT operations_task_same_tenant FOREIGN KEY (tenant_id, task_id) REFERENCES ratchet.tasks(tenant_id, id) ON DELETE CASCADE
outbox CONSTRAINT outbox_pkey PRIMARY KEY (tenant_id, id)
outbox CONSTRAINT outbox_task_same_tenant FOREIGN KEY (tenant_id, task_id) REFERENCES ratchet.tasks(tenant_id, id) ON DELETE CASCADE
schedules CONSTRAINT schedules_catch_up_is_known CHECK ((catch_up = ANY (ARRAY['all'::text, 'latest'::text, 'none'::text])))
schedules CONSTRAINT schedules_max_catch_up_positive CHECK ((max_catch_up > 0))
schedules CONSTRAINT schedules_pkey PRIMARY KEY (tenant_id, id)
signals CONSTRAINT signals_pkey PRIMARY KEY (tenant_id, id)
signals CONSTRAINT signals_task_same_tenant FOREIGN KEY (tenant_id, task_id) REFERENCES ratchet.tasks(tenant_id, id) ON DELETE CASCADE
tasks CONSTRAINT tasks_keyed_has_limit CHECK (((concurrency_key IS NULL) OR (concurrency_limit >= 1)))
tasks CONSTRAINT tasks_parent_same_tenant FOREIGN KEY (tenant_id, parent_id) REFERENCES ratchet.tasks(tenant_id, id) ON DELETE CASCADE
tasks CONSTRAINT tasks_pkey PRIMARY KEY (tenant_id, id)
tasks CONSTRAINT tasks_running_has_lease CHECK (((state <> 'running'::text) OR ((lease_owner IS NOT NULL) AND (lease_expires_at IS NOT NULL))))
tasks CONSTRAINT tasks_running_keyed_has_slot CHECK (((state <> 'running'::text) OR (concurrency_key IS NULL) OR ((concurrency_slot IS NOT NULL) AND ((concurrency_slot >= 1) AND (concurrency_slot <= concurrency_limit)))))
tasks CONSTRAINT tasks_settled_is_not_due CHECK (((state <> ALL (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text, 'parked'::text])) OR (due_at IS NULL)))
tasks CONSTRAINT tasks_state_is_known CHECK ((state = ANY (ARRAY['pending'::text, 'running'::text, 'sleeping'::text, 'waiting'::text, 'completed'::text, 'failed'::text, 'cancelled'::text, 'parked'::text])))
tasks CONSTRAINT tasks_state_version_positive CHECK ((state_version > 0))
tenant_purges CONSTRAINT tenant_purges_pkey PRIMARY KEY (tenant_id, id)
tenant_purges CONSTRAINT tenant_purges_state_is_known CHECK ((state = ANY (ARRAY['running'::text, 'done'::text])))
tenant_secret CONSTRAINT tenant_secret_is_single_row CHECK (single)
tenant_secret CONSTRAINT tenant_secret_pkey PRIMARY KEY (single)
tenant_sessions CONSTRAINT tenant_sessions_pkey PRIMARY KEY (pid)
workers CONSTRAINT workers_heartbeat_positive CHECK ((heartbeat_ms > 0))
workers CONSTRAINT workers_pkey PRIMARY KEY (id)
workers CONSTRAINT workers_workflows_is_array CHECK ((jsonb_typeof(workflows) = 'array'::text))

-- indexes
CREATE UNIQUE INDEX clock_pkey ON ratchet.clock (single)
CREATE INDEX contracts_by_status ON ratchet.contracts (status, created_at)
CREATE UNIQUE INDEX contracts_idempotency_key_unique ON ratchet.contracts (idempotency_key, tenant_id)
CREATE UNIQUE INDEX contracts_pkey ON ratchet.contracts (tenant_id, id)
CREATE INDEX contracts_task ON ratchet.contracts (task_id, tenant_id)
CREATE UNIQUE INDEX events_pkey ON ratchet.events (tenant_id, task_id, seq)
CREATE INDEX idempotency_keys_expiry ON ratchet.idempotency_keys (expires_at)
CREATE UNIQUE INDEX idempotency_keys_key_unique ON ratchet.idempotency_keys (key, scope, tenant_id)
CREATE UNIQUE INDEX idempotency_keys_pkey ON ratchet.idempotency_keys (tenant_id, id)
CREATE UNIQUE INDEX operations_idempotency_key_unique ON ratchet.operations (idempotency_key, tenant_id) WHERE (idempotency_key IS NOT NULL)
CREATE UNIQUE INDEX operations_pkey ON ratchet.operations (tenant_id, id)
CREATE UNIQUE INDEX operations_step_key_unique ON ratchet.operations (task_id, step_key, tenant_id)
CREATE INDEX outbox_pending ON ratchet.outbox (available_at) WHERE (dispatched_at IS NULL)
CREATE UNIQUE INDEX outbox_pkey ON ratchet.outbox (tenant_id, id)
CREATE INDEX outbox_task ON ratchet.outbox (task_id, tenant_id)
CREATE INDEX schedules_due ON ratchet.schedules (next_at) WHERE (next_at IS NOT NULL)
CREATE UNIQUE INDEX schedules_name_unique ON ratchet.schedules (name, tenant_id)
CREATE UNIQUE INDEX schedules_pkey ON ratchet.schedules (tenant_id, id)
CREATE UNIQUE INDEX signals_idempotency_key_unique ON ratchet.signals (idempotency_key, task_id, tenant_id) WHERE (idempotency_key IS NOT NULL)
CREATE UNIQUE INDEX signals_pkey ON ratchet.signals (tenant_id, id)
CREATE INDEX signals_task_name ON ratchet.signals (task_id, name, tenant_id)
CREATE INDEX tasks_due ON ratchet.tasks (workflow_name, workflow_version, due_at) WHERE ((due_at IS NOT NULL) AND (state <> 'pending'::text))
CREATE INDEX tasks_finished ON ratchet.tasks (completed_at) WHERE (state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text]))
CREATE UNIQUE INDEX tasks_idempotency_key_unique ON ratchet.tasks (idempotency_key, workflow_name, tenant_id) WHERE (idempotency_key IS NOT NULL)
CREATE INDEX tasks_parent ON ratchet.tasks (parent_id, tenant_id) WHERE (parent_id IS NOT NULL)
CREATE INDEX tasks_pending ON ratchet.tasks (workflow_name, workflow_version, priority DESC NULLS LAST, due_at) WHERE (state = 'pending'::text)
CREATE UNIQUE INDEX tasks_pkey ON ratchet.tasks (tenant_id, id)
CREATE UNIQUE INDEX tasks_running_key_slots ON ratchet.tasks (concurrency_key, tenant_id, concurrency_slot) WHERE ((concurrency_key IS NOT NULL) AND (state = 'running'::text))
CREATE UNIQUE INDEX tenant_purges_one_running ON ratchet.tenant_purges (tenant_id) WHERE (state = 'running'::text)
CREATE UNIQUE INDEX tenant_purges_pkey ON ratchet.tenant_purges (tenant_id, id)
CREATE UNIQUE INDEX tenant_secret_pkey ON ratchet.tenant_secret (single)
CREATE UNIQUE INDEX tenant_sessions_pkey ON ratchet.tenant_sessions (pid)
CREATE INDEX workers_heartbeat ON ratchet.workers (heartbeat_at)
CREATE UNIQUE INDEX workers_pkey ON ratchet.workers (id)

-- triggers
contracts TRIGGER contracts_guard BEFORE UPDATE ON ratchet.contracts FOR EACH ROW EXECUTE FUNCTION ratchet.contracts_guard()
events TRIGGER events_append_only_rows BEFORE DELETE OR UPDATE ON ratchet.events FOR EACH ROW EXECUTE FUNCTION ratchet.events_append_only()
events TRIGGER events_append_only_truncate BEFORE TRUNCATE ON ratchet.events FOR EACH STATEMENT EXECUTE FUNCTION ratchet.events_append_only()
tasks TRIGGER tasks_wake_parent AFTER UPDATE OF state ON ratchet.tasks FOR EACH ROW WHEN (((new.parent_id IS NOT NULL) AND (new.state = ANY (ARRAY['completed'::text, 'failed'::text, 'cancelled'::text])) AND (old.state IS DISTINCT FROM new.state))) EXECUTE FUNCTION ratchet.wake_parent()

-- functions
FUNCTION backend_start() RETURNS timestamp with time zone sql STABLE
FUNCTION contracts_guard() RETURNS trigger plpgsql VOLATILE
FUNCTION enter_tenant(tenant uuid, proof text) RETURNS void sql VOLATILE
FUNCTION enter_tenant_at(tenant uuid, proof text, started timestamp with time zone) RETURNS void plpgsql VOLATILE
FUNCTION events_append_only() RETURNS trigger plpgsql VOLATILE
FUNCTION leave_tenant() RETURNS void sql VOLATILE
FUNCTION leave_tenant_at(started timestamp with time zone) RETURNS void sql VOLATILE
FUNCTION now() RETURNS timestamp with time zone plpgsql STABLE
FUNCTION session_tenant() RETURNS uuid sql STABLE
FUNCTION session_tenant_at(started timestamp with time zone) RETURNS uuid sql STABLE
FUNCTION wake_parent() RETURNS trigger plpgsql VOLATILE
