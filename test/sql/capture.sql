-- Capturing existing tables (docs/capture.md): every row-to-record rule, every refusal with its
-- SQLSTATE and nothing written, keys that never collide, rollbacks that leave nothing.
SET client_min_messages = warning;

-- The SQLSTATE and message of a statement that must fail ('ok' when it did not).
CREATE FUNCTION pg_temp.refused(statement text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE statement;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- The records of a root, in order, with the payload as jsonb.
CREATE FUNCTION pg_temp.records(r text) RETURNS TABLE (address text, revision bigint, operation text,
    payload jsonb, metadata jsonb) LANGUAGE sql AS $$
    SELECT h.address, h.revision, h.operation, convert_from(h.payload, 'UTF8')::jsonb, h.metadata
    FROM statesman.history h WHERE h.root = r ORDER BY h.id
$$;
CREATE FUNCTION pg_temp.written() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM statesman.history $$;

CREATE ROLE regress_capture_owner;
CREATE ROLE regress_capture_writer;
CREATE ROLE regress_capture_other;
GRANT CREATE, USAGE ON SCHEMA public TO regress_capture_owner;
CREATE TABLE public.cap_accounts (id integer PRIMARY KEY, name text, balance numeric, note text);
ALTER TABLE public.cap_accounts OWNER TO regress_capture_owner;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.cap_accounts TO regress_capture_writer;
INSERT INTO public.cap_accounts VALUES (1, 'first', 10, NULL);

-- Who may capture: capture_table is not for PUBLIC; a grantee must own the table.
SET ROLE regress_capture_owner;
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_accounts')$$);
RESET ROLE;
GRANT EXECUTE ON FUNCTION statesman.capture_table(regclass, text, text[], text[], text),
    statesman.release_table(regclass), statesman.backfill_table(regclass, integer)
    TO regress_capture_owner, regress_capture_other;
SET ROLE regress_capture_other;
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_accounts')$$);
RESET ROLE;
-- Nobody aims the trigger function at a table itself: CREATE TRIGGER needs EXECUTE on it.
SET ROLE regress_capture_owner;
SELECT pg_temp.refused($$CREATE TRIGGER t AFTER INSERT ON public.cap_accounts FOR EACH ROW
                         EXECUTE FUNCTION statesman._capture_row()$$);
RESET ROLE;

-- Refusals of capture_table, each with nothing written.
CREATE TABLE public.cap_nokey (a integer, b text);
CREATE VIEW public.cap_view AS SELECT 1 AS x;
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey')$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey', key => ARRAY['c'])$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey', key => '{}')$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey', key => ARRAY['a', 'a'])$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey', key => ARRAY['a'], columns => ARRAY['z'])$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey', key => ARRAY['a'], partition_column => 'z')$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_nokey', 'bad root', ARRAY['a'])$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_view')$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table('statesman.outboxes')$$);
SELECT pg_temp.refused($$SELECT statesman.capture_table(NULL)$$);
SELECT count(*) AS captures FROM statesman.captured_tables;
SELECT count(*) AS capture_triggers FROM pg_trigger
WHERE tgfoid IN ('statesman._capture_row()'::regprocedure, 'statesman._capture_truncate()'::regprocedure);

-- The owner captures its table; the view shows it.
SET ROLE regress_capture_owner;
SELECT statesman.capture_table('public.cap_accounts');
RESET ROLE;
SELECT "table", root, key, columns, partition_column, since <= now() AS since_ok FROM statesman.captured_tables;
SELECT pg_temp.refused($$SELECT statesman.capture_table('public.cap_accounts', 'other')$$);
SELECT count(*) AS captures FROM statesman.captured_tables;

-- What each statement appends. The writer has no EXECUTE on the append functions: the
-- trigger appends for it, to the table's root only.
SET ROLE regress_capture_writer;
SELECT pg_temp.refused($$SELECT statesman.append('cap_accounts', 'x', '{}')$$);
INSERT INTO public.cap_accounts VALUES (2, 'second', 20, 'n');
UPDATE public.cap_accounts SET balance = 21 WHERE id = 2;       -- a put, op update
UPDATE public.cap_accounts SET balance = 21 WHERE id = 2;       -- nothing changed: nothing appended
UPDATE public.cap_accounts SET id = 3 WHERE id = 2;             -- key change: tombstone + put
DELETE FROM public.cap_accounts WHERE id = 3;                   -- tombstone
BEGIN;
INSERT INTO public.cap_accounts VALUES (9, 'rolled back', 0, NULL);
UPDATE public.cap_accounts SET note = 'rolled back' WHERE id = 1;
ROLLBACK;
RESET ROLE;
SELECT * FROM pg_temp.records('cap_accounts');

-- session_replication_role = replica: the capture trigger fires all the same (ENABLE ALWAYS).
SET session_replication_role = replica;
INSERT INTO public.cap_accounts VALUES (4, 'replica', 40, NULL);
RESET session_replication_role;
SELECT address, operation, metadata->>'op' AS op FROM pg_temp.records('cap_accounts') WHERE address = 'cap_accounts/4';
-- A put's payload is the row as to_jsonb gives it.
SELECT r.payload = to_jsonb(a) AS payload_is_the_row
FROM pg_temp.records('cap_accounts') r JOIN public.cap_accounts a ON r.address = 'cap_accounts/' || a.id;

-- DDL and TRUNCATE that would lose changes are refused, and write nothing.
SELECT pg_temp.written() AS before \gset
SET ROLE regress_capture_owner;
SELECT pg_temp.refused($$TRUNCATE public.cap_accounts$$);
SELECT pg_temp.refused($$ALTER TABLE public.cap_accounts DROP COLUMN id$$);
SELECT pg_temp.refused($$ALTER TABLE public.cap_accounts RENAME COLUMN id TO ident$$);
SELECT pg_temp.refused($$ALTER TABLE public.cap_accounts DISABLE TRIGGER statesman_capture$$);
SELECT pg_temp.refused($$ALTER TABLE public.cap_accounts DISABLE TRIGGER ALL$$);
SELECT pg_temp.refused($$ALTER TABLE public.cap_accounts ENABLE TRIGGER statesman_capture$$);
SELECT pg_temp.refused($$ALTER TABLE public.cap_accounts ENABLE REPLICA TRIGGER statesman_capture$$);
SELECT pg_temp.refused($$DROP TRIGGER statesman_capture ON public.cap_accounts$$);
SELECT pg_temp.refused($$DROP TRIGGER statesman_capture_truncate ON public.cap_accounts$$);
-- Other DDL goes through: a new column is in the payloads from then on; a renamed capture
-- trigger is still found by its function.
ALTER TABLE public.cap_accounts ADD COLUMN extra integer DEFAULT 7;
ALTER TRIGGER statesman_capture ON public.cap_accounts RENAME TO capture_renamed;
RESET ROLE;
SELECT pg_temp.written() - :before AS written_by_refusals, count(*) AS rows FROM public.cap_accounts;
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'public.cap_accounts'::regclass ORDER BY tgname;
UPDATE public.cap_accounts SET balance = 11 WHERE id = 1;
SELECT revision, payload FROM pg_temp.records('cap_accounts') WHERE address = 'cap_accounts/1';

-- Only the captured columns: an UPDATE of another column appends nothing. A partition column
-- puts the row into its partition; a change of it moves the row (tombstone + put).
CREATE TABLE public.cap_orders (region text, num integer, status text, secret text,
                                PRIMARY KEY (region, num));
SELECT statesman.capture_table('public.cap_orders', 'orders', ARRAY['num'], ARRAY['num', 'status'],
                               partition_column => 'region');
INSERT INTO public.cap_orders VALUES ('eu', 1, 'new', 's1');
UPDATE public.cap_orders SET secret = 's2';                 -- not captured: nothing
UPDATE public.cap_orders SET status = 'paid';               -- a put
UPDATE public.cap_orders SET region = 'us';                 -- moved: tombstone in eu, put in us
SELECT * FROM pg_temp.records('orders');
SELECT count(*) AS payloads_with_secret FROM pg_temp.records('orders') WHERE payload ? 'secret';

-- Keys: each value escaped ('%' as %25, '/' as %2F, '' as %00), joined with '/': distinct keys
-- never share a path, whatever '/', '%', quotes or Unicode they hold.
CREATE TABLE public.cap_keys (a text, b text, v integer, PRIMARY KEY (a, b));
SELECT statesman.capture_table('public.cap_keys', 'keys');
INSERT INTO public.cap_keys VALUES
    ('a/b', 'c', 1), ('a', 'b/c', 2), ('a%2Fb', 'c', 3), ('a%', '2Fb/c', 4), ('', '', 5), ('', '%00', 6),
    ('%00', '', 7), ('it''s', '"q"', 8), ('café', 'ü/é', 9), ('cafe', 'u/e', 10), ('x', '', 11), ('x/', '', 12);
SELECT r.address, (r.payload->>'v')::int AS v FROM pg_temp.records('keys') r ORDER BY v;
SELECT count(*) AS rows, count(DISTINCT r.address) AS addresses FROM pg_temp.records('keys') r;

-- A custom key whose value is NULL: the statement fails (23502) and nothing is written.
CREATE TABLE public.cap_custom (code text, v integer);
SELECT statesman.capture_table('public.cap_custom', 'custom', key => ARRAY['code']);
SELECT pg_temp.written() AS before \gset
SELECT pg_temp.refused($$INSERT INTO public.cap_custom VALUES ('ok', 1), (NULL, 2)$$);
SELECT pg_temp.written() - :before AS written, count(*) AS rows FROM public.cap_custom;
-- A key value too long for a path: refused by the append's rule, nothing written.
SELECT pg_temp.refused($$INSERT INTO public.cap_custom VALUES (repeat('k', 1100), 1)$$);
SELECT pg_temp.written() - :before AS written;

-- backfill_table: not in a transaction block (nor a subtransaction, so not through
-- pg_temp.refused), not for a table that is not captured, not for another role's table.
\set VERBOSITY sqlstate
BEGIN;
SELECT statesman.backfill_table('public.cap_accounts');
ROLLBACK;
SELECT pg_temp.refused($$SELECT statesman.backfill_table('public.cap_accounts')$$);
SELECT statesman.backfill_table('public.cap_nokey');
SELECT statesman.backfill_table('public.cap_accounts', 0);
SET ROLE regress_capture_other;
SELECT statesman.backfill_table('public.cap_accounts');
RESET ROLE;
\set VERBOSITY default
SELECT count(*) AS progress_rows FROM statesman.capture_backfills;
-- Each current row once, op backfill, in batches (of 2 here); again from the start when run again.
SELECT statesman.backfill_table('public.cap_accounts', 2);
SELECT address, operation, metadata->>'op' AS op, payload = (SELECT to_jsonb(a) FROM public.cap_accounts a
                                                              WHERE r.address = 'cap_accounts/' || a.id) AS is_row
FROM pg_temp.records('cap_accounts') r WHERE metadata->>'op' = 'backfill';
SELECT backfilled_rows, backfill_batches, backfill_after_key, backfill_finished_at IS NOT NULL AS finished
FROM statesman.captured_tables WHERE "table" = 'public.cap_accounts'::regclass;
SELECT statesman.backfill_table('public.cap_accounts');
-- An interrupted backfill (its progress says: after key 1, not finished) resumes after that key.
UPDATE statesman.capture_backfills SET after_key = '{1}', rows_done = 1, batches = 1, finished_at = NULL;
SELECT max(id) AS last_id FROM statesman.history \gset
SELECT statesman.backfill_table('public.cap_accounts', 1) AS resumed_rows;
SELECT address, metadata->>'op' AS op FROM statesman.history WHERE id > :last_id ORDER BY id;
SELECT backfilled_rows, backfill_after_key, backfill_finished_at IS NOT NULL AS finished
FROM statesman.captured_tables WHERE "table" = 'public.cap_accounts'::regclass;

-- release_table: the owner's; afterwards the table's writes append nothing.
SELECT pg_temp.refused($$SELECT statesman.release_table('public.cap_nokey')$$);
SET ROLE regress_capture_other;
SELECT pg_temp.refused($$SELECT statesman.release_table('public.cap_accounts')$$);
RESET ROLE;
SET ROLE regress_capture_owner;
SELECT statesman.release_table('public.cap_accounts');
RESET ROLE;
SELECT pg_temp.written() AS before \gset
INSERT INTO public.cap_accounts VALUES (5, 'released', 50, NULL);
TRUNCATE public.cap_accounts;
SELECT pg_temp.written() - :before AS written_after_release;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'public.cap_accounts'::regclass;

-- Dropping a captured table forgets its capture.
DROP TABLE public.cap_orders;
SELECT "table" FROM statesman.captured_tables ORDER BY 1::text;

DROP TABLE public.cap_accounts, public.cap_keys, public.cap_custom, public.cap_nokey;
DROP VIEW public.cap_view;
SELECT count(*) AS captures FROM statesman.captured_tables;
REVOKE ALL ON SCHEMA public FROM regress_capture_owner;
REVOKE ALL ON FUNCTION statesman.capture_table(regclass, text, text[], text[], text),
    statesman.release_table(regclass), statesman.backfill_table(regclass, integer)
    FROM regress_capture_owner, regress_capture_other;
DROP ROLE regress_capture_owner;
DROP ROLE regress_capture_writer;
DROP ROLE regress_capture_other;
