-- Hand-written: row-level security for application code that reads Ratchet's tables without
-- going through the engine (a migration script, a generated tool, an analyst's SQL).
--
-- The engine connects as the owner of the schema: RLS does not apply to it (not FORCEd), so a
-- checkpoint stays one statement. The role `ratchet_app` is the least-privilege role for
-- everyone else: it may read the tenant tables, and only the rows of the tenant its session
-- entered with `ratchet.enter_tenant(tenant, proof)`. The proof is sha256(secret || ':' ||
-- tenant) with a secret the role cannot read (`engine.tenants.sessionProof(tenant)` makes it), and
-- the session's tenant lives in a table the role cannot write, so it cannot pick another tenant.
-- No DDL (no CREATE on the schema), no INSERT/UPDATE/DELETE/TRUNCATE on any Ratchet table.
INSERT INTO "ratchet"."tenant_secret" DEFAULT VALUES ON CONFLICT DO NOTHING;
--> statement-breakpoint
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ratchet_app') THEN
    CREATE ROLE ratchet_app NOLOGIN;
  END IF;
EXCEPTION WHEN insufficient_privilege OR unique_violation OR duplicate_object THEN
  -- No CREATEROLE (a managed server), or another database of the cluster created it meanwhile.
  RAISE NOTICE 'ratchet: role ratchet_app not created here (%); see docs/tenancy.md', SQLERRM;
END
$$;
--> statement-breakpoint
-- Definer functions take the caller's backend start time: the invoker wrappers below read it
-- from the caller's own pg_stat_activity row, which every role may see. A row of a finished
-- backend whose pid is reused never matches the new backend's start time.
CREATE FUNCTION "ratchet"."enter_tenant_at"(tenant uuid, proof text, started timestamptz) RETURNS void
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog
  AS $$
BEGIN
  IF tenant IS NULL OR started IS NULL OR proof IS DISTINCT FROM (
       SELECT encode(sha256(convert_to(s.secret || ':' || tenant::text, 'UTF8')), 'hex') FROM ratchet.tenant_secret s) THEN
    RAISE EXCEPTION 'ratchet: the proof does not admit this session to tenant %', tenant USING ERRCODE = '28000';
  END IF;
  INSERT INTO ratchet.tenant_sessions AS s (pid, backend_start, tenant_id) VALUES (pg_backend_pid(), started, tenant)
  ON CONFLICT (pid) DO UPDATE SET backend_start = EXCLUDED.backend_start, tenant_id = EXCLUDED.tenant_id;
END
$$;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."leave_tenant_at"(started timestamptz) RETURNS void
  LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
  AS $$ DELETE FROM ratchet.tenant_sessions WHERE pid = pg_backend_pid() $$;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."session_tenant_at"(started timestamptz) RETURNS uuid
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog
  AS $$ SELECT s.tenant_id FROM ratchet.tenant_sessions s WHERE s.pid = pg_backend_pid() AND s.backend_start = started $$;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."backend_start"() RETURNS timestamptz
  LANGUAGE sql STABLE SET search_path = pg_catalog
  AS $$ SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a $$;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."enter_tenant"(tenant uuid, proof text) RETURNS void
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT ratchet.enter_tenant_at(tenant, proof, ratchet.backend_start()) $$;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."leave_tenant"() RETURNS void
  LANGUAGE sql SET search_path = pg_catalog
  AS $$ SELECT ratchet.leave_tenant_at(ratchet.backend_start()) $$;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."session_tenant"() RETURNS uuid
  LANGUAGE sql STABLE SET search_path = pg_catalog
  AS $$ SELECT ratchet.session_tenant_at(ratchet.backend_start()) $$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION "ratchet"."enter_tenant_at"(uuid, text, timestamptz), "ratchet"."leave_tenant_at"(timestamptz),
  "ratchet"."session_tenant_at"(timestamptz) FROM PUBLIC;
--> statement-breakpoint
DO $$
DECLARE
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['tasks', 'operations', 'events', 'outbox', 'contracts', 'signals', 'schedules', 'idempotency_keys', 'tenant_purges'] LOOP
    EXECUTE format('ALTER TABLE ratchet.%I ENABLE ROW LEVEL SECURITY', t);
    -- Evaluated once per statement (an initplan), not per row.
    EXECUTE format('CREATE POLICY tenant_isolation ON ratchet.%I USING (tenant_id = (SELECT ratchet.session_tenant())) '
                   'WITH CHECK (tenant_id = (SELECT ratchet.session_tenant()))', t);
  END LOOP;
  IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ratchet_app') THEN
    GRANT USAGE ON SCHEMA ratchet TO ratchet_app;
    GRANT SELECT ON ratchet.tasks, ratchet.operations, ratchet.events, ratchet.outbox, ratchet.contracts, ratchet.signals,
                    ratchet.schedules, ratchet.idempotency_keys, ratchet.tenant_purges TO ratchet_app;
    GRANT EXECUTE ON FUNCTION ratchet.enter_tenant_at(uuid, text, timestamptz), ratchet.leave_tenant_at(timestamptz),
                              ratchet.session_tenant_at(timestamptz) TO ratchet_app;
  END IF;
END
$$;
