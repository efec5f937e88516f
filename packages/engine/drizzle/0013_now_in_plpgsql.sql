-- ratchet.now() in PL/pgSQL, same value and volatility. As a SQL function it can never be inlined
-- (its body reads ratchet.clock), and before PostgreSQL 18 a SQL function that is not inlined is
-- parsed and planned again at every call site of every statement: about 26 µs a call on 15, and
-- a step's checkpoint calls it three to five times. PL/pgSQL keeps the plan of its query for the
-- session: about 4 µs a call on 15, and no slower than the SQL function on 18. STABLE keeps it
-- usable as an index condition (`due_at <= ratchet.now()`), evaluated once per scan, and its
-- query reads the clock with the calling statement's snapshot, as before.
CREATE OR REPLACE FUNCTION "ratchet"."now"() RETURNS timestamptz
  LANGUAGE plpgsql STABLE PARALLEL SAFE
  AS $$ BEGIN RETURN statement_timestamp() + coalesce((SELECT shift FROM ratchet.clock WHERE single), interval '0'); END $$;
