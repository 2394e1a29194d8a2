-- Outbox catalog checks (docs/design.md §4, §8): the registration API with the documented
-- signatures and defaults, who may execute it and the delivery internals, who
-- may read the outbox tables, the columns of outbox_status and dead_letters.
-- Everything is rolled back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS statesman;
SELECT plan(111);

-- The argument list of a function as PostgreSQL prints it, defaults included.
CREATE FUNCTION pg_temp.args(fn regprocedure) RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT pg_catalog.pg_get_function_arguments(fn) $$;

--
-- Signatures (docs/design.md §4 "Registration", "Running it")
--
SELECT has_function('statesman', 'create_outbox',
    ARRAY['text', 'text', 'jsonb', 'text', 'integer', 'interval', 'boolean', 'interval', 'interval',
          'interval', 'interval', 'integer', 'text', 'text', 'boolean'],
    'create_outbox(outbox_id, sink, sink_options, root, batch_size, poll_interval, require_lease, lease_ttl, lease_renew_interval, min_retry_delay, max_retry_delay, skip_poison_after_attempts, fingerprint, payload_content_type, enabled)');
SELECT has_function('statesman', 'alter_outbox',
    ARRAY['text', 'text', 'jsonb', 'text', 'integer', 'interval', 'boolean', 'interval', 'interval',
          'interval', 'interval', 'integer', 'text', 'text', 'boolean'],
    'alter_outbox(outbox_id, <the same options>)');
SELECT has_function('statesman', 'drop_outbox', ARRAY['text'], 'drop_outbox(outbox_id)');
SELECT has_function('statesman', 'pause_outbox', ARRAY['text'], 'pause_outbox(outbox_id)');
SELECT has_function('statesman', 'resume_outbox', ARRAY['text'], 'resume_outbox(outbox_id)');
SELECT has_function('statesman', 'redeliver', ARRAY['text', 'text'], 'redeliver(outbox_id, message_id)');
SELECT has_function('statesman', 'dispatch_once', ARRAY['text'], 'dispatch_once(outbox_id)');
-- One function of each name: no overload that makes named calls ambiguous.
SELECT is_empty(
    $$SELECT p.proname FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND p.proname IN ('create_outbox', 'alter_outbox', 'drop_outbox', 'pause_outbox',
                           'resume_outbox', 'redeliver', 'dispatch_once')
       GROUP BY p.proname HAVING count(*) > 1$$,
    'the outbox functions have no overloads');

-- Argument names and defaults, exactly as docs/design.md §4 writes them.
SELECT is(pg_temp.args('statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)'::regprocedure),
    'outbox_id text, sink text DEFAULT ''table''::text, sink_options jsonb DEFAULT ''{}''::jsonb, '
    'root text DEFAULT NULL::text, batch_size integer DEFAULT 1000, '
    'poll_interval interval DEFAULT ''00:00:01''::interval, require_lease boolean DEFAULT true, '
    'lease_ttl interval DEFAULT ''00:00:30''::interval, lease_renew_interval interval DEFAULT NULL::interval, '
    'min_retry_delay interval DEFAULT ''00:00:00.2''::interval, '
    'max_retry_delay interval DEFAULT ''00:00:15''::interval, '
    'skip_poison_after_attempts integer DEFAULT NULL::integer, fingerprint text DEFAULT NULL::text, '
    'payload_content_type text DEFAULT NULL::text, enabled boolean DEFAULT true',
    'create_outbox() arguments and defaults are the documented ones');
-- alter_outbox takes the same named options, all defaulting to NULL ("unchanged").
SELECT is(
    (SELECT p.proargnames COLLATE "default" FROM pg_proc p WHERE p.oid = 'statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)'::regprocedure),
    (SELECT p.proargnames COLLATE "default" FROM pg_proc p WHERE p.oid = 'statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)'::regprocedure),
    'alter_outbox() has create_outbox()''s argument names, in the same order');
SELECT is(pg_temp.args('statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)'::regprocedure),
    'outbox_id text, sink text DEFAULT NULL::text, sink_options jsonb DEFAULT NULL::jsonb, '
    'root text DEFAULT NULL::text, batch_size integer DEFAULT NULL::integer, '
    'poll_interval interval DEFAULT NULL::interval, require_lease boolean DEFAULT NULL::boolean, '
    'lease_ttl interval DEFAULT NULL::interval, lease_renew_interval interval DEFAULT NULL::interval, '
    'min_retry_delay interval DEFAULT NULL::interval, max_retry_delay interval DEFAULT NULL::interval, '
    'skip_poison_after_attempts integer DEFAULT NULL::integer, fingerprint text DEFAULT NULL::text, '
    'payload_content_type text DEFAULT NULL::text, enabled boolean DEFAULT NULL::boolean',
    'alter_outbox(): outbox_id required, every option defaults to NULL');
SELECT is(pg_temp.args('statesman.drop_outbox(text)'::regprocedure), 'outbox_id text', 'drop_outbox(outbox_id text)');
SELECT is(pg_temp.args('statesman.pause_outbox(text)'::regprocedure), 'outbox_id text', 'pause_outbox(outbox_id text)');
SELECT is(pg_temp.args('statesman.resume_outbox(text)'::regprocedure), 'outbox_id text', 'resume_outbox(outbox_id text)');
SELECT is(pg_temp.args('statesman.redeliver(text, text)'::regprocedure), 'outbox_id text, message_id text DEFAULT NULL::text',
    'redeliver(outbox_id text, message_id text DEFAULT NULL)');
SELECT is(pg_temp.args('statesman.dispatch_once(text)'::regprocedure), 'outbox_id text', 'dispatch_once(outbox_id text)');
SELECT is(pg_catalog.pg_get_function_result('statesman.dispatch_once(text)'::regprocedure),
    'TABLE(published bigint, skipped bigint, deduplicated bigint, cursor_position bigint)',
    'dispatch_once() returns TABLE(published bigint, skipped bigint, deduplicated bigint, cursor_position bigint)');
-- §4 cursors, as far as outboxes use them.
SELECT is(pg_temp.args('statesman.cursor_position(text)'::regprocedure), 'outbox_id text', 'cursor_position(outbox_id text)');
SELECT function_returns('statesman', 'cursor_position', ARRAY['text'], 'bigint', 'cursor_position() returns bigint');
SELECT is(pg_temp.args('statesman.seed_cursor(text, bigint)'::regprocedure), 'outbox_id text, at_position bigint DEFAULT NULL::bigint',
    'seed_cursor(outbox_id text, at_position bigint DEFAULT NULL)');
SELECT function_returns('statesman', 'seed_cursor', ARRAY['text', 'bigint'], 'bigint', 'seed_cursor() returns bigint');
SELECT function_returns('statesman', 'advance_cursor', ARRAY['text', 'bigint'], 'boolean', 'advance_cursor() returns boolean');
-- Volatility: every outbox function changes something.
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND p.proname IN ('create_outbox', 'alter_outbox', 'drop_outbox', 'pause_outbox',
                           'resume_outbox', 'redeliver', 'dispatch_once') AND p.provolatile <> 'v'$$,
    'the outbox functions are volatile');

--
-- Nothing that changes outboxes, cursors or leases is executable by PUBLIC
-- (docs/design.md §8), nor by a role that was granted nothing.
--
CREATE ROLE pgtap_statesman_nobody;
CREATE TEMP TABLE outbox_functions (fn regprocedure PRIMARY KEY);
INSERT INTO outbox_functions VALUES
    ('statesman.create_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)'),
    ('statesman.alter_outbox(text, text, jsonb, text, integer, interval, boolean, interval, interval, interval, interval, integer, text, text, boolean)'),
    ('statesman.drop_outbox(text)'),
    ('statesman.pause_outbox(text)'),
    ('statesman.resume_outbox(text)'),
    ('statesman.redeliver(text, text)'),
    ('statesman.dispatch_once(text)'),
    ('statesman.seed_cursor(text, bigint)'),
    ('statesman.advance_cursor(text, bigint)'),
    ('statesman.sequence_feed(integer)');
-- The internal functions that act on outboxes, cursors, leases, dead letters or retention.
CREATE TEMP TABLE internal_functions (name text PRIMARY KEY);
INSERT INTO internal_functions VALUES
    ('_check_sink'), ('_outbox_for_update'), ('_acquire_lease'), ('_renew_lease'),
    ('_release_lease'), ('_expire_stuck_lease'), ('_note_dispatcher'), ('_note_failure'),
    ('_deliver_table_page'), ('_park_page'), ('_redeliver_table_page'), ('_prune'),
    ('_prune_deferred');

SELECT function_privs_are('statesman', 'create_outbox',
    ARRAY['text', 'text', 'jsonb', 'text', 'integer', 'interval', 'boolean', 'interval', 'interval',
          'interval', 'interval', 'integer', 'text', 'text', 'boolean'],
    'public', ARRAY[]::text[], 'PUBLIC cannot execute create_outbox()');
SELECT function_privs_are('statesman', 'alter_outbox',
    ARRAY['text', 'text', 'jsonb', 'text', 'integer', 'interval', 'boolean', 'interval', 'interval',
          'interval', 'interval', 'integer', 'text', 'text', 'boolean'],
    'public', ARRAY[]::text[], 'PUBLIC cannot execute alter_outbox()');
SELECT function_privs_are('statesman', 'drop_outbox', ARRAY['text'], 'public', ARRAY[]::text[], 'PUBLIC cannot execute drop_outbox()');
SELECT function_privs_are('statesman', 'pause_outbox', ARRAY['text'], 'public', ARRAY[]::text[], 'PUBLIC cannot execute pause_outbox()');
SELECT function_privs_are('statesman', 'resume_outbox', ARRAY['text'], 'public', ARRAY[]::text[], 'PUBLIC cannot execute resume_outbox()');
SELECT function_privs_are('statesman', 'redeliver', ARRAY['text', 'text'], 'public', ARRAY[]::text[], 'PUBLIC cannot execute redeliver()');
SELECT function_privs_are('statesman', 'dispatch_once', ARRAY['text'], 'public', ARRAY[]::text[], 'PUBLIC cannot execute dispatch_once()');
SELECT is_empty(
    $$SELECT fn::text FROM outbox_functions
       WHERE has_function_privilege('pgtap_statesman_nobody', fn, 'EXECUTE')$$,
    'a role without grants can execute none of the outbox and cursor functions');
SELECT is(
    (SELECT count(*) FROM internal_functions i
       JOIN pg_proc p ON p.proname = i.name AND p.pronamespace = 'statesman'::regnamespace),
    (SELECT count(*) FROM internal_functions),
    'the delivery internals under test exist');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM internal_functions i
       JOIN pg_proc p ON p.proname = i.name AND p.pronamespace = 'statesman'::regnamespace
       WHERE has_function_privilege('pgtap_statesman_nobody', p.oid, 'EXECUTE')$$,
    'a role without grants can execute none of the delivery internals');
-- Whatever else may come: a volatile function whose body writes or locks the
-- outbox tables is not for PUBLIC.
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.provolatile = 'v'
         AND p.prosrc ~ 'statesman\.(outboxes|outbox_state|leases|dead_letters|cursors|prune_pending)'
         AND has_function_privilege('public', p.oid, 'EXECUTE')$$,
    'no volatile function on the outbox tables is executable by PUBLIC');

-- The tables are the extension owner's only: sink options may hold secrets.
SELECT table_privs_are('statesman', 'outboxes', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.outboxes');
SELECT table_privs_are('statesman', 'outbox_state', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.outbox_state');
SELECT table_privs_are('statesman', 'leases', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.leases');
SELECT table_privs_are('statesman', 'dead_letters', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.dead_letters');
SELECT table_privs_are('statesman', 'prune_pending', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.prune_pending');
SELECT table_privs_are('statesman', 'delivered', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.delivered');
SELECT table_privs_are('statesman', 'outbox_status', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.outbox_status');
SELECT is(
    (SELECT c.relacl IS NULL OR NOT EXISTS (
                SELECT FROM aclexplode(c.relacl) a
                 WHERE a.grantee <> c.relowner)
       FROM pg_class c WHERE c.oid = 'statesman.outboxes'::regclass),
    true, 'nobody but its owner has any privilege on statesman.outboxes');
SELECT is(
    (SELECT c.relowner FROM pg_class c WHERE c.oid = 'statesman.outboxes'::regclass),
    (SELECT e.extowner FROM pg_extension e WHERE e.extname = 'statesman'),
    'statesman.outboxes belongs to the extension owner');

-- The same, acted out by a role without grants.
SET ROLE pgtap_statesman_nobody;
SELECT throws_ok($$SELECT count(*) FROM statesman.outboxes$$, '42501', NULL, 'statesman.outboxes is not readable: 42501');
SELECT throws_ok($$SELECT sink_options FROM statesman.outboxes$$, '42501', NULL, 'sink_options are not readable: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.outbox_state$$, '42501', NULL, 'statesman.outbox_state is not readable: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.leases$$, '42501', NULL, 'statesman.leases is not readable: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.dead_letters$$, '42501', NULL, 'statesman.dead_letters is not readable: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.delivered$$, '42501', NULL, 'statesman.delivered is not readable: 42501');
SELECT throws_ok($$SELECT count(*) FROM statesman.outbox_status$$, '42501', NULL, 'statesman.outbox_status is not readable: 42501');
SELECT throws_ok($$SELECT statesman.create_outbox('pgtap-intruder')$$, '42501', NULL, 'create_outbox() is refused: 42501');
SELECT throws_ok($$SELECT statesman.alter_outbox('pgtap-intruder', batch_size => 1)$$, '42501', NULL, 'alter_outbox() is refused: 42501');
SELECT throws_ok($$SELECT statesman.drop_outbox('pgtap-intruder')$$, '42501', NULL, 'drop_outbox() is refused: 42501');
SELECT throws_ok($$SELECT statesman.pause_outbox('pgtap-intruder')$$, '42501', NULL, 'pause_outbox() is refused: 42501');
SELECT throws_ok($$SELECT statesman.resume_outbox('pgtap-intruder')$$, '42501', NULL, 'resume_outbox() is refused: 42501');
SELECT throws_ok($$SELECT statesman.redeliver('pgtap-intruder')$$, '42501', NULL, 'redeliver() is refused: 42501');
SELECT throws_ok($$SELECT * FROM statesman.dispatch_once('pgtap-intruder')$$, '42501', NULL, 'dispatch_once() is refused: 42501');
SELECT throws_ok($$SELECT statesman._acquire_lease('pgtap-intruder')$$, '42501', NULL, '_acquire_lease() is refused: 42501');
SELECT throws_ok($$SELECT statesman._deliver_table_page('pgtap-intruder')$$, '42501', NULL, '_deliver_table_page() is refused: 42501');
SELECT throws_ok($$SELECT statesman._park_page('pgtap-intruder', 'x', 1, 1)$$, '42501', NULL, '_park_page() is refused: 42501');
SELECT throws_ok($$SELECT statesman._prune_deferred()$$, '42501', NULL, '_prune_deferred() is refused: 42501');
RESET ROLE;

--
-- SECURITY DEFINER outbox functions pin search_path to pg_catalog, pg_temp.
--
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.prosecdef
         AND p.proname IN ('create_outbox', 'alter_outbox', 'drop_outbox', 'pause_outbox',
                           'resume_outbox', 'redeliver', 'dispatch_once', 'seed_cursor', 'advance_cursor')
         AND NOT 'search_path=pg_catalog, pg_temp' = ANY (COALESCE(p.proconfig, '{}'))$$,
    'every SECURITY DEFINER outbox function sets search_path = pg_catalog, pg_temp');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.prosecdef
         AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')$$,
    'every SECURITY DEFINER function of the extension sets search_path');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM internal_functions i
       JOIN pg_proc p ON p.proname = i.name AND p.pronamespace = 'statesman'::regnamespace
       WHERE p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
         AND NOT EXISTS (SELECT FROM unnest(p.proconfig) c WHERE c = 'search_path=pg_catalog, pg_temp')$$,
    'the SQL delivery internals set search_path = pg_catalog, pg_temp');

--
-- statesman.outbox_status: every column of docs/design.md §4.8; nothing from sink_options.
--
SELECT has_view('statesman', 'outbox_status', 'view statesman.outbox_status exists');
SELECT has_column('statesman', 'outbox_status', 'outbox_id', 'outbox_status.outbox_id');
SELECT has_column('statesman', 'outbox_status', 'sink', 'outbox_status.sink');
SELECT has_column('statesman', 'outbox_status', 'enabled', 'outbox_status.enabled');
SELECT has_column('statesman', 'outbox_status', 'state', 'outbox_status.state');
SELECT has_column('statesman', 'outbox_status', 'cursor_position', 'outbox_status.cursor_position');
SELECT has_column('statesman', 'outbox_status', 'head_position', 'outbox_status.head_position');
SELECT has_column('statesman', 'outbox_status', 'lag_records', 'outbox_status.lag_records');
SELECT has_column('statesman', 'outbox_status', 'lag_seconds', 'outbox_status.lag_seconds');
SELECT has_column('statesman', 'outbox_status', 'leader_pid', 'outbox_status.leader_pid');
SELECT has_column('statesman', 'outbox_status', 'lease_renewed_at', 'outbox_status.lease_renewed_at');
SELECT has_column('statesman', 'outbox_status', 'attempts', 'outbox_status.attempts');
SELECT has_column('statesman', 'outbox_status', 'last_error', 'outbox_status.last_error');
SELECT has_column('statesman', 'outbox_status', 'last_error_at', 'outbox_status.last_error_at');
SELECT has_column('statesman', 'outbox_status', 'published_total', 'outbox_status.published_total');
SELECT has_column('statesman', 'outbox_status', 'deduplicated_total', 'outbox_status.deduplicated_total');
SELECT has_column('statesman', 'outbox_status', 'skipped_total', 'outbox_status.skipped_total');
-- The documented columns come first, in their order.
SELECT results_eq(
    $$SELECT array_agg(a.attname::text COLLATE "default" ORDER BY a.attnum) FILTER (WHERE a.attnum <= 16)
        FROM pg_attribute a WHERE a.attrelid = 'statesman.outbox_status'::regclass AND a.attnum > 0$$,
    $$VALUES (ARRAY['outbox_id', 'sink', 'enabled', 'state', 'cursor_position', 'head_position',
                    'lag_records', 'lag_seconds', 'leader_pid', 'lease_renewed_at', 'attempts',
                    'last_error', 'last_error_at', 'published_total', 'deduplicated_total',
                    'skipped_total'])$$,
    'outbox_status starts with the documented columns in the documented order');
SELECT col_type_is('statesman', 'outbox_status', 'cursor_position', 'bigint', 'outbox_status.cursor_position is bigint');
SELECT col_type_is('statesman', 'outbox_status', 'head_position', 'bigint', 'outbox_status.head_position is bigint');
SELECT col_type_is('statesman', 'outbox_status', 'leader_pid', 'integer', 'outbox_status.leader_pid is integer');
SELECT col_type_is('statesman', 'outbox_status', 'lease_renewed_at', 'timestamp with time zone', 'outbox_status.lease_renewed_at is timestamptz');
SELECT col_type_is('statesman', 'outbox_status', 'last_error_at', 'timestamp with time zone', 'outbox_status.last_error_at is timestamptz');
SELECT col_type_is('statesman', 'outbox_status', 'published_total', 'bigint', 'outbox_status.published_total is bigint');
SELECT hasnt_column('statesman', 'outbox_status', 'sink_options', 'outbox_status has no sink_options column');
-- No column of the view is computed from outboxes.sink_options: a view records a
-- dependency on every table column it uses.
SELECT isnt_empty(
    $$SELECT d.refobjsubid FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
       WHERE d.classid = 'pg_rewrite'::regclass AND r.ev_class = 'statesman.outbox_status'::regclass
         AND d.refclassid = 'pg_class'::regclass AND d.refobjid = 'statesman.outboxes'::regclass
         AND d.refobjsubid = (SELECT a.attnum FROM pg_attribute a
                               WHERE a.attrelid = 'statesman.outboxes'::regclass AND a.attname = 'sink')$$,
    'outbox_status records its use of outboxes.sink (so the next check means something)');
SELECT is_empty(
    $$SELECT d.refobjsubid FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
       WHERE d.classid = 'pg_rewrite'::regclass AND r.ev_class = 'statesman.outbox_status'::regclass
         AND d.refclassid = 'pg_class'::regclass AND d.refobjid = 'statesman.outboxes'::regclass
         AND d.refobjsubid = (SELECT a.attnum FROM pg_attribute a
                               WHERE a.attrelid = 'statesman.outboxes'::regclass AND a.attname = 'sink_options')$$,
    'outbox_status does not use outboxes.sink_options');
SELECT is_empty(
    $$SELECT a.attname FROM pg_attribute a
       WHERE a.attrelid = 'statesman.outbox_status'::regclass AND a.attnum > 0
         AND a.atttypid IN ('json'::regtype, 'jsonb'::regtype)$$,
    'outbox_status has no JSON column that could carry options');
-- With an outbox whose options name a distinctive table, no value of its status row shows it.
SELECT lives_ok($$SELECT statesman.create_outbox('pgtap-status', sink_options => '{"table": "public.pgtap_secret_target_x9"}')$$,
    'an outbox with a distinctive sink table');
SELECT is_empty(
    $$SELECT s.outbox_id FROM statesman.outbox_status s
       WHERE s.outbox_id = 'pgtap-status' AND to_jsonb(s)::text LIKE '%secret_target_x9%'$$,
    'its outbox_status row does not show its sink options');
SELECT results_eq(
    $$SELECT sink, enabled, state, cursor_position, attempts, last_error, published_total,
             deduplicated_total, skipped_total
        FROM statesman.outbox_status WHERE outbox_id = 'pgtap-status'$$,
    $$VALUES ('table'::text, true, 'idle'::text, NULL::bigint, 0, NULL::text, 0::bigint, 0::bigint, 0::bigint)$$,
    'a new outbox: idle, no cursor, no failures, nothing delivered');

--
-- statesman.dead_letters: the documented columns.
--
SELECT has_table('statesman', 'dead_letters', 'table statesman.dead_letters exists');
SELECT col_type_is('statesman', 'dead_letters', 'outbox_id', 'text', 'dead_letters.outbox_id is text');
SELECT col_type_is('statesman', 'dead_letters', 'global_position', 'bigint', 'dead_letters.global_position is bigint');
SELECT col_type_is('statesman', 'dead_letters', 'message_id', 'text', 'dead_letters.message_id is text');
SELECT col_type_is('statesman', 'dead_letters', 'message', 'jsonb', 'dead_letters.message is jsonb');
SELECT col_type_is('statesman', 'dead_letters', 'last_error', 'text', 'dead_letters.last_error is text');
SELECT col_type_is('statesman', 'dead_letters', 'attempts', 'integer', 'dead_letters.attempts is integer');
SELECT col_type_is('statesman', 'dead_letters', 'parked_at', 'timestamp with time zone', 'dead_letters.parked_at is timestamptz');
SELECT col_is_null('statesman', 'dead_letters', 'message', 'dead_letters.message may be NULL (a record whose message cannot be built)');
-- Dropping an outbox drops its dead letters.
SELECT fk_ok('statesman', 'dead_letters', 'outbox_id', 'statesman', 'outboxes', 'outbox_id',
    'dead_letters.outbox_id references outboxes');

--
-- The table sink's default target (docs/design.md §6).
--
SELECT has_table('statesman', 'delivered', 'table statesman.delivered exists');
SELECT col_is_pk('statesman', 'delivered', 'message_id', 'delivered.message_id is the primary key');
SELECT col_type_is('statesman', 'delivered', 'global_position', 'bigint', 'delivered.global_position is bigint');
SELECT col_type_is('statesman', 'delivered', 'message', 'jsonb', 'delivered.message is jsonb');
SELECT col_type_is('statesman', 'delivered', 'published_at', 'timestamp with time zone', 'delivered.published_at is timestamptz');
SELECT col_default_is('statesman', 'delivered', 'published_at', 'now()', 'delivered.published_at defaults to now()');

SELECT * FROM finish();
ROLLBACK;
