-- Hand-written: a contract's status moves only through the engine's commit, and what was sealed
-- never changes. Commit re-hashes the body anyway (tamper detection for writers that bypass this
-- trigger, such as a superuser with session_replication_role = replica).
CREATE FUNCTION "ratchet"."contracts_guard"() RETURNS trigger
  LANGUAGE plpgsql
  AS $$
BEGIN
  IF NEW.tenant_id IS DISTINCT FROM OLD.tenant_id OR NEW.id IS DISTINCT FROM OLD.id
     OR NEW.task_id IS DISTINCT FROM OLD.task_id OR NEW.idempotency_key IS DISTINCT FROM OLD.idempotency_key
     OR NEW.body IS DISTINCT FROM OLD.body OR NEW.body_hash IS DISTINCT FROM OLD.body_hash
     OR NEW.contract_version IS DISTINCT FROM OLD.contract_version OR NEW.agent_id IS DISTINCT FROM OLD.agent_id THEN
    RAISE EXCEPTION 'ratchet.contracts: a sealed contract''s body, hash and identity never change'
      USING ERRCODE = 'RT002';
  END IF;
  IF OLD.status <> 'sealed' THEN
    RAISE EXCEPTION 'ratchet.contracts: contract % is already %; it cannot change', OLD.id, OLD.status
      USING ERRCODE = 'RT002';
  END IF;
  IF NEW.status NOT IN ('committed', 'failed') THEN
    RAISE EXCEPTION 'ratchet.contracts: a sealed contract may only become committed or failed, not %', NEW.status
      USING ERRCODE = 'RT002';
  END IF;
  -- Only the engine's commit settles a contract: its settling statement names the contract in a
  -- transaction-local setting. A hand-run UPDATE (a debugging session, an admin tool) is refused.
  IF coalesce(current_setting('ratchet.settling_contract', true), '') <> OLD.id::text THEN
    RAISE EXCEPTION 'ratchet.contracts: contract % is settled only by the engine''s commit', OLD.id
      USING ERRCODE = 'RT002';
  END IF;
  RETURN NEW;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "contracts_guard"
  BEFORE UPDATE ON "ratchet"."contracts"
  FOR EACH ROW EXECUTE FUNCTION "ratchet"."contracts_guard"();
