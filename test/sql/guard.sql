-- pg::Call (include/statesman/pg/guard.hpp): a C++ exception thrown inside it leaves
-- PG_exception_stack and error_context_stack as they were, and an ERROR after it, in the same
-- call and in the next statements of the same backend, is caught where it should be.
CREATE FUNCTION pg_temp.check_call_guard() RETURNS boolean
    LANGUAGE c STRICT AS 'statesman', 'statesman_check_call_guard';
SELECT pg_temp.check_call_guard() AS restored;
-- The next ERRORs of this backend are reported and caught as usual.
SELECT 1 / 0;
DO $$ BEGIN PERFORM 1 / 0; EXCEPTION WHEN division_by_zero THEN RAISE NOTICE 'caught'; END $$;
SELECT pg_temp.check_call_guard() AS restored_again;
