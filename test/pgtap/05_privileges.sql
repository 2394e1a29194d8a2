-- Privileges and hijacking (docs/design.md §8; docs/operations.md "Privileges",
-- docs/sql-reference.md "Privileges", "Conventions").
--
-- 01_catalog.sql and 03_outbox.sql check the grants in the catalog and act
-- out a role without grants against the outbox functions and tables;
-- test/sql/bad_input.sql does the same for the store and cursor functions;
-- test/sql/hijack.sql plants a hostile "=" and clock_timestamp() in front of
-- append_bytes().  This file adds:
--   1. the install script: CREATE EXTENSION refuses a schema "statesman" that
--      a non-superuser created beforehand (its owner could rename it and put
--      functions of its own where every statesman function, run as the
--      extension owner, looks them up), and a hostile search_path with
--      capturing objects does not reach into it;
--   2. every function executable by PUBLIC is one the documentation lists,
--      or a helper that touches no table; every SQL or PL/pgSQL function pins
--      search_path;
--   3. a role without grants can use every function documented for PUBLIC,
--      and nothing else: it cannot write the ledger or read its payloads
--      (append*, read_feed, history, current), and sequence_feed() and the
--      0.3.0 delivery internals refuse it;
--   4. granted roles get what the documentation says: a writer with the
--      append functions, a feed reader with read_feed/history/current, an
--      operator with the outbox functions, a consumer with advance_cursor, a
--      reader with SELECT on the target table, a pg_monitor member with
--      outbox_status; a consumer's position belongs to the role that stored
--      it: another role cannot move it (42501);
--   5. sink secrets (a redis password, a password in a postgres conninfo) are
--      not readable through the tables, the status view, error messages or a
--      failed delivery's last_error; alter_outbox replaces options whole, so
--      a grantee cannot send the stored password to a host of its choosing;
--   6. hostile functions, aggregates and operators, in a schema ahead of
--      pg_catalog on the search_path, are never called by any statesman
--      function, whether the owner or a role without grants calls it (every
--      trap records its calls).
-- Everything is rolled back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
DROP EXTENSION IF EXISTS statesman CASCADE;
SELECT plan(111);

CREATE ROLE pgtap_sm_squatter;
CREATE ROLE pgtap_sm_nobody;
CREATE ROLE pgtap_sm_ops;
CREATE ROLE pgtap_sm_consumer;
CREATE ROLE pgtap_sm_reader;
CREATE ROLE pgtap_sm_monitor IN ROLE pg_monitor;
CREATE ROLE pgtap_sm_writer;
CREATE ROLE pgtap_sm_feedreader;
CREATE ROLE pgtap_sm_other;

-- Runs a statement that must be refused; one that succeeds is rolled back and
-- reported as P0001, so the checks after it see the state from before.
CREATE FUNCTION pg_temp.refused(stmt text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RAISE EXCEPTION 'no error (the statement succeeded and was rolled back): %', stmt;
END $$;

-- The whole error a statement raises (SQLSTATE, message, detail, hint,
-- context) as a client calling it directly would get it, or 'no error'.
CREATE FUNCTION pg_temp.error_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    st text; msg text; det text; hnt text; ctx text;
BEGIN
    EXECUTE stmt;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
                            hnt = PG_EXCEPTION_HINT, ctx = PG_EXCEPTION_CONTEXT;
    -- The context ends with this function's own statement, which quotes the
    -- caller's arguments; a client calling directly does not get that line.
    IF strpos(ctx, 'SQL statement "' || stmt) > 0 THEN
        ctx := left(ctx, strpos(ctx, 'SQL statement "' || stmt) - 1);
    END IF;
    RETURN concat_ws(E'\n', st, msg, det, hnt, ctx);
END $$;

--
-- 1. The install script
--
-- A schema squatted by a role that may create schemas in this database.
GRANT CREATE ON DATABASE postgres TO pgtap_sm_squatter;
SET ROLE pgtap_sm_squatter;
CREATE SCHEMA statesman;
RESET ROLE;
SELECT throws_ok($$SELECT pg_temp.refused('CREATE EXTENSION statesman')$$, '42501', NULL,
    'CREATE EXTENSION refuses a schema statesman created beforehand by a role that is not a superuser: 42501');
DROP SCHEMA statesman;
REVOKE CREATE ON DATABASE postgres FROM pgtap_sm_squatter;

-- Hostile objects for the rest of this file: each records its calls in
-- evil.captured, then does what the pg_catalog object it shadows does.
CREATE SCHEMA evil;
CREATE TABLE evil.captured (what text);
GRANT USAGE ON SCHEMA evil TO PUBLIC;
GRANT INSERT, SELECT ON evil.captured TO PUBLIC;
DO $do$
DECLARE
    f record;
    o record;
    n integer := 0;
BEGIN
    -- Functions the statesman code calls (or could call) by their bare names.
    FOR f IN SELECT * FROM (VALUES
        ('lower', 'text', 'text', 'pg_catalog.lower($1)'),
        ('upper', 'text', 'text', 'pg_catalog.upper($1)'),
        ('now', '', 'timestamptz', 'pg_catalog.now()'),
        ('clock_timestamp', '', 'timestamptz', 'pg_catalog.clock_timestamp()'),
        ('gen_random_uuid', '', 'uuid', 'pg_catalog.gen_random_uuid()'),
        ('current_database', '', 'name', 'pg_catalog.current_database()'),
        ('hashtext', 'text', 'integer', 'pg_catalog.hashtext($1)'),
        ('pg_backend_pid', '', 'integer', 'pg_catalog.pg_backend_pid()'),
        ('pg_try_advisory_xact_lock', 'integer, integer', 'boolean', 'pg_catalog.pg_try_advisory_xact_lock($1, $2)'),
        ('pg_try_advisory_lock', 'integer, integer', 'boolean', 'pg_catalog.pg_try_advisory_lock($1, $2)'),
        ('pg_advisory_unlock', 'integer, integer', 'boolean', 'pg_catalog.pg_advisory_unlock($1, $2)'),
        ('nextval', 'regclass', 'bigint', 'pg_catalog.nextval($1)'),
        ('set_config', 'text, text, boolean', 'text', 'pg_catalog.set_config($1, $2, $3)'),
        ('octet_length', 'text', 'integer', 'pg_catalog.octet_length($1)'),
        ('octet_length', 'bytea', 'integer', 'pg_catalog.octet_length($1)'),
        ('jsonb_typeof', 'jsonb', 'text', 'pg_catalog.jsonb_typeof($1)'),
        ('jsonb_build_object', 'text, text', 'jsonb', 'pg_catalog.jsonb_build_object($1, $2)'),
        ('parse_ident', 'text, boolean DEFAULT true', 'text[]', 'pg_catalog.parse_ident($1, $2)'),
        ('to_regclass', 'text', 'regclass', 'pg_catalog.to_regclass($1)'),
        ('format', 'text, text', 'text', 'pg_catalog.format($1, $2)'),
        ('format', 'text, text, text', 'text', 'pg_catalog.format($1, $2, $3)'),
        ('array_to_string', 'anyarray, text', 'text', 'pg_catalog.array_to_string($1, $2)'),
        ('cardinality', 'anyarray', 'integer', 'pg_catalog.cardinality($1)'),
        ('encode', 'bytea, text', 'text', 'pg_catalog.encode($1, $2)'),
        ('left', 'text, integer', 'text', 'pg_catalog.left($1, $2)'),
        ('current_setting', 'text', 'text', 'pg_catalog.current_setting($1)'),
        ('pg_notify', 'text, text', 'void', 'pg_catalog.pg_notify($1, $2)'),
        ('pg_advisory_xact_lock', 'integer, integer', 'void', 'pg_catalog.pg_advisory_xact_lock($1, $2)'),
        ('pg_advisory_xact_lock_shared', 'integer, integer', 'void', 'pg_catalog.pg_advisory_xact_lock_shared($1, $2)'),
        ('pg_terminate_backend', 'integer, bigint DEFAULT 0', 'boolean', 'false')
    ) AS v(name, args, rettype, expr) LOOP
        EXECUTE format(
            'CREATE FUNCTION evil.%I(%s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
             BEGIN
                 INSERT INTO evil.captured VALUES (%L);
                 %s %s;
             END $f$',
            f.name, f.args, f.rettype, f.name || '(' || f.args || ')',
            CASE WHEN f.rettype = 'void' THEN 'PERFORM' ELSE 'RETURN' END, f.expr);
    END LOOP;
    -- Operators, each through a recording function.
    FOR o IN SELECT * FROM (VALUES
        ('=', 'text', 'text', 'boolean'), ('<>', 'text', 'text', 'boolean'), ('||', 'text', 'text', 'text'),
        ('~', 'text', 'text', 'boolean'), ('!~', 'text', 'text', 'boolean'),
        ('=', 'bigint', 'bigint', 'boolean'), ('<', 'bigint', 'bigint', 'boolean'),
        ('>', 'bigint', 'bigint', 'boolean'), ('<=', 'bigint', 'bigint', 'boolean'),
        ('>=', 'bigint', 'bigint', 'boolean'), ('+', 'bigint', 'bigint', 'bigint'),
        ('-', 'bigint', 'bigint', 'bigint'), ('=', 'integer', 'integer', 'boolean'),
        ('<', 'integer', 'integer', 'boolean'), ('=', 'uuid', 'uuid', 'boolean'),
        ('?', 'jsonb', 'text', 'boolean'), ('->', 'jsonb', 'text', 'jsonb'), ('->>', 'jsonb', 'text', 'text'),
        ('-', 'timestamptz', 'timestamptz', 'interval'), ('-', 'timestamptz', 'interval', 'timestamptz'),
        ('<', 'timestamptz', 'timestamptz', 'boolean'), ('>=', 'timestamptz', 'timestamptz', 'boolean'),
        ('<', 'interval', 'interval', 'boolean'), ('>=', 'interval', 'interval', 'boolean'),
        ('=', 'boolean', 'boolean', 'boolean')
    ) AS v(op, lt, rt, rettype) LOOP
        n := n + 1;
        EXECUTE format(
            'CREATE FUNCTION evil.op_%s(%s, %s) RETURNS %s LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $f$
             BEGIN
                 INSERT INTO evil.captured VALUES (%L);
                 RETURN $1 OPERATOR(pg_catalog.%s) $2;
             END $f$',
            n, o.lt, o.rt, o.rettype, 'operator ' || o.op || '(' || o.lt || ', ' || o.rt || ')', o.op);
        EXECUTE format('CREATE OPERATOR evil.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = evil.op_%s)',
                       o.op, o.lt, o.rt, n);
    END LOOP;
END
$do$;
-- Aggregates.
CREATE FUNCTION evil.count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN INSERT INTO evil.captured VALUES ('count(*)'); RETURN $1 + 1; END $$;
CREATE AGGREGATE evil.count(*) (SFUNC = evil.count_step, STYPE = bigint, INITCOND = '0');
CREATE FUNCTION evil.max_step(bigint, bigint) RETURNS bigint LANGUAGE plpgsql AS $$
BEGIN INSERT INTO evil.captured VALUES ('max(bigint)'); RETURN greatest($1, $2); END $$;
CREATE AGGREGATE evil.max(bigint) (SFUNC = evil.max_step, STYPE = bigint);
CREATE AGGREGATE evil.min(bigint) (SFUNC = evil.max_step, STYPE = bigint);
CREATE FUNCTION evil.agg_step(text, text, text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO evil.captured VALUES ('string_agg(text, text)'); RETURN concat_ws($3, $1, $2); END $$;
CREATE AGGREGATE evil.string_agg(text, text) (SFUNC = evil.agg_step, STYPE = text);

-- Runs one statement with evil ahead of pg_catalog on the search_path;
-- returns the first column of a SELECT's first row as text.
CREATE FUNCTION pg_temp.under_evil(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    PERFORM pg_catalog.set_config('search_path', 'evil, pg_catalog, public', true);
    IF stmt OPERATOR(pg_catalog.~*) '^\s*select' THEN
        EXECUTE stmt INTO result;
    ELSE
        EXECUTE stmt;
    END IF;
    PERFORM pg_catalog.set_config('search_path', 'public, pg_catalog', true);
    RETURN result;
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.under_evil(text) TO PUBLIC;

-- The traps work: a bare call of each kind is captured.
SELECT is(pg_temp.under_evil($$SELECT lower('X') || count(*)::text || ('a'::text = 'b'::text)::text FROM (VALUES (1)) v$$),
    'x1false', 'the traps answer like the objects they shadow');
SELECT is((SELECT string_agg(what, ', ' ORDER BY what) FROM evil.captured),
    'count(*), lower(text), operator =(text, text), operator ||(text, text), operator ||(text, text)',
    'and record their calls (a bare lower(), count(*), = and || are captured)');
DELETE FROM evil.captured;

-- The install script runs with a hostile search_path in place: nothing captured.
SELECT lives_ok($$SELECT pg_temp.under_evil('CREATE EXTENSION statesman')$$,
    'CREATE EXTENSION statesman with evil ahead of pg_catalog on the search_path');
SELECT is((SELECT string_agg(DISTINCT what, ', ') FROM evil.captured), NULL,
    'the install script called none of the hostile objects');
SELECT is((SELECT count(*) FROM statesman.store), 1::bigint, 'the store row is there');
SELECT is((SELECT nspowner FROM pg_namespace WHERE nspname = 'statesman'),
    (SELECT extowner FROM pg_extension WHERE extname = 'statesman'),
    'schema statesman belongs to the extension owner');

--
-- 2. What PUBLIC may execute; pinned search_path everywhere
--
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND has_function_privilege('public', p.oid, 'EXECUTE')
         AND p.proname NOT IN ('store_info', 'address_of', 'head_position', 'cursor_position',
                               'mark_applied', 'already_applied', 'applied_position')
         AND NOT (p.proname LIKE '\_%' AND p.provolatile IN ('i', 's') AND NOT p.prosecdef)
         AND p.proname NOT IN ('_in_transaction_block', '_feed_status')
         AND NOT (p.proname IN ('_append_row', '_append_bytes_row', '_append_delete_row') AND NOT p.prosecdef)$$,
    'PUBLIC may execute only the documented functions (and _feed_status, behind the feed_status view; the '
    'append functions'' plain twins, which check EXECUTE on their declared function), '
    'and stable or immutable helpers that are not SECURITY DEFINER');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND p.prolang IN (SELECT oid FROM pg_language WHERE lanname IN ('sql', 'plpgsql'))
         AND NOT 'search_path=pg_catalog, pg_temp' = ANY (COALESCE(p.proconfig, '{}'))$$,
    'every SQL and PL/pgSQL function of the extension sets search_path = pg_catalog, pg_temp');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.prosecdef
         AND has_function_privilege('public', p.oid, 'EXECUTE')
         AND p.provolatile = 'v'
    $$,
    'no volatile SECURITY DEFINER function is open to PUBLIC');

--
-- Fixture, as the owner: records, an outbox into public.priv_sink, a cursor,
-- a redis and a postgres outbox whose options hold passwords.
--
DO $$
BEGIN
    PERFORM statesman.append('priv', 'p/' || g, jsonb_build_object('g', g)) FROM generate_series(1, 5) g;
    PERFORM statesman.sequence_feed();
    PERFORM statesman.create_outbox('priv-box', root => 'priv', sink_options => '{"table": "public.priv_sink"}');
    PERFORM statesman.advance_cursor('priv-reader', 2);
    PERFORM statesman.create_outbox('priv-redis', sink => 'redis',
        sink_options => '{"host": "127.0.0.1", "port": 1, "password": "redis-Secret-4711", "timeout_ms": 1000}');
    PERFORM statesman.create_outbox('priv-pg', sink => 'postgres',
        sink_options => '{"conninfo": "host=127.0.0.1 port=1 user=u password=pg-Secret-4712 connect_timeout=2", "table": "public.remote"}');
END $$;

--
-- 3. A role without grants
--
SET ROLE pgtap_sm_nobody;
SELECT throws_ok($$SELECT statesman.append('priv', 'nobody/1', '{"by": "nobody"}')$$, '42501', NULL, 'nobody: append() is refused: 42501');
SELECT throws_ok($$SELECT statesman.append_bytes('priv', 'nobody/2', '\x01', 'application/octet-stream')$$, '42501', NULL, 'nobody: append_bytes() is refused: 42501');
SELECT throws_ok($$SELECT statesman.append_delete('priv', 'nobody/1')$$, '42501', NULL, 'nobody: append_delete() is refused: 42501');
-- The plain twins the planner calls instead (open to PUBLIC) refuse as their declared functions do.
SELECT throws_ok($$SELECT statesman._append_row('priv', 'nobody/3', '{}', '', 'put', 'ok', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
    '42501', 'permission denied for function append', 'nobody: _append_row() called directly is refused as append() is: 42501');
SELECT throws_ok($$SELECT statesman._append_bytes_row('priv', 'nobody/3', '\x01', 'application/octet-stream', NULL, '', 'put', 'ok', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
    '42501', 'permission denied for function append_bytes', 'nobody: _append_bytes_row() called directly is refused: 42501');
SELECT throws_ok($$SELECT statesman._append_delete_row('priv', 'nobody/3', '', 'ok', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)$$,
    '42501', 'permission denied for function append_delete', 'nobody: _append_delete_row() called directly is refused: 42501');
SELECT throws_ok($$SELECT * FROM statesman.current('priv', 'p/1')$$, '42501', NULL, 'nobody: current() is refused: 42501');
SELECT throws_ok($$SELECT * FROM statesman.history('priv', 'p/1')$$, '42501', NULL, 'nobody: history() is refused: 42501');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(NULL, 100, 'priv')$$, '42501', NULL, 'nobody: read_feed() is refused: 42501');
SELECT is(statesman.head_position(), 5::bigint, 'nobody: head_position()');
SELECT is((SELECT head_position FROM statesman.store_info()), 5::bigint, 'nobody: store_info()');
SELECT is(statesman.address_of('Priv', 'p/1', 'eu'), 'priv@eu/p/1', 'nobody: address_of()');
SELECT is(statesman.cursor_position('priv-reader'), 2::bigint, 'nobody: cursor_position()');
SELECT is(statesman.mark_applied('nobody-consumer', 'feed', '00000000-0000-4000-8000-000000000001', 3), true, 'nobody: mark_applied()');
SELECT is(statesman.mark_applied('nobody-consumer', '{"store": "feed", "epoch": "00000000-0000-4000-8000-000000000001", "globalPosition": 4}'::jsonb),
    true, 'nobody: mark_applied(message)');
SELECT is(statesman.already_applied('nobody-consumer', 'feed', '00000000-0000-4000-8000-000000000001', 4), true, 'nobody: already_applied()');
SELECT is((SELECT position FROM statesman.applied_position('nobody-consumer', 'feed')), 4::bigint, 'nobody: applied_position()');
SELECT is((SELECT open_writers FROM statesman.feed_status), 1::bigint, 'nobody: feed_status (its own open appending transaction)');
SELECT throws_ok($$SELECT statesman.sequence_feed()$$, '42501', NULL, 'nobody: sequence_feed() is refused: 42501');
SELECT throws_ok($$SELECT * FROM statesman._feed_page(0, NULL, 5, NULL)$$, '42501', NULL, 'nobody: _feed_page() is refused: 42501');
SELECT throws_ok($$SELECT statesman._deliver_table_page('priv-box')$$, '42501', NULL, 'nobody: _deliver_table_page() is refused: 42501');
SELECT throws_ok($$SELECT statesman._finish_page('priv-box', 5, 5, 0)$$, '42501', NULL, 'nobody: _finish_page() is refused: 42501');
SELECT throws_ok($$SELECT * FROM statesman._requeued_messages('priv-box')$$, '42501', NULL, 'nobody: _requeued_messages() is refused: 42501');
SELECT throws_ok($$SELECT statesman._requeued_outcome('priv-box', '{1}', true, 1, 0, NULL)$$, '42501', NULL, 'nobody: _requeued_outcome() is refused: 42501');
SELECT throws_ok($$SELECT statesman._check_sink_options('redis', '{}')$$, '42501', NULL, 'nobody: _check_sink_options() is refused: 42501');
SELECT throws_ok($$SELECT statesman._move_cursor('priv-reader', 5)$$, '42501', NULL, 'nobody: _move_cursor() is refused: 42501');
SELECT throws_ok($$SELECT statesman._release_lease('priv-box')$$, '42501', NULL, 'nobody: _release_lease() is refused: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.store$$, '42501', NULL, 'nobody: statesman.store (the epoch) is not readable as a table: 42501');
SELECT throws_ok($$UPDATE statesman.store SET epoch = gen_random_uuid()$$, '42501', NULL, 'nobody: cannot change the epoch through the table: 42501');
SELECT throws_ok($$UPDATE statesman.cursors SET position = 1$$, '42501', NULL, 'nobody: cannot move cursors through the table: 42501');
SELECT throws_ok($$SELECT count(*) FROM public.priv_sink$$, '42501', NULL, 'nobody: the sink table statesman created is not readable: 42501');
RESET ROLE;
SELECT is(statesman.cursor_position('priv-reader'), 2::bigint, 'the cursor nobody tried to move is where it was');

--
-- 4. Granted roles
--
-- The GRANTs docs/operations.md "Privileges" gives for a writing and a reading role.
GRANT EXECUTE ON FUNCTION
    statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text, jsonb, text,
                     timestamptz, timestamptz),
    statesman.append_bytes(text, text, bytea, text, text, text, text, text, text, integer, text, text, text,
                           jsonb, text, timestamptz, timestamptz),
    statesman.append_delete(text, text, text, text, text, integer, text, text, text, jsonb, text,
                            timestamptz, timestamptz)
    TO pgtap_sm_writer;
GRANT EXECUTE ON FUNCTION
    statesman.read_feed(bigint, integer, text), statesman.history(text, text, text), statesman.current(text, text, text)
    TO pgtap_sm_feedreader;
SET ROLE pgtap_sm_writer;
SELECT lives_ok($$SELECT statesman.append('privw', 'w/1', '{"by": "writer"}')$$, 'writer (granted the append functions): append()');
SELECT lives_ok($$SELECT statesman.append_bytes('privw', 'w/2', '\x01', 'application/octet-stream')$$, 'writer: append_bytes()');
SELECT lives_ok($$SELECT statesman.append_delete('privw', 'w/1')$$, 'writer: append_delete()');
SELECT throws_ok($$SELECT * FROM statesman.read_feed(NULL, 100)$$, '42501', NULL, 'writer: read_feed() is not part of the grant: 42501');
-- A plan kept from before a REVOKE (it calls append()'s plain twin) refuses after it.
PREPARE priv_writer_append AS SELECT statesman.append('privw', 'w/3', '{"by": "writer"}');
SELECT lives_ok($$EXECUTE priv_writer_append$$, 'writer: a prepared append()');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) FROM pgtap_sm_writer;
SET ROLE pgtap_sm_writer;
SELECT throws_ok($$EXECUTE priv_writer_append$$, '42501', 'permission denied for function append',
    'writer: after the REVOKE, the prepared append() is refused: 42501');
DEALLOCATE priv_writer_append;
RESET ROLE;
GRANT EXECUTE ON FUNCTION statesman.append(text, text, jsonb, text, text, text, text, integer, text, text, text,
    jsonb, text, timestamptz, timestamptz) TO pgtap_sm_writer;
SELECT is((SELECT count(*) FROM statesman.history WHERE root = 'privw' AND path = 'w/3'), 1::bigint,
    'writer: the prepared append() wrote once, before the REVOKE');
SELECT is((SELECT count(*) FROM statesman.history WHERE path = 'nobody/3'), 0::bigint,
    'nobody: the plain twins wrote nothing');
SET ROLE pgtap_sm_feedreader;
SELECT is((SELECT count(*) FROM statesman.read_feed(NULL, 100, 'priv')), 5::bigint,
    'feed reader (granted read_feed, history, current): read_feed() (inside a transaction block: what is sequenced)');
SELECT is((SELECT revision FROM statesman.current('privw', 'w/1')), 2::bigint, 'feed reader: current()');
SELECT is((SELECT count(*) FROM statesman.history('privw', 'w/1')), 2::bigint, 'feed reader: history()');
SELECT throws_ok($$SELECT statesman.append('privw', 'r/1', '{}')$$, '42501', NULL, 'feed reader: append() is not part of the grant: 42501');
RESET ROLE;
-- Consumer positions belong to the role that stored them first.
SET ROLE pgtap_sm_other;
SELECT throws_ok($$SELECT statesman.mark_applied('nobody-consumer', 'feed', '00000000-0000-4000-8000-000000000001', 9)$$,
    '42501', 'consumer "nobody-consumer" of feed "feed" belongs to role "pgtap_sm_nobody"',
    'other: mark_applied() of a consumer another role stored is refused: 42501');
SELECT lives_ok($$UPDATE statesman.applied SET position = 99 WHERE consumer = 'nobody-consumer'$$,
    'other: an UPDATE of statesman.applied runs');
SELECT is((SELECT position FROM statesman.applied_position('nobody-consumer', 'feed')), 4::bigint,
    '... but moves nothing of another role''s (row-level security); the position stays');
SELECT is(statesman.mark_applied('other-consumer', 'feed', '00000000-0000-4000-8000-000000000001', 1), true,
    'other: keeps a consumer of its own');
RESET ROLE;
GRANT EXECUTE ON FUNCTION
    statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean),
    statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean),
    statesman.pause_outbox(text), statesman.resume_outbox(text), statesman.drop_outbox(text)
    TO pgtap_sm_ops;
GRANT EXECUTE ON FUNCTION statesman.advance_cursor(text, bigint) TO pgtap_sm_consumer;
GRANT SELECT ON public.priv_sink TO pgtap_sm_reader;

SET ROLE pgtap_sm_ops;
SELECT lives_ok($$SELECT statesman.create_outbox('ops-box', root => 'priv', sink_options => '{"table": "public.ops_sink"}')$$,
    'ops (granted create_outbox): registers an outbox');
SELECT lives_ok($$SELECT statesman.alter_outbox('ops-box', batch_size => 10)$$, 'ops: alters it');
SELECT lives_ok($$SELECT statesman.pause_outbox('ops-box')$$, 'ops: pauses it');
SELECT lives_ok($$SELECT statesman.resume_outbox('ops-box')$$, 'ops: resumes it');
SELECT throws_ok($$SELECT count(*) FROM statesman.outboxes$$, '42501', NULL, 'ops: still cannot read statesman.outboxes: 42501');
SELECT throws_ok($$SELECT statesman.seed_cursor('ops-box')$$, '42501', NULL, 'ops: seed_cursor() is not part of the grant: 42501');
SELECT throws_ok($$SELECT * FROM statesman.dispatch_once('ops-box')$$, '42501', NULL, 'ops: dispatch_once() is not part of the grant: 42501');
RESET ROLE;
SELECT is((SELECT relowner FROM pg_class WHERE oid = 'public.ops_sink'::regclass),
    (SELECT extowner FROM pg_extension WHERE extname = 'statesman'),
    'the target table ops had created belongs to the extension owner');
SELECT is((SELECT batch_size FROM statesman.outboxes WHERE outbox_id = 'ops-box'), 10, 'ops''s change is stored');
SET ROLE pgtap_sm_ops;
SELECT lives_ok($$SELECT statesman.drop_outbox('ops-box')$$, 'ops: drops it');
RESET ROLE;

SET ROLE pgtap_sm_consumer;
SELECT is(statesman.advance_cursor('priv-reader', 4), true, 'consumer (granted advance_cursor): moves a cursor forward');
SELECT throws_ok($$SELECT statesman.seed_cursor('priv-reader', 1)$$, '42501', NULL, 'consumer: cannot move it back with seed_cursor(): 42501');
SELECT throws_ok($$SELECT statesman.reset_epoch()$$, '42501', NULL, 'consumer: cannot change the epoch: 42501');
RESET ROLE;

SELECT is((SELECT published FROM statesman.dispatch_once('priv-box')), 5::bigint, 'the owner delivers priv-box');
SET ROLE pgtap_sm_reader;
SELECT is((SELECT count(*) FROM public.priv_sink), 5::bigint, 'reader (granted SELECT on the target): reads the delivered messages');
SELECT throws_ok($$SELECT count(*) FROM statesman.delivered$$, '42501', NULL, 'reader: the grant does not extend to statesman.delivered: 42501');
RESET ROLE;

--
-- 5. Sink secrets
--
SELECT is((SELECT count(*) FROM statesman.outboxes WHERE sink_options::text ~ 'Secret-471'), 2::bigint,
    'the owner''s table holds both passwords (the fixture is real)');
-- A failed delivery of each: the sinks cannot connect (nothing listens on port 1).
SELECT lives_ok($$SELECT * FROM statesman.dispatch_once('priv-redis')$$, 'the redis outbox fails to deliver');
SELECT lives_ok($$SELECT * FROM statesman.dispatch_once('priv-pg')$$, 'the postgres outbox fails to deliver');
SELECT is((SELECT count(*) FROM statesman.outbox_status WHERE outbox_id IN ('priv-redis', 'priv-pg') AND last_error IS NOT NULL),
    2::bigint, 'both have a last_error');
SET ROLE pgtap_sm_monitor;
SELECT is((SELECT count(*) FROM statesman.outbox_status), 3::bigint, 'monitor (pg_monitor): reads outbox_status');
SELECT is((SELECT string_agg(s.outbox_id, ', ') FROM statesman.outbox_status s WHERE row_to_json(s)::text ~ 'Secret-471'),
    NULL, 'monitor: no row of outbox_status shows a password, in any column (last_error included)');
SELECT throws_ok($$SELECT sink_options FROM statesman.outboxes$$, '42501', NULL, 'monitor: statesman.outboxes is not readable: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.outbox_state$$, '42501', NULL, 'monitor: statesman.outbox_state is not readable: 42501');
RESET ROLE;
-- Errors while registering never echo a secret: each statement is refused with its SQLSTATE,
-- and nothing after it in the error (message, detail, hint, context) shows the password.
SELECT matches(pg_temp.error_of($$SELECT statesman.create_outbox('leak-1', sink => 'postgres',
        sink_options => '{"conninfo": "host=127.0.0.1 password=pg-Leak-1 bogus=1", "table": "public.t"}')$$),
    '^22023(?!.*Leak-1)', 'postgres sink: a conninfo that does not parse: the error does not show its password');
SELECT matches(pg_temp.error_of($$SELECT statesman.create_outbox('leak-2', sink => 'postgres',
        sink_options => '{"conninfo": "postgresql://u:pg-Leak-2@127.0.0.1:1/db?sslmode=nonsense&bogus=1", "table": "public.t"}')$$),
    '^22023(?!.*Leak-2)', 'postgres sink: a URI that does not parse: the error does not show its password');
SELECT matches(pg_temp.error_of($$SELECT statesman.create_outbox('leak-3', sink => 'redis',
        sink_options => '{"password": "redis-Leak-3", "db": -1}')$$),
    '^22023(?!.*Leak-3)', 'redis sink: another option is wrong: the error does not show the password');
SELECT matches(pg_temp.error_of($$SELECT statesman.create_outbox('leak-4', sink => 'redis',
        sink_options => '{"password": "redis-Leak-4", "timeout_ms": 60000}')$$),
    '^22023(?!.*Leak-4)', 'redis sink: timeout_ms longer than lease_ttl: the error does not show the password');
SELECT matches(pg_temp.error_of($$SELECT statesman.alter_outbox('priv-redis', sink_options => '{"password": "redis-Leak-5", "port": "six"}')$$),
    '^22023(?!.*Leak-5)', 'alter_outbox(): a wrong option next to a password: the error does not show it');
SELECT matches(pg_temp.error_of($$SELECT statesman.create_outbox('priv-redis', sink => 'redis', sink_options => '{"password": "redis-Leak-6"}')$$),
    '^23505(?!.*Leak-6)', 'create_outbox() of an existing id: the error does not show the password');
-- alter_outbox replaces the options: a grantee that points the outbox at
-- another host cannot keep the stored password (it would be sent there).
GRANT EXECUTE ON FUNCTION
    statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)
    TO pgtap_sm_ops;
SET ROLE pgtap_sm_ops;
SELECT lives_ok($$SELECT statesman.alter_outbox('priv-redis', sink_options => '{"host": "127.0.0.2", "port": 1}')$$,
    'ops: points the redis outbox at another host');
RESET ROLE;
SELECT is((SELECT sink_options ? 'password' FROM statesman.outboxes WHERE outbox_id = 'priv-redis'), false,
    '... and the stored password is gone with the old options');

--
-- 6. Hostile objects ahead of pg_catalog never capture a statesman function
--
DELETE FROM evil.captured;
-- As the owner, every function.  The statements themselves use only
-- qualified functions and operators (and concat()), so whatever is captured
-- was called inside statesman.
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT statesman.declare_root('evilroot', fingerprint => 'fp-1', content_type => 'right/type')$q$)$$, 'evil path, owner: declare_root()');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT statesman.create_outbox('evil-box', root => 'evilroot', batch_size => 2, sink_options => '{"table": "public.evil_sink"}')$q$)$$, 'evil path, owner: create_outbox() (table sink, creating its target)');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT statesman.create_outbox('evil-redis', sink => 'redis', sink_options => '{"host": "127.0.0.1", "port": 1, "key_prefix": "evil"}')$q$)$$, 'evil path, owner: create_outbox() (redis sink)');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT statesman.alter_outbox('evil-box', poll_interval => '2 seconds', sink_options => '{"table": "public.evil_sink"}')$q$)$$, 'evil path, owner: alter_outbox()');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(a1.revision, a2.revision, a3.revision, a4.revision) FROM statesman.append('evilroot', 'a', '{"v": 1}') a1, statesman.append_bytes('evilroot', 'a', '\x02', NULL) a2, statesman.append_delete('evilroot', 'b') a3, statesman.append('evilroot', 'c', '{}', partition => 'eu') a4$q$)$$, 'evil path, owner: append(), append_bytes(), append_delete()');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT statesman.sequence_feed()$q$)$$, 'evil path, owner: sequence_feed()');
SELECT is(pg_temp.under_evil($q$SELECT pg_catalog.count(*) FROM statesman.read_feed(NULL, 100, 'evilroot')$q$), '4', 'evil path, owner: read_feed()');
SELECT is(pg_temp.under_evil($q$SELECT pg_catalog.sum(published) FROM statesman.dispatch_once('evil-box')$q$), '4', 'evil path, owner: dispatch_once() delivers the 4 records');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT * FROM statesman.dispatch_once('evil-redis')$q$)$$, 'evil path, owner: dispatch_once() of a redis outbox (it fails to connect)');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(statesman.seed_cursor('evil-reader', 1), statesman.advance_cursor('evil-reader', statesman.head_position()), statesman.cursor_position('evil-reader'))$q$)$$, 'evil path, owner: seed_cursor(), advance_cursor(), cursor_position()');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(statesman.pause_outbox('evil-box'), statesman.resume_outbox('evil-box'), statesman.redeliver('evil-box'))$q$)$$, 'evil path, owner: pause_outbox(), resume_outbox(), redeliver()');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(statesman.mark_applied('evil-consumer', m.message), statesman.already_applied('evil-consumer', s.store, s.epoch, 1)) FROM statesman.read_feed(NULL, 1) m, statesman.store_info() s$q$)$$, 'evil path, owner: mark_applied(message), already_applied()');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(c.revision, h.revision, s.store, a.position, f.head_position, o.outbox_id) FROM statesman.current('evilroot', 'a') c, statesman.history('evilroot', 'a') h, statesman.store_info() s, statesman.applied_position('evil-consumer', s.store) a, statesman.feed_status f, statesman.outbox_status o$q$)$$, 'evil path, owner: current(), history(), store_info(), applied_position(), the views');
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(statesman.reset_epoch(), statesman.drop_outbox('evil-redis'))$q$)$$, 'evil path, owner: reset_epoch(), drop_outbox()');
-- As the granted writer and feed reader, and a role without grants, the documented functions.
SET ROLE pgtap_sm_writer;
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(a1.revision, a2.revision, a3.revision) FROM statesman.append('evilroot', 'n', '{"v": 2}') a1, statesman.append_bytes('evilroot', 'n', '\x03', 'x/y') a2, statesman.append_delete('evilroot', 'm') a3$q$)$$, 'evil path, writer: append(), append_bytes(), append_delete()');
SET ROLE pgtap_sm_feedreader;
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(r.message_id, c.revision, h.revision, s.store, f.head_position) FROM statesman.read_feed(NULL, 100) r, statesman.current('evilroot', 'n') c, statesman.history('evilroot', 'n') h, statesman.store_info() s, statesman.feed_status f$q$)$$, 'evil path, feed reader: read_feed(), current(), history(), store_info(), feed_status');
SET ROLE pgtap_sm_nobody;
SELECT lives_ok($$SELECT pg_temp.under_evil($q$SELECT concat(statesman.mark_applied('evil-nobody', 'f', '00000000-0000-4000-8000-000000000001', 1), statesman.already_applied('evil-nobody', 'f', '00000000-0000-4000-8000-000000000001', 1), statesman.cursor_position('evil-reader'), statesman.head_position(), statesman.address_of('evilroot', 'n'))$q$)$$, 'evil path, nobody: mark_applied(), already_applied(), cursor_position(), head_position(), address_of()');
RESET ROLE;
SELECT is((SELECT string_agg(DISTINCT what, ', ') FROM evil.captured), NULL,
    'no statesman function called any of the hostile functions, aggregates or operators');
-- And what the calls did is right: the declared envelope, the real clock, every record in the sink once.
SELECT is((SELECT string_agg(DISTINCT coalesce(content_type, '-') || '/' || coalesce(fingerprint, '-'), ',') FROM statesman.history
            WHERE root = 'evilroot' AND path IN ('a', 'c') AND operation = 'put' AND content_type IS DISTINCT FROM 'application/json'),
    'right/type/fp-1', 'append_bytes() under the evil path took the declared root''s envelope');
SELECT is((SELECT count(*) FROM statesman.history WHERE root = 'evilroot' AND occurred_at < now() - interval '1 hour'), 0::bigint,
    'every record has the real clock');
SELECT is((SELECT count(*) || '/' || count(DISTINCT message_id) FROM public.evil_sink), '4/4', 'the sink has the 4 records once');

SELECT * FROM finish();
ROLLBACK;
