-- Hand-written: what drizzle cannot express.

-- The engine's only source of time. statement_timestamp() keeps it STABLE, so index quals such
-- as `due_at <= ratchet.now()` are evaluated once per statement and can use tasks_due. Tests
-- shift time by updating ratchet.clock.shift; production leaves it at zero.
INSERT INTO "ratchet"."clock" ("single", "shift") VALUES (true, interval '0') ON CONFLICT DO NOTHING;
--> statement-breakpoint
CREATE FUNCTION "ratchet"."now"() RETURNS timestamptz
  LANGUAGE sql STABLE PARALLEL SAFE
  AS $$ SELECT statement_timestamp() + coalesce((SELECT shift FROM ratchet.clock WHERE single), interval '0') $$;
--> statement-breakpoint

-- events is append-only. UPDATE and TRUNCATE are refused always; DELETE only inside a
-- transaction where the engine's purge or retention code ran
--   SELECT set_config('ratchet.allow_event_delete', 'on', true)
-- (transaction-local). Application roles additionally get no UPDATE, DELETE or TRUNCATE
-- privilege on the table (tenancy migration), so the flag is not an escape hatch for them.
CREATE FUNCTION "ratchet"."events_append_only"() RETURNS trigger
  LANGUAGE plpgsql
  AS $$
BEGIN
  IF TG_OP = 'DELETE' AND coalesce(current_setting('ratchet.allow_event_delete', true), '') = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'ratchet.events is append-only: % is not allowed', TG_OP
    USING ERRCODE = 'RT001',
          HINT = 'Events are deleted only with their run, by tenant purge or retention.';
END
$$;
--> statement-breakpoint
CREATE TRIGGER "events_append_only_rows"
  BEFORE UPDATE OR DELETE ON "ratchet"."events"
  FOR EACH ROW EXECUTE FUNCTION "ratchet"."events_append_only"();
--> statement-breakpoint
CREATE TRIGGER "events_append_only_truncate"
  BEFORE TRUNCATE ON "ratchet"."events"
  FOR EACH STATEMENT EXECUTE FUNCTION "ratchet"."events_append_only"();
