-- Hand-written: a child run that settles wakes its parent, whatever settled it (its worker, a
-- cancel, an operator). The parent's signal counter moves (a parent moving to `waiting` at that
-- moment fails its conditional move and looks again), a suspended parent becomes due now, and
-- the workers that serve it and a running parent's own worker are notified.
CREATE FUNCTION "ratchet"."wake_parent"() RETURNS trigger
  LANGUAGE plpgsql
  AS $$
DECLARE
  parent_workflow text;
BEGIN
  UPDATE "ratchet"."tasks" p
     SET signal_seq = p.signal_seq + 1,
         due_at = CASE WHEN p.state IN ('sleeping', 'waiting') THEN "ratchet"."now"() ELSE p.due_at END,
         updated_at = "ratchet"."now"()
   WHERE p.tenant_id = NEW.tenant_id AND p.id = NEW.parent_id
     AND p.state NOT IN ('completed', 'failed', 'cancelled')
  RETURNING CASE WHEN p.state IN ('sleeping', 'waiting') THEN p.workflow_name END INTO parent_workflow;
  PERFORM pg_notify('ratchet_signal', NEW.parent_id::text);
  IF parent_workflow IS NOT NULL THEN
    PERFORM pg_notify('ratchet_work', parent_workflow);
  END IF;
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "tasks_wake_parent"
  AFTER UPDATE OF state ON "ratchet"."tasks"
  FOR EACH ROW
  WHEN (NEW.parent_id IS NOT NULL AND NEW.state IN ('completed', 'failed', 'cancelled') AND OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION "ratchet"."wake_parent"();
