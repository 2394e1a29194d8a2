-- Catalog checks: the documented functions with their argument and return types,
-- who may execute them, and how SECURITY DEFINER functions are protected.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION IF NOT EXISTS statesman;
SELECT plan(73);

SELECT has_extension('statesman', 'extension statesman is installed');
SELECT has_schema('statesman', 'schema statesman exists');

-- §2 the store
SELECT has_function('statesman', 'store_info', ARRAY[]::name[], 'store_info()');
SELECT has_function('statesman', 'set_store_name', ARRAY['text'], 'set_store_name(name text)');
SELECT has_function('statesman', 'reset_epoch', ARRAY[]::name[], 'reset_epoch()');
SELECT has_function('statesman', 'declare_root',
    ARRAY['text', 'text', 'text', 'integer', 'bigint'],
    'declare_root(root, fingerprint, content_type, max_revisions, max_bytes)');
-- The writers are checked as callable with the documented argument list: its
-- arguments, in its order, first; anything after them must have a default.
CREATE FUNCTION pg_temp.callable_with(fn name, args regtype[]) RETURNS boolean
LANGUAGE sql STABLE AS $f$
    SELECT EXISTS (
        SELECT 1 FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'statesman'::regnamespace AND p.proname = fn
           AND p.pronargs >= cardinality(args)
           AND array_to_string((p.proargtypes::regtype[])[0:cardinality(args) - 1], ',')
               = array_to_string(args, ',')
           AND p.pronargs - p.pronargdefaults <= cardinality(args))
$f$;
SELECT ok(pg_temp.callable_with('append',
    ARRAY['text', 'text', 'jsonb', 'text', 'text', 'text', 'text', 'integer', 'text', 'text',
          'text', 'jsonb', 'text', 'timestamptz', 'timestamptz']::regtype[]),
    'append(root, path, payload jsonb, partition, operation, status, value_type, schema_version, source, correlation_id, causation_id, metadata, error, fresh_until, serve_until)');
SELECT ok(pg_temp.callable_with('append_bytes',
    ARRAY['text', 'text', 'bytea', 'text', 'text', 'text', 'text', 'text', 'text', 'integer',
          'text', 'text', 'text', 'jsonb', 'text', 'timestamptz', 'timestamptz']::regtype[]),
    'append_bytes(root, path, payload bytea, content_type, serializer_id, partition, operation, status, value_type, schema_version, source, correlation_id, causation_id, metadata, error, fresh_until, serve_until)');
SELECT ok(pg_temp.callable_with('append_delete', ARRAY['text', 'text', 'text']::regtype[]),
    'append_delete(root, path, partition, ...)');
SELECT has_function('statesman', 'current', ARRAY['text', 'text', 'text'], 'current(root, path, partition)');
SELECT has_function('statesman', 'history', ARRAY['text', 'text', 'text'], 'history(root, path, partition)');

-- §3 the change feed
SELECT has_function('statesman', 'read_feed', ARRAY['bigint', 'integer', 'text'], 'read_feed(after, max_records, root)');
SELECT has_function('statesman', 'head_position', ARRAY[]::name[], 'head_position()');
SELECT has_function('statesman', 'sequence_feed', ARRAY['integer'], 'sequence_feed(max_records)');

-- §4 cursors
SELECT has_function('statesman', 'cursor_position', ARRAY['text'], 'cursor_position(outbox_id)');
SELECT has_function('statesman', 'advance_cursor', ARRAY['text', 'bigint'], 'advance_cursor(outbox_id, new_position)');
SELECT has_function('statesman', 'seed_cursor', ARRAY['text', 'bigint'], 'seed_cursor(outbox_id, at_position)');

-- §7 consumers
SELECT has_function('statesman', 'mark_applied', ARRAY['text', 'text', 'uuid', 'bigint'], 'mark_applied(consumer, feed, epoch, position)');
SELECT has_function('statesman', 'mark_applied', ARRAY['text', 'jsonb'], 'mark_applied(consumer, message)');
SELECT has_function('statesman', 'already_applied', ARRAY['text', 'text', 'uuid', 'bigint'], 'already_applied(consumer, feed, epoch, position)');
SELECT has_function('statesman', 'applied_position', ARRAY['text', 'text'], 'applied_position(consumer, feed)');

-- Return types
SELECT function_returns('statesman', 'read_feed', ARRAY['bigint', 'integer', 'text'], 'setof record', 'read_feed() returns a table');
SELECT function_returns('statesman', 'head_position', ARRAY[]::name[], 'bigint', 'head_position() returns bigint');
SELECT function_returns('statesman', 'cursor_position', ARRAY['text'], 'bigint', 'cursor_position() returns bigint');
SELECT function_returns('statesman', 'advance_cursor', ARRAY['text', 'bigint'], 'boolean', 'advance_cursor() returns boolean');
SELECT function_returns('statesman', 'seed_cursor', ARRAY['text', 'bigint'], 'bigint', 'seed_cursor() returns bigint');
SELECT function_returns('statesman', 'mark_applied', ARRAY['text', 'text', 'uuid', 'bigint'], 'boolean', 'mark_applied(4 args) returns boolean');
SELECT function_returns('statesman', 'mark_applied', ARRAY['text', 'jsonb'], 'boolean', 'mark_applied(consumer, message) returns boolean');
SELECT function_returns('statesman', 'already_applied', ARRAY['text', 'text', 'uuid', 'bigint'], 'boolean', 'already_applied() returns boolean');
SELECT function_returns('statesman', 'applied_position', ARRAY['text', 'text'], 'setof record', 'applied_position() returns a table');

-- Result columns of the table functions
SELECT results_eq(
    $$SELECT array_agg(a.name COLLATE "default" ORDER BY a.n)
        FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY a(name, mode, n)
       WHERE p.oid = 'statesman.store_info()'::regprocedure AND a.mode IN ('o', 't')$$,
    $$VALUES (ARRAY['store', 'epoch', 'head_position', 'oldest_position'])$$,
    'store_info() returns (store, epoch, head_position, oldest_position)');
SELECT results_eq(
    $$SELECT array_agg(a.name COLLATE "default" ORDER BY a.n)
        FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY a(name, mode, n)
       WHERE p.oid = 'statesman.read_feed(bigint, integer, text)'::regprocedure AND a.mode IN ('o', 't')$$,
    $$VALUES (ARRAY['global_position', 'message_id', 'address', 'revision', 'message'])$$,
    'read_feed() returns (global_position, message_id, address, revision, message)');
SELECT results_eq(
    $$SELECT array_agg(a.name COLLATE "default" ORDER BY a.n)
        FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY a(name, mode, n)
       WHERE p.proname = 'append' AND p.pronamespace = 'statesman'::regnamespace AND a.mode IN ('o', 't')$$,
    $$VALUES (ARRAY['address', 'revision'])$$,
    'append() returns (address, revision)');
SELECT results_eq(
    $$SELECT array_agg(a.name COLLATE "default" ORDER BY a.n)
        FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY a(name, mode, n)
       WHERE p.oid = 'statesman.applied_position(text, text)'::regprocedure AND a.mode IN ('o', 't')$$,
    $$VALUES (ARRAY['epoch', 'position'])$$,
    'applied_position() returns (epoch, position)');

-- Argument names are the documented ones (callers use named notation)
SELECT results_eq(
    $$SELECT p.proargnames[1:15] COLLATE "default" FROM pg_proc p WHERE p.proname = 'append' AND p.pronamespace = 'statesman'::regnamespace$$,
    $$VALUES (ARRAY['root', 'path', 'payload', 'partition', 'operation', 'status', 'value_type',
                    'schema_version', 'source', 'correlation_id', 'causation_id', 'metadata',
                    'error', 'fresh_until', 'serve_until'])$$,
    'append() argument names');
SELECT results_eq(
    $$SELECT p.proargnames[1:5] COLLATE "default" FROM pg_proc p WHERE p.proname = 'append_bytes' AND p.pronamespace = 'statesman'::regnamespace$$,
    $$VALUES (ARRAY['root', 'path', 'payload', 'content_type', 'serializer_id'])$$,
    'append_bytes() argument names');
SELECT results_eq(
    $$SELECT p.proargnames[1:5] COLLATE "default" FROM pg_proc p WHERE p.oid = 'statesman.declare_root(text, text, text, integer, bigint)'::regprocedure$$,
    $$VALUES (ARRAY['root', 'fingerprint', 'content_type', 'max_revisions', 'max_bytes'])$$,
    'declare_root() argument names');
SELECT results_eq(
    $$SELECT p.proargnames[1:3] COLLATE "default" FROM pg_proc p WHERE p.oid = 'statesman.read_feed(bigint, integer, text)'::regprocedure$$,
    $$VALUES (ARRAY['after', 'max_records', 'root'])$$,
    'read_feed() argument names');
SELECT results_eq(
    $$SELECT p.proargnames COLLATE "default" FROM pg_proc p WHERE p.oid = 'statesman.seed_cursor(text, bigint)'::regprocedure$$,
    $$VALUES (ARRAY['outbox_id', 'at_position'])$$,
    'seed_cursor() argument names');
SELECT results_eq(
    $$SELECT p.proargnames COLLATE "default" FROM pg_proc p WHERE p.oid = 'statesman.advance_cursor(text, bigint)'::regprocedure$$,
    $$VALUES (ARRAY['outbox_id', 'new_position'])$$,
    'advance_cursor() argument names');

-- Functions that change store names, epochs, roots or cursors are not executable by PUBLIC
SELECT function_privs_are('statesman', 'set_store_name', ARRAY['text'], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute set_store_name()');
SELECT function_privs_are('statesman', 'reset_epoch', ARRAY[]::name[], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute reset_epoch()');
SELECT function_privs_are('statesman', 'declare_root', ARRAY['text', 'text', 'text', 'integer', 'bigint'],
    'public', ARRAY[]::text[], 'PUBLIC cannot execute declare_root()');
SELECT function_privs_are('statesman', 'seed_cursor', ARRAY['text', 'bigint'], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute seed_cursor()');
SELECT function_privs_are('statesman', 'advance_cursor', ARRAY['text', 'bigint'], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute advance_cursor()');

-- Writing the ledger and reading its payloads are not for PUBLIC (docs/operations.md "Privileges")
SELECT function_privs_are('statesman', 'read_feed', ARRAY['bigint', 'integer', 'text'], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute read_feed()');
SELECT function_privs_are('statesman', 'history', ARRAY['text', 'text', 'text'], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute history()');
SELECT function_privs_are('statesman', 'current', ARRAY['text', 'text', 'text'], 'public', ARRAY[]::text[],
    'PUBLIC cannot execute current()');
SELECT is_empty($$SELECT p.oid FROM pg_proc p WHERE p.pronamespace = 'statesman'::regnamespace
                   AND p.proname IN ('append', 'append_bytes', 'append_delete')
                   AND has_function_privilege('public', p.oid, 'EXECUTE')$$,
    'PUBLIC cannot execute append(), append_bytes() or append_delete()');

-- Head, cursors and consumer positions are open to PUBLIC
SELECT function_privs_are('statesman', 'head_position', ARRAY[]::name[], 'public', ARRAY['EXECUTE'],
    'PUBLIC can execute head_position()');
SELECT function_privs_are('statesman', 'store_info', ARRAY[]::name[], 'public', ARRAY['EXECUTE'],
    'PUBLIC can execute store_info()');
SELECT function_privs_are('statesman', 'cursor_position', ARRAY['text'], 'public', ARRAY['EXECUTE'],
    'PUBLIC can execute cursor_position()');
SELECT function_privs_are('statesman', 'mark_applied', ARRAY['text', 'jsonb'], 'public', ARRAY['EXECUTE'],
    'PUBLIC can execute mark_applied(consumer, message)');
SELECT function_privs_are('statesman', 'already_applied', ARRAY['text', 'text', 'uuid', 'bigint'], 'public', ARRAY['EXECUTE'],
    'PUBLIC can execute already_applied()');
SELECT function_privs_are('statesman', 'applied_position', ARRAY['text', 'text'], 'public', ARRAY['EXECUTE'],
    'PUBLIC can execute applied_position()');

-- The tables are not readable by PUBLIC
SELECT table_privs_are('statesman', 'store', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.store');
SELECT table_privs_are('statesman', 'roots', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.roots');
SELECT table_privs_are('statesman', 'history', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.history');
SELECT table_privs_are('statesman', 'cursors', 'public', ARRAY[]::text[], 'PUBLIC has no privileges on statesman.cursors');
-- statesman.applied: every role keeps its own consumers' positions (row-level security)
SELECT table_privs_are('statesman', 'applied', 'public', ARRAY['INSERT', 'SELECT'],
    'PUBLIC may read statesman.applied and insert into it');
SELECT is((SELECT relrowsecurity FROM pg_class WHERE oid = 'statesman.applied'::regclass), true,
    'statesman.applied has row-level security');

-- SECURITY DEFINER functions pin a safe search_path
SELECT cmp_ok(
    (SELECT count(*) FROM pg_proc WHERE pronamespace = 'statesman'::regnamespace AND prosecdef),
    '>', 0::bigint, 'there are SECURITY DEFINER functions to check');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text
        FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.prosecdef
         AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search_path=%')$$,
    'every SECURITY DEFINER function sets search_path');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text || ' ' || c
        FROM pg_proc p, unnest(p.proconfig) c
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.prosecdef
         AND c LIKE 'search_path=%'
         AND (c ~* '(public|\$user)' OR c !~ 'pg_temp"?$')$$,
    'no SECURITY DEFINER search_path names public or $user, and pg_temp comes last');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text
        FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace AND p.prosecdef
         AND has_function_privilege('public', p.oid, 'EXECUTE')
         AND p.proowner <> (SELECT extowner FROM pg_extension WHERE extname = 'statesman')$$,
    'SECURITY DEFINER functions callable by PUBLIC are owned by the extension owner');

-- Every function in the schema belongs to the extension
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text
        FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND NOT EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                            AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e')$$,
    'every function in schema statesman is a member of the extension');

-- The schema is created by the extension and cannot be written by PUBLIC
SELECT schema_privs_are('statesman', 'public', ARRAY['USAGE'], 'PUBLIC may only use schema statesman');

-- Volatility: writers and feed readers are VOLATILE, the position readers are not IMMUTABLE
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND p.proname IN ('append', 'append_bytes', 'append_delete') AND p.provolatile <> 'v'$$,
    'the writers are volatile');
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p
       WHERE p.pronamespace = 'statesman'::regnamespace
         AND p.proname IN ('append', 'append_bytes', 'append_delete') AND NOT p.proretset$$,
    'the writers return a set (address, revision)');
SELECT volatility_is('statesman', 'read_feed', ARRAY['bigint', 'integer', 'text'], 'volatile',
    'read_feed() is volatile (it may sequence on demand)');
SELECT volatility_is('statesman', 'advance_cursor', ARRAY['text', 'bigint'], 'volatile', 'advance_cursor() is volatile');
SELECT volatility_is('statesman', 'mark_applied', ARRAY['text', 'jsonb'], 'volatile', 'mark_applied() is volatile');
SELECT isnt(
    (SELECT provolatile FROM pg_proc WHERE oid = 'statesman.head_position()'::regprocedure),
    'i'::"char", 'head_position() is not immutable');

SELECT * FROM finish();
ROLLBACK;
